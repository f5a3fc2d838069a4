//! Faults on purpose: the one fault mechanism of the soft NIC.
//!
//! A [`Plan`] says which faults the device injects: packet faults (drop,
//! duplicate, reorder, corrupt ICRC, delay, CE mark) applied between the
//! engine and the wire, verb failures (the Nth `create_qp`, `reg_mr`,
//! `create_cq` or post fails with a chosen errno) and the errno a create
//! verb returns once a device limit is reached. It is read from
//! `RDMAKIT_SOFT_FAULTS` (grammar in docs/fault-injection.md, parser in
//! [`Plan::parse`]) or built in code, and fixed when the device opens.
//!
//! What is pure lives here and in [`Injector`]: the grammar, the rules'
//! matching, and each rule's schedule, a splitmix64 stream from the plan's
//! `rng` and the rule's position. The same plan and the same sequence of
//! packets and calls give the same faults; the device only supplies the
//! packets, the calls and the time since it opened.
//!
//! Why here and not in `proto`: a fault acts on the link (or on the
//! driver), not in the transport; the engine sees exactly what a real
//! one would, and its retransmission, NAK and duplicate handling are what
//! the faults test.
//!
//! ```
//! use rdmakit_soft::faults::Plan;
//! let p = Plan::parse("rng=7; drop p=0.05 dir=rx opcode=write; fail create_qp nth=3 errno=ENOSPC")
//!     .unwrap();
//! assert_eq!(p.to_string(), "rng=7; drop dir=rx opcode=write p=0.05; fail create_qp nth=3 errno=ENOSPC");
//! assert!(Plan::parse("drop p=2").unwrap_err().to_string().contains("column 6"));
//! ```

mod parse;
mod stage;

use core::fmt;

pub use parse::ParseError;
pub use stage::{FaultCounts, Happening, Held, Injector, PacketInfo, Verdict};

use crate::errno::Errno;

/// The variable a plan is read from.
pub const VAR: &str = "RDMAKIT_SOFT_FAULTS";

/// Bounds the grammar enforces (so a plan's cost is bounded too).
pub mod limits {
    /// Characters in a specification.
    pub const SPEC_LEN: usize = 4096;
    /// Items (rules and settings).
    pub const ITEMS: usize = 32;
    /// `every=` and `nth=`.
    pub const EVERY: u64 = 1_000_000_000;
    /// `count=`.
    pub const COUNT: u64 = 1_000_000_000_000;
    /// `reorder depth=`.
    pub const DEPTH: u32 = 64;
    /// `delay` (ns): 10 s.
    pub const DELAY_NS: u64 = 10_000_000_000;
    /// `after=` and `for=` (ns): one day.
    pub const WINDOW_NS: u64 = 86_400_000_000_000;
    /// Packets held back (delayed or reordered) at once; beyond it a
    /// packet passes unharmed.
    pub const HELD: usize = 4096;
    /// Largest PSN and QP number (24 bits).
    pub const PSN: u32 = 0xff_ffff;
}

/// A fault plan: empty (the default) injects nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Where every rule's random stream starts (`rng=N`); 0 when not given.
    pub rng: u64,
    /// The errno a create verb returns once a device limit is reached
    /// (`exhaust errno=ENOSPC`); None: EINVAL, as rxe.
    pub exhaust: Option<Errno>,
    /// Packet rules, in order.
    pub packets: Vec<PacketRule>,
    /// Verb failure rules, in order.
    pub verbs: Vec<VerbRule>,
    /// Port and device events, in order.
    pub events: Vec<EventRule>,
}

/// What a packet rule does to a packet it fires on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketFault {
    /// Lost.
    Drop,
    /// Delivered twice.
    Dup,
    /// Held back until `depth` later packets (of its direction) passed.
    Reorder {
        /// Packets that overtake it, 1..=[`limits::DEPTH`].
        depth: u32,
    },
    /// Its ICRC made wrong: the receiver drops it and counts an ICRC error.
    CorruptIcrc,
    /// Held back `ns` nanoseconds.
    Delay {
        /// The delay, 1..=[`limits::DELAY_NS`].
        ns: u64,
    },
    /// Marked Congestion Experienced (ECN CE).
    Ce,
    /// A request the responder answers with an RNR NAK, as if its receive
    /// queue were empty (RC requests only).
    Rnr,
    /// A request the responder answers with this NAK (RC requests only).
    Nak(Nak),
}

/// The NAK a `nak` rule makes the responder answer with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nak {
    /// PSN sequence error: the requester goes back to the NAKed PSN.
    PsnSeq,
    /// Invalid request: `IBV_WC_REM_INV_REQ_ERR`, both QPs to ERR.
    InvReq,
    /// Remote access error: `IBV_WC_REM_ACCESS_ERR`, both QPs to ERR.
    RemAccess,
    /// Remote operational error: `IBV_WC_REM_OP_ERR`, both QPs to ERR.
    RemOp,
}

impl Nak {
    const NAMES: [(&'static str, Nak); 4] = [
        ("psn_seq", Nak::PsnSeq),
        ("inv_req", Nak::InvReq),
        ("rem_access", Nak::RemAccess),
        ("rem_op", Nak::RemOp),
    ];

    /// The grammar's name.
    pub fn name(self) -> &'static str {
        Nak::NAMES
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("?", |(n, _)| n)
    }
}

