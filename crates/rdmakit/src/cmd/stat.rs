//! `rdmakit stat [qp]`: per-port hardware counters (`rdma statistic`) and bound QP
//! counters (`rdma statistic qp`).

use std::process::ExitCode;

use rdmakit_res::show::{self, LinkFilter};

use super::res::{emit_shown, load};
use super::SourceArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// "qp" for QP counters; without it, the port counters.
    #[arg(value_name = "OBJECT")]
    object: Option<String>,
    /// Only this device or port (DEV or DEV/PORT).
    #[arg(value_name = "DEV[/PORT]")]
    link: Option<String>,
    /// JSON with the keys of `rdma -j statistic show`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    source: SourceArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    // `rdmakit stat mlx5_0/1` (no object) is accepted too.
    let (qp, link) =
        show::stat_args(a.object.as_deref(), a.link.clone()).map_err(anyhow::Error::msg)?;
    let filter = link
        .as_deref()
        .map(LinkFilter::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let f = load(&a.source)?;
    let shown = show::stat_rows(&f, qp, filter.as_ref()).map_err(anyhow::Error::msg)?;
    emit_shown(&shown, a.json)
}
