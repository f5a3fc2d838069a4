//! One connection: its identity and what was negotiated (public: rdma_cm
//! reads them), and the exchange in progress — the message being retried,
//! the transaction ID, the last reply kept for a duplicate, timewait —
//! which only this module touches.
//!
//! Its methods are the connection's side of each step: they check the
//! state, build the MAD, record what the peer said and move to the next
//! state. The engine ([`super::Cm`]) finds the connection a MAD is for,
//! queues what the methods return and keeps the tables ([`super::conns`]).

use std::time::Duration;

use rdmakit_proto::{Access, AttrMask, Instant, QpState};
use rdmakit_wire::cm::{
    drep, dreq, mra, rej, rep, req, rtu, sidr_rep, sidr_req, Message, MsgResponse,
};
use rdmakit_wire::mad::MAD_LEN;

use crate::qp::{AddressVector, QpAttrs};
use crate::{Error, Gid};

use super::{
    ack_timeout, emit, iba_time_ms, Config, ConnType, PathRec, RemoteKey, ReqParams, State,
    Transmit,
};

/// How a SIDR_REQ in progress is known: the requester's QP1 and its
/// request ID.
pub(super) type SidrKey = (Gid, u32);

/// A sent message that expects an answer, retried until one comes.
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
    /// Key in the table's index of peers' connections while registered.
    remote_key: Option<RemoteKey>,
    sidr_key: Option<SidrKey>,
}

/// What a connection's timers did at a given time. Returned by value and
/// consumed at once, like [`Transmit`] itself: boxing the MAD would cost an
/// allocation per retry.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum Timer {
    /// Nothing was due.
    Quiet,
    /// The message in flight is sent again.
    Resend(Transmit),
    /// Timewait is over: the connection is idle.
    TimewaitOver,
    /// The message in flight went unanswered through every retry; the
    /// state it was sent in.
    GaveUp(State),
}

/// What a DREQ did to a connection (consumed at once, as [`Timer`]).
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum DreqOutcome {
    /// Not for this connection, or not now.
    Ignored,
    /// Ours was answered and the answer lost: the DREP again.
    Repeat([u8; MAD_LEN]),
    /// Received: the application is to answer.
    Received,
}

/// Records in connection `$c` what the peer's REQ or REP `$m` (the two
/// share these field names) says of its QP: our initiator depth is its
/// responder resources and the other way round.
macro_rules! adopt_peer_qp {
    ($c:ident, $m:ident) => {
        $c.remote_qpn = $m.local_qpn;
        $c.remote_ca_guid = $m.local_ca_guid;
        $c.initiator_depth = $m.responder_resources;
        $c.responder_resources = $m.initiator_depth;
        $c.sq_psn = $m.starting_psn;
    };
}

impl Conn {
    /// A new idle connection `local_id` to the peer whose QP1 is at `peer`.
    pub(super) fn new(local_id: u32, conn_type: ConnType, peer: Gid, path: PathRec) -> Conn {
        Conn {
            local_id,
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
        }
    }

    // ------------------------------------------------------------------ the table's bookkeeping

    /// Ties it to the peer's connection `key` (comm ID `remote_id`) and
    /// moves it to `state`.
    pub(super) fn bind(&mut self, key: RemoteKey, remote_id: u32, state: State) {
        self.state = state;
        self.remote_id = remote_id;
        self.remote_key = Some(key);
    }

    /// The keys it is indexed under: the peer's connection, and the
    /// SIDR_REQ it answers.
    pub(super) fn keys(&self) -> (Option<RemoteKey>, Option<SidrKey>) {
        (self.remote_key, self.sidr_key)
    }

    /// Back to idle, nothing in flight; the peer's key it drops.
    pub(super) fn reset(&mut self) -> Option<RemoteKey> {
        self.state = State::Idle;
        self.msg = None;
        self.remote_key.take()
    }

    /// Into timewait until `now` plus its ACK timeout; the peer's key it
    /// drops.
    pub(super) fn enter_timewait(&mut self, now: Instant) -> Option<RemoteKey> {
        self.state = State::Timewait;
        self.msg = None;
        self.timewait_until = Some(now + Duration::from_millis(iba_time_ms(self.av_timeout)));
        self.remote_key.take()
    }

    // ------------------------------------------------------------------ timers

