//! `rdmakit stat [qp]`: per-port hardware counters (`rdma statistic`) and bound QP
//! counters (`rdma statistic qp`).

use std::process::ExitCode;

use anyhow::bail;
use rdmakit_host::source::Errno;

use super::link::parse_link;
use super::res::{emit, load, warn};
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
    let (qp, link) = match a.object.as_deref() {
        None | Some("show") | Some("link") => (false, a.link.clone()),
        Some("qp") => (true, a.link.clone()),
        Some(other) if a.link.is_none() && !other.is_empty() => (false, Some(other.to_string())),
        Some(other) => bail!("unknown statistic object {other:?}: expected qp"),
    };
    let filter = link.as_deref().map(parse_link).transpose()?;
    let f = load(&a.source)?;
    let keep = |dev: &str, port: Option<u32>| match &filter {
        None => true,
        Some((d, p)) => d == dev && (p.is_none() || port.is_none() || *p == port),
    };
    let mut rows = Vec::new();
    let mut partial = false;
    for d in &f.devices {
        if !keep(&d.name, None) {
            continue;
        }
        if qp {
            match &d.qp_counters {
                Ok(list) => {
                    for c in list.iter().filter(|c| keep(&c.dev_name, c.port)) {
                        rows.push(rdmakit_res::kernel::qp_counter_row(&f, c));
                    }
                }
                Err(e) => {
                    warn(&format!("{}: QP counters", d.name), e);
                    partial = true;
                }
            }
            continue;
        }
        for (port, st) in &d.port_stats {
            if !keep(&d.name, Some(*port)) {
                continue;
            }
            match st {
                Ok(s) => {
                    rows.push(rdmakit_res::kernel::port_stat_row(s));
                }
                // A device without port counters (EOPNOTSUPP) has nothing to show.
                Err(e) if e.errno() == Some(Errno(95)) => {}
                Err(e) => {
                    warn(&format!("{}/{}: counters", d.name, port), e);
                    partial = true;
                }
            }
        }
    }
    if let Some((d, _)) = &filter {
        if !f.devices.iter().any(|x| &x.name == d) {
            bail!("no RDMA device {d:?}");
        }
    }
    emit(&rows, a.json, partial)
}
