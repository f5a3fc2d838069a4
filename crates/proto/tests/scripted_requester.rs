//! Scripted state tests of the requester and completer: segmentation,
//! AckReq, ACK probes, NAKs, retries, RNR, fences, UD, SQD (fixture:
//! scripted/mod.rs).

mod scripted;

use scripted::*;

// ---------------------------------------------------------------------------
// Requester / completer
// ---------------------------------------------------------------------------

#[test]
fn requester_segments_by_mtu_and_sets_ackreq_on_last() {
    let mut f = qp_rts(QpType::Rc);
    let sge = f.sge((2 * MTU + 1) as u32);
    let wr = SendWr::new(
        1,
        SendOp::WriteWithImm {
            remote_addr: 0x5000,
            rkey: 9,
            imm: 3,
        },
        vec![sge],
    );
    f.qp.post_send(wr).unwrap();
    let out = f.recv();
    let shape: Vec<_> = out
        .iter()
        .map(|o| (o.opcode, o.psn, o.ack_req, o.payload.len()))
        .collect();
    assert_eq!(
        shape,
        vec![
            (0x06, 500, false, MTU),
            (0x07, 501, false, MTU),
            (0x09, 502, true, 1)
        ]
    );
    assert_eq!(
        out[0].reth,
        Some(reth::Repr {
            va: 0x5000,
            rkey: 9,
            dma_len: 2 * MTU as u32 + 1
        })
    );
    // ACK completes it.
    f.send(&ack(502, syndrome::ACK));
    let wc = f.wcs();
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode),
        (1, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    assert_eq!(f.qp.poll_timeout(), None);
}

/// AckReq goes where an ACK is awaited: a signaled WR's end, any end once
/// the send queue is half full, a retransmission, and every
/// `ack_req_every` packets; an unsignaled WR's end goes without, and the
/// next requested ACK (cumulative) completes it too.
#[test]
fn ackreq_is_set_for_signaled_ends_pressure_and_retransmissions_only() {
    let mut cfg = QpConfig::new(QPN, QpType::Rc, Pd(1));
    cfg.max_send_wr = 8;
    let mut f = qp_with(cfg, QpState::Rts, &attrs());
    let sge = f.sge(8);
    let send = |id: u64, signaled: bool| SendWr {
        signaled,
        ..SendWr::new(id, SendOp::Send, vec![sge])
    };
    let ack_reqs = |f: &mut Fix| f.recv().iter().map(|o| o.ack_req).collect::<Vec<_>>();
    // Unsignaled ends go without (one at a time: the queue stays below half).
    for id in 0..2 {
        f.qp.post_send(send(id, false)).unwrap();
        assert_eq!(ack_reqs(&mut f), vec![false], "wr {id}");
    }
    // A signaled end asks; its ACK completes all three, one completion.
    f.qp.post_send(send(2, true)).unwrap();
    assert_eq!(ack_reqs(&mut f), vec![true]);
    f.send(&ack(502, syndrome::ACK));
    let wc = f.wcs();
    assert_eq!(wc.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![2]);
    assert_eq!(f.qp.sq_outstanding(), 0);
    // Half the queue (4 of 8) posted unsignaled: every end asks from then on.
    for id in 3..7 {
        f.qp.post_send(send(id, false)).unwrap();
    }
    assert_eq!(ack_reqs(&mut f), vec![true, true, true, true]);
    f.send(&ack(506, syndrome::ACK));
    assert_eq!(f.qp.sq_outstanding(), 0);
    // An unsignaled tail and then nothing: the ACK timeout is no loss but
    // an ACK probe — the last packet again, with AckReq, no retry consumed.
    f.qp.post_send(send(7, false)).unwrap();
    assert_eq!(ack_reqs(&mut f), vec![false]);
    let t =
        f.qp.poll_timeout()
            .expect("the ACK timer runs for unacked sends");
    f.now = t;
    f.qp.handle_timeout(f.now);
    assert_eq!(ack_reqs(&mut f), vec![true]);
    f.send(&ack(507, syndrome::ACK));
    assert_eq!(f.qp.sq_outstanding(), 0);
    assert!(f.wcs().is_empty());
    let st = f.qp.stats();
    assert_eq!((st.ack_probes, st.timeouts, st.retransmitted), (1, 0, 1));
}

