//! REP, the passive side's reply to a REQ (IBTA Vol 1 §12.6.8, table 110).
//!
//! ```text
//! bytes 0-3    Local Communication ID
//! bytes 4-7    Remote Communication ID
//! bytes 8-11   Local Q_Key
//! bytes 12-14  Local QPN
//! bytes 16-18  Local EE Context Number
//! bytes 20-22  Starting PSN
//! byte 24      Responder Resources
//! byte 25      Initiator Depth
//! byte 26      Target ACK Delay(5) Failover Accepted(2) E2E Flow Control(1)
//! byte 27      RNR Retry Count(3) SRQ(1) reserved(4)
//! bytes 28-35  Local CA GUID
//! bytes 36-231 Private Data (196 bytes)
//! ```

use core::fmt;

use super::{cm_view, get_bits, get_u24, get_u32, get_u64};
use super::{set_bits, set_u32, set_u64};

mod field {
    pub const LOCAL_COMM_ID: usize = 0;
    pub const REMOTE_COMM_ID: usize = 4;
    pub const LOCAL_QKEY: usize = 8;
    pub const LOCAL_QPN: usize = 12;
    pub const LOCAL_EECN: usize = 16;
    pub const STARTING_PSN: usize = 20;
    pub const RESPONDER_RESOURCES: usize = 24;
    pub const INITIATOR_DEPTH: usize = 25;
    /// Target ACK delay (0-4), failover accepted (5-6), E2E flow control (7).
    pub const BYTE26: usize = 26;
    /// RNR retry count (0-2), SRQ (3), reserved (4-7).
    pub const BYTE27: usize = 27;
    pub const LOCAL_CA_GUID: usize = 28;
    pub const PRIVATE_DATA: usize = 36;
}

/// Bytes of private data in a REP.
pub const PRIVATE_DATA_LEN: usize = 196;

cm_view!("REP");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The sender's communication ID.
    pub fn local_comm_id(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_COMM_ID)
    }
    /// The receiver's communication ID.
    pub fn remote_comm_id(&self) -> u32 {
        get_u32(self.b(), field::REMOTE_COMM_ID)
    }
    /// The sender's Q_Key (RD only).
    pub fn local_qkey(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_QKEY)
    }
    /// The sender's QP number.
    pub fn local_qpn(&self) -> u32 {
        get_u24(self.b(), field::LOCAL_QPN)
    }
    /// The sender's EE context (RD; XRC target: the SRQ's QPN).
    pub fn local_eecn(&self) -> u32 {
        get_u24(self.b(), field::LOCAL_EECN)
    }
    /// The PSN the receiver's send queue starts at.
    pub fn starting_psn(&self) -> u32 {
        get_u24(self.b(), field::STARTING_PSN)
    }
    /// Responder resources.
    pub fn responder_resources(&self) -> u8 {
        self.b()[field::RESPONDER_RESOURCES]
    }
    /// Initiator depth.
    pub fn initiator_depth(&self) -> u8 {
        self.b()[field::INITIATOR_DEPTH]
    }
    /// Target ACK delay (5 bits).
    pub fn target_ack_delay(&self) -> u8 {
        get_bits(self.b(), field::BYTE26, 0, 5)
    }
    /// Failover accepted (2 bits).
    pub fn failover_accepted(&self) -> u8 {
        get_bits(self.b(), field::BYTE26, 5, 2)
    }
    /// End-to-end flow control.
    pub fn flow_control(&self) -> bool {
        get_bits(self.b(), field::BYTE26, 7, 1) != 0
    }
    /// RNR retry count (3 bits).
    pub fn rnr_retry_count(&self) -> u8 {
        get_bits(self.b(), field::BYTE27, 0, 3)
    }
    /// The sender's QP uses an SRQ.
    pub fn srq(&self) -> bool {
        get_bits(self.b(), field::BYTE27, 3, 1) != 0
    }
    /// The sender's CA GUID.
    pub fn local_ca_guid(&self) -> u64 {
        get_u64(self.b(), field::LOCAL_CA_GUID)
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
    /// Set the sender's Q_Key.
    pub fn set_local_qkey(&mut self, v: u32) {
        set_u32(self.bm(), field::LOCAL_QKEY, v)
    }
    /// Set the sender's QP number (the reserved byte after it is cleared).
    pub fn set_local_qpn(&mut self, v: u32) {
        set_u32(self.bm(), field::LOCAL_QPN, (v & 0xff_ffff) << 8)
    }
    /// Set the sender's EE context (the reserved byte after it is cleared).
    pub fn set_local_eecn(&mut self, v: u32) {
        set_u32(self.bm(), field::LOCAL_EECN, (v & 0xff_ffff) << 8)
    }
    /// Set the starting PSN (the reserved byte after it is cleared).
    pub fn set_starting_psn(&mut self, v: u32) {
        set_u32(self.bm(), field::STARTING_PSN, (v & 0xff_ffff) << 8)
    }
    /// Set the responder resources.
    pub fn set_responder_resources(&mut self, v: u8) {
        self.bm()[field::RESPONDER_RESOURCES] = v
    }
    /// Set the initiator depth.
    pub fn set_initiator_depth(&mut self, v: u8) {
        self.bm()[field::INITIATOR_DEPTH] = v
    }
    /// Set the target ACK delay.
    pub fn set_target_ack_delay(&mut self, v: u8) {
        set_bits(self.bm(), field::BYTE26, 0, 5, v)
    }
    /// Set failover accepted.
    pub fn set_failover_accepted(&mut self, v: u8) {
        set_bits(self.bm(), field::BYTE26, 5, 2, v)
    }
    /// Set end-to-end flow control.
    pub fn set_flow_control(&mut self, v: bool) {
        set_bits(self.bm(), field::BYTE26, 7, 1, u8::from(v))
    }
    /// Set the RNR retry count (the reserved bits are cleared).
    pub fn set_rnr_retry_count(&mut self, v: u8) {
        set_bits(self.bm(), field::BYTE27, 0, 3, v);
        set_bits(self.bm(), field::BYTE27, 4, 4, 0)
    }
    /// Set SRQ.
    pub fn set_srq(&mut self, v: bool) {
        set_bits(self.bm(), field::BYTE27, 3, 1, u8::from(v))
    }
    /// Set the sender's CA GUID.
    pub fn set_local_ca_guid(&mut self, v: u64) {
        set_u64(self.bm(), field::LOCAL_CA_GUID, v)
    }
    /// Private data, mutable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::PRIVATE_DATA..field::PRIVATE_DATA + PRIVATE_DATA_LEN]
    }
}

