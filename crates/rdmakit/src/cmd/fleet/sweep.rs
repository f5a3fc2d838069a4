//! `rdmakit fleet sweep`: one doctor per node as one Slurm job step.

use std::path::PathBuf;
use std::time::Duration;

use rdmakit_fleet::slurm::run::{self, Event, SweepRequest};
use rdmakit_report::progress::Progress;
use rdmakit_vocab::exit::Exit;

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

pub fn run(a: Args) -> anyhow::Result<Exit> {
    let req = SweepRequest {
        partition: a.partition.clone(),
        nodelist: a.nodelist.clone(),
        output: a.output.clone(),
        bundles: a.bundles,
        timeout: a.timeout,
        rdmakit: a.rdmakit.clone(),
        doctor_args: a.doctor_args.clone(),
    };
    let mut bar = Progress::hidden();
    let mut on = |e: Event| match e {
        Event::Planned(n) => {
            let t = "{spinner} {pos}/{len} nodes reported {elapsed} {wide_msg}";
            bar = Progress::new(t, Some(n as u64), Duration::ZERO, n > 0);
        }
        Event::Progress { reported, .. } => bar.position(reported as u64, None),
        Event::Srun(m) => bar.message(m),
        Event::TimedOut => bar.message(format!("timeout ({} s): stopping srun", a.timeout)),
        Event::Ran => bar = Progress::hidden(),
    };
    let s = run::sweep(
        &req,
        &|| a.report.options(),
        &std::env::current_exe,
        &mut on,
    )?;
    a.report.emit(&s.report, Some(&s.json), Some(s.summary))
}
