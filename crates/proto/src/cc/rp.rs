//! The reaction point of one QP: DCQCN's rate state (current rate Rc,
//! target Rt, α, the byte and time stages) and the pacer that holds the
//! QP's packets to Rc.
//!
//! An unthrottled QP (no CNP since it last ran at the ceiling) has no
//! state at all: [`ReactionPoint::ready`] answers "go" without reading the
//! time, and [`ReactionPoint::sent`] returns at once. The first CNP sets
//! Rc to the ceiling and cuts it; from then on:
//!
//! * **CNP** — α is first decayed for every whole α period
//!   (`rp_dce_tcp_rtt`) that passed without a CNP, α := α·G/1024 (G =
//!   `rp_dce_tcp_g`); then, once per α period, α := α·G/1024 + (1024 −
//!   G). If no cut happened in the last `rp_rate_reduce_monitor_period`,
//!   the target clamps (Rt := Rc if `rp_clamp_tgt_rate`, or if
//!   `rp_clamp_tgt_rate_ati` and the timer raised the rate since the last
//!   CNP) and Rc := max(Rc·(1 − α/2^gd), Rc·min_dec_fac/100, min_rate).
//!   The stages and the byte count restart, and the increase timer
//!   restarts at the CNP.
//! * **Increase events** — every `rp_time_reset` µs (time stage + 1) and
//!   every `rp_byte_reset` bytes sent (byte stage + 1): with F =
//!   `rp_threshold`, both stages below F is fast recovery (Rc := (Rt +
//!   Rc)/2), one below F additive increase (Rt += ai_rate first), both at
//!   or above F hyper increase (Rt += hai_rate·(min stage − F + 1)).
//!   Rt never exceeds the ceiling; when Rc reaches it the QP is
//!   unthrottled again and its next CNP is a first CNP.
//!
//! No timer of its own: the time-driven events (increase timer, α decay)
//! are computed from the elapsed time when the QP next asks to send or
//! next gets a CNP, exactly as if they had fired on time (an idle QP costs
//! nothing). At most [`MAX_EVENTS`] increase events are computed per call,
//! so a QP idle for hours under a tiny `rp_time_reset` catches up over
//! several packets instead of stalling one.
//!
//! The pacer is a token bucket filled at Rc. A packet may leave when the
//! bucket is not in debt; its bytes are then charged, so the bucket may
//! go into debt by one packet (any packet can leave, whatever its size
//! against the burst). Idle time banks at most [`BURST`] of sending at Rc:
//! enough that a driver woken a few tens of µs late by its timer still
//! averages Rc, small enough that a burst after idle adds at most 50 µs of
//! Rc plus one packet to the bottleneck's queue.

use core::time::Duration;

use super::params::{Params, Rate};
use crate::time::Instant;

/// Sending time the pacer banks while idle, at the current rate.
pub const BURST: Duration = Duration::from_micros(50);

/// Increase events computed per call at most.
pub const MAX_EVENTS: u32 = 4096;

/// The reaction point of one QP (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReactionPoint {
    /// `None` while unthrottled.
    s: Option<Throttled>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Throttled {
    /// Current rate Rc, kb/s.
    rc: u64,
    /// Target rate Rt, kb/s.
    rt: u64,
    /// α in 1/1024.
    alpha: u32,
    /// Until then α was already raised for this α period.
    bump_until: Instant,
    /// End of the first α period that decays α (no CNP in it).
    alpha_next: Instant,
    /// The last cut.
    last_cut: Instant,
    /// The last increase-timer event (or the last CNP).
    timer_at: Instant,
    time_stage: u32,
    byte_stage: u32,
    /// Bytes sent since the last byte event.
    bytes: u64,
    /// The timer raised the rate since the last CNP.
    timer_raised: bool,
    /// Token bucket, in µbit (1e-6 bit: ns × kb/s); may be negative.
    tokens: i64,
    /// When the bucket was last filled.
    tokens_at: Instant,
}

/// The rate the QP runs at when unthrottled: `rp_max_rate`, or the line
/// rate when it is 0 or higher; never below `rp_min_rate`.
pub fn ceiling(p: &Params, line: Rate) -> Rate {
    let line = line.kbps().max(1);
    let c = match p.rp_max_rate.kbps() {
        0 => line,
        m => m.min(line),
    };
    Rate::from_kbps(c.max(p.rp_min_rate.kbps()))
}

