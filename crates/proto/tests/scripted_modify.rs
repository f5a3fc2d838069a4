//! Scripted state tests: the modify-QP table, post_send state checks, and
//! the flush of outstanding WRs on ERR (fixture: scripted/mod.rs).

mod scripted;

use scripted::*;

/// RC's INIT→RTR and RTR→RTS masks as the spec writes them (IBTA table 91,
/// ib_modify_qp_is_ok), kept apart from the engine's own table under test.
const RC_RTR: AttrMask = AttrMask::RC_RTR;
const RC_RTS: AttrMask = AttrMask::RC_RTS;

// ---------------------------------------------------------------------------
// Modify-QP table
// ---------------------------------------------------------------------------

#[test]
fn modify_rejects_missing_and_extra_attributes() {
    let mut qp = Qp::new(QpConfig::new(QPN, QpType::Rc, Pd(1)));
    let a = QpAttr {
        qp_state: QpState::Init,
        ..attrs()
    };
    // Missing ACCESS_FLAGS.
    let m = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT;
    assert!(qp.modify(&a, m).is_err());
    // Extra QKEY on RC.
    let m = m | AttrMask::ACCESS_FLAGS | AttrMask::QKEY;
    assert!(qp.modify(&a, m).is_err());
    assert_eq!(qp.state(), QpState::Reset);
    // RESET -> RTR skips INIT.
    let r = QpAttr {
        qp_state: QpState::Rtr,
        ..attrs()
    };
    assert!(qp.modify(&r, RC_RTR).is_err());
    // Out-of-range values.
    let mut f = qp_in(QpType::Rc, QpState::Rtr, &attrs());
    let bad = QpAttr {
        qp_state: QpState::Rts,
        retry_cnt: 8,
        ..attrs()
    };
    assert!(f.qp.modify(&bad, RC_RTS).is_err());
    let bad = QpAttr {
        qp_state: QpState::Rts,
        max_rd_atomic: 200,
        ..attrs()
    };
    assert!(f.qp.modify(&bad, RC_RTS).is_err());
    assert_eq!(f.qp.state(), QpState::Rtr);
    // CUR_STATE must match.
    let a = QpAttr {
        qp_state: QpState::Rts,
        cur_qp_state: QpState::Init,
        ..attrs()
    };
    assert!(f.qp.modify(&a, RC_RTS | AttrMask::CUR_STATE).is_err());
    let a = QpAttr {
        qp_state: QpState::Rts,
        cur_qp_state: QpState::Rtr,
        ..attrs()
    };
    f.qp.modify(&a, RC_RTS | AttrMask::CUR_STATE).unwrap();
    assert_eq!(f.qp.state(), QpState::Rts);
    // RTS -> SQD -> RTS, RTS -> RTS with MIN_RNR_TIMER.
    let a = QpAttr {
        qp_state: QpState::Sqd,
        ..attrs()
    };
    f.qp.modify(&a, AttrMask::STATE | AttrMask::EN_SQD_ASYNC_NOTIFY)
        .unwrap();
    let a = QpAttr {
        qp_state: QpState::Rts,
        ..attrs()
    };
    f.qp.modify(&a, AttrMask::STATE).unwrap();
    f.qp.modify(&a, AttrMask::MIN_RNR_TIMER).unwrap();
    assert!(f.qp.modify(&a, AttrMask::PATH_MTU).is_err());
}

