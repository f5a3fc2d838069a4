//! The device-wide resource registry: what every process that opens a soft
//! device of one name on this host has created, so device limits count
//! across processes and users and leaks behave as on a real NIC.
//!
//! A real NIC's driver keeps one table of QPs, CQs, MRs... for the whole
//! host. Its objects belong to the uverbs *file* a process opened: the kernel
//! frees them when the last holder of that file goes — the process exits or
//! dies, unless a forked child still holds the descriptor (then they stay,
//! owned by nobody who will ever destroy them: a leak).
//!
//! The soft NIC runs inside every process that opens it, root's included,
//! so the registry trusts no other user: each user writes only in its own
//! directory (`crate::userdir`), `<base>/rdmakit-soft.<uid>/<name>/`, mode
//! 0755, and reads the others' read-only:
//!
//! - each open device instance (a context) has a **context file**
//!   `ctx-<pid>-<start_time>-<instance>` (mode 0600) on which it holds an
//!   exclusive `flock` through a close-on-exec descriptor (the drop-in
//!   libibverbs hands it out as `ibv_context.cmd_fd`). It is created, locked
//!   and then renamed into place, so it is never seen unlocked while its
//!   context lives. A forked child inherits the descriptor and with it the
//!   lock, as it inherits a uverbs descriptor; the lock goes when the last
//!   holder exits, dies or execs;
//! - one small **record** per live object ([`record`]: kind, handle, owner
//!   pid, the owner's start time so a recycled pid is not taken for it,
//!   instance, creation time, the creator's limit, leaky), mode 0644,
//!   written under a temporary name and renamed into place;
//! - changes to one's own directory happen under its `.lock` (mode 0600,
//!   taken with a bounded wait, [`LOCK_WAIT`]); other users' directories are only
//!   read (and, by root's `reclaim`, pruned), so no lock is shared between
//!   users: two users racing for a device's last slot may both get it.
//!
//! Reading any directory trusts nothing in it: entries are opened
//! relative to the directory's descriptor without following links or
//! blocking, checked for type, owner and size, and at most
//! [`MAX_ENTRIES`] are read. A record **counts** toward the limits
//! only when the kernel confirms it: its owner is alive with the recorded
//! start time and runs as the directory's user, or its context is still
//! held (a forked child, [`Holding::Inherited`]), or it is a leaky driver's
//! record of a dead process and either the reader's own or the device is a
//! leaky driver by root's option. Forged and foreign entries are ignored and
//! reported ([`Survey::ignored`]).
//!
//! A context nobody holds any more is gone with its objects: surveys no
//! longer show them and its owner's next create, open or reclaim deletes
//! their files. A **leaky** device (`DeviceConfig::leaky`,
//! `RDMAKIT_SOFT_LEAKY=1` or [`Registry::set_leaky`], i.e. `rdmakit soft
//! leaky on`) keeps dead processes' objects on purpose — the
//! storage-cluster case of QPs exhausting a device until openibd is
//! restarted — until [`Registry::reclaim`] (`rdmakit soft reclaim`) frees
//! them.

pub mod counters;
pub mod record;

mod lock;
mod proc;
mod scan;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fs::{self as rfs, AtFlags, FlockOperation, Mode, OFlags};

pub use lock::LOCK_WAIT;
pub use proc::{
    check_owner, comm, owner_state, proc_stat, FileId, Locks, Owner, OwnerState, LOCKS_CAP,
};
pub use record::{parse_record, Ctx, Fields, Kind, ParseError, MAX_RECORD_BYTES};
pub use scan::{MAX_ENTRIES, MAX_REPORTED};

use crate::userdir::{self, Refused, UserDir};
use scan::{scan, CtxState, Reader, Scan};

/// Mode of a device's directory within a user's: as the user's.
const DEVICE_DIR_MODE: u32 = userdir::DIR_MODE;

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
    /// No context file, or one this process cannot judge (another user's,
    /// `/proc/locks` unreadable): judged by the owner pid alone.
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

/// One registered object, as this process read it.
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
    /// Who holds its context.
    pub holding: Holding,
    /// The user whose directory holds it (its owner runs as that user).
    pub uid: u32,
    /// Its owner's state when read.
    pub owner: OwnerState,
    /// Whether it counts toward the device's limits for this process.
    pub counts: bool,
    /// The record's file.
    pub path: PathBuf,
}