fn us(v: u32) -> Duration {
    Duration::from_micros(u64::from(v))
}

/// Whole `period`s from `from` to `to`.
fn periods(from: Instant, to: Instant, period: Duration) -> u64 {
    let p = period.as_nanos().max(1);
    u64::try_from((to - from).as_nanos() / p).unwrap_or(u64::MAX)
}

/// α·(G/1024)^n, in 1/1024, computed in 32-bit fixed point.
fn decay(alpha: u32, g: u32, n: u64) -> u32 {
    let mut f: u64 = u64::from(g.min(1024)) << 22; // G/1024 in Q32
    let mut r: u64 = 1 << 32;
    let mut n = n;
    while n > 0 && r > 0 {
        if n & 1 == 1 {
            r = (r * f) >> 32;
        }
        f = (f * f) >> 32;
        n >>= 1;
    }
    ((u64::from(alpha) * r) >> 32) as u32
}

impl ReactionPoint {
    /// An unthrottled reaction point.
    pub fn new() -> ReactionPoint {
        ReactionPoint::default()
    }

    /// Whether a CNP limits the QP now (false: it sends at will).
    pub fn throttled(&self) -> bool {
        self.s.is_some()
    }

    /// The current rate Rc, `None` while unthrottled (the ceiling).
    pub fn rate(&self) -> Option<Rate> {
        self.s.as_ref().map(|s| Rate::from_kbps(s.rc))
    }

    /// The target rate Rt, `None` while unthrottled.
    pub fn target(&self) -> Option<Rate> {
        self.s.as_ref().map(|s| Rate::from_kbps(s.rt))
    }

    /// α in 1/1024 (as of the last CNP), `None` while unthrottled.
    pub fn alpha(&self) -> Option<u32> {
        self.s.as_ref().map(|s| s.alpha)
    }

    /// A CNP for this QP arrived at `now`; `line` is the port's rate.
    pub fn on_cnp(&mut self, p: &Params, line: Rate, now: Instant) {
        self.advance(p, line, now);
        let ceil = ceiling(p, line).kbps();
        let rtt = us(p.rp_dce_tcp_rtt.max(1));
        let Some(s) = &mut self.s else {
            let first = p.rp_rate_to_set_on_first_cnp.kbps();
            let alpha = p.rp_initial_alpha_value.min(1024);
            let rc = if first > 0 {
                first.clamp(p.rp_min_rate.kbps(), ceil)
            } else {
                cut(p, ceil, ceil, alpha)
            };
            self.s = Some(Throttled {
                rc,
                rt: ceil,
                alpha,
                bump_until: now + rtt,
                alpha_next: now + rtt + rtt,
                last_cut: now,
                timer_at: now,
                time_stage: 0,
                byte_stage: 0,
                bytes: 0,
                timer_raised: false,
                tokens: 0,
                tokens_at: now,
            });
            return;
        };
        s.refill(now);
        let g = p.rp_dce_tcp_g.min(1023);
        if now >= s.alpha_next {
            let n = 1 + periods(s.alpha_next, now, rtt);
            s.alpha = decay(s.alpha, g, n);
            s.alpha_next = s.alpha_next + rtt * u32::try_from(n).unwrap_or(u32::MAX);
        }
        if now >= s.bump_until {
            s.alpha = (s.alpha * g) / 1024 + (1024 - g);
            s.bump_until = now + rtt;
            s.alpha_next = now + rtt + rtt;
        }
        if now >= s.last_cut + us(p.rp_rate_reduce_monitor_period) {
            if p.rp_clamp_tgt_rate || (p.rp_clamp_tgt_rate_ati && s.timer_raised) {
                s.rt = s.rc;
            }
            s.rc = cut(p, ceil, s.rc, s.alpha);
            s.last_cut = now;
            s.cap_tokens();
        }
        s.timer_raised = false;
        s.time_stage = 0;
        s.byte_stage = 0;
        s.bytes = 0;
        s.timer_at = now;
    }

    /// May a packet leave at `now`? `Ok` if so (then call
    /// [`ReactionPoint::sent`] with its length), otherwise the time it
    /// may. Unthrottled: `Ok` at once, without reading `now`.
    ///
    /// # Errors
    /// The instant the pacer lets the next packet go.
    pub fn ready(
        &mut self,
        p: &Params,
        line: Rate,
        now: impl FnOnce() -> Instant,
    ) -> Result<(), Instant> {
        if self.s.is_none() {
            return Ok(());
        }
        let now = now();
        self.advance(p, line, now);
        let Some(s) = &mut self.s else {
            return Ok(());
        };
        s.refill(now);
        if s.tokens >= 0 {
            return Ok(());
        }
        let wait = s.tokens.unsigned_abs().div_ceil(s.rc.max(1));
        Err(now + Duration::from_nanos(wait))
    }

