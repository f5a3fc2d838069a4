//! The same-host channel: how a soft device context hands a ring to another
//! context of this host, with the kernel saying who is at each end.
//!
//! Each context that takes rings listens on a Unix `SOCK_SEQPACKET` socket
//! named by its UDP endpoint (and network namespace) in its user's private
//! `net` directory (mode 0700 in [`crate::userdir`]): only the same user can
//! even reach it. A sender connects, and each side reads the other's
//! credentials from the kernel (`SO_PEERCRED`, taken at `connect` and
//! `listen`): a peer of another uid, or in a pid namespace where it has no
//! pid, is refused. The sender then sends a **hello**: [`HELLO_MAGIC`], its
//! UDP endpoint, and two descriptors — the ring (a sealed `memfd`, so no file
//! in a shared directory ever holds a ring) and a pidfd of itself, which the
//! receiver accepts only when the kernel's `fdinfo` says it names the very
//! process `SO_PEERCRED` named.
//!
//! The receiver binds what arrives on that ring to that process ([`Peer`]):
//! a same-host request taken from the ring is copied from or to that
//! process's memory and no other, and a request arriving any other way (a
//! UDP datagram) is dropped. The connection stays open for the ring's life:
//! it is close-on-exec on both sides, so an `exec` or an exit of the sender
//! hangs it up, and [`Peer::present`] sees that together with the pidfd.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rustix::event::{poll, PollFd, PollFlags};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};

use crate::userdir::{euid, UserDir};

/// The first bytes of a hello; the sender's UDP endpoint follows.
pub(crate) const HELLO_MAGIC: &[u8; 8] = b"RDKRING2";
/// A hello's length: magic, IPv4 address, port, two reserved bytes.
const HELLO_LEN: usize = 16;
/// Connections a receiver accepts per call (more wait for the next).
const ACCEPT_BURST: usize = 16;
/// Connections accepted before their hello came (the sender connects, then
/// sends it: an accept by the timers can fall in between) that wait for it,
/// at most this many, each at most [`HELLO_WAIT`].
const PENDING_MAX: usize = 64;
/// How long an accepted connection may take to bring its hello.
const HELLO_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// Pending connections a listener keeps queued in the kernel.
const BACKLOG: i32 = 128;

/// A same-host peer as the kernel identified it: the process at the other
/// end of a ring's channel.
#[derive(Debug)]
pub(crate) struct Peer {
    pid: u32,
    pidfd: OwnedFd,
    conn: OwnedFd,
}

impl Peer {
    /// Its process id (in this pid namespace).
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the process that set the channel up is still there and has
    /// not hung it up (an exit, or an `exec`: the channel is close-on-exec):
    /// one `poll` of its pidfd and of the connection.
    pub(crate) fn present(&self) -> bool {
        let mut fds = [
            PollFd::new(&self.pidfd, PollFlags::IN),
            PollFd::new(&self.conn, PollFlags::empty()),
        ];
        match poll(&mut fds, 0) {
            Ok(0) => true,
            Ok(_) => false,
            // EINTR: ask again next time; anything else: not present.
            Err(e) => e == rustix::io::Errno::INTR,
        }
    }
}

