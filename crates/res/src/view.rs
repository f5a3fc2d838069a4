//! Which `rdma`-style view a command asks for — `rdmakit dev`, `link`,
//! `stat [qp]` or `res [KIND]` — its arguments checked before anything is
//! read, and its rows from the facts the caller loaded. Pure.

use rdmakit_host::netlink::{NetlinkFacts, ResKind};

use crate::listing::{self, Query};
use crate::show::{self, LinkFilter, Shown};
use crate::soft::SoftDevice;
use crate::softstat;

/// A view and what it is filtered by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum View {
    /// `rdmakit dev [DEV]`.
    Dev(Option<String>),
    /// `rdmakit link [DEV[/PORT]]`.
    Link(Option<LinkFilter>),
    /// `rdmakit stat [qp] [DEV[/PORT]]`.
    Stat {
        /// QP counters, not port counters.
        qp: bool,
        /// Only this device or port.
        filter: Option<LinkFilter>,
    },
    /// `rdmakit res [KIND] [DEV] [--pid PID]`.
    Res {
        /// The kind; None: the per-device summary.
        kind: Option<ResKind>,
        /// Only this device.
        dev: Option<String>,
        /// Only this process's objects.
        pid: Option<u32>,
    },
}

impl View {
    /// `rdmakit dev [DEV]`.
    pub fn dev(dev: Option<&str>) -> Result<View, String> {
        Ok(View::Dev(dev.map(str::to_string)))
    }

    /// `rdmakit link [DEV[/PORT]]`.
    ///
    /// # Errors
    /// A port that is not a number from 1 ([`LinkFilter::parse`]).
    pub fn link(link: Option<&str>) -> Result<View, String> {
        Ok(View::Link(filter(link)?))
    }

    /// `rdmakit stat [OBJECT] [DEV[/PORT]]`; `rdmakit stat mlx5_0/1` (no
    /// object) is accepted too ([`show::stat_args`]).
    ///
    /// # Errors
    /// An unknown object, or a bad port.
    pub fn stat(object: Option<&str>, link: Option<String>) -> Result<View, String> {
        let (qp, link) = show::stat_args(object, link)?;
        Ok(View::Stat {
            qp,
            filter: filter(link.as_deref())?,
        })
    }

    /// `rdmakit res [KIND] [DEV]`; `rdmakit res soft0` (a device, no kind)
    /// is accepted too ([`listing::parse_args`]).
    ///
    /// # Errors
    /// An unknown kind when a device was given too.
    pub fn res(kind: Option<&str>, dev: Option<String>, pid: Option<u32>) -> Result<View, String> {
        let (kind, dev) = listing::parse_args(kind, dev)?;
        Ok(View::Res { kind, dev, pid })
    }

    /// Whether the view lists the soft NIC's registry too (`res`, and its
    /// counters for `stat`), which the caller reads on the live host only:
    /// the registry is this host's.
    pub fn lists_soft(&self) -> bool {
        matches!(self, View::Res { .. } | View::Stat { qp: false, .. })
    }

    /// The view's rows from `f`, the facts of the source labelled `label`,
    /// and `soft` ([`View::lists_soft`]).
    ///
    /// # Errors
    /// A device (or port) named that neither part has.
    pub fn rows(
        &self,
        f: &NetlinkFacts,
        label: &str,
        soft: &[SoftDevice],
    ) -> Result<Shown, String> {
        match self {
            View::Dev(dev) => show::dev_rows(f, dev.as_deref(), label),
            View::Link(filter) => show::link_rows(f, filter.as_ref(), label),
            View::Stat { qp, filter } => stat(f, *qp, filter.as_ref(), label, soft),
            View::Res { kind, dev, pid } => {
                let q = Query {
                    kind: *kind,
                    dev: dev.as_deref(),
                    pid: *pid,
                };
                listing::listing(f, label, soft, q)
            }
        }
    }
}

/// `rdmakit stat`: the kernel's port (or QP) counters, then the soft
/// devices' device-wide counters as their port 1 (the soft NIC binds no QP
/// counters). A filter naming a soft device shows it alone.
fn stat(
    f: &NetlinkFacts,
    qp: bool,
    filter: Option<&LinkFilter>,
    label: &str,
    soft: &[SoftDevice],
) -> Result<Shown, String> {
    let on_soft: Vec<&SoftDevice> = match filter {
        Some(l) => soft.iter().filter(|d| d.name == l.dev).collect(),
        None => soft.iter().collect(),
    };
    let mut out = match filter {
        Some(_) if !on_soft.is_empty() => Shown::default(),
        _ => show::stat_rows(f, qp, filter, label)?,
    };
    if qp {
        return Ok(out);
    }
    for d in on_soft {
        out.notes.extend(softstat::notes(d));
        if filter.is_none_or(|l| l.keeps(&d.name, Some(1))) {
            out.rows.extend(softstat::stat_row(d));
        }
    }
    Ok(out)
}

/// `DEV` or `DEV/PORT`, when given.
fn filter(s: Option<&str>) -> Result<Option<LinkFilter>, String> {
    s.map(LinkFilter::parse).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_before_anything_is_read() {
        assert_eq!(View::dev(Some("rxe0")), Ok(View::Dev(Some("rxe0".into()))));
        assert!(View::link(Some("rxe0/x")).is_err());
        let v = View::stat(Some("mlx5_0/1"), None).unwrap();
        assert!(matches!(
            v,
            View::Stat {
                qp: false,
                filter: Some(_)
            }
        ));
        assert!(View::stat(Some("cq"), Some("mlx5_0".into())).is_err());
        let v = View::res(Some("soft0"), None, None).unwrap();
        assert_eq!(
            v,
            View::Res {
                kind: None,
                dev: Some("soft0".into()),
                pid: None
            }
        );
        assert!(v.lists_soft() && !View::dev(None).unwrap().lists_soft());
        assert!(View::stat(None, None).unwrap().lists_soft());
        assert!(!View::stat(Some("qp"), None).unwrap().lists_soft());
    }
}
