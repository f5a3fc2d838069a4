//! The device-wide resource registry shared by every process that opens a
//! soft device of the same name on this host.
//!
//! A real NIC's driver keeps one table of QPs, CQs, MRs... for the whole
//! host, so a process killed with `SIGKILL` before it destroyed its QPs
//! leaves them counting against `max_qp` until the driver is restarted
//! (the seed's leaked-QP `ENOSPC` case; restarting openibd released them).
//! The soft NIC reproduces that with a directory per device name —
//! `$RDMAKIT_SOFT_REGISTRY_DIR/<name>/`, else
//! `$XDG_RUNTIME_DIR/rdmakit-soft/<name>/`, else `/dev/shm/rdmakit-soft/<name>/` —
//! holding one small file per live object (kind, handle, owner pid, the
//! owner's process start time from `/proc/<pid>/stat` field 22 so a recycled
//! PID is not mistaken for the owner, creation time). Every change happens
//! under an exclusive `flock` on `<dir>/.lock`: create adds (after counting
//! every other process's records of that kind, live or leaked, plus this
//! device instance's own, against the device limit), destroy
//! removes, closing the device removes what is left. Records of a process
//! that died without closing stay and keep counting until
//! [`Registry::reclaim`] (`rdmakit soft reclaim`) removes them.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The kind of a registered object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Queue pair.
    Qp,
    /// Completion queue.
    Cq,
    /// Memory region.
    Mr,
    /// Protection domain.
    Pd,
    /// Shared receive queue.
    Srq,
    /// Address handle.
    Ah,
}

impl Kind {
    /// All kinds, in display order.
    pub const ALL: [Kind; 6] = [Kind::Qp, Kind::Cq, Kind::Mr, Kind::Pd, Kind::Srq, Kind::Ah];

    /// The short name (`qp`, `cq`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Qp => "qp",
            Kind::Cq => "cq",
            Kind::Mr => "mr",
            Kind::Pd => "pd",
            Kind::Srq => "srq",
            Kind::Ah => "ah",
        }
    }

    /// Parses a short name.
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state of a record's owner, from `/proc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerState {
    /// The process exists and its start time matches the record.
    Alive,
    /// The process exited but its parent has not reaped it yet.
    Zombie,
    /// No such process, or the PID now belongs to another process.
    Dead,
}

impl OwnerState {
    /// `alive`, `zombie` or `dead`.
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerState::Alive => "alive",
            OwnerState::Zombie => "zombie",
            OwnerState::Dead => "dead",
        }
    }
}

impl fmt::Display for OwnerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One registered object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Object kind.
    pub kind: Kind,
    /// Handle (QPN for QPs, lkey for MRs, id otherwise).
    pub handle: u32,
    /// Owner process id.
    pub pid: u32,
    /// Owner's start time (`/proc/<pid>/stat` field 22, clock ticks since boot).
    pub start_time: u64,
    /// Which device instance of the owner created it (a process may open
    /// several devices of one name).
    pub instance: u32,
    /// Creation time, seconds since the Unix epoch.
    pub created_at: u64,
    /// The device limit for this kind its creator had (0: unknown).
    pub limit: u32,
    /// The record's file.
    pub path: PathBuf,
}

impl Record {
    /// The owner's current state.
    pub fn owner_state(&self) -> OwnerState {
        owner_state(self.pid, self.start_time)
    }
}

/// The `/proc/<pid>/stat` state letter and start time (field 22), if the
/// process exists.
pub fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm may contain spaces and parentheses: fields resume after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    // state is field 3; start time is field 22.
    let start = f.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// The state of process `pid` that started at `start_time`.
pub fn owner_state(pid: u32, start_time: u64) -> OwnerState {
    match proc_stat(pid) {
        Some((_, st)) if st != start_time => OwnerState::Dead,
        Some(('Z', _)) => OwnerState::Zombie,
        Some(('X', _)) | None => OwnerState::Dead,
        Some(_) => OwnerState::Alive,
    }
}

/// The directory holding every device's registry.
pub fn root() -> PathBuf {
    if let Some(d) = std::env::var_os("RDMAKIT_SOFT_REGISTRY_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        let d = PathBuf::from(d);
        if d.is_dir() {
            return d.join("rdmakit-soft");
        }
    }
    PathBuf::from("/dev/shm/rdmakit-soft")
}

