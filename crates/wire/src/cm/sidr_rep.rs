//! SIDR_REP, the answer to a SIDR_REQ (IBTA Vol 1 §12.11.2, table 120).
//!
//! ```text
//! bytes 0-3    Request ID
//! byte 4       Status, byte 5 Additional Information Length, bytes 6-7 reserved
//! bytes 8-10   QPN, byte 11 reserved
//! bytes 12-19  ServiceID
//! bytes 20-23  Q_Key
//! bytes 24-95  Additional Information (72 bytes)
//! bytes 96-231 Private Data (136 bytes)
//! ```

use core::fmt;

use super::{cm_view, get_u24, get_u32, get_u64, set_u16, set_u32, set_u64};

mod field {
    pub const REQUEST_ID: usize = 0;
    pub const STATUS: usize = 4;
    pub const INFO_LENGTH: usize = 5;
    pub const RESERVED: usize = 6;
    pub const QPN: usize = 8;
    pub const SERVICE_ID: usize = 12;
    pub const QKEY: usize = 20;
    pub const INFO: usize = 24;
    pub const PRIVATE_DATA: usize = 96;
}

/// Bytes of additional information.
pub const INFO_LEN: usize = 72;
/// Bytes of private data in a SIDR_REP.
pub const PRIVATE_DATA_LEN: usize = 136;

/// SIDR_REP status values (IBTA table 121).
pub mod status {
    /// The QPN and Q_Key are valid.
    pub const SUCCESS: u8 = 0;
    /// Service ID not supported (no listener).
    pub const UNSUPPORTED: u8 = 1;
    /// Rejected by the service.
    pub const REJECT: u8 = 2;
    /// No QP.
    pub const NO_QP: u8 = 3;
    /// Redirect.
    pub const REDIRECT: u8 = 4;
    /// Unsupported class version.
    pub const UNSUPPORTED_VERSION: u8 = 5;
}

cm_view!("SIDR_REP");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Request ID (of the SIDR_REQ answered).
    pub fn request_id(&self) -> u32 {
        get_u32(self.b(), field::REQUEST_ID)
    }
    /// Status ([`status`]).
    pub fn status(&self) -> u8 {
        self.b()[field::STATUS]
    }
    /// Length of the additional information used.
    pub fn info_length(&self) -> u8 {
        self.b()[field::INFO_LENGTH]
    }
    /// The service's QP number.
    pub fn qpn(&self) -> u32 {
        get_u24(self.b(), field::QPN)
    }
    /// Service ID.
    pub fn service_id(&self) -> u64 {
        get_u64(self.b(), field::SERVICE_ID)
    }
    /// The service QP's Q_Key.
    pub fn qkey(&self) -> u32 {
        get_u32(self.b(), field::QKEY)
    }
    /// Additional information.
    pub fn info(&self) -> &[u8] {
        &self.b()[field::INFO..field::INFO + INFO_LEN]
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
    /// Set the status.
    pub fn set_status(&mut self, v: u8) {
        self.bm()[field::STATUS] = v
    }
    /// Set the additional information length (the reserved bytes after it
    /// are cleared).
    pub fn set_info_length(&mut self, v: u8) {
        self.bm()[field::INFO_LENGTH] = v;
        set_u16(self.bm(), field::RESERVED, 0)
    }
    /// Set the QP number (the reserved byte after it is cleared).
    pub fn set_qpn(&mut self, v: u32) {
        set_u32(self.bm(), field::QPN, (v & 0xff_ffff) << 8)
    }
    /// Set the service ID.
    pub fn set_service_id(&mut self, v: u64) {
        set_u64(self.bm(), field::SERVICE_ID, v)
    }
    /// Set the Q_Key.
    pub fn set_qkey(&mut self, v: u32) {
        set_u32(self.bm(), field::QKEY, v)
    }
    /// Additional information, mutable.
    pub fn info_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::INFO..field::INFO + INFO_LEN]
    }
    /// Private data, mutable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::PRIVATE_DATA..field::PRIVATE_DATA + PRIVATE_DATA_LEN]
    }
}

/// A high-level representation of a SIDR_REP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repr {
    /// Request ID.
    pub request_id: u32,
    /// Status.
    pub status: u8,
    /// Length of `info` in use.
    pub info_length: u8,
    /// The service's QP number.
    pub qpn: u32,
    /// Service ID.
    pub service_id: u64,
    /// Q_Key.
    pub qkey: u32,
    /// Additional information.
    pub info: [u8; INFO_LEN],
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Default for Repr {
    fn default() -> Repr {
        Repr {
            request_id: 0,
            status: 0,
            info_length: 0,
            qpn: 0,
            service_id: 0,
            qkey: 0,
            info: [0; INFO_LEN],
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }
}

impl Repr {
    /// Parse a SIDR_REP.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] if shorter than 232 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> crate::Result<Repr> {
        p.check_len()?;
        let mut info = [0; INFO_LEN];
        info.copy_from_slice(p.info());
        let mut private_data = [0; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            request_id: p.request_id(),
            status: p.status(),
            info_length: p.info_length(),
            qpn: p.qpn(),
            service_id: p.service_id(),
            qkey: p.qkey(),
            info,
            private_data,
        })
    }

    /// The length of the message (232).
    pub const fn buffer_len(&self) -> usize {
        super::MSG_LEN
    }

    /// Emit the SIDR_REP.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_request_id(self.request_id);
        p.set_status(self.status);
        p.set_info_length(self.info_length);
        p.set_qpn(self.qpn);
        p.set_service_id(self.service_id);
        p.set_qkey(self.qkey);
        p.info_mut().copy_from_slice(&self.info);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SIDR_REP request_id 0x{:08x} status {} qpn 0x{:06x} qkey 0x{:08x} sid 0x{:016x}",
            self.request_id, self.status, self.qpn, self.qkey, self.service_id
        )?;
        super::fmt_private(f, &self.private_data)
    }
}
