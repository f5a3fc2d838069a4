//! The rdma_cm connection model (Linux's `drivers/infiniband/core/cma.c`) on
//! top of [`crate::ib`]: IDs bound to IP addresses and ports in a port space,
//! address and route resolution results, connect / accept / reject /
//! disconnect, and events with rdma_cm's meaning.
//!
//! What the kernel learns from the network stack (is this address mine,
//! where does the peer live, which port is free) the caller decides and hands
//! in: [`RdmaCm::bind`] takes a concrete port, [`RdmaCm::resolve_addr`] the
//! peer's GID (or the errno of a failed resolution). Everything else — the
//! REQ's contents, the IP header in its private data, the service ID, MRA /
//! timewait / retries, which event follows which message, the QP attributes
//! — is decided here.
//!
//! Events follow the kernel's rules (ucma's, as librdmacm receives them):
//! a REQ gives the listener `CONNECT_REQUEST` on a new ID; a REP gives
//! `CONNECT_RESPONSE` (librdmacm turns it into `ESTABLISHED` once it moved
//! the QP to RTS and sent the RTU with [`RdmaCm::establish`]); a RTU gives
//! the passive side `ESTABLISHED`; REJ → `REJECTED` (status = reason); a
//! REQ / REP that exhausts its retries → `UNREACHABLE` (-ETIMEDOUT); DREQ or
//! DREP → `DISCONNECTED` (a DREQ that times out: status -ETIMEDOUT); the end
//! of timewait → `TIMEWAIT_EXIT`. UD IDs resolve the peer's QP with SIDR:
//! `CONNECT_REQUEST` on the listener, `ESTABLISHED` with the AH, QPN and
//! Q_Key on the client, `UNREACHABLE` when refused. `DEVICE_REMOVAL` is
//! never generated: a soft device is never removed under an ID.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use rdmakit_proto::{AttrMask, Instant, QpState, QpType};
use rdmakit_wire::cm::{ip, rej::reason, rep, req, sidr_rep, sidr_req};

use crate::ib::{self, Cm, ConnType, Event, PathRec, RepParams, ReqParams, SidrReqParams};
use crate::qp::{AddressVector, QpAttrs};
use crate::{gid_of, Error, Gid};

pub use crate::Peer;

pub use rdmakit_wire::cm::ip::{PS_IB, PS_IPOIB, PS_TCP, PS_UDP};

/// `CMA_CM_RESPONSE_TIMEOUT`: 4.096 µs × 2^20 ≈ 4.3 s.
pub const CM_RESPONSE_TIMEOUT: u8 = 20;
/// `CMA_MAX_CM_RETRIES`.
pub const MAX_CM_RETRIES: u8 = 15;
/// The service timeout of rdma_cm's (delayed) MRAs.
pub const MRA_SERVICE_TIMEOUT: u8 = 24;
/// `CMA_IBOE_PACKET_LIFETIME` of Debian 12's Linux 6.1: the packet life
/// time of a RoCE route (its REQs carry a local ACK timeout of 19 =
/// `ack_timeout(15, 18)`; later kernels use 16).
pub const IBOE_PACKET_LIFETIME: u8 = 18;
/// `RDMA_UDP_QKEY`: the Q_Key of rdma_cm's UDP port space.
pub const UDP_QKEY: u32 = 0x0123_4567;
/// Bytes of the user's private data in a REQ (92 - the IP header).
pub const REQ_USER_DATA_LEN: usize = req::PRIVATE_DATA_LEN - ip::HEADER_LEN;
/// Bytes of the user's private data in a SIDR_REQ.
pub const SIDR_REQ_USER_DATA_LEN: usize = sidr_req::PRIVATE_DATA_LEN - ip::HEADER_LEN;

/// What rdma_cm knows of the local device and port.
#[derive(Debug, Clone, Copy)]
pub struct Device {
    /// The RoCEv2 GID used for connections.
    pub gid: Gid,
    /// Its index in the GID table.
    pub sgid_index: u8,
    /// The IPv4 address behind the GID.
    pub addr: Ipv4Addr,
    /// Active path MTU (IBTA encoding).
    pub mtu: u8,
    /// Port rate (IBTA encoding; 0 = port current).
    pub rate: u8,
    /// CA GUID.
    pub ca_guid: u64,
    /// `local_ca_ack_delay`.
    pub ack_delay: u8,
    /// Hop limit of routes.
    pub hop_limit: u8,
}

