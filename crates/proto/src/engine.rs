//! The per-QP engine: requester, responder and completer of one RC, UC or UD
//! queue pair.
//!
//! # Driving it
//! * [`Qp::post_send`] / [`Qp::post_recv`] queue work requests.
//! * [`Qp::handle_packet`] feeds one received packet (BTH onwards, ICRC already
//!   checked and stripped by the caller).
//! * [`Qp::handle_timeout`] must be called once `now` reaches
//!   [`Qp::poll_timeout`].
//! * After **any** of the calls above (and after [`Qp::modify`]) call
//!   [`Qp::poll_transmit`] until it returns `None`, then
//!   [`Qp::poll_completion`] until it returns `None`, then read
//!   [`Qp::poll_timeout`] again: each call may have produced packets,
//!   completions or a new deadline. `poll_transmit` may return `None` while
//!   work is pending (window full, RNR wait, fence): it will have more after
//!   the next `handle_packet` or `handle_timeout`.
//!
//! Memory is never owned by the engine: every call that may move bytes takes
//! a [`Memory`], which validates key, PD, bounds and rights first.

use std::collections::VecDeque;

use crate::mem::{AtomicOp, Key, MemError, Memory, Pd};
use crate::packet::{
    opcode_for, syndrome, AtomicEth, Bth, Deth, Kind, Packet, Pos, Reth, Transport,
};
use crate::psn::Psn;
use crate::qp::{modify_is_ok, Access, AddressHandle, AttrMask, Mtu, QpAttr, QpState, QpType};
use crate::time::{local_ack_timeout, rnr_timer, Instant};
use crate::wr::{RecvWr, SendOp, SendWr, Sge, Wc, WcOpcode, WcStatus};

mod complete;
mod receive;

/// Largest header stack the engine emits (BTH + RETH + ImmDt, or BTH +
/// AtomicETH); a transmit buffer of `mtu + MAX_HEADER_LEN + 3` always fits.
pub const MAX_HEADER_LEN: usize = 12 + 28 + 4;

/// Size of the GRH area at the start of a UD receive buffer.
pub const GRH_LEN: usize = 40;

/// Q_Key bit that a non-privileged sender may not use.
const QKEY_CONTROLLED: u32 = 0x8000_0000;

/// Static configuration of a QP (what `ibv_create_qp` fixes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// This QP's number (24 bits).
    pub qpn: u32,
    /// Transport service.
    pub qp_type: QpType,
    /// Protection domain of the QP; memory of other PDs is refused.
    pub pd: Pd,
    /// Send queue depth.
    pub max_send_wr: usize,
    /// Receive queue depth.
    pub max_recv_wr: usize,
    /// Scatter/gather entries per WR.
    pub max_sge: usize,
    /// Every send WR generates a completion.
    pub sq_sig_all: bool,
    /// The port's P_Key table (`pkey_index` indexes it).
    pub pkey_table: Vec<u16>,
    /// Most PSNs the requester keeps unacknowledged (rxe: 128).
    pub max_inflight: u32,
    /// The requester sets AckReq at least every this many packets (rxe: 64).
    pub ack_req_every: u32,
    /// Device limit for `max_rd_atomic` / `max_dest_rd_atomic`.
    pub max_rd_atomic_cap: u8,
    /// The port's active MTU: the largest UD message (UD QPs have no
    /// `PATH_MTU` attribute).
    pub port_mtu: Mtu,
}

impl QpConfig {
    /// A configuration with rxe-like defaults.
    pub fn new(qpn: u32, qp_type: QpType, pd: Pd) -> QpConfig {
        QpConfig {
            qpn: qpn & 0x00ff_ffff,
            qp_type,
            pd,
            max_send_wr: 1024,
            max_recv_wr: 1024,
            max_sge: 16,
            sq_sig_all: false,
            pkey_table: vec![0xffff],
            max_inflight: 128,
            ack_req_every: 64,
            max_rd_atomic_cap: 16,
            port_mtu: Mtu::Mtu1024,
        }
    }
}

