//! Identifiers in binary answers, replaced in place (the length never changes, so
//! a netlink reply, a VPD or a PCI config space still parses the same):
//! - RDMA netlink replies: the node and system image GUIDs, the subnet prefix,
//!   and the source and destination addresses of rdma_cm ids (IPv4, IPv6, AF_IB);
//! - PCI VPD (`.../vpd`): the serial number (`SN`), asset tag (`YA`) and the
//!   vendor and system fields (`Vx`, `Yx`), with the `RV` checksum fixed;
//! - PCI config space (`.../config`): the Device Serial Number capability (an
//!   EUI-64, often the adapter's GUID);
//! - anything else binary: every known MAC and GUID (both byte orders) wherever
//!   its bytes occur (6 and 8 bytes: a coincidence is out of reach).

use std::net::Ipv6Addr;

use super::map::{Maps, WordKind};

/// RDMA netlink attribute numbers (rdma_netlink.h), as in crate::netlink::consts.
mod nldev {
    pub const NODE_GUID: u16 = 6;
    pub const SYS_IMAGE_GUID: u16 = 7;
    pub const SUBNET_PREFIX: u16 = 8;
    pub const RES_CM_ID: u16 = 30;
    pub const RES_CM_ID_ENTRY: u16 = 31;
    pub const RES_SRC_ADDR: u16 = 33;
    pub const RES_DST_ADDR: u16 = 34;
}

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
const AF_IB: u16 = 27;

/// Walks every RDMA netlink message of `buf` (replies as recorded: datagrams
/// concatenated) and calls `f` on each identifier's bytes.
fn walk_netlink(buf: &mut [u8], f: &mut dyn FnMut(Field, &mut [u8])) {
    let mut off = 0;
    while off + 16 <= buf.len() {
        let len = u32::from_ne_bytes([buf[off], buf[off + 1], buf[off + 2], buf[off + 3]]) as usize;
        if len < 16 || off + len > buf.len() {
            return;
        }
        let ty = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
        // RDMA_NL_NLDEV (5) in the client bits; NLMSG_ERROR, NLMSG_DONE carry no attrs.
        if ty >> 10 == 5 {
            walk_attrs(&mut buf[off + 16..off + len], f, 0);
        }
        off += (len + 3) & !3;
    }
}

#[derive(Clone, Copy)]
enum Field {
    /// A u64 in host order.
    Guid,
    SubnetPrefix,
    SockAddr,
}

fn walk_attrs(buf: &mut [u8], f: &mut dyn FnMut(Field, &mut [u8]), depth: u8) {
    let mut off = 0;
    while off + 4 <= buf.len() {
        let len = u16::from_ne_bytes([buf[off], buf[off + 1]]) as usize;
        let ty = u16::from_ne_bytes([buf[off + 2], buf[off + 3]]) & 0x3fff;
        if len < 4 || off + len > buf.len() {
            return;
        }
        let payload = &mut buf[off + 4..off + len];
        match ty {
            nldev::NODE_GUID | nldev::SYS_IMAGE_GUID if depth == 0 && payload.len() == 8 => {
                f(Field::Guid, payload)
            }
            nldev::SUBNET_PREFIX if depth == 0 && payload.len() == 8 => {
                f(Field::SubnetPrefix, payload)
            }
            nldev::RES_CM_ID | nldev::RES_CM_ID_ENTRY if depth < 4 => {
                walk_attrs(payload, f, depth + 1)
            }
            nldev::RES_SRC_ADDR | nldev::RES_DST_ADDR if depth > 0 => f(Field::SockAddr, payload),
            _ => {}
        }
        off += (len + 3) & !3;
    }
}

/// Where the address sits in a sockaddr_storage, and what it is.
fn sockaddr(b: &[u8]) -> Option<(usize, usize)> {
    let family = u16::from_ne_bytes([*b.first()?, *b.get(1)?]);
    match family {
        AF_INET if b.len() >= 8 => Some((4, 4)),
        AF_INET6 if b.len() >= 24 => Some((8, 16)),
        AF_IB if b.len() >= 24 => Some((8, 16)),
        _ => None,
    }
}

