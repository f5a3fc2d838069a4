//! ECN, DSCP and CNPs in the capture report, over a capture built with the
//! Reprs (tests/data/cnp/ce-and-cnp.pcap, written by `build` below and
//! checked against it) and over the real captures, which carry no ECN.
//!
//! The built capture: host A (10.0.0.1, QP 0x11) sends RC SENDs to host B
//! (10.0.0.2, QP 0x22) as ECT(0) with DSCP 26; a switch marks some CE. B
//! answers the first CE packet with a CNP (DSCP 48) and then goes quiet;
//! host C sends to host D over IPv6 one way only.

mod common;

use std::net::IpAddr;

use rdmakit_wire::capture::{self, AnomalyKind, CaptureReport, Ecn};
use rdmakit_wire::ethernet;
use rdmakit_wire::frame::{IpRepr, UdpChecksum};
use rdmakit_wire::opcode::OpCode;
use rdmakit_wire::{aeth, cnp, ipv4, ipv6, roce};

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];
const T0: u64 = 1_767_225_600_000_000_000;

/// TOS bytes: DSCP 26 with ECT(0) / CE / Not-ECT, DSCP 48 Not-ECT.
const AF31_ECT0: u8 = 26 << 2 | 0b10;
const AF31_CE: u8 = 26 << 2 | 0b11;
const AF31: u8 = 26 << 2;
const CS6: u8 = 48 << 2;

fn ethernet_header(ip: &IpRepr) -> Vec<u8> {
    let mut h = vec![0u8; ethernet::HEADER_LEN];
    common::ethernet(ip.ethertype()).emit(&mut ethernet::Frame::new_unchecked(&mut h[..]));
    h
}

fn v4(src: [u8; 4], dst: [u8; 4], tos: u8) -> IpRepr {
    IpRepr::Ipv4(ipv4::Repr {
        dscp_ecn: tos,
        ..ipv4::Repr::udp(src.into(), dst.into(), 0)
    })
}

fn v6(tc: u8) -> IpRepr {
    IpRepr::Ipv6(ipv6::Repr {
        src_addr: "fd00::3".parse().unwrap(),
        dst_addr: "fd00::4".parse().unwrap(),
        next_header: ipv4::PROTOCOL_UDP,
        payload_len: 0,
        hop_limit: 64,
        traffic_class: tc,
        flow_label: 0,
    })
}

fn data(ip: IpRepr, qp: u32, psn: u32) -> Vec<u8> {
    static PAYLOAD: [u8; 64] = [0x5a; 64];
    transport(
        ip,
        roce::Repr {
            payload: &PAYLOAD,
            ..roce::Repr::new(OpCode::RC_SEND_ONLY, qp, psn)
        },
    )
}

fn ack(ip: IpRepr, qp: u32, psn: u32) -> Vec<u8> {
    transport(
        ip,
        roce::Repr {
            aeth: Some(aeth::Repr {
                kind: aeth::AethKind::Ack { credits: 31 },
                msn: psn,
            }),
            ..roce::Repr::new(OpCode::RC_ACKNOWLEDGE, qp, psn)
        },
    )
}

fn transport(ip: IpRepr, roce: roce::Repr<'_>) -> Vec<u8> {
    common::frame(ip, 0xc000, UdpChecksum::Compute, roce)
}

fn cnp_frame(ip: IpRepr, qp: u32) -> Vec<u8> {
    let c = cnp::Repr::new(qp);
    let mut out = ethernet_header(&ip);
    let at = out.len();
    out.resize(at + c.ip_len(&ip), 0);
    c.emit_ip(&ip, 0xc000, UdpChecksum::None, &mut out[at..])
        .unwrap();
    out
}

/// (µs after T0, frame) of the scenario in the module documentation.
fn frames() -> Vec<(u64, Vec<u8>)> {
    vec![
        (0, data(v4(A, B, AF31_ECT0), 0x22, 100)),
        (10, data(v4(A, B, AF31_CE), 0x22, 101)), // answered by the CNP after it
        (12, cnp_frame(v4(B, A, CS6), 0x11)),
        (14, data(v4(A, B, AF31_CE), 0x22, 102)), // within the CNP rate limit
        (20, ack(v4(B, A, AF31), 0x11, 102)),
        (5_000, data(v4(A, B, AF31_CE), 0x22, 103)), // unanswered
        (5_010, data(v4(A, B, AF31_CE), 0x22, 104)), // unanswered
        (5_020, data(v6(AF31_CE), 0x33, 1)),         // C to D: one way only
        (9_000, data(v4(A, B, AF31_ECT0), 0x22, 105)),
        (9_500, data(v4(A, B, AF31_CE), 0x22, 106)), // its CNP may follow the end
        (9_600, ack(v4(B, A, 0), 0x11, 106)),
    ]
}

