//! A plan at work: each rule's schedule and state, the packets held back
//! (delayed or reordered), and what was injected, counted.
//!
//! Pure apart from its lock: the device hands it each packet's
//! [`PacketInfo`] and the time since it opened, and gets a [`Verdict`]; a
//! packet held back is handed back by [`Injector::due`] when its time or
//! its turn comes. Rules are judged in order, each on its own splitmix64
//! stream (`rng` and the rule's position), and each advances its stream
//! only for packets it matches: the same plan and the same packets give
//! the same verdicts, whatever other rules do.

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rdmakit_proto::Answer;
use rdmakit_wire::aeth::NakCode;

use super::{
    limits, Dir, Event, EventRule, Nak, PacketFault, PacketRule, Plan, Trigger, Verb, VerbRule,
    When,
};
use crate::errno::Errno;
use crate::lock;

/// What the injector looks at in a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    /// Received ([`Dir::Rx`]) or sent ([`Dir::Tx`]).
    pub dir: Dir,
    /// The local QP: the destination QP of a received packet, the sending
    /// QP of a sent one.
    pub qp: u32,
    /// The BTH opcode.
    pub opcode: u8,
    /// The BTH PSN.
    pub psn: u32,
}

/// What to do with one packet. Several faults can apply to one packet
/// (duplicated and CE-marked); a dropped or corrupted packet gets nothing
/// else.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Lose it.
    pub drop: bool,
    /// Make its ICRC wrong (a receiver drops it as an ICRC error).
    pub corrupt: bool,
    /// Deliver it twice.
    pub dup: bool,
    /// Mark it Congestion Experienced.
    pub ce: bool,
    /// Hold it back: until this time (ns since open) or until this many
    /// packets of its direction passed, whichever comes first.
    pub hold: Option<(u64, u32)>,
    /// A received RC request: the responder answers it so instead of
    /// executing it.
    pub answer: Option<Answer>,
}

impl Verdict {
    /// Nothing to do.
    pub fn is_pass(&self) -> bool {
        *self == Verdict::default()
    }
}

/// A packet held back, with what is needed to send or deliver it later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Its direction.
    pub dir: Dir,
    /// The packet (without ICRC), with room for one after it.
    pub bytes: Vec<u8>,
    /// Received: where it came from; sent: where it goes (the flow's
    /// source port in the port).
    pub addr: SocketAddrV4,
    /// Sent: its IP TOS; received: its ECN bits said CE (`0b11`).
    pub tos: u8,
    /// Released at (ns since open).
    due_ns: u64,
    /// Or after this many more packets of its direction.
    after: u32,
}

impl Held {
    /// A packet to hold back as `verdict.hold` says, judged at `now_ns`.
    pub fn new(dir: Dir, bytes: &[u8], addr: SocketAddrV4, tos: u8, hold: (u64, u32)) -> Held {
        let mut b = Vec::with_capacity(bytes.len() + 4);
        b.extend_from_slice(bytes);
        Held {
            dir,
            bytes: b,
            addr,
            tos,
            due_ns: hold.0,
            after: hold.1,
        }
    }
}

/// How many faults were injected, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Packets dropped.
    pub drop: u64,
    /// Packets duplicated.
    pub dup: u64,
    /// Packets reordered (held back behind later ones).
    pub reorder: u64,
    /// Packets whose ICRC was made wrong.
    pub corrupt: u64,
    /// Packets delayed.
    pub delay: u64,
    /// Packets marked CE.
    pub ce: u64,
    /// Verb calls failed (creates and posts).
    pub fail: u64,
    /// Requests answered with an RNR NAK (`rnr`).
    pub rnr: u64,
    /// Requests answered with a NAK (`nak`).
    pub nak: u64,
    /// Packets lost, either way, while the link was down.
    pub link_drop: u64,
    /// Times the link went down.
    pub link_down: u64,
    /// QPs put in ERR by `qp_fatal` (and `device_fatal`).
    pub qp_fatal: u64,
    /// `device_fatal` events.
    pub device_fatal: u64,
}

