//! Scripted state tests of the responder: RNR, sequence NAKs, duplicates,
//! ACK coalescing, segmentation, memory checks, UC/UD receive (fixture:
//! scripted/mod.rs).

mod scripted;

use scripted::*;

// ---------------------------------------------------------------------------
// Responder
// ---------------------------------------------------------------------------

#[test]
fn send_without_receive_gets_rnr_nak_then_succeeds() {
    let mut f = qp_rts(QpType::Rc);
    let mut p = mk(0x04, 100);
    p.bth.ack_req = true;
    p.payload = b"abcd";
    f.send(&p);
    let out = f.recv();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].syndrome, Some(syndrome::rnr(14)));
    assert_eq!(out[0].psn, 100);
    // A later packet of the same stream is silently dropped, not NAKed.
    f.send(&mk(0x04, 101));
    f.recv_nothing();
    f.post_recv(9, 0, 64);
    f.send(&p);
    let out = f.recv();
    assert_eq!(out[0].syndrome, Some(syndrome::ACK));
    assert_eq!(out[0].psn, 100);
    let wc = f.wcs();
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].byte_len),
        (9, WcStatus::Success, 4)
    );
    assert_eq!(f.bytes(0, 4), b"abcd");
}

#[test]
fn future_psn_gets_one_sequence_nak() {
    let mut f = qp_rts(QpType::Rc);
    f.post_recv(1, 0, 64);
    f.send(&mk(0x04, 105));
    f.send(&mk(0x04, 106));
    let out = f.recv();
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].psn, out[0].syndrome),
        (100, Some(syndrome::NAK_PSN_SEQ))
    );
    let mut p = mk(0x04, 100);
    p.bth.ack_req = true;
    f.send(&p);
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::ACK));
    // Out of sequence again: a new NAK is allowed.
    f.send(&mk(0x04, 150));
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::NAK_PSN_SEQ));
}

#[test]
fn duplicate_send_is_acked_not_delivered_twice() {
    let mut f = qp_rts(QpType::Rc);
    f.post_recv(1, 0, 64);
    f.post_recv(2, 64, 64);
    let mut p = mk(0x04, 100);
    p.bth.ack_req = true;
    p.payload = b"once";
    f.send(&p);
    f.send(&p);
    let out = f.recv();
    // Coalesced into one ACK for PSN 100.
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].psn, out[0].syndrome), (100, Some(syndrome::ACK)));
    assert_eq!(f.wcs().len(), 1);
    assert_eq!(f.qp.stats().duplicates, 1);
}

#[test]
fn acks_coalesce() {
    let mut f = qp_rts(QpType::Rc);
    for i in 0..3 {
        f.post_recv(i, 0, 64);
        let mut p = mk(0x04, 100 + i as u32);
        p.bth.ack_req = true;
        f.send(&p);
    }
    let out = f.recv();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].psn, 102);
}

#[test]
fn plain_acks_can_be_held_back_behind_requests_but_naks_cannot() {
    let mut f = qp_rts(QpType::Rc);
    let mut buf = vec![0u8; 8192];
    f.post_recv(1, 0, 64);
    let mut p = mk(0x04, 100);
    p.bth.ack_req = true;
    f.send(&p);
    assert!(f.qp.only_acks_pending());
    // Nothing but the ACK to send: held.
    assert!(f
        .qp
        .poll_transmit_deferring_acks(f.now, &mut buf, &mut f.mem)
        .is_none());
    assert!(f.qp.responder_pending());
    // A reply SEND goes out ahead of it; the ACK follows on a plain poll.
    let sge = Sge {
        addr: BASE,
        length: 8,
        lkey: f.lkey,
    };
    f.qp.post_send(SendWr::new(7, SendOp::Send, vec![sge]))
        .unwrap();
    let t =
        f.qp.poll_transmit_deferring_acks(f.now, &mut buf, &mut f.mem)
            .expect("the request is not held");
    assert_eq!(parse(&buf[..t.len]).bth.opcode, OpCode(0x04));
    assert!(f
        .qp
        .poll_transmit_deferring_acks(f.now, &mut buf, &mut f.mem)
        .is_none());
    let out = f.recv();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].psn, out[0].syndrome), (100, Some(syndrome::ACK)));
    assert!(!f.qp.responder_pending());
    // A NAK is never held.
    f.send(&mk(0x04, 150));
    assert!(!f.qp.only_acks_pending());
    let t =
        f.qp.poll_transmit_deferring_acks(f.now, &mut buf, &mut f.mem)
            .expect("NAKs go at once");
    let nak = parse(&buf[..t.len]);
    assert_eq!(nak.aeth.unwrap().kind, syndrome::NAK_PSN_SEQ);
}

