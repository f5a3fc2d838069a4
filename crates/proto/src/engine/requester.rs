//! The requester: the send queue and the packets built from it.
//!
//! It owns the send queue, the send pointer (the WR and offset the next
//! packet comes from) and the PSNs it hands out: the next PSN, the highest
//! sent, when AckReq was last asked for, the READ/atomic requests in flight.
//! It checks a WR on its first transmission, cuts it into packets of the
//! path MTU, sets AckReq, keeps the window, and runs local operations (bind,
//! local invalidate) in send-queue order.
//!
//! The [`Completer`](super::completer::Completer) decides when WRs are done
//! and where to resend from; it tells the requester through
//! [`Requester::retire_front`], [`Requester::rewind`] and
//! [`Requester::catch_up`], and reads the oldest WRs through
//! [`Requester::front`] and [`SendWqe`]'s accessors.

use std::collections::VecDeque;

use rdmakit_wire::opcode::{OpCode, Operation, Transport};
use rdmakit_wire::{atomic_eth, deth, ieth, immdt, reth};

use super::cc::Pacer;
use super::qp::Common;
use super::same_host::{SameHost, SAME_HOST_MAX_PSNS};
use super::sgl::{gather, Spares};
use super::{pkts_for, pos_of, Failed, Transmit};
use crate::cc::Rate;
use crate::mem::{Key, Memory};
use crate::psn::Psn;
use crate::qp::{Access, QpState, QpType};
use crate::time::{Clock, Instant};
use crate::wr::{SendOp, SendWr, Sge, WcStatus};

/// Q_Key bit that a non-privileged sender may not use.
const QKEY_CONTROLLED: u32 = 0x8000_0000;

/// The send side of a QP: the send queue and the PSNs it assigns.
#[derive(Debug, Default)]
pub(super) struct Requester {
    /// Posted send WRs, oldest first, until they complete.
    sq: VecDeque<SendWqe>,
    /// The WR the next packet comes from (`sq[..send_idx]` are sent).
    send_idx: usize,
    /// Bytes of `sq[send_idx]` already sent.
    send_off: u32,
    /// The PSN of the next packet.
    next_psn: Psn,
    /// One past the highest PSN sent (below it: a retransmission).
    high_psn: Psn,
    /// Packets sent since the last AckReq.
    pkts_since_ackreq: u32,
    /// The newest request that asks for an answer (AckReq, READ, atomic).
    asked_psn: Option<Psn>,
    /// READ and atomic requests started and not completed.
    rd_atomic_inflight: u32,
    /// The PSNs that the same-host requests among the sent WRs
    /// (`sq[..send_idx]`) stand for beyond their one packet each: what
    /// the window does not count ([`Requester::window_full`]).
    same_host_extra: i32,
    /// Emptied scatter lists of completed send WRs.
    spare: Spares,
    /// Congestion control: the rate the requests may leave at.
    pacer: Pacer,
}

/// A send WR and its progress.
#[derive(Clone, Debug)]
pub(super) struct SendWqe {
    wr: SendWr,
    len: u32,
    first_psn: Psn,
    npkts: u32,
    started: bool,
    local_err: Option<WcStatus>,
    /// Last sent as one same-host request (a READ then completes on the
    /// ACK: its data arrived by copy).
    same_host: bool,
}

impl SendWqe {
    /// The work request.
    pub(super) fn wr(&self) -> &SendWr {
        &self.wr
    }

    /// Its length in bytes.
    pub(super) fn len(&self) -> u32 {
        self.len
    }

    /// Whether it was sent (PSNs assigned) or, for a local operation,
    /// executed.
    pub(super) fn started(&self) -> bool {
        self.started
    }

    /// Its first PSN (once started).
    pub(super) fn first_psn(&self) -> Psn {
        self.first_psn
    }

    /// Its last PSN (once started).
    pub(super) fn last_psn(&self) -> Psn {
        self.first_psn.add(self.npkts.saturating_sub(1))
    }

    /// PSNs it takes: 0 for a local operation.
    pub(super) fn npkts(&self) -> u32 {
        self.npkts
    }

    /// Whether it was last sent as one same-host request.
    pub(super) fn same_host(&self) -> bool {
        self.same_host
    }

    /// Whether `psn` is one of its PSNs: (its index in the queue, the
    /// offset of that PSN's data in the WR).
    fn holds(&self, psn: Psn, mtu: u32) -> Option<u32> {
        if !psn.within(self.first_psn, self.last_psn()) {
            return None;
        }
        let k = psn.diff(self.first_psn) as u32;
        Some(if self.wr.op.is_atomic() { 0 } else { k * mtu })
    }
}

