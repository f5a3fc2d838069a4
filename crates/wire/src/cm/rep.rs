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

use crate::view::{Bits, Flag, U24Word, ZeroingBits, U32, U64, U8};

/// Bytes of private data in a REP.
pub const PRIVATE_DATA_LEN: usize = 196;

super::cm_message! {
    a "REP";
    fields {
        /// The sender's communication ID.
        local_comm_id / set_local_comm_id: u32 = U32<0>;
        /// The receiver's communication ID.
        remote_comm_id / set_remote_comm_id: u32 = U32<4>;
        /// The sender's Q_Key (RD only).
        local_qkey / set_local_qkey: u32 = U32<8>;
        /// The sender's QP number.
        local_qpn / set_local_qpn: u32 = U24Word<12>;
        /// The sender's EE context (RD; XRC target: the SRQ's QPN).
        local_eecn / set_local_eecn: u32 = U24Word<16>;
        /// The PSN the receiver's send queue starts at.
        starting_psn / set_starting_psn: u32 = U24Word<20>;
        /// Responder resources.
        responder_resources / set_responder_resources: u8 = U8<24>;
        /// Initiator depth.
        initiator_depth / set_initiator_depth: u8 = U8<25>;
        /// Target ACK delay (5 bits).
        target_ack_delay / set_target_ack_delay: u8 = Bits<26, 0, 5>;
        /// Failover accepted (2 bits).
        failover_accepted / set_failover_accepted: u8 = Bits<26, 5, 2>;
        /// End-to-end flow control.
        flow_control / set_flow_control: bool = Flag<26, 7>;
        /// RNR retry count (3 bits; the reserved bits 4-7 are cleared).
        rnr_retry_count / set_rnr_retry_count: u8 = ZeroingBits<Bits<27, 0, 3>, 27, 4, 4>;
        /// The sender's QP uses an SRQ.
        srq / set_srq: bool = Flag<27, 3>;
        /// The sender's CA GUID.
        local_ca_guid / set_local_ca_guid: u64 = U64<28>;
    }
    bytes {
        /// Private data.
        private_data / private_data_mut: [36; PRIVATE_DATA_LEN];
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "REP local_comm_id 0x{:08x} remote_comm_id 0x{:08x} qpn 0x{:06x} psn 0x{:06x} \
             rd_atom {}/{} rnr_retry {}",
            self.local_comm_id,
            self.remote_comm_id,
            self.local_qpn,
            self.starting_psn,
            self.responder_resources,
            self.initiator_depth,
            super::RnrRetry(self.rnr_retry_count)
        )?;
        super::fmt_private(f, &self.private_data)
    }
}
