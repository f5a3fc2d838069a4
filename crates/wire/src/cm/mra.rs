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

use super::{cm_view, get_bits, get_u32, set_bits, set_u32, MsgResponse};

mod field {
    pub const LOCAL_COMM_ID: usize = 0;
    pub const REMOTE_COMM_ID: usize = 4;
    pub const MESSAGE_MRAED: usize = 8;
    pub const SERVICE_TIMEOUT: usize = 9;
    pub const PRIVATE_DATA: usize = 10;
}

/// Bytes of private data in an MRA.
pub const PRIVATE_DATA_LEN: usize = 222;

cm_view!("MRA");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The sender's communication ID.
    pub fn local_comm_id(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_COMM_ID)
    }
    /// The receiver's communication ID.
    pub fn remote_comm_id(&self) -> u32 {
        get_u32(self.b(), field::REMOTE_COMM_ID)
    }
    /// Which message is acknowledged.
    pub fn message_mraed(&self) -> MsgResponse {
        MsgResponse::from_bits(get_bits(self.b(), field::MESSAGE_MRAED, 0, 2))
    }
    /// Service timeout (4.096 µs × 2^n).
    pub fn service_timeout(&self) -> u8 {
        get_bits(self.b(), field::SERVICE_TIMEOUT, 0, 5)
    }
    /// Private data.
    pub fn private_data(&self) -> &[u8] {
        &self.b()[field::PRIVATE_DATA..field::PRIVATE_DATA + PRIVATE_DATA_LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the sender's communication ID.
    pub fn set_local_comm_id(&mut self, v: u32) {
        set_u32(self.bm(), field::LOCAL_COMM_ID, v)
    }
    /// Set the receiver's communication ID.
    pub fn set_remote_comm_id(&mut self, v: u32) {
        set_u32(self.bm(), field::REMOTE_COMM_ID, v)
    }
    /// Set which message is acknowledged (the reserved bits are cleared).
    pub fn set_message_mraed(&mut self, v: MsgResponse) {
        self.bm()[field::MESSAGE_MRAED] = 0;
        set_bits(self.bm(), field::MESSAGE_MRAED, 0, 2, v.bits())
    }
    /// Set the service timeout (the reserved bits are cleared).
    pub fn set_service_timeout(&mut self, v: u8) {
        self.bm()[field::SERVICE_TIMEOUT] = 0;
        set_bits(self.bm(), field::SERVICE_TIMEOUT, 0, 5, v)
    }
    /// Private data, mutable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::PRIVATE_DATA..field::PRIVATE_DATA + PRIVATE_DATA_LEN]
    }
}

/// A high-level representation of an MRA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// Which message is acknowledged.
    pub message_mraed: MsgResponse,
    /// Service timeout (5 bits).
    pub service_timeout: u8,
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Default for Repr {
    fn default() -> Repr {
        Repr {
            local_comm_id: 0,
            remote_comm_id: 0,
            message_mraed: MsgResponse::Req,
            service_timeout: 0,
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }
}

impl Repr {
    /// Parse an MRA.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] if shorter than 232 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> crate::Result<Repr> {
        p.check_len()?;
        let mut private_data = [0; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            message_mraed: p.message_mraed(),
            service_timeout: p.service_timeout(),
            private_data,
        })
    }

    /// The length of the message (232).
    pub const fn buffer_len(&self) -> usize {
        super::MSG_LEN
    }

    /// Emit the MRA.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_local_comm_id(self.local_comm_id);
        p.set_remote_comm_id(self.remote_comm_id);
        p.set_message_mraed(self.message_mraed);
        p.set_service_timeout(self.service_timeout);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "MRA local_comm_id 0x{:08x} remote_comm_id 0x{:08x} of {:?} timeout {}",
            self.local_comm_id, self.remote_comm_id, self.message_mraed, self.service_timeout
        )?;
        super::fmt_private(f, &self.private_data)
    }
}
