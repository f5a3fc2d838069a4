//! The queue pair: what the verbs see (post, modify, query, poll), the
//! state machine, and the dispatch of packets and timers to the parts.
//!
//! [`Qp`] holds [`Common`] (configuration, attributes, state, counters,
//! completion queue) and its parts: the [`Requester`], the [`Completer`],
//! the [`Responder`] and the [`SameHost`] extension. A part reads `Common`
//! and reports into it (counters, completions, drops) through its methods;
//! only the `Qp` changes the state and the attributes, and a part that
//! must take the QP out of RTS says so ([`Failed`](super::Failed)) and lets the `Qp` do it.

use std::collections::VecDeque;
use std::sync::Arc;

use rdmakit_wire::opcode::{OpCode, Transport};
use rdmakit_wire::{bth, cnp, roce};

use super::completer::Completer;
use super::requester::Requester;
use super::responder::Responder;
use super::same_host::{self, SameHost};
use super::{
    parse, Arrival, DropReason, ModifyError, PostError, QpConfig, Stats, Transmit, ECT0, GRH_LEN,
    MAX_HEADER_LEN,
};
use crate::cc::{Params, Rate};
use crate::mem::Memory;
use crate::psn::Psn;
use crate::qp::{modify_is_ok, AttrMask, QpAttr, QpState, QpType};
use crate::time::{Clock, Instant};
use crate::wr::{RecvWr, SendWr, Sge, Wc, WcOpcode, WcStatus};

/// One queue pair: requester, completer and responder.
///
/// # Driving it
/// * [`Qp::post_send`] / [`Qp::post_recv`] queue work requests;
///   [`Qp::modify`] moves it through RESET → INIT → RTR → RTS (→ SQD, ERR).
/// * [`Qp::handle_packet`] feeds one received packet (BTH onwards; the caller
///   has checked and stripped the ICRC).
/// * [`Qp::handle_timeout`] must be called once `now` reaches
///   [`Qp::poll_timeout`].
/// * After **any** of these calls: call [`Qp::poll_transmit`] until it
///   returns `None`, then [`Qp::poll_completion`] until it returns `None`,
///   then read [`Qp::poll_timeout`] again — each call may have produced
///   packets, completions or a new deadline. `poll_transmit` returning `None`
///   while work is queued (window full, RNR wait, fence, `max_rd_atomic`)
///   means "nothing until the next `handle_packet` / `handle_timeout` /
///   `post_*`", never "call me again now".
///
/// Memory is never owned by the engine: every call that may move bytes takes
/// a [`Memory`], which validates key, PD, bounds and rights first.
#[derive(Debug)]
pub struct Qp {
    /// What every part reads and reports to.
    c: Common,
    /// The send queue and the requests built from it.
    req: Requester,
    /// Acknowledgements, retries and timers of those requests.
    comp: Completer,
    /// The receive queue and the peer's requests.
    resp: Responder,
    /// The one-copy path for large RC messages to a peer on this host.
    same_host: SameHost,
}

/// What every part of a QP reads (configuration, attributes, state) and
/// reports to (counters, completion queue, drops). The parts see it
/// through the methods below; only the [`Qp`] changes state and attributes.
#[derive(Debug)]
pub(super) struct Common {
    cfg: QpConfig,
    state: QpState,
    attr: QpAttr,
    stats: Stats,
    cq: VecDeque<Wc>,
    /// The traffic class of the QP's packets (the AV's
    /// `grh.traffic_class`), set by the driver.
    tclass: u8,
}

impl Qp {
    /// A new QP in RESET.
    pub fn new(cfg: QpConfig) -> Qp {
        Qp {
            c: Common {
                cfg,
                state: QpState::Reset,
                attr: QpAttr::default(),
                stats: Stats::default(),
                cq: VecDeque::new(),
                tclass: 0,
            },
            req: Requester::new(),
            comp: Completer::new(),
            resp: Responder::new(),
            same_host: SameHost::new(),
        }
    }

    /// This QP's number.
    pub fn qpn(&self) -> u32 {
        self.c.cfg.qpn
    }

