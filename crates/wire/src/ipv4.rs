//! IPv4 header (20 bytes without options).

use core::fmt;
use std::net::Ipv4Addr;

use crate::checksum;
use crate::view::{get_u16, len_at_least, set_u16, view};
use crate::{Error, Result};

mod field {
    use crate::field::Field;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    pub const FLG_OFF: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// IP protocol number of UDP.
pub const PROTOCOL_UDP: u8 = 17;

view!(an "IPv4 packet");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Ensure that no accessor method will panic if called.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer is shorter than the fixed header, the
    /// header length or the total length; [`Error::Malformed`] if the header
    /// length is below 20 or the total length below the header length.
    pub fn check_len(&self) -> Result<()> {
        let len = len_at_least(self.buffer.as_ref(), HEADER_LEN)?;
        let header_len = usize::from(self.header_len());
        let total_len = usize::from(self.total_len());
        if header_len < HEADER_LEN || total_len < header_len {
            Err(Error::Malformed)
        } else if len < header_len || len < total_len {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    fn u16_at(&self, f: core::ops::Range<usize>) -> u16 {
        get_u16(self.buffer.as_ref(), f.start)
    }

    /// IP version (4 for a valid packet).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes.
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The TOS byte: DSCP (6 bits) and ECN (2 bits).
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    /// Total length (header + payload).
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }

    /// Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x4000 != 0
    }

    /// More Fragments flag.
    pub fn more_frags(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x2000 != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.u16_at(field::FLG_OFF) & 0x1fff) << 3
    }

    /// Time to live.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Header checksum.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let d = &self.buffer.as_ref()[field::SRC_ADDR];
        Ipv4Addr::new(d[0], d[1], d[2], d[3])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let d = &self.buffer.as_ref()[field::DST_ADDR];
        Ipv4Addr::new(d[0], d[1], d[2], d[3])
    }

    /// Whether the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        let hl = usize::from(self.header_len());
        checksum::sum(&self.buffer.as_ref()[..hl]) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the header up to the total length.
    pub fn payload(&self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        &data[usize::from(self.header_len())..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16_at(&mut self, f: core::ops::Range<usize>, value: u16) {
        set_u16(self.buffer.as_mut(), f.start, value)
    }

    /// Set the version (low 4 bits of `value`).
    pub fn set_version(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (value << 4);
    }

    /// Set the header length in bytes (a multiple of 4, at most 60).
    pub fn set_header_len(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((value / 4) & 0x0f);
    }

    /// Set the TOS byte.
    pub fn set_dscp_ecn(&mut self, value: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = value
    }

    /// Set the total length.
    pub fn set_total_len(&mut self, value: u16) {
        self.set_u16_at(field::LENGTH, value)
    }

    /// Set the identification.
    pub fn set_ident(&mut self, value: u16) {
        self.set_u16_at(field::IDENT, value)
    }

    /// Set flags and fragment offset: DF, MF and the offset in bytes (multiple of 8).
    pub fn set_flags_frag(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let v = if dont_frag { 0x4000 } else { 0 }
            | if more_frags { 0x2000 } else { 0 }
            | ((offset >> 3) & 0x1fff);
        self.set_u16_at(field::FLG_OFF, v)
    }

    /// Set the time to live.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value
    }

    /// Set the protocol of the payload.
    pub fn set_next_header(&mut self, value: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = value
    }

    /// Set the header checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_u16_at(field::CHECKSUM, value)
    }

    /// Set the source address.
    pub fn set_src_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets())
    }

    /// Set the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets())
    }

    /// Compute and write the header checksum.
    ///
    /// # Panics
    /// If the buffer is shorter than the header length field says.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = usize::from(self.header_len());
        let sum = !checksum::sum(&self.buffer.as_ref()[..hl]);
        self.set_checksum(sum)
    }

    /// A mutable view of the bytes after the header up to the total length.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

/// A high-level representation of an IPv4 header (no options, not fragmented).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload (17 for UDP).
    pub next_header: u8,
    /// Length of the payload (total length - 20).
    pub payload_len: usize,
    /// Time to live.
    pub hop_limit: u8,
    /// The TOS byte (DSCP << 2 | ECN).
    pub dscp_ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment flag (Linux rxe sets it).
    pub dont_frag: bool,
}

impl Repr {
    /// The header Linux puts on a RoCEv2 datagram: UDP, TTL 64, TOS 0, DF,
    /// identification 0 (set `ident` and `dscp_ecn` with struct update).
    pub fn udp(src_addr: Ipv4Addr, dst_addr: Ipv4Addr, payload_len: usize) -> Repr {
        Repr {
            src_addr,
            dst_addr,
            next_header: PROTOCOL_UDP,
            payload_len,
            hop_limit: 64,
            dscp_ecn: 0,
            ident: 0,
            dont_frag: true,
        }
    }

