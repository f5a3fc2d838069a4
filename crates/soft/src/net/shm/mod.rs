//! Same-host packet rings (`RDMAKIT_SOFT_TRANSPORT=auto`, the default): the packets one
//! soft device context sends to another context on this host go through a
//! ring in shared memory instead of a UDP socket, so a busy-polling receiver
//! finds them with a memory load and neither side makes a system call per
//! packet (what kernel rxe's mapped queues give its users; a socket receive
//! costs at least one call, ~0.5 µs in the VM tier's TCG guest).
//!
//! - A context that takes rings listens on a Unix socket named by its UDP
//!   endpoint in its user's private directory ([`channel`]). A sender uses a
//!   ring to an endpoint only when it can connect there and the kernel says
//!   the listener is a process of the same user — decided when a connected
//!   QP's AV is set, or before a UD QP's first packet to that endpoint, so
//!   a flow never moves between UDP and a ring (no reordering) — and UDP
//!   otherwise (kernel rxe, a remote host, another user, a context on
//!   `udp`).
//! - One ring per (sending context, receiving context), single producer,
//!   single consumer: the sender makes it (anonymous sealed memory) and hands
//!   it over on the connection with a pidfd of itself; the receiver checks
//!   both against the kernel's credentials of the connection, maps the ring
//!   and binds it to that process ([`channel::Peer`]): the same-host
//!   requests it carries reach that process's memory and no other's. The
//!   sender then sends a [`NOTIFY`] datagram so the receiver accepts at
//!   once; packets written before it did wait in the ring. A sender that
//!   dies stalls only its own ring.
//! - A receiver about to block (the progress thread waiting on its socket)
//!   sets each ring's `sleeping` flag and looks once more; a sender that
//!   finds the flag set after publishing clears it and wakes the receiver
//!   with an empty datagram ([`wake`]: at the end of its transmit pass, or
//!   of the receive drain it is in).
//! - A full ring drops the packet (counted as a send error), as a full
//!   socket buffer would; RC retransmits.
//!
//! Packets carry no ICRC (nothing crosses a wire) and are invisible to
//! `rdmakit pcap`; `RDMAKIT_SOFT_TRANSPORT=udp` keeps them on UDP. With
//! [`crate::cma`], [`ring`] and [`crate::dma`] are where the soft NIC's
//! `unsafe` lives: the mapping, and atomics in it.

use std::collections::HashMap;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) mod channel;
mod ring;
mod wake;
use crate::lock;
use crate::userdir::UserDir;
pub(crate) use channel::Peer;
pub(crate) use ring::{Inbox, Outbox, Pushed, NOTIFY};
pub(crate) use wake::{hold as hold_wakes, wake, Hold as HeldWakes};

/// Most rings into one context: each maps ~1.1 MB. A sender past it gets
/// UDP.
const MAX_INBOXES: usize = 1024;

/// A context's same-host rings: the rings it sends into (per destination)
/// and the rings into it. Dropping it removes the context's socket.
#[derive(Debug)]
pub(crate) struct Rings {
    /// This user's `net` directory (0700), where the sockets are.
    dir: UserDir,
    /// This context's listening socket.
    listener: channel::Listener,
    /// This context's endpoint.
    me: SocketAddrV4,
    /// Per destination: the ring into it, or None: it takes no rings.
    out: Mutex<HashMap<SocketAddrV4, Option<Arc<Outbox>>>>,
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
    /// Connections refused (another user, a bad hello or ring, a pidfd of
    /// another process, too many rings).
    refused: AtomicU64,
    /// Why the last ring this context tried to hand over or accept did not
    /// come about (for `RDMAKIT_SHIM_DEBUG` and the tests).
    last_miss: Mutex<Option<String>>,
}

/// An engine's cached choice for its last destination: the ring into it,
/// or None inside: UDP.
pub(crate) type RingCache = Option<(SocketAddrV4, Option<Arc<Outbox>>)>;

impl Rings {
    /// The rings of the context at `me`, listening in this user's `net`
    /// directory ([`UserDir::own`]); the error says why it cannot (the
    /// context then uses UDP).
    ///
    /// # Errors
    /// The directory is not safe to use or the socket cannot listen.
    pub(crate) fn new(me: SocketAddrV4) -> std::io::Result<Rings> {
        let net = || UserDir::own()?.subdir("net", 0o700);
        let listener = channel::Listener::bind(net()?, me)?;
        let dir = net()?;
        Ok(Rings {
            dir,
            listener,
            me,
            out: Mutex::new(HashMap::new()),
            inboxes: Mutex::new(Vec::new()),
            any: AtomicBool::new(false),
            pushed: AtomicU64::new(0),
            taken: AtomicU64::new(0),
            woke: AtomicU64::new(0),
            elsewhere: AtomicBool::new(false),
            refused: AtomicU64::new(0),
            last_miss: Mutex::new(None),
        })
    }

