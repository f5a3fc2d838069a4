//! Reading one user's registry directory of a device, whoever's it is,
//! without trusting what is in it.
//!
//! - At most [`MAX_ENTRIES`] names are read from a directory (see there).
//! - A record is opened relative to the directory's descriptor with
//!   `O_NOFOLLOW | O_NONBLOCK` (a link fails, a FIFO does not block), then
//!   checked with `fstat`: a regular file of the directory's user, at most
//!   [`MAX_RECORD_BYTES`]; its text must parse and name the object its file
//!   name does. Anything else is ignored and reported (path and why).
//! - Its owner is checked with the kernel ([`check_owner`]): a record naming
//!   a live process of another user is forged, ignored and reported.
//! - Its context's holding comes from the context file's `flock`: probed
//!   directly (a shared lock tried without waiting) where this process can
//!   open the file — its own directory, or any as root — and otherwise read
//!   from `/proc/locks` by the file's inode (another user's context file is
//!   0600: no one else can open, let alone lock, it).

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use rustix::fs::{self as rfs, AtFlags, FlockOperation, Mode, OFlags};

use super::proc::{check_owner, read_fd, FileId, Locks, Owner, OwnerState};
use super::record::{parse_name, parse_record, Ctx, Kind, Name, MAX_RECORD_BYTES};
use super::{Holding, Record};
use crate::userdir::{Refused, UserDir};

/// The most entries read from one user's directory of one device: 65,536.
/// It bounds the time any reader spends in a directory another user fills
/// — reading 65,536 records that all look valid takes 0.3-0.4 s (release
/// build, tmpfs, a loaded 2-core VM; about 1 s unoptimized) — and no real
/// user comes near it: each object and each open context is one entry, and
/// four times the default max_qp (16,384) of objects in one device is more
/// than the doctor, perftest or an MPI rank ever holds. The rest of a fuller
/// directory is not read, and that is reported; this user's own creates
/// then fail rather than count short.
pub const MAX_ENTRIES: usize = 65_536;

/// The most ignored entries reported one by one per directory; the rest are
/// counted in one line.
pub const MAX_REPORTED: usize = 32;

/// Who reads, and what it needs: its uid, root's device option, and
/// `/proc/locks` (read once, when first needed).
#[derive(Debug)]
pub(crate) struct Reader {
    pub uid: u32,
    pub root_leaky: bool,
    locks: Option<Option<Locks>>,
}

impl Reader {
    pub fn new(uid: u32, root_leaky: bool) -> Reader {
        Reader {
            uid,
            root_leaky,
            locks: None,
        }
    }

    fn locks(&mut self) -> Option<&Locks> {
        self.locks.get_or_insert_with(Locks::read).as_ref()
    }
}

/// What a context file says about its context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CtxState {
    /// No such file.
    Missing,
    /// Not a context file of the directory's user (why).
    Invalid(String),
    /// Some process holds its lock.
    Held,
    /// Nobody holds it; `leaky` when its text says so (only read where the
    /// reader may open it).
    Free { leaky: bool },
    /// Cannot be told (another user's, and `/proc/locks` unreadable).
    Unknown,
}

/// One directory read.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Every record that passed the checks (those a sweep frees included:
    /// see [`Record::freed`]).
    pub records: Vec<Record>,
    /// Context files, with their state.
    pub contexts: Vec<(Ctx, CtxState)>,
    /// Names of files being written (`.*.tmp`).
    pub temps: Vec<String>,
    /// Contexts with a published counters file (`hw-…`).
    pub counters: Vec<Ctx>,
    /// Entries ignored, and why.
    pub ignored: Vec<Refused>,
    ignored_more: usize,
}

impl Scan {
    pub(crate) fn ignore(&mut self, path: PathBuf, why: impl Into<String>) {
        if self.ignored.len() < MAX_REPORTED {
            self.ignored.push(Refused {
                path,
                why: why.into(),
            });
        } else {
            self.ignored_more += 1;
        }
    }

    /// The ignored entries, with one line for those past [`MAX_REPORTED`].
    pub fn into_ignored(mut self, dir: &UserDir) -> Vec<Refused> {
        if self.ignored_more > 0 {
            self.ignored.push(Refused {
                path: dir.path().to_path_buf(),
                why: format!("{} more entries ignored", self.ignored_more),
            });
        }
        self.ignored
    }
}

