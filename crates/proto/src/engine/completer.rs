//! The completer: what the peer's responder says about our requests.
//!
//! It owns the oldest unacknowledged PSN, the retry and RNR retry counts
//! left, the guard against restarting the same go-back twice, and the two
//! timers (the local ACK timeout and the RNR wait). From ACKs, NAKs, RNR
//! NAKs and READ/atomic responses it decides which WRs are done (the
//! [`Requester`] retires them), where to resend from (the requester's send
//! pointer moves there), and when a WR fails and the connection with it
//! ([`Failed`]: the [`Qp`](super::Qp) goes to ERR).

use rdmakit_wire::aeth::{AethKind, NakCode};
use rdmakit_wire::opcode::{OpInfo, Operation};
use rdmakit_wire::roce;

use super::qp::Common;
use super::requester::Requester;
use super::same_host::SameHost;
use super::sgl::scatter;
use super::{nak_status, DropReason, Failed};
use crate::mem::Memory;
use crate::psn::Psn;
use crate::qp::{QpState, QpType};
use crate::time::{local_ack_timeout, rnr_timer, Clock, Instant};
use crate::wr::{SendOp, WcStatus};

/// Acknowledgement state and timers of a QP's requests.
#[derive(Debug, Default)]
pub(super) struct Completer {
    /// The oldest PSN not acknowledged.
    una: Psn,
    /// Retries left (`retry_cnt`, reloaded on progress).
    retry_left: u8,
    /// RNR retries left (`rnr_retry`; 7 is infinite).
    rnr_left: u8,
    /// The `una` a peer-triggered go-back last restarted from.
    goback_guard: Option<Psn>,
    /// The local ACK timeout, while requests are unacknowledged.
    rto: Option<Instant>,
    /// The end of an RNR wait: no request goes before it.
    rnr_wait: Option<Instant>,
}

impl Completer {
    pub(super) fn new() -> Completer {
        Completer::default()
    }

    /// `SQ_PSN`: nothing is outstanding before `psn`.
    pub(super) fn set_una(&mut self, psn: Psn) {
        self.una = psn;
    }

    /// `RETRY_CNT`.
    pub(super) fn set_retry_cnt(&mut self, n: u8) {
        self.retry_left = n;
    }

    /// `RNR_RETRY`.
    pub(super) fn set_rnr_retry(&mut self, n: u8) {
        self.rnr_left = n;
    }

    /// The oldest unacknowledged PSN.
    pub(super) fn una(&self) -> Psn {
        self.una
    }

    /// The next deadline: the ACK timeout or the end of an RNR wait.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        match (self.rto, self.rnr_wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether an RNR wait holds requests back at `now`.
    pub(super) fn rnr_waiting(&self, now: impl Clock) -> bool {
        self.rnr_wait.is_some_and(|t| now.now() < t)
    }

    /// The requester may send again.
    pub(super) fn end_rnr_wait(&mut self) {
        self.rnr_wait = None;
    }

    /// A request went out: the ACK timer runs, if it did not already.
    pub(super) fn arm(&mut self, now: impl Clock, timeout: u8) {
        if self.rto.is_none() {
            self.rto = local_ack_timeout(timeout).map(|d| now.now() + d);
        }
    }

    /// The send queue was flushed: no timer runs.
    pub(super) fn stop_timers(&mut self) {
        self.rto = None;
        self.rnr_wait = None;
    }

    /// Fires the timers due at `now`: an expired RNR wait ends; a local ACK
    /// timeout resends from `una` (a retry), or, when nothing unacknowledged
    /// asked for an ACK, sends the last packet again with AckReq (a probe).
    /// `Err` when the retries are exhausted: the oldest WR failed.
    pub(super) fn handle_timeout(
        &mut self,
        now: impl Clock,
        req: &mut Requester,
        c: &mut Common,
    ) -> Result<(), Failed> {
        if self.rnr_wait.is_some_and(|t| t <= now.now()) {
            self.rnr_wait = None;
        }
        if self.rto.is_some_and(|t| t <= now.now()) {
            self.rto = None;
            if c.state() == QpState::Err || c.cfg().qp_type != QpType::Rc {
                return Ok(());
            }
            if self.una != req.next_psn() {
                if !req.asked_since(self.una) && req.next_psn() == req.high_psn() {
                    // Nothing unacknowledged asked for an ACK (an unsignaled
                    // tail): not a loss. Send the last packet again, with
                    // AckReq; its ACK covers all. If it goes unanswered too,
                    // the next timeout is a real one.
                    c.stats_mut().ack_probes += 1;
                    let last = req.high_psn().sub(1);
                    self.rewind(now, last, req, c);
                } else {
                    c.stats_mut().timeouts += 1;
                    self.go_back(now, true, req, c)?;
                }
            }
        }
        Ok(())
    }

