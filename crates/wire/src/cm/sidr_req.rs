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

use crate::view::{Zeroing, U16, U32, U64};

/// Bytes of private data in a SIDR_REQ.
pub const PRIVATE_DATA_LEN: usize = 216;

super::cm_message! {
    a "SIDR_REQ";
    fields {
        /// Request ID.
        request_id / set_request_id: u32 = U32<0>;
        /// Partition key (the 2 reserved bytes after it are cleared).
        pkey / set_pkey: u16 = Zeroing<U16<4>, 6, 2>;
        /// Service ID.
        service_id / set_service_id: u64 = U64<8>;
    }
    bytes {
        /// Private data.
        private_data / private_data_mut: [16; PRIVATE_DATA_LEN];
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SIDR_REQ request_id 0x{:08x} sid {} pkey 0x{:04x}",
            self.request_id,
            super::ServiceId(self.service_id),
            self.pkey
        )?;
        super::fmt_rdma_cm_private(f, self.service_id, &self.private_data)
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

    crate::cm::capture_round_trip!(data(), repr());
}