    /// Transport service.
    pub fn qp_type(&self) -> QpType {
        self.c.cfg.qp_type
    }

    /// Current state.
    pub fn state(&self) -> QpState {
        self.c.state
    }

    /// Current attributes (`ibv_query_qp`); `qp_state` is the current state,
    /// `sq_psn` / `rq_psn` the next PSN to send / expected.
    pub fn attr(&self) -> QpAttr {
        QpAttr {
            qp_state: self.c.state,
            cur_qp_state: self.c.state,
            sq_psn: self.req.next_psn().value(),
            rq_psn: self.resp.epsn().value(),
            ..self.c.attr.clone()
        }
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.c.stats
    }

    /// Configuration.
    pub fn config(&self) -> &QpConfig {
        &self.c.cfg
    }

    /// Sets the traffic class the QP's packets carry (the AV's
    /// `grh.traffic_class`; the engine's [`AddressHandle`](crate::AddressHandle)
    /// is opaque, so the driver passes it along when it sets the AV; a
    /// RESET forgets it with the AV). Its DSCP (`tclass >> 2`) goes into
    /// every data packet's [`Transmit::tos`], its priority (DSCP >> 3)
    /// selects the `rp_enable_P` / `np_enable_P` bits. Its low two (ECN)
    /// bits are ignored, as mlx5 ignores them: the engine writes Not-ECT
    /// or ECT(0) itself. For UD the QP's class stands for every
    /// destination: a driver whose AHs carry their own class puts that
    /// DSCP in, keeping the low two (ECN) bits.
    pub fn set_traffic_class(&mut self, tclass: u8) {
        self.c.tclass = tclass;
    }

    /// The traffic class set by [`Qp::set_traffic_class`].
    pub fn traffic_class(&self) -> u8 {
        self.c.tclass
    }

    /// Replaces the congestion control parameters (a device's parameter
    /// file was written); the reaction point's state is kept and follows
    /// the new values from its next event.
    pub fn set_cc_params(&mut self, params: Arc<Params>) {
        self.c.cfg.cc = params;
    }

    /// Sets the port's rate (the reaction point's ceiling when
    /// `rp_max_rate` is 0).
    pub fn set_line_rate(&mut self, rate: Rate) {
        self.c.cfg.line_rate = rate;
    }

    /// The rate DCQCN holds this QP's requests to, `None` while a CNP
    /// does not limit it (it sends at will).
    pub fn cc_rate(&self) -> Option<Rate> {
        self.req.cc_rate()
    }

    /// Send WRs posted and not yet completed.
    pub fn sq_outstanding(&self) -> usize {
        self.req.outstanding()
    }

    /// Receive WRs posted and not yet completed (including one being filled).
    pub fn rq_outstanding(&self) -> usize {
        self.resp.outstanding()
    }

    /// Smallest transmit buffer [`Qp::poll_transmit`] accepts.
    pub fn max_packet_len(&self) -> usize {
        self.c.mtu() as usize + MAX_HEADER_LEN + 8 + 3
    }

    // ------------------------------------------------------------------
    // Control path
    // ------------------------------------------------------------------

    /// Brings a fresh QP from RESET up to `upto` (INIT, RTR or RTS) in
    /// table order, each step with the attributes of `attr` and the mask
    /// [`required_mask`](crate::qp::required_mask) gives: the bring-up every
    /// consumer of the bare engine (simulator, tests, benches, fuzzers) needs.
    ///
    /// # Errors
    /// The first step's [`ModifyError`]; `InvalidTransition` when `upto` is
    /// not INIT, RTR or RTS or the QP is not in RESET.
    pub fn bring_up(&mut self, attr: &QpAttr, upto: QpState) -> Result<(), ModifyError> {
        if !matches!(upto, QpState::Init | QpState::Rtr | QpState::Rts) {
            return Err(ModifyError::InvalidTransition);
        }
        let mut a = attr.clone();
        for next in [QpState::Init, QpState::Rtr, QpState::Rts] {
            let mask = crate::qp::required_mask(self.c.state, next, self.c.cfg.qp_type)
                .ok_or(ModifyError::InvalidTransition)?;
            a.qp_state = next;
            self.modify(&a, mask)?;
            if next == upto {
                break;
            }
        }
        Ok(())
    }

