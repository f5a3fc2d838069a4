//! The registry lock: `<own dir>/.lock`, mode 0600 in a directory only its
//! user can write, so only that user's processes (and root) can open it,
//! let alone lock it. It is taken with a bounded wait: past it the error
//! names the holder (pid and comm, from `/proc/locks` for the lock file's
//! inode), so a stopped or stuck process of the same user shows as such
//! instead of hanging every other one.

use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::fs::{self as rfs, FlockOperation, Mode, OFlags};

use super::proc::{comm, FileId, Locks};
use crate::userdir::UserDir;

/// How long a registry operation waits for the lock by default.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Holds the registry lock until dropped (closing the descriptor unlocks).
#[derive(Debug)]
pub(crate) struct LockGuard(#[allow(dead_code)] OwnedFd);

/// Opens `dir`'s `.lock` (created 0600 if missing; never through a link,
/// never a FIFO) and locks it exclusively, waiting at most `wait`.
///
/// # Errors
/// The file cannot be opened, is not a regular file of the directory's
/// user, or stays locked past `wait` (`TimedOut`, naming the holder).
pub(crate) fn lock(dir: &UserDir, wait: Duration) -> io::Result<LockGuard> {
    let path = dir.path().join(".lock");
    let f = rfs::openat(
        dir.fd(),
        ".lock",
        OFlags::RDWR
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::CLOEXEC
            | OFlags::NOCTTY,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| {
        let e: io::Error = e.into();
        io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display()))
    })?;
    let st = rfs::fstat(&f)?;
    if rfs::FileType::from_raw_mode(st.st_mode) != rfs::FileType::RegularFile
        || st.st_uid != dir.uid()
    {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refusing {}: not a regular file of uid {}",
                path.display(),
                dir.uid()
            ),
        ));
    }
    flock_within(&f, wait).map_err(|e| match e.kind() {
        io::ErrorKind::TimedOut => io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the registry lock {} is {} for more than {:.1} s; end that process \
                 or wait for it",
                path.display(),
                held_by(FileId::of(&st)),
                wait.as_secs_f64()
            ),
        ),
        _ => io::Error::new(e.kind(), format!("locking {}: {e}", path.display())),
    })?;
    Ok(LockGuard(f))
}

/// `flock(LOCK_EX)` retried without blocking until `wait` has passed.
fn flock_within(f: &OwnedFd, wait: Duration) -> io::Result<()> {
    let end = Instant::now() + wait;
    let mut nap = Duration::from_micros(200);
    loop {
        match rfs::flock(f, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::WOULDBLOCK) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        let now = Instant::now();
        if now >= end {
            return Err(io::ErrorKind::TimedOut.into());
        }
        std::thread::sleep(nap.min(end - now));
        nap = (nap * 2).min(Duration::from_millis(20));
    }
}

/// "held by pid 4242 (flock)", from `/proc/locks`.
fn held_by(file: FileId) -> String {
    let Some(locks) = Locks::read() else {
        return "held by a process /proc/locks does not name".into();
    };
    let who: Vec<String> = locks
        .holders(file)
        .iter()
        .map(|&p| match comm(p) {
            Some(c) => format!("pid {p} ({c})"),
            None => format!("pid {p} (exited; a child it forked holds the lock)"),
        })
        .collect();
    if who.is_empty() {
        "held by a process /proc/locks does not name".into()
    } else {
        format!("held by {}", who.join(", "))
    }
}