#[test]
fn segmented_send_first_middle_last() {
    let mut f = qp_rts(QpType::Rc);
    f.post_recv(1, 0, 1024);
    let data: Vec<u8> = (0..(2 * MTU + 10)).map(|i| i as u8).collect();
    let mut p = mk(0x00, 100);
    p.payload = &data[..MTU];
    f.send(&p);
    let mut p = mk(0x01, 101);
    p.payload = &data[MTU..2 * MTU];
    f.send(&p);
    f.recv_nothing();
    let mut p = mk(0x03, 102);
    p.payload = &data[2 * MTU..];
    p.immdt = Some(immdt::Repr { imm: 0x0102_0304 });
    p.bth.ack_req = true;
    f.send(&p);
    assert_eq!(f.recv()[0].psn, 102);
    let wc = f.wcs();
    assert_eq!(wc[0].byte_len as usize, data.len());
    assert_eq!(wc[0].imm_data, Some(0x0102_0304));
    assert_eq!(f.bytes(0, data.len()), data);
}

#[test]
fn bad_segmentation_is_invalid_request() {
    // A MIDDLE packet shorter than the MTU.
    let mut f = qp_rts(QpType::Rc);
    f.post_recv(1, 0, 1024);
    let big = [1u8; MTU];
    let mut p = mk(0x00, 100);
    p.payload = &big;
    f.send(&p);
    let mut p = mk(0x01, 101);
    p.payload = &big[..10];
    f.send(&p);
    let out = f.recv();
    assert_eq!(
        (out[0].psn, out[0].syndrome),
        (101, Some(syndrome::NAK_INV_REQ))
    );
    assert_eq!(f.qp.state(), QpState::Err);
    // MIDDLE without FIRST.
    let mut f = qp_rts(QpType::Rc);
    f.post_recv(1, 0, 1024);
    let mut p = mk(0x01, 100);
    p.payload = &big;
    f.send(&p);
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::NAK_INV_REQ));
}

#[test]
fn receive_buffer_too_small_is_loc_len_err() {
    let mut f = qp_rts(QpType::Rc);
    f.post_recv(1, 0, 4);
    let mut p = mk(0x04, 100);
    p.payload = b"too long";
    f.send(&p);
    let out = f.recv();
    assert_eq!(out[0].syndrome, Some(syndrome::NAK_INV_REQ));
    let wc = f.wcs();
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::LocLenErr));
    assert_eq!(f.qp.state(), QpState::Err);
    assert_eq!(f.bytes(0, 8), [0; 8], "nothing written");
}

#[test]
fn write_checks_rkey_bounds_rights_and_pd() {
    let data = [0xeeu8; 16];
    // Forged rkey.
    let mut f = qp_rts(QpType::Rc);
    let rk = f.rkey;
    f.send(&write_pkt(100, BASE, rk ^ 0x100, &data));
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::NAK_REM_ACCESS));
    assert_eq!(f.qp.state(), QpState::Err);
    // Past the end of the region.
    let mut f = qp_rts(QpType::Rc);
    let rk = f.rkey;
    f.send(&write_pkt(100, BASE + 4096 - 8, rk, &data));
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::NAK_REM_ACCESS));
    // Address wrap-around.
    let mut f = qp_rts(QpType::Rc);
    let rk = f.rkey;
    f.send(&write_pkt(100, u64::MAX - 4, rk, &data));
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::NAK_REM_ACCESS));
    // Region without REMOTE_WRITE.
    let mut f = qp_rts(QpType::Rc);
    let (_, rk2) = f.mem.register(Pd(1), 0x9000, 64, Access::REMOTE_READ);
    f.send(&write_pkt(100, 0x9000, rk2, &data));
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::NAK_REM_ACCESS));
    assert!(f.mem.region(rk2).unwrap().data.iter().all(|&b| b == 0));
    // Region of another PD.
    let mut f = qp_rts(QpType::Rc);
    let (_, rk3) = f.mem.register(Pd(2), 0x9000, 64, Access::all());
    f.send(&write_pkt(100, 0x9000, rk3, &data));
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::NAK_REM_ACCESS));
    assert!(f.mem.region(rk3).unwrap().data.iter().all(|&b| b == 0));
    // QP without REMOTE_WRITE: invalid request.
    let a = QpAttr {
        qp_access_flags: Access::REMOTE_READ,
        ..attrs()
    };
    let mut f = qp_in(QpType::Rc, QpState::Rts, &a);
    let rk = f.rkey;
    f.send(&write_pkt(100, BASE, rk, &data));
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::NAK_INV_REQ));
    // And a good one.
    let mut f = qp_rts(QpType::Rc);
    let rk = f.rkey;
    f.send(&write_pkt(100, BASE + 8, rk, &data));
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::ACK));
    assert_eq!(f.bytes(8, 16), data);
    assert_eq!(f.bytes(0, 8), [0; 8]);
}