    /// `ibv_modify_qp`: validates `mask` against the modify-QP table for the
    /// current state and QP type, checks value ranges, then applies the
    /// attributes. Going to ERR flushes every outstanding WR with
    /// `WR_FLUSH_ERR`; going to RESET discards everything silently.
    ///
    /// # Errors
    /// [`ModifyError`]; the QP is unchanged on error.
    pub fn modify(&mut self, attr: &QpAttr, mask: AttrMask) -> Result<(), ModifyError> {
        let cur = if mask.contains(AttrMask::CUR_STATE) {
            if attr.cur_qp_state != self.c.state {
                return Err(ModifyError::CurStateMismatch);
            }
            attr.cur_qp_state
        } else {
            self.c.state
        };
        let next = if mask.contains(AttrMask::STATE) {
            attr.qp_state
        } else {
            cur
        };
        let cfg = &self.c.cfg;
        if !modify_is_ok(cur, next, cfg.qp_type, mask) {
            return Err(ModifyError::InvalidTransition);
        }
        if mask.contains(AttrMask::PKEY_INDEX)
            && usize::from(attr.pkey_index) >= cfg.pkey_table.len()
        {
            return Err(ModifyError::InvalidValue("pkey_index"));
        }
        if mask.contains(AttrMask::PORT) && attr.port_num == 0 {
            return Err(ModifyError::InvalidValue("port_num"));
        }
        if mask.contains(AttrMask::TIMEOUT) && attr.timeout > 31 {
            return Err(ModifyError::InvalidValue("timeout"));
        }
        if mask.contains(AttrMask::RETRY_CNT) && attr.retry_cnt > 7 {
            return Err(ModifyError::InvalidValue("retry_cnt"));
        }
        if mask.contains(AttrMask::RNR_RETRY) && attr.rnr_retry > 7 {
            return Err(ModifyError::InvalidValue("rnr_retry"));
        }
        if mask.contains(AttrMask::MIN_RNR_TIMER) && attr.min_rnr_timer > 31 {
            return Err(ModifyError::InvalidValue("min_rnr_timer"));
        }
        if mask.contains(AttrMask::MAX_QP_RD_ATOMIC) && attr.max_rd_atomic > cfg.max_rd_atomic_cap {
            return Err(ModifyError::InvalidValue("max_rd_atomic"));
        }
        if mask.contains(AttrMask::MAX_DEST_RD_ATOMIC)
            && attr.max_dest_rd_atomic > cfg.max_rd_atomic_cap
        {
            return Err(ModifyError::InvalidValue("max_dest_rd_atomic"));
        }
        if mask.contains(AttrMask::DEST_QPN) && attr.dest_qp_num > 0x00ff_ffff {
            return Err(ModifyError::InvalidValue("dest_qp_num"));
        }

        let a = &mut self.c.attr;
        if mask.contains(AttrMask::ACCESS_FLAGS) {
            a.qp_access_flags = attr.qp_access_flags;
        }
        if mask.contains(AttrMask::PKEY_INDEX) {
            a.pkey_index = attr.pkey_index;
        }
        if mask.contains(AttrMask::PORT) {
            a.port_num = attr.port_num;
        }
        if mask.contains(AttrMask::QKEY) {
            a.qkey = attr.qkey;
        }
        if mask.contains(AttrMask::AV) {
            a.ah = attr.ah;
        }
        if mask.contains(AttrMask::PATH_MTU) {
            a.path_mtu = attr.path_mtu;
        }
        if mask.contains(AttrMask::TIMEOUT) {
            a.timeout = attr.timeout;
        }
        if mask.contains(AttrMask::RETRY_CNT) {
            a.retry_cnt = attr.retry_cnt;
            self.comp.set_retry_cnt(attr.retry_cnt);
        }
        if mask.contains(AttrMask::RNR_RETRY) {
            a.rnr_retry = attr.rnr_retry;
            self.comp.set_rnr_retry(attr.rnr_retry);
        }
        if mask.contains(AttrMask::MIN_RNR_TIMER) {
            a.min_rnr_timer = attr.min_rnr_timer;
        }
        if mask.contains(AttrMask::MAX_QP_RD_ATOMIC) {
            a.max_rd_atomic = attr.max_rd_atomic;
        }
        if mask.contains(AttrMask::MAX_DEST_RD_ATOMIC) {
            a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        }
        if mask.contains(AttrMask::DEST_QPN) {
            a.dest_qp_num = attr.dest_qp_num;
        }
        if mask.contains(AttrMask::EN_SQD_ASYNC_NOTIFY) {
            a.en_sqd_async_notify = attr.en_sqd_async_notify;
        }
        if mask.contains(AttrMask::RQ_PSN) {
            self.resp.set_epsn(Psn::new(attr.rq_psn));
            a.rq_psn = attr.rq_psn;
        }
        if mask.contains(AttrMask::SQ_PSN) {
            let p = Psn::new(attr.sq_psn);
            self.req.set_psn(p);
            self.comp.set_una(p);
            a.sq_psn = attr.sq_psn;
        }
        match next {
            QpState::Reset => self.reset(),
            QpState::Err => self.enter_error(),
            _ => self.c.state = next,
        }
        Ok(())
    }

