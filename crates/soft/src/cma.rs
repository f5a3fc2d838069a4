//! The same-host data path: one cross-memory copy (`process_vm_readv` /
//! `process_vm_writev`) between two processes using the soft NIC on one
//! host, in place of the datagrams of a large RC WRITE, SEND or READ (the
//! protocol is proto's: [`rdmakit_proto::Memory::peer_copy`]).
//!
//! Each device (each [`crate::dma::MrTable`]) has a [`SameHost`]: its pid
//! and a random cookie at a fixed heap address. A requester names both in
//! its request; the responder reads the cookie from the requester's memory
//! before moving a byte, so a recycled pid or a request forged from another
//! process's stale values moves nothing. A pull from a peer verified before
//! checks instead that the process that held the cookie is still alive
//! (its pidfd, opened before the cookie was read): ~0.4 µs against ~1.5-2
//! µs for the read on this VM, a sixth of a 64 KiB same-host WRITE. A push
//! (writing into the peer) reads the cookie every time: a process that
//! exec'd keeps its pid and pidfd, not its memory. (A pull from one that
//! exec'd since reads the new image into an MR the old one was allowed to
//! write: bytes this process may read anyway, as the copy needs ptrace
//! rights on it.) Any failure of the copy (Yama
//! `ptrace_scope` refusing, the peer gone, a bad address, the path off)
//! *declines*: the requester then sends packets.
//!
//! This module and [`crate::dma`] are where the soft NIC's `unsafe` lives.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use rdmakit_proto::{HostIdentity, PeerBuffers, PeerDir, PeerError};

/// How a soft device moves the data of RC messages to a peer on this host
/// (`RDMAKIT_SOFT_TRANSPORT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SoftTransport {
    /// Every packet to another soft device context on this host that takes
    /// them goes through a ring in shared memory (`net::shm`;
    /// docs/soft-nic.md: no system call per packet, nothing for `rdmakit
    /// pcap` to see), and a large RC WRITE/SEND/READ to a same-host peer is
    /// one cross-memory copy; everything else (and every peer that
    /// declines) is UDP.
    #[default]
    Auto,
    /// As `Auto` without the rings: the large RC messages take the copy,
    /// every packet goes through UDP (a capture sees all of them).
    Cma,
    /// Every byte goes through UDP, as to a remote host.
    Udp,
}

impl SoftTransport {
    /// Parses `auto` / `cma` / `udp` (what `RDMAKIT_SOFT_TRANSPORT` holds);
    /// `shm`, the opt-in name the rings had before they were part of
    /// `auto`, still means `auto`.
    pub fn parse(s: &str) -> Option<SoftTransport> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "shm" => Some(SoftTransport::Auto),
            "cma" => Some(SoftTransport::Cma),
            "udp" => Some(SoftTransport::Udp),
            _ => None,
        }
    }

    /// The name `parse` accepts.
    pub fn as_str(self) -> &'static str {
        match self {
            SoftTransport::Auto => "auto",
            SoftTransport::Cma => "cma",
            SoftTransport::Udp => "udp",
        }
    }
}

/// A device's identity for same-host copies, and whether it takes part.
#[derive(Debug)]
pub struct SameHost {
    /// The cookie; boxed so that its address stays put.
    cookie: Box<u64>,
    pid: u32,
    enabled: AtomicBool,
    /// Peers whose cookie was read, each with a pidfd on the process
    /// that held it (see the module's docs); the oldest goes first.
    verified: Mutex<Vec<(HostIdentity, OwnedFd)>>,
    /// Cookie reads tried (for tests).
    cookie_reads: AtomicU64,
}

/// Most peers [`SameHost`] keeps verified.
const VERIFIED_MAX: usize = 16;

impl Default for SameHost {
    fn default() -> SameHost {
        let cookie =
            (u64::from(crate::dma::random_u32()) << 32) | u64::from(crate::dma::random_u32()) | 1;
        SameHost {
            cookie: Box::new(cookie),
            pid: std::process::id(),
            enabled: AtomicBool::new(false),
            verified: Mutex::new(Vec::new()),
            cookie_reads: AtomicU64::new(0),
        }
    }
}

