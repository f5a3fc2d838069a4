//! Bad input: invalid work requests, invalid modifies, exhausted limits, and
//! a peer that disappears.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmakit_verbs::{
    Access, AsyncEvent, AttrMask, ConnectOpts, Context, Cq, DeviceConfig, Layer, Limits, Pd, Qp,
    QpAttr, QpState, QpType, SendOp, SendWr, Sge, WcStatus,
};

const T: Duration = Duration::from_secs(10);

fn open(limits: Limits) -> (Arc<Context>, Arc<Pd>, Arc<Cq>) {
    let ctx = Context::open_soft(DeviceConfig {
        limits,
        ..DeviceConfig::default()
    })
    .unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64, None).unwrap();
    (ctx, pd, cq)
}

fn rc_pair(pa: &Arc<Pd>, ca: &Arc<Cq>, pb: &Arc<Pd>, cb: &Arc<Cq>, opts: ConnectOpts) -> (Qp, Qp) {
    let qa = pa
        .qp_builder(QpType::Rc, ca)
        .max_send_sge(2)
        .max_inline_data(16)
        .build()
        .unwrap()
        .into_init(opts)
        .unwrap();
    let qb = pb
        .qp_builder(QpType::Rc, cb)
        .build()
        .unwrap()
        .into_init(opts)
        .unwrap();
    let (ea, eb) = (qa.endpoint().unwrap(), qb.endpoint().unwrap());
    (
        qa.connect(&eb).unwrap().ready_to_send().unwrap(),
        qb.connect(&ea).unwrap().ready_to_send().unwrap(),
    )
}

#[test]
fn max_qp_exhaustion_gives_einval_like_rxe_and_destroy_frees_the_slot() {
    let (_ctx, pd, cq) = open(Limits {
        max_qp: 16,
        ..Limits::default()
    });
    let qps: Vec<Qp> = (0..16)
        .map(|_| pd.qp_builder(QpType::Rc, &cq).build().unwrap())
        .collect();
    let e = pd.qp_builder(QpType::Rc, &cq).build().unwrap_err();
    assert_eq!(
        (e.verb, e.errno.name(), e.layer),
        ("ibv_create_qp", "EINVAL", Layer::Kernel)
    );
    drop(qps);
    assert!(pd.qp_builder(QpType::Rc, &cq).build().is_ok());
    let e = pd
        .qp_builder(QpType::Rc, &cq)
        .max_send_wr(1 << 20)
        .build()
        .unwrap_err();
    assert_eq!(e.errno.name(), "EINVAL");
    let e = pd.alloc_buf(0, Access::all()).unwrap_err();
    assert_eq!(e.layer, Layer::Application);
    let e = pd.alloc_buf(64, Access::REMOTE_WRITE).unwrap_err();
    assert_eq!((e.verb, e.errno.name()), ("ibv_reg_mr", "EINVAL"));
}