/// Why a connection was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    /// The kernel's credentials name another user or no pid here.
    #[error("peer uid {uid} pid {pid}: not this user's process in this pid namespace")]
    Credentials { uid: u32, pid: u32 },
    /// The hello is missing or malformed.
    #[error("bad hello: {0}")]
    Hello(&'static str),
    /// The pidfd names another process than the kernel's credentials.
    #[error("the pidfd names pid {named:?}, the connection pid {pid}")]
    Pidfd { named: Option<i64>, pid: u32 },
    /// A system call failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// What a receiver took from an accepted connection.
#[derive(Debug)]
pub(crate) struct Accepted {
    /// The sender's UDP endpoint (the source of its ring's packets).
    pub(crate) src: SocketAddrV4,
    /// The ring's memory.
    pub(crate) ring: OwnedFd,
    /// Who sent it.
    pub(crate) peer: Peer,
}

/// The name of the socket of the context at `e` in this network namespace.
pub(crate) fn socket_name(netns: u64, e: SocketAddrV4) -> String {
    format!("{netns}-{}-{}", e.ip(), e.port())
}

/// This process's network namespace (its inode), which names sockets: two
/// namespaces may each have a context at one address.
pub(crate) fn netns() -> u64 {
    rustix::fs::stat("/proc/self/ns/net").map_or(0, |s| s.st_ino)
}

/// A context's listening socket.
#[derive(Debug)]
pub(crate) struct Listener {
    sock: OwnedFd,
    /// Accepted connections whose hello has not come yet, with when they
    /// were accepted.
    pending: std::sync::Mutex<Vec<(OwnedFd, std::time::Instant)>>,
    dir: UserDir,
    name: String,
    /// The socket file's inode: removed on drop only while it is still ours.
    ino: u64,
}

impl Listener {
    /// Listens as the context at `me`, in `dir` (this user's 0700 `net`
    /// directory), replacing a socket file a context that held `me` before
    /// left behind (the UDP endpoint is ours alone, so any file of that
    /// name is stale).
    pub(crate) fn bind(dir: UserDir, me: SocketAddrV4) -> io::Result<Listener> {
        let name = socket_name(netns(), me);
        let sock = seqpacket()?;
        let _ = rustix::fs::unlinkat(dir.fd(), name.as_str(), rustix::fs::AtFlags::empty());
        let addr = SocketAddrUnix::new(dir.fd_path(&name)?)?;
        rustix::net::bind_unix(&sock, &addr)?;
        rustix::net::listen(&sock, BACKLOG)?;
        let ino = rustix::fs::statat(
            dir.fd(),
            name.as_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )?
        .st_ino;
        Ok(Listener {
            sock,
            pending: std::sync::Mutex::new(Vec::new()),
            dir,
            name,
            ino,
        })
    }

    /// Accepts the connections waiting (at most a burst), each checked:
    /// credentials, hello and pidfd. `each` gets what every accepted one
    /// carried, or why it was refused. A connection that closed without a
    /// hello (a probe) is neither; one whose hello has not come yet waits
    /// for the next call, at most [`HELLO_WAIT`] and [`PENDING_MAX`] of them.
    pub(crate) fn accept(&self, mut each: impl FnMut(Result<Accepted, Refusal>)) {
        let mut pending = crate::lock(&self.pending);
        let now = std::time::Instant::now();
        let mut handle =
            |conn: OwnedFd, since: std::time::Instant, p: &mut Vec<_>| match receive_hello(conn) {
                Hello::Got(a) => each(Ok(a)),
                Hello::Closed => {}
                Hello::NotYet(c) if now.duration_since(since) < HELLO_WAIT => {
                    if p.len() < PENDING_MAX {
                        p.push((c, since));
                    } else {
                        each(Err(Refusal::Hello("too many connections without a hello")));
                    }
                }
                Hello::NotYet(_) => each(Err(Refusal::Hello("no hello within 2 s"))),
                Hello::Refused(r) => each(Err(r)),
            };
        for (conn, since) in std::mem::take(&mut *pending) {
            handle(conn, since, &mut pending);
        }
        for _ in 0..ACCEPT_BURST {
            let conn = match rustix::net::accept_with(
                &self.sock,
                SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            ) {
                Ok(c) => c,
                Err(_) => return,
            };
            handle(conn, now, &mut pending);
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let still_ours = rustix::fs::statat(
            self.dir.fd(),
            self.name.as_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .is_ok_and(|s| s.st_ino == self.ino);
        if still_ours {
            let _ = rustix::fs::unlinkat(
                self.dir.fd(),
                self.name.as_str(),
                rustix::fs::AtFlags::empty(),
            );
        }
    }
}

/// A non-blocking, close-on-exec Unix `SOCK_SEQPACKET` socket.
fn seqpacket() -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?)
}

/// The kernel's credentials of the other end of `conn`, when it is a
/// process of this user with a pid in this namespace.
fn peer_of(conn: &OwnedFd) -> Result<u32, Refusal> {
    let (pid, uid) = peercred(conn)?;
    if uid != euid() || pid == 0 {
        return Err(Refusal::Credentials { uid, pid });
    }
    Ok(pid)
}

/// `SO_PEERCRED`: the pid (0 when the peer has none in this pid namespace)
/// and uid of the other end, as the kernel recorded them at `connect` or
/// `listen`. (By hand: rustix's typed answer cannot hold pid 0.)
fn peercred(conn: &OwnedFd) -> io::Result<(u32, u32)> {
    let mut c = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` and `len` are valid for writes of a ucred and its size;
    // the kernel writes at most `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::from_mut(&mut c).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((u32::try_from(c.pid).unwrap_or(0), c.uid))
}

/// Connects to the context at `to` through `dir` (this user's `net`
/// directory): the connection and the receiver's pid, which the kernel
/// vouches for. Never blocks: a receiver whose queue is full, or none at
/// all, is an error (the caller then uses UDP).
///
/// # Errors
/// No context listens there (`ENOENT`, `ECONNREFUSED`), its queue is full
/// (`EAGAIN`), or it is not this user's process.
pub(crate) fn connect(dir: &UserDir, to: SocketAddrV4) -> Result<(OwnedFd, u32), Refusal> {
    let sock = seqpacket()?;
    let addr =
        SocketAddrUnix::new(dir.fd_path(&socket_name(netns(), to))?).map_err(io::Error::from)?;
    rustix::net::connect_unix(&sock, &addr).map_err(io::Error::from)?;
    let pid = peer_of(&sock)?;
    Ok((sock, pid))
}

/// Sends the hello on a fresh connection: this context's endpoint `from`,
/// the ring `ring`, and a pidfd of this process.
///
/// # Errors
/// The pidfd cannot be opened or the message cannot be sent at once.
pub(crate) fn send_hello(
    conn: &OwnedFd,
    from: SocketAddrV4,
    ring: BorrowedFd<'_>,
) -> io::Result<()> {
    let me = rustix::process::getpid();
    let pidfd = rustix::process::pidfd_open(me, rustix::process::PidfdFlags::empty())?;
    let mut hello = [0u8; HELLO_LEN];
    hello[..8].copy_from_slice(HELLO_MAGIC);
    hello[8..12].copy_from_slice(&from.ip().octets());
    hello[12..14].copy_from_slice(&from.port().to_be_bytes());
    let fds = [ring, pidfd.as_fd()];
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for two descriptors"));
    }
    let n = rustix::net::sendmsg(
        conn,
        &[IoSlice::new(&hello)],
        &mut control,
        SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
    )?;
    if n != HELLO_LEN {
        return Err(io::Error::other("hello cut short"));
    }
    Ok(())
}