/// What an event rule does when its time comes ([`Injector::events_due`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Happening {
    /// The link went down.
    LinkDown,
    /// The link came up again.
    LinkUp,
    /// QP `Some(n)` (None: every QP) goes to ERR with QP_FATAL.
    QpFatal(Option<u32>),
    /// The device failed.
    DeviceFatal,
}

/// A reordered packet waits at most this long for the packets that
/// overtake it (a flow that stops does not strand it).
const REORDER_WAIT_NS: u64 = 10_000_000;

/// One rule's schedule.
#[derive(Debug)]
struct Schedule {
    rng: u64,
    matched: u64,
    fired: u64,
}

impl Schedule {
    fn new(rng: u64, index: usize) -> Schedule {
        Schedule {
            rng: rng ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            matched: 0,
            fired: 0,
        }
    }

    /// Whether the rule fires on this match (the match is counted).
    fn fires(&mut self, t: &Trigger) -> bool {
        self.matched += 1;
        let limit = match (t.when, t.count) {
            (_, Some(c)) => c,
            (When::Nth(_), None) => 1,
            _ => u64::MAX,
        };
        if self.fired >= limit {
            return false;
        }
        let fire = match t.when {
            When::Always => true,
            When::P(ppm) => self.next() % 1_000_000 < u64::from(ppm),
            When::Every(n) => self.matched % n == 0,
            When::Nth(n) => self.matched >= n,
        };
        self.fired += u64::from(fire);
        fire
    }

    /// splitmix64.
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[derive(Debug)]
struct State {
    packets: Vec<(PacketRule, Schedule)>,
    verbs: Vec<(VerbRule, Schedule)>,
    held: VecDeque<Held>,
    /// Event rules and how far each went: 0 not yet, 1 begun (a link
    /// down), 2 over.
    events: Vec<(EventRule, u8)>,
}

/// A plan at work (see the module's documentation).
#[derive(Debug)]
pub struct Injector {
    state: Mutex<State>,
    counts: [AtomicU64; 13],
    has_packet_rules: bool,
    /// The link-down windows, `[from, to)` ns since open (pure in time:
    /// the port's state and the packets lost follow them exactly; the
    /// events are raised when [`Injector::events_due`] sees them pass).
    link_down: Vec<(u64, u64)>,
}

impl Injector {
    /// The injector of `plan`'s packet and verb rules.
    pub fn new(plan: &Plan) -> Injector {
        let n = plan.packets.len();
        Injector {
            state: Mutex::new(State {
                packets: (plan.packets.iter().enumerate())
                    .map(|(i, r)| (*r, Schedule::new(plan.rng, i)))
                    .collect(),
                verbs: (plan.verbs.iter().enumerate())
                    .map(|(i, r)| (*r, Schedule::new(plan.rng, n + i)))
                    .collect(),
                held: VecDeque::new(),
                events: plan.events.iter().map(|e| (*e, 0)).collect(),
            }),
            counts: Default::default(),
            // A link that goes down loses packets: it is a packet rule too.
            has_packet_rules: n > 0 || plan.events.iter().any(|e| e.event != Event::QpFatal),
            link_down: (plan.events.iter())
                .filter(|e| matches!(e.event, Event::LinkDown | Event::DeviceFatal))
                .map(|e| {
                    let end = match (e.event, e.for_ns) {
                        (Event::LinkDown, Some(d)) => e.after_ns.saturating_add(d),
                        _ => u64::MAX,
                    };
                    (e.after_ns, end)
                })
                .collect(),
        }
    }

    /// Whether any rule is about packets (a link that goes down is).
    pub fn has_packet_rules(&self) -> bool {
        self.has_packet_rules
    }

    /// Whether the link is down at `now_ns` (a `link down` window, or
    /// after `device_fatal`).
    pub fn link_down(&self, now_ns: u64) -> bool {
        self.link_down
            .iter()
            .any(|&(a, b)| (a..b).contains(&now_ns))
    }

