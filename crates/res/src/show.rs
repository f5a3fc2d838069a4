//! The rows of `rdmakit dev`, `rdmakit link` and `rdmakit stat [qp]` (`rdma dev`,
//! `rdma link`, `rdma statistic [qp]`) from [`NetlinkFacts`], filtered by device
//! and port, with what could not be read. Pure: the caller loads the facts and
//! prints.

use rdmakit_host::netlink::{self, NetlinkFacts, NlError};
use rdmakit_host::source::Errno;
use rdmakit_vocab::exit::Exit;

use crate::kernel;
use crate::row::{json, Row};

/// `DEV[/PORT]`, as `rdma link` and `rdma statistic` take it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkFilter {
    /// The device name.
    pub dev: String,
    /// The port (from 1); None: every port.
    pub port: Option<u32>,
}

impl LinkFilter {
    /// Parses `DEV` or `DEV/PORT`.
    ///
    /// # Errors
    /// A port that is not a number from 1, with the expected form.
    pub fn parse(s: &str) -> Result<LinkFilter, String> {
        match s.split_once('/') {
            None => Ok(LinkFilter {
                dev: s.to_string(),
                port: None,
            }),
            Some((d, p)) => match p.parse() {
                Ok(n) if n > 0 => Ok(LinkFilter {
                    dev: d.to_string(),
                    port: Some(n),
                }),
                _ => Err(format!(
                    "{s:?}: the port must be a number from 1 (DEV/PORT, e.g. mlx5_0/1)"
                )),
            },
        }
    }

    /// Whether `dev` (and `port`, when both are known) pass the filter.
    pub fn keeps(&self, dev: &str, port: Option<u32>) -> bool {
        self.dev == dev && (self.port.is_none() || port.is_none() || self.port == port)
    }
}

/// `rdmakit stat [OBJECT] [DEV[/PORT]]` as given: `show`, `link` or nothing
/// is the port counters, `qp` the QP counters, and a first word that is no
/// object is the link (`rdmakit stat mlx5_0/1`). Returns whether QP counters
/// are asked, and the link.
///
/// # Errors
/// An unknown object when a link was given too.
pub fn stat_args(
    object: Option<&str>,
    link: Option<String>,
) -> Result<(bool, Option<String>), String> {
    match object {
        None | Some("show") | Some("link") => Ok((false, link)),
        Some("qp") => Ok((true, link)),
        Some(other) if link.is_none() && !other.is_empty() => Ok((false, Some(other.to_string()))),
        Some(other) => Err(format!("unknown statistic object {other:?}: expected qp")),
    }
}

/// Rows, and what could not be read on the way.
#[derive(Debug, Default)]
pub struct Shown {
    /// The rows in device, then port order.
    pub rows: Vec<Row>,
    /// What could not be read, one line each (`what: why`), in order; the
    /// listing is partial when there is any.
    pub missing: Vec<String>,
    /// What the reader should know but is not missing (no RDMA in this
    /// kernel; registry entries ignored), one line each.
    pub notes: Vec<String>,
}

impl Shown {
    /// Everything asked was read (nothing is missing): exit 0, else 3
    /// (incomplete).
    pub fn complete(&self) -> bool {
        self.missing.is_empty()
    }

    /// The exit status: [`Exit::Ok`], or [`Exit::Incomplete`] when something
    /// was missing.
    pub fn exit(&self) -> Exit {
        match self.complete() {
            true => Exit::Ok,
            false => Exit::Incomplete,
        }
    }

    /// What goes to stderr before the rows: what the reader should know
    /// (`rdmakit: note: ...`), then what could not be read (`rdmakit: ...`).
    pub fn stderr(&self) -> String {
        let notes = self.notes.iter().map(|n| format!("rdmakit: note: {n}\n"));
        notes
            .chain(self.missing.iter().map(|m| format!("rdmakit: {m}\n")))
            .collect()
    }

    /// The rows for stdout: the JSON `rdma -j` prints for the same command
    /// (an array), or one `rdma`-style line each.
    pub fn stdout(&self, as_json: bool) -> String {
        match as_json {
            true => json(&self.rows),
            false => self.rows.iter().map(|r| r.human_lines() + "\n").collect(),
        }
    }
}

