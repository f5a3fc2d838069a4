//! Two rdma_cm engines talking through a scripted link with a virtual clock:
//! every exchange rdma_cm applications depend on, the retries, the losses and
//! the duplicates, replayable because time only moves when a test moves it.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use rdmakit_cm::ib::{iba_time_ms, State};
use rdmakit_cm::rdma::{
    ConnParam, Device, EventKind, Peer, RdmaCm, RdmaEvent, PS_TCP, PS_UDP, UDP_QKEY,
};
use rdmakit_cm::{gid_of, Gid};
use rdmakit_proto::{AttrMask, Instant, QpState, QpType};
use rdmakit_wire::cm::{self, attr, Message};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 2);

/// Which side sent a MAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    A,
    B,
}

/// Decides whether the n-th MAD (0-based, every MAD counted) is lost.
type DropFn = Box<dyn FnMut(usize, Side, &cm::Repr) -> bool>;

struct Pair {
    a: RdmaCm,
    b: RdmaCm,
    now: Instant,
    /// Every MAD that crossed the link (or was dropped): (from, attribute, dropped).
    log: Vec<(Side, u16, bool)>,
    /// Drops the n-th MAD (0-based, counting every MAD sent) when it returns true.
    drop: DropFn,
    sent: usize,
    a_events: Vec<RdmaEvent>,
    b_events: Vec<RdmaEvent>,
}

impl Pair {
    fn new() -> Pair {
        Pair {
            a: RdmaCm::new(Device::roce_v2(A, 1024, 0xa), 11),
            b: RdmaCm::new(Device::roce_v2(B, 1024, 0xb), 22),
            now: Instant::ZERO,
            log: Vec::new(),
            drop: Box::new(|_, _, _| false),
            sent: 0,
            a_events: Vec::new(),
            b_events: Vec::new(),
        }
    }

    /// Carries MADs both ways until the link is quiet.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some(t) = self.a.poll_transmit() {
                moved = true;
                self.deliver(Side::A, t.dst, t.mad);
            }
            while let Some(t) = self.b.poll_transmit() {
                moved = true;
                self.deliver(Side::B, t.dst, t.mad);
            }
            while let Some(e) = self.a.poll_event() {
                self.a_events.push(e);
            }
            while let Some(e) = self.b.poll_event() {
                self.b_events.push(e);
            }
            if !moved {
                return;
            }
        }
    }

    fn deliver(&mut self, from: Side, dst: Gid, mad: [u8; 256]) {
        let r = cm::Repr::parse(&mad).expect("the engine emits parsable MADs");
        let n = self.sent;
        self.sent += 1;
        let dropped = (self.drop)(n, from, &r);
        self.log.push((from, r.message.attr_id(), dropped));
        if dropped {
            return;
        }
        let now = self.now;
        match from {
            Side::A => {
                assert_eq!(dst, gid_of(B));
                self.b.handle_mad(now, Peer::at(gid_of(A)), &mad)
            }
            Side::B => {
                assert_eq!(dst, gid_of(A));
                self.a.handle_mad(now, Peer::at(gid_of(B)), &mad)
            }
        }
    }

    /// Moves the clock to the next deadline of either engine (at most `max`).
    fn step(&mut self, max: Duration) -> bool {
        let next = [self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = next else { return false };
        let limit = self.now + max;
        if t > limit {
            self.now = limit;
            return false;
        }
        self.now = t.max(self.now);
        let now = self.now;
        self.a.handle_timeout(now);
        self.b.handle_timeout(now);
        self.pump();
        true
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.step(end - self.now) {}
        self.now = end;
    }

    fn kinds(ev: &[RdmaEvent]) -> Vec<EventKind> {
        ev.iter().map(|e| e.kind).collect()
    }

    fn sent_by(&self, side: Side, attr_id: u16) -> usize {
        self.log
            .iter()
            .filter(|(s, a, _)| *s == side && *a == attr_id)
            .count()
    }

    /// B listens on `port` (RC), A resolves and connects; returns (A's ID,
    /// B's listening ID).
    fn connect(&mut self, port: u16, private: &[u8]) -> (u32, u32) {
        let l = self.b.create_id(PS_TCP, QpType::Rc);
        self.b
            .bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
            .unwrap();
        self.b.listen(l).unwrap();
        let c = self.a.create_id(PS_TCP, QpType::Rc);
        self.a
            .resolve_addr(
                c,
                SocketAddrV4::new(A, 40001),
                SocketAddrV4::new(B, port),
                Ok(Peer::at(gid_of(B))),
            )
            .unwrap();
        self.a.resolve_route(c).unwrap();
        let now = self.now;
        self.a
            .connect(
                now,
                c,
                &ConnParam {
                    private_data: private.to_vec(),
                    responder_resources: 1,
                    initiator_depth: 1,
                    retry_count: 7,
                    rnr_retry_count: 7,
                    qp_num: 0x11,
                    ..ConnParam::default()
                },
            )
            .unwrap();
        self.pump();
        (c, l)
    }

    /// The ID B's CONNECT_REQUEST created.
    fn request_id(&self) -> u32 {
        self.b_events
            .iter()
            .find(|e| e.kind == EventKind::ConnectRequest)
            .expect("a CONNECT_REQUEST")
            .id
    }

    fn accept(&mut self, id: u32) {
        let now = self.now;
        self.b
            .accept(
                now,
                id,
                &ConnParam {
                    responder_resources: 1,
                    initiator_depth: 1,
                    rnr_retry_count: 7,
                    qp_num: 0x22,
                    ..ConnParam::default()
                },
            )
            .unwrap();
        self.pump();
    }

    /// A's librdmacm after CONNECT_RESPONSE: RTU.
    fn establish(&mut self, id: u32) {
        self.a.establish(id).unwrap();
        self.pump();
    }
}