impl Requester {
    pub(super) fn new() -> Requester {
        Requester::default()
    }

    /// `SQ_PSN`: the next request starts at `psn`.
    pub(super) fn set_psn(&mut self, psn: Psn) {
        self.next_psn = psn;
        self.high_psn = psn;
    }

    /// The PSN of the next packet.
    pub(super) fn next_psn(&self) -> Psn {
        self.next_psn
    }

    /// One past the highest PSN sent.
    pub(super) fn high_psn(&self) -> Psn {
        self.high_psn
    }

    /// Whether a request sent at or after `una` asked for an answer.
    pub(super) fn asked_since(&self, una: Psn) -> bool {
        self.asked_psn.is_some_and(|p| !p.before(una))
    }

    /// Send WRs posted and not completed.
    pub(super) fn outstanding(&self) -> usize {
        self.sq.len()
    }

    /// Whether a WR at or after the send pointer waits.
    #[inline]
    pub(super) fn unsent(&self) -> bool {
        self.send_idx < self.sq.len()
    }

    /// Queues a checked WR of `len` bytes.
    pub(super) fn post(&mut self, wr: SendWr, len: u32) {
        self.sq.push_back(SendWqe {
            wr,
            len,
            first_psn: Psn::new(0),
            npkts: 0,
            started: false,
            local_err: None,
            same_host: false,
        });
    }

    /// A kept scatter list of a completed WR.
    pub(super) fn spare_sgl(&mut self) -> Option<Vec<Sge>> {
        self.spare.take()
    }

    /// The oldest WR.
    pub(super) fn front(&self) -> Option<&SendWqe> {
        self.sq.front()
    }

    /// The first PSN of the started WR that holds `psn`, if one does.
    pub(super) fn started_holding(&self, psn: Psn) -> Option<Psn> {
        self.sq
            .iter()
            .take_while(|w| w.started)
            .find(|w| psn.within(w.first_psn, w.last_psn()))
            .map(|w| w.first_psn)
    }

    /// Completes the oldest WR with `status` (successes only when
    /// signaled) and pops it.
    pub(super) fn retire_front(&mut self, status: WcStatus, c: &mut Common) {
        let Some(w) = self.pop_sent_front() else {
            return;
        };
        if w.wr.op.is_rd_atomic() && w.started {
            self.rd_atomic_inflight = self.rd_atomic_inflight.saturating_sub(1);
        }
        if status != WcStatus::Success || w.wr.signaled || c.cfg().sq_sig_all {
            let mut wc = c.wc(w.wr.wr_id, status, w.wr.op.wc_opcode());
            if status == WcStatus::Success {
                wc.byte_len = if w.wr.op.is_atomic() { 8 } else { w.len };
            }
            c.complete(wc);
        }
        self.spare.keep(w.wr.sg_list);
    }

    /// Completes the local operations at the head of the send queue: all
    /// earlier WRs are done, so they are too.
    pub(super) fn retire_local_front(&mut self, c: &mut Common) {
        while self
            .sq
            .front()
            .is_some_and(|w| w.started && w.npkts == 0 && w.wr.op.is_local())
        {
            self.retire_front(WcStatus::Success, c);
        }
    }

    /// Sends again from `psn` (a PSN of a started WR): the send pointer and
    /// the next PSN move there. False if no WR holds it.
    pub(super) fn rewind(&mut self, psn: Psn, mtu: u32) -> bool {
        let mut found = None;
        for (i, w) in self.sq.iter().enumerate() {
            if !w.started {
                break;
            }
            if w.npkts == 0 {
                continue; // a local operation holds no PSN
            }
            if let Some(off) = w.holds(psn, mtu) {
                found = Some((i, off.min(w.len)));
                break;
            }
        }
        let Some((i, off)) = found else { return false };
        self.move_to(i, off, psn);
        true
    }

