//! The responder: the peer's requests and our answers to them.
//!
//! It owns the receive queue, the expected PSN and the MSN, the message
//! being received, the responder resources (READ and atomic answers kept
//! for duplicates) and the responses waiting to go out (ACKs, NAKs, READ
//! responses, atomic ACKs). It executes RC, UC and UD requests into
//! [`Memory`] after every check the IBTA asks for, and answers RC requests
//! as rxe does: ACKs coalesced, one sequence NAK per gap, an RNR NAK when
//! no receive WQE is posted, a NAK that ends the connection for an invalid
//! request or an access the memory refuses.

use std::collections::VecDeque;

use rdmakit_wire::aeth::{self, AethKind, NakCode};
use rdmakit_wire::opcode::{OpCode, OpInfo, Operation, Position, Transport};
use rdmakit_wire::{atomic_ack_eth, reth, roce};

use super::cc::Notifier;
use super::qp::Common;
use super::sgl::{scatter, sgl_len, Spares};
use super::{message_op, pkts_for, pos_of, DropReason, Transmit, ACK, GRH_LEN};
use crate::engine::Answer;
use crate::mem::{AtomicOp, Key, MemError, Memory, Pd};
use crate::psn::Psn;
use crate::qp::{Access, AddressHandle, QpType};
use crate::time::Clock;
use crate::wr::{RecvWr, Sge, WcOpcode, WcStatus};

/// The receive side of a QP.
#[derive(Debug, Default)]
pub(super) struct Responder {
    /// Posted receive WRs, oldest first.
    rq: VecDeque<RecvWqe>,
    /// The PSN of the next request expected.
    epsn: Psn,
    /// Messages completed (the AETH's MSN).
    msn: u32,
    /// A sequence, RNR or decline NAK went out for the current gap: the
    /// next one waits for an in-sequence request.
    nak_sent: bool,
    /// The SEND or WRITE message being received.
    cur: Option<InMsg>,
    /// UC: the rest of a message is dropped (a gap or a refused packet).
    uc_drop: bool,
    /// Answers of recent READs and atomics, for their duplicates.
    resources: VecDeque<Resource>,
    /// Responses to send, oldest first.
    out: VecDeque<RespOut>,
    /// A NAK that ends the connection is queued: requests are dropped.
    fatal_pending: bool,
    /// Emptied scatter lists of completed receive WRs.
    spare: Spares,
    /// Congestion control: CE-marked packets and the CNPs they ask for.
    notifier: Notifier,
}

#[derive(Clone, Debug)]
struct RecvWqe {
    wr: RecvWr,
    len: u64,
}

#[derive(Clone, Debug)]
struct InMsg {
    /// `Send` or `RdmaWrite` (see [`message_op`]).
    op: Operation,
    recv: Option<RecvWqe>,
    off: u32,
    va: u64,
    rkey: u32,
    dma_len: u32,
}

#[derive(Clone, Copy, Debug)]
enum ResKind {
    Read { va: u64, rkey: u32, len: u32 },
    Atomic { orig: u64 },
}

#[derive(Clone, Copy, Debug)]
struct Resource {
    first: Psn,
    last: Psn,
    kind: ResKind,
}

#[derive(Clone, Copy, Debug)]
enum RespOut {
    Ack {
        psn: Psn,
        aeth: AethKind,
        fatal: bool,
    },
    Read {
        psn: Psn,
        va: u64,
        rkey: u32,
        remaining: u32,
        first: bool,
    },
    Atomic {
        psn: Psn,
        orig: u64,
    },
}

/// Outcome of a responder step that did not simply succeed.
pub(super) enum RespErr {
    /// No receive WQE: RNR NAK (RC) or drop (UC/UD).
    Rnr,
    /// Class of error answered with a NAK (RC) and, for RC, QP to ERR; the
    /// status is for a consumed receive WQE, if any.
    Nak(NakCode, Option<WcStatus>),
}

impl Responder {
    pub(super) fn new() -> Responder {
        Responder::default()
    }

    /// `RQ_PSN`: the next request expected.
    pub(super) fn set_epsn(&mut self, psn: Psn) {
        self.epsn = psn;
    }

    /// The PSN of the next request expected.
    pub(super) fn epsn(&self) -> Psn {
        self.epsn
    }

