//! Scripted tests of congestion control in the engine: the TOS of what it
//! sends, the notification point answering CE-marked packets with CNPs,
//! and the reaction point taking CNPs from the connected peer only
//! (fixture: scripted/mod.rs).

mod scripted;

use std::sync::Arc;

use rdmakit_proto::cc::{Params, Rate};
use rdmakit_proto::{Arrival, Transmit};
use rdmakit_wire::cnp;
use scripted::*;

/// The peer's path in the fixture's AV.
const PEER: AddressHandle = AddressHandle(1);

fn marked(src: Option<AddressHandle>) -> Arrival {
    Arrival {
        ce: true,
        src,
        answer: None,
    }
}

fn from_peer() -> Arrival {
    Arrival {
        ce: false,
        src: Some(PEER),
        answer: None,
    }
}

fn cnp_to(qpn: u32) -> Vec<u8> {
    let mut b = vec![0u8; cnp::LEN_WITHOUT_ICRC];
    cnp::Repr::new(qpn).emit_without_icrc(&mut b).unwrap();
    b
}

/// A QP with CC parameters `p` and an ACK timeout of 4 s (no retry
/// while a test paces packets milliseconds apart without answering).
/// mlx5's defaults without rate increases (the increase timer a second,
/// no byte counter): a rate stays where a CNP put it.
fn no_increase() -> Params {
    Params {
        rp_time_reset: 1_000_000,
        rp_byte_reset: 0,
        ..Params::mlx5()
    }
}

fn with_params(t: QpType, upto: QpState, p: Params) -> Fix {
    let mut cfg = QpConfig::new(QPN, t, Pd(1));
    cfg.cc = Arc::new(p);
    let a = QpAttr {
        timeout: 20,
        ..attrs()
    };
    qp_with(cfg, upto, &a)
}

impl Fix2 for Fix {
    fn arrive(&mut self, p: &Packet<'_>, a: Arrival) {
        let b = emit(p);
        self.qp.handle_arrival(self.now, &b, a, None, &mut self.mem);
    }
    fn arrive_raw(&mut self, b: &[u8], a: Arrival) {
        self.qp.handle_arrival(self.now, b, a, None, &mut self.mem);
    }
    fn transmit(&mut self) -> Vec<(Transmit, Vec<u8>)> {
        let mut buf = vec![0u8; 8192];
        let mut v = Vec::new();
        while let Some(t) = self.qp.poll_transmit(self.now, &mut buf, &mut self.mem) {
            v.push((t, buf[..t.len].to_vec()));
        }
        v
    }
}

trait Fix2 {
    fn arrive(&mut self, p: &Packet<'_>, a: Arrival);
    fn arrive_raw(&mut self, b: &[u8], a: Arrival);
    fn transmit(&mut self) -> Vec<(Transmit, Vec<u8>)>;
}

/// A SEND ONLY asking for an ACK, with a receive posted for it.
fn send_only(f: &mut Fix, psn: u32) -> Packet<'static> {
    f.post_recv(u64::from(psn), 0, 64);
    let mut p = mk(0x04, psn);
    p.bth.ack_req = true;
    p
}

fn write_wr(f: &Fix, len: u32) -> SendWr {
    let op = SendOp::Write {
        remote_addr: 0x9000,
        rkey: 7,
    };
    SendWr::new(1, op, vec![f.sge(len)])
}

#[test]
fn data_packets_carry_the_dscp_of_the_traffic_class_and_ect0() {
    let mut f = qp_rts(QpType::Rc);
    let wr = write_wr(&f, 16);
    f.qp.post_send(wr.clone()).unwrap();
    let out = f.transmit();
    assert_eq!(out[0].0.tos, 0b10, "traffic class 0: DSCP 0, ECT(0)");
    // DSCP 26 with stray ECN bits in the class: the engine's ECN wins.
    f.qp.set_traffic_class((26 << 2) | 0b01);
    f.qp.post_send(wr).unwrap();
    let p = send_only(&mut f, 100);
    f.send(&p);
    let out = f.transmit();
    assert_eq!(out.len(), 2, "the ACK and the request");
    assert!(out.iter().all(|(t, _)| t.tos == 0x6a), "{out:?}");
}