#[test]
fn connect_accept_establish_with_private_data_and_matching_qp_attributes() {
    let mut p = Pair::new();
    let (c, l) = p.connect(7174, b"hello");
    assert_eq!(
        Pair::kinds(&p.a_events),
        [EventKind::AddrResolved, EventKind::RouteResolved]
    );
    let req = &p.b_events[0];
    assert_eq!(req.kind, EventKind::ConnectRequest);
    assert_eq!(req.listen_id, Some(l));
    // rdma_cm reports the whole user part: 92 - 36 header bytes.
    assert_eq!(req.conn.private_data.len(), 56);
    assert_eq!(&req.conn.private_data[..5], b"hello");
    assert_eq!(req.conn.qp_num, 0x11);
    let s = p.request_id();
    let child = p.b.id(s).unwrap();
    assert_eq!(child.src, Some(SocketAddrV4::new(B, 7174)));
    assert_eq!(child.dst, Some(SocketAddrV4::new(A, 40001)));

    p.accept(s);
    assert_eq!(p.a_events.last().unwrap().kind, EventKind::ConnectResponse);
    assert_eq!(p.a_events.last().unwrap().conn.qp_num, 0x22);
    assert_eq!(p.a_events.last().unwrap().conn.private_data.len(), 196);
    p.establish(c);
    assert_eq!(p.b_events.last().unwrap().kind, EventKind::Established);
    assert_eq!(
        p.a.ib()
            .conn(p.a.id(c).unwrap().conn.unwrap())
            .unwrap()
            .state,
        State::Established
    );
    assert_eq!(
        p.log.iter().map(|l| l.1).collect::<Vec<_>>(),
        [attr::REQ, attr::REP, attr::RTU],
        "no MRA unless a message is repeated"
    );

    // Each side's receive PSN is the other's send PSN; the AV points at the peer.
    let a_rtr = p.a.init_qp_attr(c, QpState::Rtr).unwrap();
    let a_rts = p.a.init_qp_attr(c, QpState::Rts).unwrap();
    let b_rtr = p.b.init_qp_attr(s, QpState::Rtr).unwrap();
    let b_rts = p.b.init_qp_attr(s, QpState::Rts).unwrap();
    assert_eq!(a_rtr.dest_qpn, 0x22);
    assert_eq!(b_rtr.dest_qpn, 0x11);
    assert_eq!(a_rtr.rq_psn, b_rts.sq_psn);
    assert_eq!(b_rtr.rq_psn, a_rts.sq_psn);
    assert_eq!(a_rtr.av.dgid, gid_of(B));
    assert_eq!(b_rtr.av.dgid, gid_of(A));
    assert_eq!(a_rtr.path_mtu, 3);
    assert!(a_rtr
        .mask
        .contains(AttrMask::AV | AttrMask::MAX_DEST_RD_ATOMIC));
    assert_eq!(a_rts.retry_cnt, 7);
    assert_eq!(b_rts.rnr_retry, 7);
    // Packet life time 18, ACK delay 15: Linux 6.1's REQ asks for 19.
    assert_eq!(b_rts.timeout, 19);
    assert_eq!(a_rts.timeout, 19);
}