    /// A packet of `len` bytes left at `now` (after [`ReactionPoint::ready`]
    /// said it may): charged to the bucket and counted for byte events.
    /// Unthrottled: nothing to do, and `now` is not read.
    pub fn sent(&mut self, p: &Params, line: Rate, len: usize, now: impl FnOnce() -> Instant) {
        let Some(s) = &mut self.s else {
            return;
        };
        s.refill(now());
        let bits = (len as i64).saturating_mul(8_000_000);
        s.tokens = s.tokens.saturating_sub(bits);
        let b = u64::from(p.rp_byte_reset);
        if b == 0 {
            return;
        }
        s.bytes = s.bytes.saturating_add(len as u64);
        let ceil = ceiling(p, line).kbps();
        let mut n = 0;
        while s.bytes >= b && n < MAX_EVENTS {
            n += 1;
            s.bytes -= b;
            s.byte_stage = s.byte_stage.saturating_add(1);
            s.increase(p, ceil);
            if s.rc >= ceil {
                self.s = None;
                return;
            }
        }
    }

    /// Runs the increase timer's events due by `now`.
    fn advance(&mut self, p: &Params, line: Rate, now: Instant) {
        let t = us(p.rp_time_reset.max(1));
        let ceil = ceiling(p, line).kbps();
        let mut n = 0;
        while let Some(s) = &mut self.s {
            let due = s.timer_at + t;
            if now < due || n == MAX_EVENTS {
                return;
            }
            n += 1;
            s.refill(due);
            s.timer_at = due;
            s.time_stage = s.time_stage.saturating_add(1);
            s.timer_raised = true;
            s.increase(p, ceil);
            if s.rc >= ceil {
                self.s = None;
            }
        }
    }
}

/// Rc after a cut with `alpha`, within the floors and the ceiling.
fn cut(p: &Params, ceil: u64, rc: u64, alpha: u32) -> u64 {
    let dec = (u128::from(rc) * u128::from(alpha)) >> p.rp_gd.min(63);
    let new = rc.saturating_sub(u64::try_from(dec).unwrap_or(u64::MAX));
    let floor = rc / 100 * u64::from(p.rp_min_dec_fac.min(100))
        + rc % 100 * u64::from(p.rp_min_dec_fac.min(100)) / 100;
    new.max(floor).max(p.rp_min_rate.kbps()).min(ceil)
}

impl Throttled {
    /// One increase event (the stage that fired is already counted).
    fn increase(&mut self, p: &Params, ceil: u64) {
        let f = p.rp_threshold;
        let (ts, bs) = (self.time_stage, self.byte_stage);
        if ts < f && bs < f {
            // fast recovery: towards the target
        } else if ts < f || bs < f {
            self.rt = self.rt.saturating_add(p.rp_ai_rate.kbps());
        } else {
            let k = u64::from(ts.min(bs) - f + 1);
            self.rt = self
                .rt
                .saturating_add(p.rp_hai_rate.kbps().saturating_mul(k));
        }
        self.rt = self.rt.min(ceil);
        let mid = (self.rt + self.rc).div_ceil(2);
        self.rc = self.rc.max(mid).clamp(p.rp_min_rate.kbps().min(ceil), ceil);
    }

    /// Fills the bucket at Rc up to `now`.
    fn refill(&mut self, now: Instant) {
        if now <= self.tokens_at {
            return;
        }
        let ns = (now - self.tokens_at).as_nanos().min(1_000_000_000) as i64;
        self.tokens = self
            .tokens
            .saturating_add(ns.saturating_mul(self.rc as i64));
        self.tokens_at = now;
        self.cap_tokens();
    }

    /// At most [`BURST`] of sending at Rc banked.
    fn cap_tokens(&mut self) {
        let cap = (BURST.as_nanos() as i64).saturating_mul(self.rc as i64);
        self.tokens = self.tokens.min(cap);
    }
}

#[cfg(test)]
#[path = "rp_tests.rs"]
mod tests;
