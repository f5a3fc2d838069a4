//! Native RDMA netlink (NLDEV): what `rdma dev / link / resource / statistic / system`
//! ask the kernel, asked through a [`Source`] so a capture or bundle replays it.
//!
//! - [`msg`]: request builder and the framing parser (`nlmsghdr` walk, attributes).
//!   Pure, never panics: truncated or lying lengths are [`msg::Malformed`].
//! - [`views`]: typed views of each reply (device, port, resource summary, QP / CQ /
//!   MR / PD / ctx / SRQ / CM ID entries, port and QP counters, system settings,
//!   monitor events); unknown attributes are kept as (type, bytes).
//! - [`requests`]: the exact requests (byte-identical to the fixtures' `.req.bin`).
//! - [`rdma_netlink`]: the collector: dumps devices, then per device its ports,
//!   resources and counters, and checks every owning PID in /proc.
//!
//! Errors the kernel answers (EPROTONOSUPPORT: no RDMA; EOPNOTSUPP: an older kernel;
//! EPERM: needs CAP_NET_ADMIN) are values in [`NetlinkFacts`], never panics.
//!
//! ```
//! use rdmakit_host::netlink::{self, msg};
//! let req = netlink::requests::res_dump(netlink::ResKind::Qp, 0);
//! // A reply that is only the dump's end: success, no QPs.
//! let mut done = Vec::new();
//! done.extend_from_slice(&20u32.to_ne_bytes());
//! done.extend_from_slice(&3u16.to_ne_bytes());
//! done.extend_from_slice(&2u16.to_ne_bytes());
//! done.extend_from_slice(&[0; 12]);
//! assert_eq!(netlink::interpret(&req, &done).unwrap().len(), 0);
//! assert!(msg::parse_messages(&done[..10]).is_err());
//! ```

pub mod consts;
pub mod monitor;
pub mod msg;
pub mod names;
pub mod views;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::source::{Errno, Probe, Source};
pub use msg::{Malformed, RawAttr};
pub use views::{
    Chardev, Dev, Event, Holder, Port, PortStat, QpCounter, ResKind, ResSummary, Resource, Sys,
};

/// Why a netlink question has no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum NlError {
    /// The source has no answer for this request (a capture that did not ask it,
    /// a bundle from an older rdmakit, a captured tree with no kernel behind it).
    #[error("not recorded in this source")]
    NotRecorded,
    /// Not asked: ib_core is installed but not loaded, and opening a NETLINK_RDMA
    /// socket would make the kernel load it.
    #[error("not asked: ib_core is not loaded, and opening NETLINK_RDMA would load it")]
    NotAsked,
    /// The NETLINK_RDMA socket could not be used (EPROTONOSUPPORT: no RDMA in the
    /// kernel; EACCES/EPERM: denied).
    #[error("NETLINK_RDMA socket: {}", describe(*.0))]
    Socket(Errno),
    /// The kernel refused the request (NLMSG_ERROR).
    #[error("kernel answered {}", describe(*.0))]
    Kernel(Errno),
    /// A dump ended with a negative status in NLMSG_DONE.
    #[error("dump failed: {}", describe(*.0))]
    Dump(Errno),
    /// The reply bytes are not valid netlink.
    #[error("malformed reply: {0}")]
    Malformed(Malformed),
    /// The reply stops before NLMSG_DONE or NLMSG_ERROR.
    #[error("reply ends without NLMSG_DONE or NLMSG_ERROR")]
    Unterminated,
}

impl NlError {
    /// The errno behind the error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            NlError::Socket(e) | NlError::Kernel(e) | NlError::Dump(e) => Some(*e),
            _ => None,
        }
    }
}

/// "EOPNOTSUPP (Operation not supported: this kernel or driver lacks the command)".
pub fn describe(e: Errno) -> String {
    let what = match e.0 {
        93 => ": the kernel has no RDMA netlink (ib_core not loaded, or no CONFIG_INFINIBAND)",
        95 => ": this kernel or driver does not support the command (older kernel?)",
        1 | 13 => ": the command needs CAP_NET_ADMIN",
        22 => ": the kernel rejected the request's attributes",
        19 => ": no such device (removed meanwhile?)",
        _ => "",
    };
    match crate::errno::message(e.0) {
        Some(m) => format!("{e} ({m}{what})"),
        None => format!("{e}{what}"),
    }
}

impl From<Malformed> for NlError {
    fn from(m: Malformed) -> NlError {
        NlError::Malformed(m)
    }
}