impl Record {
    /// The owner's current state.
    pub fn owner_state(&self) -> OwnerState {
        owner_state(self.pid, self.start_time)
    }

    /// Its context.
    pub fn ctx(&self) -> Ctx {
        Ctx {
            pid: self.pid,
            start_time: self.start_time,
            instance: self.instance,
        }
    }

    /// The context file the record's object belongs to.
    pub fn context_path(&self) -> PathBuf {
        self.path.with_file_name(self.ctx().file_name())
    }

    /// Its file's name.
    fn file_name(&self) -> String {
        record::record_name(self.kind, self.ctx(), self.handle)
    }

    /// Gone already: its context is released and it was not created by a
    /// leaky driver (or, without a context to judge, its owner is dead).
    /// Surveys leave it out and its owner's next sweep deletes it.
    pub fn freed(&self) -> bool {
        !self.leaky && self.reclaimable()
    }

    /// What `reclaim` frees: nobody holds its context (or, without one to
    /// judge, its owner is dead).
    fn reclaimable(&self) -> bool {
        match self.holding {
            Holding::Nobody => true,
            Holding::Unknown => self.owner == OwnerState::Dead,
            Holding::Owner | Holding::Inherited => false,
        }
    }
}

/// The processes holding `file` open (a `/proc/<pid>/fd/<n>` that is it):
/// who keeps an inherited context alive. Processes whose descriptors cannot
/// be read (another user's, without privileges) are not seen.
pub fn holders(file: &Path) -> Vec<(u32, String)> {
    holders_many(&[file.to_path_buf()])
        .remove(file)
        .unwrap_or_default()
}

/// [`holders`] of many files in one pass over `/proc` (a status with many
/// inherited contexts reads every process's descriptors once, not once per
/// context).
pub fn holders_many(files: &[PathBuf]) -> HashMap<PathBuf, Vec<(u32, String)>> {
    let ids: Vec<(PathBuf, FileId)> = files
        .iter()
        .filter_map(|f| match rfs::lstat(f) {
            Ok(st) if rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::RegularFile => {
                Some((f.clone(), FileId::of(&st)))
            }
            _ => None,
        })
        .collect();
    let by_id = proc::holders_of(&ids.iter().map(|(_, id)| *id).collect());
    ids.into_iter()
        .map(|(f, id)| (f, by_id.get(&id).cloned().unwrap_or_default()))
        .collect()
}

/// The directory holding every user's registry ([`userdir::base`]).
pub fn base() -> PathBuf {
    userdir::base()
}

/// The names of devices any user has a registry directory for.
pub fn device_names() -> Vec<String> {
    device_names_in(&base())
}

/// [`device_names`] under an explicit base.
pub fn device_names_in(base: &Path) -> Vec<String> {
    let mut out = BTreeSet::new();
    let Ok((dirs, _)) = UserDir::all_in(base) else {
        return Vec::new();
    };
    for d in dirs {
        let Ok((names, _)) = scan::names(&d) else {
            continue;
        };
        for n in names {
            let Ok(n) = String::from_utf8(n) else {
                continue;
            };
            if check_device_name(&n).is_err() {
                continue;
            }
            if rfs::statat(d.fd(), n.as_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
                rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::Directory
            }) {
                out.insert(n);
            }
        }
    }
    out.into_iter().collect()
}

/// Names in a user's directory that other parts of the soft NIC use (the
/// same-host channel's `net`): no device can be named so.
pub const RESERVED: &[&str] = &["net"];

/// A device name that can name a directory: a plain name not starting with
/// a dot (dot names are the registry's own files) and not [`RESERVED`].
fn check_device_name(name: &str) -> io::Result<()> {
    userdir::check_name(name)?;
    if name.starts_with('.') || RESERVED.contains(&name) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("device name {name:?} cannot name a registry directory"),
        ));
    }
    Ok(())
}

