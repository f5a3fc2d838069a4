//! Atomic Acknowledge extended transport header (8 bytes): the original remote value, carried by ATOMIC_ACKNOWLEDGE.

use core::fmt;

use crate::{Error, Result};

mod field {
    use crate::field::{Field, Rest};
    pub const VALUE: Field = 0..8;
    pub const PAYLOAD: Rest = 8..;
}

/// Length of the header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A read/write wrapper around a AtomicAckETH buffer.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Imbue a raw octet buffer with AtomicAckETH structure.
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
    /// [`Error::Truncated`] if the buffer is shorter than 8 bytes.
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

    /// Original remote value (before the atomic operation).
    pub fn orig_value(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buffer.as_ref()[field::VALUE]);
        u64::from_be_bytes(b)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the value: Original remote value (before the atomic operation).
    pub fn set_orig_value(&mut self, value: u64) {
        self.buffer.as_mut()[field::VALUE].copy_from_slice(&value.to_be_bytes())
    }
}

/// A high-level representation of a AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Original remote value (before the atomic operation).
    pub orig_value: u64,
}

impl Repr {
    /// Parse a AtomicAckETH.
    ///
    /// # Errors
    /// [`Error::Truncated`] if shorter than 8 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            orig_value: packet.orig_value(),
        })
    }

    /// The length of the header this Repr emits (8).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the AtomicAckETH into a buffer of at least 8 bytes.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_orig_value(self.orig_value);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "AtomicAckETH orig_value 0x{:x}", self.orig_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // No atomic capture in the fixtures: bytes laid out by hand (original value 0x0102030405060708).
    static HEADER_CONSTRUCTED: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

    fn repr() -> Repr {
        Repr {
            orig_value: 0x0102_0304_0506_0708,
        }
    }

    #[test]
    fn deconstruct_constructed() {
        let p = Packet::new_checked(&HEADER_CONSTRUCTED[..]).unwrap();
        assert_eq!(p.orig_value(), 0x0102_0304_0506_0708);
    }

    #[test]
    fn construct_constructed() {
        let mut bytes = [0xa5u8; 8];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_orig_value(0x0102_0304_0506_0708);
        assert_eq!(bytes, HEADER_CONSTRUCTED);
    }

    #[test]
    fn parse_constructed() {
        let p = Packet::new_checked(&HEADER_CONSTRUCTED[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_constructed() {
        let mut bytes = [0xa5u8; 8];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, HEADER_CONSTRUCTED);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&HEADER_CONSTRUCTED[..8 - 1]).unwrap_err(),
            Error::Truncated
        );
    }
}
