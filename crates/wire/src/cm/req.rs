//! REQ, the connect request (IBTA Vol 1 §12.6.5, table 106).
//!
//! ```text
//! bytes 0-3     Local Communication ID
//! bytes 8-15    ServiceID
//! bytes 16-23   Local CA GUID
//! bytes 28-31   Local Q_Key
//! bytes 32-34   Local QPN             byte 35  Responder Resources
//! bytes 36-38   Local EECN            byte 39  Initiator Depth
//! bytes 40-42   Remote EECN           byte 43  Remote CM Response Timeout(5)
//!                                              Transport Service Type(2) E2E Flow Control(1)
//! bytes 44-46   Starting PSN          byte 47  Local CM Response Timeout(5) Retry Count(3)
//! bytes 48-49   Partition Key         byte 50  Path MTU(4) RDC Exists(1) RNR Retry Count(3)
//!                                     byte 51  Max CM Retries(4) SRQ(1) Extended Transport(3)
//! bytes 52-95   primary path   (LIDs, GIDs, flow label, rate, TC, hop limit, SL, ...)
//! bytes 96-139  alternate path (same layout; byte 139 bit 5: SAP supported)
//! bytes 140-231 Private Data (92 bytes)
//! ```
//!
//! On RoCE the LIDs are 0 (a path within the subnet, hop limit <= 1) or 0xffff
//! (routed), and the GIDs are the IPv4-mapped addresses of both ends.

use core::fmt;

use super::{cm_view, get_bits, get_u16, get_u24, get_u32, get_u64};
use super::{set_bits, set_u16, set_u24, set_u32, set_u64};

mod field {
    pub const LOCAL_COMM_ID: usize = 0;
    pub const SERVICE_ID: usize = 8;
    pub const LOCAL_CA_GUID: usize = 16;
    pub const LOCAL_QKEY: usize = 28;
    pub const LOCAL_QPN: usize = 32;
    pub const RESPONDER_RESOURCES: usize = 35;
    pub const LOCAL_EECN: usize = 36;
    pub const INITIATOR_DEPTH: usize = 39;
    pub const REMOTE_EECN: usize = 40;
    /// Remote CM Response Timeout (bits 0-4), Transport Service Type (5-6),
    /// End-to-End Flow Control (7).
    pub const BYTE43: usize = 43;
    pub const STARTING_PSN: usize = 44;
    /// Local CM Response Timeout (0-4), Retry Count (5-7).
    pub const BYTE47: usize = 47;
    pub const PKEY: usize = 48;
    /// Path MTU (0-3), RDC Exists (4), RNR Retry Count (5-7).
    pub const BYTE50: usize = 50;
    /// Max CM Retries (0-3), SRQ (4), Extended Transport Type (5-7).
    pub const BYTE51: usize = 51;
    pub const PRIMARY_PATH: usize = 52;
    pub const ALTERNATE_PATH: usize = 96;
    /// SAP supported: alternate Local ACK Timeout byte, bit 5.
    pub const SAP_SUPPORTED: usize = 139;
    pub const PRIVATE_DATA: usize = 140;

    // Offsets inside a path block.
    pub const P_LOCAL_LID: usize = 0;
    pub const P_REMOTE_LID: usize = 2;
    pub const P_LOCAL_GID: usize = 4;
    pub const P_REMOTE_GID: usize = 20;
    /// Flow label (20 bits), reserved (6), packet rate (6).
    pub const P_FLOW_RATE: usize = 36;
    pub const P_TRAFFIC_CLASS: usize = 40;
    pub const P_HOP_LIMIT: usize = 41;
    /// SL (0-3), subnet local (4), reserved (5-7).
    pub const P_SL: usize = 42;
    /// Local ACK timeout (0-4), reserved (5-7).
    pub const P_ACK_TIMEOUT: usize = 43;
}

/// Bytes of private data in a REQ.
pub const PRIVATE_DATA_LEN: usize = 92;

/// Transport service type: RC.
pub const TRANSPORT_RC: u8 = 0;
/// Transport service type: UC.
pub const TRANSPORT_UC: u8 = 1;
/// Transport service type: RD.
pub const TRANSPORT_RD: u8 = 2;
/// Transport service type 3: see the extended transport type (XRC = 1).
pub const TRANSPORT_EXTENDED: u8 = 3;

