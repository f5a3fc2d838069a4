//! Request/reply transactions: the window, TIDs, timeouts, retries and reply
//! validation. The loop is written against `Io` (send one MAD, wait for one
//! received MAD), so its rules are tested here with a scripted port and run
//! against libibumad by [`crate::Port`].
//!
//! The rules:
//! - at most `window` requests are outstanding; the next is sent as soon as
//!   one completes;
//! - every attempt gets a fresh TID (low 32 bits unique per port; a kernel
//!   overwrites the high 32 bits with its agent's), written over the
//!   request's TID field, so a late reply to an earlier attempt is still
//!   recognised as belonging to its request but a reply to nothing is not;
//! - an attempt ends when its reply arrives, when the port hands back the
//!   send with a timeout status, or at its own deadline (`timeout` after the
//!   send): whichever comes first. Then it is sent again, up to `retries`
//!   times, and finally fails with [`MadError::Timeout`];
//! - a reply counts only if it is a full 256-byte MAD with the response bit,
//!   the request's class and attribute ID and a TID of one of the request's
//!   attempts; otherwise it is dropped and counted ([`Stats`]). A valid
//!   reply with a nonzero status is [`MadError::Status`].
//!
//! The work is bounded: `window` ≤ [`MAX_WINDOW`], a call handles at most
//! [`MAX_REQUESTS`] (the rest fail as [`MadError::Invalid`] without being
//! sent), and a call returns within about
//! `ceil(n / window) × (retries + 1) × timeout`.

use std::time::{Duration, Instant};

use crate::error::{Error, MadError};

/// Length of a MAD (the only size this crate sends or accepts).
pub const MAD_LEN: usize = 256;
/// The largest window `Policy::window` may ask for.
pub const MAX_WINDOW: usize = 64;
/// The most requests one [`crate::Port::transact`] call handles.
pub const MAX_REQUESTS: usize = 1 << 16;
/// The permissive LID, the destination of a directed-route SMP.
pub const PERMISSIVE_LID: u16 = 0xffff;
/// The well-known Q_Key of QP1 (the GSI: PMA, SA, ...).
pub const GSI_QKEY: u32 = 0x8001_0000;

/// Management class: subnet management, LID-routed.
pub const CLASS_SMI: u8 = 0x01;
/// Management class: subnet management, directed route.
pub const CLASS_SMI_DIRECT: u8 = 0x81;
/// Management class: subnet administration.
pub const CLASS_SA: u8 = 0x03;
/// Management class: performance management.
pub const CLASS_PMA: u8 = 0x04;

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// A LID, a QP (0 for SMPs, 1 for GMPs), its Q_Key and a service level.
    Lid {
        /// Destination LID.
        lid: u16,
        /// Destination QP.
        qp: u32,
        /// Q_Key (0 for QP0, [`GSI_QKEY`] for QP1).
        qkey: u32,
        /// Service level.
        sl: u8,
    },
    /// A directed-route SMP (class 0x81): the permissive LID, QP0; the path
    /// is in the MAD itself.
    Directed,
}

impl Dest {
    /// A LID-routed SMP to `lid` (QP0).
    pub const fn smi(lid: u16) -> Dest {
        Dest::Lid {
            lid,
            qp: 0,
            qkey: 0,
            sl: 0,
        }
    }

    /// A GMP (PMA, SA, ...) to `lid`'s QP1.
    pub const fn gsi(lid: u16) -> Dest {
        Dest::Lid {
            lid,
            qp: 1,
            qkey: GSI_QKEY,
            sl: 0,
        }
    }
}

/// One request: its class, where it goes and its 256 bytes (TID
/// overwritten when sent; the class version is byte 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Management class; must equal the MAD's byte 1.
    pub class: u8,
    /// Destination.
    pub dest: Dest,
    /// The MAD.
    pub mad: [u8; MAD_LEN],
}

impl Request {
    /// A request for `mad`, its class read from the MAD.
    pub fn new(dest: Dest, mad: [u8; MAD_LEN]) -> Request {
        Request {
            class: mad[1],
            dest,
            mad,
        }
    }

