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

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use rdmakit_proto::{Access, AttrMask, Instant, QpState};
use rdmakit_wire::cm::{
    self, drep, dreq, mra, rej, rej::reason, rep, req, rtu, sidr_rep, sidr_req, Message,
    MsgResponse,
};
use rdmakit_wire::mad::MAD_LEN;

use crate::qp::{AddressVector, QpAttrs};
use crate::{Error, Gid, Peer};

mod receive;

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

#[derive(Debug, Clone)]
struct Outstanding {
    mad: [u8; MAD_LEN],
    timeout: Duration,
    retries_left: u8,
    deadline: Instant,
}

/// One connection's state.
#[derive(Debug, Clone)]
pub struct Conn {
    /// Local communication ID.
    pub local_id: u32,
    /// The peer's communication ID (0 until known).
    pub remote_id: u32,
    /// State.
    pub state: State,
    /// Transport.
    pub conn_type: ConnType,
    /// Where the peer's QP1 is (MADs go there).
    pub peer: Gid,
    /// Service ID.
    pub service_id: u64,
    /// The path to the peer.
    pub path: PathRec,
    /// The local QP.
    pub local_qpn: u32,
    /// The peer's QP.
    pub remote_qpn: u32,
    /// The peer's CA GUID.
    pub remote_ca_guid: u64,
    /// Send PSN.
    pub sq_psn: u32,
    /// Receive PSN.
    pub rq_psn: u32,
    /// Our responder resources.
    pub responder_resources: u8,
    /// Our initiator depth.
    pub initiator_depth: u8,
    /// Transport retry count.
    pub retry_count: u8,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// The QP's local ACK timeout (and the timewait length).
    pub av_timeout: u8,
    tid: u64,
    msg: Option<Outstanding>,
    timeout: Duration,
    max_cm_retries: u8,
    service_timeout: u8,
    /// Our last RTU / DREP / MRA, re-sent for a duplicate.
    last_reply: Option<[u8; MAD_LEN]>,
    timewait_until: Option<Instant>,
    /// Key in `Cm::remote_ids` while registered.
    remote_key: Option<RemoteKey>,
    sidr_key: Option<(Gid, u32)>,
}

