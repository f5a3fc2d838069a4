//! What the soft NIC puts on the wire, seen by a plain UDP socket playing the
//! peer: RoCEv2 on port 4791, flow-entropy source port, BTH, pad, ICRC, and
//! the IP TOS byte the AV's or AH's traffic class gives a packet.

mod common;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::time::Duration;

use rdmakit_soft::net::{flow_port, ROCE_PORT};
use rdmakit_soft::proto::{
    Access, AddressHandle, AttrMask, Mtu, QpAttr, QpState, QpType, SendOp, SendWr, UdDest,
};
use rdmakit_soft::{Av, Device, DeviceConfig, Gid, SendRequest};
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

/// One datagram and the IP TOS byte it arrived with (IP_RECVTOS).
fn recv_with_tos(s: &UdpSocket, buf: &mut [u8]) -> (usize, u8) {
    use std::os::fd::AsRawFd;
    let fd = s.as_raw_fd();
    let one: libc::c_int = 1;
    // SAFETY: a live socket and an int option of its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_IP,
            libc::IP_RECVTOS,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "IP_RECVTOS: {}", std::io::Error::last_os_error());
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; zero is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: `msg` points at `iov` (into `buf`) and `control`, both alive.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    assert!(n >= 0, "recvmsg: {}", std::io::Error::last_os_error());
    // SAFETY: walking the control messages recvmsg wrote into `control`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                return (n as usize, *libc::CMSG_DATA(c));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    panic!("a datagram without its IP_TOS control message");
}

fn peer_ip(peer: &UdpSocket) -> Ipv4Addr {
    match peer.local_addr().unwrap() {
        SocketAddr::V4(a) => *a.ip(),
        SocketAddr::V6(_) => unreachable!(),
    }
}

/// An inline SEND of `data` on `qpn`, to `ud` for a UD QP.
fn send_inline(d: &Device, qpn: u32, data: &[u8], ud: Option<UdDest>) {
    let sge = rdmakit_soft::proto::Sge {
        addr: data.as_ptr() as u64,
        length: data.len() as u32,
        lkey: 0,
    };
    let mut wr = SendWr::new(1, SendOp::Send, vec![sge]);
    wr.ud = ud;
    // SAFETY: the inline SGE covers `data`, alive for the call.
    unsafe { d.post_send(qpn, &[SendRequest { wr, inline: true }]) }.unwrap();
}

/// `ibv_modify_qp` with `IBV_QP_AV` and `grh.traffic_class` 0x6b (DSCP 26,
/// both ECN bits set): the QP's packets carry DSCP 26, and the ECN bits are
/// the NIC's (Not-ECT with congestion control off, ECT(0) with it on), not
/// the application's — what mlx5 does.
#[test]
fn rc_packets_carry_the_dscp_of_the_av_traffic_class_and_the_nics_ecn() {
    for (cc, ecn) in [("off", 0b00), ("on", 0b10)] {
        let peer = fake_peer();
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut cfg = DeviceConfig::default();
        rdmakit_soft::parse_cc(&mut cfg.cc, cc).unwrap();
        let d = Device::open(cfg).unwrap();
        let pd = d.alloc_pd().unwrap();
        let cq = d.create_cq(16, None).unwrap();
        let qpn = d.create_qp(&common::init(pd, cq, QpType::Rc)).unwrap();
        let at = QpAttr {
            qp_access_flags: Access::all(),
            dest_qp_num: 0x123,
            ..QpAttr::default()
        };
        let av = Av {
            dgid: Gid::from_ipv4(peer_ip(&peer)),
            traffic_class: (26 << 2) | 0b11,
        };
        common::to_rts(&d, qpn, &at, av);
        send_inline(&d, qpn, b"hello", None);
        let mut buf = [0u8; 2048];
        let (_, tos) = recv_with_tos(&peer, &mut buf);
        assert_eq!(tos, (26 << 2) | ecn, "cc {cc}: TOS {tos:#04x}");
    }
}

/// A modify to RESET forgets the AV and its traffic class; the next AV's
/// class is the one the packets carry.
#[test]
fn reset_forgets_the_traffic_class_with_the_av() {
    let peer = fake_peer();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut cfg = DeviceConfig::default();
    rdmakit_soft::parse_cc(&mut cfg.cc, "off").unwrap();
    let d = Device::open(cfg).unwrap();
    let pd = d.alloc_pd().unwrap();
    let cq = d.create_cq(16, None).unwrap();
    let qpn = d.create_qp(&common::init(pd, cq, QpType::Rc)).unwrap();
    let at = QpAttr {
        qp_access_flags: Access::all(),
        dest_qp_num: 0x123,
        ..QpAttr::default()
    };
    let dgid = Gid::from_ipv4(peer_ip(&peer));
    let mut buf = [0u8; 2048];
    for tclass in [46 << 2, 0] {
        let reset = QpAttr {
            qp_state: rdmakit_soft::proto::QpState::Reset,
            ..QpAttr::default()
        };
        d.modify_qp(qpn, &reset, AttrMask::STATE, None).unwrap();
        common::to_rts(
            &d,
            qpn,
            &at,
            Av {
                dgid,
                traffic_class: tclass,
            },
        );
        send_inline(&d, qpn, b"hello", None);
        let (_, tos) = recv_with_tos(&peer, &mut buf);
        assert_eq!(tos, tclass, "AV traffic class {tclass:#04x}");
    }
}