    fn reset(&mut self) {
        let cfg = self.c.cfg.clone();
        *self = Qp::new(cfg);
    }

    /// Flushes every outstanding WR with `WR_FLUSH_ERR` (send queue, then
    /// the receive being filled, then the receive queue) and enters ERR.
    fn enter_error(&mut self) {
        self.c.state = QpState::Err;
        self.flush_send_queue();
        self.resp.flush(&mut self.c);
    }

    /// A WR failed at the head of the send queue (its completion is
    /// queued): RC goes to ERR, UC and UD to SQE with the rest of the
    /// send queue flushed.
    fn send_queue_error(&mut self) {
        if self.c.cfg.qp_type == QpType::Rc {
            self.enter_error();
        } else {
            self.c.state = QpState::Sqe;
            self.flush_send_queue();
        }
    }

    fn flush_send_queue(&mut self) {
        self.req.flush(&mut self.c);
        self.comp.stop_timers();
    }

    /// `ibv_post_send`. In ERR (or SQE) the WR completes at once with
    /// `WR_FLUSH_ERR`.
    ///
    /// # Errors
    /// [`PostError`]; nothing is queued on error.
    pub fn post_send(&mut self, wr: SendWr) -> Result<(), PostError> {
        match self.c.state {
            QpState::Reset | QpState::Init | QpState::Rtr => return Err(PostError::InvalidState),
            _ => {}
        }
        let cfg = &self.c.cfg;
        let ok = wr.op.allowed_on(cfg.qp_type);
        if !ok {
            return Err(PostError::InvalidOpcode);
        }
        if wr.sg_list.len() > cfg.max_sge || (cfg.qp_type == QpType::Ud && wr.ud.is_none()) {
            return Err(PostError::InvalidArgument);
        }
        let len = super::sgl::sgl_len(&wr.sg_list);
        if len > 1 << 31 {
            return Err(PostError::InvalidArgument);
        }
        if self.req.outstanding() >= cfg.max_send_wr {
            return Err(PostError::QueueFull);
        }
        if matches!(self.c.state, QpState::Err | QpState::Sqe) {
            let wc = self.c.wc(wr.wr_id, WcStatus::WrFlushErr, wr.op.wc_opcode());
            self.c.complete(wc);
            return Ok(());
        }
        // Cannot fail: len <= 2^31 was checked above.
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        self.req.post(wr, len);
        Ok(())
    }

    /// `ibv_post_recv`. In ERR the WR completes at once with `WR_FLUSH_ERR`.
    ///
    /// # Errors
    /// [`PostError`]; nothing is queued on error.
    pub fn post_recv(&mut self, wr: RecvWr) -> Result<(), PostError> {
        if self.c.state == QpState::Reset {
            return Err(PostError::InvalidState);
        }
        if wr.sg_list.len() > self.c.cfg.max_sge {
            return Err(PostError::InvalidArgument);
        }
        if self.resp.outstanding() >= self.c.cfg.max_recv_wr {
            return Err(PostError::QueueFull);
        }
        if self.c.state == QpState::Err {
            let wc = self.c.wc(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv);
            self.c.complete(wc);
            return Ok(());
        }
        self.resp.post(wr);
        Ok(())
    }

