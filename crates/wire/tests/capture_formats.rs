//! The capture decoder over other containers and link types (pcapng, big-endian
//! pcap, nanosecond pcap, Linux cooked SLL/SLL2, raw IP) built from the real rxe
//! captures, and over NAK / RNR NAK / READ packets built with the Reprs.

mod common;

use std::net::Ipv4Addr;

use common::pcap;
use rdmakit_wire::aeth::{self, AethKind, NakCode};
use rdmakit_wire::capture::{self, AnomalyKind, CaptureError, CaptureFormat};
use rdmakit_wire::frame::{IpRepr, UdpChecksum};
use rdmakit_wire::opcode::OpCode;
use rdmakit_wire::{ipv4, reth, roce};

fn fixture(name: &str) -> Vec<u8> {
    rdmakit_testkit::fixture_bytes(&format!("pcap/{name}"))
}

/// (timestamp ns, frame bytes) of a fixture.
fn frames_of(name: &str) -> Vec<(u64, Vec<u8>)> {
    let bytes = fixture(name);
    let frames = capture::read_frames(&bytes).unwrap();
    frames
        .frames
        .iter()
        .map(|f| (f.timestamp_ns.unwrap(), f.data.to_vec()))
        .collect()
}

fn pcapng(link_type: u16, frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let block = |out: &mut Vec<u8>, t: u32, body: &[u8]| {
        let len = 12 + body.len().div_ceil(4) * 4;
        out.extend_from_slice(&t.to_le_bytes());
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(body);
        out.resize(out.len() + (len - 12 - body.len()), 0);
        out.extend_from_slice(&(len as u32).to_le_bytes());
    };
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&[0xff; 8]);
    block(&mut out, 0x0a0d_0d0a, &shb);
    // IDB with if_tsresol = 9 (nanoseconds), then opt_endofopt.
    let mut idb = link_type.to_le_bytes().to_vec();
    idb.extend_from_slice(&[0, 0]);
    idb.extend_from_slice(&0u32.to_le_bytes());
    idb.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
    block(&mut out, 1, &idb);
    // An unknown block type is skipped.
    block(&mut out, 0x0bad, &[1, 2, 3, 4]);
    for (ts, data) in frames {
        let mut epb = 0u32.to_le_bytes().to_vec();
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(*ts as u32).to_le_bytes());
        epb.extend_from_slice(&(data.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(data.len() as u32).to_le_bytes());
        epb.extend_from_slice(data);
        block(&mut out, 6, &epb);
    }
    out
}

fn opcode_counts(bytes: &[u8]) -> Vec<(String, usize)> {
    let r = capture::decode_capture(bytes).unwrap();
    assert_eq!(r.icrc_invalid, 0);
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    r.opcode_counts.into_iter().collect()
}

#[test]
fn pcapng_of_rc_pingpong_s5000_mtu1024() {
    let frames = frames_of("rc_pingpong-s5000-mtu1024.pcap");
    let original = opcode_counts(&fixture("rc_pingpong-s5000-mtu1024.pcap"));
    let ng = pcapng(1, &frames);
    assert_eq!(opcode_counts(&ng), original);
    let r = capture::decode_capture(&ng).unwrap();
    assert_eq!(r.format, CaptureFormat::Pcapng);
    assert_eq!(r.packets[0].timestamp_ns, Some(frames[0].0));
}

#[test]
fn big_endian_and_nanosecond_pcap_of_rc_pingpong_s64() {
    let frames = frames_of("rc_pingpong-s64.pcap");
    let original = opcode_counts(&fixture("rc_pingpong-s64.pcap"));
    for (be, ns) in [(true, false), (false, true), (true, true)] {
        let bytes = pcap(1, be, ns, &frames);
        assert_eq!(opcode_counts(&bytes), original, "be {be} ns {ns}");
        let r = capture::decode_capture(&bytes).unwrap();
        assert_eq!(r.packets[3].timestamp_ns, Some(frames[3].0));
    }
}