impl SameHost {
    /// Turns the path on (the device's transport is `auto`): lets any
    /// process of this user copy from and to this one (Yama `ptrace_scope`
    /// 1 otherwise allows only ancestors) and starts answering requests.
    pub fn enable(&self) {
        allow_any_ptracer();
        self.enabled.store(true, Ordering::Release);
    }

    /// Whether the path is on.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// The identity a request names; `None` when the path is off.
    pub fn identity(&self) -> Option<HostIdentity> {
        self.enabled().then(|| HostIdentity {
            pid: self.pid,
            cookie_addr: std::ptr::from_ref::<u64>(&self.cookie) as u64,
            cookie: *self.cookie,
        })
    }

    /// Moves bytes between this process's `local` ranges (host address,
    /// length; validated by the caller against the MR table) and the
    /// peer's, in one system call, after checking the peer: its cookie, or
    /// for a pull from a peer verified before, that its process lives.
    ///
    /// # Errors
    /// [`PeerError::Declined`] when the path is off, the lengths differ or
    /// a system call fails (its errno named); nothing moved unless the data
    /// call itself failed part-way.
    pub fn copy(
        &self,
        local: &[(u64, u64)],
        peer: &PeerBuffers<'_>,
        dir: PeerDir,
    ) -> Result<u64, PeerError> {
        if !self.enabled() {
            return Err(PeerError::Declined(
                "same-host copies are off (RDMAKIT_SOFT_TRANSPORT=udp)",
            ));
        }
        let total = |v: &[(u64, u64)]| v.iter().try_fold(0u64, |a, &(_, n)| a.checked_add(n));
        let len = total(local).ok_or(PeerError::Declined("length overflow"))?;
        if total(peer.iov) != Some(len) || peer.iov.is_empty() {
            return Err(PeerError::Declined("lengths differ"));
        }
        let pid =
            libc::pid_t::try_from(peer.who.pid).map_err(|_| PeerError::Declined("not a pid"))?;
        if !(dir == PeerDir::Pull && self.verified_alive(&peer.who)) {
            self.verify(pid, &peer.who, dir == PeerDir::Pull)?;
        }
        let l: Vec<libc::iovec> = local.iter().map(|&(a, n)| iovec(a, n)).collect();
        let r: Vec<libc::iovec> = peer.iov.iter().map(|&(a, n)| iovec(a, n)).collect();
        let n = match dir {
            // SAFETY: `local` holds ranges of registered memory the caller
            // validated (key, PD, bounds, rights) under the MR table's read
            // lock, which the registration contract lets the NIC write;
            // the kernel writes them from the peer's memory.
            PeerDir::Pull => unsafe {
                libc::process_vm_readv(pid, l.as_ptr(), l.len() as _, r.as_ptr(), r.len() as _, 0)
            },
            // SAFETY: as above; the local ranges are only read.
            PeerDir::Push => unsafe {
                libc::process_vm_writev(pid, l.as_ptr(), l.len() as _, r.as_ptr(), r.len() as _, 0)
            },
        };
        if n < 0 {
            return Err(PeerError::Declined(last_errno_name()));
        }
        if n as u64 != len {
            return Err(PeerError::Declined("partial copy (EFAULT)"));
        }
        Ok(len)
    }
}

impl SameHost {
    /// Whether `who` was verified and its process has not exited since.
    /// An exited one is forgotten.
    fn verified_alive(&self, who: &HostIdentity) -> bool {
        let mut v = crate::lock(&self.verified);
        let Some(i) = v.iter().position(|(w, _)| w == who) else {
            return false;
        };
        let mut fds = [rustix::event::PollFd::new(
            &v[i].1,
            rustix::event::PollFlags::IN,
        )];
        // A pidfd polls readable once its process has exited.
        let alive = rustix::event::poll(&mut fds, 0).is_ok_and(|n| n == 0);
        if !alive {
            v.remove(i);
        }
        alive
    }