    /// The emptied scatter/gather list of a completed send WR, if one is
    /// kept: a driver building the next WR reuses it instead of allocating.
    pub fn spare_send_sgl(&mut self) -> Option<Vec<Sge>> {
        self.req.spare_sgl()
    }

    /// As [`Qp::spare_send_sgl`], of a completed receive WR.
    pub fn spare_recv_sgl(&mut self) -> Option<Vec<Sge>> {
        self.resp.spare_sgl()
    }

    /// Next completion, oldest first. Call until `None` after every other call.
    pub fn poll_completion(&mut self) -> Option<Wc> {
        self.c.cq.pop_front()
    }

    /// When [`Qp::handle_timeout`] must next be called (retransmission,
    /// RNR timer, or the pacer letting a held request go), or `None` if no
    /// timer runs. Re-read after every call.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.comp.poll_timeout(), self.req.pace_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires the timers that are due at `now`: a local ACK timeout retries
    /// from the oldest unacknowledged PSN (or fails the oldest WR with
    /// `RETRY_EXC_ERR` once retries are exhausted); an expired RNR wait lets
    /// the requester resend; a due pacing deadline lets the held request
    /// go at the next [`Qp::poll_transmit`].
    pub fn handle_timeout(&mut self, now: impl Clock) {
        self.req.pace_expire(now);
        if self
            .comp
            .handle_timeout(now, &mut self.req, &mut self.c)
            .is_err()
        {
            self.enter_error();
        }
    }

    /// Lets this RC QP send messages longer than the path MTU as same-host
    /// requests (the driver carries this QP's packets to the peer over a
    /// same-host channel the kernel authenticated, and only there does a
    /// peer take them), or stops it. Turning it on forgets an earlier
    /// decline.
    pub fn set_same_host(&mut self, on: bool) {
        self.same_host.set(on);
    }