    /// Receive WRs posted and not completed (including one being filled).
    pub(super) fn outstanding(&self) -> usize {
        self.rq.len() + usize::from(self.cur.as_ref().is_some_and(|m| m.recv.is_some()))
    }

    /// Queues a receive WR.
    pub(super) fn post(&mut self, wr: RecvWr) {
        let len = sgl_len(&wr.sg_list);
        self.rq.push_back(RecvWqe { wr, len });
    }

    /// A kept scatter list of a completed receive WR.
    pub(super) fn spare_sgl(&mut self) -> Option<Vec<Sge>> {
        self.spare.take()
    }

    /// Whether a response or a CNP waits to be sent.
    #[inline]
    pub(super) fn pending(&self) -> bool {
        !self.out.is_empty() || self.notifier.pending()
    }

    /// A CE-marked packet for this QP arrived; a CNP for it goes to `to`
    /// (the sending QP, its path) if the notification point sends one.
    pub(super) fn marked(
        &mut self,
        c: &mut Common,
        now: impl Clock,
        to: Option<(u32, AddressHandle)>,
    ) {
        self.notifier.marked(c, now, to);
    }

    /// The next CNP, written into `buf`.
    pub(super) fn poll_cnp(&mut self, c: &mut Common, buf: &mut [u8]) -> Option<Transmit> {
        if !self.notifier.pending() {
            return None;
        }
        self.notifier.poll(c, buf)
    }

    /// Whether only plain ACKs wait: nothing the peer is blocked on (no
    /// READ or atomic response, no NAK, no CNP).
    pub(super) fn only_acks_pending(&self) -> bool {
        !self.notifier.pending()
            && !self.out.is_empty()
            && self.out.iter().all(|o| {
                matches!(
                    o,
                    RespOut::Ack {
                        aeth: ACK,
                        fatal: false,
                        ..
                    }
                )
            })
    }

    /// The QP went to ERR: the receive being filled, then every posted
    /// one, complete with `WR_FLUSH_ERR`; no response goes out.
    pub(super) fn flush(&mut self, c: &mut Common) {
        if let Some(m) = self.cur.take() {
            if let Some(r) = m.recv {
                c.complete(c.wc(r.wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv));
            }
        }
        while let Some(r) = self.rq.pop_front() {
            c.complete(c.wc(r.wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv));
        }
        self.out.clear();
        self.notifier.clear();
        self.fatal_pending = false;
    }

    // ------------------------------------------------------------------
    // For requests that bypass the packet path (the same-host extension)
    // ------------------------------------------------------------------

    /// Whether a NAK that ends the connection is queued (requests are
    /// dropped).
    pub(super) fn fatal_pending(&self) -> bool {
        self.fatal_pending
    }

    /// Whether a SEND or WRITE message is being received in packets.
    pub(super) fn receiving(&self) -> bool {
        self.cur.is_some()
    }

    /// The oldest posted receive WR.
    pub(super) fn next_recv(&self) -> Option<&RecvWr> {
        self.rq.front().map(|r| &r.wr)
    }

    /// Takes the oldest posted receive WR.
    pub(super) fn take_recv(&mut self) -> Option<RecvWr> {
        self.rq.pop_front().map(|r| r.wr)
    }

    /// Keeps a completed receive WR's scatter list for reuse.
    pub(super) fn recycle(&mut self, sgl: Vec<Sge>) {
        self.spare.keep(sgl);
    }

    /// A request of `psns` PSNs from `psn` on was executed as a whole
    /// message: it is acknowledged (its last PSN), the next is expected
    /// after it.
    pub(super) fn executed(&mut self, psn: Psn, psns: u32) {
        self.msn = self.msn.wrapping_add(1);
        self.nak_sent = false;
        self.epsn = psn.add(psns);
        self.push_ack(psn.add(psns - 1));
    }

    // ------------------------------------------------------------------
    // Requests
    // ------------------------------------------------------------------

    /// Queues an ACK of `psn`, merged into a plain ACK queued last (ACKs
    /// are cumulative).
    pub(super) fn push_ack(&mut self, psn: Psn) {
        if let Some(RespOut::Ack {
            psn: q,
            aeth,
            fatal: false,
        }) = self.out.back_mut()
        {
            if *aeth == ACK {
                *q = psn;
                return;
            }
        }
        self.out.push_back(RespOut::Ack {
            psn,
            aeth: ACK,
            fatal: false,
        });
    }

