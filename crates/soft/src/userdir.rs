//! Per-user directories for the soft NIC's state shared between processes
//! (the resource registry, the same-host channel's sockets).
//!
//! The soft NIC runs in every process that opens it, root's included (the
//! doctor's probes, `rdmakit perf`, the fleet agent), so whatever it keeps
//! in a shared place must be out of other users' reach. Each user has one
//! directory, `<base>/rdmakit-soft.<uid>`, where `<base>` is
//! `$RDMAKIT_SOFT_REGISTRY_DIR`, else `/dev/shm`, else the temporary
//! directory:
//!
//! - it is created by that user, mode 0755: other users can read what it
//!   holds (a record of every object, so one user's leaked QPs count against
//!   the device's limits for everyone, as on a real NIC, whose objects
//!   `rdma resource` lists to every user) and can write nothing in it;
//! - a directory whose owner is not the uid its name says, or that others
//!   may write, or that is a symbolic link, is refused (opened with
//!   `O_NOFOLLOW`, then checked with `fstat` on the descriptor): nobody can
//!   plant a directory for another user to write into;
//! - the base itself must be a directory owned by root or by this user, and
//!   sticky when others may write it (as `/dev/shm` and `/tmp` are): in a
//!   base another user owns, that user could rename the directories in it;
//! - everything inside is reached relative to the directory's descriptor
//!   ([`UserDir::fd`]), never through a path that could be swapped, and
//!   nothing is ever `chmod`ed by path (a new directory's mode is set with
//!   `fchmod` on its verified descriptor).

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, Mode, OFlags};

/// The prefix of a user directory's name; the uid follows the dot.
pub const PREFIX: &str = "rdmakit-soft.";

/// Mode of a user's directory: readable by every user, writable by its
/// owner alone.
pub const DIR_MODE: u32 = 0o755;

