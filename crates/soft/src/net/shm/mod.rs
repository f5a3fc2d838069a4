//! Same-host packet rings (`RDMAKIT_SOFT_TRANSPORT=auto`, the default): the packets one
//! soft device context sends to another context on this host go through a
//! ring in shared memory instead of a UDP socket, so a busy-polling receiver
//! finds them with a memory load and neither side makes a system call per
//! packet (what kernel rxe's mapped queues give its users; a socket receive
//! costs at least one call, ~0.5 µs in the VM tier's TCG guest).
//!
//! - A context that takes rings leaves a **marker** in the ring directory,
//!   named by its UDP endpoint (and the user and network namespace), holding
//!   its pid. A sender uses a ring to an endpoint only when that marker names
//!   a live process — decided when a connected QP's AV is set, or before a
//!   UD QP's first packet to that endpoint, so a flow never moves between
//!   UDP and a ring (no reordering) — and UDP otherwise (kernel rxe, a
//!   remote host, a context on `cma`/`udp`).
//! - One ring per (sending context, receiving context), single producer,
//!   single consumer: the sender creates it, and tells the receiver with an
//!   **attach** datagram (UDP, [`ATTACH_MAGIC`] and the ring's path); the
//!   receiver checks the file (its own directory and name prefix, owned by
//!   this user, the right size and header), maps it and unlinks the name.
//!   Packets written before the receiver attached wait in the ring. A
//!   sender that dies stalls only its own ring.
//! - A receiver about to block (the progress thread waiting on its socket)
//!   sets each ring's `sleeping` flag and looks once more; a sender that
//!   finds the flag set after publishing clears it and wakes the receiver
//!   with an empty datagram ([`wake`]: at the end of its transmit pass, or
//!   of the receive drain it is in).
//! - A full ring drops the packet (counted as a send error), as a full
//!   socket buffer would; RC retransmits.
//!
//! Packets carry no ICRC (nothing crosses a wire) and are invisible to
//! `rdmakit pcap`; `RDMAKIT_SOFT_TRANSPORT=cma` or `udp` keeps them on UDP.
//! With [`crate::cma`], [`ring`] and [`crate::dma`] are where the soft NIC's
//! `unsafe` lives: the mapping, and atomics in it.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

mod ring;
mod wake;
use crate::lock;
pub(crate) use ring::{Inbox, Outbox, Pushed, ATTACH_MAGIC};
pub(crate) use wake::{hold as hold_wakes, wake, Hold as HeldWakes};

/// Where rings and markers live: `/dev/shm` (memory) when it is there,
/// else the temporary directory.
pub(crate) fn dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The names of one context's files: user, network namespace (two
/// namespaces may each have a context at the same address) and endpoint.
#[derive(Clone, Debug)]
pub(crate) struct Names {
    pub(super) dir: PathBuf,
    scope: String,
}

impl Names {
    pub(crate) fn new(dir: PathBuf) -> Names {
        let netns = std::fs::metadata("/proc/self/ns/net").map_or(0, |m| m.ino());
        let uid = rustix::process::geteuid().as_raw();
        Names {
            dir,
            scope: format!("rdmakit-soft-{uid}-{netns}"),
        }
    }

    fn endpoint(&self, e: SocketAddrV4) -> String {
        format!("{}-{}-{}", self.scope, e.ip(), e.port())
    }

    /// The marker of the context at `e`.
    pub(crate) fn marker(&self, e: SocketAddrV4) -> PathBuf {
        self.dir.join(format!("{}.inbox", self.endpoint(e)))
    }

    /// The prefix of every ring into the context at `e`.
    pub(super) fn ring_prefix(&self, e: SocketAddrV4) -> String {
        format!("{}-from-", self.endpoint(e))
    }

