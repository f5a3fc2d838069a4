//! The engine ([`Cm`]): the application's calls and the MADs received on
//! QP1 are routed to their connection ([`super::conn`], which makes each
//! step), new connections are made for the REQs and SIDR_REQs of services
//! listened on, and what the steps produce is queued — MADs to send,
//! events — until the caller polls it. Received MADs are answered as
//! Linux's `ib_cm` answers them (`cm_req_handler` …
//! `cm_sidr_rep_handler`).

use std::collections::{HashMap, VecDeque};

use rdmakit_proto::{Instant, QpState};
use rdmakit_wire::cm::{
    self, drep, dreq, mra, rej, rej::reason, rep, req, rtu, sidr_rep, sidr_req, Message,
    MsgResponse,
};
use rdmakit_wire::mad::MAD_LEN;

use crate::qp::QpAttrs;
use crate::{Error, Gid, Peer};

use super::conn::{Conn, DreqOutcome, Timer};
use super::conns::Conns;
use super::{
    copy_pd, emit, Config, ConnType, Event, PathRec, RepParams, ReqParams, SidrReqParams, State,
    Transmit,
};

/// The engine.
#[derive(Debug)]
pub struct Cm {
    cfg: Config,
    /// The MAD agent's number, the high half of every transaction ID.
    hi_tid: u32,
    conns: Conns,
    /// Listen handle → service ID.
    listens: HashMap<u32, u64>,
    next_listen: u32,
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

impl Cm {
    /// A new engine.
    pub fn new(cfg: Config) -> Cm {
        let mut s = cfg.seed;
        let id_operand = splitmix(&mut s) as u32;
        let hi_tid = (splitmix(&mut s) as u32 & 0xff) + 1;
        let next_id = (splitmix(&mut s) as u32) & 0x0fff_ffff;
        Cm {
            cfg,
            hi_tid,
            conns: Conns::new(next_id, id_operand),
            listens: HashMap::new(),
            next_listen: 1,
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
        self.conns.get(conn)
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

    /// The listen on `service_id`, if any.
    fn listen_for(&self, service_id: u64) -> Option<u32> {
        self.listens
            .iter()
            .find(|(_, &s)| s == service_id)
            .map(|(&h, _)| h)
    }

    /// Linux's `cm_form_tid`: the MAD agent's number, then the local ID as
    /// the kernel holds it (big-endian bytes read in CPU order).
    fn form_tid(&self, local_id: u32) -> u64 {
        (u64::from(self.hi_tid) << 32) | u64::from(local_id.swap_bytes())
    }

    fn get(&mut self, conn: u32) -> Result<&mut Conn, Error> {
        self.conns.get_mut(conn).ok_or(Error::UnknownConn)
    }

    fn send_once(&mut self, dst: Gid, mad: [u8; MAD_LEN]) {
        self.tx.push_back(Transmit { dst, mad });
    }

    // ------------------------------------------------------------------ the application's calls

    /// Sends a REQ on a new connection; returns its local ID.
    ///
    /// # Errors
    /// [`Error::PrivateDataTooLong`] beyond 92 bytes, [`Error::Invalid`] for
    /// a SIDR connection type.
    pub fn send_req(&mut self, now: Instant, p: &ReqParams<'_>) -> Result<u32, Error> {
        let private_data = copy_pd::<{ req::PRIVATE_DATA_LEN }>(p.private_data)?;
        if p.conn_type == ConnType::Sidr {
            return Err(Error::Invalid("a REQ is for RC or UC"));
        }
        let id = self.conns.alloc(p.conn_type, p.peer, p.path);
        let tid = self.form_tid(id);
        let cfg = self.cfg;
        let t = self.get(id)?.send_req(now, tid, &cfg, p, private_data);
        self.tx.push_back(t);
        Ok(id)
    }

    /// Answers a received REQ with a REP.
    ///
    /// # Errors
    /// [`Error::State`] unless the connection is in ReqRcvd / MraReqSent.
    pub fn send_rep(&mut self, now: Instant, conn: u32, p: &RepParams<'_>) -> Result<(), Error> {
        let private_data = copy_pd::<{ rep::PRIVATE_DATA_LEN }>(p.private_data)?;
        let cfg = self.cfg;
        let t = self.get(conn)?.send_rep(now, &cfg, p, private_data)?;
        self.tx.push_back(t);
        Ok(())
    }

    /// Sends the RTU after a REP: established.
    ///
    /// # Errors
    /// [`Error::State`] unless in RepRcvd / MraRepSent.
    pub fn send_rtu(&mut self, conn: u32, private_data: &[u8]) -> Result<(), Error> {
        let private_data = copy_pd::<{ rtu::PRIVATE_DATA_LEN }>(private_data)?;
        let t = self.get(conn)?.send_rtu(private_data)?;
        self.tx.push_back(t);
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
        if let Some(t) = self.get(conn)?.send_mra(service_timeout, delay)? {
            self.tx.push_back(t);
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
        let ari = (copy_pd::<{ rej::ARI_LEN }>(ari)?, ari.len() as u8);
        let (t, to_timewait) = self.get(conn)?.send_rej(reason, ari, private_data)?;
        if to_timewait {
            self.conns.enter_timewait(now, conn);
        } else {
            self.conns.reset(conn);
        }
        self.tx.push_back(t);
        Ok(())
    }

    /// Sends a DREQ on an established connection.
    ///
    /// # Errors
    /// [`Error::State`] unless established.
    pub fn send_dreq(&mut self, now: Instant, conn: u32, private_data: &[u8]) -> Result<(), Error> {
        let private_data = copy_pd::<{ dreq::PRIVATE_DATA_LEN }>(private_data)?;
        let tid = self.form_tid(conn);
        let t = self.get(conn)?.send_dreq(now, tid, private_data)?;
        self.tx.push_back(t);
        Ok(())
    }

    /// Answers a DREQ; the connection enters timewait.
    ///
    /// # Errors
    /// [`Error::State`] unless in DreqRcvd.
    pub fn send_drep(&mut self, now: Instant, conn: u32, private_data: &[u8]) -> Result<(), Error> {
        let private_data = copy_pd::<{ drep::PRIVATE_DATA_LEN }>(private_data)?;
        let t = self.get(conn)?.send_drep(private_data)?;
        self.conns.enter_timewait(now, conn);
        self.tx.push_back(t);
        Ok(())
    }

    /// Marks a connection whose REP we sent as established without its RTU
    /// (the QP received data first: `IB_EVENT_COMM_EST`).
    ///
    /// # Errors
    /// [`Error::State`] unless in RepSent / MraRepRcvd.
    pub fn establish(&mut self, conn: u32) -> Result<(), Error> {
        self.get(conn)?.establish()?;
        self.events.push_back(Event::RtuReceived { conn });
        Ok(())
    }

    /// Sends a SIDR_REQ on a new connection; returns its local ID.
    ///
    /// # Errors
    /// [`Error::PrivateDataTooLong`] beyond 216 bytes.
    pub fn send_sidr_req(&mut self, now: Instant, p: &SidrReqParams<'_>) -> Result<u32, Error> {
        let private_data = copy_pd::<{ sidr_req::PRIVATE_DATA_LEN }>(p.private_data)?;
        let id = self.conns.alloc(ConnType::Sidr, p.peer, p.path);
        let tid = self.form_tid(id);
        let t = self.get(id)?.send_sidr_req(now, tid, p, private_data);
        self.tx.push_back(t);
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
        let (t, key) = self
            .get(conn)?
            .send_sidr_rep(status, qpn, qkey, private_data)?;
        if let Some(k) = key {
            self.conns.forget_sidr(&k);
        }
        self.tx.push_back(t);
        Ok(())
    }

    /// Destroys a connection, telling the peer what Linux's
    /// `ib_destroy_cm_id` tells it in each state (REJ while connecting,
    /// DREQ when established, DREP when a DREQ waits for an answer).
    pub fn destroy(&mut self, now: Instant, conn: u32) {
        let Some(state) = self.conns.get(conn).map(|c| c.state) else {
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
        self.conns.remove(conn);
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
        self.conns
            .get(conn)
            .ok_or(Error::UnknownConn)?
            .qp_attrs(state, sgid_index)
    }

    // ------------------------------------------------------------------ time and output

    /// Retries what is due and ends timewaits.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut expired = Vec::new();
        for c in self.conns.iter_mut() {
            match c.on_timer(now) {
                Timer::Quiet => {}
                Timer::Resend(t) => self.tx.push_back(t),
                Timer::TimewaitOver => expired.push((c.local_id, None)),
                Timer::GaveUp(state) => expired.push((c.local_id, Some(state))),
            }
        }
        expired.sort_by_key(|e| e.0);
        for (id, state) in expired {
            match state {
                None => self.events.push_back(Event::TimewaitExit { conn: id }),
                Some(State::ReqSent | State::MraReqRcvd) => {
                    self.conns.reset(id);
                    self.events.push_back(Event::ReqError { conn: id });
                }
                Some(State::RepSent | State::MraRepRcvd) => {
                    self.conns.reset(id);
                    self.events.push_back(Event::RepError { conn: id });
                }
                Some(State::DreqSent) => {
                    self.conns.enter_timewait(now, id);
                    self.events.push_back(Event::DreqError { conn: id });
                }
                Some(State::SidrReqSent) => {
                    if let Some(c) = self.conns.get_mut(id) {
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
        self.conns.iter().filter_map(Conn::deadline).min()
    }

    // ------------------------------------------------------------------ received MADs

    /// Feeds a MAD received on QP1 from `src` (the transport address answers
    /// go to). Malformed MADs and messages for no connection are dropped
    /// (some answered, as Linux answers them).
    pub fn handle_mad(&mut self, now: Instant, src: Peer, bytes: &[u8]) {
        let Ok(r) = cm::Repr::parse(bytes) else {
            return;
        };
        match r.message {
            Message::Req(m) => self.on_req(now, src.via, r.tid, m),
            Message::Mra(m) => self.on_mra(now, m),
            Message::Rej(m) => self.on_rej(now, src.via, m),
            Message::Rep(m) => self.on_rep(src.via, m),
            Message::Rtu(m) => self.on_rtu(m),
            Message::Dreq(m) => self.on_dreq(src.via, r.tid, m),
            Message::Drep(m) => self.on_drep(now, m),
            Message::SidrReq(m) => self.on_sidr_req(src, r.tid, m),
            Message::SidrRep(m) => self.on_sidr_rep(m),
        }
    }

    fn on_req(&mut self, now: Instant, src: Gid, tid: u64, m: req::Repr) {
        let key = (src, m.local_ca_guid, m.local_comm_id);
        if let Some(existing) = self.conns.by_remote(&key) {
            // A repeated REQ: the promised MRA, if we promised one.
            let again = self
                .conns
                .get(existing)
                .filter(|c| c.state == State::MraReqSent)
                .and_then(|c| Some((c.peer, c.last_reply()?)));
            if let Some((dst, mad)) = again {
                self.send_once(dst, mad);
            }
            return;
        }
        let issue_rej = |this: &mut Cm, reason: u16| {
            let rej = rej::Repr {
                local_comm_id: 0,
                remote_comm_id: m.local_comm_id,
                message_rejected: MsgResponse::Req,
                reason,
                ..rej::Repr::default()
            };
            this.send_once(src, emit(tid, Message::Rej(rej)));
        };
        // A new connection from a peer QP we still know: stale.
        let stale = self.conns.iter().find(|c| {
            c.remote_ca_guid == m.local_ca_guid
                && c.remote_qpn == m.local_qpn
                && c.conn_type != ConnType::Sidr
                && matches!(
                    c.state,
                    State::Established | State::RepSent | State::MraRepRcvd | State::RepRcvd
                )
        });
        if let Some(old) = stale.map(|c| c.local_id) {
            issue_rej(self, reason::STALE_CONN);
            let _ = self.send_dreq(now, old, &[]);
            return;
        }
        let Some(listen) = self.listen_for(m.service_id) else {
            issue_rej(self, reason::INVALID_SERVICE_ID);
            return;
        };
        let conn_type = match (m.transport_service_type, m.extended_transport_type) {
            (req::TRANSPORT_RC, _) => ConnType::Rc,
            (req::TRANSPORT_UC, _) => ConnType::Uc,
            _ => {
                issue_rej(self, reason::INVALID_TRANSPORT_TYPE);
                return;
            }
        };
        // The path as the passive side sees it (cm_format_paths_from_req).
        let p = &m.primary;
        let path = PathRec {
            sgid: p.remote_gid,
            dgid: p.local_gid,
            flow_label: p.flow_label,
            hop_limit: p.hop_limit,
            traffic_class: p.traffic_class,
            pkey: m.pkey,
            sl: p.sl,
            mtu: m.path_mtu,
            rate: p.packet_rate,
            packet_life_time: p.local_ack_timeout.saturating_sub(1),
        };
        // Answers go where the REQ came from (the GRH), not to the GID the
        // REQ names: that is how Linux builds the response AV.
        let id = self.conns.alloc(conn_type, src, path);
        let Some(c) = self
            .conns
            .bind_remote(id, key, m.local_comm_id, State::ReqRcvd)
        else {
            return;
        };
        c.accept_req(tid, &m);
        self.events.push_back(Event::ReqReceived {
            conn: id,
            listen,
            req: Box::new(m),
        });
    }

    fn on_rep(&mut self, src: Gid, m: rep::Repr) {
        let found = self.conns.acquire(m.remote_comm_id, 0).filter(|&id| {
            self.conns
                .get(id)
                .is_some_and(|c| matches!(c.state, State::ReqSent | State::MraReqRcvd))
        });
        let Some(id) = found else {
            // A repeated REP: RTU again if established, MRA again if promised.
            let again = self
                .conns
                .acquire(m.remote_comm_id, m.local_comm_id)
                .and_then(|id| self.conns.get(id))
                .filter(|c| matches!(c.state, State::Established | State::MraRepSent))
                .and_then(Conn::last_reply);
            if let Some(mad) = again {
                self.send_once(src, mad);
            }
            return;
        };
        let key = (src, m.local_ca_guid, m.local_comm_id);
        if self.conns.by_remote(&key).is_some() {
            return;
        }
        let Some(c) = self
            .conns
            .bind_remote(id, key, m.local_comm_id, State::RepRcvd)
        else {
            return;
        };
        c.accept_rep(&m);
        self.events.push_back(Event::RepReceived {
            conn: id,
            rep: Box::new(m),
        });
    }

    fn on_rtu(&mut self, m: rtu::Repr) {
        let Some(id) = self.conns.acquire(m.remote_comm_id, m.local_comm_id) else {
            return;
        };
        // A duplicate changes nothing.
        if self.conns.get_mut(id).is_some_and(Conn::on_rtu) {
            self.events.push_back(Event::RtuReceived { conn: id });
        }
    }

    fn on_mra(&mut self, now: Instant, m: mra::Repr) {
        let id = match m.message_mraed {
            MsgResponse::Req => self.conns.acquire(m.remote_comm_id, 0),
            MsgResponse::Rep | MsgResponse::Other => {
                self.conns.acquire(m.remote_comm_id, m.local_comm_id)
            }
            MsgResponse::Reserved => None,
        };
        if let Some(c) = id.and_then(|id| self.conns.get_mut(id)) {
            c.on_mra(now, &m);
        }
    }

    fn on_rej(&mut self, now: Instant, src: Gid, m: rej::Repr) {
        let id = if m.reason == reason::TIMEOUT {
            // The peer gave up on its REQ before knowing our ID: its ARI is
            // its CA GUID (cm_acquire_rejected_id).
            let mut guid = [0u8; 8];
            guid.copy_from_slice(&m.ari[..8]);
            self.conns
                .by_remote(&(src, u64::from_be_bytes(guid), m.local_comm_id))
                .or_else(|| self.conns.acquire(m.remote_comm_id, m.local_comm_id))
        } else if m.message_rejected == MsgResponse::Req {
            self.conns
                .acquire(m.remote_comm_id, 0)
                .or_else(|| self.conns.acquire(m.remote_comm_id, m.local_comm_id))
        } else {
            self.conns.acquire(m.remote_comm_id, m.local_comm_id)
        };
        let Some(id) = id else {
            return;
        };
        let Some(state) = self.conns.get(id).map(|c| c.state) else {
            return;
        };
        match state {
            State::ReqSent
            | State::MraReqRcvd
            | State::RepSent
            | State::MraRepRcvd
            | State::ReqRcvd
            | State::MraReqSent => {
                if m.reason == reason::STALE_CONN {
                    self.conns.enter_timewait(now, id);
                } else {
                    self.conns.reset(id);
                }
            }
            State::DreqSent | State::RepRcvd | State::MraRepSent | State::Established => {
                self.conns.enter_timewait(now, id);
            }
            _ => return,
        }
        self.events.push_back(Event::RejReceived {
            conn: id,
            rej: Box::new(m),
        });
    }

    fn on_dreq(&mut self, src: Gid, tid: u64, m: dreq::Repr) {
        let Some(id) = self.conns.acquire(m.remote_comm_id, m.local_comm_id) else {
            // Unknown connection: answer so the peer can move on.
            let drep = drep::Repr {
                local_comm_id: m.remote_comm_id,
                remote_comm_id: m.local_comm_id,
                ..drep::Repr::default()
            };
            self.send_once(src, emit(tid, Message::Drep(drep)));
            return;
        };
        let Some(c) = self.conns.get_mut(id) else {
            return;
        };
        match c.on_dreq(tid, &m) {
            DreqOutcome::Ignored => {}
            DreqOutcome::Repeat(mad) => self.send_once(src, mad),
            DreqOutcome::Received => self.events.push_back(Event::DreqReceived { conn: id }),
        }
    }

    fn on_drep(&mut self, now: Instant, m: drep::Repr) {
        let Some(id) = self.conns.acquire(m.remote_comm_id, m.local_comm_id) else {
            return;
        };
        if !self
            .conns
            .get(id)
            .is_some_and(|c| matches!(c.state, State::DreqSent | State::DreqRcvd))
        {
            return;
        }
        self.conns.enter_timewait(now, id);
        self.events.push_back(Event::DrepReceived { conn: id });
    }

    fn on_sidr_req(&mut self, from: Peer, tid: u64, m: sidr_req::Repr) {
        let src = from.via;
        let key = (src, m.request_id);
        if self.conns.sidr_pending(&key) {
            return; // duplicate of one in progress
        }
        let Some(listen) = self.listen_for(m.service_id) else {
            let rep = sidr_rep::Repr {
                request_id: m.request_id,
                status: sidr_rep::status::UNSUPPORTED,
                service_id: m.service_id,
                ..sidr_rep::Repr::default()
            };
            self.send_once(src, emit(tid, Message::SidrRep(rep)));
            return;
        };
        // The GRH's source GID addresses the requester's QP; its QP1 may be
        // reached elsewhere (`from.via`).
        let path = PathRec {
            dgid: from.gid,
            pkey: m.pkey,
            ..PathRec::default()
        };
        let id = self.conns.alloc(ConnType::Sidr, src, path);
        if let Some(c) = self.conns.bind_sidr(id, key) {
            c.accept_sidr_req(key, tid, &m);
        }
        self.events.push_back(Event::SidrReqReceived {
            conn: id,
            listen,
            src: from.gid,
            req: Box::new(m),
        });
    }

    fn on_sidr_rep(&mut self, m: sidr_rep::Repr) {
        let Some(id) = self.conns.acquire(m.request_id, 0) else {
            return;
        };
        if self.conns.get_mut(id).is_some_and(Conn::on_sidr_rep) {
            self.events.push_back(Event::SidrRepReceived {
                conn: id,
                rep: Box::new(m),
            });
        }
    }
}