/// Reads `dir` (a user's directory of one device) as `rd`: records of
/// `only` (every kind when None), all context files, and what was ignored.
pub(crate) fn scan(dir: &UserDir, rd: &mut Reader, only: Option<Kind>) -> Scan {
    let mut s = Scan::default();
    let names = match names(dir) {
        Ok((n, more)) => {
            if more {
                s.ignore(
                    dir.path().to_path_buf(),
                    format!("holds more than {MAX_ENTRIES} entries: the rest were not read"),
                );
            }
            n
        }
        Err(e) => {
            s.ignore(dir.path().to_path_buf(), format!("cannot be listed: {e}"));
            return s;
        }
    };
    let mut owners: HashMap<(u32, u64), Owner> = HashMap::new();
    let mut ctxs: HashMap<Ctx, CtxState> = HashMap::new();
    for name in names {
        let path = dir.path().join(std::ffi::OsStr::from_bytes(&name));
        match parse_name(&name) {
            Name::Dot => {
                if let Ok(n) = std::str::from_utf8(&name) {
                    if n.ends_with(".tmp") {
                        s.temps.push(n.to_string());
                    }
                }
            }
            Name::Other => s.ignore(path, "not a name rdmakit writes"),
            // Read by `counters::read_in`; swept by the owner's `fold`.
            Name::Counters(c) => s.counters.push(c),
            Name::Context(c) => {
                let st = ctxs
                    .entry(c)
                    .or_insert_with(|| ctx_state(dir, c, rd))
                    .clone();
                s.contexts.push((c, st));
            }
            Name::Record(kind, c, _) => {
                if only.is_some_and(|k| k != kind) {
                    continue;
                }
                // `name` parsed as UTF-8 above.
                let n = std::str::from_utf8(&name).unwrap_or_default();
                let f = match read_record(dir, n) {
                    Ok(Some(f)) => f,
                    Ok(None) => continue,
                    Err(why) => {
                        s.ignore(path, why);
                        continue;
                    }
                };
                if f.file_name() != n {
                    s.ignore(
                        path,
                        format!(
                            "its text names another object ({}): not a record",
                            f.file_name()
                        ),
                    );
                    continue;
                }
                let owner = *owners
                    .entry((c.pid, c.start_time))
                    .or_insert_with(|| check_owner(c.pid, c.start_time, dir.uid()));
                let state = match owner {
                    Owner::State(st) => st,
                    Owner::Foreign(u) => {
                        s.ignore(
                            path,
                            format!(
                                "names pid {}, a live process of uid {u}, in the directory of \
                                 uid {}: forged",
                                c.pid,
                                dir.uid()
                            ),
                        );
                        continue;
                    }
                };
                let cs = ctxs.entry(c).or_insert_with(|| ctx_state(dir, c, rd));
                let holding = match (&*cs, state) {
                    (CtxState::Held, OwnerState::Alive) => Holding::Owner,
                    (CtxState::Held, _) => Holding::Inherited,
                    (CtxState::Free { .. }, _) => Holding::Nobody,
                    (CtxState::Missing | CtxState::Unknown, _) => Holding::Unknown,
                    (CtxState::Invalid(_), _) => Holding::Unknown,
                };
                let own_dir = dir.uid() == rd.uid;
                let counts = match holding {
                    Holding::Owner | Holding::Inherited => true,
                    Holding::Unknown if state != OwnerState::Dead => true,
                    _ => f.leaky && (own_dir || rd.root_leaky),
                };
                s.records.push(Record {
                    kind: f.kind,
                    handle: f.handle,
                    pid: f.pid,
                    start_time: f.start_time,
                    instance: f.instance,
                    created_at: f.created_at,
                    limit: f.limit,
                    leaky: f.leaky,
                    holding,
                    uid: dir.uid(),
                    owner: state,
                    counts,
                    path,
                });
            }
        }
    }
    // A context file that is not what rdmakit makes is reported once.
    for (c, st) in &ctxs {
        if let CtxState::Invalid(why) = st {
            s.ignore(dir.path().join(c.file_name()), why.clone());
        }
    }
    s
}

/// The names in `dir` (without `.` and `..`), at most [`MAX_ENTRIES`]; true
/// when there were more.
pub(crate) fn names(dir: &UserDir) -> std::io::Result<(Vec<Vec<u8>>, bool)> {
    let mut out = Vec::new();
    let mut d = rfs::Dir::read_from(dir.fd())?;
    for e in d.by_ref() {
        let e = e?;
        let n = e.file_name().to_bytes();
        if n == b"." || n == b".." {
            continue;
        }
        if out.len() == MAX_ENTRIES {
            return Ok((out, true));
        }
        out.push(n.to_vec());
    }
    Ok((out, false))
}