/// Where user directories live: `$RDMAKIT_SOFT_REGISTRY_DIR`, else
/// `/dev/shm` (memory), else the temporary directory.
pub fn base() -> PathBuf {
    if let Some(d) = std::env::var_os("RDMAKIT_SOFT_REGISTRY_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// This process's effective uid.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// An opened, verified directory of one user (or a subdirectory of it).
#[derive(Debug)]
pub struct UserDir {
    fd: OwnedFd,
    path: PathBuf,
    uid: u32,
}

/// A directory under the base that looks like a user directory but was
/// refused (listed by [`UserDir::all_in`] so the tools can report it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// Its path.
    pub path: PathBuf,
    /// Why it was refused.
    pub why: String,
}

impl UserDir {
    /// This user's directory under [`base`], created if missing.
    ///
    /// # Errors
    /// The base or the directory is not safe to use (see the module's
    /// docs; the error says which and why), or cannot be created.
    pub fn own() -> io::Result<UserDir> {
        UserDir::own_in(&base())
    }

    /// This user's directory under `base`, created if missing.
    ///
    /// # Errors
    /// As [`UserDir::own`].
    pub fn own_in(base: &Path) -> io::Result<UserDir> {
        let me = euid();
        let b = open_base(base, me)?;
        let name = format!("{PREFIX}{me}");
        let path = base.join(&name);
        match rfs::mkdirat(&b, name.as_str(), Mode::from_raw_mode(DIR_MODE)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(with_path(e.into(), &path, "cannot create")),
        }
        let d = open_dir(&b, OsStr::new(&name), &path)?;
        let st = rfs::fstat(&d).map_err(|e| with_path(e.into(), &path, "cannot stat"))?;
        check_dir(&st, me, &path)?;
        // A directory this user just made has the umask's mode: set the
        // documented one on the verified descriptor, never by path.
        if st.st_mode & 0o7777 != DIR_MODE {
            rfs::fchmod(&d, Mode::from_raw_mode(DIR_MODE))
                .map_err(|e| with_path(e.into(), &path, "cannot set the mode of"))?;
        }
        Ok(UserDir {
            fd: d,
            path,
            uid: me,
        })
    }

    /// Every user's directory under `base`, opened read-only: the ones that
    /// pass the checks (owner is the uid in the name, not writable by
    /// others, not a link), and the ones refused, with why. A base that
    /// does not exist has none.
    ///
    /// # Errors
    /// The base exists but cannot be listed.
    pub fn all_in(base: &Path) -> io::Result<(Vec<UserDir>, Vec<Refused>)> {
        let (mut ok, mut refused) = (Vec::new(), Vec::new());
        let b = match rfs::open(
            base,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(b) => b,
            Err(rustix::io::Errno::NOENT) => return Ok((ok, refused)),
            Err(e) => return Err(with_path(e.into(), base, "cannot open")),
        };
        let mut names = Vec::new();
        let mut dir =
            rfs::Dir::read_from(&b).map_err(|e| with_path(e.into(), base, "cannot list"))?;
        for e in dir.by_ref() {
            let e = e.map_err(|e| with_path(e.into(), base, "cannot list"))?;
            let n = e.file_name().to_bytes();
            if let Some(uid) = n
                .strip_prefix(PREFIX.as_bytes())
                .and_then(|u| std::str::from_utf8(u).ok())
                .and_then(|u| u.parse::<u32>().ok())
            {
                names.push((uid, OsStr::from_bytes(n).to_os_string()));
            }
        }
        names.sort();
        for (uid, name) in names {
            let path = base.join(&name);
            let checked = open_dir(&b, &name, &path).and_then(|d| {
                let st = rfs::fstat(&d).map_err(|e| with_path(e.into(), &path, "cannot stat"))?;
                check_dir(&st, uid, &path)?;
                Ok(d)
            });
            match checked {
                Ok(fd) => ok.push(UserDir { fd, path, uid }),
                Err(e) => refused.push(Refused {
                    path,
                    why: e.to_string(),
                }),
            }
        }
        Ok((ok, refused))
    }

    /// User `uid`'s directory under `base`, opened read-only when it exists
    /// and passes the checks of [`UserDir::all_in`]; `None` when it does not
    /// exist (never created).
    ///
    /// # Errors
    /// It exists but is refused (the error says why), or the base cannot be
    /// opened.
    pub fn of_in(base: &Path, uid: u32) -> io::Result<Option<UserDir>> {
        let b = match rfs::open(
            base,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(b) => b,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(with_path(e.into(), base, "cannot open")),
        };
        let name = format!("{PREFIX}{uid}");
        let path = base.join(&name);
        let d = match open_dir(&b, OsStr::new(&name), &path) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let st = rfs::fstat(&d).map_err(|e| with_path(e.into(), &path, "cannot stat"))?;
        check_dir(&st, uid, &path)?;
        Ok(Some(UserDir { fd: d, path, uid }))
    }

    /// Subdirectory `name`, opened and checked as [`UserDir::subdir`] does,
    /// but never created: `None` when it does not exist.
    ///
    /// # Errors
    /// As [`UserDir::subdir`].
    pub fn existing_subdir(&self, name: &str) -> io::Result<Option<UserDir>> {
        check_name(name)?;
        let path = self.path.join(name);
        let d = match open_dir(&self.fd, OsStr::new(name), &path) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let st = rfs::fstat(&d).map_err(|e| with_path(e.into(), &path, "cannot stat"))?;
        check_dir(&st, self.uid, &path)?;
        Ok(Some(UserDir {
            fd: d,
            path,
            uid: self.uid,
        }))
    }

    /// Subdirectory `name` of this user's directory, created with `mode` if
    /// missing (only in this user's own directory). Refused unless it is a
    /// directory (not a link) owned by the same user and not writable by
    /// others.
    ///
    /// # Errors
    /// `name` is not a plain name, the subdirectory is not safe (the error
    /// says why), or it cannot be created.
    pub fn subdir(&self, name: &str, mode: u32) -> io::Result<UserDir> {
        check_name(name)?;
        let path = self.path.join(name);
        let mine = self.uid == euid();
        if mine {
            match rfs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(with_path(e.into(), &path, "cannot create")),
            }
        }
        let d = open_dir(&self.fd, OsStr::new(name), &path)?;
        let st = rfs::fstat(&d).map_err(|e| with_path(e.into(), &path, "cannot stat"))?;
        check_dir(&st, self.uid, &path)?;
        if mine && st.st_mode & 0o7777 != mode {
            rfs::fchmod(&d, Mode::from_raw_mode(mode))
                .map_err(|e| with_path(e.into(), &path, "cannot set the mode of"))?;
        }
        Ok(UserDir {
            fd: d,
            path,
            uid: self.uid,
        })
    }

    /// The directory's descriptor: open files relative to it, with
    /// `O_NOFOLLOW`.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Its path (for messages; never for opening what is inside).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The user it belongs to.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// Whether it belongs to this process's user.
    pub fn is_own(&self) -> bool {
        self.uid == euid()
    }

    /// A path naming `name` inside this directory through the descriptor
    /// (`/proc/self/fd/N/name`): for calls that take a path only, such as
    /// `bind` and `connect` on a Unix socket. It resolves through the
    /// directory this handle verified, whatever happens to the directory's
    /// own path, and is short whatever the base's length.
    ///
    /// # Errors
    /// `name` is not a plain name.
    pub fn fd_path(&self, name: &str) -> io::Result<PathBuf> {
        check_name(name)?;
        use std::os::fd::AsRawFd;
        Ok(PathBuf::from(format!(
            "/proc/self/fd/{}/{name}",
            self.fd.as_raw_fd()
        )))
    }
}

