//! Immediate Data extended transport header (4 bytes), carried by the ..._WITH_IMMEDIATE opcodes. The value is opaque: it is delivered to the receiver's completion as-is (big-endian on the wire, `imm_data` in verbs is in network order).

use core::fmt;

use crate::{Error, Result};

mod field {
    use crate::field::{Field, Rest};
    pub const VALUE: Field = 0..4;
    pub const PAYLOAD: Rest = 4..;
}

/// Length of the header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A read/write wrapper around a ImmDt buffer.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Imbue a raw octet buffer with ImmDt structure.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// [`Packet::new_unchecked`] followed by [`Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ensure that no accessor method will panic if called.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer is shorter than 4 bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Consume the packet, returning the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Immediate data.
    pub fn imm(&self) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.buffer.as_ref()[field::VALUE]);
        u32::from_be_bytes(b)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the value: Immediate data.
    pub fn set_imm(&mut self, value: u32) {
        self.buffer.as_mut()[field::VALUE].copy_from_slice(&value.to_be_bytes())
    }
}

/// A high-level representation of a ImmDt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Immediate data.
    pub imm: u32,
}

impl Repr {
    /// Parse a ImmDt.
    ///
    /// # Errors
    /// [`Error::Truncated`] if shorter than 4 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { imm: packet.imm() })
    }

    /// The length of the header this Repr emits (4).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the ImmDt into a buffer of at least 4 bytes.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_imm(self.imm);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "ImmDt imm 0x{:x}", self.imm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // No immediate-data capture in the fixtures: bytes laid out by hand (imm 0x12345678).
    static HEADER_CONSTRUCTED: [u8; 4] = [0x12, 0x34, 0x56, 0x78];

    fn repr() -> Repr {
        Repr { imm: 0x1234_5678 }
    }

    #[test]
    fn deconstruct_constructed() {
        let p = Packet::new_checked(&HEADER_CONSTRUCTED[..]).unwrap();
        assert_eq!(p.imm(), 0x1234_5678);
    }

    #[test]
    fn construct_constructed() {
        let mut bytes = [0xa5u8; 4];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_imm(0x1234_5678);
        assert_eq!(bytes, HEADER_CONSTRUCTED);
    }

    #[test]
    fn parse_constructed() {
        let p = Packet::new_checked(&HEADER_CONSTRUCTED[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_constructed() {
        let mut bytes = [0xa5u8; 4];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, HEADER_CONSTRUCTED);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&HEADER_CONSTRUCTED[..4 - 1]).unwrap_err(),
            Error::Truncated
        );
    }
}
