//! Communication management MADs from real captures (fixtures/pcap-cm: Linux
//! 6.1's rdma_cm on Soft-RoCE, and Debian's rping and udaddy on two soft NICs
//! across a veth pair): every UD SEND to QP1 decodes as a CM message and emits
//! back byte for byte; random bytes never make the parser panic, and what
//! parses re-emits to the same Repr. The capture report finds exactly the
//! failed exchanges of each capture: unanswered requests, retries, rejects.

use std::path::PathBuf;

use proptest::prelude::*;
use rdmakit_wire::cm::{self, Message};
use rdmakit_wire::opcode::OpCode;
use rdmakit_wire::{capture, deth, frame, mad};

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/pcap-cm");
    let mut out = Vec::new();
    let rd = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (the CM captures are missing)", dir.display()));
    for e in rd {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "pcap") {
            out.push((
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            ));
        }
    }
    out.sort();
    assert!(!out.is_empty(), "no pcap in {}", dir.display());
    out
}

/// The MADs (UD SEND_ONLY to QP1 with the GSI Q_Key) of a capture.
fn mads(bytes: &[u8]) -> Vec<Vec<u8>> {
    let frames = capture::read_frames(bytes).unwrap();
    let mut v = Vec::new();
    for f in &frames.frames {
        let Ok(r) = frame::Repr::parse(f.data) else {
            continue;
        };
        if r.roce.bth.opcode != OpCode::UD_SEND_ONLY || r.roce.bth.dest_qp != 1 {
            continue;
        }
        let d = r.roce.deth.expect("a UD SEND carries a DETH");
        assert_eq!(d.qkey, deth::GSI_QKEY);
        assert_eq!(d.src_qp, 1);
        v.push(r.roce.payload.to_vec());
    }
    v
}

#[test]
fn every_cm_mad_of_the_captures_round_trips_byte_exactly() {
    let mut seen = std::collections::BTreeMap::new();
    for (name, bytes) in fixtures() {
        for m in mads(&bytes) {
            assert_eq!(m.len(), mad::MAD_LEN, "{name}");
            let r = cm::Repr::parse(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
            *seen.entry(r.message.name()).or_insert(0) += 1;
            let mut out = vec![0xa5u8; r.buffer_len()];
            r.emit(&mut out).unwrap();
            assert_eq!(out, m, "{name}: {r}");
        }
    }
    // A connection refused, established and torn down, and UD service
    // resolution.
    for want in [
        "REQ", "REP", "RTU", "REJ", "DREQ", "DREP", "SIDR_REQ", "SIDR_REP",
    ] {
        assert!(
            seen.contains_key(want),
            "no {want} in the captures: {seen:?}"
        );
    }
}

#[test]
fn rdma_cm_requests_carry_the_ip_header_and_port_space() {
    for (name, bytes) in fixtures() {
        for m in mads(&bytes) {
            let r = cm::Repr::parse(&m).unwrap();
            let (sid, pd) = match &r.message {
                Message::Req(q) => (q.service_id, &q.private_data[..]),
                Message::SidrReq(q) => (q.service_id, &q.private_data[..]),
                _ => continue,
            };
            let (ps, port) = cm::ip::split_service_id(sid).unwrap();
            assert!(
                ps == cm::ip::PS_TCP || ps == cm::ip::PS_UDP,
                "{name}: {sid:#x}"
            );
            assert_ne!(port, 0);
            let h = cm::ip::Repr::parse(&cm::ip::Packet::new_checked(pd).unwrap()).unwrap();
            assert!(h.src_addr.is_ipv4() && h.dst_addr.is_ipv4(), "{name}: {h}");
        }
    }
}

proptest! {
    #[test]
    fn random_mads_never_panic_and_reparse_the_same(mut b in proptest::collection::vec(any::<u8>(), 0..300), attr in 0x10u16..=0x18) {
        // Half the cases are CM headers with a real attribute, so the
        // message parsers see random bodies too.
        if b.len() >= mad::HEADER_LEN && b[0] & 1 == 0 {
            b[..4].copy_from_slice(&[1, mad::CLASS_CM, cm::CLASS_VERSION, mad::METHOD_SEND]);
            b[16..18].copy_from_slice(&attr.to_be_bytes());
        }
        if let Ok(r) = cm::Repr::parse(&b) {
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut out).unwrap();
            prop_assert_eq!(cm::Repr::parse(&out).unwrap(), r);
        }
    }
}

#[test]
fn the_capture_report_names_each_cm_message() {
    for (name, bytes) in fixtures() {
        let report = capture::decode_capture(&bytes).unwrap();
        let n = mads(&bytes).len();
        let named: Vec<&str> = report
            .packets
            .iter()
            .filter_map(|p| p.headers.iter().find(|h| h.starts_with("CM ")))
            .map(|h| h.as_str())
            .collect();
        assert_eq!(named.len(), n, "{name}: {named:?}");
        for p in report
            .packets
            .iter()
            .filter(|p| p.headers.iter().any(|h| h.starts_with("CM ")))
        {
            assert!(p.summary.contains(", CM "), "{name}: {}", p.summary);
        }
    }
}

