//! The per-QP engine: one RC, UC or UD queue pair, as a [`Qp`] made of
//! parts that each own their state and their file (the shape of
//! quinn-proto's `Connection`, whose spaces, streams, timers and path are
//! its own types):
//!
//! * [`qp`] — the [`Qp`]: its configuration, attributes, state,
//!   counters and completion queue (`Common`), the verbs, and the dispatch
//!   of packets and timers to the parts. Only it changes the QP's state.
//! * [`requester`] — the send queue and the PSNs it
//!   assigns: first-transmission checks, segmentation, AckReq, the window,
//!   local operations in send-queue order, retiring WRs.
//! * [`completer`] — ACK/NAK/RNR NAK and response
//!   handling, go-back-N, retry counts and the two timers (local ACK
//!   timeout, RNR wait); tells the requester where to resend from and which
//!   WRs are done.
//! * [`responder`] — the receive queue, the expected PSN,
//!   execution of RC/UC/UD requests, duplicates and responder resources,
//!   and the responses it queues and sends.
//! * [`same_host`] — the soft NIC's one-copy extension:
//!   whether a large RC message goes as one same-host request, and the
//!   responder's side of such a request.
//!
//! A part's fields are private to its module, and every `impl` of a type
//! is in the file that defines it: parts talk through methods, never
//! through each other's fields (the test `parts_own_their_fields` keeps it
//! so).
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
//! a [`Memory`](crate::Memory), which validates key, PD, bounds and rights
//! first.

use std::sync::Arc;

use rdmakit_wire::aeth::{AethKind, NakCode, CREDITS_UNLIMITED};
use rdmakit_wire::opcode::{OpInfo, Operation, Position};
use rdmakit_wire::roce;

use crate::cc::{Params, Rate};
use crate::mem::Pd;
use crate::qp::{AddressHandle, Mtu, QpType};
use crate::wr::WcStatus;

mod cc;
mod completer;
mod qp;
mod requester;
mod responder;
mod same_host;
mod sgl;

pub use qp::Qp;

/// Largest header stack the engine emits (BTH + RETH + ImmDt, or BTH +
/// AtomicETH); a transmit buffer of `mtu + MAX_HEADER_LEN + 3` always fits.
pub const MAX_HEADER_LEN: usize = 12 + 28 + 4;

/// Size of the GRH area at the start of a UD receive buffer.
pub const GRH_LEN: usize = 40;

/// The ACK the responder sends: no end-to-end credits (as rxe).
const ACK: AethKind = AethKind::Ack {
    credits: CREDITS_UNLIMITED,
};

/// [`QpConfig::line_rate`] unless the driver says otherwise: 25 Gb/s.
pub const DEFAULT_LINE_RATE: Rate = Rate::from_mbps(25_000);

/// ECN codepoint ECT(0), in the low two bits of the IP TOS byte.
pub const ECT0: u8 = 0b10;

/// What the driver knows of a packet beyond its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrival {
    /// The IP header's ECN field was CE (0b11): a switch on the path was
    /// congested. The notification point counts it and may answer with a
    /// CNP.
    pub ce: bool,
    /// The source address, as a path the driver names in [`Transmit::ah`]
    /// (`None` if it has none). A CNP acts only if it equals the QP's AV
    /// (RC/UC: the connected peer); a CNP answering a CE-marked UD packet
    /// goes there (`None`: counted, not answered). A driver must not
    /// create a path for every source it sees: look up, do not add.
    pub src: Option<AddressHandle>,
    /// The driver's verdict on an RC request (fault injection): the
    /// responder answers it with this instead of executing it. It acts
    /// only on an in-sequence request of a QP in RTR or RTS (a duplicate
    /// or out-of-sequence one is answered as always) and costs one branch
    /// when `None`.
    pub answer: Option<Answer>,
}

/// How a responder answers a request the driver says to refuse
/// ([`Arrival::answer`]): as a real responder would in that situation,
/// with the same NAK, the same state change and the same completion of a
/// receive being filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// An RNR NAK with the QP's `min_rnr_timer`, as if no receive WQE
    /// were posted; nothing is executed and the expected PSN stays.
    Rnr,
    /// This NAK. A PSN sequence error asks the requester to go back to the
    /// request's PSN; the others end the connection (the QP goes to ERR
    /// once the NAK is out, a receive being filled completes with the
    /// matching error).
    Nak(NakCode),
}

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
    /// Congestion control parameters (DCQCN, mlx5's names), shared by the
    /// device's QPs; [`Qp::set_cc_params`] replaces them on a live QP.
    pub cc: Arc<Params>,
    /// The port's rate: where the reaction point starts cutting and what
    /// `rp_max_rate` 0 means.
    pub line_rate: Rate,
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
            cc: Arc::new(Params::mlx5()),
            line_rate: DEFAULT_LINE_RATE,
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
    /// The IP TOS byte (IPv6 traffic class) it must carry: DSCP and ECN.
    /// Data packets (requests, responses, ACKs): the QP's traffic class
    /// with ECT(0) when the reaction point is on for its priority (its
    /// ECN bits otherwise cleared); a CNP: `np_cnp_dscp << 2`, Not-ECT.
    pub tos: u8,
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
    /// PSN sequence error NAKs received (counted in `naks_received` too):
    /// the responder saw this QP's requests out of sequence.
    pub seq_err_naks_received: u64,
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
    /// Packets for this QP that arrived CE-marked (mlx5's
    /// `np_ecn_marked_roce_packets`).
    pub np_ecn_marked_roce_packets: u64,
    /// CNPs sent for CE-marked packets (`np_cnp_sent`).
    pub np_cnp_sent: u64,
    /// CNPs that lowered this QP's rate (`rp_cnp_handled`).
    pub rp_cnp_handled: u64,
    /// CNPs received and ignored: reaction point off for the QP's
    /// priority, QP not connected or not in RTS, or the CNP not from the
    /// connected peer (`rp_cnp_ignored`).
    pub rp_cnp_ignored: u64,
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

