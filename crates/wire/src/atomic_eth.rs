//! Atomic Extended Transport Header (28 bytes): VA, R_Key, Swap-or-Add, Compare.
//! Carried by COMPARE_SWAP and FETCH_ADD.

use core::fmt;

use crate::view::view;
use crate::Result;

mod field {
    use crate::field::{Field, Rest};
    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const SWAP_ADD: Field = 12..20;
    pub const COMPARE: Field = 20..28;
    pub const PAYLOAD: Rest = 28..;
}

/// Length of the AtomicETH.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

view!(an "AtomicETH", HEADER_LEN, "28 bytes");

impl<T: AsRef<[u8]>> Packet<T> {
    fn u64_at(&self, f: core::ops::Range<usize>) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buffer.as_ref()[f]);
        u64::from_be_bytes(b)
    }

    /// Remote virtual address (must be 8-byte aligned).
    pub fn va(&self) -> u64 {
        self.u64_at(field::VA)
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.buffer.as_ref()[field::RKEY]);
        u32::from_be_bytes(b)
    }

    /// Swap value (CMP & SWAP) or add value (FETCH & ADD).
    pub fn swap_add(&self) -> u64 {
        self.u64_at(field::SWAP_ADD)
    }

    /// Compare value (CMP & SWAP only).
    pub fn compare(&self) -> u64 {
        self.u64_at(field::COMPARE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the virtual address.
    pub fn set_va(&mut self, value: u64) {
        self.buffer.as_mut()[field::VA].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the remote key.
    pub fn set_rkey(&mut self, value: u32) {
        self.buffer.as_mut()[field::RKEY].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the swap/add value.
    pub fn set_swap_add(&mut self, value: u64) {
        self.buffer.as_mut()[field::SWAP_ADD].copy_from_slice(&value.to_be_bytes())
    }

    /// Set the compare value.
    pub fn set_compare(&mut self, value: u64) {
        self.buffer.as_mut()[field::COMPARE].copy_from_slice(&value.to_be_bytes())
    }
}

/// A high-level representation of an AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (CMP & SWAP) or add (FETCH & ADD) value.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

impl Repr {
    /// Parse an AtomicETH.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] if shorter than 28 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            va: packet.va(),
            rkey: packet.rkey(),
            swap_add: packet.swap_add(),
            compare: packet.compare(),
        })
    }

    /// The length of the header this Repr emits (28).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the AtomicETH into a buffer of at least 28 bytes.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_swap_add(self.swap_add);
        packet.set_compare(self.compare);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "AtomicETH va 0x{:x} rkey 0x{:x} swap_add 0x{:x} compare 0x{:x}",
            self.va, self.rkey, self.swap_add, self.compare
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    // No atomic capture in the fixtures: a COMPARE_SWAP AtomicETH laid out by hand
    // from roce-wire.md (VA 0x55768b600008, rkey 0x4d6, swap 2, compare 1).
    static ATOMIC_ETH_CONSTRUCTED: [u8; 28] = [
        0x00, 0x00, 0x55, 0x76, 0x8b, 0x60, 0x00, 0x08, 0x00, 0x00, 0x04, 0xd6, 0, 0, 0, 0, 0, 0,
        0, 2, 0, 0, 0, 0, 0, 0, 0, 1,
    ];

    fn repr() -> Repr {
        Repr {
            va: 0x5576_8b60_0008,
            rkey: 0x4d6,
            swap_add: 2,
            compare: 1,
        }
    }

    #[test]
    fn deconstruct_constructed() {
        let p = Packet::new_checked(&ATOMIC_ETH_CONSTRUCTED[..]).unwrap();
        assert_eq!(p.va(), 0x5576_8b60_0008);
        assert_eq!(p.rkey(), 0x4d6);
        assert_eq!(p.swap_add(), 2);
        assert_eq!(p.compare(), 1);
    }

    #[test]
    fn construct_constructed() {
        let mut bytes = [0xa5u8; 28];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_va(0x5576_8b60_0008);
        p.set_rkey(0x4d6);
        p.set_swap_add(2);
        p.set_compare(1);
        assert_eq!(bytes, ATOMIC_ETH_CONSTRUCTED);
    }

    #[test]
    fn parse_constructed() {
        let p = Packet::new_checked(&ATOMIC_ETH_CONSTRUCTED[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_constructed() {
        let mut bytes = [0xa5u8; 28];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, ATOMIC_ETH_CONSTRUCTED);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&ATOMIC_ETH_CONSTRUCTED[..27]).unwrap_err(),
            Error::Truncated
        );
    }
}
