//! REJ, reject (IBTA Vol 1 §12.6.7, table 108).
//!
//! ```text
//! bytes 0-3    Local Communication ID (0 when rejecting a REQ before an ID exists)
//! bytes 4-7    Remote Communication ID
//! byte 8       Message Rejected(2) reserved(6)
//! byte 9       Reject Info Length(7) reserved(1)
//! bytes 10-11  Reason
//! bytes 12-83  Additional Reject Information (72 bytes)
//! bytes 84-231 Private Data (148 bytes)
//! ```

use core::fmt;

use super::{MsgResponse, Resp};
use crate::view::{Bits, Zeroing, U16, U32};

/// Bytes of additional reject information.
pub const ARI_LEN: usize = 72;
/// Bytes of private data in a REJ.
pub const PRIVATE_DATA_LEN: usize = 148;

/// Reject reasons (IBTA table 109) that Linux and rdma_cm use; every
/// assigned one has a name ([`reason_name`]).
pub mod reason {
    /// No QP available.
    pub const NO_QP: u16 = 1;
    /// No resources.
    pub const NO_RESOURCES: u16 = 3;
    /// Timeout: the sender gave up waiting (ARI: its CA GUID).
    pub const TIMEOUT: u16 = 4;
    /// Unsupported request.
    pub const UNSUPPORTED: u16 = 5;
    /// Invalid communication ID.
    pub const INVALID_COMM_ID: u16 = 6;
    /// Invalid communication instance.
    pub const INVALID_COMM_INSTANCE: u16 = 7;
    /// No listener for the service ID.
    pub const INVALID_SERVICE_ID: u16 = 8;
    /// Invalid transport service type.
    pub const INVALID_TRANSPORT_TYPE: u16 = 9;
    /// Stale connection (the QP is still known from an older connection).
    pub const STALE_CONN: u16 = 10;
    /// Invalid GID (ARI: a GID the receiver has).
    pub const INVALID_GID: u16 = 12;
    /// Invalid MTU.
    pub const INVALID_MTU: u16 = 26;
    /// Insufficient responder resources.
    pub const INSUFFICIENT_RESP_RESOURCES: u16 = 27;
    /// Consumer defined: the application said no (`rdma_reject`).
    pub const CONSUMER_DEFINED: u16 = 28;
    /// Invalid RNR retry.
    pub const INVALID_RNR_RETRY: u16 = 29;
    /// Duplicate local communication ID.
    pub const DUPLICATE_LOCAL_COMM_ID: u16 = 30;
    /// Invalid class version.
    pub const INVALID_CLASS_VERSION: u16 = 31;
    /// Vendor option not supported (`rdma_reject_ece`).
    pub const VENDOR_OPTION_NOT_SUPPORTED: u16 = 35;
}

/// The name of a reject reason, as Linux's `ibcm_reject_msg` (what
/// `rdma_reject_msg` returns to applications) words it; `None` for a value
/// the IBTA has not assigned.
pub fn reason_name(reason: u16) -> Option<&'static str> {
    Some(match reason {
        1 => "no QP",
        2 => "no EEC",
        3 => "no resources",
        4 => "timeout",
        5 => "unsupported",
        6 => "invalid comm ID",
        7 => "invalid comm instance",
        8 => "invalid service ID",
        9 => "invalid transport type",
        10 => "stale conn",
        11 => "RDC not exist",
        12 => "invalid GID",
        13 => "invalid LID",
        14 => "invalid SL",
        15 => "invalid traffic class",
        16 => "invalid hop limit",
        17 => "invalid packet rate",
        18 => "invalid alt GID",
        19 => "invalid alt LID",
        20 => "invalid alt SL",
        21 => "invalid alt traffic class",
        22 => "invalid alt hop limit",
        23 => "invalid alt packet rate",
        24 => "port CM redirect",
        25 => "port redirect",
        26 => "invalid MTU",
        27 => "insufficient resp resources",
        28 => "consumer defined",
        29 => "invalid RNR retry",
        30 => "duplicate local comm ID",
        31 => "invalid class version",
        32 => "invalid flow label",
        33 => "invalid alt flow label",
        35 => "vendor option is not supported",
        _ => return None,
    })
}

