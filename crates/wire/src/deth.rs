//! Datagram Extended Transport Header (8 bytes): Q_Key, reserved byte, source QP.
//! Carried by every UD packet.

use core::fmt;

use crate::view::view;
use crate::Result;

mod field {
    use crate::field::{Field, Rest};
    pub const QKEY: Field = 0..4;
    pub const RESERVED: usize = 4;
    pub const SRC_QP: Field = 5..8;
    pub const PAYLOAD: Rest = 8..;
}

/// Length of the DETH.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// The well-known Q_Key of the GSI QP (QP1).
pub const GSI_QKEY: u32 = 0x8001_0000;

view!(a "DETH", HEADER_LEN, "8 bytes");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Queue key.
    pub fn qkey(&self) -> u32 {
        let d = &self.buffer.as_ref()[field::QKEY];
        u32::from_be_bytes([d[0], d[1], d[2], d[3]])
    }

    /// The reserved byte (0 on the wire).
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }

    /// Source QP number (24 bits).
    pub fn src_qp(&self) -> u32 {
        let d = &self.buffer.as_ref()[field::SRC_QP];
        u32::from_be_bytes([0, d[0], d[1], d[2]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the queue key.
    pub fn set_qkey(&mut self, value: u32) {
        self.buffer.as_mut()[field::QKEY].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the reserved byte.
    pub fn set_reserved(&mut self, value: u8) {
        self.buffer.as_mut()[field::RESERVED] = value
    }

    /// Set the source QP (low 24 bits).
    pub fn set_src_qp(&mut self, value: u32) {
        self.buffer.as_mut()[field::SRC_QP].copy_from_slice(&value.to_be_bytes()[1..])
    }
}

/// A high-level representation of a DETH (the reserved byte is written as 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Queue key.
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

impl Repr {
    /// Parse a DETH.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] if shorter than 8 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            qkey: packet.qkey(),
            src_qp: packet.src_qp(),
        })
    }

    /// The length of the header this Repr emits (8).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the DETH into a buffer of at least 8 bytes.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_qkey(self.qkey);
        packet.set_reserved(0);
        packet.set_src_qp(self.src_qp);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "DETH qkey 0x{:08x} src_qp 0x{:06x}",
            self.qkey, self.src_qp
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    // No UD capture in the fixtures: a GSI (QP1 -> QP1) DETH laid out by hand from
    // roce-wire.md (Q_Key 0x80010000, source QP 1).
    static DETH_CONSTRUCTED_GSI: [u8; 8] = [0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01];

    fn repr() -> Repr {
        Repr {
            qkey: GSI_QKEY,
            src_qp: 1,
        }
    }

    #[test]
    fn deconstruct_constructed_gsi() {
        let p = Packet::new_checked(&DETH_CONSTRUCTED_GSI[..]).unwrap();
        assert_eq!(p.qkey(), GSI_QKEY);
        assert_eq!(p.reserved(), 0);
        assert_eq!(p.src_qp(), 1);
    }

    #[test]
    fn construct_constructed_gsi() {
        let mut bytes = [0xa5u8; 8];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_qkey(GSI_QKEY);
        p.set_reserved(0);
        p.set_src_qp(1);
        assert_eq!(bytes, DETH_CONSTRUCTED_GSI);
    }

    #[test]
    fn parse_constructed_gsi() {
        let p = Packet::new_checked(&DETH_CONSTRUCTED_GSI[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_constructed_gsi() {
        let mut bytes = [0xa5u8; 8];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, DETH_CONSTRUCTED_GSI);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&DETH_CONSTRUCTED_GSI[..7]).unwrap_err(),
            Error::Truncated
        );
    }
}