/// The exact requests the collector sends. Dumps carry NLM_F_REQUEST|NLM_F_DUMP (and
/// DEV_INDEX where the kernel requires it); single objects NLM_F_REQUEST|NLM_F_ACK.
/// The sequence number is 1000 + command, as in the fixtures.
pub mod requests {
    use super::consts::{attr, cmd, nldev};
    use super::msg::{Request, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST};
    use super::ResKind;

    fn dump(op: u16) -> Request {
        Request::new(nldev(op), NLM_F_REQUEST | NLM_F_DUMP, 1000 + u32::from(op))
    }

    fn doit(op: u16) -> Request {
        Request::new(nldev(op), NLM_F_REQUEST | NLM_F_ACK, 1000 + u32::from(op))
    }

    /// Every device (`rdma dev`).
    pub fn devices() -> Vec<u8> {
        dump(cmd::GET).build()
    }

    /// The ports of one device (`rdma link`).
    pub fn ports(dev: u32) -> Vec<u8> {
        dump(cmd::PORT_GET).u32(attr::DEV_INDEX, dev).build()
    }

    /// The resource summary of every device (`rdma resource`).
    pub fn res_summary() -> Vec<u8> {
        dump(cmd::RES_GET).build()
    }

    /// One kind of resource of one device (`rdma resource show qp`).
    pub fn res_dump(kind: ResKind, dev: u32) -> Vec<u8> {
        dump(kind.command()).u32(attr::DEV_INDEX, dev).build()
    }

    /// The uverbs character device of a device.
    pub fn chardev(dev: u32) -> Vec<u8> {
        doit(cmd::GET_CHARDEV)
            .u32(attr::DEV_INDEX, dev)
            .string(attr::CHARDEV_TYPE, "uverbs")
            .build()
    }

    /// One port's hardware counters (`rdma statistic`).
    pub fn port_stat(dev: u32, port: u32) -> Vec<u8> {
        doit(cmd::STAT_GET)
            .u32(attr::DEV_INDEX, dev)
            .u32(attr::PORT_INDEX, port)
            .build()
    }

    /// The QP counters of one device (`rdma statistic qp`).
    pub fn qp_counters(dev: u32) -> Vec<u8> {
        dump(cmd::STAT_GET)
            .u32(attr::DEV_INDEX, dev)
            .u32(attr::STAT_RES, u32::from(attr::RES_QP))
            .build()
    }

    /// System settings (`rdma system`).
    pub fn sys() -> Vec<u8> {
        doit(cmd::SYS_GET).build()
    }
}

/// Reads a reply to `req`: the attributes of each answer message, in order.
///
/// # Errors
/// The kernel's NLMSG_ERROR or failed dump status, malformed bytes, or a reply
/// without an end.
pub fn interpret(req: &[u8], reply: &[u8]) -> Result<Vec<Vec<RawAttr>>, NlError> {
    let want = req.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let mut out = Vec::new();
    for m in msg::parse_messages(reply)? {
        match m.body {
            msg::Body::Data(payload) => {
                if want.is_none() || want == Some(m.kind) {
                    out.push(msg::parse_attrs(&payload)?);
                }
            }
            msg::Body::Error(0) | msg::Body::Done(0) => return Ok(out),
            msg::Body::Error(e) => return Err(NlError::Kernel(Errno(e.saturating_neg()))),
            msg::Body::Done(e) => return Err(NlError::Dump(Errno(e.saturating_neg()))),
            msg::Body::Other => {}
        }
    }
    Err(NlError::Unterminated)
}

/// Sends one request through the source and reads the answer.
///
/// # Errors
/// See [`NlError`].
pub fn exchange(src: &dyn Source, req: &[u8]) -> Result<Vec<Vec<RawAttr>>, NlError> {
    match src.probe(&Probe::Netlink(req.to_vec())) {
        Ok(reply) => interpret(req, &reply),
        Err(e) if e == Errno::ENOENT => Err(NlError::NotRecorded),
        Err(e) => Err(NlError::Socket(e)),
    }
}

fn each<T>(
    msgs: Result<Vec<Vec<RawAttr>>, NlError>,
    f: impl Fn(&[RawAttr]) -> Result<T, Malformed>,
) -> Result<Vec<T>, NlError> {
    msgs?.iter().map(|m| f(m).map_err(NlError::from)).collect()
}

