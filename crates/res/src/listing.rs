//! `rdmakit res`: the rows of every device — the kernel's tracked objects
//! (when its RDMA netlink answered) and the soft NIC's registry — for one
//! resource kind or the per-device summary, with what could not be read.

use rdmakit_host::netlink::{Dev, NetlinkFacts, NlError, ResKind};
use rdmakit_host::source::Errno;

use crate::row::Row;
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

/// Whether the kernel part of a listing is there, from its device dump.
#[derive(Debug, PartialEq, Eq)]
pub struct KernelPart {
    /// The kernel answered: its devices are listed.
    pub present: bool,
    /// Something that exists could not be asked (the listing is partial).
    pub partial: bool,
    /// A note for stderr when the kernel part is absent.
    pub note: Option<String>,
}

/// The kernel part from the device dump `devs`: on a `live` host a socket
/// error leaves it out (the soft NIC is still listed) — EPROTONOSUPPORT (no
/// RDMA in the kernel) misses nothing, any other errno makes the listing
/// partial.
///
/// # Errors
/// Any other failure, or any failure of a recorded source: why, as
/// [`crate::show::unanswered`] says it for `label`.
pub fn kernel_part(
    devs: &Result<Vec<Dev>, NlError>,
    live: bool,
    label: &str,
) -> Result<KernelPart, String> {
    match devs {
        Ok(_) => Ok(KernelPart {
            present: true,
            partial: false,
            note: None,
        }),
        Err(NlError::Socket(e)) if live => Ok(KernelPart {
            present: false,
            partial: *e != Errno::EPROTONOSUPPORT,
            note: Some(format!(
                "note: kernel part absent ({}); showing the rdmakit soft NIC only",
                NlError::Socket(*e)
            )),
        }),
        Err(e) => Err(crate::show::unanswered(e, label)),
    }
}

/// What `rdmakit res` prints.
#[derive(Debug, Default)]
pub struct Listing {
    /// The rows, kernel devices first.
    pub rows: Vec<Row>,
    /// What could not be read, one line each (`what: why`), in order.
    pub missing: Vec<String>,
    /// What was read but ignored (the soft NIC registry's forged or foreign
    /// entries, refused directories), one line each with the path and why.
    pub notes: Vec<String>,
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
        l.notes.extend(d.notes.iter().cloned());
        match kind {
            None => l.rows.push(soft::summary_row(d)),
            Some(k) => l.rows.extend(soft::rows(k, d)),
        }
    }
    l
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn kernel_part_absent_only_on_a_live_host() {
        let ok = kernel_part(&Ok(vec![]), false, "x").unwrap();
        assert!(ok.present && !ok.partial && ok.note.is_none());
        let none =
            kernel_part(&Err(NlError::Socket(Errno::EPROTONOSUPPORT)), true, "live").unwrap();
        assert!(!none.present && !none.partial);
        assert!(none.note.unwrap().starts_with("note: kernel part absent ("));
        let denied = kernel_part(&Err(NlError::Socket(Errno(13))), true, "live").unwrap();
        assert!(!denied.present && denied.partial);
        let recorded = kernel_part(&Err(NlError::Socket(Errno(13))), false, "b.json");
        assert!(recorded.unwrap_err().starts_with("kernel layer: "));
        assert!(kernel_part(&Err(NlError::NotRecorded), true, "b.json")
            .unwrap_err()
            .starts_with("b.json holds no RDMA netlink answers"));
    }
}