#[test]
fn a_priority_without_reaction_point_sends_not_ect() {
    let mut p = Params::mlx5();
    p.set("rp_enable_3", "0").unwrap();
    let mut f = with_params(QpType::Rc, QpState::Rts, p);
    f.qp.set_traffic_class(26 << 2); // priority 3
    let wr = write_wr(&f, 16);
    f.qp.post_send(wr).unwrap();
    assert_eq!(f.transmit()[0].0.tos, 26 << 2);
}

#[test]
fn ce_marked_request_is_answered_with_a_cnp_before_the_ack() {
    let mut f = qp_rts(QpType::Rc);
    let p = send_only(&mut f, 100);
    f.arrive(&p, marked(Some(PEER)));
    let out = f.transmit();
    assert_eq!(out.len(), 2);
    let (t, bytes) = &out[0];
    assert_eq!(bytes.len(), cnp::LEN_WITHOUT_ICRC);
    let c = cnp::Repr::parse_without_icrc(bytes).unwrap();
    assert_eq!((c.dest_qp, c.pkey), (RQPN, 0xffff));
    assert_eq!(bytes[0], 0x81);
    assert_eq!(bytes[4] & 0x40, 0x40, "BECN");
    assert_eq!(&bytes[12..28], &[0u8; 16]);
    assert_eq!((t.ah, t.tos), (PEER, 48 << 2), "np_cnp_dscp, Not-ECT");
    assert_eq!(parse(&out[1].1).aeth.unwrap().kind, syndrome::ACK);
    let s = f.qp.stats();
    assert_eq!((s.np_ecn_marked_roce_packets, s.np_cnp_sent), (1, 1));
}

#[test]
fn np_min_time_between_cnps_limits_cnps_not_the_count() {
    let mut f = qp_rts(QpType::Rc); // 4 µs
    for psn in 100..103 {
        let p = send_only(&mut f, psn);
        f.arrive(&p, marked(Some(PEER)));
    }
    let cnps = |out: Vec<(Transmit, Vec<u8>)>| out.iter().filter(|(_, b)| b[0] == 0x81).count();
    assert_eq!(cnps(f.transmit()), 1);
    f.now = f.now + Duration::from_micros(4);
    let p = send_only(&mut f, 103);
    f.arrive(&p, marked(Some(PEER)));
    assert_eq!(cnps(f.transmit()), 1);
    let s = f.qp.stats();
    assert_eq!((s.np_ecn_marked_roce_packets, s.np_cnp_sent), (4, 2));
}

#[test]
fn a_cnp_is_not_held_back_with_deferred_acks() {
    let mut f = qp_rts(QpType::Rc);
    let p = send_only(&mut f, 100);
    f.arrive(&p, marked(Some(PEER)));
    assert!(!f.qp.only_acks_pending());
    let mut buf = vec![0u8; 8192];
    let t =
        f.qp.poll_transmit_deferring_acks(f.now, &mut buf, &mut f.mem)
            .expect("the CNP goes");
    assert_eq!(buf[0], 0x81);
    assert_eq!(t.len, cnp::LEN_WITHOUT_ICRC);
    assert!(f.qp.only_acks_pending(), "the ACK may wait");
}

#[test]
fn a_priority_without_notification_point_counts_marks_and_sends_no_cnp() {
    let mut p = Params::mlx5();
    p.set("np_enable_0", "0").unwrap();
    let mut f = with_params(QpType::Rc, QpState::Rts, p);
    let p = send_only(&mut f, 100);
    f.arrive(&p, marked(Some(PEER)));
    assert!(f.transmit().iter().all(|(_, b)| b[0] != 0x81));
    let s = f.qp.stats();
    assert_eq!((s.np_ecn_marked_roce_packets, s.np_cnp_sent), (1, 0));
}