fn one<T>(
    msgs: Result<Vec<Vec<RawAttr>>, NlError>,
    f: impl Fn(&[RawAttr]) -> Result<T, Malformed>,
) -> Result<T, NlError> {
    let msgs = msgs?;
    let first = msgs.first().ok_or(NlError::Unterminated)?;
    Ok(f(first)?)
}

/// Whether the process that owns a resource still exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Liveness {
    Alive,
    /// `/proc/<pid>/stat` says Z: exited, not reaped; its RDMA objects stay until the
    /// parent reaps it.
    Zombie,
    /// No `/proc/<pid>` in a source that has the process table.
    Dead,
    /// Held by a kernel module (RES_KERN_NAME).
    Kernel,
    /// The kernel named no owner: the creating process exited and was reaped,
    /// and another process keeps the device file open (see [`orphaned`]).
    Orphaned,
    /// The source has no process table (a capture of /sys only), or the kernel
    /// named no owner.
    Unknown,
}

impl Liveness {
    pub fn name(self) -> &'static str {
        match self {
            Liveness::Alive => "alive",
            Liveness::Zombie => "zombie",
            Liveness::Dead => "dead",
            Liveness::Kernel => "kernel",
            Liveness::Orphaned => "orphaned",
            Liveness::Unknown => "unknown",
        }
    }
}

/// What /proc says about one owning PID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Owner {
    pub pid: u32,
    pub state: Liveness,
    /// The state letter of `/proc/<pid>/stat` ("S", "R", "Z", ...), when read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proc_state: Option<char>,
    /// `/proc/<pid>/comm`, when readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
}

/// Everything one device answered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DevFacts {
    pub index: u32,
    pub name: String,
    pub ports: Result<Vec<Port>, NlError>,
    pub resources: BTreeMap<ResKind, Result<Vec<Resource>, NlError>>,
    /// STAT_GET per port: (port, counters).
    pub port_stats: Vec<(u32, Result<PortStat, NlError>)>,
    pub qp_counters: Result<Vec<QpCounter>, NlError>,
    pub chardev: Result<Chardev, NlError>,
    /// The device's limits from `ibv_query_device` ([`crate::source::Probe::DeviceLimits`]),
    /// or why they are unknown.
    pub limits: Result<DevLimits, String>,
}

/// The limits usage is compared against (`ibv_query_device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DevLimits {
    pub max_qp: u64,
    pub max_cq: u64,
    pub max_mr: u64,
    pub max_pd: u64,
}

impl DevLimits {
    /// The limit for objects of `kind`, when there is one.
    pub fn of(&self, kind: ResKind) -> Option<u64> {
        match kind {
            ResKind::Qp => Some(self.max_qp),
            ResKind::Cq => Some(self.max_cq),
            ResKind::Mr => Some(self.max_mr),
            ResKind::Pd => Some(self.max_pd),
            _ => None,
        }
    }

    /// Parses the probe's answer: "max_qp N" lines; all four must be there.
    pub fn parse(text: &str) -> Result<DevLimits, String> {
        let mut v = [None::<u64>; 4];
        for line in text.lines() {
            let mut w = line.split_whitespace();
            let (Some(k), Some(n)) = (w.next(), w.next()) else {
                continue;
            };
            let i = match k {
                "max_qp" => 0,
                "max_cq" => 1,
                "max_mr" => 2,
                "max_pd" => 3,
                _ => continue,
            };
            v[i] = Some(
                n.parse()
                    .map_err(|_| format!("{k}: {n:?} is not a number"))?,
            );
        }
        match v {
            [Some(max_qp), Some(max_cq), Some(max_mr), Some(max_pd)] => Ok(DevLimits {
                max_qp,
                max_cq,
                max_mr,
                max_pd,
            }),
            _ => Err(format!("incomplete limits: \"{}\"", text.escape_default())),
        }
    }
}

fn limits(src: &dyn Source, dev: &str) -> Result<DevLimits, String> {
    match src.probe(&crate::source::Probe::DeviceLimits(dev.to_string())) {
        Ok(b) => DevLimits::parse(&String::from_utf8_lossy(&b)),
        Err(e) if e.0 == 38 => Err("no libibverbs query was made (a bundle or tree without \
             device limits, or the rdma-core provider is unavailable)"
            .to_string()),
        Err(e) if e.0 == 19 => Err(format!(
            "rdma-core's libibverbs could not be loaded or does not list {dev}"
        )),
        Err(e) if e == crate::source::Errno::ENOENT => {
            Err("not recorded in this source".to_string())
        }
        Err(e) => Err(format!("the query failed with {e}")),
    }
}