/// Whether the kernel's part of a view is there, from its device dump.
#[derive(Debug, PartialEq, Eq)]
pub enum KernelPart {
    /// The kernel answered: its devices are listed.
    Present,
    /// There is no RDMA in the kernel (its RDMA netlink protocol does not
    /// exist: EPROTONOSUPPORT), so there are no kernel devices to list — a
    /// fact, not a gap. `note` says so and what to check.
    Absent {
        /// For stderr.
        note: String,
    },
    /// The device list could not be read (not recorded in a bundle, a
    /// socket the kernel refused, a failed or garbled dump): the view misses
    /// the kernel's part. `missing` says why and what to do.
    Unread {
        /// For stderr.
        missing: String,
    },
}

/// The kernel part of a view of the source labelled `label`, from its device
/// dump `devs`.
pub fn kernel_part(devs: &Result<Vec<netlink::Dev>, NlError>, label: &str) -> KernelPart {
    match devs {
        Ok(_) => KernelPart::Present,
        Err(NlError::Socket(errno)) if *errno == Errno::EPROTONOSUPPORT => KernelPart::Absent {
            note: format!(
                "{label}: no kernel RDMA devices: the kernel has no RDMA netlink \
                 (EPROTONOSUPPORT: ib_core is not loaded, or no CONFIG_INFINIBAND); \
                 `rdmakit doctor` checks the kernel layer"
            ),
        },
        Err(e) => KernelPart::Unread {
            missing: unanswered(e, label),
        },
    }
}

/// The view's start from the kernel part: nothing missing when present or
/// absent (a note when absent), the reason when unread.
fn start(f: &NetlinkFacts, label: &str) -> (Shown, bool) {
    let mut out = Shown::default();
    let present = match kernel_part(&f.devs, label) {
        KernelPart::Present => true,
        KernelPart::Absent { note } => {
            out.notes.push(note);
            false
        }
        KernelPart::Unread { missing } => {
            out.missing.push(missing);
            false
        }
    };
    (out, present)
}

/// The error for a device name that `f` does not hold (nothing to say when
/// the device list itself was not read).
fn no_device(f: &NetlinkFacts, filter: Option<&LinkFilter>, out: &Shown) -> Result<(), String> {
    let Some(l) = filter else { return Ok(()) };
    let listed = f.devs.is_ok();
    if listed && !f.devices.iter().any(|x| x.name == l.dev) {
        return Err(no_such(&l.dev, true, out));
    }
    // No RDMA in the kernel: no device at all, so not this one.
    if !listed && out.complete() {
        return Err(no_such(&l.dev, false, out));
    }
    Ok(())
}

/// The rows of `rdma dev` for `dev` (None: every device) of the source
/// labelled `label`.
///
/// # Errors
/// `no RDMA device "x"` when `dev` names none the source could list.
pub fn dev_rows(f: &NetlinkFacts, dev: Option<&str>, label: &str) -> Result<Shown, String> {
    let (mut out, present) = start(f, label);
    let devs = f.devs.as_deref().unwrap_or_default();
    out.rows = devs
        .iter()
        .filter(|d| dev.is_none_or(|x| x == d.name))
        .map(kernel::dev_row)
        .collect();
    match dev {
        Some(d) if out.rows.is_empty() && out.complete() => Err(no_such(d, present, &out)),
        _ => Ok(out),
    }
}

/// `no RDMA device "x"`, and why there is none when the kernel has no RDMA.
fn no_such(dev: &str, present: bool, out: &Shown) -> String {
    match (present, out.notes.first()) {
        (false, Some(n)) => format!("no RDMA device {dev:?} ({n})"),
        _ => format!("no RDMA device {dev:?}"),
    }
}

/// The rows of `rdma link` for `filter` (None: every port of every device)
/// of the source labelled `label`.
///
/// # Errors
/// `no RDMA device "x"` when the filter names none.
pub fn link_rows(
    f: &NetlinkFacts,
    filter: Option<&LinkFilter>,
    label: &str,
) -> Result<Shown, String> {
    let (mut out, _) = start(f, label);
    for d in &f.devices {
        if filter.is_some_and(|l| l.dev != d.name) {
            continue;
        }
        let ports = match &d.ports {
            Ok(p) => p,
            Err(e) => {
                out.missing.push(format!("{}: ports: {e}", d.name));
                continue;
            }
        };
        for p in ports {
            if filter.is_some_and(|l| l.port.is_some_and(|x| x != p.port)) {
                continue;
            }
            out.rows.push(kernel::port_row(p));
        }
    }
    no_device(f, filter, &out)?;
    Ok(out)
}