    /// Whether large messages currently go as same-host requests (on, RC,
    /// and not declined by the peer).
    pub fn same_host_active(&self) -> bool {
        self.same_host.active(&self.c)
    }

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
        self.poll_transmit_if_any(now, buf, mem, false)
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
        self.poll_transmit_if_any(now, buf, mem, true)
    }

    /// The guard of both `poll_transmit`s, then their body. Inline, so
    /// that the call that ends a driver's loop costs the check alone, not
    /// the frame of the body.
    #[inline]
    fn poll_transmit_if_any<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        buf: &mut [u8],
        mem: &mut M,
        defer_acks: bool,
    ) -> Option<Transmit> {
        if !self.may_transmit() {
            return None;
        }
        self.poll_transmit_body(now, buf, mem, defer_acks)
    }

    /// The body of [`Qp::poll_transmit`] and, with `defer_acks`, of
    /// [`Qp::poll_transmit_deferring_acks`]: a response first unless it is
    /// only plain ACKs that may wait, then the requester.
    fn poll_transmit_body<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        buf: &mut [u8],
        mem: &mut M,
        defer_acks: bool,
    ) -> Option<Transmit> {
        if buf.len() < self.max_packet_len() {
            return None;
        }
        // A CNP first, never held back with the ACKs.
        if let Some(t) = self.resp.poll_cnp(&mut self.c, buf) {
            self.c.stats.tx_packets += 1;
            return Some(t);
        }
        if !(defer_acks && self.only_acks_pending()) {
            if let Some((t, fatal)) = self.resp.poll(&mut self.c, buf, mem) {
                self.c.stats.tx_packets += 1;
                if fatal {
                    self.enter_error();
                }
                return Some(t);
            }
        }
        if !matches!(self.c.state, QpState::Rts | QpState::Sqd) {
            return None;
        }
        let t = self.poll_requester(now, buf, mem)?;
        self.c.stats.tx_packets += 1;
        Some(t)
    }

    /// Whether the responder holds only plain ACKs for the peer: nothing
    /// it is blocked on (no READ or atomic response, no NAK).
    pub fn only_acks_pending(&self) -> bool {
        self.resp.only_acks_pending()
    }

    /// Whether the responder has anything to send.
    pub fn responder_pending(&self) -> bool {
        self.resp.pending()
    }

    /// Whether a packet may be produced: the responder holds a response,
    /// or (in RTS or SQD) the send queue holds a WR at or after the send
    /// pointer. False is the cheap answer to the call that ends a driver's
    /// transmit loop (two of the three calls per message of a UDP
    /// ping-pong, ~130 instructions each through the queues).
    #[inline]
    fn may_transmit(&self) -> bool {
        self.resp.pending()
            || (matches!(self.c.state, QpState::Rts | QpState::Sqd) && self.req.unsent())
    }

    /// The requester's next packet, unless an RNR wait holds it back; an
    /// RC request arms the local ACK timer.
    fn poll_requester<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        let rc = self.c.cfg.qp_type == QpType::Rc;
        if rc && self.comp.rnr_waiting(now) {
            return None;
        }
        self.comp.end_rnr_wait();
        let una = self.comp.una();
        match self
            .req
            .poll(now, &mut self.c, &self.same_host, una, buf, mem)
        {
            Ok(Some(t)) => {
                if rc {
                    self.comp.arm(now, self.c.attr.timeout);
                }
                Some(t)
            }
            Ok(None) => None,
            Err(_) => {
                self.send_queue_error();
                None
            }
        }
    }

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
    /// [`Qp::handle_packet_with_grh`] to supply the real header. The packet
    /// counts as not CE-marked and from no known source (a CNP is
    /// ignored): [`Qp::handle_arrival`] says more.
    pub fn handle_packet<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        bytes: &[u8],
        mem: &mut M,
    ) {
        self.handle_packet_inner(now, bytes, Arrival::default(), None, mem);
    }

    /// [`Qp::handle_packet`] with what the driver read beside the bytes:
    /// whether the IP header carried CE and the source address as a path
    /// ([`Arrival`]), and for UD the GRH area (`None`: zeroed).
    ///
    /// A CE-marked packet for this QP counts `np_ecn_marked_roce_packets`
    /// and, when the notification point is on for the QP's priority and
    /// the last CNP is `np_min_time_between_cnps` old, queues a CNP to its
    /// sender (RC/UC: the connected QP; UD: the DETH's source QP at
    /// `arrival.src`). A CNP (opcode 0x81) for this QP lowers its rate
    /// (`rp_cnp_handled`) when the reaction point is on for its priority,
    /// the QP is RC or UC in RTS or SQD, and `arrival.src` is its AV;
    /// otherwise it counts `rp_cnp_ignored`. A CNP produces no answer and
    /// changes no PSN.
    pub fn handle_arrival<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        bytes: &[u8],
        arrival: Arrival,
        grh: Option<&[u8; GRH_LEN]>,
        mem: &mut M,
    ) {
        self.handle_packet_inner(now, bytes, arrival, grh, mem);
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
        self.handle_packet_inner(now, bytes, Arrival::default(), Some(grh), mem);
    }

    fn handle_packet_inner<M: Memory + ?Sized>(
        &mut self,
        now: impl Clock,
        bytes: &[u8],
        arrival: Arrival,
        grh: Option<&[u8; GRH_LEN]>,
        mem: &mut M,
    ) {
        if bytes.first() == Some(&OpCode::CNP.0) {
            self.handle_cnp(now, bytes, arrival);
            return;
        }
        if bytes
            .first()
            .is_some_and(|&op| rdmakit_wire::cma::is_cma_opcode(op))
        {
            same_host::handle_request(&mut self.resp, &mut self.c, bytes, mem);
            return;
        }
        let Some((p, info)) = parse(bytes) else {
            self.c.drop(DropReason::malformed);
            return;
        };
        let transport_ok = info.transport == self.c.transport();
        if !self
            .c
            .admit(self.c.refusal(p.bth.dest_qp, transport_ok, p.bth.pkey))
        {
            return;
        }
        if arrival.ce {
            let attr = &self.c.attr;
            let to = match self.c.cfg.qp_type {
                QpType::Rc | QpType::Uc => Some((attr.dest_qp_num, attr.ah)),
                QpType::Ud => p.deth.map(|d| d.src_qp).zip(arrival.src),
            };
            self.resp.marked(&mut self.c, now, to);
        }
        match self.c.cfg.qp_type {
            QpType::Rc if info.operation.is_response() => {
                let r = self.comp.handle_response(
                    now,
                    &p,
                    &info,
                    &mut self.req,
                    &mut self.same_host,
                    &mut self.c,
                    mem,
                );
                if r.is_err() {
                    self.enter_error();
                }
                if self.c.state != QpState::Err {
                    self.req.catch_up(self.comp.una(), self.c.mtu());
                    if self.req.drain_local_errors(&mut self.c).is_err() {
                        self.send_queue_error();
                    }
                }
            }
            QpType::Rc => self
                .resp
                .rc_request(&p, &info, arrival.answer, &mut self.c, mem),
            QpType::Uc => self.resp.uc_request(&p, &info, &mut self.c, mem),
            QpType::Ud => self.resp.ud_request(&p, grh, &mut self.c, mem),
        }
    }
}