impl Device {
    /// A RoCEv2 port on `addr` with an active MTU of `mtu_bytes`, GID index 0,
    /// ACK delay 15 (rxe's), hop limit 64 (Linux's IPv4 default TTL).
    pub fn roce_v2(addr: Ipv4Addr, mtu_bytes: u32, ca_guid: u64) -> Device {
        let mtu = match mtu_bytes {
            4096.. => 5,
            2048..=4095 => 4,
            1024..=2047 => 3,
            512..=1023 => 2,
            _ => 1,
        };
        Device {
            gid: gid_of(addr),
            sgid_index: 0,
            addr,
            mtu,
            rate: 0,
            ca_guid,
            ack_delay: 15,
            hop_limit: 64,
        }
    }
}

/// `enum rdma_cm_event_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum EventKind {
    /// Address resolved.
    AddrResolved = 0,
    /// Address resolution failed.
    AddrError = 1,
    /// Route resolved.
    RouteResolved = 2,
    /// Route resolution failed.
    RouteError = 3,
    /// A connection request on a listening ID.
    ConnectRequest = 4,
    /// The REP arrived (active side, before the RTU).
    ConnectResponse = 5,
    /// Connecting failed locally.
    ConnectError = 6,
    /// The peer did not answer.
    Unreachable = 7,
    /// The peer rejected.
    Rejected = 8,
    /// Connected.
    Established = 9,
    /// Disconnected.
    Disconnected = 10,
    /// The device went away.
    DeviceRemoval = 11,
    /// Multicast join.
    MulticastJoin = 12,
    /// Multicast error.
    MulticastError = 13,
    /// Address change.
    AddrChange = 14,
    /// Timewait ended.
    TimewaitExit = 15,
}

/// `struct rdma_conn_param`, as given to connect / accept and as reported.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnParam {
    /// Private data.
    pub private_data: Vec<u8>,
    /// Responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// Flow control.
    pub flow_control: bool,
    /// Retry count.
    pub retry_count: u8,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: bool,
    /// QP number.
    pub qp_num: u32,
}

/// The UD part of an event (`struct rdma_ud_param`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UdParam {
    /// Private data.
    pub private_data: Vec<u8>,
    /// Address vector to the peer.
    pub av: Option<AddressVector>,
    /// The peer's QP number.
    pub qp_num: u32,
    /// The peer's Q_Key.
    pub qkey: u32,
}

/// An event for an ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaEvent {
    /// The ID (for `CONNECT_REQUEST`: the new one).
    pub id: u32,
    /// For `CONNECT_REQUEST`: the listening ID.
    pub listen_id: Option<u32>,
    /// What happened.
    pub kind: EventKind,
    /// 0, a negative errno, or a REJ reason / SIDR status.
    pub status: i32,
    /// Connection parameters (RC).
    pub conn: ConnParam,
    /// UD parameters.
    pub ud: UdParam,
}

/// `enum rdma_cm_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdState {
    /// Created.
    Idle,
    /// Resolving the address.
    AddrQuery,
    /// Address resolved.
    AddrResolved,
    /// Resolving the route.
    RouteQuery,
    /// Route resolved.
    RouteResolved,
    /// Connecting or connected.
    Connect,
    /// Disconnected.
    Disconnect,
    /// Bound to an address.
    AddrBound,
    /// Listening.
    Listen,
}

/// One rdma_cm ID.
#[derive(Debug, Clone)]
pub struct Id {
    /// Port space.
    pub ps: u16,
    /// QP type.
    pub qp_type: QpType,
    /// State.
    pub state: IdState,
    /// Local address and port.
    pub src: Option<SocketAddrV4>,
    /// Peer address and port.
    pub dst: Option<SocketAddrV4>,
    /// The peer's GID once the address is resolved.
    pub dgid: Option<Gid>,
    /// Where the peer's QP1 is, once resolved.
    pub via: Option<Gid>,
    /// The route once resolved (or taken from a REQ).
    pub route: Option<PathRec>,
    /// Our starting receive PSN.
    pub seq_num: u32,
    /// Q_Key (UD).
    pub qkey: u32,
    /// The IB CM connection.
    pub conn: Option<u32>,
    /// The type of service `rdma_set_option(RDMA_OPTION_ID_TOS)` set: the
    /// traffic class of the route resolved after it (None: 0, as with
    /// the kernel's `default_roce_tos` unset).
    pub tos: Option<u8>,
    listen: Option<u32>,
}