    /// Parse an IPv4 header. The header checksum is not verified here (a capture
    /// taken on the sender may show offloaded checksums); see
    /// [`Packet::verify_checksum`].
    ///
    /// # Errors
    /// [`Error::Truncated`]/[`Error::Malformed`] from `check_len` or a version
    /// other than 4; [`Error::Unsupported`] for options or fragments.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(Error::Malformed);
        }
        if usize::from(packet.header_len()) != HEADER_LEN
            || packet.more_frags()
            || packet.frag_offset() != 0
        {
            return Err(Error::Unsupported);
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.total_len()) - HEADER_LEN,
            hop_limit: packet.hop_limit(),
            dscp_ecn: packet.dscp_ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
        })
    }

    /// The length of the header this Repr emits (20).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the header, with a correct checksum, into a buffer of at least
    /// [`Repr::buffer_len`] bytes. The total length field is
    /// `20 + payload_len` (saturated at 65535).
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN as u8);
        packet.set_dscp_ecn(self.dscp_ecn);
        let total = u16::try_from(HEADER_LEN + self.payload_len).unwrap_or(u16::MAX);
        packet.set_total_len(total);
        packet.set_ident(self.ident);
        packet.set_flags_frag(self.dont_frag, false, 0);
        packet.set_hop_limit(self.hop_limit);
        packet.set_next_header(self.next_header);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.set_checksum(0);
        let sum = !checksum::sum(&packet.buffer.as_ref()[..HEADER_LEN]);
        packet.set_checksum(sum);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "IP {} > {}: proto {} len {} ttl {} tos 0x{:02x} id {}",
            self.src_addr,
            self.dst_addr,
            self.next_header,
            self.payload_len,
            self.hop_limit,
            self.dscp_ecn,
            self.ident
        )?;
        if self.dont_frag {
            write!(f, " DF")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv4 header of frame 1 of rc_pingpong-s64.pcap (192.168.100.2 -> .1, RC SEND_ONLY).
    static HEADER_RC_PINGPONG_S64: [u8; 20] = [
        0x45, 0x00, 0x00, 0x6c, 0x2f, 0xde, 0x40, 0x00, 0x40, 0x11, 0xc1, 0x4e, 0xc0, 0xa8, 0x64,
        0x02, 0xc0, 0xa8, 0x64, 0x01,
    ];

    fn repr() -> Repr {
        Repr {
            src_addr: Ipv4Addr::new(192, 168, 100, 2),
            dst_addr: Ipv4Addr::new(192, 168, 100, 1),
            next_header: PROTOCOL_UDP,
            payload_len: 0x6c - 20,
            hop_limit: 64,
            dscp_ecn: 0,
            ident: 0x2fde,
            dont_frag: true,
        }
    }

    fn padded() -> Vec<u8> {
        let mut v = HEADER_RC_PINGPONG_S64.to_vec();
        v.resize(0x6c, 0);
        v
    }

    #[test]
    fn deconstruct_rc_pingpong_s64() {
        let bytes = padded();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.dscp_ecn(), 0);
        assert_eq!(p.total_len(), 0x6c);
        assert_eq!(p.ident(), 0x2fde);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.next_header(), PROTOCOL_UDP);
        assert_eq!(p.checksum(), 0xc14e);
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 100, 2));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 100, 1));
        assert_eq!(p.payload().len(), 0x6c - 20);
    }

    #[test]
    fn construct_rc_pingpong_s64() {
        let mut bytes = [0xa5u8; 20];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_version(4);
        p.set_header_len(20);
        p.set_dscp_ecn(0);
        p.set_total_len(0x6c);
        p.set_ident(0x2fde);
        p.set_flags_frag(true, false, 0);
        p.set_hop_limit(64);
        p.set_next_header(PROTOCOL_UDP);
        p.set_src_addr(Ipv4Addr::new(192, 168, 100, 2));
        p.set_dst_addr(Ipv4Addr::new(192, 168, 100, 1));
        p.fill_checksum();
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
        let mut bytes = [0xa5u8; 20];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, HEADER_RC_PINGPONG_S64);
    }

    #[test]
    fn truncated_and_malformed() {
        // Total length says 0x6c but only the header is there.
        assert_eq!(
            Packet::new_checked(&HEADER_RC_PINGPONG_S64[..]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = padded();
        bad[0] = 0x44; // IHL 16 bytes
        assert_eq!(Packet::new_checked(&bad[..]).unwrap_err(), Error::Malformed);
    }
}