/// A plain file name: not empty, no `/`, not `.` or `..`, no NUL.
///
/// # Errors
/// `InvalidInput` naming it.
pub fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name.contains(['/', '\0']) || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a plain file name"),
        ));
    }
    Ok(())
}

fn open_base(base: &Path, me: u32) -> io::Result<OwnedFd> {
    let open = || {
        rfs::open(
            base,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    // A base that does not exist yet (RDMAKIT_SOFT_REGISTRY_DIR naming a new
    // directory) is made, this user's, in a parent that exists: never a chain
    // of directories.
    let b = match open() {
        Err(rustix::io::Errno::NOENT) => match rfs::mkdir(base, Mode::from_raw_mode(DIR_MODE)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => open(),
            Err(e) => Err(e),
        },
        r => r,
    }
    .map_err(|e| with_path(e.into(), base, "cannot open the soft NIC's base directory"))?;
    let st = rfs::fstat(&b).map_err(|e| with_path(e.into(), base, "cannot stat"))?;
    if st.st_uid != 0 && st.st_uid != me {
        return Err(unsafe_dir(
            base,
            format!(
                "is owned by uid {}, not root or you (uid {me}): its owner could rename \
                 what rdmakit keeps there",
                st.st_uid
            ),
        ));
    }
    if st.st_mode & 0o022 != 0 && st.st_mode & 0o1000 == 0 {
        return Err(unsafe_dir(
            base,
            format!(
                "is writable by others without the sticky bit (mode {:o}): another user \
                 could replace what rdmakit keeps there",
                st.st_mode & 0o7777
            ),
        ));
    }
    Ok(b)
}

fn open_dir(at: &impl AsFd, name: &OsStr, path: &Path) -> io::Result<OwnedFd> {
    rfs::openat(
        at,
        name,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        // O_NOFOLLOW on a link: ELOOP; O_DIRECTORY on a file: ENOTDIR.
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => unsafe_dir(
            path,
            "is not a directory (a symbolic link or a file)".into(),
        ),
        e => with_path(e.into(), path, "cannot open"),
    })
}

fn check_dir(st: &rfs::Stat, uid: u32, path: &Path) -> io::Result<()> {
    if st.st_uid != uid {
        return Err(unsafe_dir(
            path,
            format!(
                "is owned by uid {}, not uid {uid}: someone else made it (remove it as root)",
                st.st_uid
            ),
        ));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(unsafe_dir(
            path,
            format!(
                "is writable by others (mode {:o}): remove it as root",
                st.st_mode & 0o7777
            ),
        ));
    }
    Ok(())
}

fn unsafe_dir(path: &Path, why: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("refusing {}: it {why}", path.display()),
    )
}

