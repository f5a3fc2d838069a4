//! Application layer, kernel-tracked objects: RDMA resources (QPs, CQs, MRs, PDs,
//! contexts, SRQs, CM IDs) whose owning process is dead or a zombie.
//!
//! Works on the netlink view ([`rdmakit_host::netlink::NetlinkFacts`]): the kernel's
//! restrack names the owning PID of every user object, /proc says whether that PID
//! still runs.

use std::collections::BTreeMap;

use crate::checks::{Ctx, Outcome};
use crate::codes::Code;
use crate::codes::Severity;
use crate::finding::{Evidence, Finding};
use rdmakit_host::model::RdmaCgroup;
use rdmakit_host::netlink::{orphaned, FileHolder, Holder, Liveness, ResKind, Resource};
use rdmakit_host::parse::cgroup::RdmaValues;

/// RDK-R001: one finding per dead or zombie PID that still owns RDMA objects,
/// and one per device whose objects the kernel names no owner for (their
/// creator exited; another process keeps the device file open).
pub fn dead_owners(cx: &Ctx) -> Outcome {
    let nl = &cx.facts.netlink;
    if let Err(e) = &nl.devs {
        return Outcome::NotChecked(format!("RDMA netlink gave no device list: {e}"));
    }
    // pid -> every object it owns, over all devices and kinds.
    let mut by_pid: BTreeMap<u32, Vec<&Resource>> = BTreeMap::new();
    let mut orphans: BTreeMap<&str, Vec<&Resource>> = BTreeMap::new();
    let mut unasked = Vec::new();
    for d in &nl.devices {
        for (kind, r) in &d.resources {
            match r {
                Ok(list) => {
                    for res in list {
                        if let Holder::Pid(p) = res.holder {
                            by_pid.entry(p).or_default().push(res);
                        } else if orphaned(res) {
                            orphans.entry(d.name.as_str()).or_default().push(res);
                        }
                    }
                }
                // Not every kernel has every dump (ctx/srq since 5.x); only the
                // dumps that answered count.
                Err(_) => unasked.push(format!("{} {}", d.name, kind.name())),
            }
        }
    }
    let mut out = Vec::new();
    for (dev, objs) in &orphans {
        let facts = nl.devices.iter().find(|d| d.name == *dev);
        let chardev = facts
            .and_then(|d| d.chardev.as_ref().ok())
            .and_then(|c| c.name.clone());
        // The device's QP headroom, when the limits were read.
        let qp_room = facts.and_then(|d| {
            let max = d.limits.as_ref().ok()?.of(ResKind::Qp)?;
            let used = d.resources.get(&ResKind::Qp)?.as_ref().ok()?.len() as u64;
            Some((used, max))
        });
        let holders: Vec<&FileHolder> = nl
            .file_holders
            .iter()
            .filter(|h| {
                chardev
                    .as_deref()
                    .is_none_or(|c| h.file == format!("/dev/infiniband/{c}"))
            })
            .collect();
        out.push(orphan_finding(
            dev,
            chardev.as_deref(),
            objs,
            &holders,
            nl.proc_listed,
            qp_room,
        ));
    }
    if by_pid.is_empty() {
        return if out.is_empty() {
            Outcome::pass()
        } else {
            Outcome::Findings(out)
        };
    }
    if !nl.proc_listed {
        return Outcome::NotChecked(format!(
            "{} process(es) own RDMA objects, but the source has no process table \
             (/proc/<pid>) to tell whether they still run",
            by_pid.len()
        ));
    }
    for (pid, objs) in &by_pid {
        let owner = nl.owners.get(pid);
        let state = owner.map_or(Liveness::Unknown, |o| o.state);
        if !matches!(state, Liveness::Dead | Liveness::Zombie) {
            continue;
        }
        out.push(finding(
            *pid,
            state,
            owner.and_then(|o| o.comm.as_deref()),
            objs,
        ));
    }
    Outcome::Findings(out)
}

