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
use std::ops::Range;

use rdmakit_wire::aeth::{self, AethKind, NakCode, CREDITS_UNLIMITED};
use rdmakit_wire::opcode::{OpCode, OpInfo, Operation, Position, Transport};
use rdmakit_wire::{atomic_ack_eth, atomic_eth, bth, deth, ieth, immdt, reth, roce};

use crate::mem::{AtomicOp, Key, MemError, Memory, Pd};
use crate::psn::Psn;
use crate::qp::{modify_is_ok, Access, AddressHandle, AttrMask, Mtu, QpAttr, QpState, QpType};
use crate::time::{local_ack_timeout, rnr_timer, Clock, Instant};
use crate::wr::{RecvWr, SendOp, SendWr, Sge, Wc, WcOpcode, WcStatus};

mod cma;
mod complete;
mod receive;
mod transmit;

/// Largest header stack the engine emits (BTH + RETH + ImmDt, or BTH +
/// AtomicETH); a transmit buffer of `mtu + MAX_HEADER_LEN + 3` always fits.
pub const MAX_HEADER_LEN: usize = 12 + 28 + 4;

/// Size of the GRH area at the start of a UD receive buffer.
pub const GRH_LEN: usize = 40;

/// Q_Key bit that a non-privileged sender may not use.
const QKEY_CONTROLLED: u32 = 0x8000_0000;
/// Emptied scatter/gather lists kept per direction for reuse.
const SPARE_SGLS: usize = 64;
/// The ACK the responder sends: no end-to-end credits (as rxe).
const ACK: AethKind = AethKind::Ack {
    credits: CREDITS_UNLIMITED,
};

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
    /// Same-host requests sent (each replaces a message's packets).
    pub same_host_sent: u64,
    /// Same-host requests executed by the responder (one copy each).
    pub same_host_executed: u64,
    /// Same-host requests the responder declined (NAK sent).
    pub same_host_declined: u64,
    /// Decline NAKs received: this QP now sends packets.
    pub same_host_fallbacks: u64,
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
    /// Last sent as one same-host request (a READ then completes on the
    /// ACK: its data arrived by copy).
    cma: bool,
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
enum RespErr {
    /// No receive WQE: RNR NAK (RC) or drop (UC/UD).
    Rnr,
    /// Class of error answered with a NAK (RC) and, for RC, QP to ERR; the
    /// status is for a consumed receive WQE, if any.
    Nak(NakCode, Option<WcStatus>),
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
    /// Emptied scatter/gather lists of completed send and receive WRs,
    /// handed back to the driver ([`Qp::spare_send_sgl`],
    /// [`Qp::spare_recv_sgl`]) so a post needs no allocation.
    spare_send: Vec<Vec<Sge>>,
    spare_recv: Vec<Vec<Sge>>,
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
    /// The peer is on this host (set by the driver): large RC messages go
    /// as one same-host request, until the peer declines one.
    same_host: bool,
    /// The peer declined a same-host request: packets from now on.
    same_host_declined: bool,
    /// The PSNs that the same-host requests among the sent WRs
    /// (`sq[..send_idx]`) stand for beyond their one packet each: what
    /// the requester's window does not count ([`Qp::window_full`]).
    same_host_extra: i32,
}

fn sgl_len(sgl: &[Sge]) -> u64 {
    sgl.iter().map(|s| u64::from(s.length)).sum()
}

/// Walks `len` bytes of `sgl` starting `off` bytes in: `piece(key, addr,
/// range)` for each SGE's share, `range` being where those bytes sit in the
/// walk. Returns how many of the `len` bytes the list does not cover.
fn walk_sgl(
    sgl: &[Sge],
    mut off: u64,
    len: usize,
    mut piece: impl FnMut(Key, u64, Range<usize>) -> Result<(), MemError>,
) -> Result<usize, MemError> {
    let mut done = 0usize;
    for s in sgl {
        if done == len {
            break;
        }
        let l = u64::from(s.length);
        if off >= l {
            off -= l;
            continue;
        }
        let n = usize::try_from(l - off)
            .unwrap_or(usize::MAX)
            .min(len - done);
        let addr = s.addr.checked_add(off).ok_or(MemError::OutOfBounds)?;
        piece(Key::Local(s.lkey), addr, done..done + n)?;
        done += n;
        off = 0;
    }
    Ok(len - done)
}

fn gather<M: Memory + ?Sized>(
    mem: &M,
    pd: Pd,
    sgl: &[Sge],
    off: u64,
    out: &mut [u8],
) -> Result<(), MemError> {
    let left = walk_sgl(sgl, off, out.len(), |key, addr, at| {
        mem.read(pd, key, addr, &mut out[at], Access::empty())
    })?;
    if left > 0 {
        return Err(MemError::OutOfBounds);
    }
    Ok(())
}

fn scatter<M: Memory + ?Sized>(
    mem: &mut M,
    pd: Pd,
    sgl: &[Sge],
    off: u64,
    data: &[u8],
) -> Result<(), MemError> {
    // The data lands in one SGE (a message into a one-SGE receive, every
    // packet of one): the write checks the range before it moves a byte,
    // so the separate validation pass (a second key lookup) is not needed.
    if let Some((key, addr)) = one_piece(sgl, off, data.len()) {
        return mem.write(pd, key, addr, data, Access::LOCAL_WRITE);
    }
    // Validate the whole range first so that a failure moves no byte.
    let left = walk_sgl(sgl, off, data.len(), |key, addr, at| {
        mem.check(pd, key, addr, at.len() as u64, Access::LOCAL_WRITE)
    })?;
    if left > 0 {
        return Err(MemError::OutOfBounds);
    }
    walk_sgl(sgl, off, data.len(), |key, addr, at| {
        mem.write(pd, key, addr, &data[at], Access::LOCAL_WRITE)
    })?;
    Ok(())
}

