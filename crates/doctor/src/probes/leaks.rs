//! Leaked objects on the soft NIC: records of its device-wide resource
//! registry (docs/soft-nic.md, "Resource registry") whose owner is dead or a
//! zombie and which still exist — because another process (a forked child)
//! holds their context, as the kernel keeps a real device's objects for a
//! child that inherited the uverbs descriptor, or because the device is a
//! leaky driver — become RDK-R001 findings, the same code the kernel's
//! restrack view gives for a real device. Every user's registry is read,
//! read-only; entries the registry ignored (a forged record, a FIFO, a link,
//! a refused directory) become report notes naming the path and why.
//!
//! [`soft_registry`] reads the registry and `/proc` and passes the result on
//! as plain data ([`SoftRegistry`]), exactly as probe results are passed:
//! turning it into findings ([`soft_leak_findings`]) and adding them to a
//! report ([`with_soft_registry`]) stay pure.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::checks::Config;
use crate::codes::Code;
use crate::finding::{Evidence, Finding};
use crate::report::Report;

/// One registry record whose owner is not alive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SoftLeak {
    /// Soft device name (`soft0`).
    pub device: String,
    /// `qp`, `cq`, `mr`, `pd`, `srq` or `ah`.
    pub kind: String,
    /// QPN, MR key or id.
    pub handle: u32,
    /// Owner pid.
    pub pid: u32,
    /// `dead` or `zombie`.
    pub state: String,
    /// What `/proc/<pid>/stat` says (`<absent>`, `state Z`, `start time 123,
    /// record says 45`).
    pub proc_state: String,
    /// The record's file.
    pub record: String,
    /// Processes still holding the record's context (a forked child): the
    /// pid and its `/proc/<pid>/fd/<n>` link. Empty when nothing holds it
    /// (a leaky driver kept it).
    pub holders: Vec<(u32, String)>,
    /// The context file those links point at.
    pub context: String,
}

