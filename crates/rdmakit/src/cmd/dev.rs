//! `rdmakit dev`: the RDMA devices, as `rdma dev` prints them.

use std::process::ExitCode;

use anyhow::bail;
use rdmakit_host::netlink::names;
use serde_json::Value;

use super::res::{emit, load, Row};
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
        let mut row = Row::new(format!("{}: {}:", d.index, d.name));
        row.json_only("ifindex", Value::from(d.index));
        row.json_only("ifname", Value::from(d.name.as_str()));
        if let Some(t) = d.node_type {
            row.text("node_type", names::node_type(t));
        }
        if let Some(fw) = d.fw_version.as_deref().filter(|s| !s.is_empty()) {
            row.text("fw", fw);
        }
        if let Some(g) = d.node_guid {
            row.text("node_guid", &names::guid(g));
        }
        if let Some(g) = d.sys_image_guid {
            row.text("sys_image_guid", &names::guid(g));
        }
        rows.push(row);
    }
    if let Some(d) = &a.dev {
        if rows.is_empty() {
            bail!("no RDMA device {d:?}");
        }
    }
    emit(&rows, a.json, false)
}
