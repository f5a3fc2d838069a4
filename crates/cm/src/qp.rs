//! QP attributes a connection dictates (`ib_cm_init_qp_attr` and rdma_cm's
//! additions): what librdmacm hands to `ibv_modify_qp` for INIT, RTR and RTS.

use rdmakit_proto::{Access, AttrMask, QpState};

use crate::Gid;

/// The address vector of a connected QP on RoCE (always with a GRH).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AddressVector {
    /// The peer's GID.
    pub dgid: Gid,
    /// Index of the local GID in the port's table.
    pub sgid_index: u8,
    /// Flow label.
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Service level.
    pub sl: u8,
    /// Static rate (IBTA rate encoding, 0 = port current).
    pub static_rate: u8,
    /// Port number (1).
    pub port: u8,
}

/// The attributes of one modify, with the mask of the fields that count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttrs {
    /// Which fields are set (`IBV_QP_*`).
    pub mask: AttrMask,
    /// Target state.
    pub state: QpState,
    /// `qp_access_flags`.
    pub access: Access,
    /// P_Key index.
    pub pkey_index: u16,
    /// Port.
    pub port: u8,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Address vector.
    pub av: AddressVector,
    /// Path MTU (IBTA encoding 1..=5).
    pub path_mtu: u8,
    /// Remote QP number.
    pub dest_qpn: u32,
    /// Receive PSN.
    pub rq_psn: u32,
    /// Responder resources.
    pub max_dest_rd_atomic: u8,
    /// Minimum RNR NAK timer.
    pub min_rnr_timer: u8,
    /// Local ACK timeout.
    pub timeout: u8,
    /// Retry count.
    pub retry_cnt: u8,
    /// RNR retry count.
    pub rnr_retry: u8,
    /// Send PSN.
    pub sq_psn: u32,
    /// Initiator depth.
    pub max_rd_atomic: u8,
}

impl QpAttrs {
    /// Attributes for `state` with an empty mask (only STATE set) and zero fields.
    pub fn new(state: QpState) -> QpAttrs {
        QpAttrs {
            mask: AttrMask::STATE,
            state,
            access: Access::empty(),
            pkey_index: 0,
            port: 1,
            qkey: 0,
            av: AddressVector::default(),
            path_mtu: 0,
            dest_qpn: 0,
            rq_psn: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            sq_psn: 0,
            max_rd_atomic: 0,
        }
    }
}