#[test]
fn reject_reports_consumer_defined_with_the_private_data() {
    let mut p = Pair::new();
    p.connect(7175, b"");
    let s = p.request_id();
    let now = p.now;
    p.b.reject(now, s, b"go away", 0).unwrap();
    p.pump();
    let e = p.a_events.last().unwrap();
    assert_eq!(e.kind, EventKind::Rejected);
    assert_eq!(e.status, 28);
    assert_eq!(&e.conn.private_data[..7], b"go away");
}

#[test]
fn no_listener_is_rejected_with_invalid_service_id() {
    let mut p = Pair::new();
    let c = p.a.create_id(PS_TCP, QpType::Rc);
    p.a.resolve_addr(
        c,
        SocketAddrV4::new(A, 40002),
        SocketAddrV4::new(B, 9),
        Ok(Peer::at(gid_of(B))),
    )
    .unwrap();
    p.a.resolve_route(c).unwrap();
    let now = p.now;
    p.a.connect(now, c, &ConnParam::default()).unwrap();
    p.pump();
    let e = p.a_events.last().unwrap();
    assert_eq!((e.kind, e.status), (EventKind::Rejected, 8));
    assert_eq!(p.b.id_count(), 0);
}

#[test]
fn a_silent_peer_is_unreachable_after_fifteen_retries() {
    let mut p = Pair::new();
    p.drop = Box::new(|_, from, _| from == Side::A);
    let (c, _) = p.connect(7176, b"");
    p.run_for(Duration::from_secs(300));
    assert_eq!(p.sent_by(Side::A, attr::REQ), 16);
    let e = p.a_events.last().unwrap();
    assert_eq!((e.id, e.kind, e.status), (c, EventKind::Unreachable, -110));
    // 2 x packet life time + the peer's response time, per try.
    let per_try = 2 * iba_time_ms(18) + iba_time_ms(20);
    assert_eq!(per_try, 6144);
}

#[test]
fn a_lost_rep_is_sent_again_and_a_repeated_req_gets_the_promised_mra() {
    let mut p = Pair::new();
    // Drop the first REQ's answer path: the first REP from B.
    p.drop = Box::new(|_, from, r| {
        from == Side::B && r.message.attr_id() == attr::REP && {
            static ONCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
            ONCE.swap(false, std::sync::atomic::Ordering::SeqCst)
        }
    });
    let (c, _) = p.connect(7177, b"");
    let s = p.request_id();
    // The application takes a while to accept: A repeats its REQ; B answers
    // with the MRA rdma_cm promised.
    p.run_for(Duration::from_millis(7000));
    assert_eq!(p.sent_by(Side::A, attr::REQ), 2);
    assert_eq!(p.sent_by(Side::B, attr::MRA), 1);
    assert_eq!(
        p.b_events
            .iter()
            .filter(|e| e.kind == EventKind::ConnectRequest)
            .count(),
        1
    );
    p.accept(s);
    // The REP was dropped; B retries it after its timeout.
    assert!(p
        .a_events
        .iter()
        .all(|e| e.kind != EventKind::ConnectResponse));
    p.run_for(Duration::from_millis(5000));
    assert_eq!(p.sent_by(Side::B, attr::REP), 2);
    assert_eq!(p.a_events.last().unwrap().kind, EventKind::ConnectResponse);
    p.establish(c);
    assert_eq!(p.b_events.last().unwrap().kind, EventKind::Established);
}

