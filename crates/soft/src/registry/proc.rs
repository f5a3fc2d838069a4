//! What the kernel says about a record's owner and a context's holders:
//! `/proc/<pid>/stat` and `status` (is the pid alive, started when the
//! record says, and a process of the directory's user?), `/proc/locks` (is
//! a file `flock`ed, and by whom?) and `/proc/<pid>/fd` (who holds an
//! inherited context). Every read is bounded; a pid is read through one
//! descriptor of its `/proc/<pid>` directory, so a pid recycled between
//! two reads fails the second instead of mixing two processes.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{self as rfs, Mode, OFlags};

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

impl std::fmt::Display for OwnerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The most bytes read from one `/proc/<pid>` file (`stat` is under 1 KiB,
/// `status` under 2 KiB).
const PROC_FILE_CAP: usize = 16 * 1024;

/// The most bytes of `/proc/locks` read: about 150,000 locks. Any user can
/// add locks to it (one per open file they lock); past the cap the table is
/// "unavailable" and a context another user holds is judged by its owner's
/// pid alone.
pub const LOCKS_CAP: usize = 8 << 20;

/// Reads at most `cap` bytes of `name` under `dir` (no links, no blocking);
/// `None` past the cap or on any error.
pub(crate) fn read_small(dir: impl AsFd, name: &str, cap: usize) -> Option<Vec<u8>> {
    let f = rfs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .ok()?;
    read_fd(&f, cap).ok().flatten()
}

/// Reads `fd` to its end, at most `cap` bytes: `Ok(None)` when it holds more.
pub(crate) fn read_fd(fd: &OwnedFd, cap: usize) -> io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = match rustix::io::read(fd, &mut buf) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Ok(Some(out));
        }
        if out.len() + n > cap {
            return Ok(None);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

fn proc_dir(pid: u32) -> Option<OwnedFd> {
    if pid == 0 || i32::try_from(pid).is_err() {
        return None;
    }
    rfs::open(
        format!("/proc/{pid}"),
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// The state letter and start time (field 22) from a `stat` line.
fn parse_stat(s: &str) -> Option<(char, u64)> {
    // comm may contain spaces and parentheses: fields resume after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    // state is field 3; start time is field 22.
    let start = f.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// The real and effective uid from a `status` file.
fn parse_uids(s: &str) -> Option<(u32, u32)> {
    let l = s.lines().find(|l| l.starts_with("Uid:"))?;
    let mut f = l["Uid:".len()..].split_whitespace();
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// The `/proc/<pid>/stat` state letter and start time (field 22), if the
/// process exists.
pub fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let d = proc_dir(pid)?;
    let s = read_small(&d, "stat", PROC_FILE_CAP)?;
    parse_stat(std::str::from_utf8(&s).ok()?)
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

/// What the kernel says of the owner a record in uid `uid`'s directory
/// names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The state of that process (a recycled pid is [`OwnerState::Dead`]).
    State(OwnerState),
    /// The pid is alive with the recorded start time but is a process of
    /// another user (neither its real nor its effective uid is `uid`): the
    /// record is forged.
    Foreign(u32),
}

/// Checks the owner `pid`/`start_time` of a record found in the directory
/// of `uid`: alive (or a zombie) only when the process started at that time
/// and runs as that user (real or effective uid), read through one
/// `/proc/<pid>` descriptor.
pub fn check_owner(pid: u32, start_time: u64, uid: u32) -> Owner {
    let Some(d) = proc_dir(pid) else {
        return Owner::State(OwnerState::Dead);
    };
    let stat = read_small(&d, "stat", PROC_FILE_CAP)
        .and_then(|s| String::from_utf8(s).ok())
        .and_then(|s| parse_stat(&s));
    let state = match stat {
        Some((_, st)) if st != start_time => return Owner::State(OwnerState::Dead),
        Some(('X', _)) | None => return Owner::State(OwnerState::Dead),
        Some(('Z', _)) => OwnerState::Zombie,
        Some(_) => OwnerState::Alive,
    };
    let uids = read_small(&d, "status", PROC_FILE_CAP)
        .and_then(|s| String::from_utf8(s).ok())
        .and_then(|s| parse_uids(&s));
    match uids {
        Some((r, e)) if r == uid || e == uid => Owner::State(state),
        Some((_, e)) => Owner::Foreign(e),
        // Gone between the two reads.
        None => Owner::State(OwnerState::Dead),
    }
}

/// `/proc/<pid>/comm`, trimmed, if readable.
pub fn comm(pid: u32) -> Option<String> {
    let d = proc_dir(pid)?;
    let c = read_small(&d, "comm", 64)?;
    Some(String::from_utf8_lossy(&c).trim_end().to_string())
}

/// A file's identity: the device's major and minor and the inode, as
/// `/proc/locks` prints them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileId {
    /// Major device number.
    pub major: u32,
    /// Minor device number.
    pub minor: u32,
    /// Inode.
    pub ino: u64,
}

impl FileId {
    /// The identity of what `st` describes.
    pub fn of(st: &rfs::Stat) -> FileId {
        FileId::new(st.st_dev, st.st_ino)
    }

    /// The identity of inode `ino` on device `dev` (`st_dev`, as
    /// `std::os::unix::fs::MetadataExt::dev` gives it).
    pub fn new(dev: u64, ino: u64) -> FileId {
        FileId {
            major: rfs::major(dev),
            minor: rfs::minor(dev),
            ino,
        }
    }
}

/// The `flock` locks of the host, from `/proc/locks`: for each locked file,
/// the pids that placed a lock on it (a lock inherited by a forked child
/// still names the process that placed it).
#[derive(Debug, Default)]
pub struct Locks {
    by_file: HashMap<FileId, Vec<u32>>,
}

impl Locks {
    /// Reads `/proc/locks` (at most [`LOCKS_CAP`] bytes); `None` when it
    /// cannot be read whole.
    pub fn read() -> Option<Locks> {
        let f = rfs::open(
            "/proc/locks",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let b = read_fd(&f, LOCKS_CAP).ok()??;
        Some(Locks::parse(&String::from_utf8_lossy(&b)))
    }

    /// Parses `/proc/locks` text: `1: FLOCK  ADVISORY  WRITE 4242 00:1a:5678 0 EOF`;
    /// waiters (`1: -> FLOCK ...`) and POSIX / OFD locks are skipped.
    pub fn parse(text: &str) -> Locks {
        let mut by_file: HashMap<FileId, Vec<u32>> = HashMap::new();
        for l in text.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 || f[1] != "FLOCK" {
                continue;
            }
            let Ok(pid) = f[4].parse::<u32>() else {
                continue;
            };
            let mut id = f[5].split(':');
            let (Some(ma), Some(mi), Some(ino)) = (id.next(), id.next(), id.next()) else {
                continue;
            };
            let (Ok(major), Ok(minor), Ok(ino)) = (
                u32::from_str_radix(ma, 16),
                u32::from_str_radix(mi, 16),
                ino.parse(),
            ) else {
                continue;
            };
            by_file
                .entry(FileId { major, minor, ino })
                .or_default()
                .push(pid);
        }
        Locks { by_file }
    }

    /// The pids holding a `flock` on `file` (empty: nobody).
    pub fn holders(&self, file: FileId) -> &[u32] {
        self.by_file.get(&file).map_or(&[], Vec::as_slice)
    }
}

/// The processes holding each of `files` open (a `/proc/<pid>/fd/<n>` that
/// is it), in one pass over `/proc`: who keeps an inherited context alive,
/// with that link. Processes whose descriptors cannot be read (another
/// user's, without privileges) are not seen. Links are compared by what
/// they point at (device and inode), not by path.
pub fn holders_of(
    files: &std::collections::HashSet<FileId>,
) -> HashMap<FileId, Vec<(u32, String)>> {
    let mut out: HashMap<FileId, Vec<(u32, String)>> = HashMap::new();
    if files.is_empty() {
        return out;
    }
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            // stat (not lstat) of the magic link: what it points at, without
            // opening it.
            let Ok(st) = rfs::stat(fd.path()) else {
                continue;
            };
            let id = FileId::of(&st);
            if files.contains(&id) {
                out.entry(id)
                    .or_default()
                    .push((pid, fd.path().display().to_string()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycled_pid_is_dead() {
        let me = std::process::id();
        let (_, st) = proc_stat(me).unwrap();
        assert_eq!(owner_state(me, st), OwnerState::Alive);
        assert_eq!(owner_state(me, st + 1), OwnerState::Dead);
        assert_eq!(owner_state(u32::MAX - 1, 0), OwnerState::Dead);
        assert_eq!(owner_state(0, 0), OwnerState::Dead);
    }

    #[test]
    fn an_owner_of_another_uid_is_foreign() {
        let me = std::process::id();
        let uid = crate::userdir::euid();
        let (_, st) = proc_stat(me).unwrap();
        assert_eq!(check_owner(me, st, uid), Owner::State(OwnerState::Alive));
        assert_eq!(check_owner(me, st, uid + 1), Owner::Foreign(uid));
        assert_eq!(
            check_owner(me, st + 1, uid + 1),
            Owner::State(OwnerState::Dead)
        );
    }

    /// Lines of a real /proc/locks (Debian 12, 6.1): a flock, a waiter, a
    /// POSIX lock and an OFD lock.
    #[test]
    fn proc_locks_lines_give_flock_holders_only() {
        let t = "1: FLOCK  ADVISORY  WRITE 4242 00:1a:5678 0 EOF\n\
                 1: -> FLOCK  ADVISORY  WRITE 4243 00:1a:5678 0 EOF\n\
                 2: POSIX  ADVISORY  WRITE 812 fe:01:1311 0 EOF\n\
                 3: OFDLCK ADVISORY  READ  -1 00:06:9 0 EOF\n\
                 4: FLOCK  ADVISORY  READ 17 fd:2c:99 0 EOF\n";
        let l = Locks::parse(t);
        let id = |major, minor, ino| FileId { major, minor, ino };
        assert_eq!(l.holders(id(0, 0x1a, 5678)), [4242]);
        assert_eq!(l.holders(id(0xfd, 0x2c, 99)), [17]);
        assert!(l.holders(id(0xfe, 1, 1311)).is_empty());
        assert!(l.holders(id(0, 6, 9)).is_empty());
    }

    #[test]
    fn a_lock_this_process_holds_is_in_proc_locks() {
        let d = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(d.path().join("l")).unwrap();
        let id = FileId::of(&rfs::fstat(&f).unwrap());
        assert!(Locks::read().unwrap().holders(id).is_empty());
        rfs::flock(&f, rfs::FlockOperation::LockExclusive).unwrap();
        assert_eq!(Locks::read().unwrap().holders(id), [std::process::id()]);
        let h = holders_of(&[id].into_iter().collect());
        assert!(h[&id].iter().any(|(p, _)| *p == std::process::id()));
    }
}
