//! The RoCEv2 invariant CRC (ICRC), IBTA Annex A17 / Linux rxe `rxe_icrc.c`.
//!
//! CRC-32 (IEEE, reflected, init and final xor 0xFFFFFFFF) over:
//! 1. 8 bytes of 0xFF standing for the absent LRH;
//! 2. the IP header with its variant fields set to all ones (IPv4: TOS, TTL,
//!    header checksum; IPv6: traffic class, flow label, hop limit);
//! 3. the UDP header with its checksum set to 0xFFFF;
//! 4. the BTH with byte 4 (FECN, BECN, reserved) set to 0xFF;
//! 5. everything after the BTH up to the ICRC (extension headers, payload, pad).
//!
//! The 32-bit result is appended least-significant byte first.

use crate::frame::IpRepr;
use crate::roce::ICRC_LEN;
use crate::{bth, ipv4, ipv6, udp};
use crate::{Error, Result};

/// Compute the ICRC from the exact IP header bytes (IPv4 with any options, or the
/// 40-byte IPv6 header), the 8-byte UDP header and the RoCE packet without its
/// ICRC (BTH through pad).
///
/// # Errors
/// [`Error::Malformed`] if the IP header is not a 20..=60 byte IPv4 header or a
/// 40-byte IPv6 header, [`Error::Truncated`] if the UDP header is not 8 bytes or
/// the transport part is shorter than a BTH.
pub fn compute_parts(ip_header: &[u8], udp_header: &[u8], transport: &[u8]) -> Result<u32> {
    let ip_len = ip_header.len();
    match ip_header.first().map(|b| b >> 4) {
        Some(4) if (ipv4::HEADER_LEN..=60).contains(&ip_len) => {}
        Some(6) if ip_len == ipv6::HEADER_LEN => {}
        _ => return Err(Error::Malformed),
    }
    if udp_header.len() != udp::HEADER_LEN || transport.len() < bth::HEADER_LEN {
        return Err(Error::Truncated);
    }
    // One contiguous masked copy of LRH stand-in, IP, UDP and BTH, hashed in a
    // single update (small updates are the slow path of a CRC), then the rest.
    let mut head = [0xffu8; 8 + 60 + udp::HEADER_LEN + bth::HEADER_LEN];
    let mut at = 8;
    let ip = &mut head[at..at + ip_len];
    ip.copy_from_slice(ip_header);
    if ip_len == ipv6::HEADER_LEN && ip[0] >> 4 == 6 {
        // Traffic class and flow label: the first word becomes 0x6fffffff.
        ip[0] = 0x6f;
        ip[1..4].fill(0xff);
        ip[7] = 0xff; // hop limit
    } else {
        ip[1] = 0xff; // TOS
        ip[8] = 0xff; // TTL
        ip[10..12].fill(0xff); // header checksum
    }
    at += ip_len;
    head[at..at + udp::HEADER_LEN].copy_from_slice(udp_header);
    head[at + 6..at + 8].fill(0xff); // UDP checksum
    at += udp::HEADER_LEN;
    head[at..at + bth::HEADER_LEN].copy_from_slice(&transport[..bth::HEADER_LEN]);
    head[at + 4] = 0xff; // FECN, BECN, reserved
    at += bth::HEADER_LEN;

    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&head[..at]);
    hasher.update(&transport[bth::HEADER_LEN..]);
    Ok(hasher.finalize())
}

/// Compute the ICRC of an IP packet carrying RoCEv2: `ip_packet` runs from the
/// first byte of the IP header through the ICRC (whose 4 bytes are not read).
///
/// # Errors
/// [`Error::Truncated`] / [`Error::Malformed`] if the bytes are too short for
/// IP + UDP + BTH + ICRC or the IP version is neither 4 nor 6.
pub fn compute(ip_packet: &[u8]) -> Result<u32> {
    let ip_len = ip_header_len(ip_packet)?;
    let min = ip_len + udp::HEADER_LEN + bth::HEADER_LEN + ICRC_LEN;
    if ip_packet.len() < min {
        return Err(Error::Truncated);
    }
    let udp_end = ip_len + udp::HEADER_LEN;
    compute_parts(
        &ip_packet[..ip_len],
        &ip_packet[ip_len..udp_end],
        &ip_packet[udp_end..ip_packet.len() - ICRC_LEN],
    )
}

