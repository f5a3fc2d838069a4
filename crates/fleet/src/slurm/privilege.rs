//! Least privilege for the health check.
//!
//! slurmd runs a HealthCheckProgram and a Prolog as root with every capability.
//! The doctor's reads need some of that (the kernel log when `dmesg_restrict` is
//! set, other users' `/proc/PID/fd` for the holders of RDMA objects, RDMA netlink's
//! resource details); what follows — reading scontrol's answer and running
//! `scontrol update` — needs none: Slurm authorizes the update by the uid munge
//! vouches for (0), not by a capability. So once the doctor has finished, the
//! health check drops every capability of the thread that goes on (effective,
//! permitted, inheritable, ambient, and the bounding set, so scontrol cannot get
//! one back when it is executed as uid 0). A failure there is a bug worth seeing,
//! but not a reason to leave the node unchecked: the caller reports it and goes on.

use std::io;

use rustix::thread::{CapabilityFlags, CapabilitySets};

/// What [`drop_capabilities`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The thread held no capability: nothing to drop.
    HadNone,
    /// Every capability is gone: `effective` is what the thread held before.
    All { effective: u64 },
}

/// Drops every capability of the calling thread and empties its bounding set, so
/// that nothing it runs from now on holds one either (capabilities are per thread:
/// call it on the thread that spawns the commands).
///
/// # Errors
/// The kernel refused a step (the error says which); what was dropped before
/// stays dropped.
pub fn drop_capabilities() -> io::Result<Dropped> {
    let before = rustix::thread::capabilities(None).map_err(io::Error::from)?;
    if before.permitted.is_empty() && before.effective.is_empty() {
        return Ok(Dropped::HadNone);
    }
    // The bounding set first: emptying it needs CAP_SETPCAP, which goes next.
    for cap in 0..64u32 {
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
    let none = CapabilitySets {
        effective: CapabilityFlags::empty(),
        permitted: CapabilityFlags::empty(),
        inheritable: CapabilityFlags::empty(),
    };
    rustix::thread::set_capabilities(None, none).map_err(|e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("capset to none: {e}"))
    })?;
    Ok(Dropped::All {
        effective: before.effective.bits(),
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

    /// The `Cap*:` lines of a /proc status file, as hex numbers.
    fn caps(status: &str) -> Vec<(String, u64)> {
        status
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(":\t")?;
                k.starts_with("Cap")
                    .then(|| (k.to_string(), u64::from_str_radix(v.trim(), 16).ok()))
                    .and_then(|(k, v)| Some((k, v?)))
            })
            .collect()
    }

    /// On its own thread (capabilities are per thread): afterwards the thread and
    /// what it runs as uid 0 hold nothing, not even in the bounding set.
    #[test]
    fn after_the_drop_neither_we_nor_what_we_run_hold_a_capability() {
        if !rdmakit_testkit::is_root() {
            assert!(
                std::env::var_os("RDMAKIT_REQUIRE_ROOT").is_none(),
                "needs root to have capabilities to drop; RDMAKIT_REQUIRE_ROOT is set"
            );
            eprintln!("SKIP: not root: no capabilities to drop");
            return;
        }
        let t = std::thread::spawn(|| {
            let own = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            let before = caps(&own);
            assert!(
                before.iter().any(|(k, v)| k == "CapEff" && *v != 0),
                "{before:?}"
            );
            let d = drop_capabilities().unwrap();
            assert!(
                matches!(d, Dropped::All { effective } if effective != 0),
                "{d:?}"
            );
            let own = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            let child = std::process::Command::new("/bin/cat")
                .arg("/proc/self/status")
                .output()
                .unwrap();
            let child = String::from_utf8(child.stdout).unwrap();
            (caps(&own), caps(&child), child)
        });
        let (own, child, text) = t.join().unwrap();
        for (k, v) in own.iter().chain(&child) {
            assert_eq!(*v, 0, "{k} is {v:x} after the drop");
        }
        assert_eq!(child.len(), 5, "CapInh/Prm/Eff/Bnd/Amb: {child:?}");
        assert!(text.contains("Uid:\t0\t0\t0\t0"), "still uid 0: {text}");
        // The test's own thread kept its capabilities: only the dropping thread lost them.
        let main = caps(&std::fs::read_to_string("/proc/thread-self/status").unwrap());
        assert!(
            main.iter().any(|(k, v)| k == "CapEff" && *v != 0),
            "{main:?}"
        );
    }
}
