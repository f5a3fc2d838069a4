//! What the soft NIC's integration tests share.

#![allow(dead_code)]

use rdmakit_soft::proto::{AttrMask, QpAttr, QpState, QpType};
use rdmakit_soft::{Device, Gid, QpInit};

/// An RC (or `qp_type`) QP's init attributes: 8 WRs and one SGE each way,
/// 16 bytes inline, selective signalling.
pub fn init(pd: u32, cq: u32, qp_type: QpType) -> QpInit {
    QpInit {
        max_inline_data: 16,
        ..QpInit::new(qp_type, pd, cq, 8)
    }
}

/// Takes RC QP `qpn` RESET→INIT→RTR→RTS with the attributes in `at` (its
/// `qp_state` is set here), the peer at `gid`.
pub fn to_rts(d: &Device, qpn: u32, at: &QpAttr, gid: Gid) {
    let mut a = at.clone();
    for (state, mask, g) in [
        (QpState::Init, AttrMask::RC_INIT, None),
        (QpState::Rtr, AttrMask::RC_RTR, Some(gid)),
        (QpState::Rts, AttrMask::RC_RTS, None),
    ] {
        a.qp_state = state;
        d.modify_qp(qpn, &a, mask, g)
            .unwrap_or_else(|e| panic!("QP {qpn:#x} to {state:?}: {e}"));
    }
}
