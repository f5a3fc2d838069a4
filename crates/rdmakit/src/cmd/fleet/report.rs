//! `rdmakit fleet report INPUT...`.

use std::io::Write as _;
use std::process::ExitCode;

use rdmakit_fleet::render::{self, HumanOptions};
use rdmakit_fleet::report::{FleetReport, Options};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directories of `rdmakit collect` bundles, capture directories, `rdmakit doctor --json`
    /// files, JSON lines (one doctor report per line); gzip is fine.
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<String>,
    /// Print the report as JSON (schema rdmakit.fleet/v1, docs/fleet.md).
    #[arg(long)]
    json: bool,
    /// Also write the report as one self-contained HTML file: the nodes needing attention,
    /// drift per cohort, each numeric metric as a dot plot with its outliers; the report's
    /// JSON embedded.
    #[arg(long, value_name = "FILE")]
    html: Option<String>,
    /// Every reason of every node, cohort members, every change.
    #[arg(short, long)]
    verbose: bool,
    /// The previous sweep: its `fleet report --json`, or its node reports. Error counters
    /// that grew, links that went down, firmware that changed; nodes gone are `missing`.
    #[arg(long, value_name = "PREVIOUS")]
    baseline: Option<String>,
    /// Check every node against an expected inventory (`rdmakit fleet baseline -o FILE`).
    #[arg(long, value_name = "FILE")]
    expect: Option<String>,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let opts = Options {
        tool: super::tool(),
        previous: a.baseline.as_deref().map(super::previous).transpose()?,
        expected: match &a.expect {
            Some(p) => Some((p.clone(), super::expected(p)?)),
            None => None,
        },
        ..Options::default()
    };
    let loaded = super::load(&a.inputs);
    let r = FleetReport::from_loaded(loaded, &opts);
    let mut out = anstream::stdout();
    if a.json {
        writeln!(out, "{}", render::json(&r))?;
    } else {
        let o = HumanOptions {
            verbose: a.verbose,
            ..HumanOptions::default()
        };
        out.write_all(render::human(&r, o).as_bytes())?;
    }
    if let Some(path) = &a.html {
        crate::cmd::html::fleet(path, &r)?;
    }
    Ok(ExitCode::from(r.summary.exit_code))
}
