//! Communication management MADs from real captures (fixtures/pcap-cm: Linux
//! 6.1's rdma_cm on Soft-RoCE, and the soft NIC talking to it): every UD SEND
//! to QP1 decodes as a CM message and emits back byte for byte; random bytes
//! never make the parser panic, and what parses re-emits to the same Repr.

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
    // What Linux sends for a connection refused, established and torn down,
    // and for UD service resolution.
    for want in ["REQ", "REJ", "SIDR_REQ"] {
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
