//! Scripted state tests in the smoltcp style: a QP is put into a fixture
//! state (`qp_rts()`), packets are fed with `send()` and what it transmits
//! is checked with `recv()` / `recv_nothing()`.

use std::time::Duration;

use rdmakit_proto::packet::{opinfo, syndrome, Aeth, AtomicEth, Bth, Deth, Packet, Reth};
use rdmakit_proto::sim::{LinkConfig, Network};
use rdmakit_proto::{
    Access, AddressHandle, AttrMask, Instant, MemTable, Memory, Mtu, Pd, Psn, Qp, QpAttr, QpConfig,
    QpState, QpType, RecvWr, SendOp, SendWr, Sge, UdDest, WcOpcode, WcStatus,
};

const QPN: u32 = 0x11;
const RQPN: u32 = 0x22;
const BASE: u64 = 0x1000;
const MTU: usize = 256;

struct Fix {
    qp: Qp,
    mem: MemTable,
    now: Instant,
    lkey: u32,
    rkey: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Out {
    opcode: u8,
    psn: u32,
    ack_req: bool,
    syndrome: Option<u8>,
    reth: Option<Reth>,
    atomic_ack: Option<u64>,
    payload: Vec<u8>,
}

fn rc_masks(t: QpType) -> [AttrMask; 3] {
    let s = AttrMask::STATE;
    match t {
        QpType::Rc => [
            s | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
            s | AttrMask::AV
                | AttrMask::PATH_MTU
                | AttrMask::DEST_QPN
                | AttrMask::RQ_PSN
                | AttrMask::MAX_DEST_RD_ATOMIC
                | AttrMask::MIN_RNR_TIMER,
            s | AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
                | AttrMask::SQ_PSN
                | AttrMask::MAX_QP_RD_ATOMIC,
        ],
        QpType::Uc => [
            s | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
            s | AttrMask::AV | AttrMask::PATH_MTU | AttrMask::DEST_QPN | AttrMask::RQ_PSN,
            s | AttrMask::SQ_PSN,
        ],
        QpType::Ud => [
            s | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY,
            s,
            s | AttrMask::SQ_PSN,
        ],
    }
}

fn attrs() -> QpAttr {
    QpAttr {
        path_mtu: Mtu::Mtu256,
        qkey: 0x1111_1111,
        rq_psn: 100,
        sq_psn: 500,
        dest_qp_num: RQPN,
        qp_access_flags: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
        ah: AddressHandle(1),
        timeout: 10,
        retry_cnt: 2,
        rnr_retry: 1,
        min_rnr_timer: 14,
        max_rd_atomic: 2,
        max_dest_rd_atomic: 2,
        ..QpAttr::default()
    }
}

fn qp_in(t: QpType, upto: QpState, a: &QpAttr) -> Fix {
    qp_with(QpConfig::new(QPN, t, Pd(1)), upto, a)
}

fn qp_with(cfg: QpConfig, upto: QpState, a: &QpAttr) -> Fix {
    let t = cfg.qp_type;
    let mut qp = Qp::new(cfg);
    let m = rc_masks(t);
    for (st, mask) in [
        (QpState::Init, m[0]),
        (QpState::Rtr, m[1]),
        (QpState::Rts, m[2]),
    ] {
        let a = QpAttr {
            qp_state: st,
            ..a.clone()
        };
        qp.modify(&a, mask).unwrap();
        if st == upto {
            break;
        }
    }
    let mut mem = MemTable::new();
    let (lkey, rkey) = mem.register(Pd(1), BASE, 4096, Access::all());
    Fix {
        qp,
        mem,
        now: Instant::ZERO,
        lkey,
        rkey,
    }
}

fn qp_rts(t: QpType) -> Fix {
    qp_in(t, QpState::Rts, &attrs())
}

fn mk(opcode: u8, psn: u32) -> Packet<'static> {
    let info = opinfo(opcode).expect("opcode");
    Packet {
        bth: Bth {
            opcode,
            se: false,
            mig: false,
            pkey: 0xffff,
            becn_fecn: 0,
            dqpn: QPN,
            ack_req: false,
            psn: Psn::new(psn),
        },
        info,
        deth: None,
        reth: None,
        atomic_eth: None,
        aeth: None,
        atomic_ack: None,
        imm: None,
        ieth: None,
        payload: &[],
    }
}

