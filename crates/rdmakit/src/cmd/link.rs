//! `rdmakit link`: the ports of every RDMA device, as `rdma link` prints them.

use std::process::ExitCode;

use rdmakit_res::show;

use super::res::{emit, link_filter, load, RowsArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this device, or this port (DEV/PORT).
    #[arg(value_name = "DEV[/PORT]")]
    link: Option<String>,
    #[command(flatten)]
    out: RowsArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let filter = link_filter(a.link.as_deref())?;
    let (f, label) = load(&a.out.source)?;
    let shown = show::link_rows(&f, filter.as_ref(), &label).map_err(anyhow::Error::msg)?;
    emit(&shown, a.out.json)
}
