//! The soft NIC's objects, from its cross-process registry
//! ([`rdmakit_soft::registry`]), as rows shaped like the kernel's: a QP is
//! `link soft0/1 lqpn 17 pid 4242 comm app owner-state dead`, with the `rdma -j` keys
//! (`ifname`, `port`, `lqpn`, `pid`, `comm`, `owner-state`; `cqn`, `pdn`, `lkey`,
//! `srqn` for the other kinds). The registry records the kind, handle and owner of
//! each object, so QP type, state and PSNs are not there.
//!
//! Every user's registry is read, read-only (as `rdma resource` lists every
//! user's objects); what it had to ignore (a forged record, a FIFO, a refused
//! directory) comes back as notes with the path and why.
//!
//! [`read`] does the I/O (the registry directories and `/proc`); the row
//! builders are pure.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rdmakit_host::netlink::ResKind;
use rdmakit_soft::registry::counters::{self, DeviceCounters};
use rdmakit_soft::registry::{self, Kind, OwnerState};
use serde_json::Value;

use crate::row::Row;

/// One registered object and what `/proc` says about its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoftObject {
    pub kind: Kind,
    /// QPN for QPs, lkey for MRs, the id otherwise.
    pub handle: u32,
    pub pid: u32,
    pub owner: OwnerState,
    /// `/proc/<pid>/comm` when the owner is alive or a zombie.
    pub comm: Option<String>,
}

/// One soft device and its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoftDevice {
    pub name: String,
    /// The registry base: each user's directory of the device is
    /// `<base>/rdmakit-soft.<uid>/<name>` (none may exist yet: no object was
    /// ever created).
    pub base: PathBuf,
    /// The objects of every user, or why the registry could not be read.
    pub objects: Result<Vec<SoftObject>, String>,
    /// Entries and directories the registry ignored, with the path and why.
    pub notes: Vec<String>,
    /// The device's counters summed over every user's contexts, live and
    /// folded ([`registry::counters`]), or why they could not be read.
    pub counters: Result<DeviceCounters, String>,
}

impl SoftDevice {
    /// Objects of one registry kind.
    pub fn of(&self, kind: Kind) -> impl Iterator<Item = &SoftObject> {
        self.objects
            .as_deref()
            .unwrap_or_default()
            .iter()
            .filter(move |o| o.kind == kind)
    }
}

/// The soft devices to show: `configured` (the names the soft provider opens, e.g.
/// soft0), whether or not their registry exists, plus every other device any user
/// has a registry of that holds objects (a process may have used another name).
pub fn read(configured: &[String]) -> Vec<SoftDevice> {
    read_in(&registry::base(), configured)
}

/// [`read`] under an explicit registry base.
pub fn read_in(base: &Path, configured: &[String]) -> Vec<SoftDevice> {
    let mut names: BTreeSet<String> = configured.iter().cloned().collect();
    names.extend(registry::device_names_in(base));
    names
        .into_iter()
        .filter_map(|name| {
            let d = device(base, &name);
            let keep = configured.contains(&name)
                || matches!(&d.objects, Ok(v) if !v.is_empty())
                || d.objects.is_err()
                || !d.notes.is_empty()
                || d.counters
                    .as_ref()
                    .is_ok_and(|c| c.total.any() || !c.ignored.is_empty());
            keep.then_some(d)
        })
        .collect()
}

fn device(base: &Path, name: &str) -> SoftDevice {
    // Listing never creates a registry: only a device that was opened has one.
    // One /proc/<pid>/comm read per owner, not per object.
    let mut comms: std::collections::HashMap<u32, Option<String>> =
        std::collections::HashMap::new();
    let (objects, notes) = match registry::survey_in(base, name) {
        Ok(s) => (
            Ok(s.records
                .into_iter()
                .map(|r| {
                    let owner = r.owner;
                    let comm = match owner {
                        OwnerState::Dead => None,
                        _ => comms
                            .entry(r.pid)
                            .or_insert_with(|| registry::comm(r.pid))
                            .clone(),
                    };
                    SoftObject {
                        kind: r.kind,
                        handle: r.handle,
                        pid: r.pid,
                        owner,
                        comm,
                    }
                })
                .collect()),
            s.ignored
                .iter()
                .map(|i| format!("{name}: ignored {}: {}", i.path.display(), i.why))
                .collect(),
        ),
        Err(e) => (
            Err(format!(
                "reading the registries under {}: {e}",
                base.display()
            )),
            Vec::new(),
        ),
    };
    let counters = counters::read_in(base, name)
        .map_err(|e| format!("reading the counters under {}: {e}", base.display()));
    SoftDevice {
        name: name.to_string(),
        base: base.to_path_buf(),
        objects,
        notes,
        counters,
    }
}

