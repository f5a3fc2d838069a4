//! The engine's transmit side: what leaves the QP, responses first (ACK, NAK,
//! READ responses, atomic ACKs from the responder), then the requester's
//! packets built from the send queue, and the local operations executed in
//! its order.

use super::cma::SAME_HOST_MAX_PSNS;
use super::*;

impl Qp {
    // ------------------------------------------------------------------
    // Transmit
    // ------------------------------------------------------------------

    /// Writes the next packet to send into `buf` (BTH onwards, pad included,
    /// no ICRC) and says where to send it. Responses (ACK, NAK, READ
    /// responses, atomic ACKs) go before new requests. Call until `None`
    /// after every other call.
    ///
    /// `buf` must hold at least [`Qp::max_packet_len`] bytes, otherwise
    /// nothing is produced.
    #[inline]
    pub fn poll_transmit<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        // Inline, so that the call that ends a driver's loop costs the
        // check alone, not the frame of the body.
        if !self.may_transmit() {
            return None;
        }
        self.poll_transmit_body(now, buf, mem)
    }

    fn poll_transmit_body<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        if buf.len() < self.max_packet_len() {
            return None;
        }
        if let Some(t) = self.poll_responder(buf, mem) {
            self.stats.tx_packets += 1;
            return Some(t);
        }
        if !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return None;
        }
        let t = self.poll_requester(now, buf, mem)?;
        self.stats.tx_packets += 1;
        Some(t)
    }

    /// Whether the responder holds only plain ACKs for the peer: nothing
    /// it is blocked on (no READ or atomic response, no NAK).
    pub fn only_acks_pending(&self) -> bool {
        !self.out.is_empty()
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

    /// Whether the responder has anything to send.
    pub fn responder_pending(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether a packet may be produced: the responder holds a response,
    /// or (in RTS or SQD) the send queue holds a WR at or after the send
    /// pointer. False is the cheap answer to the call that ends a driver's
    /// transmit loop (two of the three calls per message of a UDP
    /// ping-pong, ~130 instructions each through the queues).
    #[inline]
    fn may_transmit(&self) -> bool {
        !self.out.is_empty()
            || (matches!(self.state, QpState::Rts | QpState::Sqd) && self.send_idx < self.sq.len())
    }

    /// [`Qp::poll_transmit`], except that plain ACKs are held back while
    /// they are all the responder has: the caller sends them later with
    /// `poll_transmit` (an ACK is off the peer's critical path; its
    /// requester reaps send completions lazily, and the local ACK timeout
    /// is milliseconds). Requests still go out.
    #[inline]
    pub fn poll_transmit_deferring_acks<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        if !self.may_transmit() {
            return None;
        }
        self.poll_transmit_deferring_body(now, buf, mem)
    }

    fn poll_transmit_deferring_body<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        if !self.only_acks_pending() {
            return self.poll_transmit_body(now, buf, mem);
        }
        if buf.len() < self.max_packet_len() || !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return None;
        }
        let t = self.poll_requester(now, buf, mem)?;
        self.stats.tx_packets += 1;
        Some(t)
    }

    /// A packet of `opcode` for `dqpn` under this QP's P_Key, without
    /// extension headers or payload: the caller adds what the opcode
    /// carries.
    pub(super) fn header(&self, opcode: OpCode, psn: Psn, dqpn: u32) -> roce::Repr<'static> {
        roce::Repr {
            bth: bth::Repr {
                opcode,
                pkey: self.pkey(),
                dest_qp: dqpn,
                psn: psn.value(),
                ..bth::Repr::default()
            },
            ..roce::Repr::default()
        }
    }

    fn poll_responder<M: Memory + ?Sized>(
        &mut self,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        let item = self.out.pop_front()?;
        let dqpn = self.attr.dest_qp_num;
        let ah = self.attr.ah;
        let msn = self.msn & 0x00ff_ffff;
        match item {
            RespOut::Ack {
                psn,
                aeth: kind,
                fatal,
            } => {
                let p = roce::Repr {
                    aeth: Some(aeth::Repr { kind, msn }),
                    ..self.header(OpCode::RC_ACKNOWLEDGE, psn, dqpn)
                };
                let (_, len) = p.emit_header_without_icrc(buf, 0).ok()?;
                let syn = kind.syndrome();
                match syn >> 5 {
                    0 => self.stats.acks_sent += 1,
                    1 => self.stats.rnr_naks_sent += 1,
                    _ => {
                        let i = usize::from((syn & 0x1f).min(4));
                        self.stats.naks_sent[i] += 1;
                    }
                }
                if fatal {
                    self.enter_error();
                }
                Some(Transmit { len, ah })
            }
            RespOut::Atomic { psn, orig } => {
                let p = roce::Repr {
                    aeth: Some(aeth::Repr { kind: ACK, msn }),
                    atomic_ack_eth: Some(atomic_ack_eth::Repr { orig_value: orig }),
                    ..self.header(OpCode::RC_ATOMIC_ACKNOWLEDGE, psn, dqpn)
                };
                let (_, len) = p.emit_header_without_icrc(buf, 0).ok()?;
                Some(Transmit { len, ah })
            }
            RespOut::Read {
                psn,
                va,
                rkey,
                remaining,
                first,
            } => {
                let mtu = self.mtu();
                let n = remaining.min(mtu);
                let last = n == remaining;
                let pos = pos_of(first, last);
                let opcode = OpCode::from_parts(Transport::Rc, Operation::RdmaReadResponse, pos)?;
                let mut p = self.header(opcode, psn, dqpn);
                if opcode.info()?.headers.aeth {
                    p.aeth = Some(aeth::Repr { kind: ACK, msn });
                }
                // Headers first, then the data read straight into place.
                let (at, len) = p.emit_header_without_icrc(buf, n as usize).ok()?;
                let r = if n == 0 {
                    Ok(())
                } else {
                    mem.read(
                        self.cfg.pd,
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
                        Some(Transmit { len, ah })
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
                    None => self.poll_responder(buf, mem),
                }
            }
        }
    }

    /// Whether the requester may not send: `max_inflight` packets are
    /// unacknowledged (rxe's 128 PSNs). A same-host request is one packet
    /// for all the PSNs of its message (16 for a 64 KiB WRITE at MTU
    /// 4096), so the window counts it once: counted in PSNs, a stream of
    /// them kept 8 in flight and the responder, woken for each one the
    /// ACKs let out, copied one per wake-up. PSNs in flight stay below
    /// [`SAME_HOST_MAX_PSNS`] (far from the half of the PSN space where
    /// before/after comparisons turn).
    fn window_full(&self) -> bool {
        debug_assert_eq!(self.same_host_extra, self.same_host_extra_sent());
        let psns = self.next_psn.diff(self.una);
        psns >= SAME_HOST_MAX_PSNS || psns - self.same_host_extra >= self.cfg.max_inflight as i32
    }

    /// [`Qp::same_host_extra`] counted from the send queue (after the
    /// send pointer moved back).
    pub(super) fn same_host_extra_sent(&self) -> i32 {
        self.sq
            .iter()
            .take(self.send_idx)
            .filter(|w| w.cma)
            .map(|w| w.npkts.saturating_sub(1) as i32)
            .sum()
    }

    /// Pops the oldest send WQE, moving the send pointer with it.
    pub(super) fn pop_sent_front(&mut self) -> Option<SendWqe> {
        let w = self.sq.pop_front()?;
        if self.send_idx > 0 {
            self.send_idx -= 1;
            if w.cma {
                self.same_host_extra -= w.npkts.saturating_sub(1) as i32;
            }
        }
        Some(w)
    }

    fn poll_requester<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        let rc = self.cfg.qp_type == QpType::Rc;
        if rc && self.rnr_wait.is_some_and(|t| now.now() < t) {
            return None;
        }
        self.rnr_wait = None;
        loop {
            let idx = self.send_idx;
            let w = self.sq.get(idx)?;
            if w.local_err.is_some() {
                return None;
            }
            let local = w.wr.op.is_local();
            if !w.started {
                if self.state == QpState::Sqd {
                    return None;
                }
                if rc
                    && w.wr.op.is_rd_atomic()
                    && self.rd_atomic_inflight >= u32::from(self.attr.max_rd_atomic.max(1))
                {
                    return None;
                }
                if rc && w.wr.fence && self.rd_atomic_inflight > 0 {
                    return None;
                }
                if self.cfg.qp_type == QpType::Ud && w.len > self.mtu() {
                    // IBTA C10-93.1.1: a UD message longer than the port MTU
                    // emits no packet and raises no error.
                    self.complete_front(WcStatus::Success);
                    continue;
                }
                if local {
                    // A bind or local invalidate: done here, in send-queue
                    // order; it completes once every earlier WR has.
                    if let Err(status) = self.execute_local(idx, mem) {
                        self.local_error(idx, status);
                        if self.state == QpState::Rts {
                            continue;
                        }
                        return None;
                    }
                    continue;
                }
                if let Err(status) = self.validate_wqe(idx, mem) {
                    self.local_error(idx, status);
                    if self.state == QpState::Rts {
                        continue;
                    }
                    return None;
                }
            }
            if local {
                // Done already (a go-back walked over it): nothing to send.
                self.send_idx += 1;
                continue;
            }
            if rc && self.window_full() {
                return None;
            }
            match self.build_request(now, idx, buf, mem) {
                Ok(t) => return Some(t),
                Err(status) => {
                    self.local_error(idx, status);
                    if self.state == QpState::Rts {
                        continue;
                    }
                    return None;
                }
            }
        }
    }

    /// Executes the local operation at `idx` (bind, local invalidate) and
    /// marks it done; it completes as soon as it is the oldest WR.
    fn execute_local<M: Memory + ?Sized>(
        &mut self,
        idx: usize,
        mem: &mut M,
    ) -> Result<(), WcStatus> {
        let pd = self.cfg.pd;
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
        self.complete_local_front();
        Ok(())
    }

    /// Completes the local operations at the head of the send queue: all
    /// earlier WRs are done, so they are too.
    pub(crate) fn complete_local_front(&mut self) {
        while self
            .sq
            .front()
            .is_some_and(|w| w.started && w.npkts == 0 && w.wr.op.is_local())
        {
            self.complete_front(WcStatus::Success);
        }
    }

    /// First-transmission checks of a send WQE; assigns its PSNs.
    fn validate_wqe<M: Memory + ?Sized>(&mut self, idx: usize, mem: &M) -> Result<(), WcStatus> {
        let mtu = self.mtu();
        let pd = self.cfg.pd;
        let ud = self.cfg.qp_type == QpType::Ud;
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

    /// A local error on WQE `idx`: RC completes it (in order) and goes to
    /// ERR; UC/UD complete it and go to SQE.
    fn local_error(&mut self, idx: usize, status: WcStatus) {
        if let Some(w) = self.sq.get_mut(idx) {
            w.local_err = Some(status);
        }
        self.drain_local_errors();
    }

    pub(super) fn drain_local_errors(&mut self) {
        let Some(w) = self.sq.front() else { return };
        let Some(status) = w.local_err else { return };
        let wc = self.wc(w.wr.wr_id, status, w.wr.op.wc_opcode());
        self.pop_sent_front();
        self.cq.push_back(wc);
        if self.cfg.qp_type == QpType::Rc {
            self.enter_error();
        } else {
            self.state = QpState::Sqe;
            self.flush_sq();
        }
    }

    fn build_request<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        idx: usize,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Result<Transmit, WcStatus> {
        if let Some(r) = self.build_same_host(now, idx, buf, mem) {
            return r;
        }
        let mtu = self.mtu();
        let t = self.transport();
        let psn = self.next_psn;
        let qkey = self.attr.qkey;
        let pd = self.cfg.pd;
        let qpn = self.cfg.qpn;
        let w = self.sq.get(idx).ok_or(WcStatus::LocQpOpErr)?;
        let (dqpn, ah) = match w.wr.ud {
            Some(d) if t == Transport::Ud => (d.remote_qpn, d.ah),
            _ => (self.attr.dest_qp_num, self.attr.ah),
        };
        let off = self.send_off;
        // (offset into the WR's data, length) of this packet's payload.
        let mut payload: Option<(u32, u32)> = None;
        let mut p = self.header(OpCode::RC_RDMA_READ_REQUEST, psn, dqpn);
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
            let wants_ack = w.wr.signaled
                || self.cfg.sq_sig_all
                || self.sq.len() * 2 >= self.cfg.max_send_wr
                || psn.before(self.high_psn);
            if !rd && ((ends && wants_ack) || self.pkts_since_ackreq >= self.cfg.ack_req_every) {
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
            self.stats.retransmitted += 1;
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
        if t == Transport::Rc {
            if self.rto.is_none() {
                self.rto = local_ack_timeout(self.attr.timeout).map(|d| now.now() + d);
            }
        } else if ends {
            // UC and UD complete as soon as the last packet leaves.
            self.una = self.next_psn;
            self.complete_front(WcStatus::Success);
            self.complete_local_front();
        }
        Ok(Transmit { len, ah })
    }
}