/// Why `post_send` / `post_recv` refused a work request (the verbs call
/// would return `EINVAL` / `ENOMEM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum PostError {
    /// The QP state does not accept this queue yet (RESET, or INIT/RTR for sends).
    #[error("QP state does not accept work requests on this queue")]
    InvalidState,
    /// The queue is full.
    #[error("work queue full")]
    QueueFull,
    /// The operation does not exist for this QP type.
    #[error("operation not supported by this QP type")]
    InvalidOpcode,
    /// Too many SGEs, length above 2^31, or a UD send without destination.
    #[error("invalid work request")]
    InvalidArgument,
}

/// Why `modify` refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ModifyError {
    /// Not allowed by the modify-QP table (state pair or attribute mask).
    #[error("invalid state transition or attribute mask")]
    InvalidTransition,
    /// `CUR_STATE` does not match the QP's state.
    #[error("cur_qp_state does not match")]
    CurStateMismatch,
    /// An attribute value is out of range.
    #[error("attribute {0} out of range")]
    InvalidValue(&'static str),
}

/// One packet produced by [`Qp::poll_transmit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Bytes written at the start of the caller's buffer.
    pub len: usize,
    /// Where to send it.
    pub ah: AddressHandle,
}

/// Counters of one QP (for tests, metrics and the sweep snapshots).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets emitted.
    pub tx_packets: u64,
    /// Packets accepted by `handle_packet` (parsed and addressed to us).
    pub rx_packets: u64,
    /// Requester packets sent again (PSN below the high-water mark).
    pub retransmitted: u64,
    /// Local ACK timeouts that led to a retry.
    pub timeouts: u64,
    /// ACK timeouts with no ACK requested: the unsignaled WRs' tail was
    /// sent without AckReq and nothing followed, so the last packet went
    /// again with it (no retry consumed; not a loss).
    pub ack_probes: u64,
    /// Go-back-N restarts.
    pub go_backs: u64,
    /// ACKs sent (coalesced ones count once).
    pub acks_sent: u64,
    /// NAKs sent by code: PSN sequence, invalid request, remote access,
    /// remote operational, invalid RD request.
    pub naks_sent: [u64; 5],
    /// RNR NAKs sent.
    pub rnr_naks_sent: u64,
    /// NAKs received (any code).
    pub naks_received: u64,
    /// RNR NAKs received.
    pub rnr_naks_received: u64,
    /// Duplicate requests seen by the responder.
    pub duplicates: u64,
    /// READ responses replayed from the responder-resources ring.
    pub read_replays: u64,
    /// Atomic responses replayed (never re-executed).
    pub atomic_replays: u64,
    /// Packets dropped, all reasons (the sum of `drops`).
    pub dropped: u64,
    /// Packets dropped, by reason.
    pub drops: DropCounts,
}

/// Why packets were dropped without an answer (diagnostics: a P_Key or
/// Q_Key mismatch, or traffic for a QP in the wrong state, shows up here).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounts {
    /// Truncated, unknown opcode, bad version or pad, bad length.
    pub malformed: u64,
    /// QP state does not accept this packet (RESET/INIT/ERR, responses in RTR,
    /// requests after a fatal NAK).
    pub bad_state: u64,
    /// Destination QPN is not this QP.
    pub wrong_qpn: u64,
    /// Opcode of another transport service (UC packet to an RC QP, ...).
    pub wrong_transport: u64,
    /// P_Key does not match the QP's partition.
    pub pkey: u64,
    /// UD Q_Key does not match.
    pub qkey: u64,
    /// Out of sequence: future PSN (after the one NAK), stale or bogus
    /// response PSN, UC gap or duplicate.
    pub sequence: u64,
    /// Duplicate READ/atomic without a matching responder resource, or a
    /// duplicate flood.
    pub resources: u64,
    /// UC request refused (rights, bounds, length): UC sends no NAK.
    pub refused: u64,
    /// UC/UD message with no receive WQE posted.
    pub no_receive: u64,
}