/// A high-level representation of a REP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// The sender's Q_Key (RD only).
    pub local_qkey: u32,
    /// The sender's QP number.
    pub local_qpn: u32,
    /// The sender's EE context.
    pub local_eecn: u32,
    /// Starting PSN.
    pub starting_psn: u32,
    /// Responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// Target ACK delay (5 bits).
    pub target_ack_delay: u8,
    /// Failover accepted (2 bits).
    pub failover_accepted: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: bool,
    /// The sender's CA GUID.
    pub local_ca_guid: u64,
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Default for Repr {
    fn default() -> Repr {
        Repr {
            local_comm_id: 0,
            remote_comm_id: 0,
            local_qkey: 0,
            local_qpn: 0,
            local_eecn: 0,
            starting_psn: 0,
            responder_resources: 0,
            initiator_depth: 0,
            target_ack_delay: 0,
            failover_accepted: 0,
            flow_control: false,
            rnr_retry_count: 0,
            srq: false,
            local_ca_guid: 0,
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }
}

impl Repr {
    /// Parse a REP.
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
            local_qkey: p.local_qkey(),
            local_qpn: p.local_qpn(),
            local_eecn: p.local_eecn(),
            starting_psn: p.starting_psn(),
            responder_resources: p.responder_resources(),
            initiator_depth: p.initiator_depth(),
            target_ack_delay: p.target_ack_delay(),
            failover_accepted: p.failover_accepted(),
            flow_control: p.flow_control(),
            rnr_retry_count: p.rnr_retry_count(),
            srq: p.srq(),
            local_ca_guid: p.local_ca_guid(),
            private_data,
        })
    }

    /// The length of the message (232).
    pub const fn buffer_len(&self) -> usize {
        super::MSG_LEN
    }

    /// Emit the REP (reserved fields zero).
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_local_comm_id(self.local_comm_id);
        p.set_remote_comm_id(self.remote_comm_id);
        p.set_local_qkey(self.local_qkey);
        p.set_local_qpn(self.local_qpn);
        p.set_local_eecn(self.local_eecn);
        p.set_starting_psn(self.starting_psn);
        p.set_responder_resources(self.responder_resources);
        p.set_initiator_depth(self.initiator_depth);
        p.set_target_ack_delay(self.target_ack_delay);
        p.set_failover_accepted(self.failover_accepted);
        p.set_flow_control(self.flow_control);
        p.set_rnr_retry_count(self.rnr_retry_count);
        p.set_srq(self.srq);
        p.set_local_ca_guid(self.local_ca_guid);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "REP local_comm_id 0x{:08x} remote_comm_id 0x{:08x} qpn 0x{:06x} psn 0x{:06x} \
             rd_atom {}/{} rnr {}",
            self.local_comm_id,
            self.remote_comm_id,
            self.local_qpn,
            self.starting_psn,
            self.responder_resources,
            self.initiator_depth,
            self.rnr_retry_count
        )?;
        super::fmt_private(f, &self.private_data)
    }
}