#[test]
fn linux_cooked_and_raw_ip_of_write_bw_s8192() {
    let frames = frames_of("write_bw-s8192.pcap");
    let original = opcode_counts(&fixture("write_bw-s8192.pcap"));
    let strip = |f: &(u64, Vec<u8>), header: &[u8]| {
        let mut v = header.to_vec();
        v.extend_from_slice(&f.1[14..]);
        (f.0, v)
    };
    // SLL: packet type, ARPHRD, address length, 8 address bytes, protocol.
    let sll_hdr = [0, 0, 0, 1, 0, 6, 0x52, 0x54, 0, 0, 0, 2, 0, 0, 0x08, 0x00];
    let sll: Vec<_> = frames.iter().map(|f| strip(f, &sll_hdr)).collect();
    assert_eq!(opcode_counts(&pcap(113, false, false, &sll)), original);
    // SLL2: protocol, reserved, ifindex, ARPHRD, packet type, address length, address.
    let sll2_hdr = [
        0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 0x52, 0x54, 0, 0, 0, 2, 0, 0,
    ];
    let sll2: Vec<_> = frames.iter().map(|f| strip(f, &sll2_hdr)).collect();
    assert_eq!(opcode_counts(&pcap(276, false, false, &sll2)), original);
    let raw: Vec<_> = frames.iter().map(|f| strip(f, &[])).collect();
    assert_eq!(opcode_counts(&pcap(101, false, false, &raw)), original);
    // Two stacked VLAN tags on Ethernet.
    let qinq: Vec<_> = frames
        .iter()
        .map(|f| {
            let mut v = f.1[..12].to_vec();
            v.extend_from_slice(&[0x88, 0xa8, 0, 10, 0x81, 0x00, 0, 20, 0x08, 0x00]);
            v.extend_from_slice(&f.1[14..]);
            (f.0, v)
        })
        .collect();
    assert_eq!(opcode_counts(&pcap(1, false, false, &qinq)), original);
}

#[test]
fn snaplen_cut_frames_are_reported_not_validated_rc_pingpong_s64() {
    let frames: Vec<_> = frames_of("rc_pingpong-s64.pcap")
        .into_iter()
        .map(|(ts, d)| (ts, d[..60.min(d.len())].to_vec()))
        .collect();
    let mut bytes = pcap(1, false, false, &frames);
    // Restore the original lengths in the record headers (incl_len < orig_len).
    let mut at = 24;
    for (_, d) in frames_of("rc_pingpong-s64.pcap") {
        let incl = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        bytes[at + 12..at + 16].copy_from_slice(&(d.len() as u32).to_le_bytes());
        at += 16 + incl;
    }
    let r = capture::decode_capture(&bytes).unwrap();
    assert_eq!(r.roce_packets, 20);
    assert_eq!(r.icrc_unchecked, 20); // every frame, the 62-byte ACKs too
    assert_eq!(r.packets[0].icrc_valid, None);
    assert!(r.packets[0]
        .error
        .as_deref()
        .unwrap()
        .contains("cut to 60 of 122"));
}

#[test]
fn not_a_capture() {
    assert_eq!(capture::decode_capture(&[]), Err(CaptureError::TooShort));
    assert!(matches!(
        capture::decode_capture(b"GIF89a..........................."),
        Err(CaptureError::UnknownFormat(_))
    ));
    let mut bad_version = pcap(1, false, false, &[]);
    bad_version[4] = 3;
    assert_eq!(
        capture::decode_capture(&bad_version),
        Err(CaptureError::UnsupportedVersion(3))
    );
    let mut damaged = fixture("rc_pingpong-s64.pcap");
    damaged.truncate(damaged.len() - 10);
    let r = capture::decode_capture(&damaged).unwrap();
    assert_eq!(r.frames, 19);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
}

/// A frame between the two hosts of the fixtures, built with the Reprs.
fn frame(server_to_client: bool, roce: roce::Repr<'_>) -> Vec<u8> {
    let (a, b) = (
        Ipv4Addr::new(192, 168, 100, 1),
        Ipv4Addr::new(192, 168, 100, 2),
    );
    let (src, dst) = if server_to_client { (a, b) } else { (b, a) };
    let ip = IpRepr::Ipv4(ipv4::Repr {
        ident: 1,
        ..ipv4::Repr::udp(src, dst, 0)
    });
    common::frame(ip, 0xc123, UdpChecksum::None, roce)
}

fn ack(psn: u32, kind: AethKind) -> roce::Repr<'static> {
    roce::Repr {
        aeth: Some(aeth::Repr { kind, msn: 7 }),
        ..roce::Repr::new(OpCode::RC_ACKNOWLEDGE, 0x11, psn)
    }
}