/// The rdma_cm engine of one device.
#[derive(Debug)]
pub struct RdmaCm {
    dev: Device,
    ib: Cm,
    ids: HashMap<u32, Id>,
    /// IB connection → ID.
    by_conn: HashMap<u32, u32>,
    /// Service ID → (IB listen handle, listening IDs).
    listens: HashMap<u64, (u32, Vec<u32>)>,
    next_id: u32,
    rng: u64,
    events: VecDeque<RdmaEvent>,
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn conn_type(q: QpType) -> ConnType {
    match q {
        QpType::Uc => ConnType::Uc,
        _ => ConnType::Rc,
    }
}

fn event(id: u32, kind: EventKind, status: i32) -> RdmaEvent {
    RdmaEvent {
        id,
        listen_id: None,
        kind,
        status,
        conn: ConnParam::default(),
        ud: UdParam::default(),
    }
}

const ETIMEDOUT: i32 = 110;
const EINVAL: i32 = 22;

impl RdmaCm {
    /// The engine for `dev`; `seed` makes IDs and PSNs reproducible.
    pub fn new(dev: Device, seed: u64) -> RdmaCm {
        let mut rng = seed ^ 0x5eed_cafe;
        let ib = Cm::new(ib::Config {
            ca_guid: dev.ca_guid,
            ack_delay: dev.ack_delay,
            seed: splitmix(&mut rng),
        });
        RdmaCm {
            dev,
            ib,
            ids: HashMap::new(),
            by_conn: HashMap::new(),
            listens: HashMap::new(),
            next_id: 1,
            rng,
            events: VecDeque::new(),
        }
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// The IB CM below.
    pub fn ib(&self) -> &Cm {
        &self.ib
    }

    /// An ID.
    pub fn id(&self, id: u32) -> Option<&Id> {
        self.ids.get(&id)
    }

    /// Number of IDs.
    pub fn id_count(&self) -> usize {
        self.ids.len()
    }

    fn get(&mut self, id: u32) -> Result<&mut Id, Error> {
        self.ids.get_mut(&id).ok_or(Error::UnknownId)
    }

    fn new_id(&mut self, ps: u16, qp_type: QpType, state: IdState) -> u32 {
        let h = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let seq_num = (splitmix(&mut self.rng) as u32) & 0xff_ffff;
        self.ids.insert(
            h,
            Id {
                ps,
                qp_type,
                state,
                src: None,
                dst: None,
                dgid: None,
                via: None,
                route: None,
                seq_num,
                qkey: if qp_type == QpType::Ud { UDP_QKEY } else { 0 },
                conn: None,
                tos: None,
                listen: None,
            },
        );
        h
    }

    /// `rdma_create_id`.
    pub fn create_id(&mut self, ps: u16, qp_type: QpType) -> u32 {
        self.new_id(ps, qp_type, IdState::Idle)
    }

    /// `rdma_bind_addr` with a concrete port (the caller allocates ports and
    /// checks the address is this device's).
    ///
    /// # Errors
    /// [`Error::IdState`] unless the ID is idle.
    pub fn bind(&mut self, id: u32, addr: SocketAddrV4) -> Result<(), Error> {
        let i = self.get(id)?;
        if i.state != IdState::Idle {
            return Err(Error::IdState(i.state));
        }
        i.src = Some(addr);
        i.state = IdState::AddrBound;
        Ok(())
    }

    /// `rdma_listen` on the bound address and port.
    ///
    /// # Errors
    /// [`Error::IdState`] unless bound.
    pub fn listen(&mut self, id: u32) -> Result<(), Error> {
        let i = self.get(id)?;
        if i.state != IdState::AddrBound {
            return Err(Error::IdState(i.state));
        }
        let Some(src) = i.src else {
            return Err(Error::Invalid("listen needs a bound address"));
        };
        let sid = ip::service_id(i.ps, src.port());
        match self.listens.get_mut(&sid) {
            Some((_, ids)) => ids.push(id),
            None => {
                let h = self.ib.listen(sid)?;
                self.listens.insert(sid, (h, vec![id]));
            }
        }
        let i = self.get(id)?;
        i.state = IdState::Listen;
        i.listen = Some(0);
        Ok(())
    }

    /// `rdma_resolve_addr`: `src` is the (bound or chosen) local address
    /// and port, `peer` where `dst` resolved to, or the negative errno of
    /// the failure. Queues `ADDR_RESOLVED` or `ADDR_ERROR`.
    ///
    /// # Errors
    /// [`Error::IdState`] unless idle or bound.
    pub fn resolve_addr(
        &mut self,
        id: u32,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        peer: Result<Peer, i32>,
    ) -> Result<(), Error> {
        let i = self.get(id)?;
        if !matches!(i.state, IdState::Idle | IdState::AddrBound) {
            return Err(Error::IdState(i.state));
        }
        i.src = Some(src);
        i.dst = Some(dst);
        match peer {
            Ok(g) => {
                i.dgid = Some(g.gid);
                i.via = Some(g.via);
                i.state = IdState::AddrResolved;
                self.events.push_back(event(id, EventKind::AddrResolved, 0));
            }
            Err(e) => {
                i.state = IdState::AddrBound;
                self.events
                    .push_back(event(id, EventKind::AddrError, -e.abs()));
            }
        }
        Ok(())
    }

    /// The RoCE route to the resolved address of `i`.
    fn route_to(&self, i: &Id, dgid: Gid) -> PathRec {
        PathRec {
            sgid: self.dev.gid,
            dgid,
            flow_label: flow_label(i.src.map_or(0, |s| s.port()), i.dst.map_or(0, |d| d.port())),
            hop_limit: self.dev.hop_limit,
            traffic_class: i.tos.unwrap_or(0),
            pkey: 0xffff,
            sl: 0,
            mtu: self.dev.mtu,
            rate: self.dev.rate,
            packet_life_time: IBOE_PACKET_LIFETIME,
        }
    }

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_TOS)`
    /// (`rdma_set_service_type`): the traffic class of the route a later
    /// `rdma_resolve_route` computes, hence of the REQ's primary path and of
    /// both QPs' address vectors (the passive side takes the REQ's path), or
    /// of a UD ID's address handle. A route already resolved keeps its
    /// class, as in the kernel.
    ///
    /// # Errors
    /// [`Error::UnknownId`].
    pub fn set_tos(&mut self, id: u32, tos: u8) -> Result<(), Error> {
        self.get(id)?.tos = Some(tos);
        Ok(())
    }

    /// `rdma_resolve_route`: queues `ROUTE_RESOLVED`.
    ///
    /// # Errors
    /// [`Error::IdState`] unless the address is resolved.
    pub fn resolve_route(&mut self, id: u32) -> Result<(), Error> {
        let i = self.ids.get(&id).ok_or(Error::UnknownId)?;
        if i.state != IdState::AddrResolved {
            return Err(Error::IdState(i.state));
        }
        let Some(dgid) = i.dgid else {
            return Err(Error::IdState(i.state));
        };
        let route = self.route_to(i, dgid);
        let i = self.get(id)?;
        i.route = Some(route);
        i.state = IdState::RouteResolved;
        self.events
            .push_back(event(id, EventKind::RouteResolved, 0));
        Ok(())
    }

    /// Points a resolved ID at another peer for the same address (the
    /// process that owns a loopback port may have changed since the address
    /// was resolved): the route follows.
    ///
    /// # Errors
    /// [`Error::IdState`] unless the address or route is resolved.
    pub fn retarget(&mut self, id: u32, peer: Peer) -> Result<(), Error> {
        let i = self.get(id)?;
        if !matches!(i.state, IdState::AddrResolved | IdState::RouteResolved) {
            return Err(Error::IdState(i.state));
        }
        i.dgid = Some(peer.gid);
        i.via = Some(peer.via);
        if let Some(r) = i.route.as_mut() {
            r.dgid = peer.gid;
        }
        Ok(())
    }

    /// A REQ's (or SIDR REQ's) private data: the CMA IP header then the
    /// caller's bytes, which may not exceed `max` (the message's user-data
    /// room).
    fn req_private_data(&self, i: &Id, user: &[u8], max: usize) -> Result<Vec<u8>, Error> {
        if user.len() > max {
            return Err(Error::PrivateDataTooLong {
                len: user.len(),
                max,
            });
        }
        let mut pd = vec![0u8; ip::HEADER_LEN + user.len()];
        self.ip_header(i, &mut pd)?;
        pd[ip::HEADER_LEN..].copy_from_slice(user);
        Ok(pd)
    }

    fn ip_header(&self, i: &Id, buf: &mut [u8]) -> Result<(), Error> {
        let (Some(src), Some(dst)) = (i.src, i.dst) else {
            return Err(Error::Invalid("connect needs resolved addresses"));
        };
        let h = ip::Repr {
            src_port: src.port(),
            src_addr: IpAddr::V4(*src.ip()),
            dst_addr: IpAddr::V4(*dst.ip()),
        };
        h.emit(&mut ip::Packet::new_unchecked(buf))
            .map_err(|_| Error::Invalid("address families differ"))
    }

    /// `rdma_connect`: a REQ (RC/UC) or SIDR_REQ (UD) to the resolved peer.
    ///
    /// # Errors
    /// [`Error::IdState`] unless the route is resolved;
    /// [`Error::PrivateDataTooLong`] beyond 56 (RC) / 180 (UD) bytes.
    pub fn connect(&mut self, now: Instant, id: u32, p: &ConnParam) -> Result<(), Error> {
        let i = self.ids.get(&id).ok_or(Error::UnknownId)?.clone();
        if i.state != IdState::RouteResolved {
            return Err(Error::IdState(i.state));
        }
        let Some(route) = i.route else {
            return Err(Error::IdState(i.state));
        };
        let dport = i.dst.map_or(0, |d| d.port());
        let sid = ip::service_id(i.ps, dport);
        let peer = i.via.unwrap_or(route.dgid);
        let conn = if i.qp_type == QpType::Ud {
            let pd = self.req_private_data(&i, &p.private_data, SIDR_REQ_USER_DATA_LEN)?;
            self.ib.send_sidr_req(
                now,
                &SidrReqParams {
                    peer,
                    service_id: sid,
                    path: route,
                    timeout: Duration::from_millis(ib::iba_time_ms(CM_RESPONSE_TIMEOUT)),
                    max_cm_retries: MAX_CM_RETRIES,
                    private_data: &pd,
                },
            )?
        } else {
            let pd = self.req_private_data(&i, &p.private_data, REQ_USER_DATA_LEN)?;
            self.ib.send_req(
                now,
                &ReqParams {
                    peer,
                    service_id: sid,
                    path: route,
                    conn_type: conn_type(i.qp_type),
                    qp_num: p.qp_num,
                    starting_psn: i.seq_num,
                    responder_resources: p.responder_resources,
                    initiator_depth: p.initiator_depth,
                    flow_control: p.flow_control,
                    retry_count: p.retry_count.min(7),
                    rnr_retry_count: p.rnr_retry_count.min(7),
                    remote_cm_response_timeout: CM_RESPONSE_TIMEOUT,
                    local_cm_response_timeout: CM_RESPONSE_TIMEOUT,
                    max_cm_retries: MAX_CM_RETRIES,
                    srq: p.srq,
                    private_data: &pd,
                },
            )?
        };
        self.by_conn.insert(conn, id);
        let i = self.get(id)?;
        i.conn = Some(conn);
        i.state = IdState::Connect;
        Ok(())
    }

    /// `rdma_accept` on an ID from `CONNECT_REQUEST`: REP (RC/UC) or a
    /// successful SIDR_REP (UD).
    ///
    /// # Errors
    /// [`Error::IdState`] unless the ID came from a request not yet answered.
    pub fn accept(&mut self, now: Instant, id: u32, p: &ConnParam) -> Result<(), Error> {
        let i = self.ids.get(&id).ok_or(Error::UnknownId)?;
        let (Some(conn), IdState::Connect) = (i.conn, i.state) else {
            return Err(Error::IdState(i.state));
        };
        if i.qp_type == QpType::Ud {
            let qkey = i.qkey;
            return self.ib.send_sidr_rep(
                conn,
                sidr_rep::status::SUCCESS,
                p.qp_num,
                qkey,
                &p.private_data,
            );
        }
        let seq = i.seq_num;
        self.ib.send_rep(
            now,
            conn,
            &RepParams {
                qp_num: p.qp_num,
                starting_psn: seq,
                responder_resources: p.responder_resources,
                initiator_depth: p.initiator_depth,
                flow_control: p.flow_control,
                rnr_retry_count: p.rnr_retry_count.min(7),
                srq: p.srq,
                private_data: &p.private_data,
            },
        )
    }

    /// `rdma_reject` (reason 0 means "consumer defined", 28).
    ///
    /// # Errors
    /// [`Error::IdState`] unless a request or reply waits for an answer.
    pub fn reject(
        &mut self,
        now: Instant,
        id: u32,
        private_data: &[u8],
        reason: u8,
    ) -> Result<(), Error> {
        let i = self.ids.get(&id).ok_or(Error::UnknownId)?;
        let Some(conn) = i.conn else {
            return Err(Error::IdState(i.state));
        };
        if i.qp_type == QpType::Ud {
            return self
                .ib
                .send_sidr_rep(conn, sidr_rep::status::REJECT, 0, 0, private_data);
        }
        let r = if reason == 0 {
            reason::CONSUMER_DEFINED
        } else {
            u16::from(reason)
        };
        self.ib.send_rej(now, conn, r, &[], private_data)
    }

    /// The IB CM connection of ID `id`.
    fn conn_of(&self, id: u32) -> Result<u32, Error> {
        self.ids
            .get(&id)
            .ok_or(Error::UnknownId)?
            .conn
            .ok_or(Error::Invalid("no connection"))
    }

    /// Active side, after `CONNECT_RESPONSE`: sends the RTU
    /// (librdmacm's accept on the active side, `rdma_establish`).
    ///
    /// # Errors
    /// [`Error::State`] unless a REP waits for its RTU.
    pub fn establish(&mut self, id: u32) -> Result<(), Error> {
        let conn = self.conn_of(id)?;
        self.ib.send_rtu(conn, &[])
    }

    /// `rdma_notify(IBV_EVENT_COMM_EST)`: data arrived before the RTU.
    ///
    /// # Errors
    /// [`Error::State`] unless the REP waits for its RTU.
    pub fn notify_established(&mut self, id: u32) -> Result<(), Error> {
        let conn = self.conn_of(id)?;
        self.ib.establish(conn)
    }

    /// `rdma_disconnect`: DREQ, or DREP when the peer's DREQ waits.
    ///
    /// # Errors
    /// [`Error::Invalid`] without a connection.
    pub fn disconnect(&mut self, now: Instant, id: u32) -> Result<(), Error> {
        let i = self.ids.get(&id).ok_or(Error::UnknownId)?;
        let Some(conn) = i.conn else {
            return Err(Error::Invalid("not connected"));
        };
        if i.qp_type == QpType::Ud {
            return Ok(());
        }
        if self.ib.send_dreq(now, conn, &[]).is_err() {
            self.ib.send_drep(now, conn, &[])?;
        }
        Ok(())
    }

    /// `rdma_destroy_id`: the connection is torn down as the kernel does it
    /// (REJ / DREQ / DREP as the state requires); pending events for the ID
    /// are dropped.
    pub fn destroy(&mut self, now: Instant, id: u32) {
        let Some(i) = self.ids.remove(&id) else {
            return;
        };
        if let Some(conn) = i.conn {
            self.ib.destroy(now, conn);
            self.by_conn.remove(&conn);
        }
        if i.state == IdState::Listen {
            if let Some(src) = i.src {
                let sid = ip::service_id(i.ps, src.port());
                if let Some((h, ids)) = self.listens.get_mut(&sid) {
                    ids.retain(|&x| x != id);
                    if ids.is_empty() {
                        let h = *h;
                        self.ib.unlisten(h);
                        self.listens.remove(&sid);
                    }
                }
            }
        }
        self.events.retain(|e| e.id != id);
    }

    /// `rdma_init_qp_attr`: the attributes for moving the ID's QP to `state`.
    ///
    /// # Errors
    /// [`Error::IdState`] / [`Error::State`] when the ID is not far enough
    /// along for that state.
    pub fn init_qp_attr(&self, id: u32, state: QpState) -> Result<QpAttrs, Error> {
        let i = self.ids.get(&id).ok_or(Error::UnknownId)?;
        let conn = i.conn.filter(|_| i.qp_type != QpType::Ud);
        let mut a = match conn {
            Some(conn) => self.ib.init_qp_attr(conn, state, self.dev.sgid_index)?,
            None => {
                // cma_ib_init_qp_attr: before a connection, or UD.
                let mut a = QpAttrs::new(state);
                match state {
                    QpState::Init => {
                        a.mask = a.mask | AttrMask::PKEY_INDEX | AttrMask::PORT;
                        if i.qp_type == QpType::Ud {
                            a.mask = a.mask | AttrMask::QKEY;
                            a.qkey = i.qkey;
                        } else {
                            a.mask = a.mask | AttrMask::ACCESS_FLAGS;
                        }
                    }
                    QpState::Rtr | QpState::Rts if i.qp_type == QpType::Ud => {
                        if state == QpState::Rts {
                            a.mask = a.mask | AttrMask::SQ_PSN;
                        }
                    }
                    _ => return Err(Error::IdState(i.state)),
                }
                a
            }
        };
        if state == QpState::Rtr && conn.is_some() {
            a.rq_psn = i.seq_num;
        }
        Ok(a)
    }

    /// Feeds a MAD received on QP1 from `src`: the GID its GRH names and
    /// the transport address of the sender's QP1, where answers go.
    pub fn handle_mad(&mut self, now: Instant, src: Peer, bytes: &[u8]) {
        self.ib.handle_mad(now, src, bytes);
        self.drain(now);
    }

    /// Retries and timewaits that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.ib.handle_timeout(now);
        self.drain(now);
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self) -> Option<ib::Transmit> {
        self.ib.poll_transmit()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<RdmaEvent> {
        self.events.pop_front()
    }

    /// When [`RdmaCm::handle_timeout`] must run next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.ib.poll_timeout()
    }

    fn drain(&mut self, now: Instant) {
        while let Some(e) = self.ib.poll_event() {
            self.on_ib_event(now, e);
        }
    }

    /// The listening ID a request for `sid` to `dst` belongs to: one bound
    /// to exactly `dst`, else one bound to the wildcard address.
    fn find_listener(&self, sid: u64, dst: IpAddr) -> Option<u32> {
        let (_, ids) = self.listens.get(&sid)?;
        let bound = |id: &u32| self.ids.get(id).and_then(|i| i.src).map(|s| *s.ip());
        ids.iter()
            .find(|id| bound(id).map(IpAddr::V4) == Some(dst))
            .or_else(|| {
                ids.iter()
                    .find(|id| bound(id) == Some(Ipv4Addr::UNSPECIFIED))
            })
            .copied()
    }

    fn conn_id(&self, conn: u32) -> Option<u32> {
        self.by_conn.get(&conn).copied()
    }

    fn on_ib_event(&mut self, now: Instant, e: Event) {
        match e {
            Event::ReqReceived {
                conn,
                listen: _,
                req,
            } => self.on_req(now, conn, &req),
            Event::SidrReqReceived { conn, src, req, .. } => self.on_sidr_req(now, conn, src, &req),
            Event::RepReceived { conn, rep } => {
                let Some(id) = self.conn_id(conn) else {
                    return;
                };
                // Linux promises an MRA (sent only if the REP is repeated)
                // while user space moves its QP.
                let _ = self.ib.send_mra(conn, MRA_SERVICE_TIMEOUT, true);
                let mut ev = event(id, EventKind::ConnectResponse, 0);
                ev.conn = rep_conn_param(&rep);
                self.events.push_back(ev);
            }
            Event::RtuReceived { conn } => {
                if let Some(id) = self.conn_id(conn) {
                    self.events.push_back(event(id, EventKind::Established, 0));
                }
            }
            Event::RejReceived { conn, rej } => {
                if let Some(id) = self.conn_id(conn) {
                    let mut ev = event(id, EventKind::Rejected, i32::from(rej.reason));
                    ev.conn.private_data = rej.private_data.to_vec();
                    self.events.push_back(ev);
                }
            }
            Event::DreqReceived { conn } | Event::DrepReceived { conn } => {
                self.disconnected(conn, 0)
            }
            Event::DreqError { conn } => self.disconnected(conn, -ETIMEDOUT),
            Event::ReqError { conn } | Event::RepError { conn } | Event::SidrReqError { conn } => {
                if let Some(id) = self.conn_id(conn) {
                    self.events
                        .push_back(event(id, EventKind::Unreachable, -ETIMEDOUT));
                }
            }
            Event::TimewaitExit { conn } => {
                if let Some(id) = self.conn_id(conn) {
                    self.events.push_back(event(id, EventKind::TimewaitExit, 0));
                }
            }
            Event::SidrRepReceived { conn, rep } => self.on_sidr_rep(conn, &rep),
        }
    }

    fn disconnected(&mut self, conn: u32, status: i32) {
        let Some(id) = self.conn_id(conn) else {
            return;
        };
        let Some(i) = self.ids.get_mut(&id) else {
            return;
        };
        if i.state != IdState::Connect {
            return;
        }
        i.state = IdState::Disconnect;
        self.events
            .push_back(event(id, EventKind::Disconnected, status));
    }

    /// A new ID for a request that matched `listener`.
    fn child(&mut self, listener: u32, conn: u32, src: SocketAddrV4, dst: SocketAddrV4) -> u32 {
        let (ps, qp_type) = self
            .ids
            .get(&listener)
            .map_or((PS_TCP, QpType::Rc), |l| (l.ps, l.qp_type));
        let id = self.new_id(ps, qp_type, IdState::Connect);
        let route = self.ib.conn(conn).map(|c| c.path);
        if let Some(i) = self.ids.get_mut(&id) {
            i.src = Some(src);
            i.dst = Some(dst);
            i.conn = Some(conn);
            i.route = route;
            i.dgid = route.map(|r| r.dgid);
            i.via = self.ib.conn(conn).map(|c| c.peer);
        }
        self.by_conn.insert(conn, id);
        id
    }

    /// The child ID a request for `service_id` from `src` (source address
    /// and port) to `dst` creates on `listener`, and its CONNECT_REQUEST
    /// event.
    fn request_child(
        &mut self,
        listener: u32,
        conn: u32,
        service_id: u64,
        (src, dst): (Ipv4Addr, Ipv4Addr),
        src_port: u16,
    ) -> RdmaEvent {
        let port = ip::split_service_id(service_id).map_or(0, |(_, p)| p);
        let id = self.child(
            listener,
            conn,
            SocketAddrV4::new(dst, port),
            SocketAddrV4::new(src, src_port),
        );
        let mut ev = event(id, EventKind::ConnectRequest, 0);
        ev.listen_id = Some(listener);
        ev
    }

    fn on_req(&mut self, now: Instant, conn: u32, req: &req::Repr) {
        let hdr = ip::Packet::new_checked(&req.private_data[..])
            .and_then(|p| ip::Repr::parse(&p).map(|r| (r, p.user_data().to_vec())));
        let Ok((hdr, user)) = hdr else {
            let _ = self
                .ib
                .send_rej(now, conn, reason::CONSUMER_DEFINED, &[], &[]);
            self.ib.destroy(now, conn);
            return;
        };
        let (IpAddr::V4(s), IpAddr::V4(d)) = (hdr.src_addr, hdr.dst_addr) else {
            let _ = self
                .ib
                .send_rej(now, conn, reason::CONSUMER_DEFINED, &[], &[]);
            self.ib.destroy(now, conn);
            return;
        };
        let Some(listener) = self.find_listener(req.service_id, hdr.dst_addr) else {
            let _ = self
                .ib
                .send_rej(now, conn, reason::INVALID_SERVICE_ID, &[], &[]);
            self.ib.destroy(now, conn);
            return;
        };
        let mut ev = self.request_child(listener, conn, req.service_id, (s, d), hdr.src_port);
        let _ = self.ib.send_mra(conn, MRA_SERVICE_TIMEOUT, true);
        ev.conn = ConnParam {
            private_data: user,
            responder_resources: req.initiator_depth,
            initiator_depth: req.responder_resources,
            flow_control: req.flow_control,
            retry_count: req.retry_count,
            rnr_retry_count: req.rnr_retry_count,
            srq: req.srq,
            qp_num: req.local_qpn,
        };
        self.events.push_back(ev);
    }

    fn on_sidr_req(&mut self, now: Instant, conn: u32, _src: Gid, req: &sidr_req::Repr) {
        let hdr = ip::Packet::new_checked(&req.private_data[..])
            .and_then(|p| ip::Repr::parse(&p).map(|r| (r, p.user_data().to_vec())));
        let listener = hdr
            .as_ref()
            .ok()
            .and_then(|(h, _)| self.find_listener(req.service_id, h.dst_addr));
        let (Ok((hdr, user)), Some(listener)) = (hdr, listener) else {
            let _ = self
                .ib
                .send_sidr_rep(conn, sidr_rep::status::UNSUPPORTED, 0, 0, &[]);
            self.ib.destroy(now, conn);
            return;
        };
        let (IpAddr::V4(s), IpAddr::V4(d)) = (hdr.src_addr, hdr.dst_addr) else {
            let _ = self
                .ib
                .send_sidr_rep(conn, sidr_rep::status::UNSUPPORTED, 0, 0, &[]);
            self.ib.destroy(now, conn);
            return;
        };
        let mut ev = self.request_child(listener, conn, req.service_id, (s, d), hdr.src_port);
        ev.ud.private_data = user;
        self.events.push_back(ev);
    }

    fn on_sidr_rep(&mut self, conn: u32, rep: &sidr_rep::Repr) {
        let Some(id) = self.conn_id(conn) else {
            return;
        };
        let Some(i) = self.ids.get(&id) else {
            return;
        };
        if rep.status != sidr_rep::status::SUCCESS {
            self.events
                .push_back(event(id, EventKind::Unreachable, i32::from(rep.status)));
            return;
        }
        if rep.qkey != i.qkey {
            self.events
                .push_back(event(id, EventKind::Unreachable, -EINVAL));
            return;
        }
        let Some(route) = i.route else {
            return;
        };
        let mut ev = event(id, EventKind::Established, 0);
        ev.ud = UdParam {
            private_data: rep.private_data.to_vec(),
            av: Some(AddressVector {
                dgid: route.dgid,
                sgid_index: self.dev.sgid_index,
                flow_label: route.flow_label,
                hop_limit: route.hop_limit,
                traffic_class: route.traffic_class,
                sl: route.sl,
                static_rate: route.rate,
                port: 1,
            }),
            qp_num: rep.qpn,
            qkey: rep.qkey,
        };
        self.events.push_back(ev);
    }
}

/// The flow label Linux gives a RoCEv2 route over IPv4
/// (`cma_get_roce_udp_flow_label`): a hash of the two ports.
pub fn flow_label(sport: u16, dport: u16) -> u32 {
    (u32::from(sport)
        .wrapping_mul(31)
        .wrapping_add(u32::from(dport)))
        & 0xf_ffff
}

fn rep_conn_param(rep: &rep::Repr) -> ConnParam {
    ConnParam {
        private_data: rep.private_data.to_vec(),
        responder_resources: rep.initiator_depth,
        initiator_depth: rep.responder_resources,
        flow_control: rep.flow_control,
        retry_count: 0,
        rnr_retry_count: rep.rnr_retry_count,
        srq: rep.srq,
        qp_num: rep.local_qpn,
    }
}
