//! `rdmakit devinfo`: device and port attributes, line-compatible with
//! rdma-core's `ibv_devinfo` (same field names, order, tabs and value
//! formats; `-v` adds every limit, the decoded capability flags and the GID
//! table), plus `--json` with the same fields.
//!
//! Works on any verbs provider: the device list is `rdmakit_verbs::devices`
//! of the chosen one. With `--from BUNDLE` (or `--root DIR`) it prints the
//! attributes the source recorded instead (rdmakit_res::devinfo) and names
//! the ones it did not.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use rdmakit_verbs::devinfo::{json_list, query_all, text};
use rdmakit_vocab::exit::Exit;
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this device (default: every device).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    dev: Option<String>,
    /// Only this port of the device(s).
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    port: Option<u8>,
    /// Print every attribute (ibv_devinfo -v).
    #[arg(short, long)]
    verbose: bool,
    /// Print JSON with the same fields.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    source: super::ReplayArgs,
}

impl Args {
    /// It replays a source (--from, --root) instead of opening devices.
    pub fn replays(&self) -> bool {
        !self.source.live()
    }
}

pub fn run(a: Args, provider: super::ProviderSetting) -> anyhow::Result<ExitCode> {
    if !a.source.live() {
        return replay(&a);
    }
    let provider = provider.context("listing RDMA devices")?;
    let infos = query_all(provider, a.dev.as_deref(), a.port).map_err(anyhow::Error::msg)?;
    if infos.is_empty() {
        if a.json {
            println!("{}", json!({ "devices": [] }));
        } else {
            println!("No IB devices found");
        }
        return Ok(Exit::Ok.into());
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(out, "{}", json_list(&infos, a.verbose))?;
    } else {
        for i in &infos {
            out.write_all(text(i, a.verbose).as_bytes())?;
        }
    }
    Ok(Exit::Ok.into())
}

/// `--from` / `--root`: the device attributes the source recorded, as
/// ibv_devinfo prints them; what it did not record is named on stderr (exit 3).
fn replay(a: &Args) -> anyhow::Result<ExitCode> {
    let (opened, opts) = a.source.open()?;
    let facts = rdmakit_host::collect::collect(opened.source(), &opts);
    let r =
        rdmakit_res::devinfo::recorded(&facts, opened.label(), a.dev.as_deref(), a.port, a.verbose)
            .map_err(anyhow::Error::msg)?;
    for m in &r.missing {
        eprintln!("rdmakit: {m}");
    }
    for n in &r.not_recorded {
        eprintln!(
            "rdmakit: {n}: not recorded in the {} (a bundle holds sysfs and, when rdma-core \
             answered, max_qp, max_cq, max_mr and max_pd; run `rdmakit devinfo` on the host \
             for the rest)",
            opened.label()
        );
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&r.json)?)?;
    } else {
        out.write_all(r.text.as_bytes())?;
    }
    Ok(if r.complete() {
        Exit::Ok
    } else {
        Exit::Incomplete
    }
    .into())
}
