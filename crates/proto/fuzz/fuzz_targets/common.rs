//! What the fuzz targets share: the engine they drive, brought up to RTS.

use rdmakit_proto::{Access, AddressHandle, Mtu, Pd, Qp, QpAttr, QpConfig, QpState, QpType};

/// The engine's QPN: the packets a target patches name it.
pub const QPN: u32 = 0x11;

/// A QP of type `t` in RTS (peer QP 0x22, receive PSN 100, send PSN 500, MTU
/// 256, the shortest timers) whose peer may do what `access` grants.
pub fn rts_qp(t: QpType, access: Access) -> Qp {
    let mut qp = Qp::new(QpConfig::new(QPN, t, Pd(1)));
    let a = QpAttr {
        path_mtu: Mtu::Mtu256,
        qkey: 0x1111_1111,
        rq_psn: 100,
        sq_psn: 500,
        dest_qp_num: 0x22,
        qp_access_flags: access,
        ah: AddressHandle(1),
        timeout: 1,
        retry_cnt: 3,
        rnr_retry: 2,
        min_rnr_timer: 1,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        ..QpAttr::default()
    };
    qp.bring_up(&a, QpState::Rts).expect("bring-up");
    qp
}
