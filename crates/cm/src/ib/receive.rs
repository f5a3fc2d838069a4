//! The receive side of the CM: each MAD received on QP1 is parsed, matched to
//! its connection and answered as Linux's `ib_cm` answers it (`cm_req_handler`
//! … `cm_sidr_rep_handler`). The send side, timers and state live in the
//! parent module.

use rdmakit_proto::Instant;
use rdmakit_wire::cm::{self, drep, dreq, mra, rej, rep, req, rtu, sidr_rep, sidr_req};

use super::*;

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

impl Cm {
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
            Message::Dreq(m) => self.on_dreq(now, src.via, r.tid, m),
            Message::Drep(m) => self.on_drep(now, m),
            Message::SidrReq(m) => self.on_sidr_req(src, r.tid, m),
            Message::SidrRep(m) => self.on_sidr_rep(m),
        }
    }

    /// The connection `local` expecting `remote` as the peer's ID (0: any
    /// peer ID as long as ours has none yet).
    fn acquire(&self, local: u32, remote: u32) -> Option<u32> {
        let c = self.conns.get(&local)?;
        (c.remote_id == remote).then_some(local)
    }

    fn on_req(&mut self, now: Instant, src: Gid, tid: u64, m: req::Repr) {
        let key = (src, m.local_ca_guid, m.local_comm_id);
        if let Some(&existing) = self.remote_ids.get(&key) {
            // A repeated REQ.
            if let Some(c) = self.conns.get(&existing) {
                if c.state == State::MraReqSent {
                    if let Some(mad) = c.last_reply {
                        let dst = c.peer;
                        self.send_once(dst, mad);
                    }
                }
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
        let stale = self.conns.values().find(|c| {
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
        let id = self.alloc_conn(conn_type, src, path);
        let Some(c) = self.bind_remote(id, key, m.local_comm_id, State::ReqRcvd) else {
            return;
        };
        c.service_id = m.service_id;
        c.tid = tid;
        c.timeout = Duration::from_millis(iba_time_ms(m.local_cm_response_timeout));
        c.max_cm_retries = m.max_cm_retries;
        adopt_peer_qp!(c, m);
        c.retry_count = m.retry_count;
        c.rnr_retry_count = m.rnr_retry_count;
        c.av_timeout = path.packet_life_time.saturating_add(1);
        self.events.push_back(Event::ReqReceived {
            conn: id,
            listen,
            req: Box::new(m),
        });
    }

    /// Ties connection `id` to the peer's connection `key` (comm ID
    /// `remote_id`) and moves it to `state`; `None` when it is gone.
    fn bind_remote(
        &mut self,
        id: u32,
        key: RemoteKey,
        remote_id: u32,
        state: State,
    ) -> Option<&mut Conn> {
        self.remote_ids.insert(key, id);
        let c = self.conns.get_mut(&id)?;
        c.state = state;
        c.remote_id = remote_id;
        c.remote_key = Some(key);
        Some(c)
    }

    fn on_rep(&mut self, src: Gid, m: rep::Repr) {
        let found = self.acquire(m.remote_comm_id, 0).filter(|&id| {
            self.conns
                .get(&id)
                .is_some_and(|c| matches!(c.state, State::ReqSent | State::MraReqRcvd))
        });
        let Some(id) = found else {
            // A repeated REP: RTU again if established, MRA again if promised.
            if let Some(id) = self.acquire(m.remote_comm_id, m.local_comm_id) {
                if let Some(c) = self.conns.get(&id) {
                    if matches!(c.state, State::Established | State::MraRepSent) {
                        if let Some(mad) = c.last_reply {
                            self.send_once(src, mad);
                        }
                    }
                }
            }
            return;
        };
        let key = (src, m.local_ca_guid, m.local_comm_id);
        if self.remote_ids.contains_key(&key) {
            return;
        }
        let Some(c) = self.bind_remote(id, key, m.local_comm_id, State::RepRcvd) else {
            return;
        };
        adopt_peer_qp!(c, m);
        c.rnr_retry_count = m.rnr_retry_count;
        c.av_timeout = ack_timeout(m.target_ack_delay, c.av_timeout.saturating_sub(1));
        c.msg = None;
        self.events.push_back(Event::RepReceived {
            conn: id,
            rep: Box::new(m),
        });
    }

    fn on_rtu(&mut self, m: rtu::Repr) {
        let Some(id) = self.acquire(m.remote_comm_id, m.local_comm_id) else {
            return;
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if !matches!(c.state, State::RepSent | State::MraRepRcvd) {
            return; // duplicate
        }
        c.state = State::Established;
        c.msg = None;
        self.events.push_back(Event::RtuReceived { conn: id });
    }

    fn on_mra(&mut self, now: Instant, m: mra::Repr) {
        let id = match m.message_mraed {
            MsgResponse::Req => self.acquire(m.remote_comm_id, 0),
            MsgResponse::Rep | MsgResponse::Other => {
                self.acquire(m.remote_comm_id, m.local_comm_id)
            }
            MsgResponse::Reserved => None,
        };
        let Some(c) = id.and_then(|id| self.conns.get_mut(&id)) else {
            return;
        };
        let next = match (c.state, m.message_mraed) {
            (State::ReqSent, MsgResponse::Req) => State::MraReqRcvd,
            (State::RepSent, MsgResponse::Rep) => State::MraRepRcvd,
            _ => return,
        };
        let wait =
            Duration::from_millis(iba_time_ms(m.service_timeout) + iba_time_ms(c.av_timeout));
        if let Some(o) = c.msg.as_mut() {
            o.timeout = wait;
            o.deadline = now + wait;
        }
        c.state = next;
    }

    fn on_rej(&mut self, now: Instant, src: Gid, m: rej::Repr) {
        let id = if m.reason == reason::TIMEOUT {
            // The peer gave up on its REQ before knowing our ID: its ARI is
            // its CA GUID (cm_acquire_rejected_id).
            let mut guid = [0u8; 8];
            guid.copy_from_slice(&m.ari[..8]);
            self.remote_ids
                .get(&(src, u64::from_be_bytes(guid), m.local_comm_id))
                .copied()
                .or_else(|| self.acquire(m.remote_comm_id, m.local_comm_id))
        } else if m.message_rejected == MsgResponse::Req {
            self.acquire(m.remote_comm_id, 0)
                .or_else(|| self.acquire(m.remote_comm_id, m.local_comm_id))
        } else {
            self.acquire(m.remote_comm_id, m.local_comm_id)
        };
        let Some(id) = id else {
            return;
        };
        let Some(state) = self.conns.get(&id).map(|c| c.state) else {
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
                    self.enter_timewait(now, id);
                } else {
                    self.reset_to_idle(id);
                }
            }
            State::DreqSent | State::RepRcvd | State::MraRepSent | State::Established => {
                self.enter_timewait(now, id);
            }
            _ => return,
        }
        self.events.push_back(Event::RejReceived {
            conn: id,
            rej: Box::new(m),
        });
    }

    fn on_dreq(&mut self, now: Instant, src: Gid, tid: u64, m: dreq::Repr) {
        let Some(id) = self.acquire(m.remote_comm_id, m.local_comm_id) else {
            // Unknown connection: answer so the peer can move on.
            let drep = drep::Repr {
                local_comm_id: m.remote_comm_id,
                remote_comm_id: m.local_comm_id,
                ..drep::Repr::default()
            };
            self.send_once(src, emit(tid, Message::Drep(drep)));
            return;
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.local_qpn != m.remote_qpn {
            return;
        }
        match c.state {
            State::RepSent | State::DreqSent | State::Established | State::MraRepRcvd => {}
            State::Timewait => {
                // Our DREP was lost: repeat it.
                if let Some(mad) = c.last_reply {
                    self.send_once(src, mad);
                }
                let _ = now;
                return;
            }
            _ => return,
        }
        c.msg = None;
        c.state = State::DreqRcvd;
        c.tid = tid;
        self.events.push_back(Event::DreqReceived { conn: id });
    }

    fn on_drep(&mut self, now: Instant, m: drep::Repr) {
        let Some(id) = self.acquire(m.remote_comm_id, m.local_comm_id) else {
            return;
        };
        if !self
            .conns
            .get(&id)
            .is_some_and(|c| matches!(c.state, State::DreqSent | State::DreqRcvd))
        {
            return;
        }
        self.enter_timewait(now, id);
        self.events.push_back(Event::DrepReceived { conn: id });
    }

    /// The listen on `service_id`, if any.
    fn listen_for(&self, service_id: u64) -> Option<u32> {
        self.listens
            .iter()
            .find(|(_, &s)| s == service_id)
            .map(|(&h, _)| h)
    }

    fn on_sidr_req(&mut self, from: Peer, tid: u64, m: sidr_req::Repr) {
        let src = from.via;
        let key = (src, m.request_id);
        if self.sidr_ids.contains_key(&key) {
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
        let id = self.alloc_conn(ConnType::Sidr, src, path);
        self.sidr_ids.insert(key, id);
        if let Some(c) = self.conns.get_mut(&id) {
            c.state = State::SidrReqRcvd;
            c.remote_id = m.request_id;
            c.service_id = m.service_id;
            c.tid = tid;
            c.sidr_key = Some(key);
        }
        self.events.push_back(Event::SidrReqReceived {
            conn: id,
            listen,
            src: from.gid,
            req: Box::new(m),
        });
    }

    fn on_sidr_rep(&mut self, m: sidr_rep::Repr) {
        let Some(id) = self.acquire(m.request_id, 0) else {
            return;
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.state != State::SidrReqSent {
            return;
        }
        c.state = State::Idle;
        c.msg = None;
        self.events.push_back(Event::SidrRepReceived {
            conn: id,
            rep: Box::new(m),
        });
    }
}