#[test]
fn naks_and_rnr_naks_are_flagged_with_their_codes() {
    let payload = [0x7bu8; 64];
    let send = |psn| roce::Repr {
        payload: &payload,
        ..roce::Repr::new(OpCode::RC_SEND_ONLY, 0x12, psn)
    };
    let mut frames = vec![(0, frame(false, send(100)))];
    for code in [
        NakCode::PsnSequenceError,
        NakCode::InvalidRequest,
        NakCode::RemoteAccessError,
        NakCode::RemoteOperationalError,
    ] {
        frames.push((0, frame(true, ack(100, AethKind::Nak(code)))));
    }
    frames.push((0, frame(true, ack(100, AethKind::RnrNak { timer: 14 }))));
    frames.push((0, frame(false, send(100)))); // retransmitted after the RNR NAK
    frames.push((0, frame(true, ack(100, AethKind::Ack { credits: 31 }))));
    let r = capture::decode_capture(&pcap(1, false, false, &frames)).unwrap();
    assert_eq!(r.icrc_invalid, 0);
    let naks: Vec<_> = r
        .anomalies
        .iter()
        .filter(|a| a.kind == AnomalyKind::Nak)
        .map(|a| a.nak_code.unwrap())
        .collect();
    assert_eq!(
        naks,
        [
            NakCode::PsnSequenceError,
            NakCode::InvalidRequest,
            NakCode::RemoteAccessError,
            NakCode::RemoteOperationalError
        ]
    );
    let rnr: Vec<_> = r
        .anomalies
        .iter()
        .filter(|a| a.kind == AnomalyKind::RnrNak)
        .collect();
    assert_eq!(rnr.len(), 1);
    assert_eq!(rnr[0].rnr_timer, Some(14));
    assert!(rnr[0].detail.contains("1280 us"), "{}", rnr[0].detail);
    assert_eq!(r.anomaly_counts.get("retransmission"), Some(&1));
    let human = capture::render_human(&r);
    assert!(human.contains("nak x4"), "{human}");
    assert!(human.contains("NAK REMOTE_ACCESS_ERROR"), "{human}");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["anomalies"][0]["kind"], "nak");
    assert_eq!(json["anomalies"][0]["nak_code"], "PsnSequenceError");
}

#[test]
fn read_request_consumes_psns_by_learned_pmtu() {
    let mtu = [0u8; 1024];
    let reth = reth::Repr {
        va: 0x1000,
        rkey: 5,
        dma_len: 3000,
    };
    let frames = vec![
        // A 2-packet SEND teaches the PMTU (1024) of this flow.
        (
            0,
            frame(
                false,
                roce::Repr {
                    payload: &mtu,
                    ..roce::Repr::new(OpCode::RC_SEND_FIRST, 0x12, 10)
                },
            ),
        ),
        (
            0,
            frame(
                false,
                roce::Repr {
                    payload: &mtu[..4],
                    ..roce::Repr::new(OpCode::RC_SEND_LAST, 0x12, 11)
                },
            ),
        ),
        // READ of 3000 bytes = 3 PSNs (12, 13, 14), so the next request is 15.
        (
            0,
            frame(
                false,
                roce::Repr {
                    reth: Some(reth),
                    ..roce::Repr::new(OpCode::RC_RDMA_READ_REQUEST, 0x12, 12)
                },
            ),
        ),
        (
            0,
            frame(
                false,
                roce::Repr {
                    payload: &mtu[..8],
                    ..roce::Repr::new(OpCode::RC_SEND_ONLY, 0x12, 15)
                },
            ),
        ),
        // Then one PSN is skipped.
        (
            0,
            frame(
                false,
                roce::Repr {
                    payload: &mtu[..8],
                    ..roce::Repr::new(OpCode::RC_SEND_ONLY, 0x12, 17)
                },
            ),
        ),
    ];
    let r = capture::decode_capture(&pcap(1, false, false, &frames)).unwrap();
    assert_eq!(r.anomalies.len(), 1, "{:?}", r.anomalies);
    assert_eq!(r.anomalies[0].kind, AnomalyKind::PsnGap);
    assert_eq!(r.anomalies[0].index, 5);
    assert!(r.anomalies[0].detail.contains("expected 16: 1 missing"));
}