cm_view!(a "REQ");

/// One path of a REQ (primary or alternate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Path {
    /// The sender's port LID (0 or 0xffff on RoCE).
    pub local_lid: u16,
    /// The receiver's port LID.
    pub remote_lid: u16,
    /// The sender's port GID.
    pub local_gid: [u8; 16],
    /// The receiver's port GID.
    pub remote_gid: [u8; 16],
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Packet rate (6 bits, IBTA rate encoding).
    pub packet_rate: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Service level (4 bits).
    pub sl: u8,
    /// Subnet local: the ends are in one subnet (no GRH routing).
    pub subnet_local: bool,
    /// Local ACK timeout the receiver's QP should use (5 bits, 4.096 µs × 2^n).
    pub local_ack_timeout: u8,
}

impl Path {
    fn read(b: &[u8], base: usize) -> Path {
        let mut local_gid = [0u8; 16];
        local_gid.copy_from_slice(&b[base + field::P_LOCAL_GID..base + field::P_LOCAL_GID + 16]);
        let mut remote_gid = [0u8; 16];
        remote_gid.copy_from_slice(&b[base + field::P_REMOTE_GID..base + field::P_REMOTE_GID + 16]);
        let fr = get_u32(b, base + field::P_FLOW_RATE);
        Path {
            local_lid: get_u16(b, base + field::P_LOCAL_LID),
            remote_lid: get_u16(b, base + field::P_REMOTE_LID),
            local_gid,
            remote_gid,
            flow_label: fr >> 12,
            packet_rate: (fr & 0x3f) as u8,
            traffic_class: b[base + field::P_TRAFFIC_CLASS],
            hop_limit: b[base + field::P_HOP_LIMIT],
            sl: get_bits(b, base + field::P_SL, 0, 4),
            subnet_local: get_bits(b, base + field::P_SL, 4, 1) != 0,
            local_ack_timeout: get_bits(b, base + field::P_ACK_TIMEOUT, 0, 5),
        }
    }

    fn write(&self, b: &mut [u8], base: usize) {
        set_u16(b, base + field::P_LOCAL_LID, self.local_lid);
        set_u16(b, base + field::P_REMOTE_LID, self.remote_lid);
        b[base + field::P_LOCAL_GID..base + field::P_LOCAL_GID + 16]
            .copy_from_slice(&self.local_gid);
        b[base + field::P_REMOTE_GID..base + field::P_REMOTE_GID + 16]
            .copy_from_slice(&self.remote_gid);
        set_u32(
            b,
            base + field::P_FLOW_RATE,
            ((self.flow_label & 0xf_ffff) << 12) | u32::from(self.packet_rate & 0x3f),
        );
        b[base + field::P_TRAFFIC_CLASS] = self.traffic_class;
        b[base + field::P_HOP_LIMIT] = self.hop_limit;
        b[base + field::P_SL] = 0;
        set_bits(b, base + field::P_SL, 0, 4, self.sl);
        set_bits(b, base + field::P_SL, 4, 1, u8::from(self.subnet_local));
        // The ACK timeout byte of the alternate path also holds SAP
        // supported (bit 5); the caller writes it after the path.
        set_bits(b, base + field::P_ACK_TIMEOUT, 0, 5, self.local_ack_timeout);
        set_bits(b, base + field::P_ACK_TIMEOUT, 5, 3, 0);
    }