/// One RDK-R001 finding (severity warning) per (device, dead or zombie owner).
pub fn soft_leak_findings(leaks: &[SoftLeak], cfg: &Config) -> Vec<Finding> {
    let mut by: BTreeMap<(&str, u32), Vec<&SoftLeak>> = BTreeMap::new();
    for l in leaks {
        by.entry((l.device.as_str(), l.pid)).or_default().push(l);
    }
    let mut out = Vec::new();
    for ((dev, pid), ls) in by {
        let mut per: BTreeMap<&str, usize> = BTreeMap::new();
        for l in &ls {
            *per.entry(l.kind.as_str()).or_default() += 1;
        }
        let counts = per
            .iter()
            .map(|(k, n)| {
                format!(
                    "{n} {}{}",
                    k.to_ascii_uppercase(),
                    if *n == 1 { "" } else { "s" }
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let zombie = ls.iter().any(|l| l.state == "zombie");
        let what = if zombie {
            "is a zombie"
        } else {
            "no longer exists"
        };
        let holders: Vec<&(u32, String)> = {
            let mut h: Vec<&(u32, String)> = ls.iter().flat_map(|l| &l.holders).collect();
            h.sort();
            h.dedup();
            h
        };
        let why = if holders.is_empty() {
            format!(
                "its records in the device's shared resource registry stay because {dev} is a \
                 leaky driver (it keeps a dead process's objects until reclaim, like a driver \
                 whose QPs outlive a crashed application until openibd restarts)"
            )
        } else {
            let who: Vec<String> = holders.iter().map(|(p, _)| format!("pid {p}")).collect();
            format!(
                "its context is still held by {} (a forked child that inherited the context \
                 descriptor, as one inherits a uverbs descriptor): the objects stay, as the \
                 kernel keeps them, and nothing will ever destroy them",
                who.join(", ")
            )
        };
        let mut f = Finding::new(
            Code::R001,
            format!("pid {pid}"),
            format!(
                "pid {pid} {what} but still holds {counts} on {dev} (rdmakit soft NIC): {why}. \
                 Those objects count against the device's max_qp / max_cq / max_mr / max_pd \
                 for every process, and new ibv_create_qp calls fail with ENOSPC (mlx5) or \
                 EINVAL (rxe) once a limit is reached"
            ),
        );
        f = f.evidence(Evidence::new(
            format!("/proc/{pid}/stat"),
            ls[0].proc_state.clone(),
        ));
        for (_, link) in &holders {
            f = f.evidence(Evidence::new(link.clone(), ls[0].context.clone()));
        }
        for l in ls.iter().take(8) {
            f = f.evidence(Evidence::new(
                l.record.clone(),
                format!("{} {} pid {pid}", l.kind, l.handle),
            ));
        }
        let remedy = if !holders.is_empty() {
            let pids: Vec<String> = holders.iter().map(|(p, _)| p.to_string()).collect();
            format!(
                "End the holder ({}; 'ps -o pid,ppid,comm -p {}'): the objects go with the \
                 last holder of the context, as a real device's go with the last holder of the \
                 uverbs file. Fix the application to destroy its objects (or exec) in forked \
                 children; reclaim refuses held contexts.",
                pids.join(", "),
                pids.join(",")
            )
        } else if zombie {
            format!(
                "Make the parent reap it ('ps -o ppid= -p {pid}', then signal or restart that \
                 parent); once it is dead, 'rdmakit soft reclaim --device {dev}' frees its \
                 objects (reclaim refuses zombies)."
            )
        } else {
            format!(
                "Free them with 'rdmakit soft reclaim --device {dev}' (the soft NIC's \
                 counterpart of restarting openibd; it never touches objects of live \
                 processes), and make the application destroy its QPs, CQs and MRs on every \
                 exit path."
            )
        };
        f = f
            .remedy(remedy)
            .next(format!("rdmakit soft status --device {dev}"))
            .next(format!("rdmakit soft reclaim --device {dev} --dry-run"));
        // The soft NIC is not a host device: like its probes, its leaks
        // never fail the host's verdict (warning, not R001's error), unless
        // --severity RDK-R001=... says otherwise.
        f.severity = crate::codes::Severity::Warning;
        if let Some(s) = cfg.overrides.get(&Code::R001) {
            f.severity = *s;
        }
        out.push(f);
    }
    out
}

/// `report` with the RDK-R001 findings of `leaks` added (sorted and counted
/// like every other finding). Pure.
pub fn with_soft_leaks(report: Report, leaks: &[SoftLeak], cfg: &Config) -> Report {
    with_findings(report, soft_leak_findings(leaks, cfg))
}

/// Objects of one kind in a soft device's shared registry, and its limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SoftUsage {
    /// Soft device name (`soft0`).
    pub device: String,
    /// `qp`, `cq`, `mr` or `pd`.
    pub kind: String,
    /// Records in the registry (every process's objects).
    pub used: u64,
    /// The limit the records' creators had (`max_qp`, ...).
    pub limit: u64,
    /// How many of them belong to dead or zombie owners.
    pub dead: u64,
}

/// RDK-R002 on soft NICs (warnings: the soft NIC never fails the host's verdict).
pub fn soft_headroom_findings(usage: &[SoftUsage], cfg: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    for u in usage {
        if u.limit == 0 {
            continue;
        }
        let pct = u.used as f64 * 100.0 / u.limit as f64;
        if pct < cfg.usage_warn_pct {
            continue;
        }
        let name = u.kind.to_ascii_uppercase();
        let mut f = Finding::new(
            Code::R002,
            format!("{} {}", u.device, u.kind),
            format!(
                "{} (rdmakit soft NIC) has {} of {} {name}s in use across processes ({pct:.0}%, \
                 headroom {}); {} of them belong to dead or zombie processes. At the limit \
                 ibv_create_{} fails with EINVAL (ENOSPC with \
                 RDMAKIT_SOFT_FAULTS=\"exhaust errno=ENOSPC\")",
                u.device,
                u.used,
                u.limit,
                u.limit.saturating_sub(u.used),
                u.dead,
                u.kind
            ),
        )
        .severity(crate::codes::Severity::Warning)
        .evidence(Evidence::new(
            format!("soft registry {}: {} records", u.device, u.kind),
            u.used.to_string(),
        ))
        .evidence(Evidence::new(
            format!("soft {} max_{}", u.device, u.kind),
            u.limit.to_string(),
        ));
        f = if u.dead > 0 {
            f.remedy(format!(
                "Free the {} objects of dead owners: rdmakit soft reclaim --device {} (what \
                 restarting openibd does for a real NIC, without touching live processes)",
                u.dead, u.device
            ))
            .next(format!(
                "rdmakit soft reclaim --device {} --dry-run",
                u.device
            ))
        } else {
            f.remedy(
                "Every object belongs to a live process: stop or fix the one holding the most.",
            )
            .next(format!("rdmakit soft status --device {}", u.device))
        };
        out.push(f);
    }
    out
}

/// Adds RDK-R002 findings for soft NICs to a report.
pub fn with_soft_headroom(report: Report, usage: &[SoftUsage], cfg: &Config) -> Report {
    with_findings(report, soft_headroom_findings(usage, cfg))
}

fn with_findings(mut report: Report, new: Vec<Finding>) -> Report {
    if new.is_empty() {
        return report;
    }
    report.add_findings(new);
    report
}

/// What the doctor takes from a soft NIC's registry: its leaks (RDK-R001),
/// its usage against the limits (RDK-R002) and what the registry ignored
/// (forged or foreign entries, refused directories: report notes naming
/// the path and why). Data, read by [`soft_registry`]; turning it into
/// findings stays pure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SoftRegistry {
    /// Records whose owner is not alive but which still exist.
    pub leaks: Vec<SoftLeak>,
    /// Objects per kind against their limit.
    pub usage: Vec<SoftUsage>,
    /// One line per ignored entry or refused directory.
    pub notes: Vec<String>,
}

/// Reads every user's registry of soft device `name`, read-only (root sees
/// every user's objects, as `rdma resource` does): the leaked objects —
/// records whose owner is dead or a zombie but which still exist (a forked
/// child holds their context, or a leaky driver kept them), with what /proc
/// says and who holds them — the usage per kind, and what was ignored. A
/// registry that cannot be read gives a note saying why.
pub fn soft_registry(name: &str) -> SoftRegistry {
    use rdmakit_soft::registry::{self, Holding, Kind, OwnerState};
    let survey = match registry::survey(name) {
        Ok(s) => s,
        Err(e) => {
            return SoftRegistry {
                notes: vec![format!("soft registry of {name}: not read: {e}")],
                ..SoftRegistry::default()
            }
        }
    };
    let recs = &survey.records;
    let inherited: Vec<std::path::PathBuf> = recs
        .iter()
        .filter(|r| r.holding == Holding::Inherited)
        .map(|r| r.context_path())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // One pass over /proc for every inherited context, and one read of
    // /proc/<pid>/stat per owner.
    let held = registry::holders_many(&inherited);
    let mut stats: std::collections::HashMap<u32, Option<(char, u64)>> =
        std::collections::HashMap::new();
    let leaks = recs
        .iter()
        .filter_map(|r| {
            let state = r.owner;
            if state == OwnerState::Alive {
                return None;
            }
            let ctx = r.context_path();
            let holders = if r.holding == Holding::Inherited {
                held.get(&ctx).cloned().unwrap_or_default()
            } else {
                Vec::new()
            };
            let proc_state = match *stats
                .entry(r.pid)
                .or_insert_with(|| registry::proc_stat(r.pid))
            {
                None => "<absent>".to_string(),
                Some(('Z', _)) if state == OwnerState::Zombie => "state Z".to_string(),
                Some((c, st)) => format!(
                    "state {c}, start time {st}: another process (the record's owner started at {})",
                    r.start_time
                ),
            };
            Some(SoftLeak {
                device: name.to_string(),
                kind: r.kind.as_str().to_string(),
                handle: r.handle,
                pid: r.pid,
                state: state.as_str().to_string(),
                proc_state,
                record: r.path.display().to_string(),
                holders,
                context: ctx.display().to_string(),
            })
        })
        .collect();
    // Usage: the records that count toward the limits for this process (the
    // kernel confirmed their owner, or their context is held, or a leaky
    // driver keeps them for everyone).
    let usage = [Kind::Qp, Kind::Cq, Kind::Mr, Kind::Pd]
        .into_iter()
        .filter_map(|k| {
            let of: Vec<_> = recs.iter().filter(|r| r.kind == k && r.counts).collect();
            let limit = of.iter().map(|r| u64::from(r.limit)).max()?;
            Some(SoftUsage {
                device: name.to_string(),
                kind: k.as_str().to_string(),
                used: of.len() as u64,
                limit,
                dead: of.iter().filter(|r| r.owner != OwnerState::Alive).count() as u64,
            })
        })
        .collect();
    let notes = survey
        .ignored
        .iter()
        .map(|i| {
            format!(
                "soft registry of {name}: ignored {}: {}",
                i.path.display(),
                i.why
            )
        })
        .collect();
    SoftRegistry {
        leaks,
        usage,
        notes,
    }
}

/// `report` with a soft NIC registry's RDK-R001 and RDK-R002 findings and
/// its notes added. Pure.
pub fn with_soft_registry(report: Report, reg: &SoftRegistry, cfg: &Config) -> Report {
    let mut report = with_soft_headroom(with_soft_leaks(report, &reg.leaks, cfg), &reg.usage, cfg);
    report.notes.extend(reg.notes.iter().cloned());
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_headroom_warns_and_offers_reclaim_when_dead_owners_hold_objects() {
        let u = |used, dead| SoftUsage {
            device: "softT".into(),
            kind: "qp".into(),
            used,
            limit: 16,
            dead,
        };
        let cfg = Config::default();
        assert!(soft_headroom_findings(&[u(12, 0)], &cfg).is_empty()); // 75 %
        let f = soft_headroom_findings(&[u(13, 5)], &cfg); // 81 %
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].code, Code::R002);
        assert_eq!(f[0].severity, crate::codes::Severity::Warning);
        assert!(
            f[0].message
                .contains("13 of 16 QPs in use across processes (81%, headroom 3)"),
            "{}",
            f[0].message
        );
        assert!(f[0].remedy.contains("rdmakit soft reclaim --device softT"));
        let f = soft_headroom_findings(&[u(16, 0)], &cfg);
        assert!(f[0].remedy.contains("live process"));
        assert!(soft_headroom_findings(
            &[SoftUsage {
                limit: 0,
                ..u(16, 0)
            }],
            &cfg
        )
        .is_empty());
    }

    #[test]
    fn one_finding_per_dead_owner_with_reclaim_remedy() {
        let l = |h, pid| SoftLeak {
            device: "softT".into(),
            kind: "qp".into(),
            handle: h,
            pid,
            state: "dead".into(),
            proc_state: "<absent>".into(),
            record: format!("/dev/shm/rdmakit-soft/softT/qp-{pid}-1-{h}"),
            holders: Vec::new(),
            context: format!("/dev/shm/rdmakit-soft/softT/ctx-{pid}-1"),
        };
        let f = soft_leak_findings(&[l(17, 42), l(18, 42), l(17, 43)], &Config::default());
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].code, Code::R001);
        assert!(f[0].message.contains("2 QPs on softT"), "{}", f[0].message);
        assert!(f[0].message.contains("leaky driver"), "{}", f[0].message);
        assert!(f[0].remedy.contains("rdmakit soft reclaim --device softT"));
        assert_eq!(f[0].evidence[0].path, "/proc/42/stat");
    }

    #[test]
    fn an_inherited_context_names_its_holder_and_descriptor() {
        let leak = SoftLeak {
            device: "softT".into(),
            kind: "qp".into(),
            handle: 0x4011,
            pid: 42,
            state: "dead".into(),
            proc_state: "<absent>".into(),
            record: "/dev/shm/rdmakit-soft/softT/qp-42-1-16401".into(),
            holders: vec![(43, "/proc/43/fd/5".into())],
            context: "/dev/shm/rdmakit-soft/softT/ctx-42-1".into(),
        };
        let f = soft_leak_findings(&[leak], &Config::default());
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("held by pid 43"), "{}", f[0].message);
        assert!(
            f[0].remedy.contains("End the holder (43"),
            "{}",
            f[0].remedy
        );
        assert!(f[0]
            .evidence
            .iter()
            .any(|e| e.path == "/proc/43/fd/5" && e.value.ends_with("ctx-42-1")));
    }

    /// What the registry ignored reaches the report as notes; its leaks and
    /// usage as findings.
    #[test]
    fn a_registry_view_adds_findings_and_notes() {
        let p = crate::probes::ProbeReport {
            device: "softT".into(),
            label: "soft".into(),
            ports: vec!["1: ACTIVE Ethernet 1024".into()],
            memlock_limit: None,
            results: Vec::new(),
        };
        let cfg = Config::default();
        let r = crate::report::Report::for_probed_device(p, &cfg, "rdmakit", None);
        let reg = SoftRegistry {
            usage: vec![SoftUsage {
                device: "softT".into(),
                kind: "qp".into(),
                used: 16,
                limit: 16,
                dead: 0,
            }],
            notes: vec![
                "soft registry of softT: ignored /b/rdmakit-soft.7/softT/qp-1-2-3-4: not a \
                 regular file (a FIFO)"
                    .into(),
            ],
            ..SoftRegistry::default()
        };
        let r = with_soft_registry(r, &reg, &cfg);
        assert!(r.findings.iter().any(|f| f.code == Code::R002));
        assert!(
            r.notes
                .iter()
                .any(|n| n.ends_with("not a regular file (a FIFO)")),
            "{:?}",
            r.notes
        );
    }
}
