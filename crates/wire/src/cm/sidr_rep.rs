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

use crate::view::{U24Word, Zeroing, U32, U64, U8};

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

/// The name of a SIDR_REP status (IBTA table 121); `None` for a reserved value.
pub fn status_name(s: u8) -> Option<&'static str> {
    Some(match s {
        status::SUCCESS => "success",
        status::UNSUPPORTED => "service ID not supported",
        status::REJECT => "rejected by the service",
        status::NO_QP => "no QP",
        status::REDIRECT => "redirect",
        status::UNSUPPORTED_VERSION => "unsupported class version",
        _ => return None,
    })
}

super::cm_message! {
    a "SIDR_REP";
    fields {
        /// Request ID (of the SIDR_REQ answered).
        request_id / set_request_id: u32 = U32<0>;
        /// Status ([`status`]).
        status / set_status: u8 = U8<4>;
        /// Length of the additional information used (bytes 6-7, reserved, are cleared).
        info_length / set_info_length: u8 = Zeroing<U8<5>, 6, 2>;
        /// The service's QP number.
        qpn / set_qpn: u32 = U24Word<8>;
        /// Service ID.
        service_id / set_service_id: u64 = U64<12>;
        /// The service QP's Q_Key.
        qkey / set_qkey: u32 = U32<20>;
    }
    bytes {
        /// Additional information.
        info / info_mut: [24; INFO_LEN];
        /// Private data.
        private_data / private_data_mut: [96; PRIVATE_DATA_LEN];
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SIDR_REP request_id 0x{:08x} status {} ({}) qpn 0x{:06x} qkey 0x{:08x} sid {}",
            self.request_id,
            status_name(self.status).unwrap_or("reserved"),
            self.status,
            self.qpn,
            self.qkey,
            super::ServiceId(self.service_id)
        )?;
        super::fmt_private(f, &self.private_data)
    }
}
