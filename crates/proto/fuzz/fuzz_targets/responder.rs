//! Random packets against an engine in RTS with registered memory and
//! outstanding work on both queues (so responder and completer are both
//! exercised). Must never panic, never touch memory it has no right to, and
//! every packet it emits must parse.
//!
//! Input: byte 0 picks the QP type; then records `[len u16 LE][flags][bias][packet..]`.
//! `flags` patch the packet so it reaches deep paths: bit 0 = our QPN,
//! bit 1 = default P_Key, bit 2 = PSN = expected + bias (as i8),
//! bit 3 = valid rkey in RETH/AtomicETH, bit 4 = advance time to the next timer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmakit_proto::{
    Access, AddressHandle, Instant, MemTable, Pd, Qp, QpType, RecvWr, SendOp, SendWr, Sge,
    UdDest,
};
use rdmakit_wire::opcode::OpCode;
use rdmakit_wire::roce;

mod common;

use common::QPN;

fn setup(t: QpType) -> (Qp, MemTable, u32, u32, u32) {
    let mut qp = common::rts_qp(
        t,
        Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
    );
    let mut mem = MemTable::new();
    let (lk, rw) = mem.register(Pd(1), 0x1000, 1024, Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC);
    let (_, ro) = mem.register(Pd(1), 0x2000, 1024, Access::REMOTE_READ);
    let (_, other) = mem.register(Pd(2), 0x3000, 1024, Access::all());
    for i in 0..4u64 {
        let sge = Sge { addr: 0x1000 + i * 128, length: 128, lkey: lk };
        let _ = qp.post_recv(RecvWr { wr_id: i, sg_list: vec![sge] });
    }
    let sge = |len| vec![Sge { addr: 0x1000 + 512, length: len, lkey: lk }];
    let mut wrs = vec![
        SendWr::new(10, SendOp::Send, sge(300)),
        SendWr::new(11, SendOp::Write { remote_addr: 0x9000, rkey: 5, }, sge(20)),
    ];
    if t == QpType::Rc {
        wrs.push(SendWr::new(12, SendOp::Read { remote_addr: 0x9000, rkey: 5 }, sge(600)));
        wrs.push(SendWr::new(13, SendOp::FetchAdd { remote_addr: 0x9000, rkey: 5, add: 1 }, sge(8)));
        wrs.push(SendWr::new(14, SendOp::Send, sge(0)));
    }
    for mut w in wrs {
        if t == QpType::Ud {
            if w.op != SendOp::Send {
                continue;
            }
            w.ud = Some(UdDest { ah: AddressHandle(1), remote_qpn: 0x22, remote_qkey: 0x1111_1111 });
            w.sg_list = sge(200);
        }
        let _ = qp.post_send(w);
    }
    (qp, mem, rw, ro, other)
}

fn patch(pkt: &mut [u8], flags: u8, bias: u8, epsn: u32, rkey: u32) {
    if pkt.len() < 12 {
        return;
    }
    if flags & 1 != 0 {
        pkt[5..8].copy_from_slice(&QPN.to_be_bytes()[1..]);
    }
    if flags & 2 != 0 {
        pkt[2] = 0xff;
        pkt[3] = 0xff;
    }
    if flags & 4 != 0 {
        let psn = epsn.wrapping_add(bias as i8 as i32 as u32) & 0x00ff_ffff;
        pkt[9..12].copy_from_slice(&psn.to_be_bytes()[1..]);
    }
    if flags & 8 != 0 {
        if let Some(h) = OpCode(pkt[0]).info().map(|i| i.headers) {
            let at = 12 + if h.deth { 8 } else { 0 };
            if (h.reth || h.atomic_eth) && pkt.len() >= at + 12 {
                pkt[at + 8..at + 12].copy_from_slice(&rkey.to_be_bytes());
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, mut rest)) = data.split_first() else { return };
    let t = match sel % 3 {
        0 => QpType::Rc,
        1 => QpType::Uc,
        _ => QpType::Ud,
    };
    let (mut qp, mut mem, rw, ro, other) = setup(t);
    let ro_before = mem.region(ro).map(|r| r.data.clone());
    let other_before = mem.region(other).map(|r| r.data.clone());
    let mut now = Instant::ZERO;
    let mut out = vec![0u8; 2048];
    let mut pkt = Vec::new();
    loop {
        // Drain what the engine has to say, checking it parses.
        while let Some(tx) = qp.poll_transmit(now, &mut out, &mut mem) {
            assert!(
                roce::Repr::parse_without_icrc(&out[..tx.len]).is_ok(),
                "engine emitted an invalid packet"
            );
        }
        while qp.poll_completion().is_some() {}
        if rest.len() < 4 {
            break;
        }
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(rest.len() - 4);
        let (flags, bias) = (rest[2], rest[3]);
        pkt.clear();
        pkt.extend_from_slice(&rest[4..4 + len]);
        rest = &rest[4 + len..];
        let epsn = qp.attr().rq_psn;
        let rkey = match bias % 3 {
            0 => rw,
            1 => ro,
            _ => other,
        };
        patch(&mut pkt, flags, bias, epsn, rkey);
        qp.handle_packet(now, &pkt, &mut mem);
        if flags & 16 != 0 {
            if let Some(d) = qp.poll_timeout() {
                now = d.max(now);
                qp.handle_timeout(now);
            }
        }
    }
    assert!(mem.region(ro).map(|r| r.data.clone()) == ro_before, "read-only region written");
    assert!(mem.region(other).map(|r| r.data.clone()) == other_before, "foreign-PD region written");
});
