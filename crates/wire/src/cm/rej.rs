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

use super::{cm_view, get_bits, get_u16, get_u32, set_bits, set_u16, set_u32, MsgResponse};

mod field {
    pub const LOCAL_COMM_ID: usize = 0;
    pub const REMOTE_COMM_ID: usize = 4;
    pub const MESSAGE_REJECTED: usize = 8;
    pub const INFO_LENGTH: usize = 9;
    pub const REASON: usize = 10;
    pub const ARI: usize = 12;
    pub const PRIVATE_DATA: usize = 84;
}

/// Bytes of additional reject information.
pub const ARI_LEN: usize = 72;
/// Bytes of private data in a REJ.
pub const PRIVATE_DATA_LEN: usize = 148;

/// Reject reasons (IBTA table 109) that Linux and rdma_cm use.
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

cm_view!("REJ");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The sender's communication ID.
    pub fn local_comm_id(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_COMM_ID)
    }
    /// The receiver's communication ID.
    pub fn remote_comm_id(&self) -> u32 {
        get_u32(self.b(), field::REMOTE_COMM_ID)
    }
    /// Which message is rejected.
    pub fn message_rejected(&self) -> MsgResponse {
        MsgResponse::from_bits(get_bits(self.b(), field::MESSAGE_REJECTED, 0, 2))
    }
    /// Length of the additional reject information used (7 bits).
    pub fn reject_info_length(&self) -> u8 {
        get_bits(self.b(), field::INFO_LENGTH, 0, 7)
    }
    /// Reason.
    pub fn reason(&self) -> u16 {
        get_u16(self.b(), field::REASON)
    }
    /// Additional reject information.
    pub fn ari(&self) -> &[u8] {
        &self.b()[field::ARI..field::ARI + ARI_LEN]
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
    /// Set which message is rejected (the reserved bits are cleared).
    pub fn set_message_rejected(&mut self, v: MsgResponse) {
        self.bm()[field::MESSAGE_REJECTED] = 0;
        set_bits(self.bm(), field::MESSAGE_REJECTED, 0, 2, v.bits())
    }
    /// Set the reject info length (the reserved bit is cleared).
    pub fn set_reject_info_length(&mut self, v: u8) {
        self.bm()[field::INFO_LENGTH] = 0;
        set_bits(self.bm(), field::INFO_LENGTH, 0, 7, v)
    }
    /// Set the reason.
    pub fn set_reason(&mut self, v: u16) {
        set_u16(self.bm(), field::REASON, v)
    }
    /// Additional reject information, mutable.
    pub fn ari_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::ARI..field::ARI + ARI_LEN]
    }
    /// Private data, mutable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::PRIVATE_DATA..field::PRIVATE_DATA + PRIVATE_DATA_LEN]
    }
}

/// A high-level representation of a REJ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// Which message is rejected.
    pub message_rejected: MsgResponse,
    /// Length of `ari` in use.
    pub reject_info_length: u8,
    /// Reason ([`reason`]).
    pub reason: u16,
    /// Additional reject information.
    pub ari: [u8; ARI_LEN],
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Default for Repr {
    fn default() -> Repr {
        Repr {
            local_comm_id: 0,
            remote_comm_id: 0,
            message_rejected: MsgResponse::Req,
            reject_info_length: 0,
            reason: 0,
            ari: [0; ARI_LEN],
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }
}

impl Repr {
    /// Parse a REJ.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] if shorter than 232 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> crate::Result<Repr> {
        p.check_len()?;
        let mut ari = [0; ARI_LEN];
        ari.copy_from_slice(p.ari());
        let mut private_data = [0; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            message_rejected: p.message_rejected(),
            reject_info_length: p.reject_info_length(),
            reason: p.reason(),
            ari,
            private_data,
        })
    }

    /// The length of the message (232).
    pub const fn buffer_len(&self) -> usize {
        super::MSG_LEN
    }

    /// Emit the REJ.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_local_comm_id(self.local_comm_id);
        p.set_remote_comm_id(self.remote_comm_id);
        p.set_message_rejected(self.message_rejected);
        p.set_reject_info_length(self.reject_info_length);
        p.set_reason(self.reason);
        p.ari_mut().copy_from_slice(&self.ari);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "REJ local_comm_id 0x{:08x} remote_comm_id 0x{:08x} of {:?} reason {}",
            self.local_comm_id, self.remote_comm_id, self.message_rejected, self.reason
        )?;
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

    #[test]
    fn parse_rxe_rej() {
        let p = Packet::new_checked(data()).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit_rxe_rej() {
        let mut bytes = [0xa5u8; super::super::MSG_LEN];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(&bytes[..], data());
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&data()[..100]).unwrap_err(),
            crate::Error::Truncated
        );
    }
}