/// Why a packet was dropped without an answer ([`DropCounts`]' fields).
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

/// A part's verdict that the QP leaves RTS: a WR completed in error and
/// the connection (RC) or the send queue (UC, UD: SQE) cannot go on. The
/// part has queued that WR's completion; the [`Qp`] makes the transition
/// and flushes the rest.
#[must_use]
struct Failed;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_is_send_and_sync() {
        fn f<T: Send + Sync>() {}
        f::<Qp>();
    }

    /// The engine's files and the types each one defines. A type's
    /// `impl` blocks are all in its file, and a private type's fields are
    /// private: no part reaches into another's state.
    const PARTS: [(&str, &str, &[&str]); 8] = [
        ("engine.rs", include_str!("engine.rs"), &[]),
        ("qp.rs", include_str!("engine/qp.rs"), &["Qp", "Common"]),
        (
            "requester.rs",
            include_str!("engine/requester.rs"),
            &["Requester", "SendWqe"],
        ),
        (
            "completer.rs",
            include_str!("engine/completer.rs"),
            &["Completer"],
        ),
        (
            "responder.rs",
            include_str!("engine/responder.rs"),
            &["Responder", "RecvWqe", "InMsg", "Resource", "RespOut"],
        ),
        (
            "same_host.rs",
            include_str!("engine/same_host.rs"),
            &["SameHost", "Request"],
        ),
        ("sgl.rs", include_str!("engine/sgl.rs"), &["Spares"]),
        (
            "cc.rs",
            include_str!("engine/cc.rs"),
            &["Pacer", "Notifier"],
        ),
    ];

    /// The type an `impl` line is for (`impl X {`, `impl<T> X<T> {`,
    /// `impl Trait for X {`), if the line starts an impl block.
    fn impl_target(line: &str) -> Option<&str> {
        let rest = line.strip_prefix("impl")?;
        if !rest.starts_with([' ', '<']) {
            return None;
        }
        let head = rest.split('{').next()?;
        let ty = match head.rsplit_once(" for ") {
            Some((_, ty)) => ty,
            // Skip the impl's own generics.
            None if head.starts_with('<') => {
                let mut depth = 0;
                let end = head.char_indices().find_map(|(i, ch)| {
                    match ch {
                        '<' => depth += 1,
                        '>' => depth -= 1,
                        _ => {}
                    }
                    (depth == 0).then_some(i + 1)
                })?;
                &head[end..]
            }
            None => head,
        };
        // The path up to its generics; its last segment.
        let path = ty.trim().split(['<', ' ', '{']).next()?;
        path.rsplit("::").next().filter(|t| !t.is_empty())
    }

    #[test]
    fn parts_own_their_fields() {
        assert_eq!(impl_target("impl Requester {"), Some("Requester"));
        assert_eq!(impl_target("impl<'a> Ctx<'a> {"), Some("Ctx"));
        assert_eq!(impl_target("impl fmt::Debug for Qp {"), Some("Qp"));
        assert_eq!(impl_target("impl super::qp::Common {"), Some("Common"));
        assert_eq!(impl_target("implied NAK"), None);
        for (file, src, owned) in PARTS {
            // The code, without its unit tests.
            let code = src.split("#[cfg(test)]").next().unwrap_or(src);
            for line in code.lines().map(str::trim_start) {
                if let Some(ty) = impl_target(line) {
                    if let Some((home, _, _)) = PARTS.iter().find(|(_, _, o)| o.contains(&ty)) {
                        assert_eq!(*home, file, "impl {ty} in {file}: {ty} is {home}'s");
                    }
                }
                for vis in ["pub(super) ", "pub(crate) ", "pub(in "] {
                    let field = line
                        .strip_prefix(vis)
                        .and_then(|after| after.split_once(':'))
                        .is_some_and(|(name, _)| {
                            name.chars().all(|ch| ch.is_alphanumeric() || ch == '_')
                        });
                    assert!(!field, "{file}: a field other files can reach: {line}");
                }
            }
            for ty in owned {
                let defined = [format!("struct {ty} "), format!("enum {ty} ")]
                    .iter()
                    .any(|d| code.contains(d.as_str()));
                assert!(defined, "{file} does not define {ty}");
            }
        }
    }
}
