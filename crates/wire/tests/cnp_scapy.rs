//! The CNP against bytes rdmakit did not write: tests/data/cnp/scapy-cnp.pcap,
//! two CNPs built by scapy 2.8.0's contrib `roce` module (see the SOURCE file
//! there). Our parse of scapy's bytes, our emit equal to scapy's bytes, the
//! ICRC valid by our checker, and CE marking by a switch leaves it valid.

use rdmakit_wire::ethernet::{self, EtherType};
use rdmakit_wire::frame::{IpRepr, UdpChecksum};
use rdmakit_wire::{capture, cnp, frame, icrc, ipv4, ipv6, roce};

fn scapy_frames() -> Vec<Vec<u8>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cnp/scapy-cnp.pcap");
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let frames = capture::read_frames(&bytes).unwrap();
    assert!(frames.warnings.is_empty(), "{:?}", frames.warnings);
    frames.frames.iter().map(|f| f.data.to_vec()).collect()
}

/// Ethernet header, then (IP header length, IP packet).
fn split(frame: &[u8]) -> (&[u8], &[u8]) {
    frame.split_at(ethernet::HEADER_LEN)
}

fn ethernet_header(ethertype: EtherType) -> [u8; ethernet::HEADER_LEN] {
    let mut h = [0u8; ethernet::HEADER_LEN];
    ethernet::Repr {
        src_addr: ethernet::Address([0x52, 0x54, 0, 0x12, 0x34, 0x57]),
        dst_addr: ethernet::Address([0x52, 0x54, 0, 0x12, 0x34, 0x56]),
        ethertype,
    }
    .emit(&mut ethernet::Frame::new_unchecked(&mut h[..]));
    h
}

fn v4_header() -> IpRepr {
    IpRepr::Ipv4(ipv4::Repr {
        dscp_ecn: 0xc0,
        ..ipv4::Repr::udp([10, 0, 2, 16].into(), [10, 0, 2, 15].into(), 0)
    })
}

fn v6_header() -> IpRepr {
    IpRepr::Ipv6(ipv6::Repr {
        src_addr: "fd00::16".parse().unwrap(),
        dst_addr: "fd00::15".parse().unwrap(),
        next_header: ipv4::PROTOCOL_UDP,
        payload_len: 0,
        hop_limit: 64,
        traffic_class: 0xc0,
        flow_label: 0,
    })
}

#[test]
fn we_parse_scapys_cnps() {
    let frames = scapy_frames();
    assert_eq!(frames.len(), 2);
    for (frame, ip_hl, qp) in [(&frames[0], 20, 0x11), (&frames[1], 40, 0xa3)] {
        let (_, ip) = split(frame);
        let payload = &ip[ip_hl + 8..];
        assert_eq!(payload.len(), cnp::PACKET_LEN);
        let view = cnp::Packet::new_checked(payload).unwrap();
        assert_eq!(view.reserved(), &[0u8; cnp::RESERVED_LEN]);
        assert!(view.bth().becn());
        assert_eq!(cnp::Repr::parse(&view), Ok(cnp::Repr::new(qp)));
        assert_eq!(
            roce::Kind::parse(payload),
            Ok(roce::Kind::Cnp(cnp::Repr::new(qp)))
        );
        assert_eq!(
            roce::Kind::parse_without_icrc(&payload[..cnp::LEN_WITHOUT_ICRC]),
            Ok(roce::Kind::Cnp(cnp::Repr::new(qp)))
        );
    }
}

#[test]
fn our_emit_is_scapys_bytes() {
    let frames = scapy_frames();
    for (frame, ip, ethertype, qp) in [
        (&frames[0], v4_header(), EtherType::IPV4, 0x11),
        (&frames[1], v6_header(), EtherType::IPV6, 0xa3),
    ] {
        let r = cnp::Repr::new(qp);
        let mut out = vec![0xa5u8; ethernet::HEADER_LEN + r.ip_len(&ip)];
        out[..ethernet::HEADER_LEN].copy_from_slice(&ethernet_header(ethertype));
        let n = r
            .emit_ip(
                &ip,
                0xc0de,
                UdpChecksum::Compute,
                &mut out[ethernet::HEADER_LEN..],
            )
            .unwrap();
        assert_eq!(n + ethernet::HEADER_LEN, out.len());
        assert_eq!(&out, frame, "qp 0x{qp:x}");
        // The engine's half (BTH + reserved) is the same bytes.
        let mut engine = [0u8; cnp::LEN_WITHOUT_ICRC];
        r.emit_without_icrc(&mut engine).unwrap();
        let at = frame.len() - cnp::PACKET_LEN;
        assert_eq!(engine[..], frame[at..at + cnp::LEN_WITHOUT_ICRC]);
    }
}

#[test]
fn scapys_icrc_is_valid_by_our_checker() {
    for frame in scapy_frames() {
        assert_eq!(frame::icrc_valid(&frame), Ok(true));
        let (_, ip) = split(&frame);
        assert_eq!(icrc::verify(ip), Ok(true));
        let mut bad = ip.to_vec();
        let n = bad.len();
        bad[n - 10] ^= 1; // a reserved byte: covered by the ICRC
        assert_eq!(icrc::verify(&bad), Ok(false));
    }
}

/// A switch marks CE ('11' in the low two bits of the TOS / traffic class)
/// without touching the ICRC: the receiver must still accept the packet.
#[test]
fn ce_marking_keeps_scapys_icrc_valid() {
    let frames = scapy_frames();
    let (_, v4) = split(&frames[0]);
    let mut ce = v4.to_vec();
    ce[1] |= 0x03;
    let p = ipv4::Packet::new_checked(&ce[..]).unwrap();
    assert_eq!(p.dscp_ecn(), 0xc3);
    assert_eq!(icrc::verify(&ce), Ok(true));
    let (_, v6) = split(&frames[1]);
    let mut ce = v6.to_vec();
    // Traffic class spans bytes 0-1: its ECN bits are bits 4-5 of byte 1.
    ce[1] |= 0x30;
    assert_eq!(
        ipv6::Packet::new_checked(&ce[..]).unwrap().traffic_class(),
        0xc3
    );
    assert_eq!(icrc::verify(&ce), Ok(true));
}