#[allow(non_camel_case_types)]
#[derive(Clone, Copy)]
enum DropReason {
    malformed,
    bad_state,
    wrong_qpn,
    wrong_transport,
    pkey,
    qkey,
    sequence,
    resources,
    refused,
    no_receive,
}

#[derive(Clone, Debug)]
struct SendWqe {
    wr: SendWr,
    len: u32,
    first_psn: Psn,
    npkts: u32,
    started: bool,
    local_err: Option<WcStatus>,
}

impl SendWqe {
    fn last_psn(&self) -> Psn {
        self.first_psn.add(self.npkts.saturating_sub(1))
    }
}

#[derive(Clone, Debug)]
struct RecvWqe {
    wr: RecvWr,
    len: u64,
}

#[derive(Clone, Debug)]
struct InMsg {
    kind: Kind,
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
        syndrome: u8,
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
enum RespErr {
    /// No receive WQE: RNR NAK (RC) or drop (UC/UD).
    Rnr,
    /// Class of error answered with a NAK (RC) and, for RC, QP to ERR; the
    /// status is for a consumed receive WQE, if any.
    Nak(u8, Option<WcStatus>),
}

/// One queue pair: requester, responder and completer.
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
    cfg: QpConfig,
    state: QpState,
    attr: QpAttr,
    stats: Stats,
    cq: VecDeque<Wc>,
    // requester / completer
    sq: VecDeque<SendWqe>,
    send_idx: usize,
    send_off: u32,
    next_psn: Psn,
    high_psn: Psn,
    una: Psn,
    retry_left: u8,
    rnr_left: u8,
    rto: Option<Instant>,
    rnr_wait: Option<Instant>,
    rd_atomic_inflight: u32,
    pkts_since_ackreq: u32,
    /// The newest request that asks for an answer (AckReq, READ, atomic).
    asked_psn: Option<Psn>,
    goback_guard: Option<Psn>,
    // responder
    rq: VecDeque<RecvWqe>,
    epsn: Psn,
    msn: u32,
    nak_sent: bool,
    cur: Option<InMsg>,
    uc_drop: bool,
    resources: VecDeque<Resource>,
    out: VecDeque<RespOut>,
    fatal_pending: bool,
}

fn sgl_len(sgl: &[Sge]) -> u64 {
    sgl.iter().map(|s| u64::from(s.length)).sum()
}

fn gather<M: Memory + ?Sized>(
    mem: &M,
    pd: Pd,
    sgl: &[Sge],
    mut off: u64,
    out: &mut [u8],
) -> Result<(), MemError> {
    let mut done = 0usize;
    for s in sgl {
        if done == out.len() {
            break;
        }
        let l = u64::from(s.length);
        if off >= l {
            off -= l;
            continue;
        }
        let n = usize::try_from(l - off)
            .unwrap_or(usize::MAX)
            .min(out.len() - done);
        let addr = s.addr.checked_add(off).ok_or(MemError::OutOfBounds)?;
        mem.read(
            pd,
            Key::Local(s.lkey),
            addr,
            &mut out[done..done + n],
            Access::empty(),
        )?;
        done += n;
        off = 0;
    }
    if done < out.len() {
        return Err(MemError::OutOfBounds);
    }
    Ok(())
}

