//! Application layer: what a process needs to register memory and open devices.

use super::human_bytes;
use crate::checks::{Ctx, Outcome};
use crate::codes::{Code, Severity};
use crate::finding::{Evidence, Finding};
use rdmakit_host::model::DevNode;
use rdmakit_host::parse::proc::{Identity, Limit};
use rdmakit_host::source::{Errno, Kind, Meta};

fn is_root(id: Option<&Identity>) -> bool {
    id.is_some_and(|i| i.euid == 0)
}

pub fn memlock(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    let Some((limit, from)) = f.memlock.effective() else {
        return Outcome::NotChecked(
            "neither getrlimit nor /proc/self/limits is in the source".into(),
        );
    };
    let Limit::Bytes(b) = limit else {
        return Outcome::pass();
    };
    let pid_subject = f.memlock.pid.as_ref().map(|(p, _)| *p);
    // Root or CAP_IPC_LOCK pins memory regardless of the limit: for --pid, as that
    // process's /proc/<pid>/status says; otherwise as rdmakit's own identity says.
    let exempt = match (pid_subject, &f.memlock.pid_ipc_lock) {
        (Some(_), Some(a)) => a.get() == Some(&true),
        (Some(_), None) => false,
        (None, _) => is_root(f.identity.as_ref()),
    };
    if exempt || b >= cx.cfg.memlock_warn {
        return Outcome::pass();
    }
    let who = match pid_subject {
        Some(p) => format!("process {p}"),
        None => "this user's processes".to_string(),
    };
    let sev = if b < cx.cfg.memlock_error {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut fd = Finding::new(
        Code::A001,
        pid_subject.map_or("host".to_string(), |p| format!("pid {p}")),
        format!(
            "RLIMIT_MEMLOCK is {}: {who} can register (pin) at most {} with ibv_reg_mr, \
             including the memory of queues and CQs; beyond that ibv_reg_mr and \
             ibv_create_cq fail with ENOMEM",
            human_bytes(b),
            human_bytes(b)
        ),
    )
    .severity(sev)
    .evidence(Evidence::new(from, format!("soft limit {b} bytes")));
    match (pid_subject, &f.memlock.pid_ipc_lock, &f.identity) {
        (Some(_), Some(a), _) => {
            let v = match a.get() {
                Some(false) => "euid is not 0 and CapEff lacks CAP_IPC_LOCK".to_string(),
                _ => a.shown(),
            };
            fd = fd.evidence(Evidence::new(a.path.clone(), v));
        }
        (None, _, Some(id)) => {
            fd = fd.evidence(Evidence::new(
                "rdmakit's identity",
                format!("uid={} euid={}", id.uid, id.euid),
            ));
        }
        _ => {}
    }
    Outcome::Findings(vec![fd
        .remedy(
            "Raise it to unlimited for RDMA users: '* soft memlock unlimited' and '* hard \
             memlock unlimited' in /etc/security/limits.d/rdma.conf (new login needed); \
             LimitMEMLOCK=infinity for systemd services; --ulimit memlock=-1:-1 for \
             containers (Kubernetes: set it in the runtime's default ulimits).",
        )
        .next("ulimit -l; grep 'locked memory' /proc/<pid>/limits")])
}

fn mode_string(m: &Meta) -> String {
    let kind = match m.kind {
        Kind::Char => 'c',
        Kind::Block => 'b',
        Kind::Dir => 'd',
        Kind::Symlink => 'l',
        _ => '-',
    };
    let bits = "rwxrwxrwx"
        .chars()
        .enumerate()
        .map(|(i, c)| if m.mode & (1 << (8 - i)) != 0 { c } else { '-' })
        .collect::<String>();
    format!("{kind}{bits} uid={} gid={}", m.uid, m.gid)
}

/// Whether `id` may read and write a node with `meta`, by permission bits alone.
fn mode_allows_rw(meta: &Meta, id: Option<&Identity>) -> Option<bool> {
    let id = id?;
    if id.euid == 0 {
        return Some(true);
    }
    let bits = if meta.uid == id.euid {
        meta.mode >> 6
    } else if meta.gid == id.egid || id.groups.contains(&meta.gid) {
        meta.mode >> 3
    } else {
        meta.mode
    };
    Some(bits & 0o6 == 0o6)
}

/// Whether `id` can read and write a node: access(2) when recorded and it answers
/// for `id` (`use_access`: the collecting process is the subject), else the
/// permission bits; `None` when neither can tell.
fn node_rw(n: &DevNode, id: Option<&Identity>, use_access: bool) -> Option<Result<(), Errno>> {
    if let (true, Some(r)) = (use_access, n.access_rw) {
        return Some(r);
    }
    let meta = n.meta.as_ref().ok()?;
    mode_allows_rw(meta, id).map(|ok| if ok { Ok(()) } else { Err(Errno::EACCES) })
}

pub fn device_access(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    if f.devices.is_empty() {
        return Outcome::NotApplicable("no RDMA device".into());
    }
    if !f.covers("dev") {
        return Outcome::NotChecked("the source holds no /dev".into());
    }
    // With --pid: /dev/infiniband as that process sees it (its mount namespace,
    // through /proc/<pid>/root) and its credentials; access(2) was not asked, it
    // would answer for rdmakit.
    let (nodes, identity, who) = match &f.subject {
        Some(s) => (
            s.dev_nodes.as_ref().unwrap_or(&f.dev_nodes),
            s.identity.get(),
            match s.identity.get() {
                Some(i) => format!("pid {} (uid {})", s.pid, i.euid),
                None => format!("pid {}", s.pid),
            },
        ),
        None => (&f.dev_nodes, f.identity.as_ref(), "this user".to_string()),
    };
    let expected: Vec<&str> = f.uverbs.devs.iter().map(|u| u.name.as_str()).collect();
    let present: Vec<&str> = match &nodes.listing {
        Ok(v) => v.iter().map(|e| e.name.as_str()).collect(),
        Err(_) => Vec::new(),
    };
    let mut out = Vec::new();
    let missing: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|e| !present.contains(e))
        .collect();
    if !missing.is_empty() {
        let (subject, whom, remedy) = match &f.subject {
            Some(s) => (
                format!("pid {}", s.pid),
                format!("pid {}", s.pid),
                format!(
                    "pid {} runs with its own /dev (a container or a private mount \
                     namespace) that lacks the nodes: pass them in (docker \
                     --device=/dev/infiniband/uverbsN --device=/dev/infiniband/rdma_cm, \
                     the RDMA device plugin on Kubernetes, or bind-mount /dev/infiniband \
                     into its mount namespace).",
                    s.pid
                ),
            ),
            None => (
                "host".to_string(),
                "user space".to_string(),
                "In a container, pass the devices in (docker --device=/dev/infiniband/uverbsN \
                 and rdma_cm, or the RDMA device plugin on Kubernetes); on a host, devtmpfs \
                 creates them (udev may rename or remove them): check that /dev is devtmpfs \
                 and the udev rules; to recreate one by hand: mknod /dev/infiniband/uverbsN c \
                 <major> <minor> from /sys/class/infiniband_verbs/uverbsN/dev, mode 0666."
                    .to_string(),
            ),
        };
        let mut fd = Finding::new(
            Code::A004,
            subject,
            format!(
                "{} lacks {} although the kernel created {}: {whom} cannot open the device",
                nodes.path,
                missing.join(", "),
                if missing.len() == 1 { "it" } else { "them" }
            ),
        )
        .evidence(Evidence::new(
            nodes.path.clone(),
            match &nodes.listing {
                Ok(v) if v.is_empty() => "empty".to_string(),
                Ok(_) => present.join(" "),
                Err(e) if *e == Errno::ENOENT => "<absent>".to_string(),
                Err(e) => format!("<read failed: {e}>"),
            },
        ))
        .evidence(Evidence::new(
            "/sys/class/infiniband_verbs",
            expected.join(" "),
        ));
        for u in f
            .uverbs
            .devs
            .iter()
            .filter(|u| missing.contains(&u.name.as_str()))
        {
            fd = fd.attr(&u.dev);
        }
        out.push(
            fd.remedy(remedy)
                .next(format!("ls -l {}; mount | grep ' /dev '", nodes.path)),
        );
    }
    for n in &nodes.nodes {
        let name = n.path.rsplit('/').next().unwrap_or_default();
        if !(name.starts_with("uverbs") || name == "rdma_cm") {
            continue;
        }
        let Some(Err(e)) = node_rw(n, identity, f.subject.is_none()) else {
            continue;
        };
        let mode = n
            .meta
            .as_ref()
            .map_or_else(|e| format!("<stat failed: {e}>"), mode_string);
        let mut fd = Finding::new(
            Code::A002,
            n.path.clone(),
            format!(
                "{} is not readable and writable by {who} ({e}): ibv_open_device fails with \
                 EACCES",
                n.path
            ),
        )
        .evidence(Evidence::new(n.path.clone(), mode));
        if let Some(s) = &f.subject {
            fd = fd.evidence(Evidence::new(
                s.identity.path.clone(),
                match s.identity.get() {
                    Some(i) => format!(
                        "euid {} egid {} groups {}",
                        i.euid,
                        i.egid,
                        if i.groups.is_empty() {
                            "none".to_string()
                        } else {
                            i.groups
                                .iter()
                                .map(u32::to_string)
                                .collect::<Vec<_>>()
                                .join(",")
                        }
                    ),
                    None => s.identity.shown(),
                },
            ));
        }
        out.push(
            fd.remedy(
                "ib_uverbs creates uverbs nodes 0666; a site udev rule may restrict them to \
                 a group (add the user to it: usermod -aG rdma <user>, then start the \
                 process again), or give the node back its default mode: chmod 0666 \
                 <node>. In containers, check that the device cgroup allows the node.",
            )
            .next(format!("ls -l {}; id", n.path)),
        );
    }
    Outcome::Findings(out)
}