/// The registry kind behind a resource kind (the soft NIC tracks no contexts or CM IDs).
pub fn registry_kind(kind: ResKind) -> Option<Kind> {
    match kind {
        ResKind::Qp => Some(Kind::Qp),
        ResKind::Cq => Some(Kind::Cq),
        ResKind::Mr => Some(Kind::Mr),
        ResKind::Pd => Some(Kind::Pd),
        ResKind::Srq => Some(Kind::Srq),
        ResKind::Ctx | ResKind::CmId => None,
    }
}

/// The summary row (`rdma resource`): object counts per kind, of every owner
/// or of `pid` alone. A soft device has no kernel index, so the JSON has
/// `ifname` and no `ifindex`.
pub fn summary_row(d: &SoftDevice, pid: Option<u32>) -> Row {
    let mut row = Row::new(format!("-: {}: (rdmakit soft NIC)", d.name));
    row.json_only("ifname", Value::from(d.name.as_str()));
    if let Some(p) = pid {
        row.num("pid", p);
    }
    let of = |k: Kind| d.of(k).filter(move |o| pid.is_none_or(|p| o.pid == p));
    for k in [Kind::Pd, Kind::Cq, Kind::Qp, Kind::Mr, Kind::Srq, Kind::Ah] {
        row.num(k.as_str(), of(k).count() as u64);
    }
    let leaked = d
        .objects
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|o| pid.is_none_or(|p| o.pid == p))
        .filter(|o| o.owner != OwnerState::Alive)
        .count();
    if leaked > 0 {
        row.push(
            "leaked",
            Value::from(leaked as u64),
            Some(format!(
                "{leaked} (owners dead or zombie: rdmakit soft reclaim)"
            )),
        );
    }
    row
}

/// The rows of one kind (`rdma resource show qp`), of every owner or of
/// `pid` alone, in owner then handle order.
pub fn rows(kind: ResKind, d: &SoftDevice, pid: Option<u32>) -> Vec<Row> {
    let Some(k) = registry_kind(kind) else {
        return Vec::new();
    };
    d.of(k)
        .filter(|o| pid.is_none_or(|p| o.pid == p))
        .map(|o| object_row(kind, &d.name, o))
        .collect()
}