fn orphan_finding(
    dev: &str,
    chardev: Option<&str>,
    objs: &[&Resource],
    holders: &[&FileHolder],
    proc_listed: bool,
    qp_room: Option<(u64, u64)>,
) -> Finding {
    let file = chardev.map_or("/dev/infiniband/uverbs*".to_string(), |c| {
        format!("/dev/infiniband/{c}")
    });
    let who = match holders {
        [] if proc_listed => {
            format!("no process has {file} open any more, so the driver is stuck tearing them down")
        }
        [] => format!("the source has no process table to tell which process holds {file} open"),
        hs => {
            let names: Vec<String> = hs
                .iter()
                .map(|h| match &h.comm {
                    Some(c) => format!("pid {} ({c})", h.pid),
                    None => format!("pid {}", h.pid),
                })
                .collect();
            format!(
                "they stay alive because {} still {} {file} open (a descriptor inherited \
                 across fork, or passed to it)",
                names.join(", "),
                if hs.len() == 1 { "holds" } else { "hold" }
            )
        }
    };
    let mut f = Finding::new(
        Code::R001,
        dev.to_string(),
        format!(
            "{} {} no owner: the process that created them has exited (the kernel \
             stopped naming its PID); {who}. They count against the device's limits{}, \
             and new ibv_create_qp calls fail with ENOSPC or ENOMEM once one is reached",
            count_line(objs),
            if objs.len() == 1 { "has" } else { "have" },
            qp_room.map_or(String::new(), |(used, max)| format!(
                " ({dev}: {used} of max_qp {max} QPs in use, headroom {})",
                max.saturating_sub(used)
            ))
        ),
    );
    if let Some((_, max)) = qp_room {
        f = f.evidence(Evidence::new(
            format!("ibv_query_device({dev}).max_qp"),
            max.to_string(),
        ));
    }
    for r in objs.iter().take(8) {
        f = f.evidence(object_evidence(r, "without RES_PID or RES_KERN_NAME"));
    }
    for h in holders.iter().take(8) {
        f = f.evidence(Evidence::new(
            format!("/proc/{}/fd/{}", h.pid, h.fd),
            format!("-> {}", h.file),
        ));
    }
    let (remedy, next) = match holders.first() {
        Some(h) => (
            format!(
                "Stop pid {} (or make it close the descriptor: open the device with \
                 O_CLOEXEC and exec, or close it in the child after fork); the kernel \
                 frees the objects when the last descriptor closes.",
                h.pid
            ),
            format!("ps -o pid,ppid,etime,cmd -p {}", h.pid),
        ),
        None => (
            "Find who holds the device open with 'fuser -v /dev/infiniband/uverbs*' and stop \
             it. If nothing does, reloading the RDMA driver frees everything but tears down \
             every RDMA user of the device (NFS over RDMA, iSER, SRP included): do it only in \
             a maintenance window."
                .to_string(),
            "fuser -v /dev/infiniband/uverbs*".to_string(),
        ),
    };
    f.remedy(remedy)
        .next(next)
        .next(format!("rdmakit res qp {dev} --json"))
}

fn id_name(kind: ResKind) -> &'static str {
    match kind {
        ResKind::Qp => "lqpn",
        ResKind::Cq => "cqn",
        ResKind::Mr => "mrn",
        ResKind::Pd => "pdn",
        ResKind::Ctx => "ctxn",
        ResKind::Srq => "srqn",
        ResKind::CmId => "cm-idn",
    }
}

/// One object as netlink showed it: where it was read, its id, and `what`.
fn object_evidence(r: &Resource, what: &str) -> Evidence {
    Evidence::new(
        format!(
            "netlink RES_{}_GET {}",
            r.kind.name().to_ascii_uppercase(),
            r.dev_name
        ),
        format!(
            "{} {} {what}",
            id_name(r.kind),
            r.id().map_or("?".to_string(), |n| n.to_string())
        ),
    )
}