    /// Reads the cookie from `who`'s memory; with `keep`, remembers `who`
    /// with a pidfd opened before the read (so it names the process that
    /// held the cookie).
    fn verify(&self, pid: libc::pid_t, who: &HostIdentity, keep: bool) -> Result<(), PeerError> {
        let pidfd = keep
            .then(|| rustix::process::Pid::from_raw(pid))
            .flatten()
            .and_then(|p| {
                rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
            });
        self.cookie_reads.fetch_add(1, Ordering::Relaxed);
        // The cookie first: into a local u64, from the peer's address.
        let mut seen = 0u64;
        let mut c_local = [iovec(std::ptr::from_mut(&mut seen) as u64, 8)];
        let c_remote = [iovec(who.cookie_addr, 8)];
        // SAFETY: the local iovec is `seen`, 8 writable bytes we own; the
        // remote one is only read in the other process by the kernel.
        let n = unsafe {
            libc::process_vm_readv(pid, c_local.as_mut_ptr(), 1, c_remote.as_ptr(), 1, 0)
        };
        if n != 8 {
            return Err(PeerError::Declined(last_errno_name()));
        }
        if seen != who.cookie {
            return Err(PeerError::Declined("cookie mismatch (pid recycled?)"));
        }
        if let Some(fd) = pidfd {
            let mut v = crate::lock(&self.verified);
            v.retain(|(w, _)| w != who);
            if v.len() >= VERIFIED_MAX {
                v.remove(0);
            }
            v.push((*who, fd));
        }
        Ok(())
    }
}

fn iovec(addr: u64, len: u64) -> libc::iovec {
    libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len as usize,
    }
}

fn last_errno_name() -> &'static str {
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EPERM) => "EPERM (ptrace_scope refuses)",
        Some(libc::ESRCH) => "ESRCH (peer gone)",
        Some(libc::EFAULT) => "EFAULT (bad peer address)",
        Some(libc::ENOSYS) => "ENOSYS (no cross-memory attach)",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::ENOMEM) => "ENOMEM",
        _ => "copy failed",
    }
}

