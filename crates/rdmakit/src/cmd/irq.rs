//! `rdmakit irq`: per RDMA device, its interrupt vectors, the CPUs they land on,
//! the device's NUMA node, and what the doctor's IRQ checks conclude.

use rdmakit_vocab::exit::Exit;
use std::io::Write as _;

use rdmakit_doctor::views::irq::IrqView;

use super::ReplayArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the view as JSON (schema rdmakit.irq/v1).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    source: ReplayArgs,
}

/// Exit 1 when the doctor's IRQ checks fail, 0 otherwise, 2 when rdmakit
/// itself failed (`IrqView::exit`).
pub fn run(a: Args) -> anyhow::Result<Exit> {
    let (opened, opts) = a.source.open(None, None)?;
    let facts = rdmakit_host::collect::collect(opened.source(), &opts);
    let tool = format!("rdmakit {}", env!("CARGO_PKG_VERSION"));
    let view = IrqView::of_facts(&facts, &tool, opened.label());
    anstream::stdout().write_all(view.output(a.json).as_bytes())?;
    Ok(view.exit())
}