/// Every user's registry of one device, read without changing anything.
#[derive(Debug, Default)]
pub struct Survey {
    /// The device name.
    pub name: String,
    /// The base the user directories are in.
    pub base: PathBuf,
    /// The device directories read, one per user that has one.
    pub dirs: Vec<PathBuf>,
    /// Every record not gone already ([`Record::freed`]), by user, owner,
    /// kind and handle.
    pub records: Vec<Record>,
    /// Directories refused and entries ignored, with why: a link, a FIFO, a
    /// file of another uid, an oversized or unparsable record, a record
    /// naming another user's process.
    pub ignored: Vec<Refused>,
    /// The device is a leaky driver by root's option (for every user).
    pub root_leaky: bool,
    /// This user's own leaky option (for its own processes).
    pub own_leaky: bool,
}

/// [`Survey`] of device `name` under [`base`].
///
/// # Errors
/// As [`survey_in`].
pub fn survey(name: &str) -> io::Result<Survey> {
    survey_in(&base(), name)
}

/// Reads every user's registry of device `name` under `base`, read-only
/// (nothing is created, locked or deleted).
///
/// # Errors
/// `name` cannot name a directory, or the base cannot be listed.
pub fn survey_in(base: &Path, name: &str) -> io::Result<Survey> {
    check_device_name(name)?;
    let me = userdir::euid();
    let (users, refused) = UserDir::all_in(base)?;
    let mut out = Survey {
        name: name.to_string(),
        base: base.to_path_buf(),
        ignored: refused,
        ..Survey::default()
    };
    let mut devs = Vec::new();
    for u in users {
        match u.existing_subdir(name) {
            Ok(Some(d)) => devs.push(d),
            Ok(None) => {}
            Err(e) => out.ignored.push(Refused {
                path: u.path().join(name),
                why: e.to_string(),
            }),
        }
    }
    out.root_leaky = devs
        .iter()
        .find(|d| d.uid() == 0)
        .is_some_and(options_leaky);
    out.own_leaky = devs
        .iter()
        .find(|d| d.uid() == me)
        .is_some_and(options_leaky);
    let mut rd = Reader::new(me, out.root_leaky);
    for d in &devs {
        let s = scan(d, &mut rd, None);
        out.records
            .extend(s.records.iter().filter(|r| !r.freed()).cloned());
        out.ignored.extend(s.into_ignored(d));
        out.dirs.push(d.path().to_path_buf());
    }
    sort(&mut out.records);
    Ok(out)
}

fn sort(v: &mut [Record]) {
    v.sort_by(|a, b| {
        (a.uid, a.pid, a.start_time, a.instance, a.kind, a.handle).cmp(&(
            b.uid,
            b.pid,
            b.start_time,
            b.instance,
            b.kind,
            b.handle,
        ))
    });
}

/// Whether a device directory's `.options` says `leaky=1`.
fn options_leaky(d: &UserDir) -> bool {
    let Ok(Some(f)) = scan::open_checked(d, ".options", MAX_RECORD_BYTES) else {
        return false;
    };
    proc::read_fd(&f, MAX_RECORD_BYTES)
        .ok()
        .flatten()
        .is_some_and(|b| {
            String::from_utf8_lossy(&b)
                .lines()
                .any(|l| l.trim() == "leaky=1")
        })
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
    /// Directories refused and entries ignored (left alone), with why.
    pub ignored: Vec<Refused>,
}

/// How long a list of other users' directories is reused before the base
/// is listed again.
const OTHERS_TTL: Duration = Duration::from_secs(1);

/// One device name's registry, as seen by one device instance: this user's
/// directory of it, and the other users' read-only.
#[derive(Debug)]
pub struct Registry {
    base: PathBuf,
    name: String,
    own: UserDir,
    uid: u32,
    pid: u32,
    start_time: u64,
    instance: u32,
    /// This instance's context file, locked while the device is open
    /// ([`Registry::attach`]).
    ctx: Mutex<Option<OwnedFd>>,
    /// Records this instance creates survive its death (a leaky driver).
    leaky: AtomicBool,
    /// The longest wait for the lock, in milliseconds.
    wait_ms: AtomicU64,
    /// Other users' directories of this device, and when they were listed.
    others: Mutex<Option<(Instant, Vec<UserDir>)>>,
}

impl Registry {
    /// Opens (creating if needed) this user's registry of device `name`
    /// under [`base`].
    ///
    /// # Errors
    /// As [`Registry::open_in`].
    pub fn open(name: &str) -> io::Result<Registry> {
        Registry::open_in(&base(), name)
    }