    /// What is due at `now`: a retry, the end of the retries, or the end
    /// of timewait.
    pub(super) fn on_timer(&mut self, now: Instant) -> Timer {
        if let Some(t) = self.timewait_until {
            if t <= now && self.state == State::Timewait {
                self.timewait_until = None;
                self.state = State::Idle;
                return Timer::TimewaitOver;
            }
        }
        let Some(o) = self.msg.as_mut() else {
            return Timer::Quiet;
        };
        if o.deadline > now {
            return Timer::Quiet;
        }
        if o.retries_left == 0 {
            self.msg = None;
            return Timer::GaveUp(self.state);
        }
        o.retries_left -= 1;
        o.deadline = now + o.timeout;
        Timer::Resend(Transmit {
            dst: self.peer,
            mad: o.mad,
        })
    }

    /// When its next timer is due, if it has one.
    pub(super) fn deadline(&self) -> Option<Instant> {
        match (&self.msg, self.timewait_until) {
            (Some(o), Some(t)) => Some(o.deadline.min(t)),
            (Some(o), None) => Some(o.deadline),
            (None, t) => t,
        }
    }

    /// Sends `mad` and retries it until answered.
    fn track(&mut self, now: Instant, mad: [u8; MAD_LEN]) -> Transmit {
        self.msg = Some(Outstanding {
            mad,
            timeout: self.timeout,
            retries_left: self.max_cm_retries,
            deadline: now + self.timeout,
        });
        self.to_peer(mad)
    }

    /// `mad` to the peer, once.
    fn to_peer(&self, mad: [u8; MAD_LEN]) -> Transmit {
        Transmit {
            dst: self.peer,
            mad,
        }
    }

    /// Our last RTU, DREP or MRA, for a duplicate of what it answered.
    pub(super) fn last_reply(&self) -> Option<[u8; MAD_LEN]> {
        self.last_reply
    }

    // ------------------------------------------------------------------ sending

    /// Sends the REQ of `p` (transaction `tid`, our `cfg`) on this new
    /// connection.
    pub(super) fn send_req(
        &mut self,
        now: Instant,
        tid: u64,
        cfg: &Config,
        p: &ReqParams<'_>,
        private_data: [u8; req::PRIVATE_DATA_LEN],
    ) -> Transmit {
        // The caller refuses a SIDR connection type: a REQ is for RC or UC.
        let (tst, ett) = match p.conn_type {
            ConnType::Uc => (req::TRANSPORT_UC, 0),
            ConnType::Rc | ConnType::Sidr => (req::TRANSPORT_RC, 0),
        };
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
            local_ack_timeout: ack_timeout(cfg.ack_delay, p.path.packet_life_time),
        };
        let r = req::Repr {
            local_comm_id: self.local_id,
            service_id: p.service_id,
            local_ca_guid: cfg.ca_guid,
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
        self.state = State::ReqSent;
        self.tid = tid;
        self.service_id = p.service_id;
        self.local_qpn = p.qp_num;
        self.rq_psn = p.starting_psn & 0xff_ffff;
        self.responder_resources = p.responder_resources;
        self.initiator_depth = p.initiator_depth;
        self.retry_count = p.retry_count.min(7);
        self.max_cm_retries = p.max_cm_retries.min(15);
        self.timeout = Duration::from_millis(
            iba_time_ms(p.path.packet_life_time) * 2 + iba_time_ms(p.remote_cm_response_timeout),
        );
        self.track(now, emit(tid, Message::Req(r)))
    }

    /// Answers the peer's REQ with a REP (our `cfg`).
    pub(super) fn send_rep(
        &mut self,
        now: Instant,
        cfg: &Config,
        p: &super::RepParams<'_>,
        private_data: [u8; rep::PRIVATE_DATA_LEN],
    ) -> Result<Transmit, Error> {
        if !matches!(self.state, State::ReqRcvd | State::MraReqSent) {
            return Err(Error::State(self.state));
        }
        let r = rep::Repr {
            local_comm_id: self.local_id,
            remote_comm_id: self.remote_id,
            local_qpn: p.qp_num & 0xff_ffff,
            starting_psn: p.starting_psn & 0xff_ffff,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            target_ack_delay: cfg.ack_delay,
            flow_control: p.flow_control,
            rnr_retry_count: p.rnr_retry_count.min(7),
            srq: p.srq,
            local_ca_guid: cfg.ca_guid,
            private_data,
            ..rep::Repr::default()
        };
        self.state = State::RepSent;
        self.local_qpn = p.qp_num & 0xff_ffff;
        self.rq_psn = p.starting_psn & 0xff_ffff;
        self.responder_resources = p.responder_resources;
        self.initiator_depth = p.initiator_depth;
        Ok(self.track(now, emit(self.tid, Message::Rep(r))))
    }

