//! Least privilege: keep only the capabilities a command needs, and none once it
//! needs none.
//!
//! rdmakit is run as root (by slurmd, by an administrator's `sudo`) and root holds
//! every capability. What reading a host needs of that is little:
//!
//! | capability | what for |
//! |---|---|
//! | CAP_SYSLOG | `/dev/kmsg` when `kernel.dmesg_restrict=1` (Debian's default) |
//! | CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH | other users' `/proc/PID/fd` (who holds an RDMA object) and, with `--pid`, that process's `/proc/PID/{limits,status,cgroup,root}` |
//! | CAP_NET_ADMIN | RDMA netlink's object details kept for administrators (MR and PD keys) |
//! | CAP_DAC_OVERRIDE | writing `-o FILE` where root's uid alone may not (a user's directory) |
//! | CAP_IPC_LOCK | the doctor's active probes (`--probe`): registering memory past RLIMIT_MEMLOCK |
//!
//! [`COLLECT`] is that set but the last, [`DOCTOR`] all of it; [`keep_only`] drops every other capability of the
//! calling thread, from its bounding set too, so nothing it runs or loads (a
//! provider library of rdma-core, dlopened for the device limits) gets one back;
//! [`drop_all`] drops them all (the Slurm health check, once the doctor is done:
//! scontrol needs uid 0, not a capability). Capabilities are per thread: call
//! these on the thread that goes on to do the work. A process that holds none (not
//! root) is left as it is.

use std::io;

use rustix::thread::{CapabilityFlags, CapabilitySets};

/// Linux capability numbers (capability.h).
pub mod cap {
    pub const DAC_OVERRIDE: u32 = 1;
    pub const DAC_READ_SEARCH: u32 = 2;
    pub const SETPCAP: u32 = 8;
    pub const NET_ADMIN: u32 = 12;
    pub const IPC_LOCK: u32 = 14;
    pub const SYS_PTRACE: u32 = 19;
    pub const SYSLOG: u32 = 34;
}

/// What `rdmakit collect` (and the doctor's reading of the host) needs.
pub const COLLECT: &[u32] = &[
    cap::DAC_OVERRIDE,
    cap::DAC_READ_SEARCH,
    cap::NET_ADMIN,
    cap::SYS_PTRACE,
    cap::SYSLOG,
];

/// What the doctor needs: [`COLLECT`], and CAP_IPC_LOCK for the active probes'
/// locked memory (`--probe` registers up to 64 MiB).
pub const DOCTOR: &[u32] = &[
    cap::DAC_OVERRIDE,
    cap::DAC_READ_SEARCH,
    cap::NET_ADMIN,
    cap::IPC_LOCK,
    cap::SYS_PTRACE,
    cap::SYSLOG,
];

/// What [`keep_only`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The thread held no capability: nothing to drop.
    HadNone,
    /// `effective` is what the thread held before; it holds at most the kept ones now.
    To { effective: u64, kept: u64 },
}

/// Drops every capability of the calling thread.
///
/// # Errors
/// As [`keep_only`].
pub fn drop_all() -> io::Result<Dropped> {
    keep_only(&[])
}

/// Keeps only `keep` (capability numbers, [`cap`]) of the calling thread's
/// capabilities, in its effective, permitted and bounding sets; empties its
/// inheritable and ambient sets.
///
/// # Errors
/// The kernel refused a step (the error says which); what was dropped before
/// stays dropped.
pub fn keep_only(keep: &[u32]) -> io::Result<Dropped> {
    let mut before = rustix::thread::capabilities(None).map_err(io::Error::from)?;
    if before.permitted.is_empty() && before.effective.is_empty() {
        return Ok(Dropped::HadNone);
    }
    let setpcap = CapabilityFlags::SETPCAP;
    // A narrowing after an earlier one: CAP_SETPCAP was kept in the permitted set
    // for this; raise it to change the bounding set.
    if before.permitted.contains(setpcap) && !before.effective.contains(setpcap) {
        let raised = CapabilitySets {
            effective: before.effective | setpcap,
            ..before
        };
        rustix::thread::set_capabilities(None, raised).map_err(|e| {
            let e = io::Error::from(e);
            io::Error::new(e.kind(), format!("capset (raise CAP_SETPCAP): {e}"))
        })?;
        before.effective |= setpcap;
    }
    let kept_bits: u64 = keep.iter().filter(|c| **c < 64).fold(0, |m, c| m | 1 << c);
    // The bounding set first: changing it needs CAP_SETPCAP, which goes next.
    for cap in 0..64u32 {
        if kept_bits & (1 << cap) != 0 {
            continue;
        }
        match in_bounding_set(cap) {
            Ok(false) => {}
            Ok(true) => drop_from_bounding_set(cap).map_err(|e| {
                io::Error::new(e.kind(), format!("PR_CAPBSET_DROP capability {cap}: {e}"))
            })?,
            // EINVAL: past the last capability this kernel knows.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
            Err(e) => return Err(e),
        }
    }
    match rustix::thread::clear_ambient_capability_set() {
        // EINVAL: a kernel without ambient capabilities (before 4.3).
        Ok(()) | Err(rustix::io::Errno::INVAL) => {}
        Err(e) => {
            let e = io::Error::from(e);
            return Err(io::Error::new(e.kind(), format!("clearing ambient: {e}")));
        }
    }
    let keep = CapabilityFlags::from_bits_truncate(kept_bits);
    // CAP_SETPCAP stays permitted (not effective, not in the bounding set, so no
    // program run from here gets it) while anything is kept: a later keep_only
    // or drop_all needs it to narrow the bounding set further.
    let later = if keep.is_empty() {
        CapabilityFlags::empty()
    } else {
        before.permitted & setpcap
    };
    let sets = CapabilitySets {
        effective: before.effective & keep,
        permitted: before.permitted & keep | later,
        inheritable: CapabilityFlags::empty(),
    };
    rustix::thread::set_capabilities(None, sets).map_err(|e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("capset: {e}"))
    })?;
    Ok(Dropped::To {
        effective: before.effective.bits(),
        kept: sets.effective.bits(),
    })
}

