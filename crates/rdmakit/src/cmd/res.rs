//! `rdmakit res [qp|cq|mr|pd|ctx|srq|cm_id]`: every device's tracked RDMA objects —
//! the kernel's (RDMA netlink) and, on the live host, the rdmakit soft NIC's (its
//! registry) — as `rdma resource show` prints them, plus whether each owner is still
//! alive. The rows are built by the rdmakit-res library.
//!
//! Also what `dev`, `link` and `stat` share: loading the netlink facts from a
//! source and printing rows as `rdma`-style lines or `rdma -j` JSON objects.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::bail;
use rdmakit_host::netlink::{self, NetlinkFacts};
use rdmakit_res::show::{self, LinkFilter, Shown};
pub(crate) use rdmakit_res::{json, Row};

use super::SourceArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// qp, cq, mr, pd, ctx, srq or cm_id; without it, the per-device summary.
    #[arg(value_name = "KIND")]
    kind: Option<String>,
    /// Only this device.
    #[arg(value_name = "DEV")]
    dev: Option<String>,
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
    pub source: SourceArgs,
}

/// `DEV` or `DEV/PORT`, when given.
pub(crate) fn link_filter(s: Option<&str>) -> anyhow::Result<Option<LinkFilter>> {
    s.map(LinkFilter::parse)
        .transpose()
        .map_err(anyhow::Error::msg)
}

/// Prints rows (JSON or human) and returns the exit code: 0, or 1 when some
/// answers are missing (already reported on stderr).
pub(crate) fn emit(rows: &[Row], as_json: bool, partial: bool) -> anyhow::Result<ExitCode> {
    let mut out = anstream::stdout();
    if as_json {
        out.write_all(json(rows).as_bytes())?;
    } else {
        for r in rows {
            writeln!(out, "{}", r.human())?;
        }
    }
    Ok(if partial {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Loads the netlink facts from the source. Fails (exit 2) when nothing could be
/// asked: no RDMA netlink in the kernel, or a source that recorded none.
pub(crate) fn load(source: &SourceArgs) -> anyhow::Result<NetlinkFacts> {
    let (opened, _) = source.open()?;
    let f = netlink::rdma_netlink(opened.source());
    if let Err(e) = &f.devs {
        return Err(anyhow::Error::msg(show::unanswered(e, opened.label())));
    }
    Ok(f)
}

/// Prints what could not be read (stderr), then the rows; exit 1 when
/// something was missing.
pub(crate) fn emit_shown(shown: &Shown, as_json: bool) -> anyhow::Result<ExitCode> {
    for m in &shown.missing {
        eprintln!("rdmakit: {m}");
    }
    emit(&shown.rows, as_json, !shown.missing.is_empty())
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    // `rdmakit res soft0` (a device, no kind) is accepted too.
    let (kind, dev) = rdmakit_res::listing::parse_args(a.kind.as_deref(), a.dev.clone())
        .map_err(anyhow::Error::msg)?;
    let (opened, _) = a.out.source.open()?;
    let live = a.out.source.from.is_none() && a.out.source.root.is_none();
    let f = netlink::rdma_netlink(opened.source());
    let part = rdmakit_res::listing::kernel_part(&f.devs, live, opened.label())
        .map_err(anyhow::Error::msg)?;
    if let Some(n) = &part.note {
        eprintln!("rdmakit: {n}");
    }
    let (kernel, mut partial) = (part.present, part.partial);
    let soft = if live {
        rdmakit_res::soft::read(&super::soft_names())
    } else {
        Vec::new()
    };
    let l = rdmakit_res::listing::listing(&f, kernel, &soft, kind, dev.as_deref());
    for m in &l.missing {
        eprintln!("rdmakit: {m}");
    }
    for n in &l.notes {
        eprintln!("rdmakit: note: {n}");
    }
    partial |= !l.missing.is_empty();
    if let Some(d) = &dev {
        if !f.devices.iter().any(|x| &x.name == d) && !soft.iter().any(|x| &x.name == d) {
            bail!("no RDMA device {d:?}");
        }
    }
    emit(&l.rows, a.out.json, partial)
}