/// retry_cnt 0 allows no retransmission, yet an unsignaled tail's ACK
/// probe is not one: the QP survives it. A probe nobody answers makes the
/// next timeout a real one.
#[test]
fn ack_probe_consumes_no_retry_and_a_dead_peer_still_fails() {
    let a = QpAttr {
        retry_cnt: 0,
        ..attrs()
    };
    let mut f = qp_with(QpConfig::new(QPN, QpType::Rc, Pd(1)), QpState::Rts, &a);
    let sge = f.sge(8);
    let send = |id: u64, signaled: bool| SendWr {
        signaled,
        ..SendWr::new(id, SendOp::Send, vec![sge])
    };
    f.qp.post_send(send(1, false)).unwrap();
    f.qp.post_send(send(2, false)).unwrap();
    assert_eq!(f.recv().len(), 2);
    // Alive peer: the probe (PSN 501, AckReq) is answered.
    f.now = f.qp.poll_timeout().unwrap();
    f.qp.handle_timeout(f.now);
    let probe = f.recv();
    assert_eq!(
        probe.iter().map(|o| (o.psn, o.ack_req)).collect::<Vec<_>>(),
        vec![(501, true)]
    );
    f.send(&ack(501, syndrome::ACK));
    assert_eq!(f.qp.state(), QpState::Rts);
    assert_eq!(f.qp.sq_outstanding(), 0);
    // Dead peer: the probe goes unanswered, the next timeout fails the WR.
    f.qp.post_send(send(3, false)).unwrap();
    assert_eq!(f.recv().len(), 1);
    f.now = f.qp.poll_timeout().unwrap();
    f.qp.handle_timeout(f.now);
    assert_eq!(f.recv().len(), 1);
    f.now = f.qp.poll_timeout().unwrap();
    f.qp.handle_timeout(f.now);
    let wc = f.wcs();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(3, WcStatus::RetryExcErr)]
    );
    assert_eq!(f.qp.state(), QpState::Err);
    assert_eq!((f.qp.stats().ack_probes, f.qp.stats().timeouts), (2, 1));
}

fn post_sends(f: &mut Fix, n: u64) {
    for i in 0..n {
        let sge = f.sge(8);
        f.qp.post_send(SendWr::new(i, SendOp::Send, vec![sge]))
            .unwrap();
    }
}

#[test]
fn nak_codes_complete_with_matching_status_then_flush() {
    for (code, status) in [
        (syndrome::NAK_INV_REQ, WcStatus::RemInvReqErr),
        (syndrome::NAK_REM_ACCESS, WcStatus::RemAccessErr),
        (syndrome::NAK_REM_OP, WcStatus::RemOpErr),
        (syndrome::NAK_INV_RD_REQ, WcStatus::RemInvRdReqErr),
    ] {
        let mut f = qp_rts(QpType::Rc);
        post_sends(&mut f, 3);
        assert_eq!(f.recv().len(), 3);
        // PSN 500 acked implicitly, 501 NAKed.
        f.send(&ack(501, code));
        let wc = f.wcs();
        let got: Vec<_> = wc.iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(
            got,
            vec![
                (0, WcStatus::Success),
                (1, status),
                (2, WcStatus::WrFlushErr)
            ]
        );
        assert_eq!(f.qp.state(), QpState::Err);
    }
}

#[test]
fn psn_sequence_nak_retransmits_from_the_naked_psn() {
    let mut f = qp_rts(QpType::Rc);
    post_sends(&mut f, 3);
    assert_eq!(f.recv().len(), 3);
    f.send(&ack(501, syndrome::NAK_PSN_SEQ));
    let out = f.recv();
    assert_eq!(
        out.iter().map(|o| o.psn).collect::<Vec<_>>(),
        vec![501, 502]
    );
    assert_eq!(f.wcs().len(), 1);
    // A duplicated NAK does not restart again.
    f.send(&ack(501, syndrome::NAK_PSN_SEQ));
    f.recv_nothing();
    f.send(&ack(502, syndrome::ACK));
    assert_eq!(f.wcs().len(), 2);
}

