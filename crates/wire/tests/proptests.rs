//! Property tests: every Repr round-trips through emit and parse, and no parser
//! panics on truncated or random bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use rdmakit_wire::aeth::AethKind;
use rdmakit_wire::ethernet::{self, EtherType};
use rdmakit_wire::frame::{self, IpRepr, UdpChecksum};
use rdmakit_wire::opcode::OpCode;
use rdmakit_wire::{
    aeth, atomic_ack_eth, atomic_eth, bth, capture, cnp, deth, icrc, ieth, immdt, ipv4, ipv6, reth,
    roce, udp, vlan,
};

/// Emit `repr` into a 0xa5-filled buffer of `len` bytes with `emit`, then parse it
/// back with `parse` and compare.
macro_rules! roundtrip {
    ($module:ident, $repr:expr, $extra:expr) => {{
        let repr = $repr;
        let mut buf = vec![0xa5u8; repr.buffer_len() + $extra];
        repr.emit(&mut $module::Packet::new_unchecked(&mut buf[..]));
        let packet = $module::Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!($module::Repr::parse(&packet).unwrap(), repr);
    }};
}

fn mac() -> impl Strategy<Value = ethernet::Address> {
    any::<[u8; 6]>().prop_map(ethernet::Address)
}

fn bth_repr() -> impl Strategy<Value = bth::Repr> {
    (
        any::<u8>(),
        any::<[bool; 5]>(),
        0u8..4,
        0u8..16,
        any::<u16>(),
        0u32..=0xff_ffff,
        0u32..=0xff_ffff,
    )
        .prop_map(|(op, b, pad_count, tver, pkey, dest_qp, psn)| bth::Repr {
            opcode: OpCode(op),
            solicited: b[0],
            mig_req: b[1],
            pad_count,
            tver,
            pkey,
            fecn: b[2],
            becn: b[3],
            dest_qp,
            ack_req: b[4],
            psn,
        })
}

fn aeth_repr() -> impl Strategy<Value = aeth::Repr> {
    // Every syndrome byte decodes to a kind that encodes back to it.
    (any::<u8>(), 0u32..=0xff_ffff).prop_map(|(s, msn)| aeth::Repr {
        kind: AethKind::from_syndrome(s),
        msn,
    })
}

proptest! {
    #[test]
    fn ethernet_roundtrip(src in mac(), dst in mac(), t in any::<u16>()) {
        let repr = ethernet::Repr { src_addr: src, dst_addr: dst, ethertype: EtherType(t) };
        let mut buf = vec![0xa5u8; repr.buffer_len()];
        repr.emit(&mut ethernet::Frame::new_unchecked(&mut buf[..]));
        let f = ethernet::Frame::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(ethernet::Repr::parse(&f).unwrap(), repr);
    }

    #[test]
    fn vlan_roundtrip(pcp in 0u8..8, dei: bool, vid in 0u16..4096, t: u16) {
        roundtrip!(vlan, vlan::Repr { pcp, dei, vid, ethertype: EtherType(t) }, 0);
    }

    #[test]
    fn ipv4_roundtrip(src: [u8; 4], dst: [u8; 4], next: u8, len in 0usize..2000,
                      ttl: u8, tos: u8, ident: u16, df: bool) {
        roundtrip!(ipv4, ipv4::Repr {
            src_addr: Ipv4Addr::from(src), dst_addr: Ipv4Addr::from(dst), next_header: next,
            payload_len: len, hop_limit: ttl, dscp_ecn: tos, ident, dont_frag: df,
        }, len);
    }

    #[test]
    fn ipv6_roundtrip(src: [u8; 16], dst: [u8; 16], next: u8, len in 0usize..2000,
                      hl: u8, tc: u8, flow in 0u32..0x10_0000) {
        roundtrip!(ipv6, ipv6::Repr {
            src_addr: Ipv6Addr::from(src), dst_addr: Ipv6Addr::from(dst), next_header: next,
            payload_len: len, hop_limit: hl, traffic_class: tc, flow_label: flow,
        }, len);
    }

    #[test]
    fn udp_roundtrip(sp: u16, dp: u16, len in 0usize..2000) {
        roundtrip!(udp, udp::Repr { src_port: sp, dst_port: dp, payload_len: len }, len);
    }

    #[test]
    fn bth_roundtrip(repr in bth_repr()) {
        roundtrip!(bth, repr, 0);
    }

    #[test]
    fn reth_roundtrip(va: u64, rkey: u32, dma_len: u32) {
        roundtrip!(reth, reth::Repr { va, rkey, dma_len }, 0);
    }

    #[test]
    fn aeth_roundtrip(repr in aeth_repr()) {
        roundtrip!(aeth, repr, 0);
    }

    #[test]
    fn atomic_eth_roundtrip(va: u64, rkey: u32, swap_add: u64, compare: u64) {
        roundtrip!(atomic_eth, atomic_eth::Repr { va, rkey, swap_add, compare }, 0);
    }

    #[test]
    fn atomic_ack_eth_roundtrip(v: u64) {
        roundtrip!(atomic_ack_eth, atomic_ack_eth::Repr { orig_value: v }, 0);
    }

    #[test]
    fn immdt_roundtrip(v: u32) {
        roundtrip!(immdt, immdt::Repr { imm: v }, 0);
    }

    #[test]
    fn ieth_roundtrip(v: u32) {
        roundtrip!(ieth, ieth::Repr { rkey: v }, 0);
    }

    #[test]
    fn deth_roundtrip(qkey: u32, src_qp in 0u32..=0xff_ffff) {
        roundtrip!(deth, deth::Repr { qkey, src_qp }, 0);
    }
}