/// The names of devices that have a registry directory.
pub fn device_names() -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(root())
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

static NEXT_INSTANCE: AtomicU32 = AtomicU32::new(1);

/// What [`Registry::reclaim`] did or would do.
#[derive(Debug, Default)]
pub struct Reclaim {
    /// Records of dead owners (removed unless dry run).
    pub freed: Vec<Record>,
    /// Records of zombie owners (kept: the parent may still reap them).
    pub zombie: Vec<Record>,
    /// Records of live owners (kept).
    pub live: Vec<Record>,
}

/// One device name's registry, as seen by one device instance.
#[derive(Debug)]
pub struct Registry {
    dir: PathBuf,
    pid: u32,
    start_time: u64,
    instance: u32,
}

struct LockGuard(#[allow(dead_code)] File);

impl Registry {
    /// Opens (creating if needed) the registry of device `name`.
    ///
    /// # Errors
    /// The directory cannot be created or `name` is not a plain file name.
    pub fn open(name: &str) -> io::Result<Registry> {
        Registry::open_in(&root(), name)
    }

    /// Like [`Registry::open`] under an explicit root directory.
    ///
    /// # Errors
    /// The directory cannot be created or `name` is not a plain file name.
    pub fn open_in(root: &Path, name: &str) -> io::Result<Registry> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("device name {name:?} cannot name a registry directory"),
            ));
        }
        let dir = root.join(name);
        fs::create_dir_all(&dir)?;
        // Every user of the device shares it, like /tmp: world-writable and
        // sticky (only where we own the directory; errors leave it as is).
        for d in [root, dir.as_path()] {
            let _ = fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o1777));
        }
        let pid = std::process::id();
        let start_time = proc_stat(pid).map(|(_, s)| s).unwrap_or(0);
        Ok(Registry {
            dir,
            pid,
            start_time,
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Whether this process can lock the registry and create records in it.
    pub fn usable(&self) -> bool {
        let Ok(_g) = self.lock() else { return false };
        let probe = self
            .dir
            .join(format!(".probe-{}-{}", self.pid, self.instance));
        let ok = File::create(&probe).is_ok();
        let _ = fs::remove_file(&probe);
        ok
    }

    /// The registry directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self) -> io::Result<LockGuard> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(self.dir.join(".lock"))?;
        // Other users must be able to lock too (fails harmlessly if not ours).
        let _ = f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(LockGuard(f))
    }

    /// Whether a record counts against this instance's limits: every other
    /// process's records (live or leaked, including an earlier process
    /// that had this PID) and this instance's own. Other device instances of
    /// this same process keep their own per-instance tables, so in-process
    /// tests with small limits stay independent.
    fn counts(&self, r: &Record) -> bool {
        r.pid != self.pid || r.start_time != self.start_time || r.instance == self.instance
    }

    fn file_name(&self, kind: Kind, handle: u32) -> String {
        format!("{kind}-{}-{}-{handle}", self.pid, self.instance)
    }

    /// Records a new object unless `limit` objects of `kind` already exist
    /// across all processes (live or leaked; see `counts`) on a device with
    /// the same limit: openers configured with another limit for this kind
    /// (e.g. a test's max_qp 16 beside soft0's default) count separately. `Ok(false)` when the limit is
    /// reached.
    ///
    /// # Errors
    /// The registry cannot be read or written.
    pub fn add(&self, kind: Kind, handle: u32, limit: u32) -> io::Result<bool> {
        let _g = self.lock()?;
        let n = self
            .list_unlocked()?
            .iter()
            .filter(|r| r.kind == kind && self.counts(r) && (r.limit == 0 || r.limit == limit))
            .count();
        if n >= limit as usize {
            return Ok(false);
        }
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let name = self.file_name(kind, handle);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        let mut f = File::create(&tmp)?;
        write!(
            f,
            "kind={kind}\nhandle={handle}\npid={}\nstart_time={}\ninstance={}\ncreated_at={created}\nlimit={limit}\n",
            self.pid, self.start_time, self.instance
        )?;
        drop(f);
        fs::rename(&tmp, self.dir.join(name))?;
        Ok(true)
    }

    /// Removes this instance's record of an object.
    ///
    /// # Errors
    /// The record exists but cannot be removed.
    pub fn remove(&self, kind: Kind, handle: u32) -> io::Result<()> {
        let _g = self.lock()?;
        match fs::remove_file(self.dir.join(self.file_name(kind, handle))) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Removes every record of this instance (the device is closing).
    /// Errors are swallowed: this runs in `Drop`.
    pub fn remove_instance(&self) {
        let Ok(_g) = self.lock() else { return };
        let Ok(recs) = self.list_unlocked() else {
            return;
        };
        for r in recs {
            if r.pid == self.pid && r.instance == self.instance {
                let _ = fs::remove_file(&r.path);
            }
        }
    }

    /// Every record, sorted by owner, kind and handle.
    ///
    /// # Errors
    /// The registry cannot be read.
    pub fn list(&self) -> io::Result<Vec<Record>> {
        let _g = self.lock()?;
        self.list_unlocked()
    }

    fn list_unlocked(&self) -> io::Result<Vec<Record>> {
        let mut v = Vec::new();
        for e in fs::read_dir(&self.dir)? {
            let e = e?;
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') {
                continue;
            }
            let path = e.path();
            // A record removed between read_dir and read is simply gone.
            let Ok(text) = fs::read_to_string(&path) else {
                continue;
            };
            if let Some(r) = parse_record(&text, path) {
                v.push(r);
            }
        }
        v.sort_by(|a, b| {
            (a.pid, a.instance, a.kind, a.handle).cmp(&(b.pid, b.instance, b.kind, b.handle))
        });
        Ok(v)
    }

    /// Removes (unless `dry_run`) records whose owner is dead; records of
    /// zombie and live owners are kept and reported.
    ///
    /// # Errors
    /// The registry cannot be read or a record cannot be removed.
    pub fn reclaim(&self, dry_run: bool) -> io::Result<Reclaim> {
        let _g = self.lock()?;
        let mut out = Reclaim::default();
        for r in self.list_unlocked()? {
            match r.owner_state() {
                OwnerState::Dead => {
                    if !dry_run {
                        match fs::remove_file(&r.path) {
                            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                            _ => {}
                        }
                    }
                    out.freed.push(r);
                }
                OwnerState::Zombie => out.zombie.push(r),
                OwnerState::Alive => out.live.push(r),
            }
        }
        Ok(out)
    }
}