fn count_line(objs: &[&Resource]) -> String {
    let mut per: BTreeMap<(&str, ResKind), usize> = BTreeMap::new();
    for r in objs {
        *per.entry((r.dev_name.as_str(), r.kind)).or_default() += 1;
    }
    let mut parts = Vec::new();
    let mut last_dev = "";
    let mut line = String::new();
    for ((dev, kind), n) in per {
        if dev != last_dev && !line.is_empty() {
            parts.push(format!("{line} on {last_dev}"));
            line.clear();
        }
        if !line.is_empty() {
            line.push_str(", ");
        }
        let name = kind.name().to_ascii_uppercase().replace("CM_ID", "CM ID");
        line.push_str(&format!("{n} {name}{}", if n == 1 { "" } else { "s" }));
        last_dev = dev;
    }
    if !line.is_empty() {
        parts.push(format!("{line} on {last_dev}"));
    }
    parts.join("; ")
}

fn finding(pid: u32, state: Liveness, comm: Option<&str>, objs: &[&Resource]) -> Finding {
    let who = match comm {
        Some(c) => format!("pid {pid} ({c})"),
        None => format!("pid {pid}"),
    };
    let (what, why) = match state {
        Liveness::Zombie => (
            "is a zombie",
            "it exited but its parent has not reaped it, so its uverbs file is still \
             open and the kernel keeps every object it created",
        ),
        _ => (
            "no longer exists",
            "the kernel still tracks objects it created: a child that inherited its \
             /dev/infiniband/uverbs file descriptor keeps them alive, or the driver is \
             stuck tearing them down",
        ),
    };
    let mut f = Finding::new(
        Code::R001,
        format!("pid {pid}"),
        format!(
            "{who} {what} but still holds {}; {why}. Those objects count against the \
             device's max_qp / max_cq / max_mr / max_pd, and new ibv_create_qp calls fail \
             with ENOSPC or ENOMEM once a limit is reached",
            count_line(objs)
        ),
    );
    f = f.evidence(Evidence::new(
        format!("/proc/{pid}/stat"),
        match state {
            Liveness::Zombie => "state Z".to_string(),
            _ => "<absent>".to_string(),
        },
    ));
    for r in objs.iter().take(8) {
        f = f.evidence(object_evidence(r, &format!("pid {pid}")));
    }
    let remedy = match state {
        Liveness::Zombie => format!(
            "Make the parent reap it: find it with 'ps -o ppid= -p {pid}' and restart or \
             signal that parent (SIGCHLD; killing the parent hands the zombie to init, \
             which reaps it). The kernel then frees the objects."
        ),
        _ => "Find who still holds the device open: 'fuser -v /dev/infiniband/uverbs*' (or \
              'lsof /dev/infiniband/uverbs*'), and stop that process or restart the service \
              that owns it. If nothing holds it, the driver is stuck: reloading the RDMA \
              driver frees everything, but tears down every RDMA user of the device, \
              including kernel users such as NFS over RDMA, iSER and SRP; do it only in a \
              maintenance window."
            .to_string(),
    };
    f.remedy(remedy)
        .next(format!(
            "rdmakit res qp --json | grep -B3 -A3 '\"pid\": {pid}'"
        ))
        .next("fuser -v /dev/infiniband/uverbs*")
}

