//! `rdmakit fleet report INPUT...`.

use std::process::ExitCode;

use rdmakit_fleet::report::FleetReport;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directories of `rdmakit collect` bundles, capture directories, `rdmakit doctor --json`
    /// files, JSON lines (one doctor report per line); gzip is fine.
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<String>,
    #[command(flatten)]
    report: super::ReportArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let opts = a.report.options()?;
    let r = FleetReport::from_loaded(super::load(&a.inputs), &opts);
    a.report.emit(&r, None, None)
}