/// A site's subnet prefix as the address the maps know it by (`prefix::1`);
/// None for the link-local and the zero prefix, which identify no site.
fn prefix_address(p: u64) -> Option<Ipv6Addr> {
    if p == 0xfe80_0000_0000_0000 || p == 0 {
        return None;
    }
    let mut a = [0u8; 16];
    a[..8].copy_from_slice(&p.to_be_bytes());
    a[15] = 1;
    Some(Ipv6Addr::from(a))
}

pub(crate) fn discover_netlink(buf: &[u8], maps: &mut Maps) {
    let mut copy = buf.to_vec();
    walk_netlink(&mut copy, &mut |field, b| match field {
        Field::Guid => maps.see_guid(u64_ne(b)),
        Field::SubnetPrefix => {
            if let Some(a) = prefix_address(u64_ne(b)) {
                maps.see_v6(a);
            }
        }
        Field::SockAddr => match sockaddr(b) {
            Some((at, 4)) => maps.see_v4([b[at], b[at + 1], b[at + 2], b[at + 3]]),
            Some((at, _)) => maps.see_v6(v6_at(b, at)),
            None => {}
        },
    });
}

pub(crate) fn redact_netlink(buf: &mut [u8], maps: &mut Maps) {
    walk_netlink(buf, &mut |field, b| match field {
        Field::Guid => {
            let p = maps.guid(u64_ne(b));
            b.copy_from_slice(&p.to_ne_bytes());
        }
        Field::SubnetPrefix => {
            if let Some(a) = prefix_address(u64_ne(b)) {
                let m = maps.v6(a).octets();
                let q = u64::from_be_bytes([m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]]);
                b.copy_from_slice(&q.to_ne_bytes());
            }
        }
        Field::SockAddr => match sockaddr(b) {
            Some((at, 4)) => {
                let p = maps.v4([b[at], b[at + 1], b[at + 2], b[at + 3]]);
                b[at..at + 4].copy_from_slice(&p);
            }
            Some((at, _)) => {
                let p = maps.v6(v6_at(b, at));
                b[at..at + 16].copy_from_slice(&p.octets());
            }
            None => {}
        },
    });
}

fn u64_ne(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_ne_bytes(a)
}

fn v6_at(b: &[u8], at: usize) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    Ipv6Addr::from(a)
}

/// The VPD fields that name one adapter: serial, asset tag, vendor and system
/// specific (`V0`..`VZ`, `Y0`..`YZ`; not `RV`, `RW`).
fn vpd_private(kw: [u8; 2]) -> bool {
    kw == *b"SN" || (matches!(kw[0], b'V' | b'Y') && kw[1] != b'V' && kw[1] != b'W')
}

/// One VPD field: its keyword, the offset of its data and its length.
type VpdField = ([u8; 2], usize, usize);

/// Walks a PCI VPD image: each field of VPD-R and VPD-W, and the offset of
/// `RV`'s checksum byte.
fn vpd_fields(b: &[u8]) -> (Vec<VpdField>, Option<usize>) {
    let mut out = Vec::new();
    let mut rv = None;
    let mut off = 0;
    while off < b.len() {
        let tag = b[off];
        if tag & 0x80 == 0 {
            // Small resource: 0x78 is the end tag.
            if tag & 0x78 == 0x78 {
                break;
            }
            off += 1 + (tag & 0x07) as usize;
            continue;
        }
        if off + 3 > b.len() {
            break;
        }
        let len = u16::from_le_bytes([b[off + 1], b[off + 2]]) as usize;
        let body = off + 3;
        let end = (body + len).min(b.len());
        if tag == 0x90 || tag == 0x91 {
            let mut k = body;
            while k + 3 <= end {
                let kw = [b[k], b[k + 1]];
                let flen = b[k + 2] as usize;
                let data = k + 3;
                if data + flen > end {
                    break;
                }
                if kw == *b"RV" && flen > 0 {
                    rv = Some(data);
                }
                out.push((kw, data, flen));
                k = data + flen;
            }
        }
        off = end;
    }
    (out, rv)
}