/// A port or device event a rule makes happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Port 1's link goes down (`IBV_EVENT_PORT_ERR`, the port DOWN, every
    /// packet lost both ways) and, at the window's end, up again
    /// (`IBV_EVENT_PORT_ACTIVE`).
    LinkDown,
    /// QPs go to ERR with `IBV_EVENT_QP_FATAL`.
    QpFatal,
    /// The device fails: `IBV_EVENT_DEVICE_FATAL`, every QP to ERR, the
    /// port DOWN for good.
    DeviceFatal,
}

impl Event {
    const NAMES: [(&'static str, Event); 3] = [
        ("link", Event::LinkDown),
        ("qp_fatal", Event::QpFatal),
        ("device_fatal", Event::DeviceFatal),
    ];

    /// The grammar's name (`link down` for [`Event::LinkDown`]).
    pub fn name(self) -> &'static str {
        match self {
            Event::LinkDown => "link down",
            Event::QpFatal => "qp_fatal",
            Event::DeviceFatal => "device_fatal",
        }
    }
}

/// An event rule: what happens, when (since the device opened) and, for
/// `qp_fatal`, to which QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRule {
    /// The event.
    pub event: Event,
    /// The local QP (`qp_fatal` only; None: every QP then open).
    pub qp: Option<u32>,
    /// When it happens (ns after the device opened).
    pub after_ns: u64,
    /// `link down`: how long the link stays down (None: for good).
    pub for_ns: Option<u64>,
}

/// Which packets a rule looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Those this device receives (the default: every packet between two
    /// soft devices is judged once).
    Rx,
    /// Those this device sends.
    Tx,
    /// Both.
    Both,
}

/// Which opcodes a rule looks at: a class of BTH opcodes or one opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    /// SEND first/middle/last/only, with immediate or invalidate.
    Send,
    /// RDMA WRITE, any part, with or without immediate.
    Write,
    /// RDMA READ requests.
    Read,
    /// RDMA READ responses.
    ReadResp,
    /// ACKs and NAKs, atomic ACKs included.
    Ack,
    /// Compare-and-swap and fetch-and-add requests.
    Atomic,
    /// Congestion notification packets.
    Cnp,
    /// This BTH opcode exactly.
    Code(u8),
}

impl Opcode {
    const NAMES: [(&'static str, Opcode); 7] = [
        ("send", Opcode::Send),
        ("write", Opcode::Write),
        ("read", Opcode::Read),
        ("read_resp", Opcode::ReadResp),
        ("ack", Opcode::Ack),
        ("atomic", Opcode::Atomic),
        ("cnp", Opcode::Cnp),
    ];

    /// Whether BTH opcode `op` is of this class.
    pub fn matches(self, op: u8) -> bool {
        if let Opcode::Code(c) = self {
            return c == op;
        }
        if op == 0x81 {
            return self == Opcode::Cnp;
        }
        if op >= 0x80 {
            return false;
        }
        match op & 0x1f {
            0x00..=0x05 | 0x16 | 0x17 => self == Opcode::Send,
            0x06..=0x0b => self == Opcode::Write,
            0x0c => self == Opcode::Read,
            0x0d..=0x10 => self == Opcode::ReadResp,
            0x11 | 0x12 => self == Opcode::Ack,
            0x13 | 0x14 => self == Opcode::Atomic,
            _ => false,
        }
    }
}

/// When a rule fires on what it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Every time.
    Always,
    /// With probability `ppm` parts per million (`p=0.05`: 50000).
    P(u32),
    /// Every Nth match (the Nth, 2Nth, ...).
    Every(u64),
    /// The Nth match (and, with a count, the ones after it).
    Nth(u64),
}

/// How often a rule fires: when, and at most how many times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trigger {
    /// When.
    pub when: When,
    /// At most this many times (None: no limit, except `nth` alone: once).
    pub count: Option<u64>,
}

/// A packet rule: a fault, the packets it looks at, when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketRule {
    /// The fault.
    pub fault: PacketFault,
    /// Direction.
    pub dir: Dir,
    /// The local QP (the destination QP of a received packet, the sender's
    /// QP of a sent one).
    pub qp: Option<u32>,
    /// Opcode class.
    pub opcode: Option<Opcode>,
    /// PSN range, inclusive.
    pub psn: Option<(u32, u32)>,
    /// Active from this long after the device opened (ns).
    pub after_ns: u64,
    /// Active this long from then (ns); None: for ever.
    pub for_ns: Option<u64>,
    /// When it fires.
    pub trigger: Trigger,
}

/// The verbs a verb rule can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// `ibv_create_qp`.
    CreateQp,
    /// `ibv_reg_mr` (and its variants).
    RegMr,
    /// `ibv_create_cq`.
    CreateCq,
    /// Every post (send, receive, SRQ receive): its descriptor's DMA
    /// mapping fails, ENOMEM.
    Post,
}

