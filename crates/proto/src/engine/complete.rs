//! The engine's completer: ACK/NAK and response handling, go-back-N and
//! retries, and completing send WRs in order.

use super::*;

impl Qp {
    // ------------------------------------------------------------------
    // Completer
    // ------------------------------------------------------------------

    /// Restart from the oldest unacknowledged PSN. `count` consumes a retry;
    /// with none left the oldest WR fails with `RETRY_EXC_ERR`.
    pub(super) fn go_back(&mut self, now: impl Clock, count: bool) {
        if self.una == self.next_psn {
            return;
        }
        if count {
            if self.retry_left == 0 {
                self.complete_front(WcStatus::RetryExcErr);
                self.enter_error();
                return;
            }
            // Unlike rnr_retry, 7 is not "infinite" for retry_cnt (IBA
            // 9.7.5.2.8; rxe counts it down too).
            self.retry_left -= 1;
        }
        if self.rewind(now, self.una) {
            self.stats.go_backs += 1;
        }
    }

    /// Sends again from `psn` (a PSN of a started WR): the send pointer,
    /// `next_psn` and the ACK timer restart there. False if no WR holds it.
    pub(super) fn rewind(&mut self, now: impl Clock, psn: Psn) -> bool {
        let mtu = self.mtu();
        let mut found = None;
        for (i, w) in self.sq.iter().enumerate() {
            if !w.started {
                break;
            }
            if w.npkts == 0 {
                continue; // a local operation holds no PSN
            }
            if psn.within(w.first_psn, w.last_psn()) {
                let k = psn.diff(w.first_psn) as u32;
                let off = if w.wr.op.is_atomic() { 0 } else { k * mtu };
                found = Some((i, off.min(w.len)));
                break;
            }
        }
        let Some((i, off)) = found else { return false };
        self.send_idx = i;
        self.same_host_extra = self.same_host_extra_sent();
        self.send_off = off;
        self.next_psn = psn;
        self.pkts_since_ackreq = 0;
        self.rto = local_ack_timeout(self.attr.timeout).map(|d| now.now() + d);
        true
    }

    /// A go-back triggered by the peer (NAK, implied NAK, response gap):
    /// at most one per una value, so that reordered or duplicated packets
    /// do not restart the same retransmission again and again.
    pub(super) fn go_back_once(&mut self, now: impl Clock) {
        if self.goback_guard == Some(self.una) {
            return;
        }
        self.goback_guard = Some(self.una);
        self.go_back(now, true);
    }

    /// Forward progress: una moved.
    pub(super) fn progress(&mut self, now: impl Clock) {
        self.retry_left = self.attr.retry_cnt;
        self.rnr_left = self.attr.rnr_retry;
        self.goback_guard = None;
        self.rto = if self.una != self.next_psn {
            local_ack_timeout(self.attr.timeout).map(|d| now.now() + d)
        } else {
            None
        };
    }

    /// Everything up to and including `p` is acknowledged. Returns false when
    /// a READ/atomic inside that range lacks its response (implied NAK; the
    /// caller retries).
    pub(super) fn ack_through(&mut self, now: impl Clock, p: Psn) -> bool {
        if p.diff(self.una) < 0 || p.diff(self.high_psn) >= 0 {
            return true;
        }
        let mut ok = true;
        let mut una = p.add(1);
        while let Some(w) = self.sq.front() {
            if !w.started {
                break;
            }
            if w.npkts == 0 && w.wr.op.is_local() {
                self.complete_front(WcStatus::Success);
                continue;
            }
            if w.last_psn().after(p) {
                break;
            }
            if w.wr.op.is_rd_atomic() && !w.cma {
                ok = false;
                if !w.first_psn.before(self.una) {
                    una = w.first_psn;
                } else {
                    una = self.una;
                }
                break;
            }
            self.complete_front(WcStatus::Success);
        }
        if una.after(self.una) {
            self.una = una;
            self.progress(now);
        }
        ok
    }

    /// After una moved past the transmit pointer (late ACKs for packets sent
    /// before a go-back), move the transmit pointer to una.
    pub(super) fn fix_send_ptr(&mut self) {
        if !self.next_psn.before(self.una) {
            return;
        }
        let mtu = self.mtu();
        let una = self.una;
        let mut idx = 0;
        let mut off = 0;
        for (i, w) in self.sq.iter().enumerate() {
            idx = i + 1;
            if !w.started {
                idx = i;
                break;
            }
            if w.npkts == 0 {
                continue; // a local operation holds no PSN
            }
            if una.within(w.first_psn, w.last_psn()) {
                idx = i;
                let k = una.diff(w.first_psn) as u32;
                off = if w.wr.op.is_atomic() {
                    0
                } else {
                    (k * mtu).min(w.len)
                };
                break;
            }
        }
        self.send_idx = idx;
        self.same_host_extra = self.same_host_extra_sent();
        self.send_off = off;
        self.next_psn = una;
        self.pkts_since_ackreq = 0;
    }