/// Opens `name` in `dir` for reading as an untrusted entry: no links, no
/// blocking (a FIFO opens at once), no controlling terminal; then it must be
/// a regular file of the directory's user of at most `cap` bytes.
/// `Ok(None)`: gone meanwhile.
pub(crate) fn open_checked(
    dir: &UserDir,
    name: &str,
    cap: usize,
) -> Result<Option<OwnedFd>, String> {
    let f = match rfs::openat(
        dir.fd(),
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    ) {
        Ok(f) => f,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::LOOP) => return Err("a symbolic link".into()),
        Err(e) => return Err(format!("cannot be opened: {}", std::io::Error::from(e))),
    };
    let st = rfs::fstat(&f).map_err(|e| format!("cannot stat: {}", std::io::Error::from(e)))?;
    check_file(&st, dir.uid(), cap)?;
    Ok(Some(f))
}

/// A regular file of `uid` of at most `cap` bytes, else why not.
fn check_file(st: &rfs::Stat, uid: u32, cap: usize) -> Result<(), String> {
    let t = rfs::FileType::from_raw_mode(st.st_mode);
    if t != rfs::FileType::RegularFile {
        return Err(format!("not a regular file (a {})", type_name(t)));
    }
    if st.st_uid != uid {
        return Err(format!(
            "owned by uid {}, not by uid {uid} whose directory it is in",
            st.st_uid
        ));
    }
    if st.st_size < 0 || st.st_size as u64 > cap as u64 {
        return Err(format!(
            "{} bytes, more than the {cap} it may have",
            st.st_size
        ));
    }
    Ok(())
}

fn type_name(t: rfs::FileType) -> &'static str {
    match t {
        rfs::FileType::Fifo => "FIFO",
        rfs::FileType::Directory => "directory",
        rfs::FileType::Symlink => "symbolic link",
        rfs::FileType::Socket => "socket",
        rfs::FileType::CharacterDevice => "character device",
        rfs::FileType::BlockDevice => "block device",
        _ => "file of unknown type",
    }
}

/// A record's fields: `Ok(None)` gone meanwhile; `Err(why)` not a record.
fn read_record(dir: &UserDir, name: &str) -> Result<Option<super::record::Fields>, String> {
    let Some(f) = open_checked(dir, name, MAX_RECORD_BYTES)? else {
        return Ok(None);
    };
    let b = read_fd(&f, MAX_RECORD_BYTES)
        .map_err(|e| format!("cannot be read: {e}"))?
        .ok_or_else(|| format!("grew past {MAX_RECORD_BYTES} bytes while read"))?;
    parse_record(&b)
        .map(Some)
        .map_err(|e| format!("not a record: {e}"))
}

/// The state of context `c` in `dir`, as `rd` can tell.
pub(crate) fn ctx_state(dir: &UserDir, c: Ctx, rd: &mut Reader) -> CtxState {
    let name = c.file_name();
    if dir.uid() == rd.uid || rd.uid == 0 {
        let f = match open_checked(dir, &name, MAX_RECORD_BYTES) {
            Ok(Some(f)) => f,
            Ok(None) => return CtxState::Missing,
            Err(why) => return CtxState::Invalid(why),
        };
        // A shared lock tried without waiting: refused while the context's
        // holder keeps its exclusive one; probers do not disturb each other.
        match rfs::flock(&f, FlockOperation::NonBlockingLockShared) {
            Ok(()) => CtxState::Free {
                leaky: ctx_leaky(&f),
            },
            Err(rustix::io::Errno::WOULDBLOCK) => CtxState::Held,
            Err(_) => CtxState::Unknown,
        }
    } else {
        let st = match rfs::statat(dir.fd(), name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => return CtxState::Missing,
            Err(e) => {
                return CtxState::Invalid(format!("cannot stat: {}", std::io::Error::from(e)))
            }
        };
        if let Err(why) = check_file(&st, dir.uid(), MAX_RECORD_BYTES) {
            return CtxState::Invalid(why);
        }
        match rd.locks() {
            Some(l) if l.holders(FileId::of(&st)).is_empty() => CtxState::Free { leaky: false },
            Some(_) => CtxState::Held,
            None => CtxState::Unknown,
        }
    }
}

/// Whether a context file's text says `leaky=1`.
fn ctx_leaky(f: &impl AsFd) -> bool {
    let mut buf = [0u8; MAX_RECORD_BYTES];
    let n = rustix::io::pread(f, &mut buf, 0).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .any(|l| l.trim() == "leaky=1")
}
