//! The same-host data path: one cross-memory copy (`process_vm_readv` /
//! `process_vm_writev`) between two processes using the soft NIC on one
//! host, in place of the datagrams of a large RC WRITE, SEND or READ (the
//! protocol is proto's: [`rdmakit_proto::Memory::peer_copy`]).
//!
//! Authority comes from the kernel, never from a packet. A same-host
//! request is taken only from a same-host ring, and each ring is bound to
//! the process that handed it over, as the kernel identified it on the
//! ring's Unix socket (`SO_PEERCRED`, a pidfd it checked; see
//! [`crate::net::shm::channel`]): the copy reaches that process's memory
//! and no other's, at the buffers its own request names, and this side's
//! ranges are checked against its own MR table first (key, PD, bounds,
//! rights) by the caller. Before each copy one `poll` asks whether that
//! process is still there and has not hung the channel up (an exit or an
//! `exec`: the channel is close-on-exec), so a recycled pid or a new image
//! is never reached. Any failure of the copy (Yama `ptrace_scope`
//! refusing, the peer gone, a bad address, the path off) *declines*: the
//! requester then sends packets.
//!
//! This module and [`crate::dma`] are where the soft NIC's `unsafe` lives.

use rdmakit_proto::{PeerDir, PeerError};

use crate::net::shm::Peer;

/// How a soft device moves the data of RC messages to a peer on this host
/// (`RDMAKIT_SOFT_TRANSPORT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SoftTransport {
    /// Every packet to another soft device context of this user on this
    /// host goes through a ring in shared memory (`net::shm`;
    /// docs/soft-nic.md: no system call per packet, nothing for `rdmakit
    /// pcap` to see), and a large RC WRITE/SEND/READ on such a ring is one
    /// cross-memory copy; everything else (and every peer that declines)
    /// is UDP.
    #[default]
    Auto,
    /// Every byte goes through UDP, as to a remote host (a capture sees all
    /// of it).
    Udp,
}

impl SoftTransport {
    /// Parses `auto` / `udp` (what `RDMAKIT_SOFT_TRANSPORT` holds). `shm`,
    /// the rings' opt-in name, and `cma`, the copy over UDP (gone: a copy
    /// takes the rings' authenticated channel), mean `auto`.
    pub fn parse(s: &str) -> Option<SoftTransport> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "shm" | "cma" => Some(SoftTransport::Auto),
            "udp" => Some(SoftTransport::Udp),
            _ => None,
        }
    }

    /// The name `parse` accepts.
    pub fn as_str(self) -> &'static str {
        match self {
            SoftTransport::Auto => "auto",
            SoftTransport::Udp => "udp",
        }
    }
}

/// Whether a device takes part in same-host copies: fixed when the device
/// opens, from the one transport it resolved ([`SameHost::new`]).
#[derive(Debug)]
pub struct SameHost {
    transport: SoftTransport,
}

impl SameHost {
    /// The path of a device whose transport is `transport`: on for
    /// [`SoftTransport::Auto`] (requests taken from same-host rings are
    /// answered), off for [`SoftTransport::Udp`].
    pub fn new(transport: SoftTransport) -> SameHost {
        SameHost { transport }
    }

    /// Whether the path is on.
    pub fn enabled(&self) -> bool {
        self.transport == SoftTransport::Auto
    }