    /// Whether a packet sent or received at `now_ns` outside the judged
    /// paths (QP1's MADs on their way out) is lost to a down link
    /// (counted).
    pub fn lost_to_link(&self, now_ns: u64) -> bool {
        let lost = self.link_down(now_ns);
        if lost {
            self.counts[9].fetch_add(1, Ordering::Relaxed);
        }
        lost
    }

    /// What the event rules make happen by `now_ns`, in order, each once
    /// (counted).
    pub fn events_due(&self, now_ns: u64) -> Vec<Happening> {
        let mut st = lock(&self.state);
        let mut out = Vec::new();
        for (r, phase) in &mut st.events {
            if *phase == 0 && now_ns >= r.after_ns {
                *phase = 1;
                out.push(match r.event {
                    Event::LinkDown => {
                        self.counts[10].fetch_add(1, Ordering::Relaxed);
                        Happening::LinkDown
                    }
                    Event::QpFatal => Happening::QpFatal(r.qp),
                    Event::DeviceFatal => {
                        self.counts[12].fetch_add(1, Ordering::Relaxed);
                        Happening::DeviceFatal
                    }
                });
            }
            let end = r.for_ns.map(|d| r.after_ns.saturating_add(d));
            if *phase == 1 && r.event == Event::LinkDown && end.is_some_and(|e| now_ns >= e) {
                *phase = 2;
                out.push(Happening::LinkUp);
            }
        }
        out
    }

    /// When the next event rule is due (ns since open).
    pub fn next_event(&self) -> Option<u64> {
        let st = lock(&self.state);
        (st.events.iter())
            .filter_map(|(r, phase)| match phase {
                0 => Some(r.after_ns),
                1 if r.event == Event::LinkDown => r.for_ns.map(|d| r.after_ns.saturating_add(d)),
                _ => None,
            })
            .min()
    }

    /// Counts QPs put in ERR by an event rule.
    pub fn count_qp_fatal(&self, n: u64) {
        self.counts[11].fetch_add(n, Ordering::Relaxed);
    }

    /// The verdict on one packet at `now_ns` (since the device opened),
    /// counted as injected.
    pub fn judge(&self, p: PacketInfo, now_ns: u64) -> Verdict {
        let mut v = Verdict::default();
        if !self.link_down.is_empty() && self.link_down(now_ns) {
            self.counts[9].fetch_add(1, Ordering::Relaxed);
            v.drop = true;
            return v;
        }
        let mut st = lock(&self.state);
        let room = st.held.len() < limits::HELD;
        for (r, s) in &mut st.packets {
            if !matches(r, &p, now_ns) || !s.fires(&r.trigger) {
                continue;
            }
            match r.fault {
                PacketFault::Drop => v.drop = true,
                PacketFault::CorruptIcrc => v.corrupt = true,
                PacketFault::Dup => v.dup = true,
                PacketFault::Ce => v.ce = true,
                PacketFault::Reorder { depth } if room && v.hold.is_none() => {
                    v.hold = Some((now_ns.saturating_add(REORDER_WAIT_NS), depth));
                }
                PacketFault::Delay { ns } if room && v.hold.is_none() => {
                    v.hold = Some((now_ns.saturating_add(ns), u32::MAX));
                }
                PacketFault::Reorder { .. } | PacketFault::Delay { .. } => {}
                PacketFault::Rnr if v.answer.is_none() => {
                    v.answer = Some(Answer::Rnr);
                }
                PacketFault::Nak(n) if v.answer.is_none() => {
                    v.answer = Some(Answer::Nak(nak_code(n)));
                }
                PacketFault::Rnr | PacketFault::Nak(_) => {}
            }
        }
        drop(st);
        if v.drop || v.corrupt {
            v = Verdict {
                drop: v.drop,
                corrupt: !v.drop,
                ..Verdict::default()
            };
        }
        let c = |i: usize, on: bool| {
            if on {
                self.counts[i].fetch_add(1, Ordering::Relaxed);
            }
        };
        c(0, v.drop);
        c(1, v.dup);
        c(2, v.hold.is_some_and(|h| h.1 != u32::MAX));
        c(3, v.corrupt);
        c(4, v.hold.is_some_and(|h| h.1 == u32::MAX));
        c(5, v.ce);
        c(7, v.answer == Some(Answer::Rnr));
        c(8, matches!(v.answer, Some(Answer::Nak(_))));
        v
    }