/// A CNP is decoded (not flagged); an opcode outside the table is flagged as such.
#[test]
fn cnp_and_unknown_opcode() {
    // Start from a valid SEND_ONLY frame and rewrite its transport part.
    let payload = [0u8; 16];
    let base = frame(
        false,
        roce::Repr {
            payload: &payload,
            ..roce::Repr::new(OpCode::RC_SEND_ONLY, 0x12, 5)
        },
    );
    let with_opcode = |op: u8| {
        let mut f = base.clone();
        f[42] = op;
        rdmakit_wire::icrc::fill(&mut f[14..]).unwrap();
        (0, f)
    };
    let frames = vec![with_opcode(0x81), with_opcode(0x1d)];
    let r = capture::decode_capture(&pcap(1, false, false, &frames)).unwrap();
    assert_eq!(r.icrc_valid, 2);
    assert_eq!(r.packets[0].opcode_name, "CNP");
    assert_eq!(r.packets[0].error, None);
    assert_eq!(r.packets[0].headers, vec!["CNP".to_string()]);
    assert_eq!(r.anomalies.len(), 1, "{:?}", r.anomalies);
    assert_eq!(r.anomalies[0].kind, AnomalyKind::UnknownOpcode);
    assert_eq!(r.anomalies[0].index, 2);
    assert_eq!(r.packets[1].opcode_name, "OPCODE_0x1d");
}

/// Addresses and ports of a datagram: one GSO send has one flow.
type FlowKey = (Vec<u8>, Vec<u8>);

/// (flow key, transport bytes) of an Ethernet/IPv4/UDP 4791 frame.
fn roce_transport(frame: &[u8]) -> Option<(FlowKey, &[u8])> {
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[14..];
    let hl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let udp = ip.get(hl..total)?;
    if u16::from_be_bytes([udp[2], udp[3]]) != 4791 {
        return None;
    }
    // Addresses and ports: one GSO send has one destination and one flow.
    let key = (ip[12..20].to_vec(), udp[..4].to_vec());
    Some((key, &udp[8..]))
}

/// The real rc_pingpong capture as a batching sender hands it to the kernel
/// with UDP_SEGMENT (what a capture on lo records): each run of equal-size
/// packets of one flow, plus a shorter last one, in one IPv4/UDP datagram.
/// The decoder splits them back: the same packets, every ICRC valid.
#[test]
fn udp_gso_datagrams_split_back_into_their_roce_packets() {
    // As the soft NIC sends: identification 0 and DF (an unconnected UDP
    // socket's datagrams), each ICRC computed over that header.
    let frames: Vec<(u64, Vec<u8>)> = frames_of("rc_pingpong-s5000-mtu1024.pcap")
        .into_iter()
        .map(|(ts, mut f)| {
            if roce_transport(&f).is_some() {
                f[18..22].copy_from_slice(&[0, 0, 0x40, 0]);
                let hl = usize::from(f[14] & 0x0f) * 4;
                ipv4::Packet::new_unchecked(&mut f[14..14 + hl]).fill_checksum();
                let n = f.len();
                let crc = rdmakit_wire::icrc::compute(&f[14..]).unwrap();
                f[n - 4..].copy_from_slice(&crc.to_le_bytes());
            }
            (ts, f)
        })
        .collect();
    let original = capture::decode_capture(&pcap(1, false, false, &frames)).unwrap();
    assert_eq!(original.icrc_valid, original.roce_packets);
    let mut merged: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut i = 0;
    let mut batches = 0;
    while i < frames.len() {
        let Some((key, first)) = roce_transport(&frames[i].1) else {
            merged.push(frames[i].clone());
            i += 1;
            continue;
        };
        let size = first.len();
        let mut body = first.to_vec();
        let mut j = i + 1;
        while j < frames.len() && j - i < 64 {
            match roce_transport(&frames[j].1) {
                Some((k, t)) if k == key && t.len() <= size && body.len() + t.len() <= 65_000 => {
                    body.extend_from_slice(t);
                    j += 1;
                    if t.len() < size {
                        break;
                    }
                }
                _ => break,
            }
        }
        let head = &frames[i].1;
        let hl = usize::from(head[14] & 0x0f) * 4;
        let mut f = head[..14 + hl + 8].to_vec();
        f.extend_from_slice(&body);
        let ip_len = (f.len() - 14) as u16;
        f[16..18].copy_from_slice(&ip_len.to_be_bytes());
        f[14 + hl + 4..14 + hl + 6].copy_from_slice(&(ip_len - hl as u16).to_be_bytes());
        if j - i > 1 {
            batches += 1;
        }
        merged.push((frames[i].0, f));
        i = j;
    }
    assert!(
        batches >= 10,
        "{batches} batches: the capture should have runs"
    );
    let r = capture::decode_capture(&pcap(1, false, false, &merged)).unwrap();
    assert_eq!(r.frames, merged.len());
    assert_eq!(r.roce_packets, original.roce_packets);
    assert_eq!((r.icrc_valid, r.icrc_invalid), (original.roce_packets, 0));
    assert_eq!(r.opcode_counts, original.opcode_counts);
    assert_eq!(
        r.anomalies.len(),
        original.anomalies.len(),
        "{:?}",
        r.anomalies
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains(&format!("{batches} frame(s) were UDP GSO datagrams"))),
        "{:?}",
        r.warnings
    );
    let psns = |r: &capture::CaptureReport| r.packets.iter().map(|p| p.psn).collect::<Vec<_>>();
    assert_eq!(psns(&r), psns(&original));
}