pub(crate) fn discover_vpd(b: &[u8], maps: &mut Maps) {
    for (kw, at, len) in vpd_fields(b).0 {
        if vpd_private(kw) {
            let v = String::from_utf8_lossy(&b[at..at + len]).trim().to_string();
            maps.see_word(WordKind::Serial, &v);
        }
    }
}

pub(crate) fn redact_vpd(b: &mut [u8], maps: &Maps) {
    let (fields, rv) = vpd_fields(b);
    let words = maps.words();
    for (kw, at, len) in fields {
        if !vpd_private(kw) {
            continue;
        }
        let field = &b[at..at + len];
        let pad = |c: &u8| c.is_ascii_whitespace() || *c == 0;
        let start = field.iter().position(|c| !pad(c)).unwrap_or(len);
        let end = field.iter().rposition(|c| !pad(c)).map_or(start, |e| e + 1);
        let t = String::from_utf8_lossy(&field[start..end]).into_owned();
        // Same size: the placeholder (ASCII) where the value stood, padding kept.
        let rep: Vec<u8> = match words.iter().find(|(w, _)| *w == t) {
            Some((_, p)) if p.len() == end - start => p.as_bytes().to_vec(),
            _ => vec![b'X'; end - start],
        };
        b[at + start..at + end].copy_from_slice(&rep);
    }
    // RV's first byte makes the sum of every byte up to and including it zero.
    if let Some(at) = rv {
        let sum = b[..at].iter().fold(0u8, |s, x| s.wrapping_add(*x));
        b[at] = 0u8.wrapping_sub(sum);
    }
}

/// Offset of the 8-byte serial of the Device Serial Number extended capability
/// (ID 3) in a PCI config space image, when it holds one.
fn dsn_offset(b: &[u8]) -> Option<usize> {
    let mut off = 0x100;
    for _ in 0..64 {
        if off + 12 > b.len() || off < 0x100 {
            return None;
        }
        let hdr = u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]);
        if hdr == 0 || hdr == u32::MAX {
            return None;
        }
        if hdr & 0xffff == 3 {
            return Some(off + 4);
        }
        off = (hdr >> 20) as usize & 0xffc;
        if off == 0 {
            return None;
        }
    }
    None
}

/// The DSN as a u64 (lower dword first, as the capability stores it).
fn dsn(b: &[u8], at: usize) -> u64 {
    let lo = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as u64;
    let hi = u32::from_le_bytes([b[at + 4], b[at + 5], b[at + 6], b[at + 7]]) as u64;
    hi << 32 | lo
}

pub(crate) fn discover_pci_config(b: &[u8], maps: &mut Maps) {
    if let Some(at) = dsn_offset(b) {
        maps.see_guid(dsn(b, at));
    }
}

pub(crate) fn redact_pci_config(b: &mut [u8], maps: &mut Maps) {
    if let Some(at) = dsn_offset(b) {
        let p = maps.guid(dsn(b, at));
        b[at..at + 4].copy_from_slice(&(p as u32).to_le_bytes());
        b[at + 4..at + 8].copy_from_slice(&((p >> 32) as u32).to_le_bytes());
    }
}