#[test]
fn retry_exhaustion_then_flush() {
    let mut f = qp_rts(QpType::Rc); // retry_cnt 2, timeout 10 (4.2 ms)
    post_sends(&mut f, 2);
    assert_eq!(f.recv().len(), 2);
    let mut retries = 0;
    loop {
        let t = f.qp.poll_timeout().expect("timer runs while unacked");
        assert_eq!(t - f.now, Duration::from_nanos(4096 << 10));
        f.now = t;
        f.qp.handle_timeout(f.now);
        let out = f.recv();
        if out.is_empty() {
            break;
        }
        assert_eq!(out[0].psn, 500);
        retries += 1;
    }
    assert_eq!(retries, 2);
    let wc = f.wcs();
    let got: Vec<_> = wc.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        got,
        vec![(0, WcStatus::RetryExcErr), (1, WcStatus::WrFlushErr)]
    );
    assert_eq!(f.qp.state(), QpState::Err);
    assert_eq!(f.qp.poll_timeout(), None);
}

#[test]
fn retry_cnt_7_is_seven_retries_not_infinite() {
    // Only rnr_retry 7 means "retry forever"; retry_cnt 7 counts down like
    // any other value (rxe does the same), so a vanished peer still ends in
    // RETRY_EXC_ERR.
    let a = QpAttr {
        retry_cnt: 7,
        ..attrs()
    };
    let mut f = qp_in(QpType::Rc, QpState::Rts, &a);
    post_sends(&mut f, 1);
    assert_eq!(f.recv().len(), 1);
    let mut retries = 0;
    while let Some(t) = f.qp.poll_timeout() {
        f.now = t;
        f.qp.handle_timeout(f.now);
        if f.recv().is_empty() {
            break;
        }
        retries += 1;
        assert!(retries <= 7, "more than 7 retries");
    }
    assert_eq!(retries, 7);
    assert_eq!(f.wcs()[0].status, WcStatus::RetryExcErr);
}

#[test]
fn rnr_nak_waits_min_rnr_timer_then_exhausts() {
    let mut f = qp_rts(QpType::Rc); // rnr_retry 1
    post_sends(&mut f, 1);
    assert_eq!(f.recv().len(), 1);
    f.send(&ack(500, syndrome::rnr(14)));
    f.recv_nothing();
    let t = f.qp.poll_timeout().unwrap();
    assert_eq!(t - f.now, Duration::from_micros(1280));
    f.now = t;
    f.qp.handle_timeout(t);
    assert_eq!(f.recv()[0].psn, 500);
    // Second RNR NAK: no RNR retries left.
    f.send(&ack(500, syndrome::rnr(14)));
    let wc = f.wcs();
    assert_eq!(wc[0].status, WcStatus::RnrRetryExcErr);
    assert_eq!(f.qp.state(), QpState::Err);
}

#[test]
fn rnr_through_the_network_with_and_without_retries() {
    // Infinite RNR retries: the receive is posted late and the SEND succeeds.
    let cfg = LinkConfig {
        rnr_retry: 7,
        min_rnr_timer: 1,
        ..LinkConfig::default()
    };
    let mut net = Network::new(cfg, 3);
    let (a, b) = net.connected_pair(QpType::Rc);
    let (alk, _) = net.register_all(a, 0x1000, 64);
    let (blk, _) = net.register_all(b, 0x1000, 64);
    let sge = mk_sge(0x1000, 8, alk);
    net.qp_mut(a)
        .post_send(SendWr::new(1, SendOp::Send, vec![sge]))
        .unwrap();
    net.run_until(Instant::from_nanos(200_000));
    assert!(net.qp(a).stats().rnr_naks_received >= 5);
    let r = RecvWr {
        wr_id: 2,
        sg_list: vec![mk_sge(0x1000, 64, blk)],
    };
    net.qp_mut(b).post_recv(r).unwrap();
    assert!(net.run_until_idle());
    assert_eq!(net.take_completions(a)[0].status, WcStatus::Success);
    assert_eq!(net.take_completions(b)[0].byte_len, 8);
    // rnr_retry 0: the first RNR NAK fails the WR.
    let cfg = LinkConfig {
        rnr_retry: 0,
        ..LinkConfig::default()
    };
    let mut net = Network::new(cfg, 3);
    let (a, _b) = net.connected_pair(QpType::Rc);
    let (alk, _) = net.register_all(a, 0x1000, 64);
    let sge = mk_sge(0x1000, 8, alk);
    net.qp_mut(a)
        .post_send(SendWr::new(1, SendOp::Send, vec![sge]))
        .unwrap();
    net.qp_mut(a)
        .post_send(SendWr::new(2, SendOp::Send, vec![sge]))
        .unwrap();
    assert!(net.run_until_idle());
    let wc = net.take_completions(a);
    assert_eq!(
        (wc[0].status, wc[1].status),
        (WcStatus::RnrRetryExcErr, WcStatus::WrFlushErr)
    );
}