#[test]
fn disconnect_reaches_both_sides_then_timewait_ends() {
    let mut p = Pair::new();
    let (c, _) = p.connect(7178, b"");
    let s = p.request_id();
    p.accept(s);
    p.establish(c);
    let now = p.now;
    p.a.disconnect(now, c).unwrap();
    p.pump();
    assert_eq!(p.b_events.last().unwrap().kind, EventKind::Disconnected);
    // B's application disconnects too: its DREP ends A's wait.
    p.b.disconnect(now, s).unwrap();
    p.pump();
    assert_eq!(p.a_events.last().unwrap().kind, EventKind::Disconnected);
    assert_eq!(p.sent_by(Side::A, attr::DREQ), 1);
    assert_eq!(p.sent_by(Side::B, attr::DREP), 1);
    p.run_for(Duration::from_secs(5));
    assert_eq!(p.a_events.last().unwrap().kind, EventKind::TimewaitExit);
    assert_eq!(p.b_events.last().unwrap().kind, EventKind::TimewaitExit);
}

#[test]
fn an_unanswered_dreq_still_disconnects_with_etimedout() {
    let mut p = Pair::new();
    let (c, _) = p.connect(7179, b"");
    let s = p.request_id();
    p.accept(s);
    p.establish(c);
    p.drop = Box::new(|_, from, _| from == Side::A);
    let now = p.now;
    p.a.disconnect(now, c).unwrap();
    p.run_for(Duration::from_secs(120));
    let e = p
        .a_events
        .iter()
        .find(|e| e.kind == EventKind::Disconnected)
        .unwrap();
    assert_eq!(e.status, -110);
    assert_eq!(p.sent_by(Side::A, attr::DREQ), 16);
}

#[test]
fn destroying_an_established_id_sends_dreq_and_the_peer_is_disconnected() {
    let mut p = Pair::new();
    let (c, _) = p.connect(7180, b"");
    let s = p.request_id();
    p.accept(s);
    p.establish(c);
    let now = p.now;
    p.a.destroy(now, c);
    p.pump();
    assert_eq!(p.b_events.last().unwrap().kind, EventKind::Disconnected);
    // The peer destroys too: its DREP finds no connection, nothing breaks.
    p.b.destroy(now, s);
    p.pump();
    assert_eq!(p.a.id_count(), 0);
}

#[test]
fn giving_up_on_a_req_tells_the_passive_side_with_rej_timeout() {
    let mut p = Pair::new();
    let (c, _) = p.connect(7181, b"");
    let s = p.request_id();
    let now = p.now;
    p.a.destroy(now, c);
    p.pump();
    let e = p.b_events.last().unwrap();
    assert_eq!((e.id, e.kind, e.status), (s, EventKind::Rejected, 4));
}

#[test]
fn crossing_dreqs_disconnect_both_sides() {
    let mut p = Pair::new();
    let (c, _) = p.connect(7182, b"");
    let s = p.request_id();
    p.accept(s);
    p.establish(c);
    let now = p.now;
    p.a.disconnect(now, c).unwrap();
    p.b.disconnect(now, s).unwrap();
    p.pump();
    assert!(p.a_events.iter().any(|e| e.kind == EventKind::Disconnected));
    assert!(p.b_events.iter().any(|e| e.kind == EventKind::Disconnected));
}

fn ud_pair(listen: bool) -> (Pair, u32) {
    let mut p = Pair::new();
    if listen {
        let l = p.b.create_id(PS_UDP, QpType::Ud);
        p.b.bind(l, SocketAddrV4::new(B, 7183)).unwrap();
        p.b.listen(l).unwrap();
    }
    let c = p.a.create_id(PS_UDP, QpType::Ud);
    p.a.resolve_addr(
        c,
        SocketAddrV4::new(A, 40003),
        SocketAddrV4::new(B, 7183),
        Ok(Peer::at(gid_of(B))),
    )
    .unwrap();
    p.a.resolve_route(c).unwrap();
    let now = p.now;
    p.a.connect(
        now,
        c,
        &ConnParam {
            private_data: b"ud".to_vec(),
            ..ConnParam::default()
        },
    )
    .unwrap();
    p.pump();
    (p, c)
}

