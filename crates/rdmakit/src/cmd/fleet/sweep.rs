//! `rdmakit fleet sweep`: one doctor per node as one Slurm job step.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use rdmakit_fleet::slurm::run::{self, Commands, Event, SweepSpec};

use rdmakit_report::progress::Progress;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The partition to sweep (default: the default partition's nodes).
    #[arg(short, long, value_name = "P")]
    partition: Option<String>,
    /// The nodes to sweep, a Slurm hostlist: n[1-12],gpu7.
    #[arg(short = 'w', long, value_name = "LIST")]
    nodelist: Option<String>,
    /// Where to keep the evidence: srun.out/srun.err (the raw lines), reports.jsonl (one
    /// report per line, for `rdmakit fleet report`), sweep.json, fleet.json, bundles/
    /// [default: ./rdmakit-sweep-<unix time>].
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Also bring back each node's bundle of everything its doctor read (bundles/NODE.json.gz).
    #[arg(long)]
    bundles: bool,
    /// Seconds to wait for every report; a node still silent then is missing (hung).
    #[arg(long, value_name = "S", default_value_t = 60)]
    timeout: u64,
    #[command(flatten)]
    report: super::ReportArgs,
    /// rdmakit's path on the nodes [default: this binary's path].
    #[arg(long, value_name = "PATH")]
    rdmakit: Option<String>,
    /// More doctor arguments for every node, after `--` (e.g. -- --fail-on warning).
    /// Active probes run only with -- --probe.
    #[arg(last = true, value_name = "DOCTOR_ARGS")]
    doctor_args: Vec<String>,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(a.timeout > 0, "--timeout must be at least 1 second");
    let rdmakit = match a.rdmakit {
        Some(p) => p,
        None => std::env::current_exe()
            .context("finding this binary's path (pass --rdmakit PATH)")?
            .display()
            .to_string(),
    };
    let spec = SweepSpec {
        partition: a.partition.clone(),
        nodelist: a.nodelist.clone(),
        rdmakit,
        doctor_args: run::doctor_args(&a.doctor_args),
        bundles: a.bundles,
        timeout: Duration::from_secs(a.timeout),
    };
    // Read before the sweep: a bad --baseline or --expect should not cost one.
    let opts = a.report.options()?;
    let cmds = Commands::default();
    let plan = run::plan(&cmds, &spec)?;
    let dir = a.output.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from(format!("rdmakit-sweep-{t}"))
    });

    let bar = Progress::new(
        "{spinner} {pos}/{len} nodes reported {elapsed} {wide_msg}",
        Some(plan.run.len() as u64),
        Duration::ZERO,
        !plan.run.is_empty(),
    );
    let mut on_event = |e: Event| match e {
        Event::Progress { reported, .. } => bar.position(reported as u64, None),
        Event::Srun(m) => bar.message(m),
        Event::TimedOut => bar.message(format!("timeout ({} s): stopping srun", a.timeout)),
    };
    let swept = run::execute(&cmds, plan, spec.timeout, &mut on_event)?;
    drop(bar);

    let (report, json) = run::write_report(&dir, &swept, &opts)?;
    a.report
        .emit(&report, Some(&json), Some(swept.summary(&dir)))
}