#[test]
fn modify_table_every_state_pair() {
    use QpState::*;
    // Transitions with STATE alone that are valid for RC.
    let ok_bare = [
        (Reset, Reset),
        (Init, Reset),
        (Init, Err),
        (Rtr, Reset),
        (Rtr, Err),
        (Rts, Reset),
        (Rts, Err),
        (Rts, Rts),
        (Rts, Sqd),
        (Sqd, Reset),
        (Sqd, Err),
        (Sqd, Rts),
        (Sqd, Sqd),
        (Sqe, Reset),
        (Sqe, Err),
        (Err, Reset),
        (Err, Err),
        (Init, Init),
    ];
    for cur in QpState::ALL {
        for next in QpState::ALL {
            let ok = rdmakit_proto::modify_is_ok(cur, next, QpType::Rc, AttrMask::STATE);
            assert_eq!(ok, ok_bare.contains(&(cur, next)), "RC {cur:?}->{next:?}");
        }
    }
    assert!(rdmakit_proto::modify_is_ok(
        Sqe,
        Rts,
        QpType::Ud,
        AttrMask::STATE | AttrMask::QKEY
    ));
    assert!(!rdmakit_proto::modify_is_ok(
        Sqe,
        Rts,
        QpType::Uc,
        AttrMask::STATE | AttrMask::QKEY
    ));
    assert!(rdmakit_proto::modify_is_ok(
        Init,
        Rtr,
        QpType::Ud,
        AttrMask::STATE | AttrMask::QKEY
    ));
    assert!(rdmakit_proto::modify_is_ok(
        Rtr,
        Rts,
        QpType::Uc,
        AttrMask::STATE | AttrMask::SQ_PSN
    ));
    assert!(!rdmakit_proto::modify_is_ok(
        Rtr,
        Rts,
        QpType::Rc,
        AttrMask::STATE | AttrMask::SQ_PSN
    ));
}

#[test]
fn post_send_state_and_opcode_checks() {
    let mut f = qp_in(QpType::Rc, QpState::Rtr, &attrs());
    let wr = SendWr::new(1, SendOp::Send, vec![]);
    assert_eq!(
        f.qp.post_send(wr.clone()),
        Err(rdmakit_proto::PostError::InvalidState)
    );
    let mut uc = qp_rts(QpType::Uc);
    let rd = SendWr::new(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0,
        },
        vec![],
    );
    assert_eq!(
        uc.qp.post_send(rd),
        Err(rdmakit_proto::PostError::InvalidOpcode)
    );
    let mut ud = qp_rts(QpType::Ud);
    assert_eq!(
        ud.qp.post_send(wr),
        Err(rdmakit_proto::PostError::InvalidArgument)
    );
}

// ---------------------------------------------------------------------------
// Flush on ERR
// ---------------------------------------------------------------------------

#[test]
fn error_flushes_every_outstanding_wr_in_order() {
    let mut f = qp_rts(QpType::Rc);
    for i in 0..3 {
        f.post_recv(100 + i, 0, 64);
    }
    for i in 0..4 {
        let sge = Sge {
            addr: BASE,
            length: 10,
            lkey: f.lkey,
        };
        f.qp.post_send(SendWr::new(i, SendOp::Send, vec![sge]))
            .unwrap();
    }
    let sent = f.recv();
    assert_eq!(sent.len(), 4);
    let a = QpAttr {
        qp_state: QpState::Err,
        ..attrs()
    };
    f.qp.modify(&a, AttrMask::STATE).unwrap();
    let wcs = f.wcs();
    let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 100, 101, 102]);
    assert!(wcs.iter().all(|w| w.status == WcStatus::WrFlushErr));
    // Posting in ERR completes at once with a flush.
    f.post_recv(7, 0, 8);
    assert_eq!(f.wcs()[0].status, WcStatus::WrFlushErr);
    f.recv_nothing();
    // RESET discards silently, then the QP can be brought up again.
    let a = QpAttr {
        qp_state: QpState::Reset,
        ..attrs()
    };
    f.qp.modify(&a, AttrMask::STATE).unwrap();
    assert!(f.wcs().is_empty());
}

#[test]
fn bring_up_stops_where_asked_and_only_starts_from_reset() {
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        for upto in [QpState::Init, QpState::Rtr, QpState::Rts] {
            let mut qp = Qp::new(QpConfig::new(QPN, t, Pd(1)));
            qp.bring_up(&attrs(), upto).unwrap();
            assert_eq!(qp.state(), upto, "{t:?}");
        }
        let mut qp = Qp::new(QpConfig::new(QPN, t, Pd(1)));
        for bad in [QpState::Reset, QpState::Sqd, QpState::Err] {
            assert!(qp.bring_up(&attrs(), bad).is_err());
            assert_eq!(qp.state(), QpState::Reset);
        }
        qp.bring_up(&attrs(), QpState::Rts).unwrap();
        assert!(qp.bring_up(&attrs(), QpState::Rts).is_err());
        assert_eq!(qp.state(), QpState::Rts);
    }
}
