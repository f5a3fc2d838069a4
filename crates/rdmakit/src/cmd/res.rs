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
use rdmakit_host::netlink::{self, NetlinkFacts, NlError, ResKind};
use rdmakit_host::source::Errno;
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
    /// JSON with the keys of `rdma -j resource show`, plus "owner-state".
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    source: SourceArgs,
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
        return Err(unanswered(e, opened.label()));
    }
    Ok(f)
}

/// Why a source gave no netlink answers, as the error the subcommands exit 2 with.
fn unanswered(e: &NlError, label: &str) -> anyhow::Error {
    match e {
        NlError::Socket(_) => {
            anyhow::anyhow!("kernel layer: {e}; check that ib_core is loaded (rdmakit doctor)")
        }
        NlError::NotRecorded => anyhow::anyhow!(
            "{label} holds no RDMA netlink answers (recorded without them, or a tree with no \
             kernel behind it)"
        ),
        _ => anyhow::anyhow!("kernel layer: the device dump failed: {e}"),
    }
}

/// Reports an answer that is missing on stderr.
pub(crate) fn warn(what: &str, e: &NlError) {
    eprintln!("rdmakit: {what}: {e}");
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    // `rdmakit res soft0` (a device, no kind) is accepted too.
    let mut dev = a.dev.clone();
    let kind = match a.kind.as_deref() {
        None | Some("show") => None,
        Some(k) => match ResKind::parse(k) {
            Some(k) => Some(k),
            None if dev.is_none() && !k.is_empty() => {
                dev = Some(k.to_string());
                None
            }
            None => bail!("unknown resource {k:?}: expected qp, cq, mr, pd, ctx, srq or cm_id"),
        },
    };
    let (opened, _) = a.source.open()?;
    let live = a.source.from.is_none() && a.source.root.is_none();
    let f = netlink::rdma_netlink(opened.source());
    let mut partial = false;
    // The kernel part: absent on a live host without kernel RDMA (the soft NIC is
    // still shown), a failure anywhere else.
    let kernel = match &f.devs {
        Ok(_) => true,
        Err(NlError::Socket(e)) if live => {
            // EPROTONOSUPPORT: no RDMA in the kernel, nothing is missing; any other
            // errno: the kernel part exists but could not be asked.
            if *e != Errno::EPROTONOSUPPORT {
                partial = true;
            }
            eprintln!(
                "rdmakit: note: kernel part absent ({}); showing the rdmakit soft NIC only",
                NlError::Socket(*e)
            );
            false
        }
        Err(e) => return Err(unanswered(e, opened.label())),
    };
    let soft = if live {
        rdmakit_res::soft::read(&super::soft_names())
    } else {
        Vec::new()
    };
    let l = rdmakit_res::listing::listing(&f, kernel, &soft, kind, dev.as_deref());
    for m in &l.missing {
        eprintln!("rdmakit: {m}");
    }
    partial |= !l.missing.is_empty();
    if let Some(d) = &dev {
        if !f.devices.iter().any(|x| &x.name == d) && !soft.iter().any(|x| &x.name == d) {
            bail!("no RDMA device {d:?}");
        }
    }
    emit(&l.rows, a.json, partial)
}