/// Whether the ICRC at the end of `ip_packet` (IP header through ICRC) is right.
///
/// # Errors
/// As [`compute`].
pub fn verify(ip_packet: &[u8]) -> Result<bool> {
    let icrc = compute(ip_packet)?;
    Ok(stored(ip_packet) == Some(icrc))
}

/// Compute and write the ICRC at the end of `ip_packet` (IP header through ICRC).
///
/// # Errors
/// As [`compute`].
pub fn fill(ip_packet: &mut [u8]) -> Result<()> {
    let icrc = compute(ip_packet)?;
    let len = ip_packet.len();
    ip_packet[len - ICRC_LEN..].copy_from_slice(&icrc.to_le_bytes());
    Ok(())
}

/// Compute the ICRC from Reprs, for a sender that never sees its IP header (a UDP
/// socket): the IP and UDP headers are emitted as `ip` and `udp` describe them
/// (lengths, identification and addresses must be what the kernel will send).
/// `transport` is the RoCE packet without its ICRC.
///
/// # Errors
/// As [`compute_parts`].
pub fn compute_reprs(ip: &IpRepr, udp: &udp::Repr, transport: &[u8]) -> Result<u32> {
    let mut ip_buf = [0u8; ipv6::HEADER_LEN];
    let ip_len = ip.buffer_len();
    ip.emit(&mut ip_buf[..ip_len]);
    let mut udp_buf = [0u8; udp::HEADER_LEN];
    udp.emit(&mut udp::Packet::new_unchecked(&mut udp_buf[..]));
    compute_parts(&ip_buf[..ip_len], &udp_buf, transport)
}

/// The addressing of an IPv4 RoCEv2 datagram as far as the ICRC sees it: the
/// fields of an option-less IPv4 header and the UDP header that the ICRC does
/// not mask (TOS, TTL, the IP checksum and the UDP checksum are masked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Flow {
    /// IPv4 source address.
    pub src: core::net::Ipv4Addr,
    /// IPv4 destination address.
    pub dst: core::net::Ipv4Addr,
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port (4791 for RoCEv2).
    pub dport: u16,
    /// IPv4 identification.
    pub ident: u16,
    /// IPv4 Don't Fragment bit.
    pub dont_frag: bool,
}

impl Ipv4Flow {
    /// The IPv4 and UDP Reprs of a datagram of this flow carrying a RoCE
    /// packet of `transport_len` bytes without its ICRC (TTL 64, TOS 0: both
    /// masked): what [`compute_reprs`] takes for the same ICRC as
    /// [`compute_ipv4`].
    pub fn reprs(&self, transport_len: usize) -> (IpRepr, udp::Repr) {
        let udp_len = transport_len + ICRC_LEN;
        let ip = IpRepr::Ipv4(ipv4::Repr {
            ident: self.ident,
            dont_frag: self.dont_frag,
            ..ipv4::Repr::udp(self.src, self.dst, udp::HEADER_LEN + udp_len)
        });
        let udp = udp::Repr {
            src_port: self.sport,
            dst_port: self.dport,
            payload_len: udp_len,
        };
        (ip, udp)
    }
}