/// What the report of each CM capture must flag, in capture order: (kind,
/// frame). A new capture needs its line here.
const EXPECTED: &[(&str, &[(&str, usize)])] = &[
    // A REQ retried once, then given up with REJ timeout by its own sender;
    // a SIDR_REQ sent three times: nobody answered QP1.
    (
        "rxe-requests-unanswered.pcap",
        &[
            ("cm_unanswered", 1),
            ("cm_retry", 2),
            ("cm_reject", 3),
            ("cm_unanswered", 4),
            ("cm_retry", 5),
            ("cm_retry", 6),
        ],
    ),
    // REQ, REP, RTU, traffic, DREQ, DREP.
    ("softnic-rping-connect.pcap", &[]),
    // The first connection's DREQ dropped before its receiver; a second
    // connection (the other way, QPN 0x11 again) completes.
    ("softnic-rping-dreq-dropped.pcap", &[("cm_unanswered", 16)]),
    // Nobody listens on port 7174: REJ invalid service ID.
    ("softnic-rping-refused.pcap", &[("cm_reject", 2)]),
    // SIDR_REQ, SIDR_REP, a UD SEND each way.
    ("softnic-udaddy.pcap", &[]),
];

#[test]
fn every_cm_capture_has_its_expected_anomalies() {
    let names: Vec<String> = fixtures().into_iter().map(|(n, _)| n).collect();
    let expected: Vec<&str> = EXPECTED.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, expected, "a new capture needs its line in EXPECTED");
}

#[test]
fn each_cm_capture_flags_exactly_its_failed_exchanges() {
    for (name, bytes) in fixtures() {
        let report = capture::decode_capture(&bytes).unwrap();
        let got: Vec<(&str, usize)> = report
            .anomalies
            .iter()
            .map(|a| (a.kind.name(), a.index))
            .collect();
        let want = EXPECTED.iter().find(|(n, _)| *n == name).unwrap().1;
        assert_eq!(got, want, "{name}: {:#?}", report.anomalies);
        assert_eq!(report.icrc_invalid, 0, "{name}");
        assert!(report.notes.is_empty(), "{name}: {:?}", report.notes);
    }
}

fn rxe() -> Vec<u8> {
    fixtures()
        .into_iter()
        .find(|(n, _)| n == "rxe-requests-unanswered.pcap")
        .unwrap()
        .1
}

#[test]
fn rxe_rej_names_its_reason_and_the_req_its_mtu_in_bytes() {
    let report = capture::decode_capture(&rxe()).unwrap();
    let req = &report.packets[0].summary;
    assert!(
        req.contains(" RC qpn 0x000011 psn 0xb37644 mtu 1024 "),
        "{req}"
    );
    assert!(req.contains("(rdma_cm TCP port 7174)"), "{req}");
    assert!(
        req.contains("rdma_cm 10.0.3.2:45641 > 10.0.3.1:7174"),
        "{req}"
    );
    let rej = &report.packets[2].summary;
    assert!(rej.contains(" of other reason timeout (4) "), "{rej}");
    let a = &report.anomalies[2];
    let cm = a.cm.as_ref().unwrap();
    assert_eq!(
        (cm.message.as_str(), cm.reason, cm.reason_name.as_deref()),
        ("REJ", Some(4), Some("timeout"))
    );
    assert_eq!(cm.tid, "0x0000000499e98983");
    let unanswered = &report.anomalies[0];
    assert_eq!(
        unanswered.detail,
        "REQ tid 0x0000000499e98983 (rdma_cm TCP port 7174) from 10.0.3.2 sent 2 times \
         (frames 1, 2): no REP, REJ or MRA from 10.0.3.1 within the 6.4 s it allows; its \
         sender gave up (REJ timeout (4) at frame 3)"
    );
    assert_eq!(unanswered.cm.as_ref().unwrap().frames, vec![1, 2]);
}

/// The capture cut after its first frame, a REQ: the 6.4 s the REQ allows
/// have not run out when the capture ends, so it is a note, not an anomaly.
#[test]
fn a_req_the_capture_ends_on_is_a_note_not_an_anomaly() {
    let bytes = rxe();
    let frames = capture::read_frames(&bytes).unwrap();
    let first = 24 + 16 + frames.frames[0].data.len();
    let report = capture::decode_capture(&bytes[..first]).unwrap();
    assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
    assert_eq!(
        report.notes,
        vec![
            "REQ tid 0x0000000499e98983 (rdma_cm TCP port 7174) from 10.0.3.2 at frame 1: no \
             answer yet; the capture ends 0 µs after it, before the 6.4 s its sender waits"
                .to_string()
        ]
    );
    assert!(capture::render_human(&report).contains("\nnote: REQ tid 0x0000000499e98983"));
}