    /// Opens (creating if needed) this user's registry of device `name`
    /// under `base`: `<base>/rdmakit-soft.<uid>/<name>/`.
    ///
    /// # Errors
    /// `name` is not a plain name, or the base, the user's directory or the
    /// device's is not safe to use or cannot be created (the error names the
    /// path and says why).
    pub fn open_in(base: &Path, name: &str) -> io::Result<Registry> {
        check_device_name(name)?;
        let own = UserDir::own_in(base)?.subdir(name, DEVICE_DIR_MODE)?;
        let pid = std::process::id();
        let start_time = proc_stat(pid).map(|(_, s)| s).unwrap_or(0);
        Ok(Registry {
            base: base.to_path_buf(),
            name: name.to_string(),
            uid: own.uid(),
            own,
            pid,
            start_time,
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            ctx: Mutex::new(None),
            leaky: AtomicBool::new(false),
            wait_ms: AtomicU64::new(LOCK_WAIT.as_millis() as u64),
            others: Mutex::new(None),
        })
    }

    /// Sets the longest wait for this user's registry lock (default
    /// [`LOCK_WAIT`]).
    pub fn set_lock_wait(&self, wait: Duration) {
        self.wait_ms
            .store(wait.as_millis() as u64, Ordering::Relaxed);
    }

    fn lock(&self) -> io::Result<lock::LockGuard> {
        lock::lock(
            &self.own,
            Duration::from_millis(self.wait_ms.load(Ordering::Relaxed)),
        )
    }

    /// This instance's context.
    fn my_ctx(&self) -> Ctx {
        Ctx {
            pid: self.pid,
            start_time: self.start_time,
            instance: self.instance,
        }
    }

    /// Makes this registry handle a device instance's: creates its context
    /// file, locked, and holds the lock until [`Registry::remove_instance`]
    /// (or until every process that inherited the descriptor is gone).
    /// `leaky`: this instance's objects outlive it (a leaky driver). Frees
    /// the objects of contexts nobody holds first, as every create does.
    ///
    /// # Errors
    /// The lock cannot be taken in time, or the context file cannot be
    /// created or locked.
    pub fn attach(&self, leaky: bool) -> io::Result<()> {
        let _g = self.lock()?;
        let mut rd = Reader::new(self.uid, false);
        self.sweep(&scan(&self.own, &mut rd, None));
        let ctx = self.my_ctx();
        let created = now();
        let text = format!(
            "pid={}\nstart_time={}\ninstance={}\nleaky={}\ncreated_at={created}\n",
            self.pid,
            self.start_time,
            self.instance,
            u8::from(leaky)
        );
        // Locked before it has its name: no one ever sees it unlocked.
        let f = self.write_new(&ctx.file_name(), text.as_bytes(), 0o600, true)?;
        *crate::lock(&self.ctx) = Some(f);
        self.leaky.store(leaky, Ordering::Relaxed);
        Ok(())
    }