#[test]
fn retry_exhaustion_through_a_dead_link() {
    let cfg = LinkConfig {
        retry_cnt: 3,
        timeout: 4,
        ..LinkConfig::default()
    };
    let mut net = Network::new(cfg, 9);
    let (a, _b) = net.connected_pair(QpType::Rc);
    let (alk, _) = net.register_all(a, 0x1000, 64);
    net.filter = Some(Box::new(|_, _| true));
    let sge = mk_sge(0x1000, 8, alk);
    for i in 0..3 {
        net.qp_mut(a)
            .post_send(SendWr::new(i, SendOp::Send, vec![sge]))
            .unwrap();
    }
    assert!(net.run_until_idle());
    let wc = net.take_completions(a);
    let st: Vec<_> = wc.iter().map(|w| w.status).collect();
    assert_eq!(
        st,
        vec![
            WcStatus::RetryExcErr,
            WcStatus::WrFlushErr,
            WcStatus::WrFlushErr
        ]
    );
    assert_eq!(net.qp(a).stats().timeouts, 4);
}

#[test]
fn local_protection_error_on_bad_lkey() {
    let mut f = qp_rts(QpType::Rc);
    let sge = mk_sge(BASE, 8, f.lkey ^ 0x100);
    f.qp.post_send(SendWr::new(1, SendOp::Send, vec![sge]))
        .unwrap();
    post_sends(&mut f, 1);
    f.recv_nothing();
    let wc = f.wcs();
    let st: Vec<_> = wc.iter().map(|w| w.status).collect();
    assert_eq!(st, vec![WcStatus::LocProtErr, WcStatus::WrFlushErr]);
}

#[test]
fn bad_read_response_is_bad_resp_err() {
    let mut f = qp_rts(QpType::Rc);
    let sge = f.sge(16);
    f.post_read(1, 0, sge);
    assert_eq!(f.recv()[0].opcode, 0x0c);
    let mut p = resp(0x10, 500, 1);
    let long = [9u8; 20];
    p.payload = &long;
    f.send(&p);
    assert_eq!(f.wcs()[0].status, WcStatus::BadRespErr);
    assert_eq!(f.bytes(0, 16), [0; 16], "nothing scattered");
}

#[test]
fn fence_and_max_rd_atomic_hold_back_requests() {
    let a = QpAttr {
        max_rd_atomic: 1,
        ..attrs()
    };
    let mut f = qp_in(QpType::Rc, QpState::Rts, &a);
    let sge = f.sge(8);
    f.post_read(1, 0, sge);
    f.qp.post_send(SendWr::new(
        2,
        SendOp::FetchAdd {
            remote_addr: 0,
            rkey: 1,
            add: 1,
        },
        vec![sge],
    ))
    .unwrap();
    let out = f.recv();
    assert_eq!(out.len(), 1, "second READ/atomic waits for max_rd_atomic");
    let mut p = resp(0x10, 500, 1);
    p.payload = &[1, 2, 3, 4, 5, 6, 7, 8];
    f.send(&p);
    let out = f.recv();
    assert_eq!((out[0].opcode, out[0].psn), (0x14, 501));
    // A fenced SEND waits for the atomic.
    let mut w = SendWr::new(3, SendOp::Send, vec![sge]);
    w.fence = true;
    f.qp.post_send(w).unwrap();
    f.recv_nothing();
    let mut p = resp(0x12, 501, 2);
    p.atomic_ack_eth = Some(atomic_ack_eth::Repr { orig_value: 41 });
    f.send(&p);
    assert_eq!(f.recv()[0].psn, 502);
    let wc = f.wcs();
    assert_eq!(wc.len(), 2);
    assert_eq!(f.bytes(0, 8), 41u64.to_le_bytes());
}