    /// Answers `psn` with a NAK: one the requester recovers from (RNR, PSN
    /// sequence error, a declined same-host request), or a `fatal` one that
    /// ends the connection.
    pub(super) fn push_nak(&mut self, psn: Psn, aeth: AethKind, fatal: bool) {
        if fatal {
            self.fatal_pending = true;
        } else {
            self.nak_sent = true;
        }
        self.out.push_back(RespOut::Ack { psn, aeth, fatal });
    }

    /// True for a request with the expected PSN. One beyond it gets one
    /// sequence NAK per gap and is dropped; a duplicate is counted and
    /// handed to `duplicate`.
    pub(super) fn in_sequence(
        &mut self,
        psn: Psn,
        c: &mut Common,
        duplicate: impl FnOnce(&mut Self, &mut Common),
    ) -> bool {
        let d = psn.diff(self.epsn);
        if d > 0 {
            if !self.nak_sent {
                self.push_nak(self.epsn, AethKind::Nak(NakCode::PsnSequenceError), false);
            }
            c.drop(DropReason::sequence);
            return false;
        }
        if d < 0 {
            c.stats_mut().duplicates += 1;
            duplicate(self, c);
            return false;
        }
        true
    }

    /// An RC request: executed when in sequence (or, with an `answer`
    /// from the driver, answered so instead), a duplicate answered again,
    /// one beyond the expected PSN NAKed once.
    pub(super) fn rc_request<M: Memory + ?Sized>(
        &mut self,
        p: &roce::Repr<'_>,
        info: &OpInfo,
        answer: Option<Answer>,
        c: &mut Common,
        mem: &mut M,
    ) {
        if self.fatal_pending {
            c.drop(DropReason::bad_state);
            return;
        }
        let psn = Psn::new(p.bth.psn);
        if !self.in_sequence(psn, c, |r, c| r.rc_duplicate(p, info, c)) {
            return;
        }
        let outcome = match answer {
            None => self.execute(p, info, c, mem),
            Some(a) => Err(injected(a)),
        };
        match outcome {
            Ok(()) => self.nak_sent = false,
            Err(RespErr::Rnr) => {
                let timer = c.attr().min_rnr_timer;
                self.push_nak(psn, AethKind::RnrNak { timer }, false);
            }
            Err(RespErr::Nak(NakCode::PsnSequenceError, _)) => {
                self.push_nak(psn, AethKind::Nak(NakCode::PsnSequenceError), false);
            }
            Err(RespErr::Nak(code, status)) => {
                if let Some(st) = status {
                    if let Some(r) = self.cur.as_mut().and_then(|m| m.recv.take()) {
                        let wc = c.wc(r.wr.wr_id, st, WcOpcode::Recv);
                        c.complete(wc);
                    }
                }
                self.push_nak(psn, AethKind::Nak(code), true);
            }
        }
    }

    /// A duplicate RC request: a READ or atomic is answered from the
    /// responder resources, a SEND or WRITE acknowledged again.
    fn rc_duplicate(&mut self, p: &roce::Repr<'_>, info: &OpInfo, c: &mut Common) {
        let psn = Psn::new(p.bth.psn);
        // Bound the work a flood of duplicates can queue between two polls.
        if self.out.len() >= 2 * usize::from(c.attr().max_dest_rd_atomic) + 16 {
            c.drop(DropReason::resources);
            return;
        }
        match info.operation {
            Operation::RdmaReadRequest => {
                let Some(reth) = p.reth else { return };
                let found = self
                    .resources
                    .iter()
                    .rev()
                    .find(|r| psn.within(r.first, r.last));
                if let Some(Resource {
                    kind: ResKind::Read { va, rkey, len },
                    ..
                }) = found.copied()
                {
                    let end = va.saturating_add(u64::from(len));
                    let rend = reth.va.saturating_add(u64::from(reth.dma_len));
                    if reth.rkey == rkey && reth.va >= va && rend <= end {
                        c.stats_mut().read_replays += 1;
                        self.out.push_back(RespOut::Read {
                            psn,
                            va: reth.va,
                            rkey,
                            remaining: reth.dma_len,
                            first: true,
                        });
                        return;
                    }
                }
                c.drop(DropReason::resources);
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                let found = self.resources.iter().rev().find(|r| r.first == psn);
                if let Some(Resource {
                    kind: ResKind::Atomic { orig },
                    ..
                }) = found.copied()
                {
                    c.stats_mut().atomic_replays += 1;
                    self.out.push_back(RespOut::Atomic { psn, orig });
                } else {
                    c.drop(DropReason::resources);
                }
            }
            _ => {
                // C9-105: a duplicate SEND/WRITE is acknowledged again (with
                // the last PSN executed), AckReq or not; coalescing keeps a
                // burst of duplicates down to one ACK.
                self.push_ack(self.epsn.sub(1));
            }
        }
    }