    /// A new ring's name: unique in this process (a second ring to an
    /// endpoint whose process changed must not share the first's name,
    /// which the first's sender removes when it is dropped), the creator's
    /// pid before the count.
    pub(super) fn ring(&self, to: SocketAddrV4, from: SocketAddrV4) -> PathBuf {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        self.dir.join(format!(
            "{}{}-{}-{}-{}.ring",
            self.ring_prefix(to),
            from.ip(),
            from.port(),
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ))
    }
}

/// Leaves this context's marker (replacing a stale one of a process that
/// held the endpoint before), after sweeping what processes of this user
/// and namespace that are gone left behind: rings no receiver attached,
/// markers of contexts that were never closed.
pub(crate) fn mark(names: &Names, me: SocketAddrV4) -> std::io::Result<()> {
    sweep(names);
    let p = names.marker(me);
    let _ = std::fs::remove_file(&p);
    // Not through a link, not over a file someone else made (the directory
    // is shared by every user): then this context takes no rings.
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&p)?;
    std::io::Write::write_all(&mut f, std::process::id().to_string().as_bytes())
}

/// Removes this scope's rings and markers whose process is gone (the pid
/// ends a ring's name; a marker holds it).
fn sweep(names: &Names) {
    let Ok(rd) = std::fs::read_dir(&names.dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let Some(rest) = name.strip_prefix(&names.scope) else {
            continue;
        };
        let pid = if let Some(r) = rest.strip_suffix(".ring") {
            r.rsplit('-').nth(1).and_then(|p| p.parse::<u32>().ok())
        } else if rest.ends_with(".inbox") {
            marker_pid(&e.path())
        } else {
            continue;
        };
        if pid.is_some_and(|p| !alive(p)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

pub(super) fn alive(pid: u32) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// Removes a context's marker when it names this process.
pub(crate) fn unmark(names: &Names, me: SocketAddrV4) {
    let p = names.marker(me);
    if marker_pid(&p) == Some(std::process::id()) {
        let _ = std::fs::remove_file(&p);
    }
}

/// The pid of the context at `to` when it takes rings: its marker names a
/// live process.
pub(crate) fn ring_pid(names: &Names, to: SocketAddrV4) -> Option<u32> {
    marker_pid(&names.marker(to)).filter(|&p| alive(p))
}

/// The pid a marker holds: a file of this user (a marker another user put
/// in the shared directory names no context of ours), not through a link.
fn marker_pid(path: &Path) -> Option<u32> {
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    if f.metadata().ok()?.uid() != rustix::process::geteuid().as_raw() {
        return None;
    }
    let mut s = String::new();
    std::io::Read::read_to_string(&mut f, &mut s).ok()?;
    s.trim().parse().ok()
}

/// A ring into another context and the pid its marker named.
type RingTo = (u32, Arc<Outbox>);

/// A context's same-host rings: the rings it sends into (per destination)
/// and the rings into it. Dropping it removes the context's marker.
#[derive(Debug)]
pub(crate) struct Rings {
    names: Names,
    /// This context's endpoint.
    me: SocketAddrV4,
    /// Per destination: the ring into it and the pid its marker named when
    /// the ring was made (a new process at the endpoint gets a new ring),
    /// or None: it takes no rings.
    out: Mutex<HashMap<SocketAddrV4, Option<RingTo>>>,
    /// Rings into this context; read under the device's receive lock.
    inboxes: Mutex<Vec<Inbox>>,
    /// Whether `inboxes` is non-empty (a load per busy poll, not a lock).
    any: AtomicBool,
    /// Packets written into rings, taken from rings; pushes that found
    /// their receiver asleep.
    pushed: AtomicU64,
    taken: AtomicU64,
    woke: AtomicU64,
    /// Whether the last drain took a packet pushed from another CPU.
    elsewhere: AtomicBool,
}

/// An engine's cached choice for its last destination: the ring into it,
/// or None inside: UDP.
pub(crate) type RingCache = Option<(SocketAddrV4, Option<Arc<Outbox>>)>;

impl Rings {
    /// The rings of the context at `me`, whose marker this leaves in the
    /// ring directory; None when it cannot (the context then uses UDP).
    pub(crate) fn new(me: SocketAddrV4) -> Option<Rings> {
        let names = Names::new(dir());
        mark(&names, me).ok()?;
        Some(Rings {
            names,
            me,
            out: Mutex::new(HashMap::new()),
            inboxes: Mutex::new(Vec::new()),
            any: AtomicBool::new(false),
            pushed: AtomicU64::new(0),
            taken: AtomicU64::new(0),
            woke: AtomicU64::new(0),
            elsewhere: AtomicBool::new(false),
        })
    }

    /// The ring into the context at `to` (`same_host`: its address is this
    /// host's), if that context takes rings; cached in the engine's `cache`
    /// and per destination. A QP's first look (its RTR, or a UD QP's first
    /// packet) reads the destination's marker, so a new process at an
    /// endpoint gets a new ring (or UDP); a
    /// UD QP moving between destinations uses the context's decision. A new
    /// ring is announced to its receiver with an attach datagram from
    /// `sock`.
    pub(crate) fn outbox(
        &self,
        cache: &mut RingCache,
        to: SocketAddrV4,
        same_host: bool,
        sock: &UdpSocket,
    ) -> Option<Arc<Outbox>> {
        let first = match cache {
            Some((t, ob)) if *t == to => return ob.clone(),
            Some(_) => false,
            None => true,
        };
        let mut out = lock(&self.out);
        let known = out.get(&to).cloned();
        let ob = match known {
            Some(v) if !first => v.map(|(_, ob)| ob),
            _ => {
                let pid = same_host.then(|| ring_pid(&self.names, to)).flatten();
                let v = match (pid, known.flatten()) {
                    (Some(p), Some((q, ob))) if p == q => Some((q, ob)),
                    (Some(p), _) => Outbox::create(&self.names, self.me, to).ok().map(|ob| {
                        let _ = sock.send_to(&ob.attach_datagram(), to);
                        (p, Arc::new(ob))
                    }),
                    (None, _) => None,
                };
                out.insert(to, v.clone());
                v.map(|(_, ob)| ob)
            }
        };
        drop(out);
        *cache = Some((to, ob.clone()));
        ob
    }

    /// Counts a packet written into a ring (`woke`: its receiver was
    /// asleep and is owed a wake-up).
    pub(crate) fn pushed(&self, woke: bool) {
        self.pushed.fetch_add(1, Ordering::Relaxed);
        if woke {
            self.woke.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Maps the ring an attach datagram from `src` names (`msg`: what
    /// follows [`ATTACH_MAGIC`]). Called under the device's receive lock. A
    /// refused attach is dropped: its sender's packets are lost as to an
    /// unreachable peer.
    pub(crate) fn attach(&self, src: SocketAddrV4, msg: &[u8]) {
        if let Ok(ib) = Inbox::attach(&self.names, self.me, src, msg) {
            lock(&self.inboxes).push(ib);
            self.any.store(true, Ordering::Release);
        }
    }

    /// Takes up to `max` packets from the rings into `buf`, one ring after
    /// another in turns, handing each with its sender to `f`; stops early
    /// once `done` holds after a packet. How many it took. Called under the
    /// device's receive lock.
    pub(crate) fn drain(
        &self,
        buf: &mut [u8],
        max: usize,
        mut f: impl FnMut(SocketAddrV4, &[u8]),
        done: impl Fn() -> bool,
    ) -> usize {
        if !self.any.load(Ordering::Acquire) {
            return 0;
        }
        let mut ibs = lock(&self.inboxes);
        let mut n = 0;
        let mut cpu = None;
        let mut elsewhere = false;
        'drain: while n < max {
            let before = n;
            for ib in ibs.iter_mut() {
                let Some(len) = ib.pop(buf) else {
                    continue;
                };
                elsewhere |= ib.sender_cpu() != *cpu.get_or_insert_with(ring::this_cpu);
                self.taken.fetch_add(1, Ordering::Relaxed);
                f(ib.src(), &buf[..len]);
                n += 1;
                if n >= max || done() {
                    break 'drain;
                }
            }
            if n == before {
                break;
            }
        }
        if n > 0 {
            self.elsewhere.store(elsewhere, Ordering::Relaxed);
        }
        n
    }

    /// Whether the last drain that took packets took one its sender pushed
    /// from another CPU than the drain's: a sender that is likely to push
    /// again soon without sharing this thread's core.
    pub(crate) fn sender_elsewhere(&self) -> bool {
        self.elsewhere.load(Ordering::Relaxed)
    }

    /// Whether a ring has a packet waiting (no flag raised).
    pub(crate) fn ready(&self) -> bool {
        self.any.load(Ordering::Acquire) && lock(&self.inboxes).iter().any(Inbox::ready)
    }

    /// Before the progress thread blocks on the socket: raises every ring's
    /// `sleeping` flag; true when a ring has a packet (do not block).
    pub(crate) fn sleep(&self) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        let ibs = lock(&self.inboxes);
        let mut ready = false;
        for ib in ibs.iter() {
            ready |= ib.sleep();
        }
        if ready {
            ibs.iter().for_each(Inbox::wake);
        }
        ready
    }

    /// After the progress thread blocked: lowers the flags.
    pub(crate) fn wake(&self) {
        if self.any.load(Ordering::Acquire) {
            lock(&self.inboxes).iter().for_each(Inbox::wake);
        }
    }

    /// Unmaps the rings of senders that are gone and left nothing to read.
    pub(crate) fn prune(&self) {
        if self.any.load(Ordering::Acquire) {
            let mut ibs = lock(&self.inboxes);
            ibs.retain(|ib| ib.ready() || !ib.sender_gone());
            self.any.store(!ibs.is_empty(), Ordering::Release);
        }
    }

    /// Packets written into rings, taken from them, and pushes that found
    /// their receiver asleep.
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        (
            self.pushed.load(Ordering::Relaxed),
            self.taken.load(Ordering::Relaxed),
            self.woke.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Rings {
    fn drop(&mut self) {
        unmark(&self.names, self.me);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// A ring directory of its own (keep the guard) and its names.
    pub(super) fn names() -> (tempfile::TempDir, Names) {
        let d = tempfile::tempdir().unwrap();
        let n = Names::new(d.path().to_path_buf());
        (d, n)
    }

    /// A loopback slot endpoint.
    pub(super) fn ep(last: u8, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(127, 77, 0, last), port)
    }

    #[test]
    fn markers_say_which_endpoints_take_rings() {
        let (_d, n) = names();
        let (a, b) = (ep(1, 4791), ep(2, 4791));
        assert_eq!(ring_pid(&n, a), None);
        mark(&n, a).unwrap();
        assert_eq!(ring_pid(&n, a), Some(std::process::id()));
        assert_eq!(ring_pid(&n, b), None);
        // A marker of a process that is gone does not count.
        std::fs::write(n.marker(b), "999999999").unwrap();
        assert_eq!(ring_pid(&n, b), None);
        unmark(&n, a);
        assert_eq!(ring_pid(&n, a), None);
    }

    #[test]
    fn marking_sweeps_what_dead_processes_left() {
        let (d, n) = names();
        let (a, b) = (ep(1, 4791), ep(2, 4791));
        let dead_ring = d
            .path()
            .join(format!("{}1.2.3.4-5-999999999-0.ring", n.ring_prefix(b)));
        std::fs::write(&dead_ring, b"x").unwrap();
        std::fs::write(n.marker(b), "999999999").unwrap();
        let live = Outbox::create(&n, a, b).unwrap();
        let other = d.path().join("someone-else.ring");
        std::fs::write(&other, b"x").unwrap();
        mark(&n, a).unwrap();
        assert!(!dead_ring.exists() && !n.marker(b).exists(), "swept");
        assert!(live.path.exists() && other.exists(), "kept");
        assert!(n.marker(a).exists());
    }
}
