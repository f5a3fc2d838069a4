//! What the soft NIC puts on the wire, seen by a plain UDP socket playing the
//! peer: RoCEv2 on port 4791, flow-entropy source port, BTH, pad, ICRC.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::time::Duration;

use rdmakit_soft::net::{flow_port, ROCE_PORT};
use rdmakit_soft::proto::{Access, AttrMask, Mtu, QpAttr, QpState, QpType, SendOp, SendWr};
use rdmakit_soft::{Device, DeviceConfig, Gid, QpInit, SendRequest};
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
    let qpn = d
        .create_qp(&QpInit {
            qp_type: QpType::Rc,
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            max_send_wr: 8,
            max_recv_wr: 8,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 16,
            sq_sig_all: false,
        })
        .unwrap();
    let mut a = QpAttr {
        qp_state: QpState::Init,
        qp_access_flags: Access::all(),
        ..QpAttr::default()
    };
    d.modify_qp(
        qpn,
        &a,
        AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
        None,
    )
    .unwrap();
    a.qp_state = QpState::Rtr;
    a.path_mtu = Mtu::Mtu1024;
    a.dest_qp_num = 0x123;
    a.rq_psn = 7;
    d.modify_qp(
        qpn,
        &a,
        AttrMask::STATE
            | AttrMask::AV
            | AttrMask::PATH_MTU
            | AttrMask::DEST_QPN
            | AttrMask::RQ_PSN
            | AttrMask::MAX_DEST_RD_ATOMIC
            | AttrMask::MIN_RNR_TIMER,
        Some(Gid::from_ipv4(peer_ip)),
    )
    .unwrap();
    a.qp_state = QpState::Rts;
    a.sq_psn = 0x100;
    d.modify_qp(
        qpn,
        &a,
        AttrMask::STATE
            | AttrMask::TIMEOUT
            | AttrMask::RETRY_CNT
            | AttrMask::RNR_RETRY
            | AttrMask::SQ_PSN
            | AttrMask::MAX_QP_RD_ATOMIC,
        None,
    )
    .unwrap();
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
    assert_eq!(*src.ip(), d.addr());
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
    let ip = IpRepr::Ipv4(ipv4::Repr {
        src_addr: d.addr(),
        dst_addr: peer_ip,
        next_header: 17,
        payload_len: 8 + n,
        hop_limit: 64,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: true,
    });
    let u = udp::Repr {
        src_port: src.port(),
        dst_port: ROCE_PORT,
        payload_len: n,
    };
    let icrc = rdmakit_wire::icrc::compute_reprs(&ip, &u, &pkt[..n - 4]).unwrap();
    assert_eq!(&pkt[n - 4..], &icrc.to_le_bytes());
}