    /// Keeps a READ's or atomic's answer for its duplicates (the newest
    /// `max_dest_rd_atomic`).
    fn add_resource(&mut self, r: Resource, c: &Common) {
        let cap = usize::from(c.attr().max_dest_rd_atomic.max(1));
        while self.resources.len() >= cap {
            self.resources.pop_front();
        }
        self.resources.push_back(r);
    }

    /// Executes an in-sequence RC request (also used by UC for SEND/WRITE).
    fn execute<M: Memory + ?Sized>(
        &mut self,
        p: &roce::Repr<'_>,
        info: &OpInfo,
        c: &mut Common,
        mem: &mut M,
    ) -> Result<(), RespErr> {
        let psn = Psn::new(p.bth.psn);
        let op = message_op(info.operation);
        let pos = info.position;
        let pd = c.cfg().pd;
        let mtu = c.mtu() as usize;
        let inv_req = RespErr::Nak(NakCode::InvalidRequest, None);
        // Opcode sequence: a message in progress continues, otherwise starts.
        match (&self.cur, pos.starts_message()) {
            (Some(m), false) if m.op == op => {}
            (None, true) => {}
            _ => return Err(inv_req),
        }
        // Segmentation rules.
        let n = p.payload.len();
        let len_ok = match pos {
            Position::First | Position::Middle => n == mtu,
            Position::Last => (1..=mtu).contains(&n),
            Position::Only => n <= mtu,
        };
        if info.has_payload && !len_ok {
            return Err(inv_req);
        }
        let acc = c.attr().qp_access_flags;
        let imm = p.immdt.map(|i| i.imm);
        match op {
            Operation::Send => {
                if pos.starts_message() {
                    let Some(r) = self.rq.pop_front() else {
                        return Err(RespErr::Rnr);
                    };
                    self.cur = Some(InMsg {
                        op: Operation::Send,
                        recv: Some(r),
                        off: 0,
                        va: 0,
                        rkey: 0,
                        dma_len: 0,
                    });
                }
                let Some(m) = self.cur.as_mut() else {
                    return Err(inv_req);
                };
                let Some(r) = m.recv.as_ref() else {
                    return Err(inv_req);
                };
                if u64::from(m.off) + n as u64 > r.len {
                    return Err(RespErr::Nak(
                        NakCode::InvalidRequest,
                        Some(WcStatus::LocLenErr),
                    ));
                }
                if scatter(mem, pd, &r.wr.sg_list, u64::from(m.off), p.payload).is_err() {
                    return Err(RespErr::Nak(
                        NakCode::RemoteOperationalError,
                        Some(WcStatus::LocProtErr),
                    ));
                }
                m.off += n as u32;
                if pos.ends_message() {
                    let mut inv = None;
                    if let Some(rkey) = p.ieth.map(|i| i.rkey) {
                        if mem.invalidate(pd, rkey).is_err() {
                            return Err(RespErr::Nak(
                                NakCode::InvalidRequest,
                                Some(WcStatus::RemInvReqErr),
                            ));
                        }
                        inv = Some(rkey);
                    }
                    let Some(m) = self.cur.take() else {
                        return Err(inv_req);
                    };
                    if let Some(r) = m.recv {
                        let mut wc = c.wc(r.wr.wr_id, WcStatus::Success, WcOpcode::Recv);
                        wc.byte_len = m.off;
                        wc.imm_data = imm;
                        wc.invalidated_rkey = inv;
                        wc.src_qp = c.attr().dest_qp_num;
                        c.complete(wc);
                        self.spare.keep(r.wr.sg_list);
                    }
                    self.msn = self.msn.wrapping_add(1);
                }
            }
            Operation::RdmaWrite => {
                if !acc.contains(Access::REMOTE_WRITE) {
                    return Err(inv_req);
                }
                if pos.starts_message() {
                    let Some(reth) = p.reth else {
                        return Err(inv_req);
                    };
                    check_reth(mem, pd, reth, Access::REMOTE_WRITE)?;
                    if (pos == Position::Only && n != reth.dma_len as usize)
                        || (n as u64) > u64::from(reth.dma_len)
                    {
                        return Err(inv_req);
                    }
                    self.cur = Some(InMsg {
                        op: Operation::RdmaWrite,
                        recv: None,
                        off: 0,
                        va: reth.va,
                        rkey: reth.rkey,
                        dma_len: reth.dma_len,
                    });
                }
                let imm_needs_recv = info.headers.immdt && pos.ends_message();
                if imm_needs_recv && self.rq.is_empty() {
                    if pos == Position::Only {
                        self.cur = None;
                    }
                    return Err(RespErr::Rnr);
                }
                let Some(m) = self.cur.as_mut() else {
                    return Err(inv_req);
                };
                let end = u64::from(m.off) + n as u64;
                if end > u64::from(m.dma_len) || (pos.ends_message() && end != u64::from(m.dma_len))
                {
                    return Err(inv_req);
                }
                if n > 0 {
                    let va = m.va.checked_add(u64::from(m.off)).ok_or_else(rem_access)?;
                    mem.write(pd, Key::Remote(m.rkey), va, p.payload, Access::REMOTE_WRITE)
                        .map_err(|_| rem_access())?;
                }
                m.off += n as u32;
                if pos.ends_message() {
                    let total = m.off;
                    self.cur = None;
                    if imm_needs_recv {
                        if let Some(r) = self.rq.pop_front() {
                            let mut wc =
                                c.wc(r.wr.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm);
                            wc.byte_len = total;
                            wc.imm_data = imm;
                            wc.src_qp = c.attr().dest_qp_num;
                            c.complete(wc);
                        }
                    }
                    self.msn = self.msn.wrapping_add(1);
                }
            }
            Operation::RdmaReadRequest => {
                if !acc.contains(Access::REMOTE_READ) {
                    return Err(inv_req);
                }
                let Some(reth) = p.reth else {
                    return Err(inv_req);
                };
                if reth.dma_len > 1 << 31 {
                    return Err(inv_req);
                }
                check_reth(mem, pd, reth, Access::REMOTE_READ)?;
                let npk = pkts_for(reth.dma_len, mtu as u32);
                self.add_resource(
                    Resource {
                        first: psn,
                        last: psn.add(npk - 1),
                        kind: ResKind::Read {
                            va: reth.va,
                            rkey: reth.rkey,
                            len: reth.dma_len,
                        },
                    },
                    c,
                );
                self.out.push_back(RespOut::Read {
                    psn,
                    va: reth.va,
                    rkey: reth.rkey,
                    remaining: reth.dma_len,
                    first: true,
                });
                self.msn = self.msn.wrapping_add(1);
                self.epsn = psn.add(npk);
                return Ok(());
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                if !acc.contains(Access::REMOTE_ATOMIC) {
                    return Err(inv_req);
                }
                let Some(a) = p.atomic_eth else {
                    return Err(inv_req);
                };
                if a.va % 8 != 0 {
                    return Err(inv_req);
                }
                let atomic = if op == Operation::CompareSwap {
                    AtomicOp::CompareSwap {
                        compare: a.compare,
                        swap: a.swap_add,
                    }
                } else {
                    AtomicOp::FetchAdd { add: a.swap_add }
                };
                let orig = match mem.atomic(pd, a.rkey, a.va, atomic) {
                    Ok(v) => v,
                    Err(MemError::Misaligned) => return Err(inv_req),
                    Err(_) => return Err(rem_access()),
                };
                self.add_resource(
                    Resource {
                        first: psn,
                        last: psn,
                        kind: ResKind::Atomic { orig },
                    },
                    c,
                );
                self.out.push_back(RespOut::Atomic { psn, orig });
                self.msn = self.msn.wrapping_add(1);
            }
            // A response is no request; message_op folds the operations
            // with immediate data or invalidate into Send and RdmaWrite.
            Operation::RdmaReadResponse
            | Operation::Acknowledge
            | Operation::AtomicAcknowledge
            | Operation::SendWithImmediate
            | Operation::SendWithInvalidate
            | Operation::RdmaWriteWithImmediate => return Err(inv_req),
        }
        self.epsn = psn.add(1);
        if p.bth.ack_req && c.cfg().qp_type == QpType::Rc {
            self.push_ack(psn);
        }
        Ok(())
    }