/// The engine.
#[derive(Debug)]
pub struct Cm {
    cfg: Config,
    conns: HashMap<u32, Conn>,
    listens: HashMap<u32, u64>,
    next_listen: u32,
    next_id: u32,
    id_operand: u32,
    hi_tid: u32,
    /// (peer CA GUID, peer comm ID) → local ID: duplicate REQ / REP detection.
    remote_ids: HashMap<RemoteKey, u32>,
    /// (peer GID, request ID) → local ID of a SIDR_REQ in progress.
    sidr_ids: HashMap<(Gid, u32), u32>,
    tx: VecDeque<Transmit>,
    events: VecDeque<Event>,
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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

impl Cm {
    /// A new engine.
    pub fn new(cfg: Config) -> Cm {
        let mut s = cfg.seed;
        let id_operand = splitmix(&mut s) as u32;
        let hi_tid = (splitmix(&mut s) as u32 & 0xff) + 1;
        let next_id = (splitmix(&mut s) as u32) & 0x0fff_ffff;
        Cm {
            cfg,
            conns: HashMap::new(),
            listens: HashMap::new(),
            next_listen: 1,
            next_id,
            id_operand,
            hi_tid,
            remote_ids: HashMap::new(),
            sidr_ids: HashMap::new(),
            tx: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// A connection's state.
    pub fn conn(&self, conn: u32) -> Option<&Conn> {
        self.conns.get(&conn)
    }

    /// Number of connections (any state, timewait included).
    pub fn conn_count(&self) -> usize {
        self.conns.len()
    }

    /// Listens on `service_id`; returns the listen handle.
    ///
    /// # Errors
    /// [`Error::Busy`] if someone already listens on it.
    pub fn listen(&mut self, service_id: u64) -> Result<u32, Error> {
        if self.listens.values().any(|&s| s == service_id) {
            return Err(Error::Busy);
        }
        let h = self.next_listen;
        self.next_listen = self.next_listen.wrapping_add(1).max(1);
        self.listens.insert(h, service_id);
        Ok(h)
    }

    /// Stops listening.
    pub fn unlisten(&mut self, listen: u32) {
        self.listens.remove(&listen);
    }

    fn alloc_conn(&mut self, conn_type: ConnType, peer: Gid, path: PathRec) -> u32 {
        loop {
            let id = self.next_id ^ self.id_operand;
            self.next_id = self.next_id.wrapping_add(1);
            if id != 0 && !self.conns.contains_key(&id) {
                self.conns.insert(
                    id,
                    Conn {
                        local_id: id,
                        remote_id: 0,
                        state: State::Idle,
                        conn_type,
                        peer,
                        service_id: 0,
                        path,
                        local_qpn: 0,
                        remote_qpn: 0,
                        remote_ca_guid: 0,
                        sq_psn: 0,
                        rq_psn: 0,
                        responder_resources: 0,
                        initiator_depth: 0,
                        retry_count: 0,
                        rnr_retry_count: 0,
                        av_timeout: path.packet_life_time.saturating_add(1),
                        tid: 0,
                        msg: None,
                        timeout: Duration::ZERO,
                        max_cm_retries: 0,
                        service_timeout: 0,
                        last_reply: None,
                        timewait_until: None,
                        remote_key: None,
                        sidr_key: None,
                    },
                );
                return id;
            }
        }
    }

    /// Linux's `cm_form_tid`: the MAD agent's number, then the local ID as
    /// the kernel holds it (big-endian bytes read in CPU order).
    fn form_tid(&self, local_id: u32) -> u64 {
        (u64::from(self.hi_tid) << 32) | u64::from(local_id.swap_bytes())
    }

    fn get(&mut self, conn: u32) -> Result<&mut Conn, Error> {
        self.conns.get_mut(&conn).ok_or(Error::UnknownConn)
    }

    fn send_tracked(&mut self, now: Instant, conn: u32, mad: [u8; MAD_LEN]) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.msg = Some(Outstanding {
            mad,
            timeout: c.timeout,
            retries_left: c.max_cm_retries,
            deadline: now + c.timeout,
        });
        let dst = c.peer;
        self.tx.push_back(Transmit { dst, mad });
    }

    fn send_once(&mut self, dst: Gid, mad: [u8; MAD_LEN]) {
        self.tx.push_back(Transmit { dst, mad });
    }

    /// Sends a REQ on a new connection; returns its local ID.
    ///
    /// # Errors
    /// [`Error::PrivateDataTooLong`] beyond 92 bytes, [`Error::Invalid`] for
    /// a SIDR connection type.
    pub fn send_req(&mut self, now: Instant, p: &ReqParams<'_>) -> Result<u32, Error> {
        let private_data = copy_pd::<{ req::PRIVATE_DATA_LEN }>(p.private_data)?;
        let (tst, ett) = match p.conn_type {
            ConnType::Rc => (req::TRANSPORT_RC, 0),
            ConnType::Uc => (req::TRANSPORT_UC, 0),
            ConnType::Sidr => return Err(Error::Invalid("a REQ is for RC or UC")),
        };
        let id = self.alloc_conn(p.conn_type, p.peer, p.path);
        let tid = self.form_tid(id);
        let ack_delay = self.cfg.ack_delay;
        let ca_guid = self.cfg.ca_guid;
        let routed = p.path.hop_limit > 1;
        let lid = if routed { 0xffff } else { 0 };
        let primary = req::Path {
            local_lid: lid,
            remote_lid: lid,
            local_gid: p.path.sgid,
            remote_gid: p.path.dgid,
            flow_label: p.path.flow_label,
            packet_rate: p.path.rate,
            traffic_class: p.path.traffic_class,
            hop_limit: p.path.hop_limit,
            sl: p.path.sl,
            subnet_local: !routed,
            local_ack_timeout: ack_timeout(ack_delay, p.path.packet_life_time),
        };
        let r = req::Repr {
            local_comm_id: id,
            service_id: p.service_id,
            local_ca_guid: ca_guid,
            local_qpn: p.qp_num,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            remote_cm_response_timeout: p.remote_cm_response_timeout,
            transport_service_type: tst,
            extended_transport_type: ett,
            flow_control: p.flow_control,
            starting_psn: p.starting_psn & 0xff_ffff,
            local_cm_response_timeout: p.local_cm_response_timeout,
            retry_count: p.retry_count.min(7),
            pkey: p.path.pkey,
            path_mtu: p.path.mtu,
            rnr_retry_count: p.rnr_retry_count.min(7),
            max_cm_retries: p.max_cm_retries.min(15),
            srq: p.srq,
            primary,
            private_data,
            ..req::Repr::default()
        };
        let c = self.get(id)?;
        c.state = State::ReqSent;
        c.tid = tid;
        c.service_id = p.service_id;
        c.local_qpn = p.qp_num;
        c.rq_psn = p.starting_psn & 0xff_ffff;
        c.responder_resources = p.responder_resources;
        c.initiator_depth = p.initiator_depth;
        c.retry_count = p.retry_count.min(7);
        c.max_cm_retries = p.max_cm_retries.min(15);
        c.timeout = Duration::from_millis(
            iba_time_ms(p.path.packet_life_time) * 2 + iba_time_ms(p.remote_cm_response_timeout),
        );
        self.send_tracked(now, id, emit(tid, Message::Req(r)));
        Ok(id)
    }

    /// Answers a received REQ with a REP.
    ///
    /// # Errors
    /// [`Error::State`] unless the connection is in ReqRcvd / MraReqSent.
    pub fn send_rep(&mut self, now: Instant, conn: u32, p: &RepParams<'_>) -> Result<(), Error> {
        let private_data = copy_pd::<{ rep::PRIVATE_DATA_LEN }>(p.private_data)?;
        let ack_delay = self.cfg.ack_delay;
        let ca_guid = self.cfg.ca_guid;
        let c = self.get(conn)?;
        if !matches!(c.state, State::ReqRcvd | State::MraReqSent) {
            return Err(Error::State(c.state));
        }
        let r = rep::Repr {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            local_qpn: p.qp_num & 0xff_ffff,
            starting_psn: p.starting_psn & 0xff_ffff,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            target_ack_delay: ack_delay,
            flow_control: p.flow_control,
            rnr_retry_count: p.rnr_retry_count.min(7),
            srq: p.srq,
            local_ca_guid: ca_guid,
            private_data,
            ..rep::Repr::default()
        };
        c.state = State::RepSent;
        c.local_qpn = p.qp_num & 0xff_ffff;
        c.rq_psn = p.starting_psn & 0xff_ffff;
        c.responder_resources = p.responder_resources;
        c.initiator_depth = p.initiator_depth;
        let tid = c.tid;
        self.send_tracked(now, conn, emit(tid, Message::Rep(r)));
        Ok(())
    }

    /// Sends the RTU after a REP: established.
    ///
    /// # Errors
    /// [`Error::State`] unless in RepRcvd / MraRepSent.
    pub fn send_rtu(&mut self, conn: u32, private_data: &[u8]) -> Result<(), Error> {
        let private_data = copy_pd::<{ rtu::PRIVATE_DATA_LEN }>(private_data)?;
        let c = self.get(conn)?;
        if !matches!(c.state, State::RepRcvd | State::MraRepSent) {
            return Err(Error::State(c.state));
        }
        let mad = emit(
            c.tid,
            Message::Rtu(rtu::Repr {
                local_comm_id: c.local_id,
                remote_comm_id: c.remote_id,
                private_data,
            }),
        );
        c.state = State::Established;
        c.last_reply = Some(mad);
        let dst = c.peer;
        self.send_once(dst, mad);
        Ok(())
    }

    /// Promises an MRA for a received REQ or REP: the state moves to
    /// MraReqSent / MraRepSent and the MRA goes out only when the peer
    /// repeats its message (what rdma_cm asks of Linux with
    /// `IB_CM_MRA_FLAG_DELAY`); with `delay` false it is sent now too.
    ///
    /// # Errors
    /// [`Error::State`] unless in ReqRcvd / RepRcvd.
    pub fn send_mra(&mut self, conn: u32, service_timeout: u8, delay: bool) -> Result<(), Error> {
        let c = self.get(conn)?;
        let (next, what) = match c.state {
            State::ReqRcvd => (State::MraReqSent, MsgResponse::Req),
            State::RepRcvd => (State::MraRepSent, MsgResponse::Rep),
            s => return Err(Error::State(s)),
        };
        let mad = emit(
            c.tid,
            Message::Mra(mra::Repr {
                local_comm_id: c.local_id,
                remote_comm_id: c.remote_id,
                message_mraed: what,
                service_timeout: service_timeout & 0x1f,
                ..mra::Repr::default()
            }),
        );
        c.state = next;
        c.service_timeout = service_timeout & 0x1f;
        c.last_reply = Some(mad);
        let dst = c.peer;
        if !delay {
            self.send_once(dst, mad);
        }
        Ok(())
    }

    /// Rejects (a received REQ or REP, or our own REQ in progress).
    ///
    /// # Errors
    /// [`Error::State`] in states without a pending exchange.
    pub fn send_rej(
        &mut self,
        now: Instant,
        conn: u32,
        reason: u16,
        ari: &[u8],
        private_data: &[u8],
    ) -> Result<(), Error> {
        let private_data = copy_pd::<{ rej::PRIVATE_DATA_LEN }>(private_data)?;
        let ari_arr = copy_pd::<{ rej::ARI_LEN }>(ari)?;
        let c = self.get(conn)?;
        let (local, what) = match c.state {
            State::ReqRcvd => (0, MsgResponse::Req),
            State::MraReqSent => (c.local_id, MsgResponse::Req),
            State::RepRcvd | State::MraRepSent => (c.local_id, MsgResponse::Rep),
            State::ReqSent | State::MraReqRcvd | State::RepSent | State::MraRepRcvd => {
                (c.local_id, MsgResponse::Other)
            }
            s => return Err(Error::State(s)),
        };
        let to_timewait = matches!(c.state, State::RepSent | State::MraRepRcvd);
        let mad = emit(
            c.tid,
            Message::Rej(rej::Repr {
                local_comm_id: local,
                remote_comm_id: c.remote_id,
                message_rejected: what,
                reject_info_length: ari.len() as u8,
                reason,
                ari: ari_arr,
                private_data,
            }),
        );
        c.msg = None;
        let dst = c.peer;
        if to_timewait {
            self.enter_timewait(now, conn);
        } else {
            self.reset_to_idle(conn);
        }
        self.send_once(dst, mad);
        Ok(())
    }

    /// Sends a DREQ on an established connection.
    ///
    /// # Errors
    /// [`Error::State`] unless established.
    pub fn send_dreq(&mut self, now: Instant, conn: u32, private_data: &[u8]) -> Result<(), Error> {
        let private_data = copy_pd::<{ dreq::PRIVATE_DATA_LEN }>(private_data)?;
        let tid = self.form_tid(conn);
        let c = self.get(conn)?;
        if c.state != State::Established {
            return Err(Error::State(c.state));
        }
        let mad = emit(
            tid,
            Message::Dreq(dreq::Repr {
                local_comm_id: c.local_id,
                remote_comm_id: c.remote_id,
                remote_qpn: c.remote_qpn,
                private_data,
            }),
        );
        c.state = State::DreqSent;
        c.tid = tid;
        self.send_tracked(now, conn, mad);
        Ok(())
    }

    /// Answers a DREQ; the connection enters timewait.
    ///
    /// # Errors
    /// [`Error::State`] unless in DreqRcvd.
    pub fn send_drep(&mut self, now: Instant, conn: u32, private_data: &[u8]) -> Result<(), Error> {
        let private_data = copy_pd::<{ drep::PRIVATE_DATA_LEN }>(private_data)?;
        let c = self.get(conn)?;
        if c.state != State::DreqRcvd {
            return Err(Error::State(c.state));
        }
        let mad = emit(
            c.tid,
            Message::Drep(drep::Repr {
                local_comm_id: c.local_id,
                remote_comm_id: c.remote_id,
                private_data,
            }),
        );
        c.last_reply = Some(mad);
        let dst = c.peer;
        self.enter_timewait(now, conn);
        self.send_once(dst, mad);
        Ok(())
    }

    /// Marks a connection whose REP we sent as established without its RTU
    /// (the QP received data first: `IB_EVENT_COMM_EST`).
    ///
    /// # Errors
    /// [`Error::State`] unless in RepSent / MraRepRcvd.
    pub fn establish(&mut self, conn: u32) -> Result<(), Error> {
        let c = self.get(conn)?;
        match c.state {
            State::RepSent | State::MraRepRcvd => {
                c.state = State::Established;
                c.msg = None;
                self.events.push_back(Event::RtuReceived { conn });
                Ok(())
            }
            s => Err(Error::State(s)),
        }
    }

    /// Sends a SIDR_REQ on a new connection; returns its local ID.
    ///
    /// # Errors
    /// [`Error::PrivateDataTooLong`] beyond 216 bytes.
    pub fn send_sidr_req(&mut self, now: Instant, p: &SidrReqParams<'_>) -> Result<u32, Error> {
        let private_data = copy_pd::<{ sidr_req::PRIVATE_DATA_LEN }>(p.private_data)?;
        let id = self.alloc_conn(ConnType::Sidr, p.peer, p.path);
        let tid = self.form_tid(id);
        let c = self.get(id)?;
        c.state = State::SidrReqSent;
        c.tid = tid;
        c.service_id = p.service_id;
        c.timeout = p.timeout;
        c.max_cm_retries = p.max_cm_retries;
        let mad = emit(
            tid,
            Message::SidrReq(sidr_req::Repr {
                request_id: id,
                pkey: p.path.pkey,
                service_id: p.service_id,
                private_data,
            }),
        );
        self.send_tracked(now, id, mad);
        Ok(id)
    }

    /// Answers a SIDR_REQ; the connection becomes idle.
    ///
    /// # Errors
    /// [`Error::State`] unless in SidrReqRcvd.
    pub fn send_sidr_rep(
        &mut self,
        conn: u32,
        status: u8,
        qpn: u32,
        qkey: u32,
        private_data: &[u8],
    ) -> Result<(), Error> {
        let private_data = copy_pd::<{ sidr_rep::PRIVATE_DATA_LEN }>(private_data)?;
        let c = self.get(conn)?;
        if c.state != State::SidrReqRcvd {
            return Err(Error::State(c.state));
        }
        let mad = emit(
            c.tid,
            Message::SidrRep(sidr_rep::Repr {
                request_id: c.remote_id,
                status,
                qpn: qpn & 0xff_ffff,
                service_id: c.service_id,
                qkey,
                private_data,
                ..sidr_rep::Repr::default()
            }),
        );
        c.state = State::Idle;
        let dst = c.peer;
        if let Some(k) = c.sidr_key.take() {
            self.sidr_ids.remove(&k);
        }
        self.send_once(dst, mad);
        Ok(())
    }

    /// Destroys a connection, telling the peer what Linux's
    /// `ib_destroy_cm_id` tells it in each state (REJ while connecting,
    /// DREQ when established, DREP when a DREQ waits for an answer).
    pub fn destroy(&mut self, now: Instant, conn: u32) {
        let Some(state) = self.conns.get(&conn).map(|c| c.state) else {
            return;
        };
        match state {
            State::ReqSent | State::MraReqRcvd => {
                let guid = self.cfg.ca_guid.to_be_bytes();
                let _ = self.send_rej(now, conn, reason::TIMEOUT, &guid, &[]);
            }
            State::ReqRcvd
            | State::MraReqSent
            | State::RepSent
            | State::MraRepRcvd
            | State::RepRcvd
            | State::MraRepSent => {
                let _ = self.send_rej(now, conn, reason::CONSUMER_DEFINED, &[], &[]);
            }
            State::Established => {
                let _ = self.send_dreq(now, conn, &[]);
            }
            State::DreqRcvd => {
                let _ = self.send_drep(now, conn, &[]);
            }
            State::SidrReqRcvd => {
                let _ = self.send_sidr_rep(conn, sidr_rep::status::REJECT, 0, 0, &[]);
            }
            State::DreqSent | State::SidrReqSent | State::Idle | State::Timewait => {}
        }
        if let Some(c) = self.conns.remove(&conn) {
            if let Some(k) = c.remote_key {
                self.remote_ids.remove(&k);
            }
            if let Some(k) = c.sidr_key {
                self.sidr_ids.remove(&k);
            }
        }
    }

    fn reset_to_idle(&mut self, conn: u32) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.state = State::Idle;
            c.msg = None;
            if let Some(k) = c.remote_key.take() {
                self.remote_ids.remove(&k);
            }
        }
    }

