//! The IB communication manager: one engine per port, like Linux's `ib_cm`.
//!
//! Connections are identified by their local communication ID. Each sent
//! message that expects an answer (REQ, REP, DREQ, SIDR_REQ) is retried
//! `max_cm_retries` times, `timeout` apart, until the answer or an MRA
//! arrives (an MRA stretches the wait to its service timeout); when the
//! retries run out the connection reports [`Event::ReqError`] /
//! [`Event::RepError`] / [`Event::DreqError`] / [`Event::SidrReqError`].
//! Duplicates are answered as Linux answers them (a repeated REQ after the
//! application saw it gets an MRA, a repeated REP after the RTU gets the RTU
//! again, a DREQ for an unknown connection gets a DREP), and a REQ for a
//! service nobody listens on gets REJ "invalid service ID".
//!
//! Sans-IO: [`Cm::handle_mad`] takes a received MAD, [`Cm::handle_timeout`]
//! the time; [`Cm::poll_transmit`], [`Cm::poll_event`] and
//! [`Cm::poll_timeout`] give what to send, what happened and when to call
//! again. Call all three after every input.
//!
//! Three parts, each owning its state: [`Conn`] is one connection — its
//! side of every step, from the state check to the MAD; `conns` is the
//! table that finds a connection for a MAD (local IDs, the peer's
//! connection, SIDR requests in progress); [`Cm`] routes calls and MADs to
//! them, makes the connections new REQs ask for and queues what comes out.

use std::time::Duration;

use rdmakit_wire::cm::{self, rej, rep, req, sidr_rep, sidr_req, Message};
use rdmakit_wire::mad::MAD_LEN;

use crate::{Error, Gid};

mod conn;
mod conns;
mod engine;

pub use conn::Conn;
pub use engine::Cm;

/// How a peer's connection is known while registered: where its QP1 is
/// reached, its CA GUID and its communication ID. The GUID and ID alone are
/// Linux's key (one CM per CA); processes sharing a soft device each run a
/// CM of their own under one CA GUID, so where the MAD came from is part of
/// the key.
type RemoteKey = (Gid, u64, u32);

/// `4.096 µs × 2^t` in milliseconds, as Linux approximates it
/// (`cm_convert_to_ms`: `1 << max(t - 8, 0)`).
pub fn iba_time_ms(t: u8) -> u64 {
    1u64 << u32::from(t).saturating_sub(8).min(40)
}

/// The local ACK timeout for a path (`cm_ack_timeout`): roughly
/// `ack_delay + 2 × packet_life_time` in the logarithmic encoding.
pub fn ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let mut t = packet_life_time.saturating_add(1);
    if t >= ca_ack_delay {
        t += u8::from(ca_ack_delay >= t - 1);
    } else {
        t = ca_ack_delay + u8::from(t >= ca_ack_delay.saturating_sub(1));
    }
    t.min(31)
}

/// A RoCE path record: what route resolution produced, or what a REQ said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathRec {
    /// Local GID.
    pub sgid: Gid,
    /// Remote GID.
    pub dgid: Gid,
    /// Flow label.
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// P_Key.
    pub pkey: u16,
    /// Service level.
    pub sl: u8,
    /// Path MTU (IBTA encoding).
    pub mtu: u8,
    /// Rate (IBTA encoding).
    pub rate: u8,
    /// Packet life time (4.096 µs × 2^n).
    pub packet_life_time: u8,
}

/// Transport of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// A SIDR exchange (UD).
    Sidr,
}

/// The state of a connection (`enum ib_cm_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Nothing in progress.
    Idle,
    /// REQ sent, waiting for REP/REJ/MRA.
    ReqSent,
    /// REQ received, the application has not answered.
    ReqRcvd,
    /// REQ received and an MRA promised (sent on a duplicate REQ).
    MraReqSent,
    /// REQ sent, the peer sent MRA.
    MraReqRcvd,
    /// REP sent, waiting for RTU.
    RepSent,
    /// REP received, RTU not sent yet.
    RepRcvd,
    /// REP received and an MRA promised.
    MraRepSent,
    /// REP sent, the peer sent MRA.
    MraRepRcvd,
    /// Connected.
    Established,
    /// DREQ sent, waiting for DREP.
    DreqSent,
    /// DREQ received, DREP not sent yet.
    DreqRcvd,
    /// Disconnected; the QP numbers stay reserved a while.
    Timewait,
    /// SIDR_REQ sent.
    SidrReqSent,
    /// SIDR_REQ received.
    SidrReqRcvd,
}