impl Qp {
    /// A CNP (opcode 0x81): feeds the reaction point or is ignored; never
    /// answered. One for another QP or with a P_Key the QP does not
    /// match is dropped as any packet would be.
    fn handle_cnp(&mut self, now: impl Clock, bytes: &[u8], arrival: Arrival) {
        let Ok(cnp) = cnp::Repr::parse_without_icrc(bytes) else {
            self.c.drop(DropReason::malformed);
            return;
        };
        if cnp.dest_qp != self.c.cfg.qpn {
            self.c.drop(DropReason::wrong_qpn);
            return;
        }
        // A CNP outside the QP's partition is dropped as any packet is
        // (IBA 9.6.1.1: a P_Key violation), not counted as a CNP.
        if !pkey_match(cnp.pkey, self.c.pkey()) {
            self.c.drop(DropReason::pkey);
            return;
        }
        let connected = matches!(self.c.cfg.qp_type, QpType::Rc | QpType::Uc)
            && matches!(self.c.state, QpState::Rts | QpState::Sqd);
        if connected && arrival.src == Some(self.c.attr.ah) && self.c.rp_enabled() {
            self.c.stats.rp_cnp_handled += 1;
            self.req.on_cnp(&self.c, now);
        } else {
            self.c.stats.rp_cnp_ignored += 1;
        }
    }
}

impl Common {
    /// The configuration.
    pub(super) fn cfg(&self) -> &QpConfig {
        &self.cfg
    }

    /// The attributes as last modified.
    pub(super) fn attr(&self) -> &QpAttr {
        &self.attr
    }

    /// The current state.
    pub(super) fn state(&self) -> QpState {
        self.state
    }

    /// The counters, to count into.
    pub(super) fn stats_mut(&mut self) -> &mut Stats {
        &mut self.stats
    }

    /// The payload bytes per packet: the path MTU, or the port MTU for UD
    /// (which has no path MTU attribute).
    pub(super) fn mtu(&self) -> u32 {
        match self.cfg.qp_type {
            QpType::Ud => self.cfg.port_mtu.bytes(),
            _ => self.attr.path_mtu.bytes(),
        }
    }

    /// The QP's priority: its DSCP >> 3 (mlx5's default DSCP → priority
    /// map).
    fn prio(&self) -> u8 {
        self.tclass >> 5
    }

    /// Whether the reaction point runs for this QP's priority.
    pub(super) fn rp_enabled(&self) -> bool {
        self.cfg.cc.rp_enabled(self.prio())
    }

    /// Whether the notification point runs for this QP's priority.
    pub(super) fn np_enabled(&self) -> bool {
        self.cfg.cc.np_enabled(self.prio())
    }