    /// The RTU after the peer's REP: established.
    pub(super) fn send_rtu(
        &mut self,
        private_data: [u8; rtu::PRIVATE_DATA_LEN],
    ) -> Result<Transmit, Error> {
        if !matches!(self.state, State::RepRcvd | State::MraRepSent) {
            return Err(Error::State(self.state));
        }
        let mad = emit(
            self.tid,
            Message::Rtu(rtu::Repr {
                local_comm_id: self.local_id,
                remote_comm_id: self.remote_id,
                private_data,
            }),
        );
        self.state = State::Established;
        self.last_reply = Some(mad);
        Ok(self.to_peer(mad))
    }

    /// Promises an MRA for the peer's REQ or REP: see
    /// [`super::Cm::send_mra`]. The MRA to send now, unless `delay`.
    pub(super) fn send_mra(
        &mut self,
        service_timeout: u8,
        delay: bool,
    ) -> Result<Option<Transmit>, Error> {
        let (next, what) = match self.state {
            State::ReqRcvd => (State::MraReqSent, MsgResponse::Req),
            State::RepRcvd => (State::MraRepSent, MsgResponse::Rep),
            s => return Err(Error::State(s)),
        };
        let mad = emit(
            self.tid,
            Message::Mra(mra::Repr {
                local_comm_id: self.local_id,
                remote_comm_id: self.remote_id,
                message_mraed: what,
                service_timeout: service_timeout & 0x1f,
                ..mra::Repr::default()
            }),
        );
        self.state = next;
        self.service_timeout = service_timeout & 0x1f;
        self.last_reply = Some(mad);
        Ok((!delay).then(|| self.to_peer(mad)))
    }

    /// A REJ of the exchange in progress. The REJ, and whether the
    /// connection goes to timewait (else to idle; the caller moves it).
    /// `ari` holds `ari_len` bytes of additional rejection information.
    pub(super) fn send_rej(
        &mut self,
        reason: u16,
        (ari, ari_len): ([u8; rej::ARI_LEN], u8),
        private_data: [u8; rej::PRIVATE_DATA_LEN],
    ) -> Result<(Transmit, bool), Error> {
        let (local, what) = match self.state {
            State::ReqRcvd => (0, MsgResponse::Req),
            State::MraReqSent => (self.local_id, MsgResponse::Req),
            State::RepRcvd | State::MraRepSent => (self.local_id, MsgResponse::Rep),
            State::ReqSent | State::MraReqRcvd | State::RepSent | State::MraRepRcvd => {
                (self.local_id, MsgResponse::Other)
            }
            s => return Err(Error::State(s)),
        };
        let to_timewait = matches!(self.state, State::RepSent | State::MraRepRcvd);
        let mad = emit(
            self.tid,
            Message::Rej(rej::Repr {
                local_comm_id: local,
                remote_comm_id: self.remote_id,
                message_rejected: what,
                reject_info_length: ari_len,
                reason,
                ari,
                private_data,
            }),
        );
        self.msg = None;
        Ok((self.to_peer(mad), to_timewait))
    }

    /// A DREQ (transaction `tid`) on the established connection.
    pub(super) fn send_dreq(
        &mut self,
        now: Instant,
        tid: u64,
        private_data: [u8; dreq::PRIVATE_DATA_LEN],
    ) -> Result<Transmit, Error> {
        if self.state != State::Established {
            return Err(Error::State(self.state));
        }
        let mad = emit(
            tid,
            Message::Dreq(dreq::Repr {
                local_comm_id: self.local_id,
                remote_comm_id: self.remote_id,
                remote_qpn: self.remote_qpn,
                private_data,
            }),
        );
        self.state = State::DreqSent;
        self.tid = tid;
        Ok(self.track(now, mad))
    }

