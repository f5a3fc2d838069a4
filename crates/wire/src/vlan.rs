//! IEEE 802.1Q VLAN tag: the 4 bytes after an EtherType of 0x8100 (or 0x88a8):
//! TCI (PCP 3 bits, DEI 1 bit, VID 12 bits) and the inner EtherType.

use core::fmt;

use crate::ethernet::EtherType;
use crate::view::view;
use crate::Result;

mod field {
    use crate::field::{Field, Rest};
    pub const TCI: Field = 0..2;
    pub const ETHERTYPE: Field = 2..4;
    pub const PAYLOAD: Rest = 4..;
}

/// Length of a VLAN tag.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

view!(a "VLAN tag", HEADER_LEN, "4 bytes");

impl<T: AsRef<[u8]>> Packet<T> {
    fn tci(&self) -> u16 {
        let d = &self.buffer.as_ref()[field::TCI];
        u16::from_be_bytes([d[0], d[1]])
    }

    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// EtherType of what follows the tag.
    pub fn ethertype(&self) -> EtherType {
        let d = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType(u16::from_be_bytes([d[0], d[1]]))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the tag.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_tci(&mut self, tci: u16) {
        self.buffer.as_mut()[field::TCI].copy_from_slice(&tci.to_be_bytes())
    }

    /// Set the priority code point (low 3 bits of `value`).
    pub fn set_pcp(&mut self, value: u8) {
        let tci = (self.tci() & 0x1fff) | (u16::from(value & 7) << 13);
        self.set_tci(tci)
    }

    /// Set the drop eligible indicator.
    pub fn set_dei(&mut self, value: bool) {
        let tci = (self.tci() & !0x1000) | if value { 0x1000 } else { 0 };
        self.set_tci(tci)
    }

    /// Set the VLAN identifier (low 12 bits of `value`).
    pub fn set_vid(&mut self, value: u16) {
        let tci = (self.tci() & 0xf000) | (value & 0x0fff);
        self.set_tci(tci)
    }

    /// Set the inner EtherType.
    pub fn set_ethertype(&mut self, value: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&value.0.to_be_bytes())
    }
}

/// A high-level representation of a VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (0..=4095).
    pub vid: u16,
    /// EtherType of what follows.
    pub ethertype: EtherType,
}

impl Repr {
    /// Parse a VLAN tag.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] if the buffer is shorter than 4 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            pcp: packet.pcp(),
            dei: packet.dei(),
            vid: packet.vid(),
            ethertype: packet.ethertype(),
        })
    }

    /// The length of the tag this Repr emits.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the tag into a buffer of at least [`Repr::buffer_len`] bytes.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let tci = (u16::from(self.pcp & 7) << 13)
            | if self.dei { 0x1000 } else { 0 }
            | (self.vid & 0x0fff);
        packet.set_tci(tci);
        packet.set_ethertype(self.ethertype);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "vlan {} p {}", self.vid, self.pcp)?;
        if self.dei {
            write!(f, " dei")?;
        }
        write!(f, ", ethertype {}", self.ethertype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The fixtures have no VLAN-tagged capture: a tag as Linux writes it for
    // `ip link add link eth0 name eth0.100 type vlan id 100 egress-qos-map 0:3`.
    static TAG_VID100_PCP3: [u8; 4] = [0x60, 0x64, 0x08, 0x00];

    fn repr() -> Repr {
        Repr {
            pcp: 3,
            dei: false,
            vid: 100,
            ethertype: EtherType::IPV4,
        }
    }

    #[test]
    fn deconstruct_vid100() {
        let p = Packet::new_checked(&TAG_VID100_PCP3[..]).unwrap();
        assert_eq!(p.pcp(), 3);
        assert!(!p.dei());
        assert_eq!(p.vid(), 100);
        assert_eq!(p.ethertype(), EtherType::IPV4);
    }

    #[test]
    fn construct_vid100() {
        let mut bytes = [0xa5u8; 4];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_pcp(3);
        p.set_dei(false);
        p.set_vid(100);
        p.set_ethertype(EtherType::IPV4);
        assert_eq!(bytes, TAG_VID100_PCP3);
    }

    #[test]
    fn parse_vid100() {
        let p = Packet::new_checked(&TAG_VID100_PCP3[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_vid100() {
        let mut bytes = [0xa5u8; 4];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, TAG_VID100_PCP3);
    }
}