#[test]
fn ack_beyond_an_unanswered_read_retries_the_read() {
    let mut f = qp_rts(QpType::Rc);
    let sge = f.sge(8);
    f.post_read(1, 0x40, sge);
    f.qp.post_send(SendWr::new(2, SendOp::Send, vec![sge]))
        .unwrap();
    assert_eq!(f.recv().len(), 2);
    f.send(&ack(501, syndrome::ACK));
    let out = f.recv();
    assert_eq!((out[0].opcode, out[0].psn), (0x0c, 500));
    assert!(f.wcs().is_empty());
}

#[test]
fn ud_send_carries_deth_and_completes_at_once() {
    let mut f = qp_rts(QpType::Ud);
    let sge = f.sge(4);
    let mut wr = SendWr::new(1, SendOp::SendWithImm { imm: 5 }, vec![sge]);
    wr.ud = Some(UdDest {
        ah: AddressHandle(3),
        remote_qpn: RQPN,
        remote_qkey: 0x8000_0000,
    });
    f.qp.post_send(wr).unwrap();
    let mut buf = [0u8; 2048];
    let t = f.qp.poll_transmit(f.now, &mut buf, &mut f.mem).unwrap();
    assert_eq!(t.ah, AddressHandle(3));
    let p = parse(&buf[..t.len]);
    assert_eq!(p.bth.opcode, OpCode(0x65));
    // Bit 31 set: the QP's own Q_Key is used.
    assert_eq!(
        p.deth,
        Some(deth::Repr {
            qkey: 0x1111_1111,
            src_qp: QPN
        })
    );
    assert_eq!(f.wcs()[0].status, WcStatus::Success);
    // Longer than the port MTU (1024 here): IBTA C10-93.1.1, no packet and
    // no error.
    let sge = f.sge(2000);
    let mut wr = SendWr::new(2, SendOp::Send, vec![sge]);
    wr.ud = Some(UdDest {
        ah: AddressHandle(3),
        remote_qpn: RQPN,
        remote_qkey: 1,
    });
    f.qp.post_send(wr).unwrap();
    f.recv_nothing();
    assert_eq!(f.wcs()[0].status, WcStatus::Success);
    assert_eq!(f.qp.state(), QpState::Rts);
}

#[test]
fn memory_trait_is_the_only_path() {
    // A Memory that refuses everything: no request may move a byte.
    struct Deny;
    impl Memory for Deny {
        fn check(
            &self,
            _: Pd,
            _: rdmakit_proto::Key,
            _: u64,
            _: u64,
            _: Access,
        ) -> Result<(), rdmakit_proto::MemError> {
            Err(rdmakit_proto::MemError::BadKey)
        }
        fn read(
            &self,
            _: Pd,
            _: rdmakit_proto::Key,
            _: u64,
            _: &mut [u8],
            _: Access,
        ) -> Result<(), rdmakit_proto::MemError> {
            Err(rdmakit_proto::MemError::BadKey)
        }
        fn write(
            &mut self,
            _: Pd,
            _: rdmakit_proto::Key,
            _: u64,
            _: &[u8],
            _: Access,
        ) -> Result<(), rdmakit_proto::MemError> {
            panic!("write after a failed check")
        }
        fn atomic(
            &mut self,
            _: Pd,
            _: u32,
            _: u64,
            _: rdmakit_proto::AtomicOp,
        ) -> Result<u64, rdmakit_proto::MemError> {
            Err(rdmakit_proto::MemError::BadKey)
        }
        fn invalidate(&mut self, _: Pd, _: u32) -> Result<(), rdmakit_proto::MemError> {
            Err(rdmakit_proto::MemError::BadKey)
        }
    }
    let mut f = qp_rts(QpType::Rc);
    f.post_recv(1, 0, 64);
    let mut d = Deny;
    let p = write_pkt(100, BASE, 1, &[1; 8]);
    f.qp.handle_packet(f.now, &emit(&p), &mut d);
    let mut s = mk(0x04, 100);
    s.payload = b"x";
    f.qp.handle_packet(f.now, &emit(&s), &mut d);
    let mut out = [0u8; 600];
    assert!(f.qp.poll_transmit(f.now, &mut out, &mut d).is_some());
}