/// [`compute_reprs`] for an option-less IPv4 header, without emitting the
/// headers: the masked image (LRH stand-in, IPv4, UDP, BTH) is written
/// straight into one buffer. This is the per-packet path of a UDP-socket
/// sender and receiver, where the generic emit (with its IP checksum, which
/// the ICRC masks anyway) was a third of the ICRC's cost for small packets.
/// `transport` is the RoCE packet without its ICRC.
///
/// # Errors
/// [`Error::Truncated`] if `transport` is shorter than a BTH;
/// [`Error::Malformed`] if the IPv4 total length would exceed 65535.
pub fn compute_ipv4(flow: &Ipv4Flow, transport: &[u8]) -> Result<u32> {
    if transport.len() < bth::HEADER_LEN {
        return Err(Error::Truncated);
    }
    let total = ipv4::HEADER_LEN + udp::HEADER_LEN + transport.len() + ICRC_LEN;
    let total = u16::try_from(total).map_err(|_| Error::Malformed)?;
    let udp_len = total - ipv4::HEADER_LEN as u16;
    const LEN: usize = 8 + ipv4::HEADER_LEN + udp::HEADER_LEN + bth::HEADER_LEN;
    let mut h = [0xffu8; LEN];
    // IPv4 at 8: version/IHL, TOS (masked), total length, identification,
    // flags/fragment offset, TTL (masked), protocol, checksum (masked), addresses.
    h[8] = 0x45;
    h[10..12].copy_from_slice(&total.to_be_bytes());
    h[12..14].copy_from_slice(&flow.ident.to_be_bytes());
    h[14] = if flow.dont_frag { 0x40 } else { 0 };
    h[15] = 0;
    h[17] = 17; // UDP
    h[20..24].copy_from_slice(&flow.src.octets());
    h[24..28].copy_from_slice(&flow.dst.octets());
    // UDP at 28: ports, length, checksum (masked).
    h[28..30].copy_from_slice(&flow.sport.to_be_bytes());
    h[30..32].copy_from_slice(&flow.dport.to_be_bytes());
    h[32..34].copy_from_slice(&udp_len.to_be_bytes());
    // BTH at 36, byte 4 (FECN, BECN, reserved) masked.
    h[36..48].copy_from_slice(&transport[..bth::HEADER_LEN]);
    h[40] = 0xff;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&h);
    hasher.update(&transport[bth::HEADER_LEN..]);
    Ok(hasher.finalize())
}

/// The ICRC stored in the last 4 bytes, if there are 4 bytes.
fn stored(bytes: &[u8]) -> Option<u32> {
    let t = bytes.get(bytes.len().checked_sub(ICRC_LEN)?..)?;
    Some(u32::from_le_bytes([t[0], t[1], t[2], t[3]]))
}