/// RDK-R002: per device and object kind (QP, CQ, MR, PD), usage from the kernel's
/// resource tracker against the limit `ibv_query_device` reports; a warning at
/// `usage_warn_pct`, an error at `usage_error_pct`.
pub fn headroom(cx: &Ctx) -> Outcome {
    let nl = &cx.facts.netlink;
    if let Err(e) = &nl.devs {
        return Outcome::NotChecked(format!("RDMA netlink gave no device list: {e}"));
    }
    if nl.devices.is_empty() {
        return Outcome::NotApplicable("no RDMA device".into());
    }
    let (warn, err) = (cx.cfg.usage_warn_pct, cx.cfg.usage_error_pct);
    let mut out = Vec::new();
    let mut unknown = Vec::new();
    for d in &nl.devices {
        let lim = match &d.limits {
            Ok(l) => l,
            Err(why) => {
                unknown.push(format!("{}: {why}", d.name));
                continue;
            }
        };
        for kind in [ResKind::Qp, ResKind::Cq, ResKind::Mr, ResKind::Pd] {
            let (Some(max), Some(Ok(list))) = (lim.of(kind), d.resources.get(&kind)) else {
                continue;
            };
            if max == 0 {
                continue;
            }
            let used = list.len() as u64;
            let pct = used as f64 * 100.0 / max as f64;
            if pct < warn {
                continue;
            }
            out.push(near_limit(
                &d.name,
                kind,
                used,
                max,
                pct,
                pct >= err,
                list,
                nl,
            ));
        }
    }
    out.extend(cgroup_limits(cx));
    if out.is_empty() && !unknown.is_empty() {
        return Outcome::NotChecked(format!("device limits unknown: {}", unknown.join("; ")));
    }
    Outcome::Findings(out)
}

fn values_line(v: &RdmaValues) -> String {
    let n = |x: Option<u64>| x.map_or("max".to_string(), |n| n.to_string());
    format!(
        "{} hca_handle={} hca_object={}",
        v.device,
        n(v.hca_handle),
        n(v.hca_object)
    )
}

/// RDK-R002 for the RDMA cgroup controller: a cgroup whose `rdma.max` caps a
/// device's objects (`hca_object`) or contexts (`hca_handle`) and whose
/// `rdma.current` is near that cap. Found in the VM tier (plan faults, qp_leak_*):
/// rxe's own max_qp (1,048,560) is out of reach, but a cgroup limit is what stops a
/// container's next ibv_create_qp, with EAGAIN.
fn cgroup_limits(cx: &Ctx) -> Vec<Finding> {
    let f = cx.facts;
    let nl = &f.netlink;
    let (warn, err) = (cx.cfg.usage_warn_pct, cx.cfg.usage_error_pct);
    let mut out = Vec::new();
    for cg in &f.rdma_cgroups {
        let Some(max) = cg.max.get() else { continue };
        let current = cg.current.get();
        // Its own processes, and those below it that the collector looked at.
        let mut members: Vec<u32> = cg.procs.get().cloned().unwrap_or_default();
        members.extend(cg.pids.iter().copied());
        members.sort_unstable();
        members.dedup();
        for m in max {
            let cur = current.and_then(|c| c.iter().find(|c| c.device == m.device));
            for (what, lim, used, fails) in [
                (
                    "hca_object",
                    m.hca_object,
                    cur.and_then(|c| c.hca_object),
                    "every ibv_create_qp, ibv_create_cq, ibv_reg_mr, ibv_alloc_pd (any \
                     object) of its processes fails with EAGAIN",
                ),
                (
                    "hca_handle",
                    m.hca_handle,
                    cur.and_then(|c| c.hca_handle),
                    "ibv_open_device in its processes fails with EAGAIN",
                ),
            ] {
                let Some(lim) = lim else { continue };
                let used = used.unwrap_or(0);
                let pct = if lim == 0 {
                    100.0
                } else {
                    used as f64 * 100.0 / lim as f64
                };
                if pct < warn {
                    continue;
                }
                out.push(cgroup_finding(
                    cg,
                    m,
                    cur,
                    (what, lim, used, pct, fails),
                    pct >= err,
                    &members,
                    nl,
                ));
            }
        }
    }
    out
}