    /// The ring into the context at `to` (`same_host`: its address is this
    /// host's), if that context takes rings; cached in the engine's `cache`
    /// and per destination. A QP's first look (its RTR, or a UD QP's first
    /// packet) makes a new ring when there is none to `to` or its receiver
    /// hung up (a new process at the endpoint gets a new ring), and tries
    /// again where the last try gave UDP; a UD QP moving between
    /// destinations uses the context's decision. A new ring is handed over
    /// on the channel ([`channel`]) and announced with a [`NOTIFY`]
    /// datagram from `sock`.
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
            Some(v) if !first => v,
            Some(Some(ob)) if !ob.receiver_gone() => Some(ob),
            _ => {
                let v = same_host.then(|| self.hand_over(to, sock)).flatten();
                out.insert(to, v.clone());
                v
            }
        };
        drop(out);
        *cache = Some((to, ob.clone()));
        ob
    }

    /// Makes a ring into the context at `to` and hands it over: None (UDP)
    /// when nobody of this user listens there.
    fn hand_over(&self, to: SocketAddrV4, sock: &UdpSocket) -> Option<Arc<Outbox>> {
        let miss = |what: &str, e: &dyn std::fmt::Display| {
            *lock(&self.last_miss) = Some(format!("ring to {to}: {what}: {e}"));
        };
        let (conn, pid) = channel::connect(&self.dir, to)
            .map_err(|e| miss("connect", &e))
            .ok()?;
        let (ob, ring) = Outbox::create(conn).map_err(|e| miss("create", &e)).ok()?;
        channel::send_hello(ob.conn(), self.me, ring.as_fd())
            .map_err(|e| miss("hello", &e))
            .ok()?;
        // The receiver copies from and to this process's memory: under
        // Yama `ptrace_scope` 1 that takes its consent.
        channel::allow_ptracer(pid);
        let _ = sock.send_to(NOTIFY, to);
        Some(Arc::new(ob))
    }

    /// Counts a packet written into a ring (`woke`: its receiver was
    /// asleep and is owed a wake-up).
    pub(crate) fn pushed(&self, woke: bool) {
        self.pushed.fetch_add(1, Ordering::Relaxed);
        if woke {
            self.woke.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Accepts the rings handed over on this context's channel (a
    /// [`NOTIFY`] datagram came, or the timers ran). Called under the
    /// device's receive lock. A refused one is counted and dropped: its
    /// sender's packets are lost as to an unreachable peer.
    pub(crate) fn accept(&self) {
        let mut ibs = lock(&self.inboxes);
        self.listener.accept(|r| {
            let attached = r.map_err(|e| e.to_string()).and_then(|a| {
                if ibs.len() >= MAX_INBOXES {
                    return Err(format!("{MAX_INBOXES} rings already"));
                }
                Inbox::attach(&a.ring, a.src, Arc::new(a.peer)).map_err(|e| e.to_string())
            });
            match attached {
                Ok(ib) => ibs.push(ib),
                Err(why) => {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    *lock(&self.last_miss) = Some(format!("refused a ring: {why}"));
                }
            }
        });
        self.any.store(!ibs.is_empty(), Ordering::Release);
    }

    /// Takes up to `max` packets from the rings into `buf`, one ring after
    /// another in turns, handing each with its sender to `f`; stops early
    /// once `done` holds after a packet. How many it took. Called under the
    /// device's receive lock.
    pub(crate) fn drain(
        &self,
        buf: &mut [u8],
        max: usize,
        mut f: impl FnMut(SocketAddrV4, &Arc<Peer>, &[u8]),
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
                f(ib.src(), ib.peer(), &buf[..len]);
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

    /// Unmaps the rings of senders that are gone and left nothing to read,
    /// and accepts rings whose [`NOTIFY`] was lost.
    pub(crate) fn prune(&self) {
        self.accept();
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

    /// Rings offered to this context and refused.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Why the last ring this context tried to hand over or was offered
    /// did not come about.
    pub(crate) fn last_miss(&self) -> Option<String> {
        lock(&self.last_miss).clone()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    /// A loopback slot endpoint.
    pub(super) fn ep(last: u8, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(127, 77, 0, last), port)
    }
}