fn ip_header_len(ip_packet: &[u8]) -> Result<usize> {
    match ip_packet.first() {
        Some(b) if b >> 4 == 4 => {
            let hl = usize::from(b & 0x0f) * 4;
            if hl < ipv4::HEADER_LEN {
                Err(Error::Malformed)
            } else {
                Ok(hl)
            }
        }
        Some(b) if b >> 4 == 6 => Ok(ipv6::HEADER_LEN),
        Some(_) => Err(Error::Malformed),
        None => Err(Error::Truncated),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector of reference/roce-wire.md (an Ethernet frame; the ICRC is
    /// `e9 a4 e4 16`).
    const VECTOR_HEX: &str = "02000000000202000000000108004502003c00014000401126ac0a0000010a000002c12312b7002800000400ffff0000001180000100000102030405060708090a0b0c0d0e0fe9a4e416";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn roce_wire_md_test_vector() {
        let frame = unhex(VECTOR_HEX);
        let ip = &frame[14..];
        assert_eq!(compute(ip).unwrap().to_le_bytes(), [0xe9, 0xa4, 0xe4, 0x16]);
        assert!(verify(ip).unwrap());
        let mut copy = ip.to_vec();
        let n = copy.len();
        copy[n - 4..].fill(0);
        assert!(!verify(&copy).unwrap());
        fill(&mut copy).unwrap();
        assert_eq!(copy, ip);
    }

    #[test]
    fn ipv4_fast_path_matches_the_test_vector() {
        let frame = unhex(VECTOR_HEX);
        let ip = &frame[14..];
        let flow = Ipv4Flow {
            src: core::net::Ipv4Addr::new(10, 0, 0, 1),
            dst: core::net::Ipv4Addr::new(10, 0, 0, 2),
            sport: 0xc123,
            dport: 4791,
            ident: 1,
            dont_frag: true,
        };
        let transport = &ip[28..ip.len() - ICRC_LEN];
        let icrc = compute_ipv4(&flow, transport).unwrap();
        assert_eq!(icrc.to_le_bytes(), [0xe9, 0xa4, 0xe4, 0x16]);
        assert_eq!(compute_ipv4(&flow, &transport[..11]), Err(Error::Truncated));
        assert_eq!(
            compute_ipv4(&flow, &vec![0u8; 65536]),
            Err(Error::Malformed)
        );
    }

    proptest::proptest! {
        #[test]
        fn ipv4_fast_path_equals_the_emitted_headers(
            src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, ident: u16,
            dont_frag: bool,
            transport in proptest::collection::vec(proptest::num::u8::ANY, 12..600),
        ) {
            let flow = Ipv4Flow {
                src: src.into(), dst: dst.into(), sport, dport, ident, dont_frag,
            };
            let (ip, u) = flow.reprs(transport.len());
            proptest::prop_assert_eq!(
                compute_ipv4(&flow, &transport),
                compute_reprs(&ip, &u, &transport)
            );
        }
    }

    #[test]
    fn masked_fields_do_not_change_icrc() {
        let frame = unhex(VECTOR_HEX);
        let mut ip = frame[14..].to_vec();
        ip[1] = 0x12; // TOS
        ip[8] = 1; // TTL
        ip[10] = 0; // checksum
        ip[26] = 0xab; // UDP checksum
        ip[20 + 8 + 4] = 0xc0; // BTH FECN/BECN
        assert!(verify(&ip).unwrap());
        ip[20 + 8 + 12] ^= 1; // a payload byte
        assert!(!verify(&ip).unwrap());
    }

    /// A CNP over IPv4 as scapy 2.8.0 builds it (frame 1 of
    /// tests/data/cnp/scapy-cnp.pcap; TOS 0xc0, DestQP 0x11).
    const CNP_SCAPY_HEX: &str = "525400123456525400123457080045c0003c00004000401121d30a0002100a00020fc0de12b700282d9c8100ffff4000001100000000000000000000000000000000000000002dfbf740";

    /// What a switch does on the way, to a data packet (the roce-wire.md
    /// vector, ECT(0)) and to a CNP: marks CE in the ECN bits, rewrites the
    /// header checksum, decrements the TTL. The ICRC masks all of it, so
    /// the receiver still accepts the packet it has to answer with a CNP.
    #[test]
    fn ce_marking_keeps_the_icrc_of_a_data_packet_and_a_cnp() {
        for (what, hex) in [("data", VECTOR_HEX), ("cnp", CNP_SCAPY_HEX)] {
            let frame = unhex(hex);
            let mut ip = frame[14..].to_vec();
            assert!(verify(&ip).unwrap(), "{what}");
            ip[1] = (ip[1] & !0x03) | 0x02; // ECT(0), as a DCQCN sender sends
            assert!(verify(&ip).unwrap(), "{what}");
            ip[1] |= 0x03; // CE
            ip[8] -= 1;
            let mut p = ipv4::Packet::new_unchecked(&mut ip[..]);
            p.fill_checksum();
            assert!(p.verify_checksum(), "{what}");
            assert!(verify(&ip).unwrap(), "{what} CE-marked");
            // BECN/FECN sit in the masked BTH byte too.
            ip[20 + 8 + 4] ^= 0xc0;
            assert!(verify(&ip).unwrap(), "{what} FECN/BECN flipped");
            // The DestQP is not masked: a CNP to another QP is another ICRC.
            ip[20 + 8 + 7] ^= 1;
            assert!(!verify(&ip).unwrap(), "{what} DestQP changed");
        }
    }

    #[test]
    fn ipv6_masks_first_word_and_hop_limit() {
        let mut hdr = [0u8; 40];
        hdr[0] = 0x60;
        hdr[4..6].copy_from_slice(&28u16.to_be_bytes());
        hdr[6] = 17;
        hdr[7] = 64;
        let udp = [0xc0, 0, 0x12, 0xb7, 0, 28, 0, 0];
        let transport = [4u8, 0, 0xff, 0xff, 0, 0, 0, 1, 0x80, 0, 0, 1, 1, 2, 3, 4];
        let a = compute_parts(&hdr, &udp, &transport).unwrap();
        hdr[1] = 0x3a; // traffic class / flow label
        hdr[3] = 0x77;
        hdr[7] = 1; // hop limit
        assert_eq!(compute_parts(&hdr, &udp, &transport).unwrap(), a);
        hdr[8] = 1; // source address
        assert_ne!(compute_parts(&hdr, &udp, &transport).unwrap(), a);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert_eq!(compute(&[]), Err(Error::Truncated));
        assert_eq!(compute(&[0x45; 10]), Err(Error::Truncated));
        assert_eq!(compute(&[0x41; 80]), Err(Error::Malformed));
        assert_eq!(compute(&[0x15; 80]), Err(Error::Malformed));
    }
}