/// A datagram whose ICRC is wrong for every segment size stays one bad packet.
#[test]
fn a_corrupt_datagram_is_not_split_into_anything() {
    let frames = frames_of("rc_pingpong-s5000-mtu1024.pcap");
    let mut bad = frames[0].1.clone();
    let n = bad.len();
    bad[n - 10] ^= 0xff;
    let r = capture::decode_capture(&pcap(1, false, false, &[(0, bad)])).unwrap();
    assert_eq!((r.roce_packets, r.icrc_invalid), (1, 1));
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

/// The soft NIC's same-host requests (vendor opcodes 0xC0-0xC2) decode and
/// are named; on the wire each is an anomaly of its own (they
/// travel only in authenticated same-host rings, and receivers drop them
/// from UDP), the packets after one (whose PSN skips the span it covered)
/// are no PSN gap, and its decline NAK is named.
#[test]
fn soft_same_host_requests_and_the_decline_nak() {
    use rdmakit_wire::cma;
    let mut iov = [(0u64, 0u64); cma::MAX_IOV];
    iov[0] = (0x7f00_0010_0000, 65536);
    let hdr = cma::Repr {
        len: 65536,
        rkey: 0x1234,
        va: 0x5500_0000,
        iov_count: 1,
        iov,
    };
    let mut h = vec![0u8; hdr.buffer_len()];
    hdr.emit(&mut cma::Packet::new_unchecked(&mut h[..]))
        .unwrap();
    let vendor = |op: u8, psn: u32| {
        // A SEND_ONLY whose payload is the header, relabeled (as the engine
        // emits it).
        let mut f = frame(
            false,
            roce::Repr {
                payload: &h,
                ..roce::Repr::new(OpCode::RC_SEND_ONLY, 0x12, psn)
            },
        );
        f[42] = op;
        rdmakit_wire::icrc::fill(&mut f[14..]).unwrap();
        (0, f)
    };
    let payload = [0u8; 1024];
    let send = |psn: u32| {
        let f = frame(
            false,
            roce::Repr {
                payload: &payload,
                ..roce::Repr::new(OpCode::RC_SEND_ONLY, 0x12, psn)
            },
        );
        (0, f)
    };
    let decline = AethKind::Nak(NakCode::from_bits(cma::NAK_DECLINE));
    let frames = vec![
        send(9),
        vendor(cma::OP_WRITE, 10),
        vendor(cma::OP_SEND, 74),
        vendor(cma::OP_READ, 138),
        send(202),
        (0, frame(true, ack(202, decline))),
    ];
    let r = capture::decode_capture(&pcap(1, false, false, &frames)).unwrap();
    assert_eq!(r.icrc_valid, 6);
    let names: Vec<&str> = r.packets.iter().map(|p| p.opcode_name.as_str()).collect();
    assert_eq!(
        names[1..4],
        [
            "SOFT_SAME_HOST_WRITE",
            "SOFT_SAME_HOST_SEND",
            "SOFT_SAME_HOST_READ"
        ]
    );
    assert!(
        r.packets[1].summary.contains("SAME-HOST len 65536"),
        "{}",
        r.packets[1].summary
    );
    assert_eq!(r.packets[1].error, None);
    let kinds: Vec<AnomalyKind> = r.anomalies.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            AnomalyKind::SameHostOnWire,
            AnomalyKind::SameHostOnWire,
            AnomalyKind::SameHostOnWire,
            AnomalyKind::Nak
        ],
        "three requests on the wire and the NAK, no PSN gap: {:?}",
        r.anomalies
    );
    assert!(
        r.anomalies[3].detail.contains("SOFT_SAME_HOST_DECLINE"),
        "{}",
        r.anomalies[3].detail
    );
    // A truncated same-host header is malformed, still reported.
    let mut bad = vendor(cma::OP_WRITE, 300);
    bad.1[42 + 12] = 0; // iovec count 0
    rdmakit_wire::icrc::fill(&mut bad.1[14..]).unwrap();
    let r = capture::decode_capture(&pcap(1, false, false, &[bad])).unwrap();
    assert_eq!(r.anomalies.len(), 1, "{:?}", r.anomalies);
}