#[test]
fn read_and_atomic_duplicates_replay_from_resources() {
    let mut f = qp_rts(QpType::Rc);
    let data: Vec<u8> = (0..300).map(|i| (i * 7) as u8).collect();
    f.fill(0, &data);
    let rk = f.rkey;
    let mut rd = mk(0x0c, 100);
    rd.reth = Some(reth::Repr {
        va: BASE,
        rkey: rk,
        dma_len: 300,
    });
    f.send(&rd);
    let out = f.recv();
    assert_eq!(
        out.iter().map(|o| (o.opcode, o.psn)).collect::<Vec<_>>(),
        vec![(0x0d, 100), (0x0f, 101)]
    );
    assert_eq!(
        [out[0].payload.clone(), out[1].payload.clone()].concat(),
        data
    );
    // Atomic at PSN 102.
    let mut fa = mk(0x14, 102);
    fa.atomic_eth = Some(atomic_eth::Repr {
        va: BASE + 512,
        rkey: rk,
        swap_add: 5,
        compare: 0,
    });
    f.send(&fa);
    assert_eq!(f.recv()[0].atomic_ack, Some(0));
    // Duplicate atomic: same answer, executed once.
    f.send(&fa);
    assert_eq!(f.recv()[0].atomic_ack, Some(0));
    assert_eq!(f.bytes(512, 8), 5u64.to_le_bytes());
    assert_eq!(f.qp.stats().atomic_replays, 1);
    // Duplicate READ resuming at its second packet.
    let mut rd2 = mk(0x0c, 101);
    rd2.reth = Some(reth::Repr {
        va: BASE + MTU as u64,
        rkey: rk,
        dma_len: 300 - MTU as u32,
    });
    f.send(&rd2);
    let out = f.recv();
    assert_eq!((out[0].opcode, out[0].psn), (0x10, 101));
    assert_eq!(out[0].payload, &data[MTU..]);
    // A duplicate READ asking for more than the original is dropped.
    let mut rd3 = mk(0x0c, 100);
    rd3.reth = Some(reth::Repr {
        va: BASE,
        rkey: rk,
        dma_len: 400,
    });
    f.send(&rd3);
    f.recv_nothing();
}

#[test]
fn atomic_misaligned_is_invalid_request() {
    let mut f = qp_rts(QpType::Rc);
    let rk = f.rkey;
    let mut fa = mk(0x13, 100);
    fa.atomic_eth = Some(atomic_eth::Repr {
        va: BASE + 4,
        rkey: rk,
        swap_add: 1,
        compare: 0,
    });
    f.send(&fa);
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::NAK_INV_REQ));
    assert_eq!(f.bytes(0, 16), [0; 16]);
}

#[test]
fn hostile_packets_are_dropped_silently() {
    let mut f = qp_rts(QpType::Rc);
    f.post_recv(1, 0, 64);
    let mut p = mk(0x04, 100);
    p.bth.ack_req = true;
    p.bth.dest_qp = 0x99; // wrong QPN
    f.send(&p);
    let mut p = mk(0x04, 100);
    p.bth.pkey = 0x7001; // wrong P_Key
    f.send(&p);
    let mut p = mk(0x24, 100); // UC opcode on an RC QP
    p.bth.ack_req = true;
    f.send(&p);
    f.send_raw(&[0x04, 0, 0xff, 0xff, 0, 0, 0, 0x11]); // truncated
    f.send_raw(&[0x1f; 12]); // unknown opcode
    f.send_raw(&[0x04, 0x0f, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 100]); // TVer != 0
    f.send_raw(&[
        0x11, 0x30, 0xff, 0xff, 0, 0, 0, 0x11, 0, 0, 0, 100, 0, 0, 0, 0,
    ]); // pad on ACK
    f.recv_nothing();
    assert!(f.wcs().is_empty());
    assert_eq!(f.qp.stats().dropped, 7);
    let d = f.qp.stats().drops;
    assert_eq!(
        (d.wrong_qpn, d.pkey, d.wrong_transport, d.malformed),
        (1, 1, 1, 4)
    );
    assert_eq!(f.qp.state(), QpState::Rts);
}