#[test]
fn ce_marked_ud_send_is_answered_to_the_deth_source() {
    let mut f = qp_rts(QpType::Ud);
    f.post_recv(1, 0, 256);
    f.post_recv(2, 0, 256);
    let mut p = mk(0x64, 0); // UD SEND ONLY
    p.deth = Some(deth::Repr {
        qkey: 0x1111_1111,
        src_qp: 0x33,
    });
    f.arrive(&p, marked(Some(AddressHandle(9))));
    let out = f.transmit();
    assert_eq!(out.len(), 1);
    let c = cnp::Repr::parse_without_icrc(&out[0].1).unwrap();
    assert_eq!((c.dest_qp, out[0].0.ah), (0x33, AddressHandle(9)));
    // A source the driver has no path for: counted, not answered.
    f.now = f.now + Duration::from_millis(1);
    f.arrive(&p, marked(None));
    assert!(f.transmit().is_empty());
    assert_eq!(f.qp.stats().np_ecn_marked_roce_packets, 2);
}

#[test]
fn cnp_from_the_peer_paces_requests_without_an_answer_or_a_psn() {
    let p = Params {
        rp_rate_to_set_on_first_cnp: Rate::from_mbps(1),
        ..no_increase()
    };
    let mut f = with_params(QpType::Rc, QpState::Rts, p);
    let psn = f.qp.attr().sq_psn;
    f.arrive_raw(&cnp_to(QPN), from_peer());
    assert!(f.transmit().is_empty(), "a CNP is never answered");
    assert_eq!(f.qp.attr().sq_psn, psn);
    assert_eq!(f.qp.stats().rp_cnp_handled, 1);
    assert_eq!(f.qp.cc_rate(), Some(Rate::from_mbps(1)));
    assert_eq!(f.qp.poll_timeout(), None, "an idle QP needs no wake-up");
    // Four packets of 256 bytes: the first goes, then one per packet time
    // at 1 Mb/s.
    let wr = write_wr(&f, 1024);
    f.qp.post_send(wr).unwrap();
    let mut times = Vec::new();
    for _ in 0..4 {
        let out = f.transmit();
        assert_eq!(out.len(), 1, "one packet per pacing slot");
        assert!(
            parse(&out[0].1).bth.ack_req,
            "a throttled QP asks for every ACK"
        );
        times.push((f.now, out[0].0.len));
        let at = f.qp.poll_timeout().expect("a deadline");
        f.now = at.min(f.now + Duration::from_secs(1));
        // Not before the pacing deadline.
        f.qp.handle_timeout(f.now);
    }
    for w in times.windows(2) {
        let (t0, len) = w[0];
        // len bytes at 1 Mb/s take len·8 µs.
        assert_eq!(
            w[1].0 - t0,
            Duration::from_micros(len as u64 * 8),
            "{times:?}"
        );
    }
    assert_eq!(f.qp.stats().acks_sent + f.qp.stats().naks_received, 0);
}

#[test]
fn a_paced_qp_polled_early_sends_nothing_and_keeps_its_deadline() {
    let p = Params {
        rp_rate_to_set_on_first_cnp: Rate::from_mbps(1),
        ..no_increase()
    };
    let mut f = with_params(QpType::Rc, QpState::Rts, p);
    f.arrive_raw(&cnp_to(QPN), from_peer());
    let wr = write_wr(&f, 512);
    f.qp.post_send(wr).unwrap();
    assert_eq!(f.transmit().len(), 1);
    let due = f.qp.poll_timeout().unwrap();
    f.now = f.now + Duration::from_micros(1);
    f.qp.handle_timeout(f.now);
    assert!(f.transmit().is_empty());
    assert!(f.qp.poll_timeout().unwrap() <= due);
}

#[test]
fn cnp_not_from_the_connected_peer_is_ignored() {
    let mut f = qp_rts(QpType::Rc);
    f.arrive_raw(&cnp_to(QPN), Arrival::default());
    f.arrive_raw(&cnp_to(QPN), marked(Some(AddressHandle(7))));
    let s = f.qp.stats();
    assert_eq!((s.rp_cnp_handled, s.rp_cnp_ignored), (0, 2));
    assert_eq!(f.qp.cc_rate(), None);
    // The plain entry point knows no source: ignored too.
    f.send_raw(&cnp_to(QPN));
    assert_eq!(f.qp.stats().rp_cnp_ignored, 3);
}

