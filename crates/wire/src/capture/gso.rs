//! UDP GSO datagrams in a capture. A sender that batches (the soft NIC's
//! `sendmsg` with UDP_SEGMENT) hands the kernel one UDP datagram holding a
//! run of equal-size RoCE packets (the last may be shorter); a capture taken
//! before segmentation — on `lo`, or on the sender's side of a NIC that
//! segments — records that one datagram. The segment size is not in the
//! capture, so it is found the way a reader would check it: the size at
//! which every segment's ICRC is valid. Sizes a full-MTU packet has are tried
//! first, then every size a RoCE packet can have (multiples of 4 up to a
//! 4096-byte MTU plus headers).

use crate::frame;
use crate::{ipv4, udp, ROCEV2_UDP_PORT};

/// The largest RoCE packet a segment can be: 4096 bytes of payload, the
/// longest header chain, ICRC.
const MAX_SEGMENT: usize = 4096 + 64;
/// BTH and ICRC: the smallest RoCE packet.
const MIN_SEGMENT: usize = 16;

/// The segments of `ip` (an IPv4 datagram to UDP 4791 whose ICRC, taken as
/// one packet, is invalid) as IPv4 datagrams of their own, and the segment
/// size; None when no size makes every segment's ICRC valid. `hint` is
/// tried first (the previous datagram's size).
pub(crate) fn split(ip: &[u8], hint: Option<usize>) -> Option<(usize, Vec<Vec<u8>>)> {
    if ip.first()? >> 4 != 4 {
        return None;
    }
    let p = ipv4::Packet::new_checked(ip).ok()?;
    let (hl, total) = (usize::from(p.header_len()), usize::from(p.total_len()));
    if p.next_header() != ipv4::PROTOCOL_UDP || p.frag_offset() != 0 || ip.len() < total {
        return None;
    }
    let u = udp::Packet::new_checked(ip.get(hl..total)?).ok()?;
    if u.dst_port() != ROCEV2_UDP_PORT {
        return None;
    }
    let transport = ip.get(hl + udp::HEADER_LEN..total)?;
    let len = transport.len();
    if len <= MIN_SEGMENT || len % 4 != 0 || frame::icrc_valid_ip(&ip[..total]) != Ok(false) {
        return None;
    }
    let mut sizes: Vec<usize> = hint.into_iter().collect();
    for mtu in [4096, 2048, 1024, 512, 256] {
        for hdr in [12, 16, 20, 24, 28, 32, 40, 44] {
            sizes.push(hdr + mtu + 4);
        }
    }
    sizes.extend((MIN_SEGMENT..=MAX_SEGMENT).step_by(4));
    let mut tried = std::collections::HashSet::new();
    for s in sizes {
        if s >= len || !tried.insert(s) {
            continue;
        }
        let last = len - s * ((len - 1) / s);
        if last < MIN_SEGMENT || last % 4 != 0 {
            continue;
        }
        let segment = |i: usize| -> Vec<u8> {
            let body = &transport[i * s..((i + 1) * s).min(len)];
            let mut d = Vec::with_capacity(hl + udp::HEADER_LEN + body.len());
            d.extend_from_slice(&ip[..hl + udp::HEADER_LEN]);
            d.extend_from_slice(body);
            let ip_len = u16::try_from(d.len()).unwrap_or(u16::MAX);
            let mut h = ipv4::Packet::new_unchecked(&mut d[..]);
            h.set_total_len(ip_len);
            h.fill_checksum();
            let mut uh = udp::Packet::new_unchecked(&mut d[hl..]);
            uh.set_len(ip_len - u16::try_from(hl).unwrap_or(0));
            uh.set_checksum(0);
            d
        };
        let first = segment(0);
        if frame::icrc_valid_ip(&first) != Ok(true) {
            continue;
        }
        let mut out = vec![first];
        let count = len.div_ceil(s);
        for i in 1..count {
            let d = segment(i);
            if frame::icrc_valid_ip(&d) != Ok(true) {
                break;
            }
            out.push(d);
        }
        if out.len() == count {
            return Some((s, out));
        }
    }
    None
}