    /// Whether the path is all zero (how a REQ says "no alternate path").
    pub fn is_empty(&self) -> bool {
        *self == Path::default()
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The sender's communication ID.
    pub fn local_comm_id(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_COMM_ID)
    }
    /// Service ID.
    pub fn service_id(&self) -> u64 {
        get_u64(self.b(), field::SERVICE_ID)
    }
    /// The sender's CA GUID.
    pub fn local_ca_guid(&self) -> u64 {
        get_u64(self.b(), field::LOCAL_CA_GUID)
    }
    /// The sender's Q_Key (RD only).
    pub fn local_qkey(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_QKEY)
    }
    /// The sender's QP number.
    pub fn local_qpn(&self) -> u32 {
        get_u24(self.b(), field::LOCAL_QPN)
    }
    /// RDMA READs/atomics the sender accepts at once.
    pub fn responder_resources(&self) -> u8 {
        self.b()[field::RESPONDER_RESOURCES]
    }
    /// The sender's EE context (RD only).
    pub fn local_eecn(&self) -> u32 {
        get_u24(self.b(), field::LOCAL_EECN)
    }
    /// RDMA READs/atomics the sender issues at once.
    pub fn initiator_depth(&self) -> u8 {
        self.b()[field::INITIATOR_DEPTH]
    }
    /// The receiver's EE context (RD only).
    pub fn remote_eecn(&self) -> u32 {
        get_u24(self.b(), field::REMOTE_EECN)
    }
    /// How long the receiver's CM may take to answer (4.096 µs × 2^n).
    pub fn remote_cm_response_timeout(&self) -> u8 {
        get_bits(self.b(), field::BYTE43, 0, 5)
    }
    /// Transport service type (2 bits).
    pub fn transport_service_type(&self) -> u8 {
        get_bits(self.b(), field::BYTE43, 5, 2)
    }
    /// End-to-end flow control.
    pub fn flow_control(&self) -> bool {
        get_bits(self.b(), field::BYTE43, 7, 1) != 0
    }
    /// The PSN the receiver's send queue starts at (= the sender's receive PSN).
    pub fn starting_psn(&self) -> u32 {
        get_u24(self.b(), field::STARTING_PSN)
    }
    /// How long the sender's CM may take to answer.
    pub fn local_cm_response_timeout(&self) -> u8 {
        get_bits(self.b(), field::BYTE47, 0, 5)
    }
    /// Transport retry count (3 bits).
    pub fn retry_count(&self) -> u8 {
        get_bits(self.b(), field::BYTE47, 5, 3)
    }
    /// Partition key.
    pub fn pkey(&self) -> u16 {
        get_u16(self.b(), field::PKEY)
    }
    /// Path MTU (IBTA encoding: 1 = 256 ... 5 = 4096).
    pub fn path_mtu(&self) -> u8 {
        get_bits(self.b(), field::BYTE50, 0, 4)
    }
    /// RDC exists (RD only).
    pub fn rdc_exists(&self) -> bool {
        get_bits(self.b(), field::BYTE50, 4, 1) != 0
    }
    /// RNR retry count (3 bits).
    pub fn rnr_retry_count(&self) -> u8 {
        get_bits(self.b(), field::BYTE50, 5, 3)
    }
    /// How often the sender's CM retries a message (4 bits).
    pub fn max_cm_retries(&self) -> u8 {
        get_bits(self.b(), field::BYTE51, 0, 4)
    }
    /// The sender's QP uses an SRQ.
    pub fn srq(&self) -> bool {
        get_bits(self.b(), field::BYTE51, 4, 1) != 0
    }
    /// Extended transport type (3 bits; 1 = XRC).
    pub fn extended_transport_type(&self) -> u8 {
        get_bits(self.b(), field::BYTE51, 5, 3)
    }
    /// The primary path.
    pub fn primary_path(&self) -> Path {
        Path::read(self.b(), field::PRIMARY_PATH)
    }
    /// The alternate path (all zero when there is none).
    pub fn alternate_path(&self) -> Path {
        Path::read(self.b(), field::ALTERNATE_PATH)
    }
    /// SAP supported.
    pub fn sap_supported(&self) -> bool {
        get_bits(self.b(), field::SAP_SUPPORTED, 5, 1) != 0
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
    /// Set the service ID.
    pub fn set_service_id(&mut self, v: u64) {
        set_u64(self.bm(), field::SERVICE_ID, v)
    }
    /// Set the sender's CA GUID.
    pub fn set_local_ca_guid(&mut self, v: u64) {
        set_u64(self.bm(), field::LOCAL_CA_GUID, v)
    }
    /// Set the sender's Q_Key.
    pub fn set_local_qkey(&mut self, v: u32) {
        set_u32(self.bm(), field::LOCAL_QKEY, v)
    }
    /// Set the sender's QP number.
    pub fn set_local_qpn(&mut self, v: u32) {
        set_u24(self.bm(), field::LOCAL_QPN, v)
    }
    /// Set the responder resources.
    pub fn set_responder_resources(&mut self, v: u8) {
        self.bm()[field::RESPONDER_RESOURCES] = v
    }
    /// Set the sender's EE context.
    pub fn set_local_eecn(&mut self, v: u32) {
        set_u24(self.bm(), field::LOCAL_EECN, v)
    }
    /// Set the initiator depth.
    pub fn set_initiator_depth(&mut self, v: u8) {
        self.bm()[field::INITIATOR_DEPTH] = v
    }
    /// Set the receiver's EE context.
    pub fn set_remote_eecn(&mut self, v: u32) {
        set_u24(self.bm(), field::REMOTE_EECN, v)
    }
    /// Set the remote CM response timeout.
    pub fn set_remote_cm_response_timeout(&mut self, v: u8) {
        set_bits(self.bm(), field::BYTE43, 0, 5, v)
    }
    /// Set the transport service type.
    pub fn set_transport_service_type(&mut self, v: u8) {
        set_bits(self.bm(), field::BYTE43, 5, 2, v)
    }
    /// Set end-to-end flow control.
    pub fn set_flow_control(&mut self, v: bool) {
        set_bits(self.bm(), field::BYTE43, 7, 1, u8::from(v))
    }
    /// Set the starting PSN.
    pub fn set_starting_psn(&mut self, v: u32) {
        set_u24(self.bm(), field::STARTING_PSN, v)
    }
    /// Set the local CM response timeout.
    pub fn set_local_cm_response_timeout(&mut self, v: u8) {
        set_bits(self.bm(), field::BYTE47, 0, 5, v)
    }
    /// Set the retry count.
    pub fn set_retry_count(&mut self, v: u8) {
        set_bits(self.bm(), field::BYTE47, 5, 3, v)
    }
    /// Set the partition key.
    pub fn set_pkey(&mut self, v: u16) {
        set_u16(self.bm(), field::PKEY, v)
    }
    /// Set the path MTU.
    pub fn set_path_mtu(&mut self, v: u8) {
        set_bits(self.bm(), field::BYTE50, 0, 4, v)
    }
    /// Set RDC exists.
    pub fn set_rdc_exists(&mut self, v: bool) {
        set_bits(self.bm(), field::BYTE50, 4, 1, u8::from(v))
    }
    /// Set the RNR retry count.
    pub fn set_rnr_retry_count(&mut self, v: u8) {
        set_bits(self.bm(), field::BYTE50, 5, 3, v)
    }
    /// Set the max CM retries.
    pub fn set_max_cm_retries(&mut self, v: u8) {
        set_bits(self.bm(), field::BYTE51, 0, 4, v)
    }
    /// Set SRQ.
    pub fn set_srq(&mut self, v: bool) {
        set_bits(self.bm(), field::BYTE51, 4, 1, u8::from(v))
    }
    /// Set the extended transport type.
    pub fn set_extended_transport_type(&mut self, v: u8) {
        set_bits(self.bm(), field::BYTE51, 5, 3, v)
    }
    /// Set the primary path.
    pub fn set_primary_path(&mut self, p: &Path) {
        p.write(self.bm(), field::PRIMARY_PATH)
    }
    /// Set the alternate path (clears SAP supported; set it after).
    pub fn set_alternate_path(&mut self, p: &Path) {
        p.write(self.bm(), field::ALTERNATE_PATH)
    }
    /// Set SAP supported.
    pub fn set_sap_supported(&mut self, v: bool) {
        set_bits(self.bm(), field::SAP_SUPPORTED, 5, 1, u8::from(v))
    }
    /// Private data, mutable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[field::PRIVATE_DATA..field::PRIVATE_DATA + PRIVATE_DATA_LEN]
    }
    /// Zero the reserved bytes and bits this view has no setter for.
    pub fn clear_reserved(&mut self) {
        let b = self.bm();
        b[4..8].fill(0);
        b[24..28].fill(0);
    }
}