    /// The DREP to the peer's DREQ (the caller moves the connection to
    /// timewait).
    pub(super) fn send_drep(
        &mut self,
        private_data: [u8; drep::PRIVATE_DATA_LEN],
    ) -> Result<Transmit, Error> {
        if self.state != State::DreqRcvd {
            return Err(Error::State(self.state));
        }
        let mad = emit(
            self.tid,
            Message::Drep(drep::Repr {
                local_comm_id: self.local_id,
                remote_comm_id: self.remote_id,
                private_data,
            }),
        );
        self.last_reply = Some(mad);
        Ok(self.to_peer(mad))
    }

    /// Established without the RTU (the QP received data first).
    pub(super) fn establish(&mut self) -> Result<(), Error> {
        match self.state {
            State::RepSent | State::MraRepRcvd => {
                self.state = State::Established;
                self.msg = None;
                Ok(())
            }
            s => Err(Error::State(s)),
        }
    }

    /// Sends the SIDR_REQ of `p` (transaction `tid`) on this new
    /// connection.
    pub(super) fn send_sidr_req(
        &mut self,
        now: Instant,
        tid: u64,
        p: &super::SidrReqParams<'_>,
        private_data: [u8; sidr_req::PRIVATE_DATA_LEN],
    ) -> Transmit {
        self.state = State::SidrReqSent;
        self.tid = tid;
        self.service_id = p.service_id;
        self.timeout = p.timeout;
        self.max_cm_retries = p.max_cm_retries;
        let mad = emit(
            tid,
            Message::SidrReq(sidr_req::Repr {
                request_id: self.local_id,
                pkey: p.path.pkey,
                service_id: p.service_id,
                private_data,
            }),
        );
        self.track(now, mad)
    }

    /// The SIDR_REP to the peer's SIDR_REQ; the connection becomes idle.
    /// The SIDR_REP, and the key the table drops.
    pub(super) fn send_sidr_rep(
        &mut self,
        status: u8,
        qpn: u32,
        qkey: u32,
        private_data: [u8; sidr_rep::PRIVATE_DATA_LEN],
    ) -> Result<(Transmit, Option<SidrKey>), Error> {
        if self.state != State::SidrReqRcvd {
            return Err(Error::State(self.state));
        }
        let mad = emit(
            self.tid,
            Message::SidrRep(sidr_rep::Repr {
                request_id: self.remote_id,
                status,
                qpn: qpn & 0xff_ffff,
                service_id: self.service_id,
                qkey,
                private_data,
                ..sidr_rep::Repr::default()
            }),
        );
        self.state = State::Idle;
        Ok((self.to_peer(mad), self.sidr_key.take()))
    }

    // ------------------------------------------------------------------ receiving

    /// Records the peer's REQ (transaction `tid`) on this new connection,
    /// bound to it and in ReqRcvd.
    pub(super) fn accept_req(&mut self, tid: u64, m: &req::Repr) {
        self.service_id = m.service_id;
        self.tid = tid;
        self.timeout = Duration::from_millis(iba_time_ms(m.local_cm_response_timeout));
        self.max_cm_retries = m.max_cm_retries;
        adopt_peer_qp!(self, m);
        self.retry_count = m.retry_count;
        self.rnr_retry_count = m.rnr_retry_count;
        self.av_timeout = self.path.packet_life_time.saturating_add(1);
    }

    /// Records the peer's REP to our REQ (bound, in RepRcvd).
    pub(super) fn accept_rep(&mut self, m: &rep::Repr) {
        adopt_peer_qp!(self, m);
        self.rnr_retry_count = m.rnr_retry_count;
        self.av_timeout = ack_timeout(m.target_ack_delay, self.av_timeout.saturating_sub(1));
        self.msg = None;
    }

    /// Records a SIDR_REQ (request `m`, transaction `tid`, known as `key`)
    /// on this new connection.
    pub(super) fn accept_sidr_req(&mut self, key: SidrKey, tid: u64, m: &sidr_req::Repr) {
        self.state = State::SidrReqRcvd;
        self.remote_id = m.request_id;
        self.service_id = m.service_id;
        self.tid = tid;
        self.sidr_key = Some(key);
    }

    /// The peer's RTU: whether it established the connection (false for a
    /// duplicate).
    pub(super) fn on_rtu(&mut self) -> bool {
        if !matches!(self.state, State::RepSent | State::MraRepRcvd) {
            return false;
        }
        self.state = State::Established;
        self.msg = None;
        true
    }

