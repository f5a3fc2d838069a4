//! MRA, message receipt acknowledgement (IBTA Vol 1 §12.6.6, table 107): "your
//! REQ / REP arrived, the answer will take up to the service timeout" — the
//! sender of the acknowledged message stops retrying for that long.
//!
//! ```text
//! bytes 0-3   Local Communication ID
//! bytes 4-7   Remote Communication ID
//! byte 8      Message MRAed(2) reserved(6)
//! byte 9      Service Timeout(5) reserved(3)
//! bytes 10-231 Private Data (222 bytes)
//! ```

use core::fmt;

use super::{MsgResponse, Resp};
use crate::view::{Bits, Zeroing, U32};

/// Bytes of private data in an MRA.
pub const PRIVATE_DATA_LEN: usize = 222;

super::cm_message! {
    an "MRA";
    fields {
        /// The sender's communication ID.
        local_comm_id / set_local_comm_id: u32 = U32<0>;
        /// The receiver's communication ID.
        remote_comm_id / set_remote_comm_id: u32 = U32<4>;
        /// Which message is acknowledged.
        message_mraed / set_message_mraed: MsgResponse = Resp<Zeroing<Bits<8, 0, 2>, 8, 1>>;
        /// Service timeout (4.096 µs × 2^n, 5 bits).
        service_timeout / set_service_timeout: u8 = Zeroing<Bits<9, 0, 5>, 9, 1>;
    }
    bytes {
        /// Private data.
        private_data / private_data_mut: [10; PRIVATE_DATA_LEN];
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "MRA local_comm_id 0x{:08x} remote_comm_id 0x{:08x} of {} service_timeout {}",
            self.local_comm_id,
            self.remote_comm_id,
            self.message_mraed,
            super::Timeout(self.service_timeout)
        )?;
        super::fmt_private(f, &self.private_data)
    }
}
