//! RDMA Extended Transport Header (16 bytes): virtual address, R_Key, DMA length.
//! Carried by RDMA WRITE FIRST/ONLY and RDMA READ requests.

use core::fmt;

use crate::view::view;
use crate::Result;

mod field {
    use crate::field::{Field, Rest};
    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const DMA_LEN: Field = 12..16;
    pub const PAYLOAD: Rest = 16..;
}

/// Length of the RETH.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

view!(a "RETH", HEADER_LEN, "16 bytes");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Remote virtual address.
    pub fn va(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buffer.as_ref()[field::VA]);
        u64::from_be_bytes(b)
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.buffer.as_ref()[field::RKEY]);
        u32::from_be_bytes(b)
    }

    /// DMA length (of the whole message).
    pub fn dma_len(&self) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.buffer.as_ref()[field::DMA_LEN]);
        u32::from_be_bytes(b)
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

    /// Set the DMA length.
    pub fn set_dma_len(&mut self, value: u32) {
        self.buffer.as_mut()[field::DMA_LEN].copy_from_slice(&value.to_be_bytes())
    }
}

/// A high-level representation of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length of the whole message.
    pub dma_len: u32,
}

impl Repr {
    /// Parse a RETH.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] if shorter than 16 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            va: packet.va(),
            rkey: packet.rkey(),
            dma_len: packet.dma_len(),
        })
    }

    /// The length of the header this Repr emits (16).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Emit the RETH into a buffer of at least 16 bytes.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_dma_len(self.dma_len);
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