fn with_path(e: io::Error, path: &Path, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn base() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn own_dir_is_created_0755_and_reopened() {
        let b = base();
        let d = UserDir::own_in(b.path()).unwrap();
        let m = std::fs::metadata(d.path()).unwrap();
        assert_eq!(m.mode() & 0o7777, DIR_MODE);
        assert_eq!(m.uid(), euid());
        assert!(d.is_own());
        let again = UserDir::own_in(b.path()).unwrap();
        assert_eq!(again.path(), d.path());
        let net = d.subdir("net", 0o700).unwrap();
        assert_eq!(
            std::fs::metadata(net.path()).unwrap().mode() & 0o7777,
            0o700
        );
        let (all, refused) = UserDir::all_in(b.path()).unwrap();
        assert_eq!(all.len(), 1);
        assert!(refused.is_empty());
    }

    #[test]
    fn a_symlinked_or_world_writable_user_dir_is_refused_and_left_alone() {
        let b = base();
        let target = b.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
        let name = b.path().join(format!("{PREFIX}{}", euid()));
        std::os::unix::fs::symlink(&target, &name).unwrap();
        let e = UserDir::own_in(b.path()).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
        assert_eq!(
            std::fs::metadata(&target).unwrap().mode() & 0o7777,
            0o700,
            "the link's target keeps its mode"
        );
        std::fs::remove_file(&name).unwrap();
        std::fs::create_dir(&name).unwrap();
        std::fs::set_permissions(&name, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = UserDir::own_in(b.path()).unwrap_err();
        assert!(e.to_string().contains("writable by others"), "{e}");
        assert_eq!(
            std::fs::metadata(&name).unwrap().mode() & 0o7777,
            0o777,
            "never chmod'ed"
        );
        let (all, refused) = UserDir::all_in(b.path()).unwrap();
        assert!(all.is_empty());
        assert_eq!(refused.len(), 1);
    }

    #[test]
    fn a_base_writable_by_others_without_the_sticky_bit_is_refused() {
        let b = base();
        std::fs::set_permissions(b.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = UserDir::own_in(b.path()).unwrap_err();
        assert!(e.to_string().contains("sticky"), "{e}");
        std::fs::set_permissions(b.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        UserDir::own_in(b.path()).unwrap();
    }

    #[test]
    fn a_missing_base_is_made_in_its_parent_but_not_a_chain() {
        let b = base();
        let new = b.path().join("registry");
        let d = UserDir::own_in(&new).unwrap();
        assert!(d.path().starts_with(&new));
        assert_eq!(std::fs::metadata(&new).unwrap().uid(), euid());
        let deep = b.path().join("a/b/c");
        assert!(UserDir::own_in(&deep).is_err(), "no chain of directories");
        assert!(!b.path().join("a").exists());
    }

    #[test]
    fn fd_paths_name_plain_names_only() {
        let b = base();
        let d = UserDir::own_in(b.path()).unwrap();
        std::fs::write(d.fd_path("x").unwrap(), b"1").unwrap();
        assert_eq!(std::fs::read(d.path().join("x")).unwrap(), b"1");
        for bad in ["", ".", "..", "a/b"] {
            assert!(d.fd_path(bad).is_err(), "{bad:?}");
        }
    }
}