/// A little-endian microsecond pcap of Ethernet frames ((µs after T0,
/// bytes)).
fn pcap(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let at: Vec<(u64, Vec<u8>)> = frames
        .iter()
        .map(|(us, f)| (T0 + us * 1000, f.clone()))
        .collect();
    common::pcap(1, false, false, &at)
}

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/cnp/ce-and-cnp.pcap"
);

/// The committed capture (which `rdmakit pcap`'s tests read) is what the
/// builder writes; `RDMAKIT_WRITE_FIXTURES=1` rewrites it after a change.
#[test]
fn the_fixture_is_what_the_builder_writes() {
    let built = pcap(&frames());
    if std::env::var_os("RDMAKIT_WRITE_FIXTURES").is_some() {
        std::fs::write(FIXTURE, &built).unwrap();
    }
    let committed = std::fs::read(FIXTURE).unwrap_or_else(|e| panic!("{FIXTURE}: {e}"));
    assert!(
        committed == built,
        "{FIXTURE} differs from the builder: rerun with RDMAKIT_WRITE_FIXTURES=1"
    );
}

fn report(frames: &[(u64, Vec<u8>)]) -> CaptureReport {
    let r = capture::decode_capture(&pcap(frames)).unwrap();
    assert_eq!(r.icrc_valid, frames.len(), "{:?}", r.warnings);
    r
}

fn ip(a: [u8; 4]) -> IpAddr {
    IpAddr::from(a)
}

#[test]
fn every_packet_carries_its_dscp_and_ecn() {
    let r = report(&frames());
    let got: Vec<(u8, Ecn)> = r.packets.iter().map(|p| (p.dscp, p.ecn)).collect();
    use Ecn::*;
    assert_eq!(
        got,
        [
            (26, Ect0),
            (26, Ce),
            (48, NotEct),
            (26, Ce),
            (26, NotEct),
            (26, Ce),
            (26, Ce),
            (26, Ce), // IPv6 traffic class
            (26, Ect0),
            (26, Ce),
            (0, NotEct),
        ]
    );
    let counts: Vec<(&str, usize)> = r.ecn_counts.iter().map(|(k, v)| (&k[..], *v)).collect();
    assert_eq!(
        counts,
        [("ce", 6), ("ect0", 2), ("ect1", 0), ("not_ect", 3)]
    );
    let dscp: Vec<(u8, usize)> = r.dscp_counts.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(dscp, [(0, 1), (26, 9), (48, 1)]);
    let ce: Vec<usize> = r.flows.iter().map(|f| f.ce_packets).collect();
    assert_eq!(ce, [5, 0, 1]); // A > B, B > A, C > D
}

#[test]
fn the_cnp_is_decoded_and_counted_per_flow() {
    let r = report(&frames());
    let p = &r.packets[2];
    assert_eq!(
        (p.opcode_name.as_str(), p.qpn, p.error.as_deref()),
        ("CNP", 0x11, None)
    );
    assert_eq!(p.headers, ["CNP"]);
    assert!(
        p.summary.contains("CNP qp 0x000011 psn 0 BECN"),
        "{}",
        p.summary
    );
    assert_eq!(r.cnp_flows.len(), 1);
    let c = &r.cnp_flows[0];
    assert_eq!(
        (c.src, c.dst, c.qpn, c.cnps, c.first_index, c.last_index),
        (ip(B), ip(A), 0x11, 1, 3, 3)
    );
    assert_eq!(r.opcode_counts.get("CNP"), Some(&1));
}

#[test]
fn ce_marks_no_cnp_followed_are_one_anomaly_per_flow() {
    let r = report(&frames());
    let ce: Vec<_> = r
        .anomalies
        .iter()
        .filter(|a| a.kind == AnomalyKind::CeWithoutCnp)
        .collect();
    assert_eq!(r.anomalies.len(), 1, "{:#?}", r.anomalies);
    let a = ce[0];
    assert_eq!(
        (a.index, a.src, a.dst, a.qpn, a.psn),
        (6, ip(A), ip(B), 0x22, 103)
    );
    assert!(
        a.detail
            .starts_with("2 of 5 CE-marked packets to QP 0x000022 (frames 6..7)"),
        "{}",
        a.detail
    );
    assert_eq!(r.anomaly_counts.get("ce_without_cnp"), Some(&1));
    assert_eq!(r.notes.len(), 2, "{:?}", r.notes);
    assert!(r.notes[0].starts_with("1 CE-marked packet(s) from fd00::3 to fd00::4"));
    assert!(r.notes[0].contains("cannot be judged"));
    assert!(r.notes[1].starts_with("1 CE-marked packet(s) in the last 1000 µs"));
}