/// Where `len` (> 0) bytes at offset `off` of `sgl` go when they all fall
/// in one SGE: its key and the address; None otherwise (several SGEs, not
/// enough room, an address that overflows).
fn one_piece(sgl: &[Sge], mut off: u64, len: usize) -> Option<(Key, u64)> {
    if len == 0 {
        return None;
    }
    for s in sgl {
        let l = u64::from(s.length);
        if off >= l {
            off -= l;
            continue;
        }
        let fits = u64::try_from(len).is_ok_and(|n| n <= l - off);
        return fits.then(|| s.addr.checked_add(off).map(|a| (Key::Local(s.lkey), a)))?;
    }
    None
}

fn pkts_for(len: u32, mtu: u32) -> u32 {
    len.div_ceil(mtu).max(1)
}

fn pos_of(first: bool, last: bool) -> Position {
    match (first, last) {
        (true, true) => Position::Only,
        (true, false) => Position::First,
        (false, true) => Position::Last,
        (false, false) => Position::Middle,
    }
}

fn nak_status(code: NakCode) -> WcStatus {
    match code {
        NakCode::InvalidRequest => WcStatus::RemInvReqErr,
        NakCode::RemoteAccessError => WcStatus::RemAccessErr,
        NakCode::RemoteOperationalError => WcStatus::RemOpErr,
        NakCode::InvalidRdRequest => WcStatus::RemInvRdReqErr,
        _ => WcStatus::BadRespErr,
    }
}

/// The operation of the message a packet belongs to: the SEND and RDMA
/// WRITE packets with immediate data or invalidate (LAST or ONLY) end a
/// SEND or WRITE message like the plain ones.
fn message_op(op: Operation) -> Operation {
    match op {
        Operation::SendWithImmediate | Operation::SendWithInvalidate => Operation::Send,
        Operation::RdmaWriteWithImmediate => Operation::RdmaWrite,
        op => op,
    }
}

/// Reads a transport packet (BTH through pad; the driver checked and
/// stripped the ICRC) with wire's ICRC-less codec, and its opcode's table
/// entry. `None` for what the engine drops as malformed: truncated
/// headers, an opcode outside RC/UC/UD, a pad count the length does not
/// allow, a transport header version other than 0.
#[inline]
fn parse(bytes: &[u8]) -> Option<(roce::Repr<'_>, OpInfo)> {
    let p = roce::Repr::parse_without_icrc(bytes).ok()?;
    let info = p.bth.opcode.info().filter(|_| p.bth.tver == 0)?;
    Some((p, info))
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
            spare_send: Vec::new(),
            spare_recv: Vec::new(),
            rq: VecDeque::new(),
            epsn: Psn::new(0),
            msn: 0,
            nak_sent: false,
            cur: None,
            uc_drop: false,
            resources: VecDeque::new(),
            out: VecDeque::new(),
            fatal_pending: false,
            same_host: false,
            same_host_declined: false,
            same_host_extra: 0,
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
        self.same_host_extra = 0;
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
            cma: false,
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

    /// The emptied scatter/gather list of a completed send WR, if one is
    /// kept: a driver building the next WR reuses it instead of allocating.
    pub fn spare_send_sgl(&mut self) -> Option<Vec<Sge>> {
        self.spare_send.pop()
    }

    /// As [`Qp::spare_send_sgl`], of a completed receive WR.
    pub fn spare_recv_sgl(&mut self) -> Option<Vec<Sge>> {
        self.spare_recv.pop()
    }

    /// Keeps `sgl` (emptied) for reuse; a few small lists, not every list.
    pub(crate) fn keep_sgl(pool: &mut Vec<Vec<Sge>>, mut sgl: Vec<Sge>) {
        if pool.len() < SPARE_SGLS && sgl.capacity() > 0 && sgl.capacity() <= 16 {
            sgl.clear();
            pool.push(sgl);
        }
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
    pub fn handle_timeout(&mut self, now: impl Clock) {
        if self.rnr_wait.is_some_and(|t| t <= now.now()) {
            self.rnr_wait = None;
        }
        if self.rto.is_some_and(|t| t <= now.now()) {
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
    fn data_in_one_sge_is_written_in_one_piece() {
        let sge = |addr, length, lkey| Sge { addr, length, lkey };
        let sgl = [sge(0x1000, 8, 1), sge(0x2000, 16, 2), sge(0x3000, 0, 3)];
        assert_eq!(one_piece(&sgl, 0, 8), Some((Key::Local(1), 0x1000)));
        assert_eq!(one_piece(&sgl, 2, 6), Some((Key::Local(1), 0x1002)));
        assert_eq!(one_piece(&sgl, 8, 16), Some((Key::Local(2), 0x2000)));
        assert_eq!(one_piece(&sgl, 12, 4), Some((Key::Local(2), 0x2004)));
        // Across two SGEs, past the end, nothing to write, overflow: the
        // two-pass path decides.
        assert_eq!(one_piece(&sgl, 4, 8), None);
        assert_eq!(one_piece(&sgl, 24, 1), None);
        assert_eq!(one_piece(&sgl, 0, 0), None);
        assert_eq!(one_piece(&[sge(u64::MAX, 8, 1)], 1, 1), None);
    }

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