fn parse_record(text: &str, path: PathBuf) -> Option<Record> {
    let mut kind = None;
    let (mut handle, mut pid, mut start, mut inst, mut created) = (None, None, None, 0, 0);
    let mut limit = 0;
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        match k {
            "kind" => kind = Kind::parse(v),
            "handle" => handle = v.parse().ok(),
            "pid" => pid = v.parse().ok(),
            "start_time" => start = v.parse().ok(),
            "instance" => inst = v.parse().unwrap_or(0),
            "created_at" => created = v.parse().unwrap_or(0),
            "limit" => limit = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    Some(Record {
        kind: kind?,
        handle: handle?,
        pid: pid?,
        start_time: start?,
        instance: inst,
        created_at: created,
        limit,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_counts_remove_and_self_is_alive() {
        let root = std::env::temp_dir().join(format!("rdk-reg-unit-{}", std::process::id()));
        let r = Registry::open_in(&root, "u0").unwrap();
        assert!(r.add(Kind::Qp, 17, 2).unwrap());
        assert!(r.add(Kind::Qp, 18, 2).unwrap());
        assert!(!r.add(Kind::Qp, 19, 2).unwrap());
        assert!(r.add(Kind::Cq, 1, 2).unwrap());
        let l = r.list().unwrap();
        assert_eq!(l.len(), 3);
        assert!(l.iter().all(|x| x.owner_state() == OwnerState::Alive));
        r.remove(Kind::Qp, 17).unwrap();
        assert_eq!(r.list().unwrap().len(), 2);
        let rc = r.reclaim(true).unwrap();
        assert_eq!((rc.freed.len(), rc.live.len()), (0, 2));
        r.remove_instance();
        assert!(r.list().unwrap().is_empty());
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn recycled_pid_is_dead() {
        let me = std::process::id();
        let (_, st) = proc_stat(me).unwrap();
        assert_eq!(owner_state(me, st), OwnerState::Alive);
        assert_eq!(owner_state(me, st + 1), OwnerState::Dead);
        assert_eq!(owner_state(u32::MAX - 1, 0), OwnerState::Dead);
    }
}