impl Fix {
    fn send(&mut self, p: &Packet<'_>) {
        let mut buf = vec![0u8; 8192];
        let n = p.emit(&mut buf).unwrap();
        self.qp.handle_packet(self.now, &buf[..n], &mut self.mem);
    }
    fn send_raw(&mut self, b: &[u8]) {
        self.qp.handle_packet(self.now, b, &mut self.mem);
    }
    fn recv(&mut self) -> Vec<Out> {
        let mut buf = vec![0u8; 8192];
        let mut v = Vec::new();
        while let Some(t) = self.qp.poll_transmit(self.now, &mut buf, &mut self.mem) {
            let p = Packet::parse(&buf[..t.len]).expect("engine emits valid packets");
            assert_eq!(p.bth.dqpn, RQPN);
            v.push(Out {
                opcode: p.bth.opcode,
                psn: p.bth.psn.value(),
                ack_req: p.bth.ack_req,
                syndrome: p.aeth.map(|a| a.syndrome),
                reth: p.reth,
                atomic_ack: p.atomic_ack,
                payload: p.payload.to_vec(),
            });
        }
        v
    }
    fn recv_nothing(&mut self) {
        let v = self.recv();
        assert!(v.is_empty(), "expected nothing, got {v:?}");
    }
    fn wcs(&mut self) -> Vec<rdmakit_proto::Wc> {
        std::iter::from_fn(|| self.qp.poll_completion()).collect()
    }
    fn post_recv(&mut self, wr_id: u64, off: u64, len: u32) {
        let sge = Sge {
            addr: BASE + off,
            length: len,
            lkey: self.lkey,
        };
        self.qp
            .post_recv(RecvWr {
                wr_id,
                sg_list: vec![sge],
            })
            .unwrap();
    }
    fn bytes(&self, off: usize, len: usize) -> Vec<u8> {
        self.mem.region(self.lkey).unwrap().data[off..off + len].to_vec()
    }
    fn fill(&mut self, off: usize, data: &[u8]) {
        self.mem.region_mut(self.lkey).unwrap().data[off..off + data.len()].copy_from_slice(data);
    }
}

fn ack(psn: u32, syn: u8) -> Packet<'static> {
    let mut p = mk(0x11, psn);
    p.aeth = Some(Aeth {
        syndrome: syn,
        msn: 0,
    });
    p
}

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
    assert!(qp.modify(&r, rc_masks(QpType::Rc)[1]).is_err());
    // Out-of-range values.
    let mut f = qp_in(QpType::Rc, QpState::Rtr, &attrs());
    let bad = QpAttr {
        qp_state: QpState::Rts,
        retry_cnt: 8,
        ..attrs()
    };
    assert!(f.qp.modify(&bad, rc_masks(QpType::Rc)[2]).is_err());
    let bad = QpAttr {
        qp_state: QpState::Rts,
        max_rd_atomic: 200,
        ..attrs()
    };
    assert!(f.qp.modify(&bad, rc_masks(QpType::Rc)[2]).is_err());
    assert_eq!(f.qp.state(), QpState::Rtr);
    // CUR_STATE must match.
    let a = QpAttr {
        qp_state: QpState::Rts,
        cur_qp_state: QpState::Init,
        ..attrs()
    };
    assert!(f
        .qp
        .modify(&a, rc_masks(QpType::Rc)[2] | AttrMask::CUR_STATE)
        .is_err());
    let a = QpAttr {
        qp_state: QpState::Rts,
        cur_qp_state: QpState::Rtr,
        ..attrs()
    };
    f.qp.modify(&a, rc_masks(QpType::Rc)[2] | AttrMask::CUR_STATE)
        .unwrap();
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
    assert_eq!(Packet::parse(&buf[..t.len]).unwrap().bth.opcode, 0x04);
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
    let nak = Packet::parse(&buf[..t.len]).unwrap();
    assert_eq!(nak.aeth.unwrap().syndrome, syndrome::NAK_PSN_SEQ);
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
    p.imm = Some(0x0102_0304);
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

