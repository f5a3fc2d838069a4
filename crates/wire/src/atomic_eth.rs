//! Atomic Extended Transport Header (28 bytes): VA, R_Key, Swap-or-Add, Compare.
//! Carried by COMPARE_SWAP and FETCH_ADD.

use core::fmt;

use crate::view::{layout, U32, U64};

/// Length of the AtomicETH.
pub const HEADER_LEN: usize = 28;

layout! {
    an "AtomicETH", HEADER_LEN, "28 bytes";
    fields {
        /// Remote virtual address (must be 8-byte aligned).
        va / set_va: u64 = U64<0>;
        /// Remote key.
        rkey / set_rkey: u32 = U32<8>;
        /// Swap value (CMP & SWAP) or add value (FETCH & ADD).
        swap_add / set_swap_add: u64 = U64<12>;
        /// Compare value (CMP & SWAP only).
        compare / set_compare: u64 = U64<20>;
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