/// Without the CNP every CE packet of A > B is unanswered but the one at
/// the end; without B's packets nothing can be judged; with a CNP after
/// the last CE packet all are answered.
#[test]
fn what_changes_the_verdict() {
    let mut no_cnp = frames();
    no_cnp.remove(2);
    let r = report(&no_cnp);
    assert_eq!(r.anomalies.len(), 1);
    assert_eq!(r.anomalies[0].index, 2);
    assert!(
        r.anomalies[0].detail.starts_with("4 of 5"),
        "{}",
        r.anomalies[0].detail
    );

    let one_way: Vec<_> = frames()
        .into_iter()
        .filter(|(_, f)| f[26..30] == A || f[12..14] == [0x86, 0xdd])
        .collect();
    let r = report(&one_way);
    assert!(r.anomalies.is_empty(), "{:#?}", r.anomalies);
    assert!(r.cnp_flows.is_empty());
    assert!(r.notes[0].starts_with("5 CE-marked packet(s) from 10.0.0.1 to 10.0.0.2"));

    let mut answered = frames();
    answered.push((20_000, cnp_frame(v4(B, A, CS6), 0x11)));
    let r = report(&answered);
    assert!(r.anomalies.is_empty(), "{:#?}", r.anomalies);
    assert_eq!(r.cnp_flows[0].cnps, 2);
    assert_eq!(r.notes.len(), 1, "{:?}", r.notes); // the IPv6 one-way flow
}

/// B's ACKs to QP 0x11 carry the PSNs of A's requests to QP 0x22: a CNP
/// must name 0x11 to answer them. When A's QPs cannot be told apart (no
/// responses, or responses to two QPs) any CNP from B to A counts.
#[test]
fn the_cnp_must_name_the_senders_qp_when_the_capture_tells_it() {
    let mut wrong_qp = frames();
    wrong_qp[2] = (12, cnp_frame(v4(B, A, CS6), 0x12));
    let r = report(&wrong_qp);
    assert_eq!(r.anomalies.len(), 1, "{:#?}", r.anomalies);
    let d = &r.anomalies[0].detail;
    assert_eq!(r.anomalies[0].index, 2);
    assert!(
        d.starts_with("4 of 5 CE-marked packets to QP 0x000022 (frames 2..7)"),
        "{d}"
    );
    assert!(
        d.contains("no CNP from 10.0.0.2 to 10.0.0.1 for QP 0x000011 after"),
        "{d}"
    );

    let mut no_acks = wrong_qp.clone();
    no_acks.retain(|(_, f)| f[42] != OpCode::RC_ACKNOWLEDGE.0);
    assert_eq!(no_acks.len(), 9);
    let r = report(&no_acks);
    assert_eq!(r.anomalies.len(), 1, "{:#?}", r.anomalies);
    assert_eq!(r.anomalies[0].index, 5); // frames 6 and 7 less the ACK before
    assert!(r.anomalies[0].detail.starts_with("2 of 5"));
    assert!(r.anomalies[0].detail.contains("to 10.0.0.1 after"));

    let mut two_qps = wrong_qp;
    two_qps.insert(5, (21, ack(v4(B, A, AF31), 0x12, 102)));
    let r = report(&two_qps);
    assert_eq!(r.anomalies.len(), 1, "{:#?}", r.anomalies);
    assert_eq!(r.anomalies[0].index, 7);
    assert!(r.anomalies[0].detail.starts_with("2 of 5"));
    assert!(r.anomalies[0].detail.contains("to 10.0.0.1 after"));
}

#[test]
fn render_human_shows_dscp_ecn_and_cnps() {
    let r = report(&frames());
    insta::assert_snapshot!(capture::render_human(&r));
}

/// The real rxe captures: no ECN, DSCP 0, no CNP, nothing to judge.
#[test]
fn real_captures_are_not_ect_dscp_0() {
    for name in ["rc_pingpong-s64", "write_bw-s8192"] {
        let bytes = rdmakit_testkit::fixture_bytes(&format!("pcap/{name}.pcap"));
        let r = capture::decode_capture(&bytes).unwrap();
        assert_eq!(r.ecn_counts.get("not_ect"), Some(&r.roce_packets), "{name}");
        assert_eq!(r.dscp_counts.len(), 1, "{name}");
        assert_eq!(r.dscp_counts.get(&0), Some(&r.roce_packets), "{name}");
        assert!(r.cnp_flows.is_empty() && r.notes.is_empty(), "{name}");
    }
    // scapy's CNPs: DSCP 48, counted as CNP flows; no data to judge.
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/cnp/scapy-cnp.pcap"
    ))
    .unwrap();
    let r = capture::decode_capture(&bytes).unwrap();
    assert_eq!(r.icrc_valid, 2);
    assert_eq!(r.dscp_counts.get(&48), Some(&2));
    let flows: Vec<(u32, usize)> = r.cnp_flows.iter().map(|c| (c.qpn, c.cnps)).collect();
    assert_eq!(flows, [(0x11, 1), (0xa3, 1)]);
    assert!(r.anomalies.is_empty(), "{:#?}", r.anomalies);
}