    /// After `una` moved past the send pointer (late ACKs for packets sent
    /// before a go-back), moves the send pointer to `una`.
    pub(super) fn catch_up(&mut self, una: Psn, mtu: u32) {
        if !self.next_psn.before(una) {
            return;
        }
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
            if let Some(o) = w.holds(una, mtu) {
                idx = i;
                off = o.min(w.len);
                break;
            }
        }
        self.move_to(idx, off, una);
    }

    /// The send pointer to WR `idx`, `off` bytes in, at `psn`.
    fn move_to(&mut self, idx: usize, off: u32, psn: Psn) {
        self.send_idx = idx;
        self.same_host_extra = self.same_host_extra_sent();
        self.send_off = off;
        self.next_psn = psn;
        self.pkts_since_ackreq = 0;
    }

    /// A CNP from the connected peer: the reaction point cuts the rate.
    pub(super) fn on_cnp(&mut self, c: &Common, now: impl Clock) {
        self.pacer.on_cnp(c, now);
    }

    /// The rate the pacer holds requests to, `None` while unthrottled.
    pub(super) fn cc_rate(&self) -> Option<Rate> {
        self.pacer.rate()
    }

    /// When the pacer lets a held request go, if it holds one.
    pub(super) fn pace_deadline(&self) -> Option<Instant> {
        self.pacer.deadline()
    }

    /// The timer fired: a due pacing deadline is over.
    pub(super) fn pace_expire(&mut self, now: impl Clock) {
        self.pacer.expire(now);
    }

    /// Completes every WR with `WR_FLUSH_ERR` and empties the queue.
    pub(super) fn flush(&mut self, c: &mut Common) {
        self.pacer.unhold();
        while let Some(w) = self.sq.pop_front() {
            let wc = c.wc(w.wr.wr_id, WcStatus::WrFlushErr, w.wr.op.wc_opcode());
            c.complete(wc);
        }
        self.send_idx = 0;
        self.same_host_extra = 0;
        self.send_off = 0;
        self.rd_atomic_inflight = 0;
    }

    /// Completes the oldest WR if it failed locally; `Err` when it did:
    /// the QP must leave RTS.
    pub(super) fn drain_local_errors(&mut self, c: &mut Common) -> Result<(), Failed> {
        let Some(w) = self.sq.front() else {
            return Ok(());
        };
        let Some(status) = w.local_err else {
            return Ok(());
        };
        let wc = c.wc(w.wr.wr_id, status, w.wr.op.wc_opcode());
        self.pop_sent_front();
        c.complete(wc);
        Err(Failed)
    }

    /// Whether the requester may not send: `max_inflight` packets are
    /// unacknowledged (rxe's 128 PSNs). A same-host request is one packet
    /// for all the PSNs of its message (16 for a 64 KiB WRITE at MTU
    /// 4096), so the window counts it once: counted in PSNs, a stream of
    /// them kept 8 in flight and the responder, woken for each one the
    /// ACKs let out, copied one per wake-up. PSNs in flight stay below
    /// [`SAME_HOST_MAX_PSNS`] (far from the half of the PSN space where
    /// before/after comparisons turn).
    fn window_full(&self, una: Psn, max_inflight: u32) -> bool {
        debug_assert_eq!(self.same_host_extra, self.same_host_extra_sent());
        let psns = self.next_psn.diff(una);
        psns >= SAME_HOST_MAX_PSNS || psns - self.same_host_extra >= max_inflight as i32
    }

    /// [`Requester::same_host_extra`] counted from the send queue (after
    /// the send pointer moved back).
    fn same_host_extra_sent(&self) -> i32 {
        self.sq
            .iter()
            .take(self.send_idx)
            .filter(|w| w.same_host)
            .map(|w| w.npkts.saturating_sub(1) as i32)
            .sum()
    }

    /// Pops the oldest send WQE, moving the send pointer with it.
    fn pop_sent_front(&mut self) -> Option<SendWqe> {
        let w = self.sq.pop_front()?;
        if self.send_idx > 0 {
            self.send_idx -= 1;
            if w.same_host {
                self.same_host_extra -= w.npkts.saturating_sub(1) as i32;
            }
        }
        Some(w)
    }

    /// The next request packet, written into `buf`: `Ok(None)` when nothing
    /// may go now (queue empty, SQD, window, fence, `max_rd_atomic`, a
    /// failed WR behind older ones, the pacer), `Err` when a WR failed at the head of
    /// the queue (its completion is queued). `una` is the completer's
    /// oldest unacknowledged PSN. UC and UD WRs complete here, as their
    /// last packet leaves; so do local operations and UD messages above
    /// the MTU.
    pub(super) fn poll<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        c: &mut Common,
        same_host: &SameHost,
        una: Psn,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Result<Option<Transmit>, Failed> {
        let rc = c.cfg().qp_type == QpType::Rc;
        loop {
            let idx = self.send_idx;
            let Some(w) = self.sq.get(idx) else {
                return Ok(None);
            };
            if w.local_err.is_some() {
                return Ok(None);
            }
            let local = w.wr.op.is_local();
            if !w.started {
                if c.state() == QpState::Sqd {
                    return Ok(None);
                }
                if rc
                    && w.wr.op.is_rd_atomic()
                    && self.rd_atomic_inflight >= u32::from(c.attr().max_rd_atomic.max(1))
                {
                    return Ok(None);
                }
                if rc && w.wr.fence && self.rd_atomic_inflight > 0 {
                    return Ok(None);
                }
                if c.cfg().qp_type == QpType::Ud && w.len > c.mtu() {
                    // IBTA C10-93.1.1: a UD message longer than the port MTU
                    // emits no packet and raises no error.
                    self.retire_front(WcStatus::Success, c);
                    continue;
                }
                if local {
                    // A bind or local invalidate: done here, in send-queue
                    // order; it completes once every earlier WR has.
                    if let Err(status) = self.execute_local(idx, c, mem) {
                        return self.local_error(idx, status, c);
                    }
                    continue;
                }
                if let Err(status) = self.validate(idx, c, mem) {
                    return self.local_error(idx, status, c);
                }
            }
            if local {
                // Done already (a go-back walked over it): nothing to send.
                self.send_idx += 1;
                continue;
            }
            if rc && self.window_full(una, c.cfg().max_inflight) {
                return Ok(None);
            }
            // New or retransmitted, a packet leaves only when the pacer
            // lets it (at once while no CNP limits the QP).
            if !self.pacer.ready(c, now) {
                return Ok(None);
            }
            match self.build(idx, c, same_host, buf, mem) {
                Ok(t) => {
                    self.pacer.sent(c, t.len, now);
                    return Ok(Some(t));
                }
                Err(status) => return self.local_error(idx, status, c),
            }
        }
    }

    /// Executes the local operation at `idx` (bind, local invalidate) and
    /// marks it done; it completes as soon as it is the oldest WR.
    fn execute_local<M: Memory + ?Sized>(
        &mut self,
        idx: usize,
        c: &mut Common,
        mem: &mut M,
    ) -> Result<(), WcStatus> {
        let pd = c.cfg().pd;
        let next = self.next_psn;
        let Some(w) = self.sq.get_mut(idx) else {
            return Err(WcStatus::LocQpOpErr);
        };
        match w.wr.op {
            SendOp::BindMw(b) => mem.bind_mw(pd, &b).map_err(|_| WcStatus::MwBindErr)?,
            SendOp::LocalInv { rkey } => mem
                .invalidate_local(pd, rkey)
                .map_err(|_| WcStatus::MwBindErr)?,
            _ => return Err(WcStatus::LocQpOpErr),
        }
        w.started = true;
        w.first_psn = next;
        w.npkts = 0;
        self.send_idx += 1;
        self.retire_local_front(c);
        Ok(())
    }

    /// First-transmission checks of a send WQE; assigns its PSNs.
    fn validate<M: Memory + ?Sized>(
        &mut self,
        idx: usize,
        c: &Common,
        mem: &M,
    ) -> Result<(), WcStatus> {
        let mtu = c.mtu();
        let pd = c.cfg().pd;
        let ud = c.cfg().qp_type == QpType::Ud;
        let Some(w) = self.sq.get_mut(idx) else {
            return Err(WcStatus::LocQpOpErr);
        };
        let need = if w.wr.op.is_rd_atomic() {
            Access::LOCAL_WRITE
        } else {
            Access::empty()
        };
        if w.wr.op.is_atomic() && w.len != 8 {
            return Err(WcStatus::LocLenErr);
        }
        for s in &w.wr.sg_list {
            mem.check(pd, Key::Local(s.lkey), s.addr, u64::from(s.length), need)
                .map_err(|_| WcStatus::LocProtErr)?;
        }
        w.started = true;
        w.first_psn = self.next_psn;
        w.npkts = match w.wr.op {
            SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => 1,
            _ if ud => 1,
            _ => pkts_for(w.len, mtu),
        };
        if w.wr.op.is_rd_atomic() {
            self.rd_atomic_inflight += 1;
        }
        Ok(())
    }

    /// A local error on WQE `idx`: it completes in order, with `status`,
    /// and then the QP leaves RTS (RC: ERR; UC/UD: SQE).
    fn local_error(
        &mut self,
        idx: usize,
        status: WcStatus,
        c: &mut Common,
    ) -> Result<Option<Transmit>, Failed> {
        if let Some(w) = self.sq.get_mut(idx) {
            w.local_err = Some(status);
        }
        self.drain_local_errors(c)?;
        Ok(None)
    }

    /// Writes the next packet of WR `idx` (or all of it as one same-host
    /// request) and moves the send pointer past it.
    fn build<M: Memory + ?Sized>(
        &mut self,
        idx: usize,
        c: &mut Common,
        same_host: &SameHost,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Result<Transmit, WcStatus> {
        if self.send_off == 0 {
            if let Some(w) = self.sq.get_mut(idx) {
                w.same_host = false;
            }
            if let Some(t) = self.build_same_host(idx, c, same_host, buf, mem) {
                return Ok(t);
            }
        }
        let mtu = c.mtu();
        let t = c.transport();
        let psn = self.next_psn;
        let attr = c.attr();
        let qkey = attr.qkey;
        let pd = c.cfg().pd;
        let qpn = c.cfg().qpn;
        let w = self.sq.get(idx).ok_or(WcStatus::LocQpOpErr)?;
        let (dqpn, ah) = match w.wr.ud {
            Some(d) if t == Transport::Ud => (d.remote_qpn, d.ah),
            _ => (attr.dest_qp_num, attr.ah),
        };
        let off = self.send_off;
        // (offset into the WR's data, length) of this packet's payload.
        let mut payload: Option<(u32, u32)> = None;
        let mut p = c.header(OpCode::RC_RDMA_READ_REQUEST, psn, dqpn);
        let mut psns = 1u32;
        let mut ends = true;
        let mut sent = 0u32;
        // A READ or atomic request: answered by a response, never AckReq.
        let mut rd = true;
        match w.wr.op {
            SendOp::Read { remote_addr, rkey } => {
                let remaining = w.len - off;
                p.reth = Some(reth::Repr {
                    va: remote_addr.wrapping_add(u64::from(off)),
                    rkey,
                    dma_len: remaining,
                });
                psns = pkts_for(remaining, mtu);
                sent = remaining;
            }
            SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                p.bth.opcode = OpCode::RC_COMPARE_SWAP;
                p.atomic_eth = Some(atomic_eth::Repr {
                    va: remote_addr,
                    rkey,
                    swap_add: swap,
                    compare,
                });
            }
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => {
                p.bth.opcode = OpCode::RC_FETCH_ADD;
                p.atomic_eth = Some(atomic_eth::Repr {
                    va: remote_addr,
                    rkey,
                    swap_add: add,
                    compare: 0,
                });
            }
            op => {
                rd = false;
                let remaining = w.len - off;
                let n = remaining.min(mtu);
                let last = n == remaining;
                let first = off == 0;
                // Immediate data and invalidate ride on the last packet.
                let (operation, imm, inv) = match op {
                    SendOp::SendWithImm { imm } if last => {
                        (Operation::SendWithImmediate, Some(imm), None)
                    }
                    SendOp::SendWithInv { rkey } if last => {
                        (Operation::SendWithInvalidate, None, Some(rkey))
                    }
                    SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. } => {
                        (Operation::Send, None, None)
                    }
                    SendOp::WriteWithImm { imm, .. } if last => {
                        (Operation::RdmaWriteWithImmediate, Some(imm), None)
                    }
                    _ => (Operation::RdmaWrite, None, None),
                };
                p.bth.opcode = OpCode::from_parts(t, operation, pos_of(first, last))
                    .ok_or(WcStatus::LocQpOpErr)?;
                p.immdt = imm.map(|imm| immdt::Repr { imm });
                p.ieth = inv.map(|rkey| ieth::Repr { rkey });
                if let SendOp::Write { remote_addr, rkey }
                | SendOp::WriteWithImm {
                    remote_addr, rkey, ..
                } = op
                {
                    if first {
                        p.reth = Some(reth::Repr {
                            va: remote_addr,
                            rkey,
                            dma_len: w.len,
                        });
                    }
                }
                if t == Transport::Ud {
                    let qk = w.wr.ud.map_or(qkey, |d| d.remote_qkey);
                    let qk = if qk & QKEY_CONTROLLED != 0 { qkey } else { qk };
                    p.deth = Some(deth::Repr {
                        qkey: qk,
                        src_qp: qpn,
                    });
                }
                payload = Some((off, n));
                p.bth.solicited = last && w.wr.solicited;
                ends = last;
                sent = n;
            }
        }
        if t == Transport::Rc {
            self.pkts_since_ackreq += 1;
            // AckReq where an ACK is awaited: the end of a signaled WR (the
            // application waits for its completion), of any WR when the send
            // queue is half full (it needs the slots back) or on a
            // retransmission, and every `ack_req_every` packets (the window).
            // An unsignaled WR's end goes without: ACKs are cumulative, so
            // the next requested one covers it (AckReq is the requester's to
            // set; rxe's responder, like this engine's, ACKs the packets that
            // carry it and duplicates). A ping-pong of unsignaled SENDs thus
            // costs no ACK datagram per message in either direction. An
            // application that posts unsignaled WRs and then nothing gets its
            // slots back at the ACK timeout, which then sends the last packet
            // again with AckReq: an ACK probe, not a retry (handle_timeout).
            // While a CNP limits the QP every request asks: paced packets
            // may be far apart (88 ms for 1 KiB at 100 kb/s), and the local
            // ACK timer, running from the oldest unacknowledged packet,
            // would otherwise expire while the pacer holds the AckReq one.
            let cfg = c.cfg();
            let wants_ack = w.wr.signaled
                || cfg.sq_sig_all
                || self.sq.len() * 2 >= cfg.max_send_wr
                || psn.before(self.high_psn);
            let every = self.pkts_since_ackreq >= cfg.ack_req_every || self.pacer.throttled();
            if !rd && ((ends && wants_ack) || every) {
                p.bth.ack_req = true;
            }
            if p.bth.ack_req || rd {
                self.pkts_since_ackreq = 0;
                self.asked_psn = Some(psn);
            }
        }
        // Headers first, then the payload gathered straight into place (the
        // transmit buffer is the only copy before the socket's).
        let plen = payload.map_or(0, |(_, n)| n as usize);
        let (at, len) = p
            .emit_header_without_icrc(buf, plen)
            .map_err(|_| WcStatus::LocLenErr)?;
        if let Some((off, n)) = payload {
            let dst = &mut buf[at..at + n as usize];
            if gather(mem, pd, &w.wr.sg_list, u64::from(off), dst).is_err() {
                return Err(WcStatus::LocProtErr);
            }
        }

        if psn.before(self.high_psn) {
            c.stats_mut().retransmitted += 1;
        }
        self.next_psn = psn.add(psns);
        if self.next_psn.after(self.high_psn) {
            self.high_psn = self.next_psn;
        }
        if rd || ends {
            self.send_idx += 1;
            self.send_off = 0;
        } else {
            self.send_off = off + sent;
        }
        if t != Transport::Rc && ends {
            // UC and UD complete as soon as the last packet leaves.
            self.retire_front(WcStatus::Success, c);
            self.retire_local_front(c);
        }
        Ok(Transmit {
            len,
            ah,
            tos: c.data_tos(),
        })
    }

    /// WR `idx` as one same-host request, if the extension takes it; `None`
    /// sends it as packets.
    fn build_same_host<M: Memory + ?Sized>(
        &mut self,
        idx: usize,
        c: &mut Common,
        same_host: &SameHost,
        buf: &mut [u8],
        mem: &M,
    ) -> Option<Transmit> {
        let w = self.sq.get(idx)?;
        let request = same_host.request(c, &w.wr, w.len, mem)?;
        let npk = pkts_for(w.len, c.mtu());
        let psn = self.next_psn;
        let attr = c.attr();
        let (dqpn, ah) = (attr.dest_qp_num, attr.ah);
        let len = request.emit(c.header(OpCode::RC_SEND_ONLY, psn, dqpn), buf)?;
        if let Some(w) = self.sq.get_mut(idx) {
            w.same_host = true;
        }
        let stats = c.stats_mut();
        stats.same_host_sent += 1;
        self.pkts_since_ackreq = 0;
        self.asked_psn = Some(psn);
        if psn.before(self.high_psn) {
            stats.retransmitted += 1;
        }
        self.next_psn = psn.add(npk);
        if self.next_psn.after(self.high_psn) {
            self.high_psn = self.next_psn;
        }
        self.send_idx += 1;
        self.same_host_extra += npk.saturating_sub(1) as i32;
        self.send_off = 0;
        Some(Transmit {
            len,
            ah,
            tos: c.data_tos(),
        })
    }
}