    /// Writes `name` in this user's directory: a new file under a temporary
    /// name (created exclusively, never through a link), `mode` set on its
    /// descriptor, locked first when `lock`, then renamed into place.
    fn write_new(&self, name: &str, text: &[u8], mode: u32, lock: bool) -> io::Result<OwnedFd> {
        let tmp = format!(".{name}.tmp");
        let fail = |e: rustix::io::Errno, what: &str| {
            let e: io::Error = e.into();
            io::Error::new(
                e.kind(),
                format!("{what} {}: {e}", self.own.path().join(&tmp).display()),
            )
        };
        // A temporary file a crashed writer left (only this user writes here).
        let _ = rfs::unlinkat(self.own.fd(), tmp.as_str(), AtFlags::empty());
        let f = rfs::openat(
            self.own.fd(),
            tmp.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .map_err(|e| fail(e, "cannot create"))?;
        let done = (|| {
            // The umask may have narrowed it; other users read records.
            rfs::fchmod(&f, Mode::from_raw_mode(mode))
                .map_err(|e| fail(e, "cannot set the mode of"))?;
            if lock {
                rfs::flock(&f, FlockOperation::NonBlockingLockExclusive)
                    .map_err(|e| fail(e, "cannot lock"))?;
            }
            let mut off = 0;
            while off < text.len() {
                off += rustix::io::write(&f, &text[off..]).map_err(|e| fail(e, "cannot write"))?;
            }
            rfs::renameat(self.own.fd(), tmp.as_str(), self.own.fd(), name)
                .map_err(|e| fail(e, "cannot rename"))
        })();
        if let Err(e) = done {
            let _ = rfs::unlinkat(self.own.fd(), tmp.as_str(), AtFlags::empty());
            return Err(e);
        }
        Ok(f)
    }

    /// The locked context descriptor (close-on-exec), while attached: what
    /// `ibv_context.cmd_fd` is for the drop-in libibverbs. Valid until
    /// [`Registry::remove_instance`].
    pub fn context_fd(&self) -> Option<RawFd> {
        crate::lock(&self.ctx).as_ref().map(|f| f.as_raw_fd())
    }

    /// Whether processes of this user that open the device from now on are
    /// a leaky driver: root's option (for every user) or this user's own
    /// (`rdmakit soft leaky on`, file `.options`).
    pub fn device_leaky(&self) -> bool {
        self.root_leaky() || options_leaky(&self.own)
    }

    /// Root's device option: the device is a leaky driver for every user.
    pub fn root_leaky(&self) -> bool {
        if self.uid == 0 {
            return options_leaky(&self.own);
        }
        matches!(
            UserDir::of_in(&self.base, 0).map(|d| d.map(|d| d.existing_subdir(&self.name))),
            Ok(Some(Ok(Some(d)))) if options_leaky(&d)
        )
    }

    /// Switches the device's leaky-driver option for processes that open it
    /// from now on: root's applies to every user's processes (a driver
    /// property, like a module parameter only root sets), a user's to its
    /// own.
    ///
    /// # Errors
    /// The lock cannot be taken in time or the option cannot be written.
    pub fn set_leaky(&self, on: bool) -> io::Result<()> {
        let _g = self.lock()?;
        let text = format!("leaky={}\n", u8::from(on));
        self.write_new(".options", text.as_bytes(), 0o644, false)
            .map(drop)
    }

    /// This user's registry directory of the device.
    pub fn dir(&self) -> &Path {
        self.own.path()
    }

    /// The user it belongs to.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// Whether a record counts against this instance's limits: every other
    /// process's records that count ([`Record::counts`]) and this
    /// instance's own. Other device instances of this same process keep
    /// their own per-instance tables, so in-process tests with small limits
    /// stay independent.
    fn counts(&self, r: &Record) -> bool {
        r.counts
            && (r.uid != self.uid
                || r.pid != self.pid
                || r.start_time != self.start_time
                || r.instance == self.instance)
    }

    /// Other users' directories of this device (listed again at most once
    /// per [`OTHERS_TTL`]); refused ones are left out.
    fn with_others<T>(&self, f: impl FnOnce(&[UserDir]) -> T) -> T {
        let mut o = crate::lock(&self.others);
        let fresh = o.as_ref().is_some_and(|(t, _)| t.elapsed() < OTHERS_TTL);
        if !fresh {
            let dirs = UserDir::all_in(&self.base)
                .map(|(users, _)| {
                    users
                        .into_iter()
                        .filter(|u| u.uid() != self.uid)
                        .filter_map(|u| u.existing_subdir(&self.name).ok().flatten())
                        .collect()
                })
                .unwrap_or_default();
            *o = Some((Instant::now(), dirs));
        }
        f(o.as_ref().map_or(&[], |(_, d)| d.as_slice()))
    }

    /// Records a new object unless `limit` objects of `kind` already count
    /// on the device — every user's that the kernel confirms (see the
    /// module's docs) — with the same limit: openers configured with another
    /// limit for this kind (e.g. a test's max_qp 16 beside soft0's default)
    /// count separately. `Ok(false)` when the limit is reached.
    ///
    /// # Errors
    /// The lock cannot be taken in time, this user's directory holds more
    /// than [`MAX_ENTRIES`] entries, or the record cannot be written.
    pub fn add(&self, kind: Kind, handle: u32, limit: u32) -> io::Result<bool> {
        let _g = self.lock()?;
        let mut rd = Reader::new(self.uid, self.root_leaky());
        let own = scan(&self.own, &mut rd, None);
        self.sweep(&own);
        if own.ignored.iter().any(|i| i.path == self.own.path()) {
            return Err(io::Error::other(format!(
                "{} holds more than {MAX_ENTRIES} entries or cannot be listed: free \
                 objects ('rdmakit soft status', 'rdmakit soft reclaim')",
                self.own.path().display()
            )));
        }
        let of = |r: &Record| {
            r.kind == kind && !r.freed() && self.counts(r) && (r.limit == 0 || r.limit == limit)
        };
        let mut n = own.records.iter().filter(|r| of(r)).count();
        self.with_others(|others| {
            for d in others {
                if n >= limit as usize {
                    break;
                }
                n += scan(d, &mut rd, Some(kind))
                    .records
                    .iter()
                    .filter(|r| of(r))
                    .count();
            }
        });
        if n >= limit as usize {
            return Ok(false);
        }
        let f = Fields {
            kind,
            handle,
            pid: self.pid,
            start_time: self.start_time,
            instance: self.instance,
            created_at: now(),
            limit,
            leaky: self.leaky.load(Ordering::Relaxed),
        };
        self.write_new(&f.file_name(), f.emit().as_bytes(), 0o644, false)?;
        Ok(true)
    }

    /// Removes this instance's record of an object (no lock needed: only
    /// this instance writes it).
    ///
    /// # Errors
    /// The record exists but cannot be removed.
    pub fn remove(&self, kind: Kind, handle: u32) -> io::Result<()> {
        let name = record::record_name(kind, self.my_ctx(), handle);
        match rfs::unlinkat(self.own.fd(), name.as_str(), AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes every record of this instance and its context file (the
    /// device is closing). Errors are swallowed and nothing waits: this
    /// runs in `Drop`.
    pub fn remove_instance(&self) {
        let me = self.my_ctx();
        if let Ok((names, _)) = scan::names(&self.own) {
            for n in names {
                if matches!(record::parse_name(&n), record::Name::Record(_, c, _) if c == me) {
                    let _ = rfs::unlinkat(self.own.fd(), n.as_slice(), AtFlags::empty());
                }
            }
        }
        if let Some(f) = crate::lock(&self.ctx).take() {
            let _ = rfs::unlinkat(self.own.fd(), me.file_name().as_str(), AtFlags::empty());
            drop(f);
        }
    }

    /// Publishes this context's counters (`hw-<pid>-<start>-<instance>`,
    /// [`counters`]), rewritten whole: only while attached, and only from
    /// the process that attached (a forked child's copy publishes nothing).
    /// No lock: only this context writes its file, and it is folded only
    /// once nobody holds the context.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn publish(&self, v: &counters::Values) -> io::Result<()> {
        if std::process::id() != self.pid || crate::lock(&self.ctx).is_none() {
            return Ok(());
        }
        let name = self.my_ctx().counters_name();
        self.write_new(&name, v.emit(&[]).as_bytes(), 0o644, false)
            .map(drop)
    }

    /// Folds the counters of this user's contexts nobody holds (this one's,
    /// after [`Registry::remove_instance`]) into its cumulative file, if
    /// the lock is free now: a closing device does not wait. Otherwise the
    /// user's next create, open or reclaim folds them; readers count them
    /// meanwhile.
    pub fn fold_now(&self) {
        if std::process::id() != self.pid {
            return;
        }
        if let Ok(_g) = lock::lock(&self.own, Duration::ZERO) {
            let mut rd = Reader::new(self.uid, false);
            self.sweep(&scan(&self.own, &mut rd, None));
        }
    }

    /// Every user's records of the device not gone already, read-only
    /// ([`Registry::survey`]'s records).
    ///
    /// # Errors
    /// As [`survey_in`].
    pub fn list(&self) -> io::Result<Vec<Record>> {
        Ok(self.survey()?.records)
    }

    /// Every user's registry of this device, read-only ([`survey_in`]).
    ///
    /// # Errors
    /// As [`survey_in`].
    pub fn survey(&self) -> io::Result<Survey> {
        survey_in(&self.base, &self.name)
    }

    /// Deletes, in this user's directory, the records (and context files)
    /// of contexts nobody holds, except a leaky driver's, and temporary
    /// files dead writers left. Runs under the lock; errors leave files for
    /// the next sweep.
    fn sweep(&self, s: &Scan) {
        counters::fold(&self.own, s, |name, text| {
            self.write_new(name, text, 0o644, false).map(drop)
        });
        let mut keep: HashSet<Ctx> = HashSet::new();
        for r in &s.records {
            if r.freed() {
                let _ = rfs::unlinkat(self.own.fd(), r.file_name().as_str(), AtFlags::empty());
            } else {
                keep.insert(r.ctx());
            }
        }
        for (c, st) in &s.contexts {
            if matches!(st, CtxState::Free { .. }) && !keep.contains(c) {
                let _ = rfs::unlinkat(self.own.fd(), c.file_name().as_str(), AtFlags::empty());
            }
        }
        for t in &s.temps {
            let inner = t
                .strip_prefix('.')
                .and_then(|t| t.strip_suffix(".tmp"))
                .unwrap_or_default();
            let c = match record::parse_name(inner.as_bytes()) {
                record::Name::Record(_, c, _)
                | record::Name::Context(c)
                | record::Name::Counters(c) => c,
                _ => continue,
            };
            if check_owner(c.pid, c.start_time, self.uid) == Owner::State(OwnerState::Dead) {
                let _ = rfs::unlinkat(self.own.fd(), t.as_str(), AtFlags::empty());
            }
        }
    }

    /// Removes (unless `dry_run`) the records of contexts nobody holds any
    /// more — a leaky driver's dead processes' objects — like restarting
    /// openibd: in this user's directory, and as root in every user's.
    /// Records of live owners, of contexts a forked child still holds, and
    /// (without a context file) of zombies are kept and reported; entries
    /// that are not records are left alone and reported.
    ///
    /// # Errors
    /// The lock cannot be taken in time, or a record cannot be removed.
    pub fn reclaim(&self, dry_run: bool) -> io::Result<Reclaim> {
        let _g = self.lock()?;
        let mut rd = Reader::new(self.uid, self.root_leaky());
        let mut out = Reclaim::default();
        self.reclaim_in(&self.own, &mut rd, dry_run, &mut out)?;
        if self.uid == 0 {
            let (users, refused) = UserDir::all_in(&self.base)?;
            out.ignored.extend(refused);
            for u in users.into_iter().filter(|u| u.uid() != self.uid) {
                match u.existing_subdir(&self.name) {
                    Ok(Some(d)) => self.reclaim_in(&d, &mut rd, dry_run, &mut out)?,
                    Ok(None) => {}
                    Err(e) => out.ignored.push(Refused {
                        path: u.path().join(&self.name),
                        why: e.to_string(),
                    }),
                }
            }
        }
        if !dry_run {
            self.sweep(&scan(&self.own, &mut rd, None));
        }
        Ok(out)
    }

    fn reclaim_in(
        &self,
        dir: &UserDir,
        rd: &mut Reader,
        dry_run: bool,
        out: &mut Reclaim,
    ) -> io::Result<()> {
        let mut s = scan(dir, rd, None);
        sort(&mut s.records);
        let mut kept_ctx: HashSet<Ctx> = HashSet::new();
        for r in s.records.iter().cloned() {
            if r.reclaimable() {
                if !dry_run {
                    match rfs::unlinkat(dir.fd(), r.file_name().as_str(), AtFlags::empty()) {
                        Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                        Err(e) => {
                            let e: io::Error = e.into();
                            return Err(io::Error::new(
                                e.kind(),
                                format!("cannot remove {}: {e}", r.path.display()),
                            ));
                        }
                    }
                }
                out.freed.push(r);
                continue;
            }
            kept_ctx.insert(r.ctx());
            match (r.holding, r.owner) {
                (Holding::Inherited, _) => out.inherited.push(r),
                (_, OwnerState::Zombie) => out.zombie.push(r),
                _ => out.live.push(r),
            }
        }
        if !dry_run {
            // Context files nobody holds (those of freed records, and empty
            // ones), relative to the directory's descriptor.
            for (c, st) in &s.contexts {
                if matches!(st, CtxState::Free { .. }) && !kept_ctx.contains(c) {
                    let _ = rfs::unlinkat(dir.fd(), c.file_name().as_str(), AtFlags::empty());
                }
            }
        }
        out.ignored.extend(s.into_ignored(dir));
        Ok(())
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
