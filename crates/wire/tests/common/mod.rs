//! What the capture tests share: frames between the fixtures' two hosts and
//! classic pcap files written around frames.

#![allow(dead_code)]

use rdmakit_wire::ethernet::{self, EtherType};
use rdmakit_wire::frame::{self, IpRepr, UdpChecksum};
use rdmakit_wire::{roce, udp};

/// The Ethernet header of the rxe fixtures' frames, 52:54:00:00:00:01 to
/// 52:54:00:00:00:02, carrying `ethertype`.
pub fn ethernet(ethertype: EtherType) -> ethernet::Repr {
    ethernet::Repr {
        src_addr: ethernet::Address([0x52, 0x54, 0, 0, 0, 1]),
        dst_addr: ethernet::Address([0x52, 0x54, 0, 0, 0, 2]),
        ethertype,
    }
}

/// The bytes of `roce` over `ip` from UDP port `src_port` to 4791, in an
/// Ethernet frame between the fixtures' hosts, with `udp_checksum`.
pub fn frame(
    ip: IpRepr,
    src_port: u16,
    udp_checksum: UdpChecksum,
    roce: roce::Repr<'_>,
) -> Vec<u8> {
    let repr = frame::Repr {
        ethernet: ethernet(ip.ethertype()),
        vlan: None,
        ip,
        udp: udp::Repr {
            src_port,
            dst_port: 4791,
            payload_len: 0,
        },
        udp_checksum,
        roce,
        trailer: &[],
    };
    let mut out = vec![0; repr.buffer_len()];
    repr.emit(&mut out).unwrap();
    out
}

/// A classic pcap file of `frames` ((timestamp ns, bytes)) with link type
/// `link_type`, in either byte order, with micro- or nanosecond
/// timestamps.
pub fn pcap(link_type: u32, big_endian: bool, nanos: bool, frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let w32 = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w16 = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut out = Vec::new();
    out.extend_from_slice(&w32(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    out.extend_from_slice(&w16(2));
    out.extend_from_slice(&w16(4));
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&w32(65535));
    out.extend_from_slice(&w32(link_type));
    for (ts, data) in frames {
        let frac = if nanos {
            ts % 1_000_000_000
        } else {
            ts % 1_000_000_000 / 1000
        };
        out.extend_from_slice(&w32((ts / 1_000_000_000) as u32));
        out.extend_from_slice(&w32(frac as u32));
        out.extend_from_slice(&w32(data.len() as u32));
        out.extend_from_slice(&w32(data.len() as u32));
        out.extend_from_slice(data);
    }
    out
}