/// The rows of `rdma statistic` (port counters) or, with `qp`, `rdma
/// statistic qp` (bound QP counters), for `filter`. A device without port
/// counters (EOPNOTSUPP) shows nothing and misses nothing.
///
/// # Errors
/// `no RDMA device "x"` when the filter names none.
pub fn stat_rows(
    f: &NetlinkFacts,
    qp: bool,
    filter: Option<&LinkFilter>,
    label: &str,
) -> Result<Shown, String> {
    let keep = |dev: &str, port: Option<u32>| filter.is_none_or(|l| l.keeps(dev, port));
    let (mut out, _) = start(f, label);
    for d in &f.devices {
        if !keep(&d.name, None) {
            continue;
        }
        if qp {
            match &d.qp_counters {
                Ok(list) => out.rows.extend(
                    list.iter()
                        .filter(|c| keep(&c.dev_name, c.port))
                        .map(|c| kernel::qp_counter_row(f, c)),
                ),
                Err(e) => out.missing.push(format!("{}: QP counters: {e}", d.name)),
            }
            continue;
        }
        for (port, st) in &d.port_stats {
            if !keep(&d.name, Some(*port)) {
                continue;
            }
            match st {
                Ok(s) => out.rows.push(kernel::port_stat_row(s)),
                Err(e) if e.errno() == Some(Errno(95)) => {}
                Err(e) => out
                    .missing
                    .push(format!("{}/{}: counters: {e}", d.name, port)),
            }
        }
    }
    no_device(f, filter, &out)?;
    Ok(out)
}