/// Everything needed to build a valid RoCE Repr for some known opcode.
#[derive(Debug, Clone)]
struct RoceParts {
    opcode: OpCode,
    bth: bth::Repr,
    deth: deth::Repr,
    reth: reth::Repr,
    atomic: atomic_eth::Repr,
    aeth: aeth::Repr,
    atomic_ack: u64,
    imm: u32,
    inv: u32,
    payload: Vec<u8>,
}

impl RoceParts {
    fn repr(&self) -> roce::Repr<'_> {
        let info = self.opcode.info().unwrap();
        let h = info.headers;
        let payload: &[u8] = if info.has_payload { &self.payload } else { &[] };
        let mut bth = self.bth;
        bth.opcode = self.opcode;
        bth.pad_count = roce::pad_len(payload.len());
        roce::Repr {
            bth,
            deth: h.deth.then_some(self.deth),
            reth: h.reth.then_some(self.reth),
            atomic_eth: h.atomic_eth.then_some(self.atomic),
            aeth: h.aeth.then_some(self.aeth),
            atomic_ack_eth: h.atomic_ack_eth.then_some(atomic_ack_eth::Repr {
                orig_value: self.atomic_ack,
            }),
            immdt: h.immdt.then_some(immdt::Repr { imm: self.imm }),
            ieth: h.ieth.then_some(ieth::Repr { rkey: self.inv }),
            payload,
        }
    }
}

fn roce_parts() -> impl Strategy<Value = RoceParts> {
    let known: Vec<OpCode> = OpCode::all_known().collect();
    (
        proptest::sample::select(known),
        bth_repr(),
        (any::<u32>(), 0u32..=0xff_ffff).prop_map(|(qkey, src_qp)| deth::Repr { qkey, src_qp }),
        any::<(u64, u32, u32)>().prop_map(|(va, rkey, dma_len)| reth::Repr { va, rkey, dma_len }),
        any::<(u64, u32, u64, u64)>().prop_map(|(va, rkey, swap_add, compare)| atomic_eth::Repr {
            va,
            rkey,
            swap_add,
            compare,
        }),
        aeth_repr(),
        any::<(u64, u32, u32)>(),
        proptest::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(
            |(opcode, bth, deth, reth, atomic, aeth, (atomic_ack, imm, inv), payload)| RoceParts {
                opcode,
                bth,
                deth,
                reth,
                atomic,
                aeth,
                atomic_ack,
                imm,
                inv,
                payload,
            },
        )
}

#[derive(Debug, Clone)]
struct FrameParts {
    roce: RoceParts,
    src_mac: ethernet::Address,
    dst_mac: ethernet::Address,
    vlan: Option<(u8, bool, u16)>,
    v6: bool,
    addrs: ([u8; 16], [u8; 16]),
    ttl: u8,
    tos: u8,
    ident: u16,
    flow: u32,
    sport: u16,
    compute_udp: bool,
    trailer: Vec<u8>,
}

prop_compose! {
    fn frame_parts()(
        roce in roce_parts(),
        src_mac in mac(),
        dst_mac in mac(),
        vlan in proptest::option::of((0u8..8, any::<bool>(), 0u16..4096)),
        v6 in any::<bool>(),
        addrs in any::<([u8; 16], [u8; 16])>(),
        (ttl, tos, ident) in any::<(u8, u8, u16)>(),
        flow in 0u32..0x10_0000,
        sport in 0xc000u16..=0xffff,
        compute_udp in any::<bool>(),
        trailer in proptest::collection::vec(any::<u8>(), 0..8),
    ) -> FrameParts {
        FrameParts {
            roce,
            src_mac,
            dst_mac,
            vlan,
            v6,
            addrs,
            ttl,
            tos,
            ident,
            flow,
            sport,
            compute_udp,
            trailer,
        }
    }
}

impl FrameParts {
    fn repr(&self) -> frame::Repr<'_> {
        let roce = self.roce.repr();
        let udp_len = udp::HEADER_LEN + roce.buffer_len();
        let ip = if self.v6 {
            IpRepr::Ipv6(ipv6::Repr {
                src_addr: Ipv6Addr::from(self.addrs.0),
                dst_addr: Ipv6Addr::from(self.addrs.1),
                next_header: 17,
                payload_len: udp_len,
                hop_limit: self.ttl,
                traffic_class: self.tos,
                flow_label: self.flow,
            })
        } else {
            let s = self.addrs.0;
            let d = self.addrs.1;
            IpRepr::Ipv4(ipv4::Repr {
                src_addr: Ipv4Addr::new(s[0], s[1], s[2], s[3]),
                dst_addr: Ipv4Addr::new(d[0], d[1], d[2], d[3]),
                next_header: 17,
                payload_len: udp_len,
                hop_limit: self.ttl,
                dscp_ecn: self.tos,
                ident: self.ident,
                dont_frag: true,
            })
        };
        let ethertype = if self.vlan.is_some() {
            EtherType::VLAN
        } else {
            ip.ethertype()
        };
        frame::Repr {
            ethernet: ethernet::Repr {
                src_addr: self.src_mac,
                dst_addr: self.dst_mac,
                ethertype,
            },
            vlan: self.vlan.map(|(pcp, dei, vid)| vlan::Repr {
                pcp,
                dei,
                vid,
                ethertype: ip.ethertype(),
            }),
            ip,
            udp: udp::Repr {
                src_port: self.sport,
                dst_port: 4791,
                payload_len: roce.buffer_len(),
            },
            // IPv6 requires a UDP checksum.
            udp_checksum: if self.compute_udp || self.v6 {
                UdpChecksum::Compute
            } else {
                UdpChecksum::None
            },
            roce,
            trailer: &self.trailer,
        }
    }
}