/// UD: each send carries the traffic class of its AH (`ibv_create_ah`'s
/// `grh.traffic_class`), two AHs to one destination two DSCPs; the ECN bits
/// of the AH's class are ignored.
#[test]
fn ud_sends_carry_the_traffic_class_of_their_address_handle() {
    let peer = fake_peer();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut cfg = DeviceConfig::default();
    rdmakit_soft::parse_cc(&mut cfg.cc, "off").unwrap();
    let d = Device::open(cfg).unwrap();
    let pd = d.alloc_pd().unwrap();
    let cq = d.create_cq(16, None).unwrap();
    let qpn = d.create_qp(&common::init(pd, cq, QpType::Ud)).unwrap();
    let mut a = QpAttr {
        qkey: 0x1111_1111,
        ..QpAttr::default()
    };
    for (state, mask) in [
        (
            QpState::Init,
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY,
        ),
        (QpState::Rtr, AttrMask::STATE),
        (QpState::Rts, AttrMask::STATE | AttrMask::SQ_PSN),
    ] {
        a.qp_state = state;
        d.modify_qp(qpn, &a, mask, None).unwrap();
    }
    let dgid = Gid::from_ipv4(peer_ip(&peer));
    let mut buf = [0u8; 2048];
    for (tclass, want) in [((10 << 2) | 0b01, 10 << 2), (34 << 2, 34 << 2), (0, 0)] {
        let ah = d
            .create_ah(
                pd,
                Av {
                    dgid,
                    traffic_class: tclass,
                },
            )
            .unwrap();
        let ud = UdDest {
            ah: AddressHandle(ah),
            remote_qpn: 0x77,
            remote_qkey: 0x1111_1111,
        };
        send_inline(&d, qpn, b"hello", Some(ud));
        let (_, tos) = recv_with_tos(&peer, &mut buf);
        assert_eq!(tos, want, "AH traffic class {tclass:#04x}");
    }
}

/// A CNP from the peer acts on an RC QP with a traffic class although the
/// path table holds another path to the peer's address first (an AH to it
/// with class 0): the QP knows the CNP comes from its AV by its address.
#[test]
fn a_cnp_from_the_av_acts_when_another_dscp_has_a_path_to_the_peer() {
    let peer = fake_peer();
    let mut cfg = DeviceConfig::default();
    rdmakit_soft::parse_cc(&mut cfg.cc, "on").unwrap();
    let d = Device::open(cfg).unwrap();
    let pd = d.alloc_pd().unwrap();
    let cq = d.create_cq(16, None).unwrap();
    let dgid = Gid::from_ipv4(peer_ip(&peer));
    d.create_ah(pd, dgid.into()).unwrap();
    let qpn = d.create_qp(&common::init(pd, cq, QpType::Rc)).unwrap();
    let at = QpAttr {
        qp_access_flags: Access::all(),
        dest_qp_num: 0x123,
        ..QpAttr::default()
    };
    common::to_rts(
        &d,
        qpn,
        &at,
        Av {
            dgid,
            traffic_class: 26 << 2,
        },
    );
    let mut c = [0u8; 64];
    let n = rdmakit_wire::cnp::Repr::new(qpn)
        .emit_without_icrc(&mut c)
        .unwrap();
    let to = d.endpoint();
    let ip = IpRepr::Ipv4(ipv4::Repr::udp(peer_ip(&peer), *to.ip(), 8 + n + 4));
    let u = udp::Repr {
        src_port: ROCE_PORT,
        dst_port: to.port(),
        payload_len: n + 4,
    };
    let icrc = rdmakit_wire::icrc::compute_reprs(&ip, &u, &c[..n]).unwrap();
    c[n..n + 4].copy_from_slice(&icrc.to_le_bytes());
    peer.send_to(&c[..n + 4], to).unwrap();
    let start = std::time::Instant::now();
    let mut got = d.counters();
    while got.rp_cnp_handled + got.rp_cnp_ignored == 0 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
        got = d.counters();
    }
    assert_eq!((got.rp_cnp_handled, got.rp_cnp_ignored), (1, 0), "{got:?}");
}