    /// The IP TOS byte of a data packet: the traffic class's DSCP, and
    /// ECT(0) when this QP reacts to congestion (a sender that does not
    /// slow down must not ask switches to mark rather than drop).
    pub(super) fn data_tos(&self) -> u8 {
        let dscp = self.tclass & 0xfc;
        if self.rp_enabled() {
            dscp | ECT0
        } else {
            dscp
        }
    }

    /// The P_Key the QP's packets carry (its `pkey_index` in the table).
    pub(super) fn pkey(&self) -> u16 {
        self.cfg
            .pkey_table
            .get(usize::from(self.attr.pkey_index))
            .copied()
            .unwrap_or(0xffff)
    }

    /// The transport of the QP's opcodes.
    pub(super) fn transport(&self) -> Transport {
        match self.cfg.qp_type {
            QpType::Rc => Transport::Rc,
            QpType::Uc => Transport::Uc,
            QpType::Ud => Transport::Ud,
        }
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

    /// A completion of this QP with no data (the caller fills in lengths,
    /// immediate data, source QP).
    pub(super) fn wc(&self, wr_id: u64, status: WcStatus, opcode: WcOpcode) -> Wc {
        Wc {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            imm_data: None,
            invalidated_rkey: None,
            qp_num: self.cfg.qpn,
            src_qp: 0,
            grh: false,
            vendor_err: 0,
        }
    }

    /// Queues a completion for [`Qp::poll_completion`].
    pub(super) fn complete(&mut self, wc: Wc) {
        self.cq.push_back(wc);
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

    /// Counts a packet dropped for `r`.
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
}

/// P_Key match: same 15-bit key, at least one side a full member.
fn pkey_match(a: u16, b: u16) -> bool {
    (a & 0x7fff) == (b & 0x7fff) && (a | b) & 0x8000 != 0 && (a & 0x7fff) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Pd;
    use crate::qp::Access;
    use crate::wr::SendOp;

    #[test]
    fn completed_wrs_hand_their_scatter_lists_back_for_reuse() {
        use crate::sim::{LinkConfig, Network};
        let mut net = Network::new(LinkConfig::default(), 7);
        let (a, b) = net.connected_pair(QpType::Rc);
        let (lk, _) = net
            .node_mut(a)
            .mem
            .register(Pd(1), 0x1000, 64, Access::LOCAL_WRITE);
        let (rk, _) = net
            .node_mut(b)
            .mem
            .register(Pd(1), 0x8000, 64, Access::LOCAL_WRITE);
        let sge = |addr, length, lkey| Sge { addr, length, lkey };
        net.qp_mut(b)
            .post_recv(RecvWr {
                wr_id: 1,
                sg_list: vec![sge(0x8000, 64, rk)],
            })
            .unwrap();
        net.qp_mut(a)
            .post_send(SendWr::new(2, SendOp::Send, vec![sge(0x1000, 8, lk)]))
            .unwrap();
        assert!(
            net.qp_mut(a).spare_send_sgl().is_none(),
            "nothing completed yet"
        );
        assert!(
            net.qp_mut(b).spare_recv_sgl().is_none(),
            "nothing completed yet"
        );
        net.run_until_idle();
        let done = |w: &[Wc]| w.iter().filter(|w| w.status == WcStatus::Success).count();
        assert_eq!(done(&net.take_completions(a)), 1);
        assert_eq!(done(&net.take_completions(b)), 1);
        for spare in [
            net.qp_mut(a).spare_send_sgl(),
            net.qp_mut(b).spare_recv_sgl(),
        ] {
            let v = spare.expect("the completed WR's list is kept");
            assert!(v.is_empty() && v.capacity() >= 1, "{v:?}");
        }
        assert!(net.qp_mut(a).spare_send_sgl().is_none(), "one list per WR");
    }

    #[test]
    fn pkey_rules() {
        assert!(pkey_match(0xffff, 0xffff));
        assert!(pkey_match(0x7fff, 0xffff));
        assert!(!pkey_match(0x7fff, 0x7fff), "two limited members");
        assert!(!pkey_match(0x8001, 0xffff));
        assert!(!pkey_match(0x8000, 0x8000), "invalid P_Key");
    }
}