/// What an accepted connection brought.
enum Hello {
    /// A hello that passed every check.
    Got(Accepted),
    /// Nothing: the connection closed.
    Closed,
    /// Nothing yet: the connection is handed back to wait.
    NotYet(OwnedFd),
    /// A refusal.
    Refused(Refusal),
}

/// Reads and checks the hello of an accepted connection.
fn receive_hello(conn: OwnedFd) -> Hello {
    match read_hello(conn) {
        Ok(h) => h,
        Err(r) => Hello::Refused(r),
    }
}

fn read_hello(conn: OwnedFd) -> Result<Hello, Refusal> {
    let pid = peer_of(&conn)?;
    // One byte more than a hello: a longer message shows as too long.
    let mut buf = [0u8; HELLO_LEN + 1];
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let r = rustix::net::recvmsg(
        &conn,
        &mut [IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
    );
    let n = match r {
        Ok(r) => r.bytes,
        Err(rustix::io::Errno::AGAIN) => {
            drop(control);
            return Ok(Hello::NotYet(conn));
        }
        Err(e) => return Err(Refusal::Io(e.into())),
    };
    // Every descriptor that came is owned here, and closed if refused.
    let mut fds: Vec<OwnedFd> = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(it) = m {
            fds.extend(it);
        }
    }
    if n == 0 && fds.is_empty() {
        return Ok(Hello::Closed);
    }
    if n != HELLO_LEN || &buf[..8] != HELLO_MAGIC || buf[14..16] != [0, 0] {
        return Err(Refusal::Hello("not a hello"));
    }
    if fds.len() != 2 {
        return Err(Refusal::Hello("not exactly two descriptors"));
    }
    let pidfd = fds.pop().ok_or(Refusal::Hello("no pidfd"))?;
    let ring = fds.pop().ok_or(Refusal::Hello("no ring"))?;
    let named = pidfd_pid(&pidfd);
    if named != Some(i64::from(pid)) {
        return Err(Refusal::Pidfd { named, pid });
    }
    let ip = Ipv4Addr::new(buf[8], buf[9], buf[10], buf[11]);
    let port = u16::from_be_bytes([buf[12], buf[13]]);
    let peer = Peer { pid, pidfd, conn };
    // The pidfd named a live process with the connection's pid; it must
    // still be that process (a pidfd of an exited process polls readable).
    if !peer.present() {
        return Err(Refusal::Hello("the sender is gone"));
    }
    Ok(Hello::Got(Accepted {
        src: SocketAddrV4::new(ip, port),
        ring,
        peer,
    }))
}