/// Every occurrence of each `(original, placeholder)` pair's bytes replaced.
pub(crate) fn replace_bytes(buf: &mut [u8], pairs: &[(Vec<u8>, Vec<u8>)]) {
    for (from, to) in pairs {
        if from.is_empty() || from.len() != to.len() || from == to {
            continue;
        }
        let mut i = 0;
        while i + from.len() <= buf.len() {
            if buf[i..i + from.len()] == from[..] {
                buf[i..i + from.len()].copy_from_slice(to);
                i += from.len();
            } else {
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VPD as a ConnectX's looks: ID string, VPD-R with PN, EC, SN, V2, RV.
    fn vpd() -> Vec<u8> {
        super::super::tests::vpd_of(
            b"CX-6 ",
            &[
                (b"PN", b"MCX653106A-ECAT"),
                (b"EC", b"A7"),
                (b"SN", b"MT2033X12345"),
                (b"V2", b"MCX653106A"),
            ],
        )
    }

    #[test]
    fn vpd_serial_and_vendor_fields_are_replaced_size_and_checksum_kept() {
        let orig = vpd();
        let mut m = Maps::default();
        discover_vpd(&orig, &mut m);
        let mut b = orig.clone();
        redact_vpd(&mut b, &m);
        assert_eq!(b.len(), orig.len());
        let s = String::from_utf8_lossy(&b);
        assert!(
            !s.contains("MT2033X12345") && s.contains("SN0000000001"),
            "{s}"
        );
        assert!(s.contains("MCX653106A-ECAT"), "the part number stays: {s}");
        let (_, rv) = vpd_fields(&b);
        let sum = b[..=rv.unwrap()]
            .iter()
            .fold(0u8, |s, x| s.wrapping_add(*x));
        assert_eq!(sum, 0, "RV checksum");
    }

    #[test]
    fn dsn_capability_maps_like_a_guid() {
        let mut cfg = vec![0u8; 0x200];
        // AER (ID 1) at 0x100 → DSN (ID 3) at 0x140.
        cfg[0x100..0x104].copy_from_slice(&(1u32 | (1 << 16) | (0x140 << 20)).to_le_bytes());
        cfg[0x140..0x144].copy_from_slice(&(3u32 | (1 << 16)).to_le_bytes());
        let guid: u64 = 0x0002_c903_00a1_b2c3;
        cfg[0x144..0x148].copy_from_slice(&(guid as u32).to_le_bytes());
        cfg[0x148..0x14c].copy_from_slice(&((guid >> 32) as u32).to_le_bytes());
        let mut m = Maps::default();
        discover_pci_config(&cfg, &mut m);
        redact_pci_config(&mut cfg, &mut m);
        assert_eq!(dsn(&cfg, 0x144), m.guid(guid));
        assert_ne!(dsn(&cfg, 0x144), guid);
    }

    #[test]
    fn cm_id_addresses_in_a_netlink_reply() {
        // One RES_CM_ID_GET reply: DEV_INDEX, then RES_CM_ID { ENTRY { SRC, DST } }.
        let mut sin = vec![0u8; 128];
        sin[..2].copy_from_slice(&AF_INET.to_ne_bytes());
        sin[4..8].copy_from_slice(&[10, 0, 2, 15]);
        let attr = |ty: u16, p: &[u8]| {
            let mut a = ((4 + p.len()) as u16).to_ne_bytes().to_vec();
            a.extend_from_slice(&ty.to_ne_bytes());
            a.extend_from_slice(p);
            while !a.len().is_multiple_of(4) {
                a.push(0);
            }
            a
        };
        let entry = [attr(33, &sin), attr(34, &sin)].concat();
        let body = [
            attr(1, &1u32.to_ne_bytes()),
            attr(30, &attr(31, &entry)),
            attr(6, &0x5054_00ff_fe12_3456u64.to_ne_bytes()),
        ]
        .concat();
        let mut msg = ((16 + body.len()) as u32).to_ne_bytes().to_vec();
        msg.extend_from_slice(&((5u16 << 10) | 11).to_ne_bytes());
        msg.extend_from_slice(&[0; 10]);
        msg.extend_from_slice(&body);
        let mut m = Maps::default();
        discover_netlink(&msg, &mut m);
        let mut out = msg.clone();
        redact_netlink(&mut out, &mut m);
        assert_eq!(out.len(), msg.len());
        assert!(!out.windows(4).any(|w| w == [10, 0, 2, 15]));
        assert_eq!(out.windows(4).filter(|w| *w == [198, 18, 0, 15]).count(), 2);
        let g = 0x5054_00ff_fe12_3456u64.to_ne_bytes();
        assert!(!out.windows(8).any(|w| w == g));
    }
}