fn cgroup_finding(
    cg: &RdmaCgroup,
    m: &RdmaValues,
    cur: Option<&RdmaValues>,
    (what, lim, used, pct, fails): (&str, u64, u64, f64, &str),
    error: bool,
    members: &[u32],
    nl: &rdmakit_host::netlink::NetlinkFacts,
) -> Finding {
    let dev = m.device.as_str();
    // The members' objects on this device, and objects whose creator is gone
    // (charged to the cgroup until the last holder of the device file closes it).
    let mut per_pid: BTreeMap<u32, Vec<&Resource>> = BTreeMap::new();
    let mut orphans: Vec<&Resource> = Vec::new();
    if let Some(d) = nl.devices.iter().find(|d| d.name == dev) {
        for r in d.resources.values().flatten().flatten() {
            match r.holder {
                Holder::Pid(p) if members.contains(&p) => per_pid.entry(p).or_default().push(r),
                _ if orphaned(r) => orphans.push(r),
                _ => {}
            }
        }
    }
    let mut who: Vec<String> = per_pid
        .iter()
        .map(|(p, objs)| {
            let comm = nl.owners.get(p).and_then(|o| o.comm.clone());
            format!(
                "pid {p}{} holds {}",
                comm.map_or(String::new(), |c| format!(" ({c})")),
                count_line(objs)
            )
        })
        .collect();
    let holders: Vec<&FileHolder> = nl
        .file_holders
        .iter()
        .filter(|h| members.contains(&h.pid))
        .collect();
    if !orphans.is_empty() {
        who.push(format!(
            "{} without an owner (their creator exited{})",
            count_line(&orphans),
            match holders.first() {
                Some(h) => format!("; pid {} of this cgroup holds the device file", h.pid),
                None => String::new(),
            }
        ));
    }
    // The device's own limit for comparison, when libibverbs answered.
    let device_max = nl
        .devices
        .iter()
        .find(|d| d.name == dev)
        .and_then(|d| d.limits.as_ref().ok())
        .map_or(String::new(), |l| {
            format!(", long before {dev}'s own max_qp {}", l.max_qp)
        });
    let mut f = Finding::new(
        Code::R002,
        format!("cgroup {} {dev}", cg.name),
        format!(
            "cgroup {} allows {dev} {what}={lim} and {used} are in use ({pct:.0}%, headroom \
             {}): at the limit {fails} (the RDMA cgroup controller{device_max}).{}",
            cg.name,
            lim.saturating_sub(used),
            if who.is_empty() {
                String::new()
            } else {
                format!(" {}", who.join("; "))
            }
        ),
    )
    .severity(if error {
        Severity::Error
    } else {
        Severity::Warning
    })
    .evidence(Evidence::new(cg.max.path.clone(), values_line(m)))
    .evidence(Evidence::new(
        cg.current.path.clone(),
        cur.map_or_else(|| cg.current.shown(), values_line),
    ))
    .evidence(Evidence::new(
        cg.procs.path.clone(),
        match cg.procs.get() {
            Some(v) if v.is_empty() => "empty".to_string(),
            Some(v) => v.iter().map(u32::to_string).collect::<Vec<_>>().join(" "),
            None => cg.procs.shown(),
        },
    ));
    for (p, objs) in &per_pid {
        f = f.evidence(Evidence::new(
            format!("netlink RES_*_GET {dev} pid {p}"),
            count_line(objs),
        ));
    }
    for h in holders.iter().take(4) {
        f = f.evidence(Evidence::new(
            format!("/proc/{}/fd/{}", h.pid, h.fd),
            format!("-> {}", h.file),
        ));
    }
    f.remedy(format!(
        "Find the leak first (the holders above; objects whose creator died are RDK-R001: \
         stopping the process that still holds the device file frees them). If the \
         workload needs more, raise the limit: echo '{dev} {what}=<n>' > {} (container \
         runtimes and Kubernetes RDMA device plugins set it from the pod's resources).",
        cg.max.path
    ))
    .next(format!(
        "cat {dir}/rdma.max {dir}/rdma.current {dir}/cgroup.procs",
        dir = cg.dir
    ))
    .next(format!("rdmakit res qp {dev} --json"))
}