#[test]
fn invalid_work_requests_fail_immediately_or_complete_with_loc_errors() {
    let (ctx_a, pa, ca) = open(Limits::default());
    let (_ctx_b, pb, cb) = open(Limits::default());
    let buf = pa.alloc_buf(4096, Access::all()).unwrap();
    let bbuf = pb.alloc_buf(4096, Access::all()).unwrap();

    // Posting in RESET: EINVAL for sends and receives.
    let reset = pa.qp_builder(QpType::Rc, &ca).build().unwrap();
    let e = reset.send(1, &buf, 0..8).unwrap_err();
    assert_eq!(
        (e.bad_wr, e.errno.name(), e.layer),
        (Some(0), "EINVAL", Layer::Library)
    );
    assert_eq!(
        reset.recv(1, &buf, 0..8).unwrap_err().errno.name(),
        "EINVAL"
    );

    // An invalid modify (RESET -> RTR) is refused before the provider.
    let e = reset
        .modify(
            &QpAttr {
                qp_state: QpState::Rtr,
                ..QpAttr::default()
            },
            AttrMask::STATE,
            None,
        )
        .unwrap_err();
    assert_eq!(
        (e.verb, e.errno.name(), e.layer),
        ("ibv_modify_qp", "EINVAL", Layer::Kernel)
    );
    // RESET -> INIT without the required PORT bit.
    let e = reset
        .modify(
            &QpAttr {
                qp_state: QpState::Init,
                ..QpAttr::default()
            },
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::ACCESS_FLAGS,
            None,
        )
        .unwrap_err();
    assert!(e.detail.contains("ib_modify_qp_is_ok"));

    let (qa, qb) = rc_pair(&pa, &ca, &pb, &cb, ConnectOpts::default());
    qb.recv(1, &bbuf, 0..64).unwrap();
    let sge = buf.sge(0..8).unwrap();
    // Too many SGEs (max_send_sge 2).
    let wr = SendWr::new(2, SendOp::Send, vec![sge; 3]);
    let e = qa
        .post_send_wrs(&[SendWr::new(1, SendOp::Send, vec![sge]), wr])
        .unwrap_err();
    assert_eq!((e.bad_wr, e.errno.name()), (Some(1), "EINVAL"));
    let text = e.to_string();
    assert!(
        text.starts_with("ibv_post_send failed with EINVAL (22) (library layer): 3 SGEs"),
        "{text}"
    );
    assert!(text.ends_with("(work request 1 of the list)"), "{text}");
    // Inline too large (max_inline_data 16).
    let e = qa.send_inline(3, &[0u8; 17]).unwrap_err();
    assert_eq!(e.errno.name(), "EINVAL");
    assert!(e.detail.contains("inline"));
    // Misaligned atomic.
    let e = qa.fetch_add(4, &buf, 0, bbuf.remote(4), 1).unwrap_err();
    assert_eq!(e.errno.name(), "EINVAL");
    // The first (valid) SEND of the list went out and completes.

    // Opcode invalid for the QP type: WRITE on UD.
    let ud = pa
        .qp_builder(QpType::Ud, &ca)
        .build()
        .unwrap()
        .into_init(ConnectOpts::default())
        .unwrap();
    let ep = ud.endpoint().unwrap();
    let ud = ud.connect(&ep).unwrap().ready_to_send().unwrap();
    let e = ud.write(5, &buf, 0..8, bbuf.remote(0)).unwrap_err();
    assert_eq!(e.errno.name(), "EINVAL");
    // UD send without an AH.
    let e = ud
        .post_send_wrs(&[SendWr::new(6, SendOp::Send, vec![sge])])
        .unwrap_err();
    assert_eq!(e.errno.name(), "EINVAL");

    // Bad lkey: not an errno, a LOC_PROT_ERR completion, the RC QP goes to
    // ERR, and the QP access error async event is raised.
    let bad = Sge {
        lkey: sge.lkey ^ 0x1,
        ..sge
    };
    qa.post_send_wrs(&[SendWr::new(
        7,
        SendOp::Write {
            remote_addr: bbuf.remote(0).addr,
            rkey: bbuf.remote(0).rkey,
        },
        vec![bad],
    )])
    .unwrap();
    let wcs = ca.wait(2, T).unwrap();
    let st: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(st, [(1, WcStatus::Success), (7, WcStatus::LocProtErr)]);
    assert_eq!(qa.state().unwrap(), QpState::Err);
    assert_eq!(
        ctx_a.get_async_event(T),
        Some(AsyncEvent::QpAccessErr { qpn: qa.qpn() })
    );
    // In ERR, new sends complete with WR_FLUSH_ERR.
    qa.send(8, &buf, 0..8).unwrap();
    assert_eq!(ca.wait(1, T).unwrap()[0].status, WcStatus::WrFlushErr);
    // No descriptor leaked on any of those paths.
    let (sq, rq) = ctx_a.soft().unwrap().qp_ring_stats(qa.qpn()).unwrap();
    assert!(sq.no_leak() && rq.no_leak(), "{sq:?} {rq:?}");
    assert_eq!(sq.free, sq.capacity);
}

#[test]
fn peer_that_disappears_gives_retry_exc_err_not_a_hang() {
    let (_ctx_a, pa, ca) = open(Limits::default());
    let (ctx_b, pb, cb) = open(Limits::default());
    let opts = ConnectOpts {
        timeout: 8, // 4.096 us * 2^8 = ~1 ms
        retry_cnt: 2,
        ..ConnectOpts::default()
    };
    let (qa, qb) = rc_pair(&pa, &ca, &pb, &cb, opts);
    let buf = pa.alloc_buf(64, Access::all()).unwrap();
    let remote = {
        let bb = pb.alloc_buf(64, Access::all()).unwrap();
        bb.remote(0)
    };
    // Receives posted and never needed: they wait in the ring (no datagram
    // fetched them) and must still be flushed when the QP fails.
    qa.recv(10, &buf, 0..64).unwrap();
    qa.recv(11, &buf, 0..64).unwrap();
    // The peer process "dies": every object and the device itself go away.
    drop(qb);
    drop((pb, cb, ctx_b));
    let start = Instant::now();
    qa.write(1, &buf, 0..8, remote).unwrap();
    let w = ca.wait(1, T).unwrap();
    assert_eq!(w[0].status, WcStatus::RetryExcErr);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(qa.state().unwrap(), QpState::Err);
    let flushed: Vec<(u64, WcStatus)> = ca
        .wait(2, T)
        .unwrap()
        .iter()
        .map(|w| (w.wr_id, w.status))
        .collect();
    assert_eq!(
        flushed,
        [(10, WcStatus::WrFlushErr), (11, WcStatus::WrFlushErr)]
    );
}
