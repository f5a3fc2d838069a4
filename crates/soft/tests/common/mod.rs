//! What the soft NIC's integration tests share.

#![allow(dead_code)]

use rdmakit_soft::proto::{Access, AttrMask, Mtu, QpAttr, QpState, QpType};
use rdmakit_soft::{Av, Device, DeviceConfig, QpInit};

/// A device under the fault plan `plan` (the grammar of
/// `RDMAKIT_SOFT_FAULTS`), with a registry of its own.
pub fn open(plan: &str) -> Device {
    Device::open(DeviceConfig {
        shared_registry: false,
        faults: plan.parse().unwrap(),
        ..DeviceConfig::default()
    })
    .unwrap()
}

/// An RC (or `qp_type`) QP's init attributes: 8 WRs and one SGE each way,
/// 16 bytes inline, selective signalling.
pub fn init(pd: u32, cq: u32, qp_type: QpType) -> QpInit {
    QpInit {
        max_inline_data: 16,
        ..QpInit::new(qp_type, pd, cq, 8)
    }
}

/// Takes RC QP `qpn` RESET→INIT→RTR→RTS with the attributes in `at` (its
/// `qp_state` is set here), the peer at `av` (a GID: traffic class 0).
pub fn to_rts(d: &Device, qpn: u32, at: &QpAttr, av: impl Into<Av>) {
    let mut a = at.clone();
    for (state, mask, g) in [
        (QpState::Init, AttrMask::RC_INIT, None),
        (QpState::Rtr, AttrMask::RC_RTR, Some(av.into())),
        (QpState::Rts, AttrMask::RC_RTS, None),
    ] {
        a.qp_state = state;
        d.modify_qp(qpn, &a, mask, g)
            .unwrap_or_else(|e| panic!("QP {qpn:#x} to {state:?}: {e}"));
    }
}

/// The attributes RC pairs connect with: every access, MTU 1024, PSNs from
/// 100, four RDMA reads each way, RNR timer 1, ACK timeout 14, seven retries
/// and seven RNR retries (`dest_qp_num` is set by [`rc_pair`]).
pub fn rc_attr() -> QpAttr {
    QpAttr {
        qp_access_flags: Access::all(),
        port_num: 1,
        path_mtu: Mtu::Mtu1024,
        rq_psn: 100,
        max_dest_rd_atomic: 4,
        min_rnr_timer: 1,
        sq_psn: 100,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 4,
        ..QpAttr::default()
    }
}

/// Two QPs of `d` created with `init` and connected to each other with
/// `at`, each taken to RTS.
pub fn rc_pair(d: &Device, init: &QpInit, at: &QpAttr) -> (u32, u32) {
    let a = d.create_qp(init).unwrap();
    let b = d.create_qp(init).unwrap();
    let gid = d.gid(1, 0).unwrap();
    for (me, peer) in [(a, b), (b, a)] {
        let at = QpAttr {
            dest_qp_num: peer,
            ..at.clone()
        };
        to_rts(d, me, &at, gid);
    }
    (a, b)
}