/// A high-level representation of a REQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// Service ID (rdma_cm: port space << 16 | port).
    pub service_id: u64,
    /// The sender's CA GUID.
    pub local_ca_guid: u64,
    /// The sender's Q_Key (RD only, else 0).
    pub local_qkey: u32,
    /// The sender's QP number.
    pub local_qpn: u32,
    /// Responder resources.
    pub responder_resources: u8,
    /// The sender's EE context (RD only).
    pub local_eecn: u32,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// The receiver's EE context (RD only).
    pub remote_eecn: u32,
    /// Remote CM response timeout (5 bits).
    pub remote_cm_response_timeout: u8,
    /// Transport service type (2 bits).
    pub transport_service_type: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// Starting PSN (24 bits).
    pub starting_psn: u32,
    /// Local CM response timeout (5 bits).
    pub local_cm_response_timeout: u8,
    /// Retry count (3 bits).
    pub retry_count: u8,
    /// Partition key.
    pub pkey: u16,
    /// Path MTU (IBTA encoding).
    pub path_mtu: u8,
    /// RDC exists.
    pub rdc_exists: bool,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// Max CM retries (4 bits).
    pub max_cm_retries: u8,
    /// The sender uses an SRQ.
    pub srq: bool,
    /// Extended transport type (3 bits).
    pub extended_transport_type: u8,
    /// Primary path.
    pub primary: Path,
    /// Alternate path (all zero: none).
    pub alternate: Path,
    /// SAP supported.
    pub sap_supported: bool,
    /// Private data (rdma_cm: a 36-byte [`super::ip`] header, then the user's 56).
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Default for Repr {
    fn default() -> Repr {
        Repr {
            local_comm_id: 0,
            service_id: 0,
            local_ca_guid: 0,
            local_qkey: 0,
            local_qpn: 0,
            responder_resources: 0,
            local_eecn: 0,
            initiator_depth: 0,
            remote_eecn: 0,
            remote_cm_response_timeout: 0,
            transport_service_type: 0,
            flow_control: false,
            starting_psn: 0,
            local_cm_response_timeout: 0,
            retry_count: 0,
            pkey: 0,
            path_mtu: 0,
            rdc_exists: false,
            rnr_retry_count: 0,
            max_cm_retries: 0,
            srq: false,
            extended_transport_type: 0,
            primary: Path::default(),
            alternate: Path::default(),
            sap_supported: false,
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }
}

impl Repr {
    /// Parse a REQ.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] if shorter than 232 bytes.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> crate::Result<Repr> {
        p.check_len()?;
        let mut private_data = [0; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            local_comm_id: p.local_comm_id(),
            service_id: p.service_id(),
            local_ca_guid: p.local_ca_guid(),
            local_qkey: p.local_qkey(),
            local_qpn: p.local_qpn(),
            responder_resources: p.responder_resources(),
            local_eecn: p.local_eecn(),
            initiator_depth: p.initiator_depth(),
            remote_eecn: p.remote_eecn(),
            remote_cm_response_timeout: p.remote_cm_response_timeout(),
            transport_service_type: p.transport_service_type(),
            flow_control: p.flow_control(),
            starting_psn: p.starting_psn(),
            local_cm_response_timeout: p.local_cm_response_timeout(),
            retry_count: p.retry_count(),
            pkey: p.pkey(),
            path_mtu: p.path_mtu(),
            rdc_exists: p.rdc_exists(),
            rnr_retry_count: p.rnr_retry_count(),
            max_cm_retries: p.max_cm_retries(),
            srq: p.srq(),
            extended_transport_type: p.extended_transport_type(),
            primary: p.primary_path(),
            alternate: p.alternate_path(),
            sap_supported: p.sap_supported(),
            private_data,
        })
    }

    /// The length of the message (232).
    pub const fn buffer_len(&self) -> usize {
        super::MSG_LEN
    }

    /// Emit the REQ (reserved fields zero).
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.clear_reserved();
        p.set_local_comm_id(self.local_comm_id);
        p.set_service_id(self.service_id);
        p.set_local_ca_guid(self.local_ca_guid);
        p.set_local_qkey(self.local_qkey);
        p.set_local_qpn(self.local_qpn);
        p.set_responder_resources(self.responder_resources);
        p.set_local_eecn(self.local_eecn);
        p.set_initiator_depth(self.initiator_depth);
        p.set_remote_eecn(self.remote_eecn);
        p.set_remote_cm_response_timeout(self.remote_cm_response_timeout);
        p.set_transport_service_type(self.transport_service_type);
        p.set_flow_control(self.flow_control);
        p.set_starting_psn(self.starting_psn);
        p.set_local_cm_response_timeout(self.local_cm_response_timeout);
        p.set_retry_count(self.retry_count);
        p.set_pkey(self.pkey);
        p.set_path_mtu(self.path_mtu);
        p.set_rdc_exists(self.rdc_exists);
        p.set_rnr_retry_count(self.rnr_retry_count);
        p.set_max_cm_retries(self.max_cm_retries);
        p.set_srq(self.srq);
        p.set_extended_transport_type(self.extended_transport_type);
        p.set_primary_path(&self.primary);
        p.set_alternate_path(&self.alternate);
        p.set_sap_supported(self.sap_supported);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "REQ local_comm_id 0x{:08x} sid {} {} qpn 0x{:06x} psn 0x{:06x} mtu {} \
             rd_atom {}/{} retry {} rnr_retry {} cm_timeout {} cm_retries {}",
            self.local_comm_id,
            super::ServiceId(self.service_id),
            transport_name(self.transport_service_type, self.extended_transport_type),
            self.local_qpn,
            self.starting_psn,
            PathMtu(self.path_mtu),
            self.responder_resources,
            self.initiator_depth,
            self.retry_count,
            super::RnrRetry(self.rnr_retry_count),
            super::Timeout(self.remote_cm_response_timeout),
            self.max_cm_retries,
        )?;
        super::fmt_rdma_cm_private(f, self.service_id, &self.private_data)
    }
}