    fn enter_timewait(&mut self, now: Instant, conn: u32) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.state = State::Timewait;
            c.msg = None;
            c.timewait_until = Some(now + Duration::from_millis(iba_time_ms(c.av_timeout)));
            if let Some(k) = c.remote_key.take() {
                self.remote_ids.remove(&k);
            }
        }
    }

    /// The QP attributes for moving the connection's QP to `state`
    /// (`ib_cm_init_qp_attr`; the AV's GID index is `sgid_index`).
    ///
    /// # Errors
    /// [`Error::State`] when the connection is not far enough along, and
    /// [`Error::Invalid`] for a target other than INIT / RTR / RTS.
    pub fn init_qp_attr(
        &self,
        conn: u32,
        state: QpState,
        sgid_index: u8,
    ) -> Result<QpAttrs, Error> {
        let c = self.conns.get(&conn).ok_or(Error::UnknownConn)?;
        let mut a = QpAttrs::new(state);
        let connected = matches!(
            c.state,
            State::ReqRcvd
                | State::MraReqSent
                | State::RepRcvd
                | State::MraRepSent
                | State::RepSent
                | State::MraRepRcvd
                | State::Established
        );
        match state {
            QpState::Init => {
                if !(connected || matches!(c.state, State::ReqSent | State::MraReqRcvd)) {
                    return Err(Error::State(c.state));
                }
                a.mask = a.mask | AttrMask::ACCESS_FLAGS | AttrMask::PKEY_INDEX | AttrMask::PORT;
                a.access = Access::REMOTE_WRITE;
                if c.responder_resources > 0 {
                    a.access = Access(a.access.0 | Access::REMOTE_READ.0 | Access::REMOTE_ATOMIC.0);
                }
            }
            QpState::Rtr => {
                if !connected {
                    return Err(Error::State(c.state));
                }
                a.mask = a.mask
                    | AttrMask::AV
                    | AttrMask::PATH_MTU
                    | AttrMask::DEST_QPN
                    | AttrMask::RQ_PSN;
                a.av = AddressVector {
                    dgid: c.path.dgid,
                    sgid_index,
                    flow_label: c.path.flow_label,
                    hop_limit: c.path.hop_limit,
                    traffic_class: c.path.traffic_class,
                    sl: c.path.sl,
                    static_rate: c.path.rate,
                    port: 1,
                };
                a.path_mtu = c.path.mtu;
                a.dest_qpn = c.remote_qpn;
                a.rq_psn = c.rq_psn;
                if c.conn_type == ConnType::Rc {
                    a.mask = a.mask | AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER;
                    a.max_dest_rd_atomic = c.responder_resources;
                    a.min_rnr_timer = 0;
                }
            }
            QpState::Rts => {
                if !connected {
                    return Err(Error::State(c.state));
                }
                a.mask = a.mask | AttrMask::SQ_PSN;
                a.sq_psn = c.sq_psn;
                if c.conn_type == ConnType::Rc {
                    a.mask = a.mask
                        | AttrMask::RETRY_CNT
                        | AttrMask::RNR_RETRY
                        | AttrMask::MAX_QP_RD_ATOMIC
                        | AttrMask::TIMEOUT;
                    a.retry_cnt = c.retry_count;
                    a.rnr_retry = c.rnr_retry_count;
                    a.max_rd_atomic = c.initiator_depth;
                    a.timeout = c.av_timeout;
                }
            }
            _ => return Err(Error::Invalid("only INIT, RTR and RTS are CM states")),
        }
        Ok(a)
    }

    /// Retries what is due and ends timewaits.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut expired = Vec::new();
        let mut resend = Vec::new();
        for c in self.conns.values_mut() {
            if let Some(t) = c.timewait_until {
                if t <= now && c.state == State::Timewait {
                    c.timewait_until = None;
                    c.state = State::Idle;
                    expired.push((c.local_id, None));
                    continue;
                }
            }
            let Some(o) = c.msg.as_mut() else {
                continue;
            };
            if o.deadline > now {
                continue;
            }
            if o.retries_left == 0 {
                c.msg = None;
                expired.push((c.local_id, Some(c.state)));
            } else {
                o.retries_left -= 1;
                o.deadline = now + o.timeout;
                resend.push(Transmit {
                    dst: c.peer,
                    mad: o.mad,
                });
            }
        }
        self.tx.extend(resend);
        expired.sort_by_key(|e| e.0);
        for (id, state) in expired {
            match state {
                None => self.events.push_back(Event::TimewaitExit { conn: id }),
                Some(State::ReqSent | State::MraReqRcvd) => {
                    self.reset_to_idle(id);
                    self.events.push_back(Event::ReqError { conn: id });
                }
                Some(State::RepSent | State::MraRepRcvd) => {
                    self.reset_to_idle(id);
                    self.events.push_back(Event::RepError { conn: id });
                }
                Some(State::DreqSent) => {
                    self.enter_timewait(now, id);
                    self.events.push_back(Event::DreqError { conn: id });
                }
                Some(State::SidrReqSent) => {
                    if let Some(c) = self.conns.get_mut(&id) {
                        c.state = State::Idle;
                    }
                    self.events.push_back(Event::SidrReqError { conn: id });
                }
                Some(_) => {}
            }
        }
    }

    /// The next MAD to send. Call until `None` after every input.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.tx.pop_front()
    }

    /// The next event. Call until `None` after every input.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Cm::handle_timeout`] must be called next, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.conns
            .values()
            .filter_map(|c| match (&c.msg, c.timewait_until) {
                (Some(o), Some(t)) => Some(o.deadline.min(t)),
                (Some(o), None) => Some(o.deadline),
                (None, t) => t,
            })
            .min()
    }
}
