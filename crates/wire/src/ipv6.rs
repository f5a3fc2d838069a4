//! IPv6 fixed header (40 bytes). Extension headers are not handled: RoCEv2
//! packets put UDP right after the fixed header.

use core::fmt;
use std::net::Ipv6Addr;

use crate::view::view;
use crate::{Error, Result};

mod field {
    use crate::field::{Field, Rest};
    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
    pub const PAYLOAD: Rest = 40..;
}

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

view!(an "IPv6 packet");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Ensure that no accessor method will panic if called.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer is shorter than the fixed header plus the
    /// payload length.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < HEADER_LEN + usize::from(self.payload_len()) {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    fn first_word(&self) -> u32 {
        let d = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([d[0], d[1], d[2], d[3]])
    }

    /// IP version (6 for a valid packet).
    pub fn version(&self) -> u8 {
        (self.first_word() >> 28) as u8
    }

    /// Traffic class.
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000f_ffff
    }

    /// Payload length.
    pub fn payload_len(&self) -> u16 {
        let d = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([d[0], d[1]])
    }

    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        Ipv6Addr::from(a)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        Ipv6Addr::from(a)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the fixed header, up to the payload length.
    pub fn payload(&self) -> &'a [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &self.buffer.as_ref()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_first_word(&mut self, value: u32) {
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the version (low 4 bits).
    pub fn set_version(&mut self, value: u8) {
        let w = (self.first_word() & 0x0fff_ffff) | (u32::from(value & 0xf) << 28);
        self.set_first_word(w)
    }

    /// Set the traffic class.
    pub fn set_traffic_class(&mut self, value: u8) {
        let w = (self.first_word() & 0xf00f_ffff) | (u32::from(value) << 20);
        self.set_first_word(w)
    }

    /// Set the flow label (low 20 bits).
    pub fn set_flow_label(&mut self, value: u32) {
        let w = (self.first_word() & 0xfff0_0000) | (value & 0x000f_ffff);
        self.set_first_word(w)
    }

    /// Set the payload length.
    pub fn set_payload_len(&mut self, value: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the next header.
    pub fn set_next_header(&mut self, value: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = value
    }

    /// Set the hop limit.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value
    }

    /// Set the source address.
    pub fn set_src_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets())
    }

    /// Set the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets())
    }
}

/// A high-level representation of an IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header (17 for UDP).
    pub next_header: u8,
    /// Payload length.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Repr {
    /// Parse an IPv6 fixed header.
    ///
    /// # Errors
    /// [`Error::Truncated`] from `check_len`; [`Error::Malformed`] if the version
    /// is not 6.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// The length of the header this Repr emits (40).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the fixed header into a buffer of at least [`Repr::buffer_len`] bytes.
    /// The payload length field saturates at 65535.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_first_word(
            (6 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0x000f_ffff),
        );
        packet.set_payload_len(u16::try_from(self.payload_len).unwrap_or(u16::MAX));
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "IP6 {} > {}: next {} len {} hlim {} tc 0x{:02x} flow 0x{:05x}",
            self.src_addr,
            self.dst_addr,
            self.next_header,
            self.payload_len,
            self.hop_limit,
            self.traffic_class,
            self.flow_label
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The fixtures have no IPv6 RoCE capture. This header is what rxe sends for a
    // 16-byte RC SEND_ONLY from fec0::1 to fec0::2 (UDP length 8+12+16+4 = 40),
    // flow label 0x12345, hop limit 64.
    static HEADER_CONSTRUCTED_FEC0: [u8; 40] = [
        0x60, 0x01, 0x23, 0x45, 0x00, 0x28, 0x11, 0x40, 0xfe, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0x01, 0xfe, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02,
    ];

    fn repr() -> Repr {
        Repr {
            src_addr: "fec0::1".parse().unwrap(),
            dst_addr: "fec0::2".parse().unwrap(),
            next_header: 17,
            payload_len: 40,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0x12345,
        }
    }

    fn padded() -> Vec<u8> {
        let mut v = HEADER_CONSTRUCTED_FEC0.to_vec();
        v.resize(80, 0);
        v
    }

    #[test]
    fn deconstruct_constructed_fec0() {
        let bytes = padded();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 40);
        assert_eq!(p.next_header(), 17);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), "fec0::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "fec0::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.payload().len(), 40);
    }

    #[test]
    fn construct_constructed_fec0() {
        let mut bytes = [0xa5u8; 40];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_version(6);
        p.set_traffic_class(0);
        p.set_flow_label(0x12345);
        p.set_payload_len(40);
        p.set_next_header(17);
        p.set_hop_limit(64);
        p.set_src_addr("fec0::1".parse().unwrap());
        p.set_dst_addr("fec0::2".parse().unwrap());
        assert_eq!(bytes, HEADER_CONSTRUCTED_FEC0);
    }

    #[test]
    fn parse_constructed_fec0() {
        let bytes = padded();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_constructed_fec0() {
        let mut bytes = [0xa5u8; 40];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, HEADER_CONSTRUCTED_FEC0);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&HEADER_CONSTRUCTED_FEC0[..]).unwrap_err(),
            Error::Truncated
        );
    }
}