    /// Moves bytes between this process's `local` ranges (host address,
    /// length; validated by the caller against the MR table) and the
    /// buffers `iov` of `peer`, the process the request's ring is bound to,
    /// in one system call, after checking that it is still there.
    ///
    /// # Errors
    /// [`PeerError::Declined`] when the path is off, the request came on no
    /// authenticated channel (`peer` is None), the peer is gone, the
    /// lengths differ or the system call fails (its errno named); nothing
    /// moved unless the data call itself failed part-way.
    pub(crate) fn copy(
        &self,
        local: &[(u64, u64)],
        peer: Option<&Peer>,
        iov: &[(u64, u64)],
        dir: PeerDir,
    ) -> Result<u64, PeerError> {
        if !self.enabled() {
            return Err(PeerError::Declined(
                "same-host copies are off (RDMAKIT_SOFT_TRANSPORT=udp)",
            ));
        }
        let Some(peer) = peer else {
            return Err(PeerError::Declined(
                "not from a same-host ring (no authenticated channel)",
            ));
        };
        let total = |v: &[(u64, u64)]| v.iter().try_fold(0u64, |a, &(_, n)| a.checked_add(n));
        let len = total(local).ok_or(PeerError::Declined("length overflow"))?;
        if total(iov) != Some(len) || iov.is_empty() {
            return Err(PeerError::Declined("lengths differ"));
        }
        let pid =
            libc::pid_t::try_from(peer.pid()).map_err(|_| PeerError::Declined("not a pid"))?;
        if !peer.present() {
            return Err(PeerError::Declined(
                "the peer exited or hung up its channel",
            ));
        }
        let l: Vec<libc::iovec> = local.iter().map(|&(a, n)| iovec(a, n)).collect();
        let r: Vec<libc::iovec> = iov.iter().map(|&(a, n)| iovec(a, n)).collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::shm::channel::{test_peer, test_peer_of};

    fn on() -> SameHost {
        SameHost::new(SoftTransport::Auto)
    }

    fn addr(v: &[u8]) -> u64 {
        v.as_ptr() as u64
    }

    #[test]
    fn transport_names_parse() {
        assert_eq!(SoftTransport::parse("UDP"), Some(SoftTransport::Udp));
        assert_eq!(SoftTransport::parse(" auto"), Some(SoftTransport::Auto));
        assert_eq!(SoftTransport::parse("Shm"), Some(SoftTransport::Auto));
        assert_eq!(SoftTransport::parse("cma\n"), Some(SoftTransport::Auto));
        assert_eq!(SoftTransport::parse("ring"), None);
        for t in [SoftTransport::Auto, SoftTransport::Udp] {
            assert_eq!(SoftTransport::parse(t.as_str()), Some(t));
        }
    }

    #[test]
    fn a_pull_from_the_channels_process_copies_across_iovecs() {
        let s = on();
        let (peer, _conn) = test_peer();
        let src: Vec<u8> = (0..8192u32).map(|i| (i * 13) as u8).collect();
        let mut dst = vec![0u8; 8192];
        let (d0, d1) = dst.split_at_mut(3000);
        let local = [(addr(d0), 3000), (addr(d1), 5192)];
        let remote = [(addr(&src), 100), (addr(&src) + 100, 8092)];
        assert_eq!(
            s.copy(&local, Some(&peer), &remote, PeerDir::Pull),
            Ok(8192)
        );
        assert_eq!(dst, src);
    }

    /// Issue 34: without the channel a ring gives, nothing moves.
    #[test]
    fn no_authenticated_channel_and_the_path_off_decline() {
        let s = on();
        let src = vec![7u8; 64];
        let dst = vec![0u8; 64];
        let (remote, local) = ([(addr(&src), 64)], [(addr(&dst), 64)]);
        assert!(matches!(
            s.copy(&local, None, &remote, PeerDir::Pull),
            Err(PeerError::Declined(m)) if m.contains("authenticated")
        ));
        let (peer, _conn) = test_peer();
        let off = SameHost::new(SoftTransport::Udp);
        assert!(matches!(
            off.copy(&local, Some(&peer), &remote, PeerDir::Pull),
            Err(PeerError::Declined(m)) if m.contains("udp")
        ));
        assert!(dst.iter().all(|&b| b == 0));
    }

    /// A peer that hung its channel up (what an exec does to it) is not
    /// written to, though its pid lives on.
    #[test]
    fn a_peer_that_hung_up_is_not_reached() {
        let s = on();
        let (peer, conn) = test_peer();
        drop(conn);
        let src = vec![5u8; 4096];
        let dst = vec![0u8; 4096];
        let (remote, local) = ([(addr(&dst), 4096)], [(addr(&src), 4096)]);
        assert!(matches!(
            s.copy(&local, Some(&peer), &remote, PeerDir::Push),
            Err(PeerError::Declined(m)) if m.contains("hung up")
        ));
        assert!(dst.iter().all(|&b| b == 0));
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

    /// A child made by fork has this process's memory at the same
    /// addresses: a pull from it works; once it has exited (and been
    /// reaped) the next pull declines and moves nothing.
    #[test]
    fn a_peer_that_exited_declines() {
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
        let (peer, _conn) = test_peer_of(pid as u32);
        let dst = vec![0u8; 4096];
        let (remote, local) = ([(addr(&src), 4096)], [(addr(&dst), 4096)]);
        assert_eq!(
            s.copy(&local, Some(&peer), &remote, PeerDir::Pull),
            Ok(4096)
        );
        child.kill();
        let blank = vec![0u8; 4096];
        let local = [(addr(&blank), 4096)];
        assert!(matches!(
            s.copy(&local, Some(&peer), &remote, PeerDir::Pull),
            Err(PeerError::Declined(_))
        ));
        assert!(blank.iter().all(|&b| b == 0));
    }
}
