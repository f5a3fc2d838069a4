//! Congestion control's parts in the engine: the requester's [`Pacer`]
//! (the QP's DCQCN reaction point and the wait it imposes) and the
//! responder's [`Notifier`] (the notification point and the CNPs it has
//! to send). The algorithm is [`crate::cc`]'s; this file connects it to
//! the QP: which priority a QP has, when the clock is read, how a CNP is
//! written.
//!
//! A QP's priority is its traffic class's DSCP >> 3 (`tclass >> 5`): the
//! default DSCP → priority map of mlx5 (`mlnx_qos --trust dscp`), which
//! the per-priority enables (`rp_enable_P`, `np_enable_P`) index.

use std::collections::VecDeque;

use rdmakit_wire::cnp;

use super::qp::Common;
use super::Transmit;
use crate::cc::{NotificationPoint, Rate, ReactionPoint};
use crate::qp::AddressHandle;
use crate::time::{Clock, Instant};

/// CNPs waiting to go out at most (UD answers several sources; RC and UC
/// one peer). A marked packet beyond it is counted and not answered.
const MAX_PENDING_CNPS: usize = 8;

/// The reaction point of the QP's requests and the pacing wait.
#[derive(Debug, Default)]
pub(super) struct Pacer {
    rp: ReactionPoint,
    /// The pacer holds the next request until then.
    until: Option<Instant>,
}

impl Pacer {
    /// May the next request packet leave at `now`? While unthrottled:
    /// yes, without reading the clock. When not, [`Pacer::deadline`] says
    /// until when.
    #[inline]
    pub(super) fn ready(&mut self, c: &Common, now: impl Clock) -> bool {
        if !self.rp.throttled() {
            return true;
        }
        self.ready_throttled(c, now)
    }

    fn ready_throttled(&mut self, c: &Common, now: impl Clock) -> bool {
        if !c.rp_enabled() {
            // Turned off for this priority while throttled: run free.
            *self = Pacer::default();
            return true;
        }
        let cfg = c.cfg();
        match self.rp.ready(&cfg.cc, cfg.line_rate, || now.now()) {
            Ok(()) => {
                self.until = None;
                true
            }
            Err(at) => {
                self.until = Some(at);
                false
            }
        }
    }

    /// A request packet of `len` bytes left.
    #[inline]
    pub(super) fn sent(&mut self, c: &Common, len: usize, now: impl Clock) {
        if self.rp.throttled() {
            let cfg = c.cfg();
            self.rp.sent(&cfg.cc, cfg.line_rate, len, || now.now());
        }
    }

    /// Whether a CNP limits the QP now.
    #[inline]
    pub(super) fn throttled(&self) -> bool {
        self.rp.throttled()
    }

    /// When the held request may go, if one is held.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.until
    }

    /// The timer fired at `now`: a due deadline is over (the next
    /// `poll_transmit` asks again).
    pub(super) fn expire(&mut self, now: impl Clock) {
        if self.until.is_some_and(|t| t <= now.now()) {
            self.until = None;
        }
    }

    /// Forgets a held request (the send queue was flushed).
    pub(super) fn unhold(&mut self) {
        self.until = None;
    }

    /// A CNP from the connected peer arrived.
    pub(super) fn on_cnp(&mut self, c: &Common, now: impl Clock) {
        let cfg = c.cfg();
        self.rp.on_cnp(&cfg.cc, cfg.line_rate, now.now());
    }

    /// The current rate, `None` while unthrottled.
    pub(super) fn rate(&self) -> Option<Rate> {
        self.rp.rate()
    }
}

/// The notification point of the QP and the CNPs it queued.
#[derive(Debug, Default)]
pub(super) struct Notifier {
    np: NotificationPoint,
    /// (destination QPN, path) of each CNP to send, oldest first.
    pending: VecDeque<(u32, AddressHandle)>,
}

impl Notifier {
    /// A CE-marked packet for this QP arrived; `to` is where a CNP for it
    /// goes (the sending QP and its path), `None` when unknown.
    pub(super) fn marked(
        &mut self,
        c: &mut Common,
        now: impl Clock,
        to: Option<(u32, AddressHandle)>,
    ) {
        c.stats_mut().np_ecn_marked_roce_packets += 1;
        let Some(to) = to else { return };
        if !c.np_enabled() || self.pending.len() >= MAX_PENDING_CNPS || self.pending.contains(&to) {
            return;
        }
        if self.np.on_marked(&c.cfg().cc, now.now()) {
            self.pending.push_back(to);
        }
    }

    /// Whether a CNP waits.
    #[inline]
    pub(super) fn pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes the next CNP into `buf` (BTH and the 16 reserved bytes; the
    /// driver appends the ICRC as for any packet).
    pub(super) fn poll(&mut self, c: &mut Common, buf: &mut [u8]) -> Option<Transmit> {
        let (dqpn, ah) = self.pending.pop_front()?;
        let r = cnp::Repr {
            pkey: c.pkey(),
            ..cnp::Repr::new(dqpn)
        };
        let len = r.emit_without_icrc(buf).ok()?;
        c.stats_mut().np_cnp_sent += 1;
        let tos = c.cfg().cc.np_cnp_dscp << 2;
        Some(Transmit { len, ah, tos })
    }

    /// The QP left the states that send: queued CNPs are dropped.
    pub(super) fn clear(&mut self) {
        self.pending.clear();
    }
}