impl Repr {
    /// How long the sender waits for a REP, REJ or MRA before it sends the
    /// REQ again, in nanoseconds: the receiver's CM response time it
    /// announces plus a round trip of the primary path (twice the packet
    /// life time, which is the local ACK timeout less one: Linux's
    /// `cm_ack_timeout`), as Linux's `ib_send_cm_req` computes it.
    pub fn answer_timeout_nanos(&self) -> u64 {
        let life = self.primary.local_ack_timeout.saturating_sub(1);
        super::timeout_nanos(self.remote_cm_response_timeout) + 2 * super::timeout_nanos(life)
    }
}

/// The name of a transport service type (with the extended type when it is
/// 3): `RC`, `UC`, `RD`, `XRC`.
pub fn transport_name(service_type: u8, extended: u8) -> String {
    match (service_type, extended) {
        (TRANSPORT_RC, _) => "RC".into(),
        (TRANSPORT_UC, _) => "UC".into(),
        (TRANSPORT_RD, _) => "RD".into(),
        (TRANSPORT_EXTENDED, 1) => "XRC".into(),
        (t, e) => format!("transport {t}/{e}"),
    }
}

/// A path MTU in bytes (IBTA encoding 1 = 256 ... 5 = 4096).
pub fn path_mtu_bytes(enc: u8) -> Option<u32> {
    (1..=5).contains(&enc).then(|| 128u32 << enc)
}