/// Why the device dump of the source labelled `label` gave nothing, and
/// what to do about it.
pub fn unanswered(e: &NlError, label: &str) -> String {
    match e {
        NlError::Socket(_) => format!(
            "{label}: kernel layer: {e}; `rdmakit doctor` checks the kernel layer (run as \
             root when it is a permission)"
        ),
        NlError::NotRecorded => format!(
            "{label} holds no RDMA netlink answers (recorded without them, or a tree with no \
             kernel behind it): `rdmakit collect` on the host records them"
        ),
        _ => format!("{label}: kernel layer: the device dump failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rdmakit_host::netlink::{self, DevFacts};

    use super::*;

    fn port(dev: &str, n: u32) -> netlink::Port {
        netlink::Port {
            dev_index: 3,
            dev_name: dev.into(),
            port: n,
            state: Some(4),
            phys_state: Some(5),
            ..Default::default()
        }
    }

    fn stat(dev: &str, n: u32) -> netlink::PortStat {
        netlink::PortStat {
            dev_index: 3,
            dev_name: dev.into(),
            port: n,
            counters: vec![("rx_write_requests".into(), u64::from(n))],
            unknown: vec![],
        }
    }

    fn device(name: &str, ports: Result<Vec<netlink::Port>, NlError>) -> DevFacts {
        DevFacts {
            index: 3,
            name: name.into(),
            ports,
            resources: BTreeMap::new(),
            port_stats: vec![
                (1, Ok(stat(name, 1))),
                (2, Err(NlError::Kernel(Errno(95)))),
                (3, Err(NlError::Kernel(Errno(13)))),
            ],
            qp_counters: Err(NlError::NotRecorded),
            chardev: Err(NlError::NotRecorded),
            limits: Err("not asked".into()),
        }
    }

    fn facts() -> NetlinkFacts {
        NetlinkFacts {
            devs: Ok(vec![]),
            summary: Ok(vec![]),
            sys: Ok(netlink::Sys::default()),
            devices: vec![
                device("mlx5_0", Ok(vec![port("mlx5_0", 1), port("mlx5_0", 2)])),
                device("mlx5_1", Err(NlError::NotRecorded)),
            ],
            owners: BTreeMap::new(),
            proc_listed: false,
            file_holders: vec![],
        }
    }

    #[test]
    fn link_filters_parse_as_rdma_takes_them() {
        assert_eq!(
            LinkFilter::parse("mlx5_0/1"),
            Ok(LinkFilter {
                dev: "mlx5_0".into(),
                port: Some(1)
            })
        );
        assert_eq!(LinkFilter::parse("mlx5_0").unwrap().port, None);
        let e = LinkFilter::parse("mlx5_0/0").unwrap_err();
        assert_eq!(
            e,
            "\"mlx5_0/0\": the port must be a number from 1 (DEV/PORT, e.g. mlx5_0/1)"
        );
        assert!(LinkFilter::parse("mlx5_0/x").is_err());
    }

    #[test]
    fn link_rows_filter_by_device_and_port_and_name_what_is_missing() {
        let f = facts();
        let all = link_rows(&f, None, "b").unwrap();
        assert_eq!(all.rows.len(), 2);
        assert_eq!(all.missing, ["mlx5_1: ports: not recorded in this source"]);
        let one = LinkFilter::parse("mlx5_0/2").unwrap();
        let shown = link_rows(&f, Some(&one), "b").unwrap();
        assert_eq!(shown.rows.len(), 1);
        assert!(shown.rows[0].human().starts_with("link mlx5_0/2 "));
        assert!(shown.missing.is_empty());
        let none = LinkFilter::parse("mlx5_9").unwrap();
        assert_eq!(
            link_rows(&f, Some(&none), "b").unwrap_err(),
            "no RDMA device \"mlx5_9\""
        );
    }

    #[test]
    fn stat_rows_skip_eopnotsupp_and_report_other_errors() {
        let f = facts();
        let only = LinkFilter::parse("mlx5_0").unwrap();
        let shown = stat_rows(&f, false, Some(&only), "b").unwrap();
        assert_eq!(
            shown.rows.iter().map(Row::human).collect::<Vec<_>>(),
            ["link mlx5_0/1 rx_write_requests 1"]
        );
        assert_eq!(shown.missing.len(), 1);
        assert!(
            shown.missing[0].starts_with("mlx5_0/3: counters: "),
            "{shown:?}"
        );
        // The text output adds the congestion line; the JSON stays rdma -j's.
        let mut cc = shown;
        cc.rows[0].note = crate::kernel::congestion_note(&[("np_cnp_sent".into(), 9)]);
        assert_eq!(
            cc.stdout(false),
            "link mlx5_0/1 rx_write_requests 1\n    congestion: CNPs sent 9\n"
        );
        assert!(!cc.stdout(true).contains("congestion"));
        let qp = stat_rows(&f, true, None, "b").unwrap();
        assert!(qp.rows.is_empty());
        assert_eq!(qp.missing.len(), 2);
        assert!(stat_rows(&f, true, Some(&LinkFilter::parse("x").unwrap()), "b").is_err());
    }

    #[test]
    fn stat_arguments_take_a_link_in_place_of_the_object() {
        assert_eq!(stat_args(None, None), Ok((false, None)));
        assert_eq!(
            stat_args(Some("link"), Some("d/1".into())),
            Ok((false, Some("d/1".into())))
        );
        assert_eq!(stat_args(Some("qp"), None), Ok((true, None)));
        assert_eq!(
            stat_args(Some("mlx5_0/1"), None),
            Ok((false, Some("mlx5_0/1".into())))
        );
        assert_eq!(
            stat_args(Some("qps"), Some("d".into())),
            Err("unknown statistic object \"qps\": expected qp".into())
        );
    }

    #[test]
    fn dev_rows_name_a_missing_device() {
        let f = facts();
        assert!(dev_rows(&f, None, "b").unwrap().rows.is_empty());
        assert_eq!(
            dev_rows(&f, Some("mlx5_0"), "b").unwrap_err(),
            "no RDMA device \"mlx5_0\""
        );
    }

    #[test]
    fn unanswered_says_what_to_do() {
        assert_eq!(
            unanswered(&NlError::NotRecorded, "bundle.json"),
            "bundle.json holds no RDMA netlink answers (recorded without them, or a tree with \
             no kernel behind it): `rdmakit collect` on the host records them"
        );
        assert!(unanswered(&NlError::Socket(Errno(13)), "live host")
            .starts_with("live host: kernel layer: NETLINK_RDMA socket: EACCES"));
        assert_eq!(
            kernel_part(&Err(NlError::Socket(Errno(93))), "live host"),
            KernelPart::Absent {
                note: "live host: no kernel RDMA devices: the kernel has no RDMA netlink \
                       (EPROTONOSUPPORT: ib_core is not loaded, or no CONFIG_INFINIBAND); \
                       `rdmakit doctor` checks the kernel layer"
                    .into()
            }
        );
        assert!(matches!(
            kernel_part(&Err(NlError::NotRecorded), "b"),
            KernelPart::Unread { .. }
        ));
    }
}