fn object_row(kind: ResKind, dev: &str, o: &SoftObject) -> Row {
    let mut row = Row::new(if kind == ResKind::Qp {
        format!("link {dev}/1")
    } else {
        format!("dev {dev}")
    });
    row.json_only("ifname", Value::from(dev));
    match kind {
        ResKind::Qp => {
            row.json_only("port", Value::from(1u32));
            row.num("lqpn", o.handle);
        }
        ResKind::Cq => row.num("cqn", o.handle),
        ResKind::Mr => row.key("lkey", Some(o.handle)),
        ResKind::Pd => row.num("pdn", o.handle),
        ResKind::Srq => row.num("srqn", o.handle),
        ResKind::Ctx | ResKind::CmId => {}
    }
    row.num("pid", o.pid);
    if let Some(c) = &o.comm {
        row.text("comm", c);
    }
    row.text("owner-state", o.owner.as_str());
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(objects: Vec<SoftObject>) -> SoftDevice {
        SoftDevice {
            name: "soft0".into(),
            base: PathBuf::from("/dev/shm"),
            objects: Ok(objects),
            notes: Vec::new(),
            counters: Ok(DeviceCounters::default()),
        }
    }

    fn obj(kind: Kind, handle: u32, pid: u32, owner: OwnerState) -> SoftObject {
        SoftObject {
            kind,
            handle,
            pid,
            owner,
            comm: (owner == OwnerState::Alive).then(|| "app".to_string()),
        }
    }

    #[test]
    fn qp_rows_have_the_kernel_rows_keys_and_the_owner_state() {
        let d = dev(vec![
            obj(Kind::Qp, 17, 4242, OwnerState::Dead),
            obj(Kind::Qp, 18, 4243, OwnerState::Alive),
            obj(Kind::Cq, 1, 4242, OwnerState::Dead),
        ]);
        let r = rows(ResKind::Qp, &d, None);
        assert_eq!(rows(ResKind::Qp, &d, Some(4243)).len(), 1);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0].human(),
            "link soft0/1 lqpn 17 pid 4242 owner-state dead"
        );
        assert_eq!(
            r[1].human(),
            "link soft0/1 lqpn 18 pid 4243 comm app owner-state alive"
        );
        let v: Value = serde_json::from_str(&crate::row::json(&r)).unwrap();
        assert_eq!(v[0]["ifname"], "soft0");
        assert_eq!(v[0]["port"], 1);
        assert_eq!(v[0]["lqpn"], 17);
        assert_eq!(v[0]["owner-state"], "dead");
        assert_eq!(
            rows(ResKind::Cq, &d, None)[0].human(),
            "dev soft0 cqn 1 pid 4242 owner-state dead"
        );
        assert!(rows(ResKind::Ctx, &d, None).is_empty());
    }

    #[test]
    fn summary_counts_and_marks_leaks() {
        let d = dev(vec![
            obj(Kind::Qp, 17, 4242, OwnerState::Dead),
            obj(Kind::Qp, 18, 4242, OwnerState::Zombie),
            obj(Kind::Pd, 1, 4243, OwnerState::Alive),
        ]);
        let s = summary_row(&d, None);
        assert_eq!(
            summary_row(&d, Some(4243)).human(),
            "-: soft0: (rdmakit soft NIC) pid 4243 pd 1 cq 0 qp 0 mr 0 srq 0 ah 0"
        );
        assert_eq!(
            s.human(),
            "-: soft0: (rdmakit soft NIC) pd 1 cq 0 qp 2 mr 0 srq 0 ah 0 leaked 2 (owners dead \
             or zombie: rdmakit soft reclaim)"
        );
        assert_eq!(s.get("qp"), Some(&Value::from(2u64)));
        assert_eq!(s.get("ifindex"), None);
    }

    /// Listing reads registries but never creates one; empty registries of other
    /// names are left out, the configured device is always shown.
    #[test]
    fn read_in_lists_without_creating() {
        let base = tempfile::tempdir().unwrap();
        let reg = registry::Registry::open_in(base.path(), "other0").unwrap();
        let mine = reg.dir().parent().unwrap().to_path_buf();
        std::fs::create_dir_all(mine.join("empty0")).unwrap();
        assert!(reg.add(Kind::Qp, 17, 8).unwrap());
        let devs = read_in(base.path(), &["soft0".to_string()]);
        let names: Vec<&str> = devs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["other0", "soft0"]);
        assert!(!mine.join("soft0").exists());
        let other = &devs[0];
        let qps: Vec<&SoftObject> = other.of(Kind::Qp).collect();
        assert_eq!(qps.len(), 1);
        assert_eq!(qps[0].pid, std::process::id());
        assert_eq!(qps[0].owner, OwnerState::Alive);
        assert!(qps[0].comm.is_some());
        assert!(other.notes.is_empty(), "{:?}", other.notes);
    }

    /// What the registry ignores is a note naming the path and why.
    #[test]
    fn ignored_entries_become_notes() {
        let base = tempfile::tempdir().unwrap();
        let reg = registry::Registry::open_in(base.path(), "junk0").unwrap();
        std::fs::write(reg.dir().join("qp-1-2-3"), "x").unwrap();
        let devs = read_in(base.path(), &[]);
        assert_eq!(devs.len(), 1);
        assert_eq!(
            devs[0].notes,
            [format!(
                "junk0: ignored {}: not a name rdmakit writes",
                reg.dir().join("qp-1-2-3").display()
            )]
        );
    }
}