#[allow(clippy::too_many_arguments)]
fn near_limit(
    dev: &str,
    kind: ResKind,
    used: u64,
    max: u64,
    pct: f64,
    error: bool,
    list: &[Resource],
    nl: &rdmakit_host::netlink::NetlinkFacts,
) -> Finding {
    let name = kind.name().to_ascii_uppercase();
    let field = format!("max_{}", kind.name());
    // Who holds the most: the processes to look at first.
    let mut per: BTreeMap<Option<u32>, u64> = BTreeMap::new();
    for r in list {
        let k = match r.holder {
            Holder::Pid(p) => Some(p),
            _ => None,
        };
        *per.entry(k).or_default() += 1;
    }
    let mut top: Vec<(Option<u32>, u64)> = per.into_iter().collect();
    top.sort_by_key(|t| std::cmp::Reverse(t.1));
    let holders: Vec<String> = top
        .iter()
        .take(3)
        .map(|(p, n)| match p {
            Some(p) => {
                let comm = nl.owners.get(p).and_then(|o| o.comm.clone());
                format!(
                    "pid {p}{} holds {n}",
                    comm.map_or(String::new(), |c| format!(" ({c})"))
                )
            }
            None => format!("the kernel holds {n}"),
        })
        .collect();
    let mut f = Finding::new(
        Code::R002,
        format!("{dev} {}", kind.name()),
        format!(
            "{dev} has {used} of {max} {name}s in use ({pct:.0}%, headroom {}); at the limit \
             ibv_create_{} fails with ENOMEM or ENOSPC (EINVAL on rxe). {}",
            max - used.min(max),
            kind.name(),
            holders.join(", ")
        ),
    )
    .severity(if error {
        Severity::Error
    } else {
        Severity::Warning
    })
    .evidence(Evidence::new(
        format!("netlink RES_{name}_GET {dev}"),
        format!("{used} objects"),
    ))
    .evidence(Evidence::new(
        format!("ibv_query_device({dev}).{field}"),
        max.to_string(),
    ));
    if let Some((Some(p), n)) = top.first() {
        f = f.evidence(Evidence::new(
            format!("netlink RES_{name}_GET {dev} pid {p}"),
            n.to_string(),
        ));
    }
    f.remedy(format!(
        "Stop or fix the process holding the most {name}s (above); a leak usually grows \
         with its uptime. Objects of dead or zombie owners are RDK-R001. Restarting the \
         owning service frees its objects; reloading the driver frees everything but tears \
         down every RDMA user of {dev} (NFS/RDMA, iSER, NVMe-oF, IPoIB): maintenance window only."
    ))
    .next(format!("rdmakit res {} --json", kind.name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::Config;
    use rdmakit_host::capture::import_capture;
    use rdmakit_host::collect::collect;
    use rdmakit_host::source::{Answer, Op};

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures")).join(name)
    }

    /// healthy-busy with a process table: 342 a zombie, 343 gone, 345 alive.
    #[test]
    fn healthy_busy_with_dead_and_zombie_owners() {
        let mut b = import_capture(&fixture("healthy-busy")).unwrap();
        b.add_process(1, None, None);
        b.add_process(342, Some("342 (ibv_rc_pingpong) Z 1 342"), None);
        b.add_process(345, Some("345 (ib_write_bw) S 1 345"), None);
        let facts = collect(&b, &Default::default());
        let cfg = Config::default();
        let Outcome::Findings(v) = dead_owners(&Ctx {
            facts: &facts,
            cfg: &cfg,
        }) else {
            panic!("checked")
        };
        let subjects: Vec<_> = v.iter().map(|f| f.subject.as_str()).collect();
        assert_eq!(subjects, ["pid 342", "pid 343"]);
        assert!(v[0].message.contains("is a zombie"), "{}", v[0].message);
        assert!(
            v[1].message.contains("1 QP, 1 CQ, 1 MR, 1 PD on rxe0"),
            "{}",
            v[1].message
        );
    }

    fn with_limits(b: &mut rdmakit_host::bundle::Bundle, dev: &str, qp: u64, cq: u64) {
        b.set(
            Op::Probe,
            &rdmakit_host::source::Probe::DeviceLimits(dev.into()).key(),
            Answer::Data(
                format!("max_qp {qp}\nmax_cq {cq}\nmax_mr 1000000\nmax_pd 1000000\n").into_bytes(),
            ),
        );
    }

    fn headroom_findings(b: &rdmakit_host::bundle::Bundle, cfg: &Config) -> Outcome {
        let facts = collect(b, &Default::default());
        headroom(&Ctx { facts: &facts, cfg })
    }

    /// healthy-busy (rxe0 with QPs held by a live pingpong) with limits recorded
    /// as libibverbs would report them: exactly at the limit is an error, 90 % a
    /// warning, far below nothing.
    #[test]
    fn usage_against_recorded_limits() {
        let mut b = import_capture(&fixture("healthy-busy")).unwrap();
        let facts = collect(&b, &Default::default());
        let d = facts
            .netlink
            .devices
            .iter()
            .find(|d| d.name == "rxe0")
            .unwrap();
        let qps = d.resources[&ResKind::Qp].as_ref().unwrap().len() as u64;
        let cqs = d.resources[&ResKind::Cq].as_ref().unwrap().len() as u64;
        assert!(qps >= 1 && cqs >= 1, "{qps} {cqs}");
        let cfg = Config::default();

        with_limits(&mut b, "rxe0", qps, 1_000_000);
        let Outcome::Findings(v) = headroom_findings(&b, &cfg) else {
            panic!("checked")
        };
        assert_eq!(v.len(), 1, "{v:#?}");
        assert_eq!(v[0].code, Code::R002);
        assert_eq!(v[0].subject, "rxe0 qp");
        assert_eq!(v[0].severity, Severity::Error);
        assert!(
            v[0].message
                .contains(&format!("{qps} of {qps} QPs in use (100%, headroom 0)")),
            "{}",
            v[0].message
        );
        assert!(v[0]
            .evidence
            .iter()
            .any(|e| e.path == "ibv_query_device(rxe0).max_qp" && e.value == qps.to_string()));

        // CQs at 90 %: a warning; QPs far below: nothing.
        let max_cq = (cqs * 10).div_ceil(9);
        with_limits(&mut b, "rxe0", 1_000_000, max_cq);
        let Outcome::Findings(v) = headroom_findings(&b, &cfg) else {
            panic!("checked")
        };
        let pct = cqs as f64 * 100.0 / max_cq as f64;
        if pct >= 80.0 {
            assert_eq!(v.len(), 1, "{v:#?}");
            assert_eq!(
                (v[0].subject.as_str(), v[0].severity),
                ("rxe0 cq", Severity::Warning)
            );
        }
        // Thresholds are the user's: 100 % warns only at 100 %.
        let strict = Config {
            usage_warn_pct: 100.0,
            usage_error_pct: 100.0,
            ..Config::default()
        };
        assert!(matches!(headroom_findings(&b, &strict), Outcome::Findings(v) if v.is_empty()));
    }

    /// No limits recorded (no libibverbs query): not checked, never a guess.
    #[test]
    fn usage_without_limits_is_not_checked() {
        let b = import_capture(&fixture("healthy-busy")).unwrap();
        let cfg = Config::default();
        let Outcome::NotChecked(why) = headroom_findings(&b, &cfg) else {
            panic!("must not check")
        };
        assert!(why.contains("device limits unknown"), "{why}");
        // A garbage answer is reported, not parsed into a number.
        let mut b = b;
        b.set(
            Op::Probe,
            &rdmakit_host::source::Probe::DeviceLimits("rxe0".into()).key(),
            Answer::Data(b"max_qp lots\n".to_vec()),
        );
        let Outcome::NotChecked(why) = headroom_findings(&b, &cfg) else {
            panic!("must not check")
        };
        assert!(why.contains("\"lots\" is not a number"), "{why}");
    }

    /// The capture as is has no /proc/<pid>: not checked, never "dead".
    #[test]
    fn capture_without_process_table_is_not_checked() {
        let b = import_capture(&fixture("healthy-busy")).unwrap();
        let facts = collect(&b, &Default::default());
        let cfg = Config::default();
        assert!(matches!(
            dead_owners(&Ctx {
                facts: &facts,
                cfg: &cfg
            }),
            Outcome::NotChecked(_)
        ));
    }
}
