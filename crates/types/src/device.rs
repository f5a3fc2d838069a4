//! What a device takes (QP creation parameters, send requests) and what it
//! raises (asynchronous events), in every provider's terms.

use crate::qp::QpType;
use crate::wr::SendWr;

/// An asynchronous event (`struct ibv_async_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncEvent {
    /// CQ overrun: a completion was lost (`IBV_EVENT_CQ_ERR`).
    CqErr {
        /// The CQ.
        cq: u32,
    },
    /// The QP entered ERR on an error that is not an access or request
    /// violation (`IBV_EVENT_QP_FATAL`).
    QpFatal {
        /// The QP.
        qpn: u32,
    },
    /// Invalid request local work queue error (`IBV_EVENT_QP_REQ_ERR`).
    QpReqErr {
        /// The QP.
        qpn: u32,
    },
    /// Local access violation (`IBV_EVENT_QP_ACCESS_ERR`).
    QpAccessErr {
        /// The QP.
        qpn: u32,
    },
    /// The SRQ fell below its armed limit (`IBV_EVENT_SRQ_LIMIT_REACHED`).
    SrqLimitReached {
        /// The SRQ.
        srq: u32,
    },
    /// The port's link went down (`IBV_EVENT_PORT_ERR`).
    PortErr {
        /// The port (from 1).
        port: u8,
    },
    /// The port's link came up (`IBV_EVENT_PORT_ACTIVE`).
    PortActive {
        /// The port (from 1).
        port: u8,
    },
    /// The device failed; every object is unusable
    /// (`IBV_EVENT_DEVICE_FATAL`).
    DeviceFatal,
}

/// Creation parameters of a QP (`struct ibv_qp_init_attr`).
#[derive(Clone, Debug)]
pub struct QpInit {
    /// Transport.
    pub qp_type: QpType,
    /// Protection domain.
    pub pd: u32,
    /// CQ for send completions.
    pub send_cq: u32,
    /// CQ for receive completions.
    pub recv_cq: u32,
    /// Shared receive queue, if any.
    pub srq: Option<u32>,
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth (ignored with an SRQ).
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Largest inline send.
    pub max_inline_data: u32,
    /// Every send WR generates a completion.
    pub sq_sig_all: bool,
}

impl QpInit {
    /// A `qp_type` QP on `pd` completing to `cq` both ways, no SRQ, `depth`
    /// WRs and one SGE each way, nothing inline, selective signalling
    /// (change the fields that matter with struct update syntax).
    pub fn new(qp_type: QpType, pd: u32, cq: u32, depth: u32) -> QpInit {
        QpInit {
            qp_type,
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            max_send_wr: depth,
            max_recv_wr: depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
            sq_sig_all: false,
        }
    }
}

/// A send work request as the device takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendRequest {
    /// The request; for UD `wr.ud.ah` holds the soft AH handle.
    pub wr: SendWr,
    /// `IBV_SEND_INLINE`: the SGEs are copied at post time, lkeys ignored.
    pub inline: bool,
}
