//! SIDR_REQ, service ID resolution request (IBTA Vol 1 §12.11.1, table 119):
//! how a UD client asks for the QPN and Q_Key behind a service ID
//! (rdma_cm's `RDMA_PS_UDP` "connect").
//!
//! ```text
//! bytes 0-3    Request ID
//! bytes 4-5    Partition Key, bytes 6-7 reserved
//! bytes 8-15   ServiceID
//! bytes 16-231 Private Data (216 bytes)
//! ```

use core::fmt;

use super::{cm_view, get_u16, get_u32, get_u64, set_u16, set_u32, set_u64};

mod field {
    pub const REQUEST_ID: usize = 0;
    pub const PKEY: usize = 4;
    pub const RESERVED: usize = 6;
    pub const SERVICE_ID: usize = 8;
    pub const PRIVATE_DATA: usize = 16;
}

/// Bytes of private data in a SIDR_REQ.
pub const PRIVATE_DATA_LEN: usize = 216;

cm_view!("SIDR_REQ");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Request ID.
    pub fn request_id(&self) -> u32 {
        get_u32(self.b(), field::REQUEST_ID)
    }
    /// Partition key.
    pub fn pkey(&self) -> u16 {
        get_u16(self.b(), field::PKEY)
    }
    /// Service ID.
    pub fn service_id(&self) -> u64 {
        get_u64(self.b(), field::SERVICE_ID)
    }
    /// Private data.
    pub fn private_data(&self) -> &[u8] {
        &self.b()[field::PRIVATE_DATA..field::PRIVATE_DATA + PRIVATE_DATA_LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the request ID.
    pub fn set_request_id(&mut self, v: u32) {
        set_u32(self.bm(), field::REQUEST_ID, v)
    }
    /// Set the partition key (the reserved bytes after it are cleared).
    pub fn set_pkey(&mut self, v: u16) {
        set_u16(self.bm(), field::PKEY, v);
        set_u16(self.bm(), field::RESERVED, 0)
    }
    /// Set the service ID.
    pub fn set_service_id(&mut self, v: u64) {
        set_u64(self.bm(), field::SERVICE_ID, v)
    }
    /// Private data, mutable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::PRIVATE_DATA..field::PRIVATE_DATA + PRIVATE_DATA_LEN]
    }
}

/// A high-level representation of a SIDR_REQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repr {
    /// Request ID.
    pub request_id: u32,
    /// Partition key.
    pub pkey: u16,
    /// Service ID.
    pub service_id: u64,
    /// Private data (rdma_cm: the [`super::ip`] header, then the user's data).
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Default for Repr {
    fn default() -> Repr {
        Repr {
            request_id: 0,
            pkey: 0,
            service_id: 0,
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }
}

impl Repr {
    /// Parse a SIDR_REQ.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] if shorter than 232 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> crate::Result<Repr> {
        p.check_len()?;
        let mut private_data = [0; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            request_id: p.request_id(),
            pkey: p.pkey(),
            service_id: p.service_id(),
            private_data,
        })
    }

    /// The length of the message (232).
    pub const fn buffer_len(&self) -> usize {
        super::MSG_LEN
    }

    /// Emit the SIDR_REQ.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_request_id(self.request_id);
        p.set_pkey(self.pkey);
        p.set_service_id(self.service_id);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SIDR_REQ request_id 0x{:08x} sid 0x{:016x} pkey 0x{:04x}",
            self.request_id, self.service_id, self.pkey
        )?;
        super::fmt_private(f, &self.private_data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad;

    // The SIDR_REQ Linux 6.1's rdma_cm sent from rxe1 (10.0.3.2) for
    // `udaddy -s 10.0.3.1 -b 10.0.3.2` (port space UDP, port 7174, source
    // port 41891): fixtures/pcap-cm/rxe-requests-unanswered.pcap, frame 4.
    static MAD: &[u8; 256] = include_bytes!("../../tests/data/cm/rxe-sidr_req.mad");

    fn data() -> &'static [u8] {
        &MAD[mad::HEADER_LEN..]
    }

    fn private_data() -> [u8; PRIVATE_DATA_LEN] {
        let mut p = [0u8; PRIVATE_DATA_LEN];
        p[..4].copy_from_slice(&[0x00, 0x40, 0xa3, 0xa3]);
        p[16..20].copy_from_slice(&[10, 0, 3, 2]);
        p[32..36].copy_from_slice(&[10, 0, 3, 1]);
        p
    }

    fn repr() -> Repr {
        Repr {
            request_id: 0x8289_e999,
            pkey: 0xffff,
            service_id: 0x0000_0000_0111_1c06,
            private_data: private_data(),
        }
    }

    #[test]
    fn deconstruct_rxe_sidr_req() {
        let p = Packet::new_checked(data()).unwrap();
        assert_eq!(p.request_id(), 0x8289_e999);
        assert_eq!(p.pkey(), 0xffff);
        assert_eq!(p.service_id(), 0x0111_1c06);
        assert_eq!(p.private_data(), &private_data()[..]);
    }

    #[test]
    fn construct_rxe_sidr_req() {
        let mut bytes = [0xa5u8; super::super::MSG_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_request_id(0x8289_e999);
        p.set_pkey(0xffff);
        p.set_service_id(0x0111_1c06);
        p.private_data_mut().copy_from_slice(&private_data());
        assert_eq!(&bytes[..], data());
    }

    #[test]
    fn parse_rxe_sidr_req() {
        let p = Packet::new_checked(data()).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_rxe_sidr_req() {
        let mut bytes = [0xa5u8; super::super::MSG_LEN];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(&bytes[..], data());
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&data()[..8]).unwrap_err(),
            crate::Error::Truncated
        );
    }
}