    /// An ACK, NAK, RNR NAK, READ response or atomic ACK (RC). `Err` when
    /// it failed the oldest WR: the QP goes to ERR.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn handle_response<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        p: &roce::Repr<'_>,
        info: &OpInfo,
        req: &mut Requester,
        same_host: &mut SameHost,
        c: &mut Common,
        mem: &mut M,
    ) -> Result<(), Failed> {
        if !matches!(c.state(), QpState::Rts | QpState::Sqd) {
            c.drop(DropReason::bad_state);
            return Ok(());
        }
        let psn = Psn::new(p.bth.psn);
        if psn.diff(req.high_psn()) >= 0 {
            c.drop(DropReason::sequence);
            return Ok(());
        }
        match info.operation {
            Operation::Acknowledge => {
                let Some(aeth) = p.aeth else { return Ok(()) };
                // The syndrome's type is bits 6:5; reserved bit 7 is not
                // looked at.
                match AethKind::from_syndrome(aeth.kind.syndrome() & 0x7f) {
                    AethKind::Ack { .. } => {
                        if !self.ack_through(now, psn, req, c) {
                            self.go_back_once(now, req, c)?;
                        }
                    }
                    AethKind::RnrNak { timer } => {
                        c.stats_mut().rnr_naks_received += 1;
                        // Stale, or a copy of the RNR NAK we are already
                        // waiting out: must not consume another RNR retry.
                        if psn.before(self.una) || (self.rnr_wait.is_some() && psn == self.una) {
                            return Ok(());
                        }
                        let ok = self.ack_through(now, psn.sub(1), req, c);
                        if !ok || psn != self.una {
                            return self.go_back(now, true, req, c);
                        }
                        if self.rnr_left == 0 {
                            req.retire_front(WcStatus::RnrRetryExcErr, c);
                            return Err(Failed);
                        }
                        if self.rnr_left != 7 {
                            self.rnr_left -= 1;
                        }
                        self.go_back(now, false, req, c)?;
                        self.rto = None;
                        self.rnr_wait = Some(now.now() + rnr_timer(timer));
                    }
                    AethKind::Nak(code) => {
                        c.stats_mut().naks_received += 1;
                        if code == NakCode::PsnSequenceError {
                            c.stats_mut().seq_err_naks_received += 1;
                        }
                        if psn.before(self.una) {
                            return Ok(());
                        }
                        let ok = self.ack_through(now, psn.sub(1), req, c);
                        if code == NakCode::Reserved(rdmakit_wire::cma::NAK_DECLINE) {
                            self.same_host_declined(now, psn, req, same_host, c)?;
                        } else if code == NakCode::PsnSequenceError || !ok {
                            self.go_back_once(now, req, c)?;
                        } else {
                            req.retire_front(nak_status(code), c);
                            return Err(Failed);
                        }
                    }
                    AethKind::Reserved(_) => c.drop(DropReason::malformed),
                }
            }
            Operation::RdmaReadResponse | Operation::AtomicAcknowledge => {
                self.handle_rd_response(now, p, info, req, c, mem)?;
            }
            _ => c.drop(DropReason::malformed),
        }
        Ok(())
    }

    /// A READ response or atomic ACK: its data or original value goes into
    /// the oldest WR's scatter list.
    fn handle_rd_response<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        p: &roce::Repr<'_>,
        info: &OpInfo,
        req: &mut Requester,
        c: &mut Common,
        mem: &mut M,
    ) -> Result<(), Failed> {
        let q = Psn::new(p.bth.psn);
        if q.before(self.una) {
            c.drop(DropReason::sequence);
            return Ok(());
        }
        let Some(first) = req.started_holding(q) else {
            c.drop(DropReason::sequence);
            return Ok(());
        };
        if first.after(self.una) && !self.ack_through(now, first.sub(1), req, c) {
            return self.go_back_once(now, req, c);
        }
        if q != self.una {
            return self.go_back_once(now, req, c);
        }
        // q == una, so the WQE is the front one.
        let Some(w) = req.front() else { return Ok(()) };
        let mtu = c.mtu();
        let pd = c.cfg().pd;
        let ends = match (info.operation, w.wr().op) {
            (Operation::RdmaReadResponse, SendOp::Read { .. }) => {
                let off = u64::from(q.diff(w.first_psn()) as u32) * u64::from(mtu);
                let n = p.payload.len() as u64;
                let total = u64::from(w.len());
                let ends = info.position.ends_message();
                let bad = off + n > total
                    || (ends && off + n != total)
                    || (!ends && (n != u64::from(mtu) || off + n == total));
                if bad {
                    req.retire_front(WcStatus::BadRespErr, c);
                    return Err(Failed);
                }
                if n > 0 && scatter(mem, pd, &w.wr().sg_list, off, p.payload).is_err() {
                    req.retire_front(WcStatus::LocProtErr, c);
                    return Err(Failed);
                }
                ends
            }
            (
                Operation::AtomicAcknowledge,
                SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. },
            ) => {
                let orig = p.atomic_ack_eth.map_or(0, |a| a.orig_value);
                if scatter(mem, pd, &w.wr().sg_list, 0, &orig.to_le_bytes()).is_err() {
                    req.retire_front(WcStatus::LocProtErr, c);
                    return Err(Failed);
                }
                true
            }
            _ => {
                req.retire_front(WcStatus::BadRespErr, c);
                return Err(Failed);
            }
        };
        self.una = q.add(1);
        req.catch_up(self.una, mtu);
        if ends {
            req.retire_front(WcStatus::Success, c);
            req.retire_local_front(c);
        }
        self.progress(now, req, c);
        Ok(())
    }

    /// The peer declined the same-host request at `psn`: the QP sends
    /// packets from now on, starting again there (no retry consumed).
    fn same_host_declined(
        &mut self,
        now: impl Clock,
        psn: Psn,
        req: &mut Requester,
        same_host: &mut SameHost,
        c: &mut Common,
    ) -> Result<(), Failed> {
        c.stats_mut().same_host_fallbacks += 1;
        same_host.declined();
        if psn == self.una {
            self.rewind(now, psn, req, c);
        } else if !psn.before(self.una) {
            // An earlier READ lacks its response (implied NAK).
            self.go_back_once(now, req, c)?;
        }
        Ok(())
    }

    /// Restart from the oldest unacknowledged PSN. `count` consumes a retry;
    /// with none left the oldest WR fails with `RETRY_EXC_ERR`.
    fn go_back(
        &mut self,
        now: impl Clock,
        count: bool,
        req: &mut Requester,
        c: &mut Common,
    ) -> Result<(), Failed> {
        if self.una == req.next_psn() {
            return Ok(());
        }
        if count {
            if self.retry_left == 0 {
                req.retire_front(WcStatus::RetryExcErr, c);
                return Err(Failed);
            }
            // Unlike rnr_retry, 7 is not "infinite" for retry_cnt (IBA
            // 9.7.5.2.8; rxe counts it down too).
            self.retry_left -= 1;
        }
        if self.rewind(now, self.una, req, c) {
            c.stats_mut().go_backs += 1;
        }
        Ok(())
    }

    /// Sends again from `psn` (a PSN of a started WR): the requester's send
    /// pointer and the ACK timer restart there. False if no WR holds it.
    fn rewind(&mut self, now: impl Clock, psn: Psn, req: &mut Requester, c: &Common) -> bool {
        if !req.rewind(psn, c.mtu()) {
            return false;
        }
        self.rto = local_ack_timeout(c.attr().timeout).map(|d| now.now() + d);
        true
    }

    /// A go-back triggered by the peer (NAK, implied NAK, response gap):
    /// at most one per una value, so that reordered or duplicated packets
    /// do not restart the same retransmission again and again.
    fn go_back_once(
        &mut self,
        now: impl Clock,
        req: &mut Requester,
        c: &mut Common,
    ) -> Result<(), Failed> {
        if self.goback_guard == Some(self.una) {
            return Ok(());
        }
        self.goback_guard = Some(self.una);
        self.go_back(now, true, req, c)
    }

    /// Forward progress: una moved.
    fn progress(&mut self, now: impl Clock, req: &Requester, c: &Common) {
        let attr = c.attr();
        self.retry_left = attr.retry_cnt;
        self.rnr_left = attr.rnr_retry;
        self.goback_guard = None;
        self.rto = if self.una != req.next_psn() {
            local_ack_timeout(attr.timeout).map(|d| now.now() + d)
        } else {
            None
        };
    }

    /// Everything up to and including `p` is acknowledged. Returns false when
    /// a READ/atomic inside that range lacks its response (implied NAK; the
    /// caller retries).
    fn ack_through(
        &mut self,
        now: impl Clock,
        p: Psn,
        req: &mut Requester,
        c: &mut Common,
    ) -> bool {
        if p.diff(self.una) < 0 || p.diff(req.high_psn()) >= 0 {
            return true;
        }
        let mut ok = true;
        let mut una = p.add(1);
        while let Some(w) = req.front() {
            if !w.started() {
                break;
            }
            if w.npkts() == 0 && w.wr().op.is_local() {
                req.retire_front(WcStatus::Success, c);
                continue;
            }
            if w.last_psn().after(p) {
                break;
            }
            if w.wr().op.is_rd_atomic() && !w.same_host() {
                ok = false;
                if !w.first_psn().before(self.una) {
                    una = w.first_psn();
                } else {
                    una = self.una;
                }
                break;
            }
            req.retire_front(WcStatus::Success, c);
        }
        if una.after(self.una) {
            self.una = una;
            self.progress(now, req, c);
        }
        ok
    }
}