pub fn resource_files(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    let pci: Vec<_> = f
        .devices
        .iter()
        .filter_map(|d| d.pci.as_ref().map(|p| (d, p)))
        .collect();
    if pci.is_empty() {
        return if f.devices.is_empty() {
            Outcome::NotApplicable("no RDMA device".into())
        } else if f
            .devices
            .iter()
            .all(|d| d.kind == rdmakit_host::model::DeviceKind::Software)
        {
            Outcome::NotApplicable("software devices have no PCI resource files".into())
        } else {
            Outcome::NotChecked("no PCI device link in the source".into())
        };
    }
    let root = is_root(f.identity.as_ref());
    let mut out = Vec::new();
    for (d, p) in pci {
        for r in &p.resources {
            let Some(Err(e)) = r.access_rw else { continue };
            let mode = r
                .meta
                .as_ref()
                .map_or_else(|e| format!("<stat failed: {e}>"), mode_string);
            let fd = Finding::new(
                Code::A003,
                r.path.clone(),
                format!(
                    "{} of {} is not accessible ({e})",
                    r.path.rsplit('/').next().unwrap_or_default(),
                    d.name
                ),
            )
            .evidence(Evidence::new(r.path.clone(), mode));
            let fd = if root {
                fd.remedy(
                    "Even root cannot map it: kernel lockdown (integrity/confidentiality mode), \
                     a read-only /sys in a container, or an LSM policy blocks it. Tools that \
                     mmap BARs (mstflint, mlxconfig, diagnostics) fail the same way.",
                )
            } else {
                fd.severity(Severity::Info).remedy(
                    "Resource files are root-only by design; verbs applications map device \
                     memory through /dev/infiniband/uverbsN instead. Tools that mmap BARs \
                     directly (mstflint, vendor diagnostics) need root.",
                )
            };
            out.push(fd.next(format!("ls -l {}/resource*", p.path)));
        }
    }
    Outcome::Findings(out)
}
