//! `rdmakit res`: the rows of every device — the kernel's tracked objects
//! (when its RDMA netlink answered) and the soft NIC's registry — for one
//! resource kind or the per-device summary, with what could not be read.

use rdmakit_host::netlink::{NetlinkFacts, ResKind};

use crate::row::Row;
use crate::soft::SoftDevice;
use crate::{kernel, soft};

/// What `rdmakit res` prints.
#[derive(Debug, Default)]
pub struct Listing {
    /// The rows, kernel devices first.
    pub rows: Vec<Row>,
    /// What could not be read, one line each (`what: why`), in order.
    pub missing: Vec<String>,
}

/// The rows of `kind` (None: the summary) for device `dev` (None: every
/// device): the kernel's from `f` when `kernel` (its netlink answered), then
/// the soft NIC's `soft` devices.
pub fn listing(
    f: &NetlinkFacts,
    kernel: bool,
    soft: &[SoftDevice],
    kind: Option<ResKind>,
    dev: Option<&str>,
) -> Listing {
    let wanted = |name: &str| dev.map(|d| d == name).unwrap_or(true);
    let mut l = Listing::default();
    if kernel {
        match kind {
            None => match &f.summary {
                Ok(list) => l.rows.extend(kernel::summary_rows(list, wanted)),
                Err(e) => l.missing.push(format!("resource summary: {e}")),
            },
            Some(kind) => {
                for d in f.devices.iter().filter(|d| wanted(&d.name)) {
                    match d.resources.get(&kind) {
                        Some(Ok(list)) => l
                            .rows
                            .extend(list.iter().map(|r| kernel::resource_row(f, r))),
                        Some(Err(e)) => l.missing.push(format!("{}: {}: {e}", d.name, kind.name())),
                        None => {}
                    }
                }
            }
        }
    }
    for d in soft.iter().filter(|d| wanted(&d.name)) {
        if let Err(e) = &d.objects {
            l.missing.push(format!("{}: {e}", d.name));
        }
        match kind {
            None => l.rows.push(soft::summary_row(d)),
            Some(k) => l.rows.extend(soft::rows(k, d)),
        }
    }
    l
}