/// `prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)`: under Yama `ptrace_scope`
/// 1 a peer process may then attach to this one's memory (the copy checks
/// `PTRACE_MODE_ATTACH`). Failure (no Yama) changes nothing.
fn allow_any_ptracer() {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> SameHost {
        let s = SameHost::default();
        s.enable();
        s
    }

    fn peer<'a>(s: &SameHost, iov: &'a [(u64, u64)]) -> PeerBuffers<'a> {
        PeerBuffers {
            who: s.identity().unwrap(),
            iov,
        }
    }

    fn addr(v: &[u8]) -> u64 {
        v.as_ptr() as u64
    }

    #[test]
    fn transport_names_parse() {
        assert_eq!(SoftTransport::parse("UDP"), Some(SoftTransport::Udp));
        assert_eq!(SoftTransport::parse(" auto"), Some(SoftTransport::Auto));
        assert_eq!(SoftTransport::parse("Shm"), Some(SoftTransport::Auto));
        assert_eq!(SoftTransport::parse("cma\n"), Some(SoftTransport::Cma));
        assert_eq!(SoftTransport::parse("ring"), None);
        for t in [SoftTransport::Auto, SoftTransport::Cma, SoftTransport::Udp] {
            assert_eq!(SoftTransport::parse(t.as_str()), Some(t));
        }
    }

    #[test]
    fn a_pull_from_this_process_copies_across_iovecs() {
        let s = on();
        let src: Vec<u8> = (0..8192u32).map(|i| (i * 13) as u8).collect();
        let mut dst = vec![0u8; 8192];
        let (d0, d1) = dst.split_at_mut(3000);
        let local = [(addr(d0), 3000), (addr(d1), 5192)];
        let remote = [(addr(&src), 100), (addr(&src) + 100, 8092)];
        assert_eq!(s.copy(&local, &peer(&s, &remote), PeerDir::Pull), Ok(8192));
        assert_eq!(dst, src);
    }

    #[test]
    fn a_wrong_cookie_moves_nothing() {
        let s = on();
        let src = vec![7u8; 4096];
        let dst = vec![0u8; 4096];
        let remote = [(addr(&src), 4096)];
        let mut p = peer(&s, &remote);
        p.who.cookie ^= 2;
        let local = [(addr(&dst), 4096)];
        let e = s.copy(&local, &p, PeerDir::Pull).unwrap_err();
        assert!(
            matches!(e, PeerError::Declined(m) if m.contains("cookie")),
            "{e}"
        );
        assert!(dst.iter().all(|&b| b == 0));
    }

    #[test]
    fn a_dead_pid_and_the_path_off_decline() {
        let s = on();
        let src = vec![7u8; 64];
        let dst = vec![0u8; 64];
        let remote = [(addr(&src), 64)];
        let mut p = peer(&s, &remote);
        p.who.pid = i32::MAX as u32; // above pid_max
        let local = [(addr(&dst), 64)];
        assert!(matches!(
            s.copy(&local, &p, PeerDir::Push),
            Err(PeerError::Declined(_))
        ));
        let off = SameHost::default();
        assert!(off.identity().is_none());
        assert!(matches!(
            off.copy(&local, &peer(&s, &remote), PeerDir::Pull),
            Err(PeerError::Declined(m)) if m.contains("udp")
        ));
        assert!(dst.iter().all(|&b| b == 0));
    }

    fn reads(s: &SameHost) -> u64 {
        s.cookie_reads.load(Ordering::Relaxed)
    }

    #[test]
    fn pulls_from_a_verified_peer_read_its_cookie_once_pushes_every_time() {
        let s = on();
        let src = vec![5u8; 4096];
        let mut dst = vec![0u8; 4096];
        let (remote, local) = ([(addr(&src), 4096)], [(addr(&dst), 4096)]);
        for _ in 0..3 {
            assert_eq!(s.copy(&local, &peer(&s, &remote), PeerDir::Pull), Ok(4096));
        }
        assert_eq!(reads(&s), 1);
        dst.fill(9);
        let (remote, local) = ([(addr(&dst), 4096)], [(addr(&src), 4096)]);
        for _ in 0..2 {
            assert_eq!(s.copy(&local, &peer(&s, &remote), PeerDir::Push), Ok(4096));
        }
        assert_eq!(reads(&s), 3);
        assert_eq!(dst, vec![5u8; 4096]);
    }

    /// A forked child, killed and reaped when dropped (a failed assertion
    /// must not leave it holding the test's output pipes).
    struct Child(libc::pid_t);

    impl Child {
        fn kill(&mut self) {
            if self.0 > 0 {
                // SAFETY: our own child, reaped here.
                unsafe {
                    libc::kill(self.0, libc::SIGKILL);
                    libc::waitpid(self.0, std::ptr::null_mut(), 0);
                }
                self.0 = 0;
            }
        }
    }

    impl Drop for Child {
        fn drop(&mut self) {
            self.kill();
        }
    }

    /// A child made by fork holds the same cookie at the same address: a
    /// pull from it verifies once; once it has exited (and been reaped),
    /// the next pull reads the cookie again and declines, moving nothing.
    #[test]
    fn a_verified_peer_that_exited_is_verified_again_and_declines() {
        let s = on();
        let src = vec![3u8; 4096];
        // SAFETY: the child only waits in pause(2) until killed.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            loop {
                // SAFETY: async-signal-safe; the child runs nothing else.
                unsafe { libc::pause() };
            }
        }
        assert!(pid > 0, "fork failed");
        let mut child = Child(pid);
        let mut who = s.identity().unwrap();
        who.pid = pid as u32;
        let dst = vec![0u8; 4096];
        let (remote, local) = ([(addr(&src), 4096)], [(addr(&dst), 4096)]);
        let p = PeerBuffers { who, iov: &remote };
        assert_eq!(s.copy(&local, &p, PeerDir::Pull), Ok(4096));
        assert_eq!(s.copy(&local, &p, PeerDir::Pull), Ok(4096));
        assert_eq!(reads(&s), 1);
        child.kill();
        let before = dst.clone();
        let blank = vec![0u8; 4096];
        let local = [(addr(&blank), 4096)];
        assert!(matches!(
            s.copy(&local, &p, PeerDir::Pull),
            Err(PeerError::Declined(_))
        ));
        assert_eq!(reads(&s), 2, "the exited peer's cookie was read again");
        assert!(blank.iter().all(|&b| b == 0));
        assert_eq!(dst, before);
    }
}
