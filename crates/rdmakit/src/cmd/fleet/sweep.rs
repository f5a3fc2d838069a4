//! `rdmakit fleet sweep`: one doctor per node as one Slurm job step.

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use rdmakit_fleet::slurm::run::{self, Commands, Event, SweepSpec};
use rdmakit_fleet::slurm::sweep::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The partition to sweep (default: the default partition's nodes).
    #[arg(short, long, value_name = "P")]
    partition: Option<String>,
    /// The nodes to sweep, a Slurm hostlist: n[1-12],gpu7.
    #[arg(short = 'w', long, value_name = "LIST")]
    nodelist: Option<String>,
    /// Where to keep the evidence: srun.out/srun.err (the raw lines), reports.jsonl (one
    /// report per line, for `rdmakit fleet report`), sweep.json, bundles/
    /// [default: ./rdmakit-sweep-<unix time>].
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Also bring back each node's bundle of everything its doctor read (bundles/NODE.json.gz).
    #[arg(long)]
    bundles: bool,
    /// Seconds to wait for every report; a node still silent then is missing (hung).
    #[arg(long, value_name = "S", default_value_t = 60)]
    timeout: u64,
    /// Print the result as JSON (schema rdmakit.sweep/v1).
    #[arg(long)]
    json: bool,
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
    let mut doctor_args = a.doctor_args.clone();
    if !doctor_args
        .iter()
        .any(|d| d == "--probe" || d == "--no-probe")
    {
        doctor_args.insert(0, "--no-probe".into());
    }
    let spec = SweepSpec {
        partition: a.partition.clone(),
        nodelist: a.nodelist.clone(),
        rdmakit,
        doctor_args,
        bundles: a.bundles,
        timeout: Duration::from_secs(a.timeout),
    };
    let cmds = Commands::default();
    let plan = run::plan(&cmds, &spec)?;
    let dir = a.output.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from(format!("rdmakit-sweep-{t}"))
    });

    let bar = (std::io::stderr().is_terminal() && !plan.run.is_empty()).then(|| {
        let pb = indicatif::ProgressBar::new(plan.run.len() as u64);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {pos}/{len} nodes reported {wide_msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    });
    let mut on_event = |e: Event| {
        if let Some(pb) = &bar {
            match e {
                Event::Progress { reported, .. } => pb.set_position(reported as u64),
                Event::Srun(m) => pb.set_message(m),
                Event::TimedOut => {
                    pb.set_message(format!("timeout ({} s): stopping srun", a.timeout))
                }
            }
        }
    };
    let swept = run::execute(&cmds, plan, spec.timeout, &mut on_event)?;
    if let Some(pb) = &bar {
        pb.finish_and_clear();
    }
    run::write_dir(&dir, &swept)?;

    let mut out = anstream::stdout();
    let mut not_ok = 0;
    let mut lines = Vec::new();
    for r in &swept.results {
        let (status, why) = match &r.outcome {
            Outcome::Reported { line, .. } => node_status(line),
            Outcome::Missing { reason } => ("missing", reason.clone()),
        };
        if status != "ok" {
            not_ok += 1;
        }
        lines.push((r.node.clone(), status, why));
    }
    if a.json {
        writeln!(out, "{}", run::summary_json(&swept))?;
    } else {
        let total = swept.results.len();
        let reported = swept.results.iter().filter(|r| r.is_reported()).count();
        writeln!(
            out,
            "rdmakit fleet sweep: {reported} of {total} nodes reported in {:.1} s; {not_ok} need attention",
            swept.elapsed.as_secs_f64()
        )?;
        // The nodes that need attention first.
        lines.sort_by_key(|(_, s, _)| *s == "ok");
        for (node, status, why) in &lines {
            if *status == "ok" {
                continue;
            }
            writeln!(out, "  {node:<12} {status:<8} {why}")?;
        }
        writeln!(out, "evidence: {}", dir.display())?;
    }
    Ok(if not_ok > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A reported node's own status: its worst finding's severity and the first such
/// finding (the fleet report adds cohorts, drift and outliers on top).
fn node_status(line: &str) -> (&'static str, String) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return ("error", "report does not parse".into());
    };
    let count = |k: &str| v["counts"][k].as_u64().unwrap_or(0);
    let level = if count("error") > 0 {
        "error"
    } else if count("warning") > 0 {
        "warning"
    } else {
        return ("ok", String::new());
    };
    let first = v["findings"]
        .as_array()
        .and_then(|fs| fs.iter().find(|f| f["severity"] == level))
        .map(|f| {
            format!(
                "{} {}",
                f["code"].as_str().unwrap_or("?"),
                f["message"].as_str().unwrap_or("")
            )
        })
        .unwrap_or_default();
    (level, first)
}
