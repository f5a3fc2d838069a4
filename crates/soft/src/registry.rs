//! The device-wide resource registry shared by every process that opens a
//! soft device of the same name on this host.
//!
//! A real NIC's driver keeps one table of QPs, CQs, MRs... for the whole
//! host. Its objects belong to the uverbs *file* a process opened: the kernel
//! frees them when the last holder of that file goes — the process exits or
//! dies, unless a forked child still holds the descriptor (then they stay,
//! owned by nobody who will ever destroy them: a leak). The soft NIC
//! reproduces that with a directory per device name —
//! `$RDMAKIT_SOFT_REGISTRY_DIR/<name>/`, else
//! `$XDG_RUNTIME_DIR/rdmakit-soft/<name>/`, else `/dev/shm/rdmakit-soft/<name>/`:
//!
//! - each open device instance (a context) creates a **context file**
//!   `ctx-<pid>-<instance>` and holds an exclusive `flock` on it through a
//!   close-on-exec descriptor (the drop-in libibverbs hands it out as
//!   `ibv_context.cmd_fd`). A forked child inherits the descriptor and with it
//!   the lock, as it inherits a uverbs descriptor; the lock goes when the last
//!   holder exits, dies or execs;
//! - one small **record** per live object (kind, handle, owner pid, the
//!   owner's process start time from `/proc/<pid>/stat` field 22 so a recycled
//!   PID is not mistaken for the owner, creation time, the device limit);
//! - every change happens under an exclusive `flock` on `<dir>/.lock`: create
//!   adds (after counting every other process's records of that kind plus this
//!   instance's own against the device limit), destroy removes, closing the
//!   device removes what is left.
//!
//! A context nobody holds any more is gone with its objects: [`Registry::list`]
//! no longer shows them and the next create, open or reclaim deletes their
//! files. A context still held by another process after its creator died
//! (a forked child) keeps its objects — [`Holding::Inherited`], the leak the
//! doctor names (RDK-R001). A **leaky** device (`DeviceConfig::leaky`,
//! `RDMAKIT_SOFT_LEAKY=1` or [`Registry::set_leaky`], i.e. `rdmakit soft leaky
//! on`) keeps dead processes' objects on purpose, counting against the
//! limits — the seed's storage-cluster case of QPs exhausting a device until
//! openibd is restarted — until [`Registry::reclaim`] (`rdmakit soft
//! reclaim`) frees them.

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
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

/// Who still holds the context an object belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holding {
    /// The process that created it still has the device open.
    Owner,
    /// The creator is gone, but other processes hold its context (a forked
    /// child inherited the descriptor): the objects stay, as the kernel keeps
    /// them — a leak nobody will destroy.
    Inherited,
    /// Nobody holds the context; the objects stay only because their device
    /// is a leaky driver, until `reclaim`.
    Nobody,
    /// No context file (a record of an older rdmakit): judged by the owner
    /// pid alone.
    Unknown,
}

impl Holding {
    /// `owner`, `inherited`, `nobody` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Holding::Owner => "owner",
            Holding::Inherited => "inherited",
            Holding::Nobody => "nobody",
            Holding::Unknown => "unknown",
        }
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
    /// Created by a leaky device: kept after its context is gone.
    pub leaky: bool,
    /// Who holds its context (filled by [`Registry::list`]).
    pub holding: Holding,
    /// The record's file.
    pub path: PathBuf,
}

impl Record {
    /// The owner's current state.
    pub fn owner_state(&self) -> OwnerState {
        owner_state(self.pid, self.start_time)
    }

    /// The context file the record's object belongs to.
    pub fn context_path(&self) -> PathBuf {
        self.path
            .with_file_name(format!("ctx-{}-{}", self.pid, self.instance))
    }
}

