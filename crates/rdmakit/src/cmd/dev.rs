//! `rdmakit dev`: the RDMA devices, as `rdma dev` prints them.

use std::process::ExitCode;

use anyhow::bail;

use super::res::{emit, load};
use super::SourceArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this device.
    #[arg(value_name = "DEV")]
    dev: Option<String>,
    /// JSON with the keys of `rdma -j dev show`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    source: SourceArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let f = load(&a.source)?;
    let devs = f.devs.as_deref().unwrap_or_default();
    let mut rows = Vec::new();
    for d in devs {
        if a.dev.as_deref().is_some_and(|x| x != d.name) {
            continue;
        }
        rows.push(rdmakit_res::kernel::dev_row(d));
    }
    if let Some(d) = &a.dev {
        if rows.is_empty() {
            bail!("no RDMA device {d:?}");
        }
    }
    emit(&rows, a.json, false)
}
