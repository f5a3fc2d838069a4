//! `rdmakit dev`: the RDMA devices, as `rdma dev` prints them.

use std::process::ExitCode;

use super::res::{emit, load, RowsArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this device.
    #[arg(value_name = "DEV")]
    dev: Option<String>,
    #[command(flatten)]
    out: RowsArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let (f, label) = load(&a.out.source)?;
    let shown =
        rdmakit_res::show::dev_rows(&f, a.dev.as_deref(), &label).map_err(anyhow::Error::msg)?;
    emit(&shown, a.out.json)
}