/// What NETLINK_RDMA said about the host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetlinkFacts {
    /// The device dump; an error here (EPROTONOSUPPORT, not recorded) means nothing
    /// else was asked.
    pub devs: Result<Vec<Dev>, NlError>,
    pub summary: Result<Vec<ResSummary>, NlError>,
    pub sys: Result<Sys, NlError>,
    pub devices: Vec<DevFacts>,
    /// Every PID that owns a resource or a counter, and what /proc says about it.
    pub owners: BTreeMap<u32, Owner>,
    /// True when the source holds the process table (/proc lists PID directories);
    /// otherwise a missing `/proc/<pid>` proves nothing and owners are "unknown".
    pub proc_listed: bool,
    /// Processes holding a `/dev/infiniband/uverbs*` file open. Read only when
    /// some user object has no owner PID (see [`orphaned`]): that is the file
    /// that keeps those objects alive.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub file_holders: Vec<FileHolder>,
}

/// A process with a uverbs device file open (`/proc/<pid>/fd/<fd>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileHolder {
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    pub fd: String,
    /// The link's target, e.g. `/dev/infiniband/uverbs0`.
    pub file: String,
}

/// Whether the kernel names no owner for a resource. Since restrack (4.17)
/// every user object carries RES_PID and every kernel object RES_KERN_NAME;
/// nldev leaves the PID out once the creating task has exited and been
/// reaped. Such objects live on because another process still has the
/// device file open: a child that inherited the descriptor across fork, or
/// one it was passed to.
pub fn orphaned(r: &Resource) -> bool {
    r.holder == Holder::Unknown
}

impl NetlinkFacts {
    /// Facts for a source that could not be asked at all.
    pub fn unavailable(e: NlError) -> NetlinkFacts {
        NetlinkFacts {
            devs: Err(e.clone()),
            summary: Err(e.clone()),
            sys: Err(e),
            devices: Vec::new(),
            owners: BTreeMap::new(),
            proc_listed: false,
            file_holders: Vec::new(),
        }
    }

    /// The liveness of a resource's owner and its process name (for kernel owners,
    /// the module name).
    pub fn owner_of(&self, holder: &Holder) -> (Liveness, Option<String>) {
        match holder {
            Holder::Kernel(n) => (Liveness::Kernel, Some(n.clone())),
            Holder::Unknown => (Liveness::Orphaned, None),
            Holder::Pid(p) => match self.owners.get(p) {
                Some(o) => (o.state, o.comm.clone()),
                None => (Liveness::Unknown, None),
            },
        }
    }

    /// Every resource of one kind, over all devices, in device order; the errors of
    /// devices whose dump failed come back separately.
    pub fn resources(&self, kind: ResKind) -> (Vec<&Resource>, Vec<(&str, &NlError)>) {
        let mut ok = Vec::new();
        let mut errs = Vec::new();
        for d in &self.devices {
            match d.resources.get(&kind) {
                Some(Ok(v)) => ok.extend(v.iter()),
                Some(Err(e)) => errs.push((d.name.as_str(), e)),
                None => {}
            }
        }
        (ok, errs)
    }
}

/// Asks the kernel (through `src`) for devices, then per device for ports,
/// resources, counters and the uverbs character device, then reads /proc for
/// every owning PID. Never fails: each answer is a value or an [`NlError`].
pub fn rdma_netlink(src: &dyn Source) -> NetlinkFacts {
    let devs = each(exchange(src, &requests::devices()), views::dev);
    if let Err(e @ (NlError::Socket(_) | NlError::NotRecorded)) = &devs {
        return NetlinkFacts::unavailable(e.clone());
    }
    let summary = each(exchange(src, &requests::res_summary()), views::res_summary);
    let sys = one(exchange(src, &requests::sys()), views::sys);
    let mut devices = Vec::new();
    for d in devs.as_deref().unwrap_or_default() {
        devices.push(device(src, d));
    }
    let mut pids = BTreeSet::new();
    for d in &devices {
        for r in d.resources.values().flatten().flatten() {
            if let Holder::Pid(p) = r.holder {
                pids.insert(p);
            }
        }
        for c in d.qp_counters.iter().flatten() {
            if let Holder::Pid(p) = c.holder {
                pids.insert(p);
            }
        }
    }
    let proc_listed = proc_listed(src);
    let owners = pids
        .into_iter()
        .map(|p| (p, owner(src, p, proc_listed)))
        .collect();
    let any_orphan = devices
        .iter()
        .any(|d| d.resources.values().flatten().flatten().any(orphaned));
    let file_holders = if any_orphan && proc_listed {
        uverbs_holders(src)
    } else {
        Vec::new()
    };
    NetlinkFacts {
        devs,
        summary,
        sys,
        devices,
        owners,
        proc_listed,
        file_holders,
    }
}

