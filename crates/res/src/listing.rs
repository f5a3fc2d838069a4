//! `rdmakit res`: the rows of every device — the kernel's tracked objects
//! (when its RDMA netlink answered) and the soft NIC's registry — for one
//! resource kind or the per-device summary, of every owner or of one process
//! (`--pid`), with what could not be read.

use rdmakit_host::netlink::{DevFacts, Holder, NetlinkFacts, ResKind};
use serde_json::Value;

use crate::row::Row;
use crate::show::{kernel_part, KernelPart, Shown};
use crate::soft::SoftDevice;
use crate::{kernel, soft};

/// `rdmakit res [KIND] [DEV]` as given: `show` or nothing is the summary, and
/// a first word that is no resource kind is the device (`rdmakit res soft0`).
/// Returns the kind (None: the summary) and the device.
///
/// # Errors
/// An unknown kind when a device was given too, naming the kinds.
pub fn parse_args(
    kind: Option<&str>,
    dev: Option<String>,
) -> Result<(Option<ResKind>, Option<String>), String> {
    match kind {
        None | Some("show") => Ok((None, dev)),
        Some(k) => match ResKind::parse(k) {
            Some(k) => Ok((Some(k), dev)),
            None if dev.is_none() && !k.is_empty() => Ok((None, Some(k.to_string()))),
            None => Err(format!(
                "unknown resource {k:?}: expected qp, cq, mr, pd, ctx, srq or cm_id"
            )),
        },
    }
}

/// What `rdmakit res` lists: one kind (None: the per-device summary), on one
/// device (None: every device), of one process (None: every owner).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Query<'a> {
    /// The kind; None: the per-device summary.
    pub kind: Option<ResKind>,
    /// The device.
    pub dev: Option<&'a str>,
    /// Only objects this process owns (`rdma res show qp pid N`); for the
    /// summary, that process's counts per kind.
    pub pid: Option<u32>,
}

