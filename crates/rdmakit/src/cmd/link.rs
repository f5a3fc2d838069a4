//! `rdmakit link`: the ports of every RDMA device, as `rdma link` prints them.

use std::process::ExitCode;

use anyhow::bail;

use super::res::{emit, load, warn};
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

/// Splits "mlx5_0/1" into ("mlx5_0", Some(1)).
pub(crate) fn parse_link(s: &str) -> anyhow::Result<(String, Option<u32>)> {
    match s.split_once('/') {
        None => Ok((s.to_string(), None)),
        Some((d, p)) => match p.parse() {
            Ok(n) if n > 0 => Ok((d.to_string(), Some(n))),
            _ => bail!("{s:?}: the port must be a number from 1 (DEV/PORT, e.g. mlx5_0/1)"),
        },
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let filter = a.link.as_deref().map(parse_link).transpose()?;
    let f = load(&a.source)?;
    let mut rows = Vec::new();
    let mut partial = false;
    for d in &f.devices {
        if filter.as_ref().is_some_and(|(n, _)| *n != d.name) {
            continue;
        }
        let ports = match &d.ports {
            Ok(p) => p,
            Err(e) => {
                warn(&format!("{}: ports", d.name), e);
                partial = true;
                continue;
            }
        };
        for p in ports {
            if filter
                .as_ref()
                .is_some_and(|(_, port)| port.is_some_and(|x| x != p.port))
            {
                continue;
            }
            rows.push(rdmakit_res::kernel::port_row(p));
        }
    }
    if let Some((d, _)) = &filter {
        if !f.devices.iter().any(|x| &x.name == d) {
            bail!("no RDMA device {d:?}");
        }
    }
    emit(&rows, a.json, partial)
}