#[test]
fn ud_service_id_resolution_gives_the_qpn_qkey_and_address_vector() {
    let (mut p, c) = ud_pair(true);
    let req = &p.b_events[0];
    assert_eq!(req.kind, EventKind::ConnectRequest);
    assert_eq!(&req.ud.private_data[..2], b"ud");
    let s = req.id;
    let now = p.now;
    p.b.accept(
        now,
        s,
        &ConnParam {
            qp_num: 0x33,
            ..ConnParam::default()
        },
    )
    .unwrap();
    p.pump();
    let e = p.a_events.last().unwrap();
    assert_eq!((e.id, e.kind), (c, EventKind::Established));
    assert_eq!(e.ud.qp_num, 0x33);
    assert_eq!(e.ud.qkey, UDP_QKEY);
    assert_eq!(e.ud.av.unwrap().dgid, gid_of(B));
    for (cm, id) in [(&p.a, c), (&p.b, s)] {
        let init = cm.init_qp_attr(id, QpState::Init).unwrap();
        assert!(init.mask.contains(AttrMask::QKEY), "{init:?}");
        assert_eq!(init.qkey, UDP_QKEY);
    }
    assert_eq!(
        p.log.iter().map(|l| l.1).collect::<Vec<_>>(),
        [attr::SIDR_REQ, attr::SIDR_REP]
    );
}

#[test]
fn ud_without_a_listener_is_unreachable_with_the_sidr_status() {
    let (p, c) = ud_pair(false);
    let e = p.a_events.last().unwrap();
    assert_eq!((e.id, e.kind, e.status), (c, EventKind::Unreachable, 1));
}

#[test]
fn events_and_mads_are_the_same_for_the_same_seed() {
    let run = || {
        let mut p = Pair::new();
        let (c, _) = p.connect(7184, b"x");
        let s = p.request_id();
        p.accept(s);
        p.establish(c);
        let mut out = Vec::new();
        for e in p.a_events.iter().chain(&p.b_events) {
            out.push(format!("{e:?}"));
        }
        out.push(format!("{:?}", p.a.init_qp_attr(c, QpState::Rtr)));
        out
    };
    assert_eq!(run(), run());
}

#[test]
fn a_request_arriving_twice_creates_one_connection() {
    let mut p = Pair::new();
    let l = p.b.create_id(PS_TCP, QpType::Rc);
    p.b.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7185))
        .unwrap();
    p.b.listen(l).unwrap();
    let c = p.a.create_id(PS_TCP, QpType::Rc);
    p.a.resolve_addr(
        c,
        SocketAddrV4::new(A, 40004),
        SocketAddrV4::new(B, 7185),
        Ok(Peer::at(gid_of(B))),
    )
    .unwrap();
    p.a.resolve_route(c).unwrap();
    let now = p.now;
    p.a.connect(now, c, &ConnParam::default()).unwrap();
    let t = p.a.poll_transmit().unwrap();
    p.b.handle_mad(now, Peer::at(gid_of(A)), &t.mad);
    p.b.handle_mad(now, Peer::at(gid_of(A)), &t.mad);
    let evs: Vec<_> = std::iter::from_fn(|| p.b.poll_event()).collect();
    assert_eq!(evs.len(), 1);
    // The duplicate after CONNECT_REQUEST got the promised MRA.
    let mra = p.b.poll_transmit().unwrap();
    assert!(matches!(
        cm::Repr::parse(&mra.mad).unwrap().message,
        Message::Mra(_)
    ));
}