/// Parameters of a REQ.
#[derive(Debug, Clone)]
pub struct ReqParams<'a> {
    /// Where the peer's QP1 is reached (the transport address of MADs;
    /// often `path.dgid`, but a device whose processes share one GID is
    /// reached per process).
    pub peer: Gid,
    /// Service ID.
    pub service_id: u64,
    /// The path: GIDs and parameters for the QP's address vector.
    pub path: PathRec,
    /// RC or UC.
    pub conn_type: ConnType,
    /// The local QP number.
    pub qp_num: u32,
    /// The PSN the peer's send queue starts at (our receive PSN).
    pub starting_psn: u32,
    /// RDMA READs/atomics we accept at once.
    pub responder_resources: u8,
    /// RDMA READs/atomics we issue at once.
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// Transport retry count (0..=7).
    pub retry_count: u8,
    /// RNR retry count (0..=7).
    pub rnr_retry_count: u8,
    /// How long the peer's CM may take (4.096 µs × 2^n).
    pub remote_cm_response_timeout: u8,
    /// How long we may take.
    pub local_cm_response_timeout: u8,
    /// How often a message is retried.
    pub max_cm_retries: u8,
    /// The local QP uses an SRQ.
    pub srq: bool,
    /// Private data (at most 92 bytes).
    pub private_data: &'a [u8],
}

/// Parameters of a REP.
#[derive(Debug, Clone)]
pub struct RepParams<'a> {
    /// The local QP number.
    pub qp_num: u32,
    /// The PSN the peer's send queue starts at.
    pub starting_psn: u32,
    /// Responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: bool,
    /// Private data (at most 196 bytes).
    pub private_data: &'a [u8],
}

/// Parameters of a SIDR_REQ.
#[derive(Debug, Clone)]
pub struct SidrReqParams<'a> {
    /// Where the peer's QP1 is reached.
    pub peer: Gid,
    /// Service ID.
    pub service_id: u64,
    /// The path.
    pub path: PathRec,
    /// Wait per try.
    pub timeout: Duration,
    /// Retries.
    pub max_cm_retries: u8,
    /// Private data (at most 216 bytes).
    pub private_data: &'a [u8],
}

/// What happened on a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A REQ for a service we listen on: a new connection `conn` in
    /// [`State::ReqRcvd`].
    ReqReceived {
        /// The new connection.
        conn: u32,
        /// The listen it matched.
        listen: u32,
        /// The REQ.
        req: Box<req::Repr>,
    },
    /// A REP answered our REQ.
    RepReceived {
        /// Connection.
        conn: u32,
        /// The REP.
        rep: Box<rep::Repr>,
    },
    /// The RTU arrived: established.
    RtuReceived {
        /// Connection.
        conn: u32,
    },
    /// The peer rejected.
    RejReceived {
        /// Connection.
        conn: u32,
        /// The REJ.
        rej: Box<rej::Repr>,
    },
    /// The peer disconnects.
    DreqReceived {
        /// Connection.
        conn: u32,
    },
    /// Our DREQ was answered; the connection is in timewait.
    DrepReceived {
        /// Connection.
        conn: u32,
    },
    /// Our REQ went unanswered through every retry.
    ReqError {
        /// Connection.
        conn: u32,
    },
    /// Our REP went unanswered through every retry.
    RepError {
        /// Connection.
        conn: u32,
    },
    /// Our DREQ went unanswered; the connection is in timewait.
    DreqError {
        /// Connection.
        conn: u32,
    },
    /// Timewait is over; the connection is idle.
    TimewaitExit {
        /// Connection.
        conn: u32,
    },
    /// A SIDR_REQ for a service we listen on: a new connection in
    /// [`State::SidrReqRcvd`].
    SidrReqReceived {
        /// The new connection.
        conn: u32,
        /// The listen it matched.
        listen: u32,
        /// The requester's GID (the GRH's source).
        src: Gid,
        /// The request.
        req: Box<sidr_req::Repr>,
    },
    /// The answer to our SIDR_REQ.
    SidrRepReceived {
        /// Connection.
        conn: u32,
        /// The answer.
        rep: Box<sidr_rep::Repr>,
    },
    /// Our SIDR_REQ went unanswered.
    SidrReqError {
        /// Connection.
        conn: u32,
    },
}

/// A MAD to send to the peer's QP1.
#[derive(Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Where the peer's QP1 is: what the caller gave as the peer of a
    /// request, or the source of the MAD being answered.
    pub dst: Gid,
    /// The 256-byte MAD.
    pub mad: [u8; MAD_LEN],
}

impl core::fmt::Debug for Transmit {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match cm::Repr::parse(&self.mad) {
            Ok(r) => write!(f, "Transmit({r})"),
            Err(e) => write!(f, "Transmit(unparsable: {e})"),
        }
    }
}

/// Engine configuration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Our CA GUID (the REQ/REP `Local CA GUID`).
    pub ca_guid: u64,
    /// Our CA's ACK delay (`local_ca_ack_delay`).
    pub ack_delay: u8,
    /// Seed of communication IDs and transaction IDs.
    pub seed: u64,
}

fn copy_pd<const N: usize>(data: &[u8]) -> Result<[u8; N], Error> {
    if data.len() > N {
        return Err(Error::PrivateDataTooLong {
            len: data.len(),
            max: N,
        });
    }
    let mut out = [0u8; N];
    out[..data.len()].copy_from_slice(data);
    Ok(out)
}

fn emit(tid: u64, message: Message) -> [u8; MAD_LEN] {
    let mut mad = [0u8; MAD_LEN];
    // A 256-byte buffer always fits a CM MAD.
    let _ = cm::Repr { tid, message }.emit(&mut mad);
    mad
}
