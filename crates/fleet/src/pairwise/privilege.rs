//! Giving up root once the agent has bound its port.
//!
//! The agent needs no privilege after binding: its port is above 1024, the
//! soft NIC is a per-user userspace device, and a real NIC's verbs device
//! (`/dev/infiniband/uverbs*`) is open to users (rdma-core's udev rules) —
//! what an RDMA user needs is a memlock limit, which [`drop_to`] lifts
//! before it lets go of root (to unlimited, as root's CAP_IPC_LOCK was, or
//! where root may not raise it, to the hard limit; the CLI says which). So a root agent
//! given `--user NAME` becomes that user for good: supplementary groups
//! cleared, real, effective and saved gid and uid set (glibc applies them
//! to every thread), `no_new_privs` set, and it checks that uid 0 cannot be
//! had back. A user that is not root cannot switch; asking to become
//! oneself is allowed (and changes nothing).
//!
//! Call it before starting threads: it also points `HOME`, `USER` and
//! `LOGNAME` at the new user and removes root's `XDG_RUNTIME_DIR` (the soft
//! NIC would otherwise look for its registry there).

use std::ffi::CString;

/// Why privileges could not be dropped. Never half-dropped: an error
/// before the uid changes leaves the process as it was; one after it means
/// the process must not go on (the caller exits).
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    /// No such user (and not a number).
    #[error("--user {0}: no such user")]
    NoSuchUser(String),
    /// The user database could not be read.
    #[error("--user {user}: getpwnam_r: {source}")]
    Lookup {
        /// Who.
        user: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not root, asked to become someone else.
    #[error("--user {user}: only root can switch to uid {uid} (this is uid {me})")]
    NotRoot {
        /// Who.
        user: String,
        /// Their uid.
        uid: u32,
        /// Ours.
        me: u32,
    },
    /// A system call failed.
    #[error("--user {user}: {call}: {source}")]
    Call {
        /// Who.
        user: String,
        /// The call.
        call: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// uid 0 could be had back after the switch.
    #[error("--user {0}: root could be regained after the switch; refusing to go on")]
    Regained(String),
}

/// Who the process became.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The user as given.
    pub user: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// The memlock limit it keeps, bytes (None: unlimited).
    pub memlock: Option<u64>,
}

/// "running as alice (uid 1000, gid 1000, memlock 65536 KiB)".
impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let memlock = self
            .memlock
            .map_or("unlimited".to_string(), |b| format!("{} KiB", b / 1024));
        write!(
            f,
            "running as {} (uid {}, gid {}, memlock {memlock})",
            self.user, self.uid, self.gid
        )
    }
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Becomes `user` (a name in the user database, or a numeric uid whose gid
/// is then the same number), for good. See the module's documentation.
///
/// # Errors
/// [`PrivilegeError`]; after one, the caller must not serve.
pub fn drop_to(user: &str) -> Result<Dropped, PrivilegeError> {
    let who = lookup(user)?;
    let me = rustix::process::geteuid().as_raw();
    if me != 0 {
        if me == who.uid {
            let mut cur = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes this struct only.
            let memlock = match unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut cur) } {
                0 if cur.rlim_cur != libc::RLIM_INFINITY => Some(cur.rlim_cur),
                _ => None,
            };
            return Ok(Dropped {
                user: user.into(),
                uid: who.uid,
                gid: who.gid,
                memlock,
            });
        }
        return Err(PrivilegeError::NotRoot {
            user: user.into(),
            uid: who.uid,
            me,
        });
    }
    let fail = |call: &'static str| PrivilegeError::Call {
        user: user.into(),
        call,
        source: std::io::Error::last_os_error(),
    };
    let memlock = lift_memlock().map_err(|source| PrivilegeError::Call {
        user: user.into(),
        call: "setrlimit(RLIMIT_MEMLOCK)",
        source,
    })?;
    // SAFETY: plain system calls on values owned here; glibc's setgroups,
    // setresgid and setresuid apply to every thread of the process.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 {
            return Err(fail("setgroups"));
        }
        if libc::setresgid(who.gid, who.gid, who.gid) != 0 {
            return Err(fail("setresgid"));
        }
        if libc::setresuid(who.uid, who.uid, who.uid) != 0 {
            return Err(fail("setresuid"));
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(fail("prctl(PR_SET_NO_NEW_PRIVS)"));
        }
        if who.uid != 0 && libc::setuid(0) == 0 {
            return Err(PrivilegeError::Regained(user.into()));
        }
    }
    std::env::remove_var("XDG_RUNTIME_DIR");
    std::env::set_var("HOME", &who.home);
    std::env::set_var("USER", &who.name);
    std::env::set_var("LOGNAME", &who.name);
    Ok(Dropped {
        user: user.into(),
        uid: who.uid,
        gid: who.gid,
        memlock,
    })
}

/// Lifts RLIMIT_MEMLOCK to unlimited, or, where even root may not raise the
/// hard limit (no CAP_SYS_RESOURCE, as in some containers), the soft limit
/// to the hard one. Returns the limit now in force (None: unlimited).
fn lift_memlock() -> std::io::Result<Option<u64>> {
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: getrlimit and setrlimit read and write these structs only.
    unsafe {
        if libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) == 0 {
            return Ok(None);
        }
        if libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut cur) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        cur.rlim_cur = cur.rlim_max;
        if libc::setrlimit(libc::RLIMIT_MEMLOCK, &cur) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((cur.rlim_max != libc::RLIM_INFINITY).then_some(cur.rlim_max))
}

struct Who {
    name: String,
    uid: u32,
    gid: u32,
    home: String,
}

fn lookup(user: &str) -> Result<Who, PrivilegeError> {
    let c = CString::new(user).map_err(|_| PrivilegeError::NoSuchUser(user.into()))?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: `passwd` is plain data; getpwnam_r fills it with pointers into
    // `buf`, which outlives every read of them below.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: valid name, struct, buffer of the stated length, out pointer.
    let rc = unsafe {
        libc::getpwnam_r(
            c.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 && rc != libc::ENOENT {
        return Err(PrivilegeError::Lookup {
            user: user.into(),
            source: std::io::Error::from_raw_os_error(rc),
        });
    }
    if found.is_null() {
        return match user.parse::<u32>() {
            Ok(n) => Ok(Who {
                name: user.into(),
                uid: n,
                gid: n,
                home: "/".into(),
            }),
            Err(_) => Err(PrivilegeError::NoSuchUser(user.into())),
        };
    }
    let text = |p: *const libc::c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: getpwnam_r set it to a NUL-terminated string in `buf`.
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned()
        }
    };
    Ok(Who {
        name: text(pwd.pw_name),
        uid: pwd.pw_uid,
        gid: pwd.pw_gid,
        home: text(pwd.pw_dir),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_looked_up_by_name_or_number() {
        let root = lookup("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        let n = lookup("4242424").unwrap();
        assert_eq!((n.uid, n.gid), (4_242_424, 4_242_424));
        assert!(matches!(
            lookup("no-such-user-rdmakit"),
            Err(PrivilegeError::NoSuchUser(_))
        ));
        assert!(matches!(lookup("a\0b"), Err(PrivilegeError::NoSuchUser(_))));
    }
}