#[test]
fn processes_sharing_one_gid_are_reached_at_their_own_qp1() {
    // A loopback device whose processes share the GID ::ffff:127.0.0.1: the
    // address vector names the shared GID, MADs go to each process's QP1.
    let shared = Ipv4Addr::LOCALHOST;
    let (via_a, via_b) = (
        gid_of(Ipv4Addr::new(127, 77, 0, 1)),
        gid_of(Ipv4Addr::new(127, 77, 0, 2)),
    );
    let mut a = RdmaCm::new(Device::roce_v2(shared, 4096, 1), 5);
    let mut b = RdmaCm::new(Device::roce_v2(shared, 4096, 1), 6);
    let now = Instant::ZERO;
    let l = b.create_id(PS_TCP, QpType::Rc);
    b.bind(l, SocketAddrV4::new(shared, 7186)).unwrap();
    b.listen(l).unwrap();
    let c = a.create_id(PS_TCP, QpType::Rc);
    let peer = Peer {
        gid: gid_of(shared),
        via: via_b,
    };
    a.resolve_addr(
        c,
        SocketAddrV4::new(shared, 40005),
        SocketAddrV4::new(shared, 7186),
        Ok(peer),
    )
    .unwrap();
    a.resolve_route(c).unwrap();
    a.connect(
        now,
        c,
        &ConnParam {
            qp_num: 0x4011,
            ..ConnParam::default()
        },
    )
    .unwrap();
    let req = a.poll_transmit().unwrap();
    assert_eq!(req.dst, via_b, "the REQ goes to the listener's QP1");
    b.handle_mad(
        now,
        Peer {
            gid: gid_of(shared),
            via: via_a,
        },
        &req.mad,
    );
    let s = std::iter::from_fn(|| b.poll_event()).last().unwrap().id;
    b.accept(
        now,
        s,
        &ConnParam {
            qp_num: 0x8011,
            ..ConnParam::default()
        },
    )
    .unwrap();
    let rep = b.poll_transmit().unwrap();
    assert_eq!(
        rep.dst, via_a,
        "the REP goes back to where the REQ came from"
    );
    a.handle_mad(
        now,
        Peer {
            gid: gid_of(shared),
            via: via_b,
        },
        &rep.mad,
    );
    assert_eq!(a.poll_event().unwrap().kind, EventKind::AddrResolved);
    let rtr_a = a.init_qp_attr(c, QpState::Rtr).unwrap();
    let rtr_b = b.init_qp_attr(s, QpState::Rtr).unwrap();
    assert_eq!(rtr_a.av.dgid, gid_of(shared));
    assert_eq!(rtr_b.av.dgid, gid_of(shared));
    assert_eq!((rtr_a.dest_qpn, rtr_b.dest_qpn), (0x8011, 0x4011));
}

#[test]
fn two_processes_with_one_ca_guid_and_the_same_comm_id_are_two_requests() {
    // Processes of one soft device share its CA GUID, and each runs its own
    // CM: equal seeds give both clients the same communication ID. Their
    // REQs come from different QP1s and must not be taken as one repeated.
    let shared = Ipv4Addr::LOCALHOST;
    let via = |n: u8| gid_of(Ipv4Addr::new(127, 77, 0, n));
    let mut srv = RdmaCm::new(Device::roce_v2(shared, 4096, 1), 9);
    let now = Instant::ZERO;
    let l = srv.create_id(PS_TCP, QpType::Rc);
    srv.bind(l, SocketAddrV4::new(shared, 7190)).unwrap();
    srv.listen(l).unwrap();
    for (n, qpn) in [(2u8, 0x8001u32), (3, 0xc001)] {
        let mut cli = RdmaCm::new(Device::roce_v2(shared, 4096, 1), 7);
        let c = cli.create_id(PS_TCP, QpType::Rc);
        let peer = Peer {
            gid: gid_of(shared),
            via: via(1),
        };
        cli.resolve_addr(
            c,
            SocketAddrV4::new(shared, 40010),
            SocketAddrV4::new(shared, 7190),
            Ok(peer),
        )
        .unwrap();
        cli.resolve_route(c).unwrap();
        cli.connect(
            now,
            c,
            &ConnParam {
                qp_num: qpn,
                ..ConnParam::default()
            },
        )
        .unwrap();
        let req = cli.poll_transmit().unwrap();
        srv.handle_mad(
            now,
            Peer {
                gid: gid_of(shared),
                via: via(n),
            },
            &req.mad,
        );
        let ev = srv.poll_event().expect("a CONNECT_REQUEST per client");
        assert_eq!(ev.kind, EventKind::ConnectRequest);
        assert_eq!(ev.conn.qp_num, qpn);
    }
}