/// The processes holding `file` open (`/proc/<pid>/fd/*` links to it): who
/// keeps an inherited context alive. Processes whose descriptors cannot be
/// read (another user's, without privileges) are not seen.
pub fn holders(file: &Path) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if fs::read_link(fd.path()).is_ok_and(|t| t == file) {
                out.push((pid, fd.path().display().to_string()));
            }
        }
    }
    out
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
    /// Records whose context nobody holds (removed unless dry run).
    pub freed: Vec<Record>,
    /// Records of zombie owners without a context file (kept: the parent
    /// may still reap them).
    pub zombie: Vec<Record>,
    /// Records of live owners (kept).
    pub live: Vec<Record>,
    /// Records whose creator is gone but whose context another process
    /// still holds (kept, as the kernel keeps them: end that process).
    pub inherited: Vec<Record>,
}

/// One device name's registry, as seen by one device instance.
#[derive(Debug)]
pub struct Registry {
    dir: PathBuf,
    pid: u32,
    start_time: u64,
    instance: u32,
    /// This instance's context file, locked while the device is open
    /// ([`Registry::attach`]).
    ctx: std::sync::Mutex<Option<File>>,
    /// Records this instance creates survive its death (a leaky driver).
    leaky: std::sync::atomic::AtomicBool,
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
            ctx: std::sync::Mutex::new(None),
            leaky: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Makes this registry handle a device instance's: creates its context
    /// file and holds the lock on it until [`Registry::remove_instance`] (or
    /// until every process that inherited the descriptor is gone). `leaky`:
    /// this instance's objects outlive it (a leaky driver). Frees the
    /// objects of contexts nobody holds first, as every create does.
    ///
    /// # Errors
    /// The context file cannot be created or locked.
    pub fn attach(&self, leaky: bool) -> io::Result<()> {
        let _g = self.lock()?;
        self.sweep_unlocked();
        let path = self.dir.join(format!("ctx-{}-{}", self.pid, self.instance));
        let f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .mode(0o644)
            .custom_flags(libc_cloexec())
            .open(&path)?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        (&f).write_all(
            format!(
                "pid={}\nstart_time={}\ninstance={}\nleaky={}\ncreated_at={created}\n",
                self.pid,
                self.start_time,
                self.instance,
                u8::from(leaky)
            )
            .as_bytes(),
        )?;
        *self.ctx.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
        self.leaky.store(leaky, Ordering::Relaxed);
        Ok(())
    }

