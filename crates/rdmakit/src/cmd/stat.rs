//! `rdmakit stat [qp]`: per-port hardware counters (`rdma statistic`) and bound QP
//! counters (`rdma statistic qp`).

use std::process::ExitCode;

use rdmakit_res::show;

use super::res::{emit, link_filter, load, RowsArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// "qp" for QP counters; without it, the port counters.
    #[arg(value_name = "OBJECT")]
    object: Option<String>,
    /// Only this device or port (DEV or DEV/PORT).
    #[arg(value_name = "DEV[/PORT]")]
    link: Option<String>,
    #[command(flatten)]
    out: RowsArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    // `rdmakit stat mlx5_0/1` (no object) is accepted too.
    let (qp, link) =
        show::stat_args(a.object.as_deref(), a.link.clone()).map_err(anyhow::Error::msg)?;
    let filter = link_filter(link.as_deref())?;
    let (f, label) = load(&a.out.source)?;
    let shown = show::stat_rows(&f, qp, filter.as_ref(), &label).map_err(anyhow::Error::msg)?;
    emit(&shown, a.out.json)
}