/// A path MTU as printed: its bytes, or `invalid(N)`.
struct PathMtu(u8);

impl fmt::Display for PathMtu {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match path_mtu_bytes(self.0) {
            Some(b) => write!(f, "{b}"),
            None => write!(f, "invalid({})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad;

    // The REQ Linux 6.1's rdma_cm sent from rxe1 (10.0.3.2, QP 0x11) for
    // `rping -c -a 10.0.3.1 -p 7174`: fixtures/pcap-cm/rxe-requests-unanswered.pcap,
    // frame 1. Packet life time 18 → local ACK timeout 19; the flow label
    // hashes the ports (45641 × 31 + 7174).
    static MAD: &[u8; 256] = include_bytes!("../../tests/data/cm/rxe-req.mad");

    fn data() -> &'static [u8] {
        &MAD[mad::HEADER_LEN..]
    }

    fn gid(a: [u8; 4]) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&a);
        g
    }

    fn private_data() -> [u8; PRIVATE_DATA_LEN] {
        let mut p = [0u8; PRIVATE_DATA_LEN];
        p[..4].copy_from_slice(&[0x00, 0x40, 0xb2, 0x49]);
        p[16..20].copy_from_slice(&[10, 0, 3, 2]);
        p[32..36].copy_from_slice(&[10, 0, 3, 1]);
        p
    }

    fn primary() -> Path {
        Path {
            local_lid: 0xffff,
            remote_lid: 0xffff,
            local_gid: gid([10, 0, 3, 2]),
            remote_gid: gid([10, 0, 3, 1]),
            flow_label: 0x5b2dd,
            packet_rate: 0,
            traffic_class: 0,
            hop_limit: 64,
            sl: 0,
            subnet_local: false,
            local_ack_timeout: 19,
        }
    }

    fn repr() -> Repr {
        Repr {
            local_comm_id: 0x8389_e999,
            service_id: 0x0000_0000_0106_1c06,
            local_ca_guid: 0x5054_00ff_fe12_3457,
            local_qkey: 0,
            local_qpn: 0x11,
            responder_resources: 1,
            local_eecn: 0,
            initiator_depth: 1,
            remote_eecn: 0,
            remote_cm_response_timeout: 20,
            transport_service_type: TRANSPORT_RC,
            flow_control: false,
            starting_psn: 0xb3_7644,
            local_cm_response_timeout: 20,
            retry_count: 7,
            pkey: 0xffff,
            path_mtu: 3,
            rdc_exists: false,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            srq: false,
            extended_transport_type: 0,
            primary: primary(),
            alternate: Path::default(),
            sap_supported: false,
            private_data: private_data(),
        }
    }

    #[test]
    fn deconstruct_rxe_req() {
        let p = Packet::new_checked(data()).unwrap();
        assert_eq!(p.local_comm_id(), 0x8389_e999);
        assert_eq!(p.service_id(), 0x0106_1c06);
        assert_eq!(p.local_ca_guid(), 0x5054_00ff_fe12_3457);
        assert_eq!(p.local_qkey(), 0);
        assert_eq!(p.local_qpn(), 0x11);
        assert_eq!(p.responder_resources(), 1);
        assert_eq!(p.local_eecn(), 0);
        assert_eq!(p.initiator_depth(), 1);
        assert_eq!(p.remote_eecn(), 0);
        assert_eq!(p.remote_cm_response_timeout(), 20);
        assert_eq!(p.transport_service_type(), TRANSPORT_RC);
        assert!(!p.flow_control());
        assert_eq!(p.starting_psn(), 0xb3_7644);
        assert_eq!(p.local_cm_response_timeout(), 20);
        assert_eq!(p.retry_count(), 7);
        assert_eq!(p.pkey(), 0xffff);
        assert_eq!(p.path_mtu(), 3);
        assert!(!p.rdc_exists());
        assert_eq!(p.rnr_retry_count(), 7);
        assert_eq!(p.max_cm_retries(), 15);
        assert!(!p.srq());
        assert_eq!(p.extended_transport_type(), 0);
        assert_eq!(p.primary_path(), primary());
        assert!(p.alternate_path().is_empty());
        assert!(!p.sap_supported());
        assert_eq!(p.private_data(), &private_data()[..]);
    }

    #[test]
    fn construct_rxe_req() {
        let mut bytes = [0xa5u8; super::super::MSG_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.clear_reserved();
        p.set_local_comm_id(0x8389_e999);
        p.set_service_id(0x0106_1c06);
        p.set_local_ca_guid(0x5054_00ff_fe12_3457);
        p.set_local_qkey(0);
        p.set_local_qpn(0x11);
        p.set_responder_resources(1);
        p.set_local_eecn(0);
        p.set_initiator_depth(1);
        p.set_remote_eecn(0);
        p.set_remote_cm_response_timeout(20);
        p.set_transport_service_type(TRANSPORT_RC);
        p.set_flow_control(false);
        p.set_starting_psn(0xb3_7644);
        p.set_local_cm_response_timeout(20);
        p.set_retry_count(7);
        p.set_pkey(0xffff);
        p.set_path_mtu(3);
        p.set_rdc_exists(false);
        p.set_rnr_retry_count(7);
        p.set_max_cm_retries(15);
        p.set_srq(false);
        p.set_extended_transport_type(0);
        p.set_primary_path(&primary());
        p.set_alternate_path(&Path::default());
        p.set_sap_supported(false);
        p.private_data_mut().copy_from_slice(&private_data());
        assert_eq!(&bytes[..], data());
    }

    crate::cm::capture_round_trip!(data(), repr());
}