#[test]
fn send_with_invalidate_kills_the_rkey() {
    let mut f = qp_rts(QpType::Rc);
    f.post_recv(1, 0, 64);
    let rk = f.rkey;
    let mut p = mk(0x17, 100);
    p.ieth = Some(ieth::Repr { rkey: rk });
    p.bth.ack_req = true;
    f.send(&p);
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::ACK));
    let wc = f.wcs();
    assert_eq!(wc[0].invalidated_rkey, Some(rk));
    f.send(&write_pkt(101, BASE, rk, &[1, 2, 3, 4]));
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::NAK_REM_ACCESS));
}

#[test]
fn uc_drops_rest_of_message_after_gap() {
    let mut f = qp_rts(QpType::Uc);
    f.post_recv(1, 0, 1024);
    let big = [7u8; MTU];
    let mut p = mk(0x20, 100);
    p.payload = &big;
    f.send(&p);
    // PSN 101 lost; 102 is a LAST: dropped with the rest of the message.
    let mut p = mk(0x22, 102);
    p.payload = b"tail";
    f.send(&p);
    assert!(f.wcs().is_empty());
    // The next message (ONLY) is delivered into the same receive WQE.
    let mut p = mk(0x24, 103);
    p.payload = b"next";
    f.send(&p);
    f.recv_nothing();
    let wc = f.wcs();
    assert_eq!((wc[0].wr_id, wc[0].byte_len), (1, 4));
    assert_eq!(f.bytes(0, 4), b"next");
}

#[test]
fn ud_checks_qkey_and_fills_grh_area() {
    let mut f = qp_rts(QpType::Ud);
    f.post_recv(1, 0, 128);
    let mut p = mk(0x64, 0);
    p.deth = Some(deth::Repr {
        qkey: 0x2222,
        src_qp: 0x33,
    });
    p.payload = b"dgram";
    f.send(&p);
    assert!(f.wcs().is_empty(), "wrong Q_Key dropped");
    p.deth = Some(deth::Repr {
        qkey: 0x1111_1111,
        src_qp: 0x33,
    });
    let grh = [0xabu8; 40];
    f.qp.handle_packet_with_grh(f.now, &emit(&p), &grh, &mut f.mem);
    let wc = f.wcs();
    assert_eq!(wc[0].status, WcStatus::Success);
    assert_eq!((wc[0].byte_len, wc[0].src_qp, wc[0].grh), (45, 0x33, true));
    assert_eq!(f.bytes(0, 40), grh);
    assert_eq!(f.bytes(40, 5), b"dgram");
}

/// The driver's answer to a request (fault injection, `Arrival::answer`)
/// stands in for the responder's own decision: an RNR NAK although a
/// receive is posted, nothing executed; a duplicate is answered as always;
/// a fatal NAK takes the QP to ERR once it is out.
#[test]
fn a_drivers_answer_is_given_instead_of_executing() {
    use rdmakit_proto::{Answer, Arrival};
    use rdmakit_wire::aeth::NakCode;
    let answered = |f: &mut Fix, p: &Packet<'_>, a: Answer| {
        let b = emit(p);
        let arrival = Arrival {
            answer: Some(a),
            ..Arrival::default()
        };
        f.qp.handle_arrival(f.now, &b, arrival, None, &mut f.mem);
    };
    let mut f = qp_rts(QpType::Rc);
    f.post_recv(1, 0, 64);
    let mut p = mk(0x04, 100);
    p.bth.ack_req = true;
    p.payload = b"abcd";
    answered(&mut f, &p, Answer::Rnr);
    let out = f.recv();
    assert_eq!(
        (out[0].psn, out[0].syndrome),
        (100, Some(syndrome::rnr(14)))
    );
    assert!(f.wcs().is_empty(), "nothing executed");
    f.send(&p);
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::ACK));
    assert_eq!(f.wcs()[0].status, WcStatus::Success);
    // A duplicate ignores the answer: acknowledged again.
    answered(&mut f, &p, Answer::Nak(NakCode::RemoteAccessError));
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::ACK));
    let mut q = mk(0x04, 101);
    q.bth.ack_req = true;
    answered(&mut f, &q, Answer::Nak(NakCode::PsnSequenceError));
    assert_eq!(f.recv()[0].syndrome, Some(syndrome::NAK_PSN_SEQ));
    assert_eq!(
        f.qp.state(),
        QpState::Rts,
        "a sequence NAK is recovered from"
    );
    answered(&mut f, &q, Answer::Nak(NakCode::RemoteAccessError));
    let out = f.recv();
    assert_eq!(
        out[0].syndrome,
        Some(rdmakit_wire::aeth::AethKind::Nak(
            NakCode::RemoteAccessError
        ))
    );
    assert_eq!(f.qp.state(), QpState::Err);
}