    /// A UC request: never answered; a gap or a refused packet drops the
    /// rest of its message.
    pub(super) fn uc_request<M: Memory + ?Sized>(
        &mut self,
        p: &roce::Repr<'_>,
        info: &OpInfo,
        c: &mut Common,
        mem: &mut M,
    ) {
        let psn = Psn::new(p.bth.psn);
        let pos = info.position;
        if psn.before(self.epsn) {
            // Duplicate or stale: UC never delivers a packet twice.
            c.stats_mut().duplicates += 1;
            c.drop(DropReason::sequence);
            return;
        }
        if psn != self.epsn {
            // PSN gap: abandon the message in progress; a packet that starts
            // a message is taken, anything else drops until the next start.
            self.abandon_uc();
            self.uc_drop = !pos.starts_message();
            if self.uc_drop {
                self.epsn = psn.add(1);
                c.drop(DropReason::sequence);
                return;
            }
        }
        self.epsn = psn.add(1);
        if self.uc_drop {
            if !pos.starts_message() {
                c.drop(DropReason::sequence);
                return;
            }
            self.uc_drop = false;
        }
        let cont_ok = match &self.cur {
            Some(m) => !pos.starts_message() && m.op == message_op(info.operation),
            None => pos.starts_message(),
        };
        if !cont_ok {
            self.abandon_uc();
            self.uc_drop = !pos.starts_message();
            if self.uc_drop {
                c.drop(DropReason::sequence);
                return;
            }
        }
        if self.execute(p, info, c, mem).is_err() {
            self.abandon_uc();
            self.uc_drop = !pos.ends_message();
            c.drop(DropReason::refused);
        }
        // execute() moved epsn forward already on success.
        self.epsn = psn.add(1);
    }