impl Verb {
    const NAMES: [(&'static str, Verb); 4] = [
        ("create_qp", Verb::CreateQp),
        ("reg_mr", Verb::RegMr),
        ("create_cq", Verb::CreateCq),
        ("post", Verb::Post),
    ];

    /// The grammar's name.
    pub fn name(self) -> &'static str {
        Verb::NAMES
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("?", |(n, _)| n)
    }
}

/// A verb rule: the verb, when it fails, and with which errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerbRule {
    /// The verb.
    pub verb: Verb,
    /// When it fails.
    pub trigger: Trigger,
    /// The errno (ENOMEM unless given; always ENOMEM for `post`).
    pub errno: Errno,
}

impl Plan {
    /// Whether the plan injects nothing at all.
    pub fn is_empty(&self) -> bool {
        self.exhaust.is_none()
            && self.packets.is_empty()
            && self.verbs.is_empty()
            && self.events.is_empty()
    }

    /// Parses a specification (the grammar of docs/fault-injection.md).
    ///
    /// # Errors
    /// [`ParseError`], naming the item and the column where it went wrong.
    pub fn parse(spec: &str) -> Result<Plan, ParseError> {
        parse::parse(spec)
    }
}

impl core::str::FromStr for Plan {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Plan, ParseError> {
        Plan::parse(s)
    }
}

/// A duration in the largest unit that writes it exactly.
struct Dur(u64);

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, ns) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
            if self.0 != 0 && self.0 % ns == 0 {
                return write!(f, "{}{unit}", self.0 / ns);
            }
        }
        write!(f, "{}ns", self.0)
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.when {
            When::Always => {}
            When::P(ppm) => {
                let s = format!("{:06}", ppm % 1_000_000);
                let frac = s.trim_end_matches('0');
                match (ppm / 1_000_000, frac.is_empty()) {
                    (i, true) => write!(f, " p={i}")?,
                    (i, false) => write!(f, " p={i}.{frac}")?,
                }
            }
            When::Every(n) => write!(f, " every={n}")?,
            When::Nth(n) => write!(f, " nth={n}")?,
        }
        match self.count {
            Some(c) => write!(f, " count={c}"),
            None => Ok(()),
        }
    }
}

impl fmt::Display for PacketRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fault {
            PacketFault::Drop => f.write_str("drop")?,
            PacketFault::Dup => f.write_str("dup")?,
            PacketFault::Reorder { depth } => write!(f, "reorder depth={depth}")?,
            PacketFault::CorruptIcrc => f.write_str("corrupt icrc")?,
            PacketFault::Delay { ns } => write!(f, "delay {}", Dur(ns))?,
            PacketFault::Ce => f.write_str("ce")?,
            PacketFault::Rnr => f.write_str("rnr")?,
            PacketFault::Nak(n) => write!(f, "nak {}", n.name())?,
        }
        match self.dir {
            Dir::Rx => f.write_str(" dir=rx")?,
            Dir::Tx => f.write_str(" dir=tx")?,
            Dir::Both => f.write_str(" dir=both")?,
        }
        if let Some(q) = self.qp {
            write!(f, " qp={q}")?;
        }
        match self.opcode {
            Some(Opcode::Code(c)) => write!(f, " opcode=0x{c:02x}")?,
            Some(o) => {
                let name = Opcode::NAMES
                    .iter()
                    .find(|(_, x)| *x == o)
                    .map_or("?", |n| n.0);
                write!(f, " opcode={name}")?;
            }
            None => {}
        }
        match self.psn {
            Some((a, b)) if a == b => write!(f, " psn={a}")?,
            Some((a, b)) => write!(f, " psn={a}-{b}")?,
            None => {}
        }
        if self.after_ns > 0 {
            write!(f, " after={}", Dur(self.after_ns))?;
        }
        if let Some(d) = self.for_ns {
            write!(f, " for={}", Dur(d))?;
        }
        write!(f, "{}", self.trigger)
    }
}

impl fmt::Display for VerbRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fail {}{}", self.verb.name(), self.trigger)?;
        if self.verb != Verb::Post {
            write!(f, " errno={}", self.errno.name())?;
        }
        Ok(())
    }
}

impl fmt::Display for EventRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.event.name())?;
        if let Some(q) = self.qp {
            write!(f, " qp={q}")?;
        }
        if self.after_ns > 0 {
            write!(f, " after={}", Dur(self.after_ns))?;
        }
        if let Some(d) = self.for_ns {
            write!(f, " for={}", Dur(d))?;
        }
        Ok(())
    }
}

/// The canonical text: `rng` first (when not 0), `exhaust`, the packet
/// rules, the verb rules, the event rules, every key written;
/// [`Plan::parse`] reads it back to an equal plan.
impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items = Vec::new();
        if self.rng != 0 {
            items.push(format!("rng={}", self.rng));
        }
        if let Some(e) = self.exhaust {
            items.push(format!("exhaust errno={}", e.name()));
        }
        items.extend(self.packets.iter().map(|r| r.to_string()));
        items.extend(self.verbs.iter().map(|r| r.to_string()));
        items.extend(self.events.iter().map(|r| r.to_string()));
        f.write_str(&items.join("; "))
    }
}
