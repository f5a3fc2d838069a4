//! The progress thread: one per device, it runs the passive side of the
//! protocol while the application does nothing — it receives when no
//! application thread busy-polls, fires the QPs' timers and sends the ACKs
//! application threads held back. [`Progress`] is what it shares with the
//! rest of the device: when it means to wake up, whether it naps, how to
//! cut either short.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::Duration;

use crate::net::Net;

use super::shared::Shared;

/// The progress thread's plan and how to change it.
#[derive(Debug)]
pub(super) struct Progress {
    /// When the thread's blocking receive ends (ns since the device's
    /// epoch; 0: wake now).
    wake_at: AtomicU64,
    /// When the thread's nap ends (0: not napping); an earlier engine
    /// deadline unparks it.
    nap_until: AtomicU64,
    /// A deadline earlier than the thread's plan was set.
    rescan: AtomicBool,
    /// Bumped by every busy poll of an empty CQ (the thread watches it
    /// move; see [`run`]).
    busy_polls: AtomicU64,
    /// The thread, unparked from its nap when a CQ is armed.
    thread: OnceLock<Thread>,
    /// The device is closing: the thread ends.
    shutdown: AtomicBool,
}

impl Progress {
    /// A plan with no deadline.
    pub(super) fn new() -> Progress {
        Progress {
            wake_at: AtomicU64::new(u64::MAX),
            nap_until: AtomicU64::new(0),
            rescan: AtomicBool::new(false),
            busy_polls: AtomicU64::new(0),
            thread: OnceLock::new(),
            shutdown: AtomicBool::new(false),
        }
    }

    /// An engine's next timer is at `d` (ns since the epoch): the thread
    /// sleeps in recv until `wake_at`, or naps until `nap_until`; an
    /// earlier timer wakes it with an empty datagram to the context's own
    /// socket (`net`), or an unpark.
    pub(super) fn deadline(&self, d: u64, net: &Net) {
        if d < self.wake_at.load(Ordering::Acquire) {
            self.wake_at.store(0, Ordering::Release);
            self.rescan.store(true, Ordering::Release);
            net.kick();
        }
        if d < self.nap_until.load(Ordering::Acquire) {
            self.nap_until.store(0, Ordering::Release);
            self.unpark();
        }
    }