    /// Gives up the UC message in progress; its receive WQE goes back.
    fn abandon_uc(&mut self) {
        if let Some(m) = self.cur.take() {
            if let Some(r) = m.recv {
                self.rq.push_front(r);
            }
        }
    }

    /// A UD SEND: Q_Key checked, delivered after the GRH area.
    pub(super) fn ud_request<M: Memory + ?Sized>(
        &mut self,
        p: &roce::Repr<'_>,
        grh: Option<&[u8; GRH_LEN]>,
        c: &mut Common,
        mem: &mut M,
    ) {
        let Some(deth) = p.deth else {
            c.drop(DropReason::malformed);
            return;
        };
        if deth.qkey != c.attr().qkey {
            c.drop(DropReason::qkey);
            return;
        }
        if p.payload.len() > c.mtu() as usize {
            c.drop(DropReason::malformed);
            return;
        }
        let Some(r) = self.rq.pop_front() else {
            c.drop(DropReason::no_receive);
            return;
        };
        let pd = c.cfg().pd;
        let total = (GRH_LEN + p.payload.len()) as u64;
        let status = if total > r.len {
            WcStatus::LocLenErr
        } else {
            let zero = [0u8; GRH_LEN];
            let g = grh.unwrap_or(&zero);
            match scatter(mem, pd, &r.wr.sg_list, 0, g)
                .and_then(|()| scatter(mem, pd, &r.wr.sg_list, GRH_LEN as u64, p.payload))
            {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::LocProtErr,
            }
        };
        let mut wc = c.wc(r.wr.wr_id, status, WcOpcode::Recv);
        if status == WcStatus::Success {
            wc.byte_len = total as u32;
            wc.imm_data = p.immdt.map(|i| i.imm);
            wc.src_qp = deth.src_qp;
            wc.grh = grh.is_some();
        }
        c.complete(wc);
        self.spare.keep(r.wr.sg_list);
    }

    // ------------------------------------------------------------------
    // Responses
    // ------------------------------------------------------------------