/// The pid a pidfd names, from the kernel (`/proc/self/fdinfo/N`, line
/// `Pid:`; -1 once the process is gone, 0 outside this namespace).
fn pidfd_pid(fd: &OwnedFd) -> Option<i64> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Lets `pid` read and write this process's memory under Yama
/// `ptrace_scope` 1 (the cross-memory copy checks `PTRACE_MODE_ATTACH`):
/// the receiver of the ring this process just set up, the only process that
/// copies from or to it. A process has one such exception, so with several
/// same-host peers under Yama 1 only the latest may copy (the others
/// decline and their QPs fall back to packets). Without Yama this changes
/// nothing.
pub(crate) fn allow_ptracer(pid: u32) {
    if let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::set_ptracer(rustix::process::PTracer::ProcessID(p));
    }
}

/// A peer that is this process, and the sending side's end of its
/// connection: for tests of what uses a [`Peer`].
#[cfg(test)]
pub(crate) fn test_peer() -> (Peer, OwnedFd) {
    test_peer_of(std::process::id())
}

/// As [`test_peer`] for process `pid`.
#[cfg(test)]
pub(crate) fn test_peer_of(pid: u32) -> (Peer, OwnedFd) {
    let (a, b) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .expect("socketpair");
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(pid as i32).expect("a pid"),
        rustix::process::PidfdFlags::empty(),
    )
    .expect("pidfd");
    let peer = Peer {
        pid,
        pidfd,
        conn: a,
    };
    (peer, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net_dir() -> (tempfile::TempDir, UserDir) {
        let b = tempfile::tempdir().unwrap();
        let d = UserDir::own_in(b.path())
            .unwrap()
            .subdir("net", 0o700)
            .unwrap();
        (b, d)
    }

    fn ep(last: u8) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(127, 77, 0, last), 4791)
    }

    fn ring_fd() -> OwnedFd {
        rustix::fs::memfd_create("test-ring", rustix::fs::MemfdFlags::CLOEXEC).unwrap()
    }

    fn accept_all(l: &Listener) -> Vec<Result<Accepted, Refusal>> {
        let mut v = Vec::new();
        l.accept(|r| v.push(r));
        v
    }

    #[test]
    fn a_hello_brings_the_ring_and_binds_it_to_the_senders_pid() {
        let (_b, d) = net_dir();
        let l = Listener::bind(d, ep(2)).unwrap();
        let (conn, pid) = connect(&l.dir, ep(2)).unwrap();
        assert_eq!(pid, std::process::id(), "the listener is this process");
        let ring = ring_fd();
        send_hello(&conn, ep(1), ring.as_fd()).unwrap();
        let got = accept_all(&l);
        assert_eq!(got.len(), 1);
        let a = got.into_iter().next().unwrap().unwrap();
        assert_eq!(a.src, ep(1));
        assert_eq!(a.peer.pid(), std::process::id());
        assert!(a.peer.present());
        // Hanging up is seen: at once, unless another test's fork holds a
        // copy of the socket until its exec closes it (close-on-exec), so
        // wait for it, bounded.
        drop(conn);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while a.peer.present() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!a.peer.present());
    }

    /// The sender connects, then sends its hello: a receiver accepting in
    /// between (its timers) keeps the connection until the hello comes,
    /// instead of refusing the ring.
    #[test]
    fn a_connection_accepted_before_its_hello_waits_for_it() {
        let (_b, d) = net_dir();
        let l = Listener::bind(d, ep(5)).unwrap();
        let (conn, _) = connect(&l.dir, ep(5)).unwrap();
        assert!(
            accept_all(&l).is_empty(),
            "no hello yet: nothing, no refusal"
        );
        let ring = ring_fd();
        send_hello(&conn, ep(1), ring.as_fd()).unwrap();
        let got = accept_all(&l);
        assert!(matches!(got[..], [Ok(ref a)] if a.src == ep(1)), "{got:?}");
        assert!(crate::lock(&l.pending).is_empty());
    }

    #[test]
    fn nobody_listening_is_an_error_not_a_wait() {
        let (_b, d) = net_dir();
        assert!(connect(&d, ep(9)).is_err());
    }

    #[test]
    fn a_connection_without_a_hello_is_dropped_quietly_and_bad_hellos_are_refused() {
        let (_b, d) = net_dir();
        let l = Listener::bind(d, ep(3)).unwrap();
        let (c, _) = connect(&l.dir, ep(3)).unwrap();
        drop(c);
        assert!(accept_all(&l).is_empty(), "closed without a hello");
        // Data but no descriptors.
        let (c, _) = connect(&l.dir, ep(3)).unwrap();
        let mut hello = [0u8; HELLO_LEN];
        hello[..8].copy_from_slice(HELLO_MAGIC);
        rustix::net::send(&c, &hello, SendFlags::empty()).unwrap();
        let got = accept_all(&l);
        assert!(matches!(got[..], [Err(Refusal::Hello(_))]), "{got:?}");
        // A pidfd of another process (our child) than the connection's.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let other = rustix::process::pidfd_open(
            rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
            rustix::process::PidfdFlags::empty(),
        )
        .unwrap();
        let (c, _) = connect(&l.dir, ep(3)).unwrap();
        let ring = ring_fd();
        let fds = [ring.as_fd(), other.as_fd()];
        let mut space = [0u8; rustix::cmsg_space!(ScmRights(2))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        assert!(control.push(SendAncillaryMessage::ScmRights(&fds)));
        rustix::net::sendmsg(
            &c,
            &[IoSlice::new(&hello)],
            &mut control,
            SendFlags::empty(),
        )
        .unwrap();
        let got = accept_all(&l);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            matches!(got[..], [Err(Refusal::Pidfd { pid, .. })] if pid == std::process::id()),
            "{got:?}"
        );
    }

    #[test]
    fn a_listener_replaces_a_stale_socket_and_removes_only_its_own() {
        let (_b, d) = net_dir();
        let name = socket_name(netns(), ep(4));
        let first = Listener::bind(d, ep(4)).unwrap();
        let dir_path = first.dir.path().to_path_buf();
        // A second context at the endpoint (the first one's UDP socket is
        // gone) replaces the file; dropping the first leaves it.
        let again = UserDir::own_in(dir_path.parent().unwrap().parent().unwrap())
            .unwrap()
            .subdir("net", 0o700)
            .unwrap();
        let second = Listener::bind(again, ep(4)).unwrap();
        drop(first);
        assert!(dir_path.join(&name).exists());
        assert!(connect(&second.dir, ep(4)).is_ok());
        drop(second);
        assert!(!dir_path.join(&name).exists());
    }
}