/// Every `/proc/<pid>/fd/<n>` that links to a `/dev/infiniband/uverbs*` file.
pub fn uverbs_holders(src: &dyn Source) -> Vec<FileHolder> {
    let mut out = Vec::new();
    let Ok(procs) = src.read_dir("/proc") else {
        return out;
    };
    for p in procs {
        let Ok(pid) = p.name.parse::<u32>() else {
            continue;
        };
        let Ok(fds) = src.read_dir(&format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds {
            let Ok(target) = src.read_link(&format!("/proc/{pid}/fd/{}", fd.name)) else {
                continue;
            };
            if target.starts_with("/dev/infiniband/uverbs") {
                let comm = src
                    .read(&format!("/proc/{pid}/comm"))
                    .ok()
                    .map(|b| crate::collect::strip_value(&b));
                out.push(FileHolder {
                    pid,
                    comm,
                    fd: fd.name.clone(),
                    file: target,
                });
            }
        }
    }
    out
}

fn device(src: &dyn Source, d: &Dev) -> DevFacts {
    let ports = each(exchange(src, &requests::ports(d.index)), views::port);
    let mut resources = BTreeMap::new();
    for kind in ResKind::ALL {
        let r = exchange(src, &requests::res_dump(kind, d.index)).and_then(|msgs| {
            let mut all = Vec::new();
            for m in &msgs {
                all.extend(views::resources(kind, m)?);
            }
            Ok(all)
        });
        resources.insert(kind, r);
    }
    let port_nums: Vec<u32> = match &ports {
        Ok(v) if !v.is_empty() => v.iter().map(|p| p.port).collect(),
        _ => (1..=d.ports.unwrap_or(0).min(64)).collect(),
    };
    let port_stats = port_nums
        .into_iter()
        .map(|p| {
            (
                p,
                one(
                    exchange(src, &requests::port_stat(d.index, p)),
                    views::port_stat,
                ),
            )
        })
        .collect();
    let qp_counters = exchange(src, &requests::qp_counters(d.index)).and_then(|msgs| {
        let mut all = Vec::new();
        for m in &msgs {
            all.extend(views::qp_counters(m)?);
        }
        Ok(all)
    });
    let chardev = one(exchange(src, &requests::chardev(d.index)), views::chardev);
    DevFacts {
        index: d.index,
        name: d.name.clone(),
        ports,
        resources,
        port_stats,
        qp_counters,
        chardev,
        limits: limits(src, &d.name),
    }
}

/// True when `/proc` in the source lists at least one PID directory.
pub fn proc_listed(src: &dyn Source) -> bool {
    src.read_dir("/proc").is_ok_and(|v| {
        v.iter()
            .any(|e| !e.name.is_empty() && e.name.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// What `/proc/<pid>/stat` and `/proc/<pid>/comm` say about `pid`.
pub fn owner(src: &dyn Source, pid: u32, proc_listed: bool) -> Owner {
    let comm = src
        .read(&format!("/proc/{pid}/comm"))
        .ok()
        .map(|b| crate::collect::strip_value(&b));
    match src.read(&format!("/proc/{pid}/stat")) {
        Ok(b) => {
            let text = String::from_utf8_lossy(&b);
            // "342 (ibv_rc_pingpong) S 1 ...": the state follows the last ')'.
            let st = text
                .rfind(')')
                .and_then(|i| text[i + 1..].trim_start().chars().next());
            let state = match st {
                Some('Z') => Liveness::Zombie,
                Some('X' | 'x') => Liveness::Dead,
                Some(_) => Liveness::Alive,
                None => Liveness::Unknown,
            };
            Owner {
                pid,
                state,
                proc_state: st,
                comm,
            }
        }
        Err(e) if e == Errno::ENOENT && proc_listed => Owner {
            pid,
            state: Liveness::Dead,
            proc_state: None,
            comm: None,
        },
        Err(_) => Owner {
            pid,
            state: Liveness::Unknown,
            proc_state: None,
            comm,
        },
    }
}