    /// The locked context descriptor (close-on-exec), while attached: what
    /// `ibv_context.cmd_fd` is for the drop-in libibverbs. Valid until
    /// [`Registry::remove_instance`].
    pub fn context_fd(&self) -> Option<RawFd> {
        self.ctx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|f| f.as_raw_fd())
    }

    /// Whether the device was switched to a leaky driver for every process
    /// (`rdmakit soft leaky on`, file `.options`).
    pub fn device_leaky(&self) -> bool {
        fs::read_to_string(self.dir.join(".options"))
            .map(|t| t.lines().any(|l| l.trim() == "leaky=1"))
            .unwrap_or(false)
    }

    /// Switches the device's leaky-driver option for every process that
    /// opens it from now on (a device option, like a module parameter).
    ///
    /// # Errors
    /// The option file cannot be written.
    pub fn set_leaky(&self, on: bool) -> io::Result<()> {
        let _g = self.lock()?;
        let tmp = self.dir.join(".options.tmp");
        fs::write(&tmp, format!("leaky={}\n", u8::from(on)))?;
        let _ = fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o644));
        fs::rename(&tmp, self.dir.join(".options"))
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
        self.sweep_unlocked();
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
            "kind={kind}\nhandle={handle}\npid={}\nstart_time={}\ninstance={}\ncreated_at={created}\nlimit={limit}\nleaky={}\n",
            self.pid, self.start_time, self.instance, u8::from(self.leaky.load(Ordering::Relaxed))
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
        if let Ok(recs) = self.list_unlocked() {
            for r in recs {
                if r.pid == self.pid && r.instance == self.instance {
                    let _ = fs::remove_file(&r.path);
                }
            }
        }
        if self
            .ctx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .is_some()
        {
            let _ = fs::remove_file(self.dir.join(format!("ctx-{}-{}", self.pid, self.instance)));
        }
    }

    /// Every record, sorted by owner, kind and handle.
    ///
    /// # Errors
    /// The registry cannot be read.
    pub fn list(&self) -> io::Result<Vec<Record>> {
        let _g = self.lock()?;
        Ok(self
            .list_unlocked()?
            .into_iter()
            .filter(|r| !freed(r))
            .collect())
    }

    /// Deletes the records (and context files) of contexts nobody holds,
    /// except a leaky driver's; errors leave files for the next sweep.
    fn sweep_unlocked(&self) {
        let Ok(recs) = self.list_unlocked() else {
            return;
        };
        let mut gone: HashMap<PathBuf, bool> = HashMap::new();
        for r in &recs {
            if freed(r) {
                let _ = fs::remove_file(&r.path);
                gone.insert(r.context_path(), true);
            } else if r.holding == Holding::Nobody {
                gone.insert(r.context_path(), false);
            }
        }
        // Context files without records (a context that created nothing).
        if let Ok(rd) = fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let name = e.file_name();
                let Some(n) = name.to_str() else { continue };
                if n.starts_with("ctx-") && !gone.contains_key(&e.path()) {
                    if let Some((pid, inst)) = n[4..].split_once('-') {
                        let (Ok(pid), Ok(inst)) = (pid.parse(), inst.parse()) else {
                            continue;
                        };
                        if context_holding(&self.dir, pid, inst) == Holding::Nobody
                            && !context_leaky(&e.path())
                        {
                            gone.insert(e.path(), true);
                        }
                    }
                }
            }
        }
        for (ctx, remove) in gone {
            if remove {
                let _ = fs::remove_file(ctx);
            }
        }
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
        let mut held: HashMap<(u32, u32), Holding> = HashMap::new();
        for r in &mut v {
            r.holding = *held
                .entry((r.pid, r.instance))
                .or_insert_with(|| context_holding(&self.dir, r.pid, r.instance));
            if r.holding == Holding::Owner && r.owner_state() != OwnerState::Alive {
                r.holding = Holding::Inherited;
            }
        }
        v.sort_by(|a, b| {
            (a.pid, a.instance, a.kind, a.handle).cmp(&(b.pid, b.instance, b.kind, b.handle))
        });
        Ok(v)
    }

    /// Removes (unless `dry_run`) the records of contexts nobody holds any
    /// more — a leaky driver's dead processes' objects — like restarting
    /// openibd. Records of live owners, of contexts a forked child still
    /// holds, and (without a context file) of zombies are kept and reported.
    ///
    /// # Errors
    /// The registry cannot be read or a record cannot be removed.
    pub fn reclaim(&self, dry_run: bool) -> io::Result<Reclaim> {
        let _g = self.lock()?;
        let mut out = Reclaim::default();
        let mut contexts = Vec::new();
        for r in self.list_unlocked()? {
            let free = match r.holding {
                Holding::Nobody => true,
                Holding::Unknown => r.owner_state() == OwnerState::Dead,
                Holding::Owner | Holding::Inherited => false,
            };
            if free {
                if !dry_run {
                    match fs::remove_file(&r.path) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                        _ => {}
                    }
                    contexts.push(r.context_path());
                }
                out.freed.push(r);
                continue;
            }
            match (r.holding, r.owner_state()) {
                (Holding::Inherited, _) => out.inherited.push(r),
                (_, OwnerState::Zombie) => out.zombie.push(r),
                _ => out.live.push(r),
            }
        }
        for c in contexts {
            let _ = fs::remove_file(c);
        }
        if !dry_run {
            self.sweep_unlocked();
        }
        Ok(out)
    }
}