    /// The peer's MRA for our `m.message_mraed`: the wait for its answer
    /// stretches to its service timeout.
    pub(super) fn on_mra(&mut self, now: Instant, m: &mra::Repr) {
        let next = match (self.state, m.message_mraed) {
            (State::ReqSent, MsgResponse::Req) => State::MraReqRcvd,
            (State::RepSent, MsgResponse::Rep) => State::MraRepRcvd,
            _ => return,
        };
        let wait =
            Duration::from_millis(iba_time_ms(m.service_timeout) + iba_time_ms(self.av_timeout));
        if let Some(o) = self.msg.as_mut() {
            o.timeout = wait;
            o.deadline = now + wait;
        }
        self.state = next;
    }

    /// The peer's DREQ (transaction `tid`).
    pub(super) fn on_dreq(&mut self, tid: u64, m: &dreq::Repr) -> DreqOutcome {
        if self.local_qpn != m.remote_qpn {
            return DreqOutcome::Ignored;
        }
        match self.state {
            State::RepSent | State::DreqSent | State::Established | State::MraRepRcvd => {}
            // Our DREP was lost: repeat it.
            State::Timewait => {
                return self
                    .last_reply
                    .map_or(DreqOutcome::Ignored, DreqOutcome::Repeat)
            }
            _ => return DreqOutcome::Ignored,
        }
        self.msg = None;
        self.state = State::DreqRcvd;
        self.tid = tid;
        DreqOutcome::Received
    }

    /// The peer's SIDR_REP: whether it answered our SIDR_REQ (the
    /// connection is then idle).
    pub(super) fn on_sidr_rep(&mut self) -> bool {
        if self.state != State::SidrReqSent {
            return false;
        }
        self.state = State::Idle;
        self.msg = None;
        true
    }

    // ------------------------------------------------------------------ the QP

    /// The QP attributes for moving the connection's QP to `state`
    /// (`ib_cm_init_qp_attr`; the AV's GID index is `sgid_index`): see
    /// [`super::Cm::init_qp_attr`].
    pub(super) fn qp_attrs(&self, state: QpState, sgid_index: u8) -> Result<QpAttrs, Error> {
        let mut a = QpAttrs::new(state);
        let connected = matches!(
            self.state,
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
                if !(connected || matches!(self.state, State::ReqSent | State::MraReqRcvd)) {
                    return Err(Error::State(self.state));
                }
                a.mask = a.mask | AttrMask::ACCESS_FLAGS | AttrMask::PKEY_INDEX | AttrMask::PORT;
                a.access = Access::REMOTE_WRITE;
                if self.responder_resources > 0 {
                    a.access = Access(a.access.0 | Access::REMOTE_READ.0 | Access::REMOTE_ATOMIC.0);
                }
            }
            QpState::Rtr => {
                if !connected {
                    return Err(Error::State(self.state));
                }
                a.mask = a.mask
                    | AttrMask::AV
                    | AttrMask::PATH_MTU
                    | AttrMask::DEST_QPN
                    | AttrMask::RQ_PSN;
                a.av = AddressVector {
                    dgid: self.path.dgid,
                    sgid_index,
                    flow_label: self.path.flow_label,
                    hop_limit: self.path.hop_limit,
                    traffic_class: self.path.traffic_class,
                    sl: self.path.sl,
                    static_rate: self.path.rate,
                    port: 1,
                };
                a.path_mtu = self.path.mtu;
                a.dest_qpn = self.remote_qpn;
                a.rq_psn = self.rq_psn;
                if self.conn_type == ConnType::Rc {
                    a.mask = a.mask | AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER;
                    a.max_dest_rd_atomic = self.responder_resources;
                    a.min_rnr_timer = 0;
                }
            }
            QpState::Rts => {
                if !connected {
                    return Err(Error::State(self.state));
                }
                a.mask = a.mask | AttrMask::SQ_PSN;
                a.sq_psn = self.sq_psn;
                if self.conn_type == ConnType::Rc {
                    a.mask = a.mask
                        | AttrMask::RETRY_CNT
                        | AttrMask::RNR_RETRY
                        | AttrMask::MAX_QP_RD_ATOMIC
                        | AttrMask::TIMEOUT;
                    a.retry_cnt = self.retry_count;
                    a.rnr_retry = self.rnr_retry_count;
                    a.max_rd_atomic = self.initiator_depth;
                    a.timeout = self.av_timeout;
                }
            }
            _ => return Err(Error::Invalid("only INIT, RTR and RTS are CM states")),
        }
        Ok(a)
    }
}