    /// Writes the next response into `buf`: the packet, and whether it is
    /// a NAK that ends the connection (the QP goes to ERR once it is out).
    pub(super) fn poll<M: Memory + ?Sized>(
        &mut self,
        c: &mut Common,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<(Transmit, bool)> {
        let item = self.out.pop_front()?;
        let dqpn = c.attr().dest_qp_num;
        let ah = c.attr().ah;
        let tos = c.data_tos();
        let msn = self.msn & 0x00ff_ffff;
        match item {
            RespOut::Ack {
                psn,
                aeth: kind,
                fatal,
            } => {
                let p = roce::Repr {
                    aeth: Some(aeth::Repr { kind, msn }),
                    ..c.header(OpCode::RC_ACKNOWLEDGE, psn, dqpn)
                };
                let (_, len) = p.emit_header_without_icrc(buf, 0).ok()?;
                let syn = kind.syndrome();
                match syn >> 5 {
                    0 => c.stats_mut().acks_sent += 1,
                    1 => c.stats_mut().rnr_naks_sent += 1,
                    _ => {
                        let i = usize::from((syn & 0x1f).min(4));
                        c.stats_mut().naks_sent[i] += 1;
                    }
                }
                Some((Transmit { len, ah, tos }, fatal))
            }
            RespOut::Atomic { psn, orig } => {
                let p = roce::Repr {
                    aeth: Some(aeth::Repr { kind: ACK, msn }),
                    atomic_ack_eth: Some(atomic_ack_eth::Repr { orig_value: orig }),
                    ..c.header(OpCode::RC_ATOMIC_ACKNOWLEDGE, psn, dqpn)
                };
                let (_, len) = p.emit_header_without_icrc(buf, 0).ok()?;
                Some((Transmit { len, ah, tos }, false))
            }
            RespOut::Read {
                psn,
                va,
                rkey,
                remaining,
                first,
            } => {
                let mtu = c.mtu();
                let n = remaining.min(mtu);
                let last = n == remaining;
                let pos = pos_of(first, last);
                let opcode = OpCode::from_parts(Transport::Rc, Operation::RdmaReadResponse, pos)?;
                let mut p = c.header(opcode, psn, dqpn);
                if opcode.info()?.headers.aeth {
                    p.aeth = Some(aeth::Repr { kind: ACK, msn });
                }
                // Headers first, then the data read straight into place.
                let (at, len) = p.emit_header_without_icrc(buf, n as usize).ok()?;
                let r = if n == 0 {
                    Ok(())
                } else {
                    mem.read(
                        c.cfg().pd,
                        Key::Remote(rkey),
                        va,
                        &mut buf[at..at + n as usize],
                        Access::REMOTE_READ,
                    )
                };
                let res = match r {
                    Ok(()) => {
                        if !last {
                            self.out.push_front(RespOut::Read {
                                psn: psn.add(1),
                                va: va + u64::from(n),
                                rkey,
                                remaining: remaining - n,
                                first: false,
                            });
                        }
                        Some((Transmit { len, ah, tos }, false))
                    }
                    Err(_) => {
                        // The region went away between request and response.
                        self.out.clear();
                        self.out.push_front(RespOut::Ack {
                            psn,
                            aeth: AethKind::Nak(NakCode::RemoteAccessError),
                            fatal: true,
                        });
                        None
                    }
                };
                match res {
                    Some(t) => Some(t),
                    None => self.poll(c, buf, mem),
                }
            }
        }
    }
}

/// The outcome a driver's [`Answer`] stands for, with the status a real
/// responder gives a receive it was filling.
fn injected(a: Answer) -> RespErr {
    match a {
        Answer::Rnr => RespErr::Rnr,
        Answer::Nak(code) => {
            let status = match code {
                NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                NakCode::RemoteOperationalError => WcStatus::RemOpErr,
                _ => WcStatus::RemInvReqErr,
            };
            RespErr::Nak(code, Some(status))
        }
    }
}

/// The NAK that answers a remote access the memory refused.
pub(super) fn rem_access() -> RespErr {
    RespErr::Nak(NakCode::RemoteAccessError, None)
}

/// Checks the range a RETH names for `need` before any byte moves; a
/// zero-length access names no memory and is not checked.
pub(super) fn check_reth<M: Memory + ?Sized>(
    mem: &M,
    pd: Pd,
    reth: reth::Repr,
    need: Access,
) -> Result<(), RespErr> {
    if reth.dma_len == 0 {
        return Ok(());
    }
    mem.check(
        pd,
        Key::Remote(reth.rkey),
        reth.va,
        u64::from(reth.dma_len),
        need,
    )
    .map_err(|_| rem_access())
}
