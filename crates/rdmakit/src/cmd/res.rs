//! `rdmakit res [qp|cq|mr|pd|ctx|srq|cm_id]`: every device's tracked RDMA objects —
//! the kernel's (RDMA netlink) and, on the live host, the rdmakit soft NIC's (its
//! registry) — as `rdma resource show` prints them, plus whether each owner is still
//! alive. The rows are built by the rdmakit-res library.
//!
//! Also what `dev`, `link` and `stat` share: loading the netlink facts from a
//! source and printing rows as `rdma`-style lines or `rdma -j` JSON objects.

use std::io::Write as _;
use std::process::ExitCode;

use rdmakit_host::netlink::{self, NetlinkFacts};
pub(crate) use rdmakit_res::json;
use rdmakit_res::listing::Query;
use rdmakit_res::show::{LinkFilter, Shown};
use rdmakit_vocab::exit::Exit;

use super::ReplayArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// qp, cq, mr, pd, ctx, srq or cm_id; without it, the per-device summary.
    #[arg(value_name = "KIND")]
    kind: Option<String>,
    /// Only this device.
    #[arg(value_name = "DEV")]
    dev: Option<String>,
    /// Only the objects this process owns (`rdma res show qp pid N`); without a KIND,
    /// its count of each kind per device.
    #[arg(long, value_name = "PID")]
    pid: Option<u32>,
    #[command(flatten)]
    out: RowsArgs,
}

/// What `dev`, `link`, `stat` and `res` share: the output form and where the
/// facts come from.
#[derive(clap::Args, Debug)]
pub(crate) struct RowsArgs {
    /// JSON with the keys `rdma -j` prints for the same command (`res` adds
    /// "owner-state").
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub source: ReplayArgs,
}

/// `DEV` or `DEV/PORT`, when given.
pub(crate) fn link_filter(s: Option<&str>) -> anyhow::Result<Option<LinkFilter>> {
    s.map(LinkFilter::parse)
        .transpose()
        .map_err(anyhow::Error::msg)
}

/// Prints what the reader should know and what could not be read (stderr),
/// then the rows (JSON or human); exit 0, or 3 when something was missing.
pub(crate) fn emit(shown: &Shown, as_json: bool) -> anyhow::Result<ExitCode> {
    for n in &shown.notes {
        eprintln!("rdmakit: note: {n}");
    }
    for m in &shown.missing {
        eprintln!("rdmakit: {m}");
    }
    let mut out = anstream::stdout();
    if as_json {
        out.write_all(json(&shown.rows).as_bytes())?;
    } else {
        for r in &shown.rows {
            writeln!(out, "{}", r.human())?;
        }
    }
    Ok(if shown.complete() {
        Exit::Ok
    } else {
        Exit::Incomplete
    }
    .into())
}

/// The netlink facts of the source and what to call it. A source without
/// them (no RDMA in the kernel, a bundle recorded without them) still loads:
/// the views say so.
pub(crate) fn load(source: &ReplayArgs) -> anyhow::Result<(NetlinkFacts, String)> {
    let (opened, _) = source.open()?;
    let f = netlink::rdma_netlink(opened.source());
    Ok((f, opened.label().to_string()))
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    // `rdmakit res soft0` (a device, no kind) is accepted too.
    let (kind, dev) = rdmakit_res::listing::parse_args(a.kind.as_deref(), a.dev.clone())
        .map_err(anyhow::Error::msg)?;
    let (f, label) = load(&a.out.source)?;
    // The soft NIC's registry is this host's: listed live only.
    let soft = if a.out.source.live() {
        rdmakit_res::soft::read(&super::soft_names())
    } else {
        Vec::new()
    };
    let q = Query {
        kind,
        dev: dev.as_deref(),
        pid: a.pid,
    };
    let shown = rdmakit_res::listing::listing(&f, &label, &soft, q).map_err(anyhow::Error::msg)?;
    emit(&shown, a.out.json)
}
