//! Ethernet II header (14 bytes, no FCS).

use core::fmt;

use crate::{Error, Result};

mod field {
    use crate::field::{Field, Rest};
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    pub const PAYLOAD: Rest = 14..;
}

/// Length of the Ethernet header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A 48-bit MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Address(pub [u8; 6]);

impl Address {
    /// Make an address from the first 6 bytes of `data`.
    ///
    /// # Panics
    /// If `data` is shorter than 6 bytes.
    pub fn from_bytes(data: &[u8]) -> Address {
        let mut bytes = [0u8; 6];
        bytes.copy_from_slice(&data[..6]);
        Address(bytes)
    }

    /// The raw octets.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// An EtherType value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP.
    pub const ARP: EtherType = EtherType(0x0806);
    /// 802.1Q VLAN tag.
    pub const VLAN: EtherType = EtherType(0x8100);
    /// 802.1ad service VLAN tag (QinQ outer tag).
    pub const QINQ: EtherType = EtherType(0x88a8);
    /// IPv6.
    pub const IPV6: EtherType = EtherType(0x86dd);

    /// Whether this EtherType announces a VLAN tag.
    pub fn is_vlan(self) -> bool {
        self == EtherType::VLAN || self == EtherType::QINQ
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match *self {
            EtherType::IPV4 => write!(f, "IPv4"),
            EtherType::IPV6 => write!(f, "IPv6"),
            EtherType::ARP => write!(f, "ARP"),
            EtherType::VLAN => write!(f, "802.1Q"),
            EtherType::QINQ => write!(f, "802.1ad"),
            EtherType(x) => write!(f, "0x{x:04x}"),
        }
    }
}

/// A read/write wrapper around an Ethernet II frame buffer.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Imbue a raw octet buffer with Ethernet frame structure.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Shorthand for a combination of [new_unchecked] and [check_len].
    ///
    /// [new_unchecked]: #method.new_unchecked
    /// [check_len]: #method.check_len
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Ensure that no accessor method will panic if called.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer is shorter than the header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Consume the frame, returning the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Address {
        Address::from_bytes(&self.buffer.as_ref()[field::DESTINATION])
    }

    /// Source address.
    pub fn src_addr(&self) -> Address {
        Address::from_bytes(&self.buffer.as_ref()[field::SOURCE])
    }

    /// EtherType.
    pub fn ethertype(&self) -> EtherType {
        let d = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType(u16::from_be_bytes([d[0], d[1]]))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Frame<&'a T> {
    /// The bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Set the destination address.
    pub fn set_dst_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(value.as_bytes())
    }

    /// Set the source address.
    pub fn set_src_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(value.as_bytes())
    }

    /// Set the EtherType.
    pub fn set_ethertype(&mut self, value: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&value.0.to_be_bytes())
    }

    /// A mutable view of the bytes after the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// A high-level representation of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source MAC.
    pub src_addr: Address,
    /// Destination MAC.
    pub dst_addr: Address,
    /// EtherType of what follows (a VLAN tag or the network layer).
    pub ethertype: EtherType,
}

impl Repr {
    /// Parse an Ethernet header.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the frame is shorter than the header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// The length of the header this Repr emits.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the header into a frame of at least [`Repr::buffer_len`] bytes.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "{} > {}, ethertype {}",
            self.src_addr, self.dst_addr, self.ethertype
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // First frame of rc_pingpong-s64.pcap (client -> server RC SEND_ONLY), Ethernet part.
    static FRAME_RC_PINGPONG_S64: [u8; 14] = [
        0x52, 0x54, 0x00, 0x00, 0x00, 0x01, 0x52, 0x54, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00,
    ];

    fn repr() -> Repr {
        Repr {
            dst_addr: Address([0x52, 0x54, 0, 0, 0, 1]),
            src_addr: Address([0x52, 0x54, 0, 0, 0, 2]),
            ethertype: EtherType::IPV4,
        }
    }

    #[test]
    fn deconstruct_rc_pingpong_s64() {
        let frame = Frame::new_checked(&FRAME_RC_PINGPONG_S64[..]).unwrap();
        assert_eq!(frame.dst_addr(), Address([0x52, 0x54, 0, 0, 0, 1]));
        assert_eq!(frame.src_addr(), Address([0x52, 0x54, 0, 0, 0, 2]));
        assert_eq!(frame.ethertype(), EtherType::IPV4);
        assert_eq!(frame.payload(), &[] as &[u8]);
    }

    #[test]
    fn construct_rc_pingpong_s64() {
        let mut bytes = [0xa5u8; 14];
        let mut frame = Frame::new_unchecked(&mut bytes[..]);
        frame.set_dst_addr(Address([0x52, 0x54, 0, 0, 0, 1]));
        frame.set_src_addr(Address([0x52, 0x54, 0, 0, 0, 2]));
        frame.set_ethertype(EtherType::IPV4);
        assert_eq!(bytes, FRAME_RC_PINGPONG_S64);
    }

    #[test]
    fn parse_rc_pingpong_s64() {
        let frame = Frame::new_checked(&FRAME_RC_PINGPONG_S64[..]).unwrap();
        assert_eq!(Repr::parse(&frame).unwrap(), repr());
    }

    #[test]
    fn emit_rc_pingpong_s64() {
        let mut bytes = [0xa5u8; 14];
        repr().emit(&mut Frame::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, FRAME_RC_PINGPONG_S64);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Frame::new_checked(&[0u8; 13][..]).unwrap_err(),
            Error::Truncated
        );
    }
}
