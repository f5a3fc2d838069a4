//! The engine's receive side: the responder (RC, UC, UD requests) and the
//! dispatch of incoming packets, responses included, to the completer.

use super::*;

impl Qp {
    // ------------------------------------------------------------------
    // Receive
    // ------------------------------------------------------------------

    /// Feeds one packet from the network (BTH onwards, ICRC already checked
    /// and removed). Untrusted input: malformed packets, packets for another
    /// QP or P_Key, wrong Q_Key, stale or future PSNs are dropped or
    /// answered with the NAK the IBTA prescribes; nothing panics and no byte
    /// is written outside memory the [`Memory`] validates.
    ///
    /// For UD the 40-byte GRH area of the receive buffer is zeroed; use
    /// [`Qp::handle_packet_with_grh`] to supply the real header.
    pub fn handle_packet<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        bytes: &[u8],
        mem: &mut M,
    ) {
        self.handle_packet_inner(now, bytes, None, mem);
    }

    /// [`Qp::handle_packet`] with the 40 bytes a UD receive places in the
    /// GRH area (an IPv6 header, or 20 zero bytes then the IPv4 header).
    pub fn handle_packet_with_grh<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        bytes: &[u8],
        grh: &[u8; GRH_LEN],
        mem: &mut M,
    ) {
        self.handle_packet_inner(now, bytes, Some(grh), mem);
    }

    pub(super) fn handle_packet_inner<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        bytes: &[u8],
        grh: Option<&[u8; GRH_LEN]>,
        mem: &mut M,
    ) {
        if bytes
            .first()
            .is_some_and(|&op| rdmakit_wire::cma::is_cma_opcode(op))
        {
            self.same_host_request(bytes, mem);
            return;
        }
        let Some((p, info)) = parse(bytes) else {
            self.drop(DropReason::malformed);
            return;
        };
        let transport_ok = info.transport == self.transport();
        if !self.admit(self.refusal(p.bth.dest_qp, transport_ok, p.bth.pkey)) {
            return;
        }
        match self.cfg.qp_type {
            QpType::Rc => {
                if info.operation.is_response() {
                    self.handle_response(now, &p, &info, mem);
                    if self.state != QpState::Err {
                        self.fix_send_ptr();
                        self.drain_local_errors();
                    }
                } else {
                    self.rc_request(&p, &info, mem);
                }
            }
            QpType::Uc => self.uc_request(&p, &info, mem),
            QpType::Ud => self.ud_request(&p, grh, mem),
        }
    }

    /// Why a packet for `dqpn` under `pkey` must be dropped, if it must:
    /// the QP cannot receive, or the packet is not addressed to it (QPN,
    /// transport, P_Key).
    pub(super) fn refusal(&self, dqpn: u32, transport_ok: bool, pkey: u16) -> Option<DropReason> {
        if !matches!(
            self.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        ) {
            Some(DropReason::bad_state)
        } else if dqpn != self.cfg.qpn {
            Some(DropReason::wrong_qpn)
        } else if !transport_ok {
            Some(DropReason::wrong_transport)
        } else if !pkey_match(pkey, self.pkey()) {
            Some(DropReason::pkey)
        } else {
            None
        }
    }

    /// Drops a packet for `reason`, or counts it received; true when it
    /// is to be processed.
    pub(super) fn admit(&mut self, reason: Option<DropReason>) -> bool {
        if let Some(r) = reason {
            self.drop(r);
            return false;
        }
        self.stats.rx_packets += 1;
        true
    }

    pub(super) fn drop(&mut self, r: DropReason) {
        self.stats.dropped += 1;
        let d = &mut self.stats.drops;
        let c = match r {
            DropReason::malformed => &mut d.malformed,
            DropReason::bad_state => &mut d.bad_state,
            DropReason::wrong_qpn => &mut d.wrong_qpn,
            DropReason::wrong_transport => &mut d.wrong_transport,
            DropReason::pkey => &mut d.pkey,
            DropReason::qkey => &mut d.qkey,
            DropReason::sequence => &mut d.sequence,
            DropReason::resources => &mut d.resources,
            DropReason::refused => &mut d.refused,
            DropReason::no_receive => &mut d.no_receive,
        };
        *c += 1;
    }

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
    pub(super) fn in_sequence(&mut self, psn: Psn, duplicate: impl FnOnce(&mut Self)) -> bool {
        let d = psn.diff(self.epsn);
        if d > 0 {
            if !self.nak_sent {
                self.push_nak(self.epsn, AethKind::Nak(NakCode::PsnSequenceError), false);
            }
            self.drop(DropReason::sequence);
            return false;
        }
        if d < 0 {
            self.stats.duplicates += 1;
            duplicate(self);
            return false;
        }
        true
    }

    pub(super) fn rc_request<M: Memory + ?Sized>(
        &mut self,
        p: &roce::Repr<'_>,
        info: &OpInfo,
        mem: &mut M,
    ) {
        if self.fatal_pending {
            self.drop(DropReason::bad_state);
            return;
        }
        let psn = Psn::new(p.bth.psn);
        if !self.in_sequence(psn, |qp| qp.rc_duplicate(p, info)) {
            return;
        }
        match self.execute(p, info, mem) {
            Ok(()) => self.nak_sent = false,
            Err(RespErr::Rnr) => {
                let timer = self.attr.min_rnr_timer;
                self.push_nak(psn, AethKind::RnrNak { timer }, false);
            }
            Err(RespErr::Nak(code, status)) => {
                if let Some(st) = status {
                    if let Some(r) = self.cur.as_mut().and_then(|c| c.recv.take()) {
                        let wc = self.wc(r.wr.wr_id, st, WcOpcode::Recv);
                        self.cq.push_back(wc);
                    }
                }
                self.push_nak(psn, AethKind::Nak(code), true);
            }
        }
    }

    pub(super) fn rc_duplicate(&mut self, p: &roce::Repr<'_>, info: &OpInfo) {
        let psn = Psn::new(p.bth.psn);
        // Bound the work a flood of duplicates can queue between two polls.
        if self.out.len() >= 2 * usize::from(self.attr.max_dest_rd_atomic) + 16 {
            self.drop(DropReason::resources);
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
                        self.stats.read_replays += 1;
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
                self.drop(DropReason::resources);
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                let found = self.resources.iter().rev().find(|r| r.first == psn);
                if let Some(Resource {
                    kind: ResKind::Atomic { orig },
                    ..
                }) = found.copied()
                {
                    self.stats.atomic_replays += 1;
                    self.out.push_back(RespOut::Atomic { psn, orig });
                } else {
                    self.drop(DropReason::resources);
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

    pub(super) fn add_resource(&mut self, r: Resource) {
        let cap = usize::from(self.attr.max_dest_rd_atomic.max(1));
        while self.resources.len() >= cap {
            self.resources.pop_front();
        }
        self.resources.push_back(r);
    }

    /// Executes an in-sequence RC request (also used by UC for SEND/WRITE).
    pub(super) fn execute<M: Memory + ?Sized>(
        &mut self,
        p: &roce::Repr<'_>,
        info: &OpInfo,
        mem: &mut M,
    ) -> Result<(), RespErr> {
        let psn = Psn::new(p.bth.psn);
        let op = message_op(info.operation);
        let pos = info.position;
        let pd = self.cfg.pd;
        let mtu = self.mtu() as usize;
        let inv_req = RespErr::Nak(NakCode::InvalidRequest, None);
        // Opcode sequence: a message in progress continues, otherwise starts.
        match (&self.cur, pos.starts_message()) {
            (Some(c), false) if c.op == op => {}
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
        let acc = self.attr.qp_access_flags;
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
                let Some(c) = self.cur.as_mut() else {
                    return Err(inv_req);
                };
                let Some(r) = c.recv.as_ref() else {
                    return Err(inv_req);
                };
                if u64::from(c.off) + n as u64 > r.len {
                    return Err(RespErr::Nak(
                        NakCode::InvalidRequest,
                        Some(WcStatus::LocLenErr),
                    ));
                }
                if scatter(mem, pd, &r.wr.sg_list, u64::from(c.off), p.payload).is_err() {
                    return Err(RespErr::Nak(
                        NakCode::RemoteOperationalError,
                        Some(WcStatus::LocProtErr),
                    ));
                }
                c.off += n as u32;
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
                    let Some(c) = self.cur.take() else {
                        return Err(inv_req);
                    };
                    if let Some(r) = c.recv {
                        let mut wc = self.wc(r.wr.wr_id, WcStatus::Success, WcOpcode::Recv);
                        wc.byte_len = c.off;
                        wc.imm_data = imm;
                        wc.invalidated_rkey = inv;
                        wc.src_qp = self.attr.dest_qp_num;
                        self.cq.push_back(wc);
                        Self::keep_sgl(&mut self.spare_recv, r.wr.sg_list);
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
                let Some(c) = self.cur.as_mut() else {
                    return Err(inv_req);
                };
                let end = u64::from(c.off) + n as u64;
                if end > u64::from(c.dma_len) || (pos.ends_message() && end != u64::from(c.dma_len))
                {
                    return Err(inv_req);
                }
                if n > 0 {
                    let va = c.va.checked_add(u64::from(c.off)).ok_or_else(rem_access)?;
                    mem.write(pd, Key::Remote(c.rkey), va, p.payload, Access::REMOTE_WRITE)
                        .map_err(|_| rem_access())?;
                }
                c.off += n as u32;
                if pos.ends_message() {
                    let total = c.off;
                    self.cur = None;
                    if imm_needs_recv {
                        if let Some(r) = self.rq.pop_front() {
                            let mut wc =
                                self.wc(r.wr.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm);
                            wc.byte_len = total;
                            wc.imm_data = imm;
                            wc.src_qp = self.attr.dest_qp_num;
                            self.cq.push_back(wc);
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
                self.add_resource(Resource {
                    first: psn,
                    last: psn.add(npk - 1),
                    kind: ResKind::Read {
                        va: reth.va,
                        rkey: reth.rkey,
                        len: reth.dma_len,
                    },
                });
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
                self.add_resource(Resource {
                    first: psn,
                    last: psn,
                    kind: ResKind::Atomic { orig },
                });
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
        if p.bth.ack_req && self.cfg.qp_type == QpType::Rc {
            self.push_ack(psn);
        }
        Ok(())
    }

    pub(super) fn uc_request<M: Memory + ?Sized>(
        &mut self,
        p: &roce::Repr<'_>,
        info: &OpInfo,
        mem: &mut M,
    ) {
        let psn = Psn::new(p.bth.psn);
        let pos = info.position;
        if psn.before(self.epsn) {
            // Duplicate or stale: UC never delivers a packet twice.
            self.stats.duplicates += 1;
            self.drop(DropReason::sequence);
            return;
        }
        if psn != self.epsn {
            // PSN gap: abandon the message in progress; a packet that starts
            // a message is taken, anything else drops until the next start.
            self.abandon_uc();
            self.uc_drop = !pos.starts_message();
            if self.uc_drop {
                self.epsn = psn.add(1);
                self.drop(DropReason::sequence);
                return;
            }
        }
        self.epsn = psn.add(1);
        if self.uc_drop {
            if !pos.starts_message() {
                self.drop(DropReason::sequence);
                return;
            }
            self.uc_drop = false;
        }
        let cont_ok = match &self.cur {
            Some(c) => !pos.starts_message() && c.op == message_op(info.operation),
            None => pos.starts_message(),
        };
        if !cont_ok {
            self.abandon_uc();
            self.uc_drop = !pos.starts_message();
            if self.uc_drop {
                self.drop(DropReason::sequence);
                return;
            }
        }
        if self.execute(p, info, mem).is_err() {
            self.abandon_uc();
            self.uc_drop = !pos.ends_message();
            self.drop(DropReason::refused);
        }
        // execute() moved epsn forward already on success.
        self.epsn = psn.add(1);
    }

    pub(super) fn abandon_uc(&mut self) {
        if let Some(c) = self.cur.take() {
            if let Some(r) = c.recv {
                self.rq.push_front(r);
            }
        }
    }

    pub(super) fn ud_request<M: Memory + ?Sized>(
        &mut self,
        p: &roce::Repr<'_>,
        grh: Option<&[u8; GRH_LEN]>,
        mem: &mut M,
    ) {
        let Some(deth) = p.deth else {
            self.drop(DropReason::malformed);
            return;
        };
        if deth.qkey != self.attr.qkey {
            self.drop(DropReason::qkey);
            return;
        }
        if p.payload.len() > self.mtu() as usize {
            self.drop(DropReason::malformed);
            return;
        }
        let Some(r) = self.rq.pop_front() else {
            self.drop(DropReason::no_receive);
            return;
        };
        let pd = self.cfg.pd;
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
        let mut wc = self.wc(r.wr.wr_id, status, WcOpcode::Recv);
        if status == WcStatus::Success {
            wc.byte_len = total as u32;
            wc.imm_data = p.immdt.map(|i| i.imm);
            wc.src_qp = deth.src_qp;
            wc.grh = grh.is_some();
        }
        self.cq.push_back(wc);
        Self::keep_sgl(&mut self.spare_recv, r.wr.sg_list);
    }
}

/// P_Key match: same 15-bit key, at least one side a full member.
pub(super) fn pkey_match(a: u16, b: u16) -> bool {
    (a & 0x7fff) == (b & 0x7fff) && (a | b) & 0x8000 != 0 && (a & 0x7fff) != 0
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
