//! RDMA Extended Transport Header (16 bytes): virtual address, R_Key, DMA length.
//! Carried by RDMA WRITE FIRST/ONLY and RDMA READ requests.

use core::fmt;

use crate::view::{layout, U32, U64};

/// Length of the RETH.
pub const HEADER_LEN: usize = 16;

layout! {
    a "RETH", HEADER_LEN, "16 bytes";
    fields {
        /// Remote virtual address.
        va / set_va: u64 = U64<0>;
        /// Remote key.
        rkey / set_rkey: u32 = U32<8>;
        /// DMA length (of the whole message).
        dma_len / set_dma_len: u32 = U32<12>;
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "RETH va 0x{:x} rkey 0x{:x} len {}",
            self.va, self.rkey, self.dma_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    // RETH of frame 1 of write_bw-s8192.pcap (RC RDMA_WRITE_FIRST of 8192 bytes).
    static RETH_WRITE_BW_S8192: [u8; 16] = [
        0x00, 0x00, 0x55, 0x76, 0x8b, 0x60, 0x00, 0x00, 0x00, 0x00, 0x04, 0xd6, 0x00, 0x00, 0x20,
        0x00,
    ];

    fn repr() -> Repr {
        Repr {
            va: 0x0000_5576_8b60_0000,
            rkey: 0x4d6,
            dma_len: 8192,
        }
    }

    #[test]
    fn deconstruct_write_bw_s8192() {
        let p = Packet::new_checked(&RETH_WRITE_BW_S8192[..]).unwrap();
        assert_eq!(p.va(), 0x0000_5576_8b60_0000);
        assert_eq!(p.rkey(), 0x4d6);
        assert_eq!(p.dma_len(), 8192);
    }

    #[test]
    fn construct_write_bw_s8192() {
        let mut bytes = [0xa5u8; 16];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_va(0x0000_5576_8b60_0000);
        p.set_rkey(0x4d6);
        p.set_dma_len(8192);
        assert_eq!(bytes, RETH_WRITE_BW_S8192);
    }

    #[test]
    fn parse_write_bw_s8192() {
        let p = Packet::new_checked(&RETH_WRITE_BW_S8192[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_write_bw_s8192() {
        let mut bytes = [0xa5u8; 16];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, RETH_WRITE_BW_S8192);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&RETH_WRITE_BW_S8192[..15]).unwrap_err(),
            Error::Truncated
        );
    }
}
