//! Work requests and work completions.

use crate::qp::{AddressHandle, QpType};

/// One scatter/gather element (`struct ibv_sge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sge {
    /// Virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the region holding it.
    pub lkey: u32,
}

/// A memory-window bind (`IBV_WR_BIND_MW`, or `ibv_bind_mw` for a type 1
/// window): make `[addr, addr + length)` of the MR with `mr_lkey`
/// reachable through the window with `access`, under the window's new key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MwBind {
    /// The window's key before the bind (it names the window).
    pub mw_rkey: u32,
    /// Its key after the bind (same index, the consumer's 8 key bits).
    pub new_rkey: u32,
    /// The lkey of the MR the window opens onto.
    pub mr_lkey: u32,
    /// First byte (the MR's virtual address space).
    pub addr: u64,
    /// Length; 0 unbinds a type 1 window.
    pub length: u64,
    /// Remote rights the window grants.
    pub access: crate::qp::Access,
    /// Posted through `ibv_bind_mw` (a type 1 window) rather than as a
    /// send work request (type 2).
    pub type1: bool,
}

/// The operation of a send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendWithImm {
        /// Immediate data (host order; big-endian on the wire).
        imm: u32,
    },
    /// SEND with invalidate: the responder invalidates `rkey`.
    SendWithInv {
        /// Remote key to invalidate.
        rkey: u32,
    },
    /// RDMA WRITE.
    Write {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate (consumes a receive WQE at the responder).
    WriteWithImm {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ into the local scatter list.
    Read {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// 8-byte atomic compare-and-swap; the original value lands in the
    /// (8-byte) local scatter list.
    CompareSwap {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// 8-byte atomic fetch-and-add.
    FetchAdd {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Addend.
        add: u64,
    },
    /// Binds a memory window (a local operation: nothing goes on the wire;
    /// it takes effect when it reaches the head of the send queue and
    /// completes in order).
    BindMw(MwBind),
    /// Invalidates a (type 2) memory window's key locally.
    LocalInv {
        /// The key to invalidate.
        rkey: u32,
    },
}

impl SendOp {
    /// Whether a QP of type `t` can carry this operation (RC: all; UC: SEND
    /// and WRITE, with immediate; UD: SEND, with immediate).
    pub const fn allowed_on(&self, t: QpType) -> bool {
        match t {
            QpType::Rc => true,
            QpType::Uc => matches!(
                self,
                SendOp::Send
                    | SendOp::SendWithImm { .. }
                    | SendOp::Write { .. }
                    | SendOp::WriteWithImm { .. }
                    | SendOp::BindMw(_)
            ),
            QpType::Ud => matches!(self, SendOp::Send | SendOp::SendWithImm { .. }),
        }
    }

    /// READ or atomic: needs a responder resource and a response.
    pub const fn is_rd_atomic(&self) -> bool {
        matches!(
            self,
            SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
        )
    }

    /// Compare-and-swap or fetch-and-add.
    pub const fn is_atomic(&self) -> bool {
        matches!(self, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }

    /// A local operation (memory-window bind, local invalidate): executed
    /// by the requester, never sent.
    pub const fn is_local(&self) -> bool {
        matches!(self, SendOp::BindMw(_) | SendOp::LocalInv { .. })
    }

    /// The completion opcode for this operation.
    pub const fn wc_opcode(&self) -> WcOpcode {
        match self {
            SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. } => {
                WcOpcode::Send
            }
            SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WcOpcode::RdmaWrite,
            SendOp::Read { .. } => WcOpcode::RdmaRead,
            SendOp::CompareSwap { .. } => WcOpcode::CompSwap,
            SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
            SendOp::BindMw(_) => WcOpcode::BindMw,
            SendOp::LocalInv { .. } => WcOpcode::LocalInv,
        }
    }
}

/// Destination of a UD send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UdDest {
    /// Where to send the packet.
    pub ah: AddressHandle,
    /// Remote QPN.
    pub remote_qpn: u32,
    /// Remote Q_Key; a value with bit 31 set means "use the QP's own Q_Key".
    pub remote_qkey: u32,
}

/// A send work request (`struct ibv_send_wr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// Caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local buffers (gathered for SEND/WRITE, scattered for READ/atomics).
    pub sg_list: Vec<Sge>,
    /// Generate a completion on success (`IBV_SEND_SIGNALED`).
    pub signaled: bool,
    /// Wait for prior READ/atomics to complete (`IBV_SEND_FENCE`).
    pub fence: bool,
    /// Solicited event (`IBV_SEND_SOLICITED`): sets the SE bit of the last packet.
    pub solicited: bool,
    /// UD only: the destination.
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A signaled request without fence or solicited event.
    pub fn new(wr_id: u64, op: SendOp, sg_list: Vec<Sge>) -> SendWr {
        SendWr {
            wr_id,
            op,
            sg_list,
            signaled: true,
            fence: false,
            solicited: false,
            ud: None,
        }
    }
}

/// A receive work request (`struct ibv_recv_wr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvWr {
    /// Caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// Buffers the incoming message is scattered into.
    pub sg_list: Vec<Sge>,
}

/// `enum ibv_wc_status`.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WcStatus {
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    LocProtErr = 4,
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
    TmErr = 22,
    TmRndvIncomplete = 23,
}

/// `enum ibv_wc_opcode`.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    CompSwap = 3,
    FetchAdd = 4,
    BindMw = 5,
    LocalInv = 6,
    Recv = 128,
    RecvRdmaWithImm = 129,
}

/// A work completion (`struct ibv_wc`). On error only `wr_id`, `status`,
/// `qp_num` and `vendor_err` are meaningful.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wc {
    /// The request's identifier.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// Bytes received (receive completions; for UD it includes the 40-byte GRH area).
    pub byte_len: u32,
    /// Immediate data, if the message carried one.
    pub imm_data: Option<u32>,
    /// The rkey invalidated by a SEND with invalidate.
    pub invalidated_rkey: Option<u32>,
    /// Local QPN.
    pub qp_num: u32,
    /// UD: the sender's QPN.
    pub src_qp: u32,
    /// UD: the GRH area holds a real GRH (`IBV_WC_GRH`).
    pub grh: bool,
    /// Engine-specific detail of an error (0 on success).
    pub vendor_err: u32,
}

impl Wc {
    /// True for completions of the receive queue.
    pub const fn is_recv(&self) -> bool {
        matches!(self.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm)
    }
}