#[test]
fn remote_access_error_end_to_end() {
    // A WRITE with a forged rkey: the responder NAKs (remote access) and goes
    // to ERR; the requester completes REM_ACCESS_ERR, flushes the rest.
    let mut net = Network::new(LinkConfig::default(), 5);
    let (a, b) = net.connected_pair(QpType::Rc);
    let (alk, _) = net.register_all(a, 0x1000, 64);
    let (blk, brk) = net.register_all(b, 0x1000, 64);
    let r = RecvWr {
        wr_id: 9,
        sg_list: vec![mk_sge(0x1000, 64, blk)],
    };
    net.qp_mut(b).post_recv(r).unwrap();
    let sge = mk_sge(0x1000, 8, alk);
    let bad = SendOp::Write {
        remote_addr: 0x1000,
        rkey: brk ^ 0x4400,
    };
    net.qp_mut(a)
        .post_send(SendWr::new(1, bad, vec![sge]))
        .unwrap();
    net.qp_mut(a)
        .post_send(SendWr::new(2, SendOp::Send, vec![sge]))
        .unwrap();
    assert!(net.run_until_idle());
    let wa: Vec<_> = net
        .take_completions(a)
        .iter()
        .map(|w| (w.wr_id, w.status))
        .collect();
    assert_eq!(
        wa,
        vec![(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)]
    );
    let wb: Vec<_> = net
        .take_completions(b)
        .iter()
        .map(|w| (w.wr_id, w.status))
        .collect();
    assert_eq!(wb, vec![(9, WcStatus::WrFlushErr)]);
    assert_eq!(net.qp(a).state(), QpState::Err);
    assert_eq!(net.qp(b).state(), QpState::Err);
    assert!(net
        .node(b)
        .mem
        .region(blk)
        .unwrap()
        .data
        .iter()
        .all(|&x| x == 0));
}

#[test]
fn ud_send_queue_error_recovers_via_sqe_to_rts() {
    let mut f = qp_rts(QpType::Ud);
    let dest = UdDest {
        ah: AddressHandle(3),
        remote_qpn: RQPN,
        remote_qkey: 1,
    };
    let mut big = SendWr::new(1, SendOp::Send, vec![mk_sge(BASE, 10, f.lkey ^ 0x100)]);
    big.ud = Some(dest);
    let mut small = SendWr::new(2, SendOp::Send, vec![mk_sge(BASE, 10, f.lkey)]);
    small.ud = Some(dest);
    f.qp.post_send(big).unwrap();
    f.qp.post_send(small.clone()).unwrap();
    f.recv_nothing();
    let st: Vec<_> = f.wcs().iter().map(|w| w.status).collect();
    assert_eq!(st, vec![WcStatus::LocProtErr, WcStatus::WrFlushErr]);
    assert_eq!(f.qp.state(), QpState::Sqe);
    // Receives keep working in SQE.
    f.post_recv(5, 0, 128);
    let mut p = mk(0x64, 0);
    p.deth = Some(deth::Repr {
        qkey: 0x1111_1111,
        src_qp: 0x33,
    });
    f.send(&p);
    assert_eq!(f.wcs()[0].wr_id, 5);
    // SQE -> RTS with STATE alone (UC/UD only), then sends flow again.
    let a = QpAttr {
        qp_state: QpState::Rts,
        ..attrs()
    };
    f.qp.modify(&a, AttrMask::STATE).unwrap();
    f.qp.post_send(small).unwrap();
    assert_eq!(f.recv().len(), 1);
    assert_eq!(f.wcs()[0].status, WcStatus::Success);
}