    /// Keeps a packet held back (see [`Verdict::hold`]).
    pub fn hold(&self, h: Held) {
        lock(&self.state).held.push_back(h);
    }

    /// The held packets due at `now_ns`: with `passed`, only those of that
    /// direction, after one more packet of it went by (a packet's own
    /// direction's path releases them, so a transmit, which holds its
    /// QP's engine, never delivers); without, every one whose time came.
    pub fn due(&self, passed: Option<Dir>, now_ns: u64) -> Vec<Held> {
        let mut st = lock(&self.state);
        if st.held.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut i = 0;
        while i < st.held.len() {
            let h = &mut st.held[i];
            if passed.is_some_and(|d| d != h.dir) {
                i += 1;
                continue;
            }
            if passed.is_some() && h.after != u32::MAX {
                h.after = h.after.saturating_sub(1);
            }
            if h.after == 0 || h.due_ns <= now_ns {
                if let Some(h) = st.held.remove(i) {
                    out.push(h);
                }
            } else {
                i += 1;
            }
        }
        out
    }

    /// When the next held packet is due (ns since open).
    pub fn next_due(&self) -> Option<u64> {
        lock(&self.state).held.iter().map(|h| h.due_ns).min()
    }

    /// Whether this call of `verb` fails, and with which errno (counted).
    pub fn fail(&self, verb: Verb) -> Option<Errno> {
        let mut st = lock(&self.state);
        let mut out = None;
        for (r, s) in &mut st.verbs {
            if r.verb == verb && s.fires(&r.trigger) && out.is_none() {
                out = Some(r.errno);
            }
        }
        if out.is_some() {
            self.counts[6].fetch_add(1, Ordering::Relaxed);
        }
        out
    }