    pub(super) fn handle_response<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        p: &roce::Repr<'_>,
        info: &OpInfo,
        mem: &mut M,
    ) {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) {
            self.drop(DropReason::bad_state);
            return;
        }
        let psn = Psn::new(p.bth.psn);
        if psn.diff(self.high_psn) >= 0 {
            self.drop(DropReason::sequence);
            return;
        }
        match info.operation {
            Operation::Acknowledge => {
                let Some(aeth) = p.aeth else { return };
                // The syndrome's type is bits 6:5; reserved bit 7 is not
                // looked at.
                match AethKind::from_syndrome(aeth.kind.syndrome() & 0x7f) {
                    AethKind::Ack { .. } => {
                        if !self.ack_through(now, psn) {
                            self.go_back_once(now);
                        }
                    }
                    AethKind::RnrNak { timer } => {
                        self.stats.rnr_naks_received += 1;
                        // Stale, or a copy of the RNR NAK we are already
                        // waiting out: must not consume another RNR retry.
                        if psn.before(self.una) || (self.rnr_wait.is_some() && psn == self.una) {
                            return;
                        }
                        let ok = self.ack_through(now, psn.sub(1));
                        if !ok || psn != self.una {
                            self.go_back(now, true);
                            return;
                        }
                        if self.rnr_left == 0 {
                            self.complete_front(WcStatus::RnrRetryExcErr);
                            self.enter_error();
                            return;
                        }
                        if self.rnr_left != 7 {
                            self.rnr_left -= 1;
                        }
                        self.go_back(now, false);
                        self.rto = None;
                        self.rnr_wait = Some(now.now() + rnr_timer(timer));
                    }
                    AethKind::Nak(code) => {
                        self.stats.naks_received += 1;
                        if psn.before(self.una) {
                            return;
                        }
                        let ok = self.ack_through(now, psn.sub(1));
                        if code == NakCode::Reserved(rdmakit_wire::cma::NAK_DECLINE) {
                            self.same_host_decline(now, psn);
                        } else if code == NakCode::PsnSequenceError || !ok {
                            self.go_back_once(now);
                        } else {
                            self.complete_front(nak_status(code));
                            self.enter_error();
                        }
                    }
                    AethKind::Reserved(_) => self.drop(DropReason::malformed),
                }
            }
            Operation::RdmaReadResponse | Operation::AtomicAcknowledge => {
                self.handle_rd_response(now, p, info, mem)
            }
            _ => self.drop(DropReason::malformed),
        }
    }

    pub(super) fn handle_rd_response<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        p: &roce::Repr<'_>,
        info: &OpInfo,
        mem: &mut M,
    ) {
        let q = Psn::new(p.bth.psn);
        if q.before(self.una) {
            self.drop(DropReason::sequence);
            return;
        }
        let Some(i) = self
            .sq
            .iter()
            .take_while(|w| w.started)
            .position(|w| q.within(w.first_psn, w.last_psn()))
        else {
            self.drop(DropReason::sequence);
            return;
        };
        let first = self.sq[i].first_psn;
        if first.after(self.una) && !self.ack_through(now, first.sub(1)) {
            self.go_back_once(now);
            return;
        }
        if q != self.una {
            self.go_back_once(now);
            return;
        }
        // q == una, so the WQE is the front one.
        let Some(w) = self.sq.front() else { return };
        let mtu = self.mtu();
        let pd = self.cfg.pd;
        let ends = match (info.operation, w.wr.op) {
            (Operation::RdmaReadResponse, SendOp::Read { .. }) => {
                let off = u64::from(q.diff(w.first_psn) as u32) * u64::from(mtu);
                let n = p.payload.len() as u64;
                let total = u64::from(w.len);
                let ends = info.position.ends_message();
                let bad = off + n > total
                    || (ends && off + n != total)
                    || (!ends && (n != u64::from(mtu) || off + n == total));
                if bad {
                    self.complete_front(WcStatus::BadRespErr);
                    self.enter_error();
                    return;
                }
                if n > 0 && scatter(mem, pd, &w.wr.sg_list, off, p.payload).is_err() {
                    self.complete_front(WcStatus::LocProtErr);
                    self.enter_error();
                    return;
                }
                ends
            }
            (
                Operation::AtomicAcknowledge,
                SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. },
            ) => {
                let orig = p.atomic_ack_eth.map_or(0, |a| a.orig_value);
                if scatter(mem, pd, &w.wr.sg_list, 0, &orig.to_le_bytes()).is_err() {
                    self.complete_front(WcStatus::LocProtErr);
                    self.enter_error();
                    return;
                }
                true
            }
            _ => {
                self.complete_front(WcStatus::BadRespErr);
                self.enter_error();
                return;
            }
        };
        self.una = q.add(1);
        self.fix_send_ptr();
        if ends {
            self.complete_front(WcStatus::Success);
            self.complete_local_front();
        }
        self.progress(now);
    }

    /// Completes the oldest send WQE with `status` (successes only when
    /// signaled) and pops it.
    pub(super) fn complete_front(&mut self, status: WcStatus) {
        let Some(w) = self.pop_sent_front() else {
            return;
        };
        if w.wr.op.is_rd_atomic() && w.started {
            self.rd_atomic_inflight = self.rd_atomic_inflight.saturating_sub(1);
        }
        if status != WcStatus::Success || w.wr.signaled || self.cfg.sq_sig_all {
            let mut wc = self.wc(w.wr.wr_id, status, w.wr.op.wc_opcode());
            if status == WcStatus::Success {
                wc.byte_len = if w.wr.op.is_atomic() { 8 } else { w.len };
            }
            self.cq.push_back(wc);
        }
        Self::keep_sgl(&mut self.spare_send, w.wr.sg_list);
    }
}