fn scatter<M: Memory + ?Sized>(
    mem: &mut M,
    pd: Pd,
    sgl: &[Sge],
    mut off: u64,
    data: &[u8],
) -> Result<(), MemError> {
    // Validate the whole range first so that a failure moves no byte.
    let mut o = off;
    let mut left = data.len() as u64;
    for s in sgl {
        if left == 0 {
            break;
        }
        let l = u64::from(s.length);
        if o >= l {
            o -= l;
            continue;
        }
        let n = (l - o).min(left);
        let addr = s.addr.checked_add(o).ok_or(MemError::OutOfBounds)?;
        mem.check(pd, Key::Local(s.lkey), addr, n, Access::LOCAL_WRITE)?;
        left -= n;
        o = 0;
    }
    if left > 0 {
        return Err(MemError::OutOfBounds);
    }
    let mut done = 0usize;
    for s in sgl {
        if done == data.len() {
            break;
        }
        let l = u64::from(s.length);
        if off >= l {
            off -= l;
            continue;
        }
        let n = usize::try_from(l - off)
            .unwrap_or(usize::MAX)
            .min(data.len() - done);
        let addr = s.addr.checked_add(off).ok_or(MemError::OutOfBounds)?;
        mem.write(
            pd,
            Key::Local(s.lkey),
            addr,
            &data[done..done + n],
            Access::LOCAL_WRITE,
        )?;
        done += n;
        off = 0;
    }
    Ok(())
}

fn pkts_for(len: u32, mtu: u32) -> u32 {
    len.div_ceil(mtu).max(1)
}

fn pos_of(first: bool, last: bool) -> Pos {
    match (first, last) {
        (true, true) => Pos::Only,
        (true, false) => Pos::First,
        (false, true) => Pos::Last,
        (false, false) => Pos::Middle,
    }
}

fn nak_status(code: u8) -> WcStatus {
    match code {
        1 => WcStatus::RemInvReqErr,
        2 => WcStatus::RemAccessErr,
        3 => WcStatus::RemOpErr,
        4 => WcStatus::RemInvRdReqErr,
        _ => WcStatus::BadRespErr,
    }
}

impl Qp {
    /// A new QP in RESET.
    pub fn new(cfg: QpConfig) -> Qp {
        Qp {
            cfg,
            state: QpState::Reset,
            attr: QpAttr::default(),
            stats: Stats::default(),
            cq: VecDeque::new(),
            sq: VecDeque::new(),
            send_idx: 0,
            send_off: 0,
            next_psn: Psn::new(0),
            high_psn: Psn::new(0),
            una: Psn::new(0),
            retry_left: 0,
            rnr_left: 0,
            rto: None,
            rnr_wait: None,
            rd_atomic_inflight: 0,
            asked_psn: None,
            pkts_since_ackreq: 0,
            goback_guard: None,
            rq: VecDeque::new(),
            epsn: Psn::new(0),
            msn: 0,
            nak_sent: false,
            cur: None,
            uc_drop: false,
            resources: VecDeque::new(),
            out: VecDeque::new(),
            fatal_pending: false,
        }
    }

    /// This QP's number.
    pub fn qpn(&self) -> u32 {
        self.cfg.qpn
    }

    /// Transport service.
    pub fn qp_type(&self) -> QpType {
        self.cfg.qp_type
    }