    /// The faults injected so far.
    pub fn counts(&self) -> FaultCounts {
        let c = |i: usize| self.counts[i].load(Ordering::Relaxed);
        FaultCounts {
            drop: c(0),
            dup: c(1),
            reorder: c(2),
            corrupt: c(3),
            delay: c(4),
            ce: c(5),
            fail: c(6),
            rnr: c(7),
            nak: c(8),
            link_drop: c(9),
            link_down: c(10),
            qp_fatal: c(11),
            device_fatal: c(12),
        }
    }
}

/// Whether BTH opcode `op` is an RC request (SEND, WRITE, READ request,
/// atomic): what a responder answers.
fn is_rc_request(op: u8) -> bool {
    op < 0x20 && matches!(op, 0x00..=0x0c | 0x13 | 0x14 | 0x16 | 0x17)
}

/// The AETH code of a `nak` rule.
fn nak_code(n: Nak) -> NakCode {
    match n {
        Nak::PsnSeq => NakCode::PsnSequenceError,
        Nak::InvReq => NakCode::InvalidRequest,
        Nak::RemAccess => NakCode::RemoteAccessError,
        Nak::RemOp => NakCode::RemoteOperationalError,
    }
}

/// Whether rule `r` looks at packet `p` at `now_ns`.
fn matches(r: &PacketRule, p: &PacketInfo, now_ns: u64) -> bool {
    (r.dir == Dir::Both || r.dir == p.dir)
        && r.qp.map_or(true, |q| q == p.qp)
        && r.opcode.map_or(true, |o| o.matches(p.opcode))
        && (!matches!(r.fault, PacketFault::Rnr | PacketFault::Nak(_)) || is_rc_request(p.opcode))
        && r.psn.map_or(true, |(a, b)| (a..=b).contains(&p.psn))
        && now_ns >= r.after_ns
        && r.for_ns
            .map_or(true, |d| now_ns < r.after_ns.saturating_add(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traffic(n: u32) -> impl Iterator<Item = PacketInfo> {
        (0..n).map(|i| PacketInfo {
            dir: if i % 3 == 0 { Dir::Tx } else { Dir::Rx },
            qp: 17 + i % 2,
            opcode: [0x04, 0x0a, 0x11, 0x0c][(i % 4) as usize],
            psn: i,
        })
    }

    fn verdicts(spec: &str) -> Vec<Verdict> {
        let inj = Injector::new(&Plan::parse(spec).unwrap());
        traffic(5000)
            .enumerate()
            .map(|(i, p)| inj.judge(p, i as u64 * 1000))
            .collect()
    }

    /// The same plan and the same traffic give the same faults; another
    /// `rng=` gives other faults.
    #[test]
    fn the_same_rng_gives_the_same_faults() {
        let spec = "rng=7; drop p=0.05 dir=both; dup p=0.02; reorder depth=3 p=0.02; \
                    corrupt icrc p=0.01; delay 2ms p=0.1; ce p=0.2";
        let a = verdicts(spec);
        assert_eq!(a, verdicts(spec));
        assert!(a.iter().any(|v| v.drop) && a.iter().any(|v| v.dup));
        assert_ne!(a, verdicts(&spec.replace("rng=7", "rng=8")));
    }

    /// A rule's faults do not depend on the rules around it.
    #[test]
    fn a_rules_schedule_is_its_own() {
        let alone: Vec<bool> = verdicts("rng=3; drop p=0.1")
            .iter()
            .map(|v| v.drop)
            .collect();
        let with: Vec<bool> = verdicts("rng=3; drop p=0.1; ce p=0.5")
            .iter()
            .map(|v| v.drop)
            .collect();
        assert_eq!(alone, with);
    }

    #[test]
    fn scope_and_triggers_pick_the_packets() {
        let v = verdicts("drop qp=18 opcode=write psn=100-200 every=2 count=5");
        let hit: Vec<u32> = (0..5000).filter(|&i| v[i as usize].drop).collect();
        // Rx packets of QP 18 with WRITE opcodes are i ≡ 1 mod 4 and not
        // ≡ 0 mod 3: 101, 109, 113, 121, 125, 133, ...; every second one.
        assert_eq!(hit, [109, 121, 133, 145, 157]);
        let v = verdicts("dup dir=tx nth=4 count=2");
        let hit: Vec<usize> = (0..5000).filter(|&i| v[i].dup).collect();
        assert_eq!(hit, [9, 12], "the 4th and 5th sent");
        let v = verdicts("ce after=1ms for=2us");
        let hit: Vec<usize> = (0..5000).filter(|&i| v[i].ce).collect();
        assert_eq!(hit, [1000, 1001]);
        // A quarter of the 3333 received packets.
        let n = verdicts("drop p=0.25").iter().filter(|v| v.drop).count();
        assert!((700..970).contains(&n), "{n}");
    }

    #[test]
    fn held_packets_come_back_by_turn_or_by_time() {
        let inj = Injector::new(&Plan::parse("reorder depth=2 nth=1; delay 1ms nth=2").unwrap());
        let a = SocketAddrV4::new([127, 0, 0, 1].into(), 1);
        let p = |psn| PacketInfo {
            dir: Dir::Rx,
            qp: 1,
            opcode: 4,
            psn,
        };
        let v = inj.judge(p(0), 0);
        let h = v.hold.unwrap();
        inj.hold(Held::new(Dir::Rx, &[0], a, 0, h));
        let v = inj.judge(p(1), 0);
        inj.hold(Held::new(Dir::Rx, &[1], a, 0, v.hold.unwrap()));
        assert!(
            inj.due(Some(Dir::Tx), 2_000_000).is_empty(),
            "not its direction, even when due"
        );
        assert!(inj.due(Some(Dir::Rx), 10).is_empty());
        let back = inj.due(Some(Dir::Rx), 10);
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].bytes, [0]);
        assert_eq!(inj.next_due(), Some(1_000_000));
        assert_eq!(inj.due(None, 1_000_000)[0].bytes, [1]);
        let c = inj.counts();
        assert_eq!((c.reorder, c.delay), (1, 1));
    }

    #[test]
    fn the_nth_call_fails_with_its_errno() {
        let inj = Injector::new(&Plan::parse("fail create_qp nth=3 errno=ENOSPC").unwrap());
        let got: Vec<_> = (0..6).map(|_| inj.fail(Verb::CreateQp)).collect();
        assert_eq!(got, [None, None, Some(Errno::ENOSPC), None, None, None]);
        assert_eq!(inj.fail(Verb::RegMr), None);
        assert_eq!(inj.counts().fail, 1);
    }

    #[test]
    fn a_link_down_loses_everything_and_comes_back() {
        let inj = Injector::new(&Plan::parse("link down after=1ms for=2ms").unwrap());
        assert!(inj.has_packet_rules());
        let p = |dir| PacketInfo {
            dir,
            qp: 1,
            opcode: 4,
            psn: 0,
        };
        assert!(inj.judge(p(Dir::Rx), 999_999).is_pass());
        assert!(inj.judge(p(Dir::Tx), 1_000_000).drop);
        assert!(inj.judge(p(Dir::Rx), 2_999_999).drop);
        assert!(inj.judge(p(Dir::Rx), 3_000_000).is_pass());
        assert_eq!(inj.next_event(), Some(1_000_000));
        assert!(inj.events_due(999_999).is_empty());
        assert_eq!(inj.events_due(1_500_000), [Happening::LinkDown]);
        assert_eq!(inj.next_event(), Some(3_000_000));
        assert_eq!(inj.events_due(3_000_000), [Happening::LinkUp]);
        assert_eq!(inj.next_event(), None);
        assert!(inj.events_due(u64::MAX).is_empty(), "each once");
        let c = inj.counts();
        assert_eq!((c.link_drop, c.link_down), (2, 1));
        // Late: both at once, in order.
        let inj = Injector::new(&Plan::parse("link down after=1ms for=2ms").unwrap());
        assert_eq!(
            inj.events_due(5_000_000),
            [Happening::LinkDown, Happening::LinkUp]
        );
    }

    #[test]
    fn rnr_and_nak_answer_requests_only() {
        let v = verdicts("rnr count=2");
        // Received RC requests: SEND (0x04), WRITE (0x0a), READ (0x0c);
        // the ACK (0x11) is not one and does not use the count up.
        let hit: Vec<usize> = (0..5000).filter(|&i| v[i].answer.is_some()).collect();
        assert_eq!(hit, [1, 4], "i = 2 is an ACK, i = 3 sent");
        assert_eq!(v[1].answer, Some(Answer::Rnr));
        let v = verdicts("nak rem_op opcode=read nth=1");
        let hit: Vec<usize> = (0..5000).filter(|&i| v[i].answer.is_some()).collect();
        assert_eq!(hit, [7]);
        assert_eq!(
            v[7].answer,
            Some(Answer::Nak(NakCode::RemoteOperationalError))
        );
        let inj = Injector::new(&Plan::parse("rnr; nak inv_req").unwrap());
        let send = PacketInfo {
            dir: Dir::Rx,
            qp: 1,
            opcode: 4,
            psn: 0,
        };
        assert_eq!(inj.judge(send, 0).answer, Some(Answer::Rnr), "the first");
        let c = inj.counts();
        assert_eq!((c.rnr, c.nak), (1, 0));
    }
}
