//! `rdmakit link`: the ports of every RDMA device, as `rdma link` prints them.

use std::process::ExitCode;

use rdmakit_res::show::{self, LinkFilter};

use super::res::{emit_shown, load};
use super::SourceArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this device, or this port (DEV/PORT).
    #[arg(value_name = "DEV[/PORT]")]
    link: Option<String>,
    /// JSON with the keys of `rdma -j link show`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    source: SourceArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let filter = a
        .link
        .as_deref()
        .map(LinkFilter::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let f = load(&a.source)?;
    let shown = show::link_rows(&f, filter.as_ref()).map_err(anyhow::Error::msg)?;
    emit_shown(&shown, a.json)
}