    /// Ends the thread's nap (a CQ was armed: the application may block
    /// on its channel next, and the thread must receive for it).
    pub(super) fn unpark(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// An application thread polled an empty CQ. A counter, not a clock
    /// read per spin: the thread notes when it last saw it move.
    pub(super) fn busy_polled(&self) {
        let n = self.busy_polls.load(Ordering::Relaxed);
        self.busy_polls.store(n.wrapping_add(1), Ordering::Release);
    }

    /// Tells the thread to end (it notices within a wait; kick the socket
    /// to make it now).
    pub(super) fn stop(&self) {
        self.shutdown.store(true, Ordering::Release);
    }
}

/// The progress thread's first nap beside a busy poller; each nap the
/// poller keeps polling through doubles it, up to [`NAP_MAX`].
const NAP_MIN: Duration = Duration::from_millis(1);

/// The longest nap. The thread notices that the poller stopped (and takes
/// the datagrams waiting since) within two naps: after a long busy-polling
/// phase, within 16 ms. Engine timers, an earlier deadline and an armed CQ
/// still cut any nap short. (4 ms instead: the VM tier's 1 KiB ping-pong
/// gained half as much and less steadily, 3 rounds in one guest.)
const NAP_MAX: Duration = Duration::from_millis(8);

/// How long the progress thread keeps looking at the rings after a drain
/// of ring packets, before it blocks.
const LINGER: Duration = Duration::from_micros(50);

/// After a drain of ring packets pushed from another CPU, whose ACKs their
/// sender is about to answer with more: looks at the rings for up to
/// [`LINGER`] before the progress thread blocks, so the next batch is
/// taken without a wake-up datagram and an idle CPU's wake-up (~0.1-2 ms
/// on a VM's halted vCPU, per batch of a same-host WRITE stream). Not when
/// the sender shares this core: there a spinning receiver only takes the
/// sender's time, and sleeping keeps the wake-up's preemption
/// (docs/soft-nic.md, "Lingering"). A yield that hands the core to another
/// thread for longer than the budget ends it too.
fn linger(r: &crate::net::shm::Rings) {
    if !r.sender_elsewhere() {
        return;
    }
    let start = std::time::Instant::now();
    while !r.ready() && start.elapsed() < LINGER {
        // SAFETY: sched_yield takes no arguments and cannot fail.
        unsafe { libc::sched_yield() };
    }
}

/// How often the progress thread snapshots the counters for other
/// processes to read ([`crate::registry::counters`]): 1 s.
const PUBLISH_EVERY_NS: u64 = 1_000_000_000;

/// The progress thread's body, until the device stops it.
pub(super) fn run(sh: &Shared) {
    let p = sh.progress();
    let _ = p.thread.set(std::thread::current());
    let mut next_timer: Option<u64> = None;
    // When this thread last saw `busy_polls` move (ns since epoch, 0 =
    // never): the time of the application's last busy poll, to within a
    // nap, without a clock read on the poller's every spin.
    let mut seen_polls = p.busy_polls.load(Ordering::Acquire);
    let mut polled = 0u64;
    let mut observe = |t: u64| {
        let n = p.busy_polls.load(Ordering::Acquire);
        if n != seen_polls {
            seen_polls = n;
            polled = t.max(1);
        }
        polled
    };
    let mut nap = NAP_MIN;
    // When the counters were last published, and what (a snapshot at most
    // once per PUBLISH_EVERY, written only when it changed).
    let mut published: (u64, Option<crate::registry::counters::Values>) = (0, None);
    while !p.shutdown.load(Ordering::Acquire) {
        let now = sh.now().as_nanos();
        if now.saturating_sub(published.0) >= PUBLISH_EVERY_NS {
            published = (now, sh.publish_counters(published.1));
        }
        let wait = match next_timer {
            Some(t) if t > now => Duration::from_nanos(t - now),
            Some(_) => Duration::from_micros(20),
            None => Duration::from_millis(20),
        }
        .clamp(Duration::from_micros(20), Duration::from_millis(20));
        // While an application thread busy-polls (within the last
        // millisecond) it receives for us: stay off the socket's wait queue
        // so the kernel does not wake this thread for every datagram, and
        // only look after the timers and held ACKs now and then. Datagrams
        // are taken here only when the poller has not polled for 200 µs
        // (seen at this thread's wake-ups, so within about a nap):
        // taking them under its feet (and transmitting what their ACKs
        // open) contends for the engine lock and a core, which cost a
        // sending application 3-11% of its bandwidth.
        let polled = observe(now);
        let napping =
            polled != 0 && now.saturating_sub(polled) < 1_000_000 && sh.cqs().armed() == 0;
        let wait = if napping {
            // Each wake-up on a 2-core host preempts a spinning thread and
            // contends for its locks: 1 ms naps rather than 200 µs (8-byte
            // RTT -12%, 6 of 6 interleaved pairs), and longer while the
            // poller keeps polling (up to NAP_MAX; under qemu's TCG, where a
            // wake-up costs ~170 µs of CPU, a 1 ms nap took a core's sixth
            // from each spinning ping-pong side). Engine timers still cut
            // the nap short, and so does arming a CQ for a blocking wait
            // (`req_notify_cq` unparks) or an earlier deadline (`nap_until`).
            let this = wait.min(nap);
            p.nap_until.store(
                now.saturating_add(u64::try_from(this.as_nanos()).unwrap_or(u64::MAX)),
                Ordering::Release,
            );
            std::thread::park_timeout(this);
            p.nap_until.store(0, Ordering::Release);
            sh.flush_held_acks();
            let t = sh.now().as_nanos();
            if t.saturating_sub(observe(t)) >= 200_000 {
                sh.poll_network(64);
                nap = NAP_MIN;
            } else {
                nap = (nap * 2).min(NAP_MAX);
            }
            Duration::ZERO
        } else {
            nap = NAP_MIN;
            wait
        };
        let planned = now.saturating_add(u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX));
        if !wait.is_zero() {
            p.wake_at.store(planned, Ordering::Release);
            // A ring's sender wakes us through the socket once the rings'
            // flags are up; what it wrote before is taken now.
            let rings = sh.net().rings();
            let mut from_rings = 0;
            if rings.is_some_and(|r| r.sleep()) || sh.net().wait_readable(wait) {
                from_rings = sh.drain_network(64);
            }
            if let Some(r) = rings {
                r.wake();
            }
            sh.flush_held_acks();
            if let Some(r) = rings.filter(|_| from_rings > 0) {
                linger(r);
            }
        }
        // Scan the QPs' timers only when the planned wake-up passed or a
        // drive set an earlier deadline (not on every datagram).
        if sh.now().as_nanos() >= planned || p.rescan.swap(false, Ordering::AcqRel) {
            next_timer = sh.fire_timers();
            if let Some(r) = sh.net().rings() {
                r.prune();
            }
        }
    }
}