    /// Why this request cannot be sent, if it cannot.
    fn invalid(&self) -> Option<&'static str> {
        if self.mad[1] != self.class {
            return Some("the class does not match the MAD's MgmtClass byte");
        }
        if self.mad[0] != 1 {
            return Some("the MAD's BaseVersion is not 1");
        }
        if self.mad[3] & 0x80 != 0 {
            return Some("the method is a response, not a request");
        }
        match (self.class, self.dest) {
            (CLASS_SMI_DIRECT, Dest::Directed) => None,
            (CLASS_SMI_DIRECT, _) | (_, Dest::Directed) => {
                Some("directed route is for class 0x81 only, and class 0x81 needs it")
            }
            (CLASS_SMI, Dest::Lid { qp, .. }) if qp != 0 => Some("an SMP goes to QP0"),
            (_, Dest::Lid { lid: 0, .. }) => Some("LID 0 is not a destination"),
            _ => None,
        }
    }
}

/// How [`crate::Port::transact`] waits and retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Requests outstanding at once (1..=[`MAX_WINDOW`]; 0 counts as 1,
    /// more as [`MAX_WINDOW`]).
    pub window: usize,
    /// How long each attempt waits for its reply.
    pub timeout: Duration,
    /// Attempts after the first.
    pub retries: u32,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            window: 16,
            timeout: Duration::from_millis(200),
            retries: 3,
        }
    }
}

impl Policy {
    fn window(&self) -> usize {
        self.window.clamp(1, MAX_WINDOW)
    }

    fn timeout_ms(&self) -> u64 {
        // At least 1 ms (0 would mean "no tracking" to the kernel); at most
        // an hour, which keeps every Instant sum in range.
        (self.timeout.as_millis() as u64).clamp(1, 3_600_000)
    }
}

/// What a port counted over its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// MADs sent (retries included).
    pub sent: u64,
    /// Valid replies taken.
    pub replies: u64,
    /// Attempts that timed out (and were retried or failed).
    pub timeouts: u64,
    /// Received MADs whose TID matched no outstanding request.
    pub unmatched: u64,
    /// Received MADs whose TID matched but which were not a valid reply
    /// (short, no response bit, another class or attribute).
    pub invalid: u64,
}

/// What one wait for a received MAD gave.
pub(crate) enum Received {
    /// Nothing before the wait ended.
    Nothing,
    /// A MAD: the port's status for it (nonzero: a send handed back, e.g.
    /// `ETIMEDOUT`), its length and its bytes.
    Mad {
        status: i32,
        len: usize,
        mad: Box<[u8; MAD_LEN]>,
    },
}

/// The port below the loop.
pub(crate) trait Io {
    /// Sends `mad` (TID already set) with `timeout_ms` of tracking.
    fn send(&mut self, req: &Request, mad: &[u8; MAD_LEN], timeout_ms: u64) -> Result<(), Error>;
    /// Waits up to `wait` for one received MAD.
    fn recv(&mut self, wait: Duration) -> Result<Received, Error>;
}

/// One outstanding request.
struct Slot {
    index: usize,
    /// The low 32 bits of every attempt's TID, the current one last.
    tids: Vec<u32>,
    deadline: Instant,
}

/// The TID counter and the counters of a port.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub next_tid: u32,
    pub stats: Stats,
}

impl State {
    fn tid(&mut self) -> u32 {
        self.next_tid = self.next_tid.wrapping_add(1);
        if self.next_tid == 0 {
            self.next_tid = 1;
        }
        self.next_tid
    }
}

