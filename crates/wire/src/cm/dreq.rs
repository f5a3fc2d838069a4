//! DREQ, disconnect request (IBTA Vol 1 §12.6.10, table 112).
//!
//! ```text
//! bytes 0-3    Local Communication ID
//! bytes 4-7    Remote Communication ID
//! bytes 8-10   Remote QPN/EECN (the receiver's QP), byte 11 reserved
//! bytes 12-231 Private Data (220 bytes)
//! ```

use core::fmt;

use crate::view::{U24Word, U32};

/// Bytes of private data in a DREQ.
pub const PRIVATE_DATA_LEN: usize = 220;

super::cm_message! {
    a "DREQ";
    fields {
        /// The sender's communication ID.
        local_comm_id / set_local_comm_id: u32 = U32<0>;
        /// The receiver's communication ID.
        remote_comm_id / set_remote_comm_id: u32 = U32<4>;
        /// The receiver's QP number.
        remote_qpn / set_remote_qpn: u32 = U24Word<8>;
    }
    bytes {
        /// Private data.
        private_data / private_data_mut: [12; PRIVATE_DATA_LEN];
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "DREQ local_comm_id 0x{:08x} remote_comm_id 0x{:08x} remote_qpn 0x{:06x}",
            self.local_comm_id, self.remote_comm_id, self.remote_qpn
        )?;
        super::fmt_private(f, &self.private_data)
    }
}