#[test]
fn cnp_for_a_qp_that_is_not_sending_connected_is_ignored() {
    let mut rtr = qp_in(QpType::Rc, QpState::Rtr, &attrs());
    rtr.arrive_raw(&cnp_to(QPN), from_peer());
    let mut ud = qp_rts(QpType::Ud);
    ud.arrive_raw(&cnp_to(QPN), from_peer());
    let mut p = Params::mlx5();
    p.set("rp_enable_0", "0").unwrap();
    let mut off = with_params(QpType::Rc, QpState::Rts, p);
    off.arrive_raw(&cnp_to(QPN), from_peer());
    for f in [&rtr, &ud, &off] {
        assert_eq!(f.qp.stats().rp_cnp_ignored, 1);
        assert_eq!(f.qp.cc_rate(), None);
    }
    let mut uc = qp_rts(QpType::Uc);
    uc.arrive_raw(&cnp_to(QPN), from_peer());
    assert_eq!(uc.qp.stats().rp_cnp_handled, 1);
}

#[test]
fn cnp_for_another_qp_or_malformed_is_dropped() {
    let mut f = qp_rts(QpType::Rc);
    f.arrive_raw(&cnp_to(QPN + 1), from_peer());
    f.arrive_raw(&cnp_to(QPN)[..20], from_peer());
    let mut long = cnp_to(QPN);
    long.push(0);
    f.arrive_raw(&long, from_peer());
    let s = f.qp.stats();
    assert_eq!((s.drops.wrong_qpn, s.drops.malformed), (1, 2));
    assert_eq!((s.rp_cnp_handled, s.rp_cnp_ignored), (0, 0));
}

/// A CNP from the peer under a P_Key the QP's table does not match (a
/// partition it is not in): a P_Key drop, the rate untouched.
#[test]
fn cnp_outside_the_qps_partition_is_a_pkey_drop() {
    let mut f = qp_rts(QpType::Rc);
    let mut b = vec![0u8; cnp::LEN_WITHOUT_ICRC];
    cnp::Repr {
        pkey: 0x8001,
        ..cnp::Repr::new(QPN)
    }
    .emit_without_icrc(&mut b)
    .unwrap();
    f.arrive_raw(&b, from_peer());
    let s = f.qp.stats();
    assert_eq!(s.drops.pkey, 1);
    assert_eq!((s.rp_cnp_handled, s.rp_cnp_ignored), (0, 0));
    assert_eq!(f.qp.cc_rate(), None);
    // The same CNP under the QP's own P_Key is acted on.
    f.arrive_raw(&cnp_to(QPN), from_peer());
    assert_eq!(f.qp.stats().rp_cnp_handled, 1);
}

#[test]
fn cnp_flood_from_the_peer_stops_at_min_rate_and_the_qp_still_sends() {
    let mut f = with_params(QpType::Rc, QpState::Rts, no_increase());
    for i in 0..10_000u64 {
        f.now = Instant::from_nanos(i * 100);
        f.arrive_raw(&cnp_to(QPN), from_peer());
    }
    assert_eq!(f.qp.stats().rp_cnp_handled, 10_000);
    assert_eq!(f.qp.cc_rate(), Some(Params::mlx5().rp_min_rate));
    let wr = write_wr(&f, 2048);
    f.qp.post_send(wr).unwrap();
    let mut sent = 0;
    for _ in 0..16 {
        sent += f.transmit().len();
        if sent == 8 {
            break;
        }
        if let Some(at) = f.qp.poll_timeout() {
            f.now = at;
            f.qp.handle_timeout(f.now);
        }
    }
    assert_eq!(sent, 8, "all eight packets went, at rp_min_rate");
    // 1 ms of CNPs, then eight packets of 284 bytes at 1 Mb/s: 18 ms.
    assert!(f.now < Instant::from_nanos(30_000_000), "{:?}", f.now);
}

#[test]
fn an_unthrottled_qp_sends_without_reading_the_clock() {
    use rdmakit_proto::LazyClock;
    // UC arms no ACK timer: nothing but the pacer could read the clock.
    let mut f = qp_rts(QpType::Uc);
    let wr = write_wr(&f, 1024);
    f.qp.post_send(wr).unwrap();
    let never = LazyClock::new(|| -> Instant { panic!("the clock was read") });
    let mut buf = vec![0u8; 8192];
    let mut n = 0;
    while f.qp.poll_transmit(&never, &mut buf, &mut f.mem).is_some() {
        n += 1;
    }
    assert_eq!(n, 4);
    assert_eq!(f.qp.poll_timeout(), None);
}