fn in_bounding_set(cap: u32) -> io::Result<bool> {
    // SAFETY: PR_CAPBSET_READ takes an integer and touches no memory of ours.
    let r = unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r == 1)
    }
}

fn drop_from_bounding_set(cap: u32) -> io::Result<()> {
    // SAFETY: PR_CAPBSET_DROP takes an integer and touches no memory of ours.
    let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `Cap*:` lines of a /proc status file, as numbers.
    fn caps(status: &str) -> Vec<(String, u64)> {
        status
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(":\t")?;
                let v = u64::from_str_radix(v.trim(), 16).ok()?;
                k.starts_with("Cap").then(|| (k.to_string(), v))
            })
            .collect()
    }

    fn is_root() -> bool {
        if rustix::process::geteuid().is_root() {
            return true;
        }
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_ROOT").is_none(),
            "needs root to have capabilities to drop; RDMAKIT_REQUIRE_ROOT is set"
        );
        eprintln!("SKIP: not root: no capabilities to drop");
        false
    }

    /// On a thread of its own (capabilities are per thread): `f` runs there, then
    /// the thread's and a child's capabilities are read back.
    type Seen = (Dropped, Vec<(String, u64)>, Vec<(String, u64)>, String);

    fn after(f: fn() -> io::Result<Dropped>) -> Seen {
        std::thread::spawn(move || {
            let d = f().unwrap();
            let own = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            let child = std::process::Command::new("/bin/cat")
                .arg("/proc/self/status")
                .output()
                .unwrap();
            let child = String::from_utf8(child.stdout).unwrap();
            (d, caps(&own), caps(&child), child)
        })
        .join()
        .unwrap()
    }

    #[test]
    fn after_drop_all_neither_we_nor_what_we_run_hold_a_capability() {
        if !is_root() {
            return;
        }
        let (d, own, child, text) = after(drop_all);
        assert!(
            matches!(d, Dropped::To { effective, kept: 0 } if effective != 0),
            "{d:?}"
        );
        for (k, v) in own.iter().chain(&child) {
            assert_eq!(*v, 0, "{k} is {v:x} after the drop");
        }
        assert_eq!(child.len(), 5, "CapInh/Prm/Eff/Bnd/Amb: {child:?}");
        assert!(text.contains("Uid:\t0\t0\t0\t0"), "still uid 0: {text}");
        // Only the dropping thread lost them.
        let main = caps(&std::fs::read_to_string("/proc/thread-self/status").unwrap());
        assert!(
            main.iter().any(|(k, v)| k == "CapEff" && *v != 0),
            "{main:?}"
        );
    }

    fn get(v: &[(String, u64)], k: &str) -> Option<u64> {
        v.iter().find(|(n, _)| n == k).map(|(_, v)| *v)
    }

    #[test]
    fn collect_keeps_exactly_its_five() {
        if !is_root() {
            return;
        }
        let (_, own, child, _) = after(|| keep_only(COLLECT));
        let want: u64 = COLLECT.iter().fold(0, |m, c| m | 1 << c);
        assert_eq!(get(&own, "CapEff"), Some(want), "{own:?}");
        assert_eq!(
            get(&own, "CapPrm"),
            Some(want | 1 << cap::SETPCAP),
            "{own:?}"
        );
        assert_eq!(get(&own, "CapBnd"), Some(want), "{own:?}");
        assert_eq!(get(&own, "CapInh"), Some(0));
        // A program it runs as root gets these five at most (from the bounding set).
        assert_eq!(get(&child, "CapEff"), Some(want), "{child:?}");
        assert_eq!(get(&child, "CapBnd"), Some(want), "{child:?}");
    }

    /// The health check: the doctor's set first, then nothing.
    #[test]
    fn narrowing_twice_ends_with_nothing() {
        if !is_root() {
            return;
        }
        let (d, own, child, _) = after(|| {
            keep_only(DOCTOR)?;
            drop_all()
        });
        assert!(matches!(d, Dropped::To { kept: 0, .. }), "{d:?}");
        for (k, v) in own.iter().chain(&child) {
            assert_eq!(*v, 0, "{k} is {v:x}");
        }
    }
}
