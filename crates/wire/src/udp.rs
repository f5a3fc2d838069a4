//! UDP header (8 bytes).

use core::fmt;
use std::net::IpAddr;

use crate::checksum;
use crate::view::{get_u16, len_at_least, set_u16, view};
use crate::{Error, Result};

mod field {
    use crate::field::{Field, Rest};
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
    pub const PAYLOAD: Rest = 8..;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

view!(a "UDP datagram");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Ensure that no accessor method will panic if called.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer is shorter than the header or the length
    /// field; [`Error::Malformed`] if the length field is below 8.
    pub fn check_len(&self) -> Result<()> {
        let buffer_len = len_at_least(self.buffer.as_ref(), HEADER_LEN)?;
        let field_len = usize::from(self.len());
        if field_len < HEADER_LEN {
            Err(Error::Malformed)
        } else if field_len > buffer_len {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    fn u16_at(&self, f: core::ops::Range<usize>) -> u16 {
        get_u16(self.buffer.as_ref(), f.start)
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// Length field (header + payload).
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// Whether the length field is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checksum field (0 = none, allowed over IPv4).
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Whether the checksum is correct for the given pseudo-header addresses.
    /// A zero checksum over IPv4 means "not computed" and verifies.
    ///
    /// # Panics
    /// If `check_len` has not passed.
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        if self.checksum() == 0 && src.is_ipv4() {
            return true;
        }
        let data = &self.buffer.as_ref()[..usize::from(self.len())];
        let sum = checksum::combine(&[
            checksum::pseudo_header(src, dst, 17, u32::from(self.len())),
            checksum::sum(data),
        ]);
        sum == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the header, up to the length field.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16_at(&mut self, f: core::ops::Range<usize>, value: u16) {
        set_u16(self.buffer.as_mut(), f.start, value)
    }

    /// Set the source port.
    pub fn set_src_port(&mut self, value: u16) {
        self.set_u16_at(field::SRC_PORT, value)
    }

    /// Set the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        self.set_u16_at(field::DST_PORT, value)
    }

    /// Set the length field.
    pub fn set_len(&mut self, value: u16) {
        self.set_u16_at(field::LENGTH, value)
    }

    /// Set the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_u16_at(field::CHECKSUM, value)
    }

    /// Compute and write the checksum over the pseudo header, the header and the
    /// payload (the length field must already be right).
    ///
    /// # Panics
    /// If the buffer is shorter than the length field.
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        self.set_checksum(0);
        let len = self.len();
        let data = &self.buffer.as_ref()[..usize::from(len)];
        let sum = checksum::combine(&[
            checksum::pseudo_header(src, dst, 17, u32::from(len)),
            checksum::sum(data),
        ]);
        // An all-zero result is sent as all ones (RFC 768).
        let value = match !sum {
            0 => 0xffff,
            v => v,
        };
        self.set_checksum(value)
    }

    /// A mutable view of the payload, up to the length field.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// A high-level representation of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source port (RoCEv2: flow entropy in 0xC000..=0xFFFF).
    pub src_port: u16,
    /// Destination port (RoCEv2: 4791).
    pub dst_port: u16,
    /// Length of the payload.
    pub payload_len: usize,
}

impl Repr {
    /// Parse a UDP header. The checksum is not verified here (it needs the IP
    /// addresses; see [`Packet::verify_checksum`]).
    ///
    /// # Errors
    /// From `check_len`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// The length of the header this Repr emits (8).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the header with a zero checksum (call [`Packet::fill_checksum`] after
    /// the payload is in place to compute one). The length field saturates at 65535.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(u16::try_from(HEADER_LEN + self.payload_len).unwrap_or(u16::MAX));
        packet.set_checksum(0);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "UDP {} > {} len {}",
            self.src_port, self.dst_port, self.payload_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // UDP header of frame 1 of rc_pingpong-s64.pcap (checksum 0: rxe over IPv4).
    static HEADER_RC_PINGPONG_S64: [u8; 8] = [0xc1, 0x21, 0x12, 0xb7, 0x00, 0x58, 0x00, 0x00];

    fn repr() -> Repr {
        Repr {
            src_port: 0xc121,
            dst_port: 4791,
            payload_len: 0x58 - 8,
        }
    }

    fn padded() -> Vec<u8> {
        let mut v = HEADER_RC_PINGPONG_S64.to_vec();
        v.resize(0x58, 0x7b);
        v
    }

    #[test]
    fn deconstruct_rc_pingpong_s64() {
        let bytes = padded();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.src_port(), 0xc121);
        assert_eq!(p.dst_port(), 4791);
        assert_eq!(p.len(), 0x58);
        assert_eq!(p.checksum(), 0);
        assert_eq!(p.payload().len(), 0x58 - 8);
    }

    #[test]
    fn construct_rc_pingpong_s64() {
        let mut bytes = [0xa5u8; 8];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_src_port(0xc121);
        p.set_dst_port(4791);
        p.set_len(0x58);
        p.set_checksum(0);
        assert_eq!(bytes, HEADER_RC_PINGPONG_S64);
    }

    #[test]
    fn parse_rc_pingpong_s64() {
        let bytes = padded();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_rc_pingpong_s64() {
        let mut bytes = [0xa5u8; 8];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, HEADER_RC_PINGPONG_S64);
    }

    #[test]
    fn checksum_roundtrip() {
        let src: IpAddr = "fec0::1".parse().unwrap();
        let dst: IpAddr = "fec0::2".parse().unwrap();
        let mut bytes = padded();
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.fill_checksum(&src, &dst);
        assert_ne!(p.checksum(), 0);
        assert!(p.verify_checksum(&src, &dst));
        p.set_src_port(1);
        assert!(!p.verify_checksum(&src, &dst));
    }
}