/// Whether a record is gone already: its context is released and it was not
/// created by a leaky driver (or, without a context file, its owner is dead).
fn freed(r: &Record) -> bool {
    !r.leaky
        && match r.holding {
            Holding::Nobody => true,
            Holding::Unknown => r.owner_state() == OwnerState::Dead,
            Holding::Owner | Holding::Inherited => false,
        }
}

/// Who holds context `ctx-<pid>-<instance>`: try its lock without waiting.
fn context_holding(dir: &Path, pid: u32, instance: u32) -> Holding {
    let path = dir.join(format!("ctx-{pid}-{instance}"));
    let Ok(f) = OpenOptions::new()
        .read(true)
        .custom_flags(libc_cloexec())
        .open(&path)
    else {
        return Holding::Unknown;
    };
    match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        // Got it: nobody else holds the context (dropping `f` unlocks).
        Ok(()) => Holding::Nobody,
        Err(_) => Holding::Owner,
    }
}

fn context_leaky(path: &Path) -> bool {
    fs::read_to_string(path)
        .map(|t| t.lines().any(|l| l.trim() == "leaky=1"))
        .unwrap_or(false)
}

/// `O_CLOEXEC`: the context descriptor goes with `exec`, as libibverbs'
/// uverbs descriptor (opened with O_CLOEXEC) does.
fn libc_cloexec() -> i32 {
    rustix::fs::OFlags::CLOEXEC.bits() as i32
}

fn parse_record(text: &str, path: PathBuf) -> Option<Record> {
    let mut kind = None;
    let (mut handle, mut pid, mut start, mut inst, mut created) = (None, None, None, 0, 0);
    let mut limit = 0;
    let mut leaky = false;
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
            "leaky" => leaky = v == "1",
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
        leaky,
        holding: Holding::Unknown,
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
    fn an_attached_context_holds_its_records_until_removed() {
        let root = std::env::temp_dir().join(format!("rdk-reg-ctx-{}", std::process::id()));
        let owner = Registry::open_in(&root, "c0").unwrap();
        owner.attach(false).unwrap();
        assert!(owner.context_fd().is_some());
        assert!(owner.add(Kind::Qp, 17, 8).unwrap());
        // Another handle (another process's view) sees the lock held.
        let other = Registry::open_in(&root, "c0").unwrap();
        let l = other.list().unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].holding, Holding::Owner);
        assert!(l[0].context_path().exists());
        let rc = other.reclaim(true).unwrap();
        assert_eq!((rc.freed.len(), rc.live.len()), (0, 1));
        owner.remove_instance();
        assert!(other.list().unwrap().is_empty());
        assert!(!l[0].context_path().exists());
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn a_released_context_is_freed_unless_leaky() {
        let root = std::env::temp_dir().join(format!("rdk-reg-rel-{}", std::process::id()));
        for leaky in [false, true] {
            let owner = Registry::open_in(&root, "r0").unwrap();
            owner.attach(leaky).unwrap();
            assert!(owner.add(Kind::Cq, 1, 8).unwrap());
            // What process death does to the lock: the descriptor closes.
            drop(owner.ctx.lock().unwrap().take());
            let other = Registry::open_in(&root, "r0").unwrap();
            let l = other.list().unwrap();
            if leaky {
                assert_eq!(l.len(), 1);
                assert_eq!((l[0].holding, l[0].leaky), (Holding::Nobody, true));
                let rc = other.reclaim(false).unwrap();
                assert_eq!(rc.freed.len(), 1);
            } else {
                assert!(l.is_empty(), "{l:?}");
                // The next create deletes the files.
                other.add(Kind::Pd, 1, 8).unwrap();
                other.remove(Kind::Pd, 1).unwrap();
            }
            let left = rdmakit_testkit::file_names(&root.join("r0"), |n| !n.starts_with('.'));
            assert!(left.is_empty(), "{left:?}");
        }
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
