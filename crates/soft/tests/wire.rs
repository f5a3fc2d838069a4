//! What the soft NIC puts on the wire, seen by a plain UDP socket playing the
//! peer: RoCEv2 on port 4791, flow-entropy source port, BTH, pad, ICRC.

mod common;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::time::Duration;

use rdmakit_soft::net::{flow_port, ROCE_PORT};
use rdmakit_soft::proto::{Access, Mtu, QpAttr, QpType, SendOp, SendWr};
use rdmakit_soft::{Device, DeviceConfig, Gid, SendRequest};
use rdmakit_wire::frame::IpRepr;
use rdmakit_wire::{ipv4, udp};

fn fake_peer() -> UdpSocket {
    for i in 0..200u32 {
        let a = Ipv4Addr::new(127, 60, (std::process::id() as u8).wrapping_add(i as u8), 7);
        if let Ok(s) = UdpSocket::bind(SocketAddrV4::new(a, ROCE_PORT)) {
            return s;
        }
    }
    panic!("no free 127.60.x.7:4791");
}

#[test]
fn rc_send_only_on_the_wire_has_entropy_port_bth_pad_and_a_valid_icrc() {
    let peer = fake_peer();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let peer_ip = match peer.local_addr().unwrap() {
        SocketAddr::V4(a) => *a.ip(),
        SocketAddr::V6(_) => unreachable!(),
    };
    let d = Device::open(DeviceConfig::default()).unwrap();
    let pd = d.alloc_pd().unwrap();
    let cq = d.create_cq(16, None).unwrap();
    let qpn = d.create_qp(&common::init(pd, cq, QpType::Rc)).unwrap();
    let at = QpAttr {
        qp_access_flags: Access::all(),
        path_mtu: Mtu::Mtu1024,
        dest_qp_num: 0x123,
        rq_psn: 7,
        sq_psn: 0x100,
        ..QpAttr::default()
    };
    common::to_rts(&d, qpn, &at, Gid::from_ipv4(peer_ip));
    let data = *b"hello";
    let sge = rdmakit_soft::proto::Sge {
        addr: data.as_ptr() as u64,
        length: 5,
        lkey: 0,
    };
    // SAFETY: the inline SGE covers `data`, alive for the call.
    unsafe {
        d.post_send(
            qpn,
            &[SendRequest {
                wr: SendWr::new(1, SendOp::Send, vec![sge]),
                inline: true,
            }],
        )
        .unwrap();
    }
    let mut buf = [0u8; 2048];
    let (n, src) = peer.recv_from(&mut buf).unwrap();
    let SocketAddr::V4(src) = src else {
        unreachable!()
    };
    let pkt = &buf[..n];
    assert_eq!(src.ip(), d.endpoint().ip());
    assert!((0xc000..=0xffff).contains(&src.port()));
    assert_eq!(src.port(), flow_port(qpn, 0x123));
    // BTH (12) + "hello" (5) + pad (3) + ICRC (4).
    assert_eq!(n, 24);
    assert_eq!(pkt[0], 0x04, "RC SEND_ONLY");
    assert_eq!((pkt[1] >> 4) & 3, 3, "PadCnt");
    assert_eq!(&pkt[2..4], &[0xff, 0xff], "default P_Key");
    assert_eq!(&pkt[5..8], &[0x00, 0x01, 0x23], "DestQP");
    assert_eq!(&pkt[9..12], &[0x00, 0x01, 0x00], "PSN");
    assert_eq!(&pkt[12..17], b"hello");
    let ip = IpRepr::Ipv4(ipv4::Repr::udp(*d.endpoint().ip(), peer_ip, 8 + n));
    let u = udp::Repr {
        src_port: src.port(),
        dst_port: ROCE_PORT,
        payload_len: n,
    };
    let icrc = rdmakit_wire::icrc::compute_reprs(&ip, &u, &pkt[..n - 4]).unwrap();
    assert_eq!(&pkt[n - 4..], &icrc.to_le_bytes());
}

/// Hostile datagrams: too short, bad ICRC, and 2000 seeded random packets
/// with a valid ICRC aimed at a live RC QP. Nothing panics and the counters
/// say what was dropped.
#[test]
fn hostile_datagrams_are_counted_and_dropped_and_the_device_keeps_working() {
    let d = Device::open(DeviceConfig::default()).unwrap();
    let pd = d.alloc_pd().unwrap();
    let cq = d.create_cq(4096, None).unwrap();
    let init = common::init(pd, cq, QpType::Rc);
    let qa = d.create_qp(&init).unwrap();
    let qb = d.create_qp(&init).unwrap();
    let gid = d.gid(1, 0).unwrap();
    for (me, peer) in [(qa, qb), (qb, qa)] {
        let at = QpAttr {
            qp_access_flags: Access::all(),
            dest_qp_num: peer,
            ..QpAttr::default()
        };
        common::to_rts(&d, me, &at, gid);
    }
    let evil = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
    let SocketAddr::V4(from) = evil.local_addr().unwrap() else {
        unreachable!()
    };
    let to = d.endpoint();
    evil.send_to(&[1, 2, 3], to).unwrap();
    evil.send_to(&[0u8; 40], to).unwrap();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..2000 {
        let len = 12 + (rnd() % 80) as usize;
        let mut p: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
        p[5..8].copy_from_slice(&qb.to_be_bytes()[1..]);
        let ip = IpRepr::Ipv4(ipv4::Repr::udp(*from.ip(), *d.endpoint().ip(), 8 + len + 4));
        let u = udp::Repr {
            src_port: from.port(),
            dst_port: ROCE_PORT,
            payload_len: len + 4,
        };
        let icrc = rdmakit_wire::icrc::compute_reprs(&ip, &u, &p).unwrap();
        p.extend_from_slice(&icrc.to_le_bytes());
        evil.send_to(&p, to).unwrap();
    }
    let start = std::time::Instant::now();
    while d.counters().rx_packets < 1000 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let c = d.counters();
    assert_eq!(c.rx_malformed, 1, "{c:?}");
    assert_eq!(c.rx_icrc_errors, 1, "{c:?}");
    assert!(c.rx_packets >= 1000, "{c:?}");
    // Whatever state the random packets left qb in, it still answers
    // queries, and the engine counted what it dropped.
    assert!(d.query_qp(qb).is_ok());
    assert!(d.qp_stats(qb).unwrap().dropped > 0);
}
