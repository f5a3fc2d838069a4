//! `rdmakit monitor`: prints RDMA device events as the kernel announces them,
//! until Ctrl-C (`rdmakit_res::kernel::monitor`). Live only.

use rdmakit_vocab::exit::Exit;
use std::io::Write as _;

use rdmakit_res::kernel::{monitor, Said};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// One JSON object per line instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> anyhow::Result<Exit> {
    let mut out = anstream::stdout();
    let exit = monitor(a.json, &mut |s| match s {
        Said::Event(line) => writeln!(out, "{line}"),
        Said::Batch => out.flush(),
        Said::Note(line) => writeln!(std::io::stderr(), "rdmakit: monitor: {line}"),
    })?;
    Ok(exit)
}