/// Runs `reqs` through `io` under `policy`.
pub(crate) fn run(
    io: &mut dyn Io,
    state: &mut State,
    reqs: &[Request],
    policy: &Policy,
) -> Vec<Result<[u8; MAD_LEN], MadError>> {
    let mut out: Vec<Option<Result<[u8; MAD_LEN], MadError>>> = vec![None; reqs.len()];
    for r in out.iter_mut().skip(MAX_REQUESTS) {
        *r = Some(Err(MadError::Invalid(
            "more requests than one call handles (65536)",
        )));
    }
    let n = reqs.len().min(MAX_REQUESTS);
    let window = policy.window();
    let timeout_ms = policy.timeout_ms();
    let timing = Timing {
        attempts: policy.retries.saturating_add(1),
        timeout_ms,
        timeout: Duration::from_millis(timeout_ms),
    };
    let mut inflight: Vec<Slot> = Vec::with_capacity(window);
    let mut next = 0;

    loop {
        // Fill the window.
        while inflight.len() < window && next < n {
            let i = next;
            next += 1;
            if let Some(why) = reqs[i].invalid() {
                out[i] = Some(Err(MadError::Invalid(why)));
                continue;
            }
            let mut slot = Slot {
                index: i,
                tids: Vec::new(),
                deadline: Instant::now(),
            };
            match attempt(io, state, &reqs[i], &mut slot, &timing) {
                Ok(()) => inflight.push(slot),
                Err(e) => out[i] = Some(Err(e.into())),
            }
        }
        if inflight.is_empty() {
            break;
        }

        // Attempts past their deadline: retry or fail.
        let now = Instant::now();
        let mut k = 0;
        while k < inflight.len() {
            if inflight[k].deadline <= now {
                if let Some(done) = timed_out(io, state, reqs, &mut inflight[k], &timing) {
                    out[inflight[k].index] = Some(done);
                    inflight.swap_remove(k);
                    continue;
                }
            }
            k += 1;
        }
        let Some(first) = inflight.iter().map(|s| s.deadline).min() else {
            continue;
        };

        // Wait for one MAD, at most until the first deadline.
        let wait = first
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let (status, len, mad) = match io.recv(wait) {
            Ok(Received::Nothing) => continue,
            Ok(Received::Mad { status, len, mad }) => (status, len, mad),
            Err(e) => {
                for s in inflight.drain(..) {
                    out[s.index] = Some(Err(MadError::Port(e.clone())));
                }
                continue;
            }
        };
        let tid = u32::from_be_bytes([mad[12], mad[13], mad[14], mad[15]]);
        let Some(k) = inflight.iter().position(|s| s.tids.contains(&tid)) else {
            state.stats.unmatched += 1;
            continue;
        };
        let req = &reqs[inflight[k].index];
        if status != 0 {
            // The port handed a send back (a timeout): only the current
            // attempt's ends; an earlier attempt's is old news.
            if inflight[k].tids.last() == Some(&tid) {
                if let Some(done) = timed_out(io, state, reqs, &mut inflight[k], &timing) {
                    out[inflight[k].index] = Some(done);
                    inflight.swap_remove(k);
                }
            }
            continue;
        }
        match check_reply(req, len, &mad) {
            Err(()) => state.stats.invalid += 1,
            Ok(st) => {
                state.stats.replies += 1;
                out[inflight[k].index] = Some(if st == 0 {
                    Ok(*mad)
                } else {
                    Err(MadError::Status(st))
                });
                inflight.swap_remove(k);
            }
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or(Err(MadError::Invalid("not sent"))))
        .collect()
}

/// How long an attempt waits for its reply, and how many attempts a request
/// gets.
struct Timing {
    attempts: u32,
    timeout_ms: u64,
    timeout: Duration,
}

/// Sends the next attempt of `slot`'s request with a fresh TID.
fn attempt(
    io: &mut dyn Io,
    state: &mut State,
    req: &Request,
    slot: &mut Slot,
    t: &Timing,
) -> Result<(), Error> {
    let tid = state.tid();
    let mut mad = req.mad;
    mad[8..12].fill(0);
    mad[12..16].copy_from_slice(&tid.to_be_bytes());
    io.send(req, &mad, t.timeout_ms)?;
    state.stats.sent += 1;
    slot.tids.push(tid);
    slot.deadline = Instant::now() + t.timeout;
    Ok(())
}

/// Counts a timed-out attempt, then: `None` when another attempt is under
/// way, or the request's final result.
fn timed_out(
    io: &mut dyn Io,
    state: &mut State,
    reqs: &[Request],
    slot: &mut Slot,
    t: &Timing,
) -> Option<Result<[u8; MAD_LEN], MadError>> {
    state.stats.timeouts += 1;
    if slot.tids.len() as u32 >= t.attempts {
        return Some(Err(MadError::Timeout {
            attempts: t.attempts,
            timeout_ms: t.timeout_ms,
        }));
    }
    match attempt(io, state, &reqs[slot.index], slot, t) {
        Ok(()) => None,
        Err(e) => Some(Err(e.into())),
    }
}

/// A reply to `req` (TID already matched): `Ok(status)` (the D bit of a
/// directed-route SMP masked off), or `Err` for a MAD that is no reply.
fn check_reply(req: &Request, len: usize, mad: &[u8; MAD_LEN]) -> Result<u16, ()> {
    let full = len == MAD_LEN;
    let response = mad[3] & 0x80 != 0;
    let same = mad[1] == req.mad[1] && mad[16..18] == req.mad[16..18];
    if !(full && response && same) {
        return Err(());
    }
    let status = u16::from_be_bytes([mad[4], mad[5]]);
    Ok(if req.class == CLASS_SMI_DIRECT {
        status & 0x7fff
    } else {
        status
    })
}

#[cfg(test)]
mod tests;
