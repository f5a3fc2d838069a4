//! Every packet of the real Linux rxe captures (fixtures/pcap): parses,
//! has a valid ICRC, re-emits byte-exact; and the capture report counts match the
//! table in fixtures/README.md.

use std::path::PathBuf;

use rdmakit_wire::capture::{self, AnomalyKind};
use rdmakit_wire::frame;

const CAPTURES: [&str; 4] = [
    "rc_pingpong-s64",
    "rc_pingpong-s5000-mtu1024",
    "write_bw-s8192",
    "write_bw-s8192-old_post_send",
];

fn pcap_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/pcap"));
    assert!(
        dir.is_dir(),
        "fixture directory {} is missing (fixtures/ is part of the repository)",
        dir.display()
    );
    dir
}

fn read(name: &str) -> Vec<u8> {
    let path = pcap_dir().join(format!("{name}.pcap"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

#[test]
fn every_fixture_pcap_is_covered() {
    let mut found: Vec<String> = std::fs::read_dir(pcap_dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".pcap").map(str::to_string)
        })
        .collect();
    found.sort();
    let mut expected: Vec<String> = CAPTURES.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(
        found, expected,
        "a new capture needs its expected counts here"
    );
}

#[test]
fn every_packet_parses_validates_and_roundtrips() {
    for name in CAPTURES {
        let bytes = read(name);
        let frames = capture::read_frames(&bytes).unwrap();
        assert!(frames.warnings.is_empty(), "{name}: {:?}", frames.warnings);
        assert!(!frames.frames.is_empty());
        for f in &frames.frames {
            let ctx = format!("{name} frame {}", f.index);
            assert_eq!(f.link_type, 1, "{ctx}");
            let repr = frame::Repr::parse(f.data).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert!(frame::icrc_valid(f.data).unwrap(), "{ctx}: ICRC");
            let mut out = vec![0xa5; repr.buffer_len()];
            repr.emit(&mut out).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(out, f.data, "{ctx}: emit(parse(p)) != p");
            // The Repr survives a second trip too.
            assert_eq!(frame::Repr::parse(&out).unwrap(), repr, "{ctx}");
        }
    }
}

fn counts(name: &str) -> Vec<(String, usize)> {
    let report = capture::decode_capture(&read(name)).unwrap();
    assert_eq!(report.icrc_invalid, 0, "{name}");
    assert_eq!(report.icrc_unchecked, 0, "{name}");
    assert_eq!(report.other_frames, 0, "{name}");
    assert_eq!(report.roce_packets, report.frames, "{name}");
    assert!(report.warnings.is_empty(), "{name}");
    assert!(
        report.anomalies.is_empty(),
        "{name}: {:?}",
        report.anomalies
    );
    report.opcode_counts.into_iter().collect()
}

fn pairs(v: &[(&str, usize)]) -> Vec<(String, usize)> {
    v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

#[test]
fn report_rc_pingpong_s64() {
    assert_eq!(
        counts("rc_pingpong-s64"),
        pairs(&[("RC_ACKNOWLEDGE", 10), ("RC_SEND_ONLY", 10)])
    );
}

#[test]
fn report_rc_pingpong_s5000_mtu1024() {
    assert_eq!(
        counts("rc_pingpong-s5000-mtu1024"),
        pairs(&[
            ("RC_ACKNOWLEDGE", 10),
            ("RC_SEND_FIRST", 10),
            ("RC_SEND_LAST", 10),
            ("RC_SEND_MIDDLE", 30),
        ])
    );
}

#[test]
fn report_write_bw_s8192() {
    let expected = pairs(&[
        ("RC_ACKNOWLEDGE", 5),
        ("RC_RDMA_WRITE_FIRST", 5),
        ("RC_RDMA_WRITE_LAST", 5),
        ("RC_RDMA_WRITE_MIDDLE", 30),
    ]);
    assert_eq!(counts("write_bw-s8192"), expected);
    assert_eq!(counts("write_bw-s8192-old_post_send"), expected);
}

#[test]
fn report_fields_rc_pingpong_s64() {
    let report = capture::decode_capture(&read("rc_pingpong-s64")).unwrap();
    let p = &report.packets[0];
    assert_eq!(p.index, 1);
    assert_eq!(p.src.to_string(), "192.168.100.2");
    assert_eq!(p.dst.to_string(), "192.168.100.1");
    assert_eq!(p.opcode_name, "RC_SEND_ONLY");
    assert_eq!(p.qpn, 0x11);
    assert_eq!(p.psn, 0x5ab4a9);
    assert!(p.ack_req);
    assert_eq!(p.payload_len, Some(64));
    assert_eq!(p.icrc_valid, Some(true));
    let ack = &report.packets[1];
    assert_eq!(ack.opcode_name, "RC_ACKNOWLEDGE");
    assert_eq!(ack.headers, vec!["AETH ACK credits 31 msn 1".to_string()]);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["packets"][0]["opcode_name"], "RC_SEND_ONLY");
    assert_eq!(json["format"], "pcap");
    let human = capture::render_human(&report);
    assert!(
        human.contains("RC_SEND_ONLY qp 0x000011 psn 5944489 A, len 64, icrc ok"),
        "{human}"
    );
    assert!(human.contains("anomalies: none"), "{human}");
}

/// Flip one payload byte of a real packet: the ICRC must catch it (Wireshark would
/// not) and the report must say so.
#[test]
fn corrupted_payload_fails_icrc_write_bw_s8192() {
    let mut bytes = read("write_bw-s8192");
    // Frame 1 starts at 24 + 16; flip a byte deep in its payload.
    bytes[24 + 16 + 200] ^= 0x40;
    let report = capture::decode_capture(&bytes).unwrap();
    assert_eq!(report.icrc_invalid, 1);
    assert_eq!(report.packets[0].icrc_valid, Some(false));
    assert_eq!(report.anomalies[0].kind, AnomalyKind::IcrcInvalid);
    assert!(capture::render_human(&report).contains("ICRC BAD"));
}

/// Drop frame 3 (a WRITE_MIDDLE) of a real capture: a PSN gap on that QP.
#[test]
fn dropped_packet_is_a_psn_gap_write_bw_s8192() {
    let bytes = read("write_bw-s8192");
    let frames = capture::read_frames(&bytes).unwrap();
    let mut out = bytes[..24].to_vec();
    let mut rest = &bytes[24..];
    for f in &frames.frames {
        let len = 16 + f.data.len();
        if f.index != 3 {
            out.extend_from_slice(&rest[..len]);
        }
        rest = &rest[len..];
    }
    let report = capture::decode_capture(&out).unwrap();
    let gaps: Vec<_> = report
        .anomalies
        .iter()
        .filter(|a| a.kind == AnomalyKind::PsnGap)
        .collect();
    assert_eq!(gaps.len(), 1, "{:?}", report.anomalies);
    assert!(gaps[0].detail.contains("1 missing"), "{}", gaps[0].detail);
}

/// Duplicate frame 2 of a real capture: a retransmission.
#[test]
fn duplicated_packet_is_a_retransmission_rc_pingpong_s5000_mtu1024() {
    let bytes = read("rc_pingpong-s5000-mtu1024");
    let frames = capture::read_frames(&bytes).unwrap();
    let mut out = bytes[..24].to_vec();
    let mut rest = &bytes[24..];
    for f in &frames.frames {
        let len = 16 + f.data.len();
        out.extend_from_slice(&rest[..len]);
        if f.index == 2 {
            out.extend_from_slice(&rest[..len]);
        }
        rest = &rest[len..];
    }
    let report = capture::decode_capture(&out).unwrap();
    assert_eq!(report.anomaly_counts.get("retransmission"), Some(&1));
    assert_eq!(report.anomalies.len(), 1, "{:?}", report.anomalies);
}

/// The human rendering of each real capture, as `rdmakit pcap FILE` prints it.
#[test]
fn render_human_snapshots() {
    for name in CAPTURES {
        let report = capture::decode_capture(&read(name)).unwrap();
        insta::assert_snapshot!(format!("human-{name}"), capture::render_human(&report));
    }
}

/// The JSON report (`rdmakit pcap FILE --json`) of the smallest real capture.
#[test]
fn json_snapshot_rc_pingpong_s64() {
    let report = capture::decode_capture(&read("rc_pingpong-s64")).unwrap();
    insta::assert_json_snapshot!("json-rc_pingpong-s64", report);
}

#[test]
fn flows_write_bw_s8192() {
    let report = capture::decode_capture(&read("write_bw-s8192")).unwrap();
    assert_eq!(report.flows.len(), 2);
    let (req, ack) = (&report.flows[0], &report.flows[1]);
    assert_eq!(req.src.to_string(), "192.168.100.2");
    assert_eq!(req.qpn, 0x13);
    assert_eq!(req.packets, 40);
    assert_eq!(req.payload_bytes, 5 * 8192);
    assert_eq!(req.requests, 40);
    assert_eq!(
        req.last_request_psn.unwrap() - req.first_request_psn.unwrap(),
        39
    );
    assert_eq!(ack.packets, 5);
    assert_eq!(ack.requests, 0);
    assert_eq!(ack.first_request_psn, None);
    assert_eq!(ack.payload_bytes, 0);
}

/// A packet budget smaller than the capture decodes up to it: the packets
/// kept are the capture's first ones, the report says how many frames it
/// decoded and the warning names the frames left, as editcap counts them.
#[test]
fn a_packet_budget_stops_decoding_and_says_where() {
    let bytes = read("rc_pingpong-s64");
    let whole = capture::decode_capture(&bytes).unwrap();
    assert!(!whole.incomplete());
    assert_eq!(whole.decoded_frames, whole.frames);
    let part = capture::decode_capture_with(&bytes, 3).unwrap();
    assert!(part.incomplete());
    assert_eq!(part.roce_packets, 3);
    assert!(part.decoded_frames < part.frames);
    assert_eq!(part.packets.len(), 3);
    for (a, b) in part.packets.iter().zip(&whole.packets) {
        assert_eq!(a.index, b.index);
    }
    let w = part
        .warnings
        .last()
        .expect("a warning says where decoding stopped");
    assert!(
        w.contains(&format!(
            "editcap -r FILE part.pcap {}-{}",
            part.decoded_frames + 1,
            part.frames
        )),
        "{w}"
    );
}

/// A real capture followed by itself with every PSN moved by `shift` and
/// the ICRCs made good again: the same QPNs reused by a second connection
/// set up out of band (as perftest and ibv_rc_pingpong connect over TCP),
/// with other starting PSNs.
fn reconnected(name: &str, shift: i32) -> Vec<u8> {
    let bytes = read(name);
    let frames = capture::read_frames(&bytes).unwrap();
    let mut out = bytes.clone();
    let mut rest = &bytes[24..];
    for f in &frames.frames {
        let len = 16 + f.data.len();
        let mut rec = rest[..len].to_vec();
        rest = &rest[len..];
        // Ethernet 14 + IPv4 20 + UDP 8: the BTH; its PSN is bytes 9..12.
        let at = 16 + 14 + 20 + 8 + 9;
        let psn = u32::from_be_bytes([0, rec[at], rec[at + 1], rec[at + 2]]);
        let moved = (psn as i64 + shift as i64).rem_euclid(1 << 24) as u32;
        rec[at..at + 3].copy_from_slice(&moved.to_be_bytes()[1..]);
        rdmakit_wire::icrc::fill(&mut rec[16 + 14..]).unwrap();
        out.extend_from_slice(&rec);
    }
    out
}

/// rc_pingpong-s64 run twice on the same QPNs, the second connection's
/// PSNs behind the first's (perftest picks them at random): a new
/// connection noted per flow, not ten retransmissions.
#[test]
fn reused_qpn_with_earlier_psns_is_a_new_connection_rc_pingpong_s64() {
    let report = capture::decode_capture(&reconnected("rc_pingpong-s64", -100_000)).unwrap();
    assert_eq!(report.icrc_invalid, 0);
    assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
    let notes: Vec<_> = report
        .notes
        .iter()
        .filter(|n| n.contains("a new connection"))
        .collect();
    assert_eq!(notes.len(), 2, "one per direction: {:?}", report.notes);
}

/// The second connection's PSNs far ahead: a new connection, not a gap of
/// millions of packets.
#[test]
fn reused_qpn_with_far_later_psns_is_a_new_connection_rc_pingpong_s64() {
    let report = capture::decode_capture(&reconnected("rc_pingpong-s64", 3_000_000)).unwrap();
    assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
    assert_eq!(
        report
            .notes
            .iter()
            .filter(|n| n.contains("a new connection"))
            .count(),
        2,
        "{:?}",
        report.notes
    );
}

/// A small jump stays a gap and PSNs the flow did send stay
/// retransmissions: the new-connection rule only takes PSNs never sent.
#[test]
fn psns_near_the_flow_stay_gaps_and_retransmissions_rc_pingpong_s64() {
    let ahead = capture::decode_capture(&reconnected("rc_pingpong-s64", 1000)).unwrap();
    assert_eq!(
        ahead.anomaly_counts.get("psn_gap"),
        Some(&2),
        "{:?}",
        ahead.anomalies
    );
    // The whole exchange sent again with the same PSNs: ten resends.
    let again = capture::decode_capture(&reconnected("rc_pingpong-s64", 0)).unwrap();
    assert_eq!(
        again.anomaly_counts.get("retransmission"),
        Some(&10),
        "{:?}",
        again.anomalies
    );
    assert!(!again.notes.iter().any(|n| n.contains("a new connection")));
}