/// The rows of `q`: the kernel's from `f` (the source labelled `label`), then
/// the soft NIC's `soft` devices, with what could not be read and what the
/// reader should know.
///
/// # Errors
/// `no RDMA device "x"` when `q.dev` names a device neither part has.
pub fn listing(
    f: &NetlinkFacts,
    label: &str,
    soft: &[SoftDevice],
    q: Query<'_>,
) -> Result<Shown, String> {
    let wanted = |name: &str| q.dev.map(|d| d == name).unwrap_or(true);
    let mut l = Shown::default();
    let present = match kernel_part(&f.devs, label) {
        KernelPart::Present => true,
        KernelPart::Absent { note } => {
            let note = if soft.is_empty() {
                note
            } else {
                format!("{note}; showing the rdmakit soft NIC only")
            };
            l.notes.push(note);
            false
        }
        KernelPart::Unread { missing } => {
            l.missing.push(missing);
            false
        }
    };
    if present {
        match (q.kind, q.pid) {
            (None, None) => match &f.summary {
                Ok(list) => l.rows.extend(kernel::summary_rows(list, wanted)),
                Err(e) => l.missing.push(format!("resource summary: {e}")),
            },
            (None, Some(pid)) => {
                for d in f.devices.iter().filter(|d| wanted(&d.name)) {
                    l.rows.push(pid_summary_row(f, d, pid, &mut l.missing));
                }
            }
            (Some(kind), _) => {
                for d in f.devices.iter().filter(|d| wanted(&d.name)) {
                    match d.resources.get(&kind) {
                        Some(Ok(list)) => l.rows.extend(
                            list.iter()
                                .filter(|r| owned_by(&r.holder, q.pid))
                                .map(|r| kernel::resource_row(f, r)),
                        ),
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
        l.notes.extend(d.notes.iter().cloned());
        match q.kind {
            None => l.rows.push(soft::summary_row(d, q.pid)),
            Some(k) => l.rows.extend(soft::rows(k, d, q.pid)),
        }
    }
    if let Some(d) = q.dev {
        let known = f.devices.iter().any(|x| x.name == d) || soft.iter().any(|x| x.name == d);
        if !known && l.complete() {
            return Err(format!("no RDMA device {d:?}"));
        }
    }
    Ok(l)
}

/// Whether an object of `holder` is shown for `pid` (None: every object).
fn owned_by(holder: &Holder, pid: Option<u32>) -> bool {
    match pid {
        None => true,
        Some(p) => *holder == Holder::Pid(p),
    }
}

/// One device's summary for one process: `0: rxe0: pid 342 pd 1 cq 1 qp 1 ...`,
/// each kind counted from its dump, in the kernel summary's order. A kind
/// whose dump is missing counts 0 when the device's summary says it has none
/// at all; otherwise it is left out and named in `missing`.
fn pid_summary_row(f: &NetlinkFacts, d: &DevFacts, pid: u32, missing: &mut Vec<String>) -> Row {
    let summary = f
        .summary
        .as_deref()
        .ok()
        .and_then(|s| s.iter().find(|s| s.dev_name == d.name));
    let kinds: Vec<ResKind> = match summary {
        Some(s) => s
            .entries
            .iter()
            .filter_map(|(n, _)| ResKind::parse(n))
            .collect(),
        None => SUMMARY_ORDER.to_vec(),
    };
    let mut row = Row::new(format!("{}: {}:", d.index, d.name));
    row.json_only("ifindex", Value::from(d.index));
    row.json_only("ifname", Value::from(d.name.as_str()));
    row.num("pid", pid);
    let mut unread = Vec::new();
    for kind in kinds {
        match d.resources.get(&kind) {
            Some(Ok(list)) => {
                let n = list
                    .iter()
                    .filter(|r| owned_by(&r.holder, Some(pid)))
                    .count();
                row.num(kind.name(), n as u64);
            }
            _ if summary.and_then(|s| s.count(kind.name())) == Some(0) => {
                row.num(kind.name(), 0u64)
            }
            Some(Err(e)) => unread.push(format!("{}: {e}", kind.name())),
            None => unread.push(format!("{}: not asked", kind.name())),
        }
    }
    if !unread.is_empty() {
        missing.push(format!("{}: pid {pid}: {}", d.name, unread.join("; ")));
    }
    row
}

/// The kernel's summary order (`rdma resource`), for a device without a summary.
const SUMMARY_ORDER: [ResKind; 7] = [
    ResKind::Pd,
    ResKind::Cq,
    ResKind::Qp,
    ResKind::CmId,
    ResKind::Mr,
    ResKind::Ctx,
    ResKind::Srq,
];

#[cfg(test)]
mod tests {
    use rdmakit_host::netlink::NlError;
    use rdmakit_host::source::Errno;

    use super::*;

    #[test]
    fn res_arguments_take_a_device_in_place_of_the_kind() {
        assert_eq!(parse_args(None, None), Ok((None, None)));
        assert_eq!(
            parse_args(Some("show"), Some("x".into())),
            Ok((None, Some("x".into())))
        );
        assert_eq!(parse_args(Some("qp"), None), Ok((Some(ResKind::Qp), None)));
        assert_eq!(
            parse_args(Some("soft0"), None),
            Ok((None, Some("soft0".into())))
        );
        assert_eq!(
            parse_args(Some("qps"), Some("soft0".into())),
            Err("unknown resource \"qps\": expected qp, cq, mr, pd, ctx, srq or cm_id".into())
        );
        assert!(parse_args(Some(""), None).is_err());
    }

    /// The real netlink answers of fixtures/healthy-busy (three test programs,
    /// pids 342, 343 and 345; no ctx, srq or cm_id dumps recorded).
    fn busy() -> NetlinkFacts {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/healthy-busy");
        let b = rdmakit_host::capture::import_capture(std::path::Path::new(dir))
            .expect("fixtures/healthy-busy imports");
        rdmakit_host::netlink::rdma_netlink(&b)
    }

    fn lines(s: &Shown) -> Vec<String> {
        s.rows.iter().map(Row::human).collect()
    }

    #[test]
    fn pid_filters_every_kind_of_a_real_capture() {
        let f = busy();
        // (kind, pid 342's object, objects of every owner: the kernel's own too)
        for (kind, want, all) in [
            (
                ResKind::Qp,
                "link rxe0/1 lqpn 17 rqpn 0 type RC state INIT",
                4,
            ),
            (ResKind::Cq, "dev rxe0 cqn 1 cqe 511", 4),
            (
                ResKind::Mr,
                "dev rxe0 mrn 0 rkey 0x0 lkey 0x23f mrlen 4096",
                3,
            ),
            (ResKind::Pd, "dev rxe0 pdn 1 local_dma_lkey 0x0", 4),
        ] {
            let q = Query {
                kind: Some(kind),
                dev: None,
                pid: Some(342),
            };
            let s = listing(&f, "capture", &[], q).unwrap();
            let l = lines(&s);
            assert_eq!(l.len(), 1, "{kind:?}: {l:?}");
            assert!(l[0].starts_with(want), "{kind:?}: {}", l[0]);
            assert_eq!(s.rows[0].get("pid"), Some(&Value::from(342u32)));
            assert!(s.complete(), "{:?}", s.missing);
            let every = Query { pid: None, ..q };
            assert_eq!(listing(&f, "capture", &[], every).unwrap().rows.len(), all);
        }
        let nobody = Query {
            kind: Some(ResKind::Qp),
            dev: None,
            pid: Some(1),
        };
        assert!(listing(&f, "capture", &[], nobody).unwrap().rows.is_empty());
    }

    #[test]
    fn pid_summary_counts_that_process_and_names_what_was_not_recorded() {
        let f = busy();
        let q = Query {
            kind: None,
            dev: None,
            pid: Some(343),
        };
        let s = listing(&f, "capture", &[], q).unwrap();
        assert_eq!(
            lines(&s),
            ["0: rxe0: pid 343 pd 1 cq 1 qp 1 cm_id 0 mr 1 srq 0"]
        );
        assert_eq!(
            s.missing,
            ["rxe0: pid 343: ctx: not recorded in this source"]
        );
    }

    #[test]
    fn no_rdma_in_the_kernel_is_a_note_not_a_gap() {
        let mut f = busy();
        f.devs = Err(NlError::Socket(Errno::EPROTONOSUPPORT));
        f.devices.clear();
        let s = listing(&f, "live host", &[], Query::default()).unwrap();
        assert!(s.rows.is_empty() && s.complete());
        assert!(
            s.notes[0].starts_with("live host: no kernel RDMA devices"),
            "{s:?}"
        );
        f.devs = Err(NlError::NotRecorded);
        let s = listing(&f, "b.json", &[], Query::default()).unwrap();
        assert!(!s.complete());
        assert!(s.missing[0].starts_with("b.json holds no RDMA netlink answers"));
        let q = Query {
            dev: Some("mlx5_0"),
            ..Query::default()
        };
        f.devs = Err(NlError::Socket(Errno::EPROTONOSUPPORT));
        assert!(listing(&f, "live host", &[], q)
            .unwrap_err()
            .starts_with("no RDMA device \"mlx5_0\""));
    }
}
