//! `rdmakit fleet report INPUT...`.

use std::process::ExitCode;

use rdmakit_fleet::report::FleetReport;

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
    let opts = super::options(a.baseline.as_deref(), a.expect.as_deref())?;
    let r = FleetReport::from_loaded(super::load(&a.inputs), &opts);
    super::emit(&r, a.json, a.verbose, None, a.html.as_deref())
}
