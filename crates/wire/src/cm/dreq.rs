//! DREQ, disconnect request (IBTA Vol 1 §12.6.10, table 112).
//!
//! ```text
//! bytes 0-3    Local Communication ID
//! bytes 4-7    Remote Communication ID
//! bytes 8-10   Remote QPN/EECN (the receiver's QP), byte 11 reserved
//! bytes 12-231 Private Data (220 bytes)
//! ```

use core::fmt;

use super::{cm_view, get_u24, get_u32, set_u32};

mod field {
    pub const LOCAL_COMM_ID: usize = 0;
    pub const REMOTE_COMM_ID: usize = 4;
    pub const REMOTE_QPN: usize = 8;
    pub const PRIVATE_DATA: usize = 12;
}

/// Bytes of private data in a DREQ.
pub const PRIVATE_DATA_LEN: usize = 220;

cm_view!("DREQ");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The sender's communication ID.
    pub fn local_comm_id(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_COMM_ID)
    }
    /// The receiver's communication ID.
    pub fn remote_comm_id(&self) -> u32 {
        get_u32(self.b(), field::REMOTE_COMM_ID)
    }
    /// The receiver's QP number.
    pub fn remote_qpn(&self) -> u32 {
        get_u24(self.b(), field::REMOTE_QPN)
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
    /// Set the receiver's QP number (the reserved byte after it is cleared).
    pub fn set_remote_qpn(&mut self, v: u32) {
        set_u32(self.bm(), field::REMOTE_QPN, (v & 0xff_ffff) << 8)
    }
    /// Private data, mutable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::PRIVATE_DATA..field::PRIVATE_DATA + PRIVATE_DATA_LEN]
    }
}

/// A high-level representation of a DREQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// The receiver's QP number.
    pub remote_qpn: u32,
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Default for Repr {
    fn default() -> Repr {
        Repr {
            local_comm_id: 0,
            remote_comm_id: 0,
            remote_qpn: 0,
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }
}

impl Repr {
    /// Parse a DREQ.
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
            remote_qpn: p.remote_qpn(),
            private_data,
        })
    }

    /// The length of the message (232).
    pub const fn buffer_len(&self) -> usize {
        super::MSG_LEN
    }

    /// Emit the DREQ.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_local_comm_id(self.local_comm_id);
        p.set_remote_comm_id(self.remote_comm_id);
        p.set_remote_qpn(self.remote_qpn);
        p.private_data_mut().copy_from_slice(&self.private_data);
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