/// A reject reason as printed: `timeout (4)`, or `unassigned (34)`.
pub struct Reason(pub u16);

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "{} ({})",
            reason_name(self.0).unwrap_or("unassigned"),
            self.0
        )
    }
}

super::cm_message! {
    a "REJ";
    fields {
        /// The sender's communication ID.
        local_comm_id / set_local_comm_id: u32 = U32<0>;
        /// The receiver's communication ID.
        remote_comm_id / set_remote_comm_id: u32 = U32<4>;
        /// Which message is rejected.
        message_rejected / set_message_rejected: MsgResponse = Resp<Zeroing<Bits<8, 0, 2>, 8, 1>>;
        /// Length of the additional reject information used (7 bits).
        reject_info_length / set_reject_info_length: u8 = Zeroing<Bits<9, 0, 7>, 9, 1>;
        /// Reason.
        reason / set_reason: u16 = U16<10>;
    }
    bytes {
        /// Additional reject information.
        ari / ari_mut: [12; ARI_LEN];
        /// Private data.
        private_data / private_data_mut: [84; PRIVATE_DATA_LEN];
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "REJ local_comm_id 0x{:08x} remote_comm_id 0x{:08x} of {} reason {}",
            self.local_comm_id,
            self.remote_comm_id,
            self.message_rejected,
            Reason(self.reason)
        )?;
        let used = usize::from(self.reject_info_length).min(ARI_LEN);
        if used > 0 {
            write!(f, " ari[{used}]")?;
            for b in &self.ari[..used] {
                write!(f, "{b:02x}")?;
            }
        }
        super::fmt_private(f, &self.private_data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad;

    // The REJ Linux 6.1 sent when rping gave up on its unanswered REQ
    // (destroying a connection in REQ_SENT: reason "timeout", the CA GUID
    // as additional information): fixtures/pcap-cm/rxe-requests-unanswered.pcap,
    // frame 3.
    static MAD: &[u8; 256] = include_bytes!("../../tests/data/cm/rxe-rej.mad");

    fn data() -> &'static [u8] {
        &MAD[mad::HEADER_LEN..]
    }

    fn ari() -> [u8; ARI_LEN] {
        let mut a = [0u8; ARI_LEN];
        a[..8].copy_from_slice(&0x5054_00ff_fe12_3457u64.to_be_bytes());
        a
    }

    fn repr() -> Repr {
        Repr {
            local_comm_id: 0x8389_e999,
            remote_comm_id: 0,
            message_rejected: MsgResponse::Other,
            reject_info_length: 8,
            reason: reason::TIMEOUT,
            ari: ari(),
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }

    #[test]
    fn deconstruct_rxe_rej() {
        let p = Packet::new_checked(data()).unwrap();
        assert_eq!(p.local_comm_id(), 0x8389_e999);
        assert_eq!(p.remote_comm_id(), 0);
        assert_eq!(p.message_rejected(), MsgResponse::Other);
        assert_eq!(p.reject_info_length(), 8);
        assert_eq!(p.reason(), 4);
        assert_eq!(p.ari(), &ari()[..]);
        assert!(p.private_data().iter().all(|&b| b == 0));
    }

    #[test]
    fn construct_rxe_rej() {
        let mut bytes = [0xa5u8; super::super::MSG_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_local_comm_id(0x8389_e999);
        p.set_remote_comm_id(0);
        p.set_message_rejected(MsgResponse::Other);
        p.set_reject_info_length(8);
        p.set_reason(reason::TIMEOUT);
        p.ari_mut().copy_from_slice(&ari());
        p.private_data_mut().fill(0);
        assert_eq!(&bytes[..], data());
    }

    crate::cm::capture_round_trip!(data(), repr());
}