fn write_pkt(psn: u32, va: u64, rkey: u32, data: &[u8]) -> Packet<'_> {
    let mut p = mk(0x0a, psn);
    p.reth = Some(Reth {
        va,
        rkey,
        len: data.len() as u32,
    });
    p.payload = data;
    p.bth.ack_req = true;
    p
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
    rd.reth = Some(Reth {
        va: BASE,
        rkey: rk,
        len: 300,
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
    fa.atomic_eth = Some(AtomicEth {
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
    rd2.reth = Some(Reth {
        va: BASE + MTU as u64,
        rkey: rk,
        len: 300 - MTU as u32,
    });
    f.send(&rd2);
    let out = f.recv();
    assert_eq!((out[0].opcode, out[0].psn), (0x10, 101));
    assert_eq!(out[0].payload, &data[MTU..]);
    // A duplicate READ asking for more than the original is dropped.
    let mut rd3 = mk(0x0c, 100);
    rd3.reth = Some(Reth {
        va: BASE,
        rkey: rk,
        len: 400,
    });
    f.send(&rd3);
    f.recv_nothing();
}

#[test]
fn atomic_misaligned_is_invalid_request() {
    let mut f = qp_rts(QpType::Rc);
    let rk = f.rkey;
    let mut fa = mk(0x13, 100);
    fa.atomic_eth = Some(AtomicEth {
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
    p.bth.dqpn = 0x99; // wrong QPN
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
    p.ieth = Some(rk);
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
    p.deth = Some(Deth {
        qkey: 0x2222,
        src_qp: 0x33,
    });
    p.payload = b"dgram";
    f.send(&p);
    assert!(f.wcs().is_empty(), "wrong Q_Key dropped");
    p.deth = Some(Deth {
        qkey: 0x1111_1111,
        src_qp: 0x33,
    });
    let mut buf = [0u8; 64];
    let n = p.emit(&mut buf).unwrap();
    let grh = [0xabu8; 40];
    f.qp.handle_packet_with_grh(f.now, &buf[..n], &grh, &mut f.mem);
    let wc = f.wcs();
    assert_eq!(wc[0].status, WcStatus::Success);
    assert_eq!((wc[0].byte_len, wc[0].src_qp, wc[0].grh), (45, 0x33, true));
    assert_eq!(f.bytes(0, 40), grh);
    assert_eq!(f.bytes(40, 5), b"dgram");
}

// ---------------------------------------------------------------------------
// Requester / completer
// ---------------------------------------------------------------------------

#[test]
fn requester_segments_by_mtu_and_sets_ackreq_on_last() {
    let mut f = qp_rts(QpType::Rc);
    let sge = Sge {
        addr: BASE,
        length: (2 * MTU + 1) as u32,
        lkey: f.lkey,
    };
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
        Some(Reth {
            va: 0x5000,
            rkey: 9,
            len: 2 * MTU as u32 + 1
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
    let sge = Sge {
        addr: BASE,
        length: 8,
        lkey: f.lkey,
    };
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
    let sge = Sge {
        addr: BASE,
        length: 8,
        lkey: f.lkey,
    };
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
        let sge = Sge {
            addr: BASE,
            length: 8,
            lkey: f.lkey,
        };
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
    let (alk, _) = net
        .node_mut(a)
        .mem
        .register(Pd(1), 0x1000, 64, Access::all());
    let (blk, _) = net
        .node_mut(b)
        .mem
        .register(Pd(1), 0x1000, 64, Access::all());
    let sge = Sge {
        addr: 0x1000,
        length: 8,
        lkey: alk,
    };
    net.qp_mut(a)
        .post_send(SendWr::new(1, SendOp::Send, vec![sge]))
        .unwrap();
    net.run_until(Instant::from_nanos(200_000));
    assert!(net.qp(a).stats().rnr_naks_received >= 5);
    let r = RecvWr {
        wr_id: 2,
        sg_list: vec![Sge {
            addr: 0x1000,
            length: 64,
            lkey: blk,
        }],
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
    let (alk, _) = net
        .node_mut(a)
        .mem
        .register(Pd(1), 0x1000, 64, Access::all());
    let sge = Sge {
        addr: 0x1000,
        length: 8,
        lkey: alk,
    };
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
    let (alk, _) = net
        .node_mut(a)
        .mem
        .register(Pd(1), 0x1000, 64, Access::all());
    net.filter = Some(Box::new(|_, _| true));
    let sge = Sge {
        addr: 0x1000,
        length: 8,
        lkey: alk,
    };
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
    let sge = Sge {
        addr: BASE,
        length: 8,
        lkey: f.lkey ^ 0x100,
    };
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
    let sge = Sge {
        addr: BASE,
        length: 16,
        lkey: f.lkey,
    };
    f.qp.post_send(SendWr::new(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 1,
        },
        vec![sge],
    ))
    .unwrap();
    assert_eq!(f.recv()[0].opcode, 0x0c);
    let mut p = mk(0x10, 500);
    p.aeth = Some(Aeth {
        syndrome: syndrome::ACK,
        msn: 1,
    });
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
    let sge = Sge {
        addr: BASE,
        length: 8,
        lkey: f.lkey,
    };
    f.qp.post_send(SendWr::new(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 1,
        },
        vec![sge],
    ))
    .unwrap();
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
    let mut p = mk(0x10, 500);
    p.aeth = Some(Aeth {
        syndrome: syndrome::ACK,
        msn: 1,
    });
    p.payload = &[1, 2, 3, 4, 5, 6, 7, 8];
    f.send(&p);
    let out = f.recv();
    assert_eq!((out[0].opcode, out[0].psn), (0x14, 501));
    // A fenced SEND waits for the atomic.
    let mut w = SendWr::new(3, SendOp::Send, vec![sge]);
    w.fence = true;
    f.qp.post_send(w).unwrap();
    f.recv_nothing();
    let mut p = mk(0x12, 501);
    p.aeth = Some(Aeth {
        syndrome: syndrome::ACK,
        msn: 2,
    });
    p.atomic_ack = Some(41);
    f.send(&p);
    assert_eq!(f.recv()[0].psn, 502);
    let wc = f.wcs();
    assert_eq!(wc.len(), 2);
    assert_eq!(f.bytes(0, 8), 41u64.to_le_bytes());
}

#[test]
fn ack_beyond_an_unanswered_read_retries_the_read() {
    let mut f = qp_rts(QpType::Rc);
    let sge = Sge {
        addr: BASE,
        length: 8,
        lkey: f.lkey,
    };
    f.qp.post_send(SendWr::new(
        1,
        SendOp::Read {
            remote_addr: 0x40,
            rkey: 1,
        },
        vec![sge],
    ))
    .unwrap();
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
    let sge = Sge {
        addr: BASE,
        length: 4,
        lkey: f.lkey,
    };
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
    let p = Packet::parse(&buf[..t.len]).unwrap();
    assert_eq!(p.bth.opcode, 0x65);
    // Bit 31 set: the QP's own Q_Key is used.
    assert_eq!(
        p.deth,
        Some(Deth {
            qkey: 0x1111_1111,
            src_qp: QPN
        })
    );
    assert_eq!(f.wcs()[0].status, WcStatus::Success);
    // Longer than the port MTU (1024 here): IBTA C10-93.1.1, no packet and
    // no error.
    let sge = Sge {
        addr: BASE,
        length: 2000,
        lkey: f.lkey,
    };
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
    let mut buf = [0u8; 600];
    let p = write_pkt(100, BASE, 1, &[1; 8]);
    let n = p.emit(&mut buf).unwrap();
    f.qp.handle_packet(f.now, &buf[..n], &mut d);
    let mut s = mk(0x04, 100);
    s.payload = b"x";
    let n = s.emit(&mut buf).unwrap();
    f.qp.handle_packet(f.now, &buf[..n], &mut d);
    let mut out = [0u8; 600];
    assert!(f.qp.poll_transmit(f.now, &mut out, &mut d).is_some());
}

#[test]
fn remote_access_error_end_to_end() {
    // A WRITE with a forged rkey: the responder NAKs (remote access) and goes
    // to ERR; the requester completes REM_ACCESS_ERR, flushes the rest.
    let mut net = Network::new(LinkConfig::default(), 5);
    let (a, b) = net.connected_pair(QpType::Rc);
    let (alk, _) = net
        .node_mut(a)
        .mem
        .register(Pd(1), 0x1000, 64, Access::all());
    let (blk, brk) = net
        .node_mut(b)
        .mem
        .register(Pd(1), 0x1000, 64, Access::all());
    let r = RecvWr {
        wr_id: 9,
        sg_list: vec![Sge {
            addr: 0x1000,
            length: 64,
            lkey: blk,
        }],
    };
    net.qp_mut(b).post_recv(r).unwrap();
    let sge = Sge {
        addr: 0x1000,
        length: 8,
        lkey: alk,
    };
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
    let mut big = SendWr::new(
        1,
        SendOp::Send,
        vec![Sge {
            addr: BASE,
            length: 10,
            lkey: f.lkey ^ 0x100,
        }],
    );
    big.ud = Some(dest);
    let mut small = SendWr::new(
        2,
        SendOp::Send,
        vec![Sge {
            addr: BASE,
            length: 10,
            lkey: f.lkey,
        }],
    );
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
    p.deth = Some(Deth {
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
    let (alk, _) = net
        .node_mut(a)
        .mem
        .register(Pd(1), 0x1000, 8192, Access::all());
    let (_, brk) = net
        .node_mut(b)
        .mem
        .register(Pd(1), 0x1000, 8192, Access::all());
    let small = Sge {
        addr: 0x1000,
        length: 512,
        lkey: alk,
    };
    let big = Sge {
        addr: 0x1000,
        length: 8192,
        lkey: alk,
    };
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
