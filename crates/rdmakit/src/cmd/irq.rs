//! `rdmakit irq`: per RDMA device, its interrupt vectors, the CPUs they land on,
//! the device's NUMA node, and what the doctor's IRQ checks conclude.

use std::io::Write as _;
use std::process::ExitCode;

use rdmakit_doctor::checks::Config;
use rdmakit_doctor::report::Report;
use rdmakit_doctor::views::irq::{self, IrqView};
use rdmakit_host::collect::collect;

use rdmakit_vocab::exit::Exit;

use super::ReplayArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the view as JSON (schema rdmakit.irq/v1).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    source: ReplayArgs,
}

/// Exit 1 when the doctor's IRQ checks fail (no vectors, too few, INTx, all on one
/// CPU, on another NUMA node), 0 otherwise, 2 when rdmakit itself failed.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let (opened, opts) = a.source.open()?;
    let facts = collect(opened.source(), &opts);
    let tool = format!("rdmakit {}", env!("CARGO_PKG_VERSION"));
    let report = Report::build(&facts, &Config::default(), &tool, opened.label());
    let view = IrqView::build(&facts, &report);
    let mut out = anstream::stdout();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&view)?)?;
    } else {
        out.write_all(irq::render(&view).as_bytes())?;
    }
    Ok(if view.failed() { Exit::Found } else { Exit::Ok }.into())
}