proptest! {
    #[test]
    fn roce_roundtrip(parts in roce_parts()) {
        let repr = parts.repr();
        let mut buf = vec![0xa5u8; repr.buffer_len()];
        repr.emit(&mut roce::Packet::new_unchecked(&mut buf[..])).unwrap();
        let p = roce::Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(roce::Repr::parse(&p).unwrap(), repr);
        prop_assert!(p.pad().iter().all(|&b| b == 0));
        prop_assert_eq!(p.icrc(), 0);
    }

    #[test]
    fn frame_roundtrip_with_valid_icrc(parts in frame_parts()) {
        let repr = parts.repr();
        let mut buf = vec![0xa5u8; repr.buffer_len()];
        repr.emit(&mut buf).unwrap();
        prop_assert!(frame::icrc_valid(&buf).unwrap());
        let parsed = frame::Repr::parse(&buf).unwrap();
        prop_assert_eq!(parsed, repr);
        let mut again = vec![0u8; parsed.buffer_len()];
        parsed.emit(&mut again).unwrap();
        prop_assert_eq!(again, buf);
    }

    /// Flipping any bit the ICRC covers (and does not mask) is detected.
    #[test]
    fn icrc_detects_single_bit_flips(parts in frame_parts(), pos: prop::sample::Index, bit in 0u8..8) {
        let mut p = parts;
        p.vlan = None;
        p.trailer.clear();
        let repr = p.repr();
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf).unwrap();
        let ip_start = ethernet::HEADER_LEN;
        let (ip_hl, masked): (usize, &[usize]) = if p.v6 {
            (40, &[0, 1, 2, 3, 7, 40 + 6, 40 + 7])
        } else {
            (20, &[1, 8, 10, 11, 20 + 6, 20 + 7])
        };
        let bth_byte4 = ip_hl + 8 + 4;
        let i = pos.index(buf.len() - ip_start);
        // Masked fields, the ICRC itself, and the lengths/version that change parsing.
        prop_assume!(!masked.contains(&i) && i != bth_byte4 && i + 4 < buf.len() - ip_start);
        // Version, header length and the length fields change how the bytes parse.
        let lengths_end = if p.v6 { 8 } else { 4 };
        prop_assume!(i >= lengths_end);
        buf[ip_start + i] ^= 1 << bit;
        prop_assert_eq!(icrc::verify(&buf[ip_start..]), Ok(false));
    }

    /// A CNP round trips whole and without its ICRC, and `Kind` tells it
    /// apart; whatever sits in the reserved bytes and the flags is ignored.
    #[test]
    fn cnp_roundtrip(
        pkey: u16, dest_qp in 0u32..1 << 24, psn in 0u32..1 << 24,
        reserved in any::<[u8; 16]>(), flags in any::<u8>(), ack in any::<bool>(),
    ) {
        let repr = cnp::Repr { pkey, dest_qp, psn };
        roundtrip!(cnp, repr, 0);
        let mut buf = [0xa5u8; cnp::LEN_WITHOUT_ICRC];
        prop_assert_eq!(repr.emit_without_icrc(&mut buf), Ok(cnp::LEN_WITHOUT_ICRC));
        prop_assert_eq!(roce::Kind::parse_without_icrc(&buf), Ok(roce::Kind::Cnp(repr)));
        buf[12..28].copy_from_slice(&reserved);
        buf[4] = flags;
        buf[8] = if ack { 0x80 } else { 0 } | (flags & 0x7f);
        prop_assert_eq!(cnp::Repr::parse_without_icrc(&buf), Ok(repr));
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = frame::Repr::parse(&bytes);
        let _ = frame::icrc_valid(&bytes);
        let _ = frame::Datagram::parse(&bytes);
        let _ = icrc::compute(&bytes);
        if let Ok(p) = roce::Packet::new_checked(&bytes[..]) {
            let _ = (p.payload(), p.pad(), p.icrc(), p.header_len());
            let _ = (p.reth().map(|r| r.va()), p.aeth().map(|a| a.msn()), p.deth().map(|d| d.src_qp()));
            let _ = (p.atomic_eth().map(|a| a.compare()), p.atomic_ack_eth().map(|a| a.orig_value()));
            let _ = (p.immdt().map(|i| i.imm()), p.ieth().map(|i| i.rkey()));
        }
        let _ = roce::Repr::parse(&roce::Packet::new_unchecked(&bytes[..]));
        let _ = (roce::Kind::parse(&bytes), roce::Kind::parse_without_icrc(&bytes));
        let _ = cnp::Repr::parse_without_icrc(&bytes);
        if let Ok(p) = cnp::Packet::new_checked(&bytes[..]) {
            let _ = (p.bth().dest_qp(), p.reserved(), p.icrc(), cnp::Repr::parse(&p));
        }
        if let Ok(p) = ipv4::Packet::new_checked(&bytes[..]) {
            let _ = (p.payload(), p.verify_checksum());
        }
        if let Ok(p) = ipv6::Packet::new_checked(&bytes[..]) {
            let _ = p.payload();
        }
        if let Ok(p) = udp::Packet::new_checked(&bytes[..]) {
            let _ = p.payload();
        }
        let _ = capture::decode_capture(&bytes);
    }

    /// Garbage after a valid pcap or pcapng header.
    #[test]
    fn capture_garbage_never_panics(ng: bool, be: bool, body in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut bytes = if ng {
            let mut h = vec![0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0];
            h.extend_from_slice(&[0xff; 8]);
            h.extend_from_slice(&[28, 0, 0, 0]);
            if be { h.clear(); h.extend_from_slice(&[0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 28, 0x1a, 0x2b, 0x3c, 0x4d, 0, 1, 0, 0]); h.extend_from_slice(&[0xff; 8]); h.extend_from_slice(&[0, 0, 0, 28]); }
            h
        } else {
            let mut h = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
            h.extend_from_slice(&[0; 8]);
            h.extend_from_slice(&[0, 0, 4, 0, 1, 0, 0, 0]);
            h
        };
        bytes.extend_from_slice(&body);
        let _ = capture::decode_capture(&bytes);
    }
}

fn fixture(name: &str) -> Vec<u8> {
    rdmakit_testkit::fixture_bytes(&format!("pcap/{name}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any truncation or corruption of a real capture decodes without a panic.
    #[test]
    fn real_capture_truncated_or_corrupted_never_panics(
        cut: prop::sample::Index,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
    ) {
        let mut bytes = fixture("rc_pingpong-s5000-mtu1024.pcap");
        for (i, v) in flips {
            let n = bytes.len();
            bytes[i.index(n)] = v;
        }
        let n = cut.index(bytes.len() + 1);
        bytes.truncate(n);
        if let Ok(report) = capture::decode_capture(&bytes) {
            let _ = capture::render_human(&report);
        }
    }

    /// Every prefix of every real frame: parse fails cleanly or succeeds.
    #[test]
    fn real_frame_prefixes_never_panic(cut: prop::sample::Index, which: prop::sample::Index) {
        let bytes = fixture("write_bw-s8192.pcap");
        let frames = capture::read_frames(&bytes).unwrap();
        let f = frames.frames[which.index(frames.frames.len())];
        let data = &f.data[..cut.index(f.data.len() + 1)];
        let _ = frame::Repr::parse(data);
        let _ = frame::icrc_valid(data);
    }
}