#[test]
fn path_mtu_above_link_mtu_fails_large_messages_only() {
    // The classic misconfiguration: path MTU 4096 over a 1500-byte network.
    // Small messages pass, a message needing a full 4 KiB packet never does.
    let cfg = LinkConfig {
        mtu: Mtu::Mtu4096,
        link_mtu: Some(1500 - 20 - 8),
        retry_cnt: 2,
        timeout: 4,
        ..LinkConfig::default()
    };
    let mut net = Network::new(cfg, 1);
    let (a, b) = net.connected_pair(QpType::Rc);
    let (alk, _) = net.register_all(a, 0x1000, 8192);
    let (_, brk) = net.register_all(b, 0x1000, 8192);
    let small = mk_sge(0x1000, 512, alk);
    let big = mk_sge(0x1000, 8192, alk);
    let w = |rkey| SendOp::Write {
        remote_addr: 0x1000,
        rkey,
    };
    net.qp_mut(a)
        .post_send(SendWr::new(1, w(brk), vec![small]))
        .unwrap();
    net.qp_mut(a)
        .post_send(SendWr::new(2, w(brk), vec![big]))
        .unwrap();
    assert!(net.run_until_idle());
    let st: Vec<_> = net.take_completions(a).iter().map(|w| w.status).collect();
    assert_eq!(st, vec![WcStatus::Success, WcStatus::RetryExcErr]);
    assert!(net.stats.oversize >= 3);
}

#[test]
fn duplicated_rnr_nak_consumes_one_retry() {
    let mut f = qp_rts(QpType::Rc); // rnr_retry 1
    post_sends(&mut f, 1);
    assert_eq!(f.recv().len(), 1);
    f.send(&ack(500, syndrome::rnr(14)));
    f.send(&ack(500, syndrome::rnr(14)));
    assert!(f.wcs().is_empty());
    let t = f.qp.poll_timeout().unwrap();
    f.now = t;
    f.qp.handle_timeout(t);
    assert_eq!(f.recv()[0].psn, 500);
    f.send(&ack(500, syndrome::ACK));
    assert_eq!(f.wcs()[0].status, WcStatus::Success);
}

#[test]
fn ackreq_every_64_packets_and_window_of_128() {
    let mut f = qp_rts(QpType::Rc);
    f.mem.register(Pd(1), 0x10_0000, 200 * MTU, Access::all());
    let lkey = 0x0000_0111; // second region of the table
    let sge = Sge {
        addr: 0x10_0000,
        length: (200 * MTU) as u32,
        lkey,
    };
    let w = SendOp::Write {
        remote_addr: 0,
        rkey: 1,
    };
    f.qp.post_send(SendWr::new(1, w, vec![sge])).unwrap();
    let out = f.recv();
    assert_eq!(out.len(), 128, "window");
    let req: Vec<u32> = out
        .iter()
        .filter(|o| o.ack_req)
        .map(|o| o.psn - 500)
        .collect();
    assert_eq!(req, vec![63, 127]);
    // Acking the first 64 opens the window by 64.
    f.send(&ack(563, syndrome::ACK));
    let out = f.recv();
    assert_eq!(out.len(), 64);
    assert_eq!(out.last().map(|o| o.psn), Some(500 + 191));
    f.send(&ack(500 + 191, syndrome::ACK));
    let out = f.recv();
    assert_eq!(out.len(), 8);
    assert!(out.last().is_some_and(|o| o.ack_req && o.opcode == 0x08));
    f.send(&ack(500 + 199, syndrome::ACK));
    assert_eq!(f.wcs()[0].status, WcStatus::Success);
}

#[test]
fn sqd_stops_new_requests_and_rts_resumes() {
    let mut f = qp_rts(QpType::Rc);
    post_sends(&mut f, 1);
    assert_eq!(f.recv().len(), 1);
    let a = QpAttr {
        qp_state: QpState::Sqd,
        ..attrs()
    };
    f.qp.modify(&a, AttrMask::STATE).unwrap();
    post_sends(&mut f, 1);
    f.recv_nothing();
    // Outstanding work still completes in SQD.
    f.send(&ack(500, syndrome::ACK));
    assert_eq!(f.wcs().len(), 1);
    let a = QpAttr {
        qp_state: QpState::Rts,
        ..attrs()
    };
    f.qp.modify(&a, AttrMask::STATE).unwrap();
    assert_eq!(f.recv()[0].psn, 501);
}