    /// Current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// Current attributes (`ibv_query_qp`); `qp_state` is the current state,
    /// `sq_psn` / `rq_psn` the next PSN to send / expected.
    pub fn attr(&self) -> QpAttr {
        QpAttr {
            qp_state: self.state,
            cur_qp_state: self.state,
            sq_psn: self.next_psn.value(),
            rq_psn: self.epsn.value(),
            ..self.attr.clone()
        }
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Configuration.
    pub fn config(&self) -> &QpConfig {
        &self.cfg
    }

    /// Send WRs posted and not yet completed.
    pub fn sq_outstanding(&self) -> usize {
        self.sq.len()
    }

    /// Receive WRs posted and not yet completed (including one being filled).
    pub fn rq_outstanding(&self) -> usize {
        self.rq.len() + usize::from(self.cur.as_ref().is_some_and(|c| c.recv.is_some()))
    }

    /// Smallest transmit buffer [`Qp::poll_transmit`] accepts.
    pub fn max_packet_len(&self) -> usize {
        self.mtu() as usize + MAX_HEADER_LEN + 8 + 3
    }

    fn mtu(&self) -> u32 {
        match self.cfg.qp_type {
            QpType::Ud => self.cfg.port_mtu.bytes(),
            _ => self.attr.path_mtu.bytes(),
        }
    }

    fn pkey(&self) -> u16 {
        self.cfg
            .pkey_table
            .get(usize::from(self.attr.pkey_index))
            .copied()
            .unwrap_or(0xffff)
    }

    fn transport(&self) -> Transport {
        match self.cfg.qp_type {
            QpType::Rc => Transport::Rc,
            QpType::Uc => Transport::Uc,
            QpType::Ud => Transport::Ud,
        }
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
            let mask = crate::qp::required_mask(self.state, next, self.cfg.qp_type)
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
            if attr.cur_qp_state != self.state {
                return Err(ModifyError::CurStateMismatch);
            }
            attr.cur_qp_state
        } else {
            self.state
        };
        let next = if mask.contains(AttrMask::STATE) {
            attr.qp_state
        } else {
            cur
        };
        if !modify_is_ok(cur, next, self.cfg.qp_type, mask) {
            return Err(ModifyError::InvalidTransition);
        }
        if mask.contains(AttrMask::PKEY_INDEX)
            && usize::from(attr.pkey_index) >= self.cfg.pkey_table.len()
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
        if mask.contains(AttrMask::MAX_QP_RD_ATOMIC)
            && attr.max_rd_atomic > self.cfg.max_rd_atomic_cap
        {
            return Err(ModifyError::InvalidValue("max_rd_atomic"));
        }
        if mask.contains(AttrMask::MAX_DEST_RD_ATOMIC)
            && attr.max_dest_rd_atomic > self.cfg.max_rd_atomic_cap
        {
            return Err(ModifyError::InvalidValue("max_dest_rd_atomic"));
        }
        if mask.contains(AttrMask::DEST_QPN) && attr.dest_qp_num > 0x00ff_ffff {
            return Err(ModifyError::InvalidValue("dest_qp_num"));
        }

        let a = &mut self.attr;
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
            self.retry_left = attr.retry_cnt;
        }
        if mask.contains(AttrMask::RNR_RETRY) {
            a.rnr_retry = attr.rnr_retry;
            self.rnr_left = attr.rnr_retry;
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
            self.epsn = Psn::new(attr.rq_psn);
            a.rq_psn = attr.rq_psn;
        }
        if mask.contains(AttrMask::SQ_PSN) {
            let p = Psn::new(attr.sq_psn);
            self.next_psn = p;
            self.high_psn = p;
            self.una = p;
            a.sq_psn = attr.sq_psn;
        }
        match next {
            QpState::Reset => self.reset(),
            QpState::Err => self.enter_error(),
            _ => self.state = next,
        }
        Ok(())
    }

    fn reset(&mut self) {
        let cfg = self.cfg.clone();
        *self = Qp::new(cfg);
    }

    /// Flushes every outstanding WR with `WR_FLUSH_ERR` and enters ERR.
    fn enter_error(&mut self) {
        self.state = QpState::Err;
        self.flush_sq();
        if let Some(c) = self.cur.take() {
            if let Some(r) = c.recv {
                self.push_flush_recv(r.wr.wr_id);
            }
        }
        while let Some(r) = self.rq.pop_front() {
            self.push_flush_recv(r.wr.wr_id);
        }
        self.out.clear();
        self.fatal_pending = false;
    }

    fn flush_sq(&mut self) {
        while let Some(w) = self.sq.pop_front() {
            let wc = self.wc(w.wr.wr_id, WcStatus::WrFlushErr, w.wr.op.wc_opcode());
            self.cq.push_back(wc);
        }
        self.send_idx = 0;
        self.send_off = 0;
        self.rd_atomic_inflight = 0;
        self.rto = None;
        self.rnr_wait = None;
    }

    fn push_flush_recv(&mut self, wr_id: u64) {
        let wc = self.wc(wr_id, WcStatus::WrFlushErr, WcOpcode::Recv);
        self.cq.push_back(wc);
    }

    fn wc(&self, wr_id: u64, status: WcStatus, opcode: WcOpcode) -> Wc {
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

    /// `ibv_post_send`. In ERR (or SQE) the WR completes at once with
    /// `WR_FLUSH_ERR`.
    ///
    /// # Errors
    /// [`PostError`]; nothing is queued on error.
    pub fn post_send(&mut self, wr: SendWr) -> Result<(), PostError> {
        match self.state {
            QpState::Reset | QpState::Init | QpState::Rtr => return Err(PostError::InvalidState),
            _ => {}
        }
        let ok = wr.op.allowed_on(self.cfg.qp_type);
        if !ok {
            return Err(PostError::InvalidOpcode);
        }
        if wr.sg_list.len() > self.cfg.max_sge
            || (self.cfg.qp_type == QpType::Ud && wr.ud.is_none())
        {
            return Err(PostError::InvalidArgument);
        }
        let len = sgl_len(&wr.sg_list);
        if len > 1 << 31 {
            return Err(PostError::InvalidArgument);
        }
        if self.sq.len() >= self.cfg.max_send_wr {
            return Err(PostError::QueueFull);
        }
        if matches!(self.state, QpState::Err | QpState::Sqe) {
            let wc = self.wc(wr.wr_id, WcStatus::WrFlushErr, wr.op.wc_opcode());
            self.cq.push_back(wc);
            return Ok(());
        }
        // Cannot fail: len <= 2^31 was checked above.
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        self.sq.push_back(SendWqe {
            wr,
            len,
            first_psn: Psn::new(0),
            npkts: 0,
            started: false,
            local_err: None,
        });
        Ok(())
    }

    /// `ibv_post_recv`. In ERR the WR completes at once with `WR_FLUSH_ERR`.
    ///
    /// # Errors
    /// [`PostError`]; nothing is queued on error.
    pub fn post_recv(&mut self, wr: RecvWr) -> Result<(), PostError> {
        if self.state == QpState::Reset {
            return Err(PostError::InvalidState);
        }
        if wr.sg_list.len() > self.cfg.max_sge {
            return Err(PostError::InvalidArgument);
        }
        if self.rq_outstanding() >= self.cfg.max_recv_wr {
            return Err(PostError::QueueFull);
        }
        if self.state == QpState::Err {
            self.push_flush_recv(wr.wr_id);
            return Ok(());
        }
        let len = sgl_len(&wr.sg_list);
        self.rq.push_back(RecvWqe { wr, len });
        Ok(())
    }

    /// Next completion, oldest first. Call until `None` after every other call.
    pub fn poll_completion(&mut self) -> Option<Wc> {
        self.cq.pop_front()
    }

    /// When [`Qp::handle_timeout`] must next be called (retransmission or
    /// RNR timer), or `None` if no timer runs. Re-read after every call.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.rto, self.rnr_wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires the timers that are due at `now`: a local ACK timeout retries
    /// from the oldest unacknowledged PSN (or fails the oldest WR with
    /// `RETRY_EXC_ERR` once retries are exhausted); an expired RNR wait lets
    /// the requester resend.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.rnr_wait.is_some_and(|t| t <= now) {
            self.rnr_wait = None;
        }
        if self.rto.is_some_and(|t| t <= now) {
            self.rto = None;
            if self.state == QpState::Err || self.cfg.qp_type != QpType::Rc {
                return;
            }
            if self.una != self.next_psn {
                let asked = self.asked_psn.is_some_and(|p| !p.before(self.una));
                if !asked && self.next_psn == self.high_psn {
                    // Nothing unacknowledged asked for an ACK (an unsignaled
                    // tail): not a loss. Send the last packet again, with
                    // AckReq; its ACK covers all. If it goes unanswered too,
                    // the next timeout is a real one.
                    self.stats.ack_probes += 1;
                    let last = self.high_psn.sub(1);
                    self.rewind(now, last);
                } else {
                    self.stats.timeouts += 1;
                    self.go_back(now, true);
                }
            }
        }
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
    pub fn poll_transmit<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
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
                        syndrome: syndrome::ACK,
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

    /// [`Qp::poll_transmit`], except that plain ACKs are held back while
    /// they are all the responder has: the caller sends them later with
    /// `poll_transmit` (an ACK is off the peer's critical path; its
    /// requester reaps send completions lazily, and the local ACK timeout
    /// is milliseconds). Requests still go out.
    pub fn poll_transmit_deferring_acks<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        if !self.only_acks_pending() {
            return self.poll_transmit(now, buf, mem);
        }
        if buf.len() < self.max_packet_len() || !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return None;
        }
        let t = self.poll_requester(now, buf, mem)?;
        self.stats.tx_packets += 1;
        Some(t)
    }

    fn bth(&self, opcode: u8, psn: Psn, dqpn: u32) -> Bth {
        Bth {
            opcode,
            se: false,
            mig: false,
            pkey: self.pkey(),
            becn_fecn: 0,
            dqpn,
            ack_req: false,
            psn,
        }
    }

    fn empty_packet(&self, opcode: u8, psn: Psn, dqpn: u32) -> Option<Packet<'static>> {
        let info = crate::packet::opinfo(opcode)?;
        Some(Packet {
            bth: self.bth(opcode, psn, dqpn),
            info,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack: None,
            imm: None,
            ieth: None,
            payload: &[],
        })
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
                syndrome: syn,
                fatal,
            } => {
                let mut p = self.empty_packet(0x11, psn, dqpn)?;
                p.aeth = Some(crate::packet::Aeth { syndrome: syn, msn });
                let len = p.emit(buf)?;
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
                let mut p = self.empty_packet(0x12, psn, dqpn)?;
                p.aeth = Some(crate::packet::Aeth {
                    syndrome: syndrome::ACK,
                    msn,
                });
                p.atomic_ack = Some(orig);
                let len = p.emit(buf)?;
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
                let opcode = opcode_for(Transport::Rc, Kind::ReadResp, pos, false, false)?;
                let mut p = self.empty_packet(opcode, psn, dqpn)?;
                if p.info.aeth {
                    p.aeth = Some(crate::packet::Aeth {
                        syndrome: syndrome::ACK,
                        msn,
                    });
                }
                // Headers first, then the data read straight into place.
                let (at, len) = p.emit_header(buf, n as usize)?;
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
                            syndrome: syndrome::NAK_REM_ACCESS,
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

    fn poll_requester<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        let rc = self.cfg.qp_type == QpType::Rc;
        if rc && self.rnr_wait.is_some_and(|t| now < t) {
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
            if rc && self.next_psn.diff(self.una) >= self.cfg.max_inflight as i32 {
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

    fn drain_local_errors(&mut self) {
        let Some(w) = self.sq.front() else { return };
        let Some(status) = w.local_err else { return };
        let wc = self.wc(w.wr.wr_id, status, w.wr.op.wc_opcode());
        self.sq.pop_front();
        self.send_idx = self.send_idx.saturating_sub(1);
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
        now: Instant,
        idx: usize,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Result<Transmit, WcStatus> {
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
        let mut p = self
            .empty_packet(0x11, psn, dqpn)
            .ok_or(WcStatus::LocQpOpErr)?;
        let mut psns = 1u32;
        let mut ends = true;
        let mut sent = 0u32;
        match w.wr.op {
            SendOp::Read { remote_addr, rkey } => {
                let remaining = w.len - off;
                p.info = crate::packet::opinfo(0x0c).ok_or(WcStatus::LocQpOpErr)?;
                p.bth.opcode = 0x0c;
                p.reth = Some(Reth {
                    va: remote_addr.wrapping_add(u64::from(off)),
                    rkey,
                    len: remaining,
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
                p.info = crate::packet::opinfo(0x13).ok_or(WcStatus::LocQpOpErr)?;
                p.bth.opcode = 0x13;
                p.atomic_eth = Some(AtomicEth {
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
                p.info = crate::packet::opinfo(0x14).ok_or(WcStatus::LocQpOpErr)?;
                p.bth.opcode = 0x14;
                p.atomic_eth = Some(AtomicEth {
                    va: remote_addr,
                    rkey,
                    swap_add: add,
                    compare: 0,
                });
            }
            op => {
                let remaining = w.len - off;
                let n = remaining.min(mtu);
                let last = n == remaining;
                let first = off == 0;
                let pos = pos_of(first, last);
                let (kind, imm, inv) = match op {
                    SendOp::Send => (Kind::Send, None, None),
                    SendOp::SendWithImm { imm } => (Kind::Send, Some(imm), None),
                    SendOp::SendWithInv { rkey } => (Kind::Send, None, Some(rkey)),
                    SendOp::WriteWithImm { imm, .. } => (Kind::Write, Some(imm), None),
                    _ => (Kind::Write, None, None),
                };
                let imm = imm.filter(|_| last);
                let inv = inv.filter(|_| last);
                let opcode = opcode_for(t, kind, pos, imm.is_some(), inv.is_some())
                    .ok_or(WcStatus::LocQpOpErr)?;
                p.info = crate::packet::opinfo(opcode).ok_or(WcStatus::LocQpOpErr)?;
                p.bth.opcode = opcode;
                p.imm = imm;
                p.ieth = inv;
                if let SendOp::Write { remote_addr, rkey }
                | SendOp::WriteWithImm {
                    remote_addr, rkey, ..
                } = op
                {
                    if first {
                        p.reth = Some(Reth {
                            va: remote_addr,
                            rkey,
                            len: w.len,
                        });
                    }
                }
                if t == Transport::Ud {
                    let qk = w.wr.ud.map_or(qkey, |d| d.remote_qkey);
                    let qk = if qk & QKEY_CONTROLLED != 0 { qkey } else { qk };
                    p.deth = Some(Deth {
                        qkey: qk,
                        src_qp: qpn,
                    });
                }
                payload = Some((off, n));
                p.bth.se = last && w.wr.solicited;
                ends = last;
                sent = n;
            }
        }
        if t == Transport::Rc {
            self.pkts_since_ackreq += 1;
            let rd = p.info.kind == Kind::ReadReq || p.info.atomic_eth;
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
        let (at, len) = p.emit_header(buf, plen).ok_or(WcStatus::LocLenErr)?;
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
        let rd = p.info.kind == Kind::ReadReq || p.info.atomic_eth;
        if rd || ends {
            self.send_idx += 1;
            self.send_off = 0;
        } else {
            self.send_off = off + sent;
        }
        if t == Transport::Rc {
            if self.rto.is_none() {
                self.rto = local_ack_timeout(self.attr.timeout).map(|d| now + d);
            }
        } else if ends {
            // UC and UD complete as soon as the last packet leaves.
            self.una = self.next_psn;
            self.complete_front(WcStatus::Success);
            self.complete_local_front();
        }
        Ok(Transmit { len, ah })
    }

    /// Completes the oldest send WQE with `status` (successes only when
    /// signaled) and pops it.
    fn complete_front(&mut self, status: WcStatus) {
        let Some(w) = self.sq.pop_front() else { return };
        self.send_idx = self.send_idx.saturating_sub(1);
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
    }
}

#[cfg(test)]
mod tests {
    use super::receive::pkey_match;
    use super::*;

    #[test]
    fn qp_is_send_and_sync() {
        fn f<T: Send + Sync>() {}
        f::<Qp>();
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
