//! Property tests: 24-bit PSN arithmetic, traffic across the PSN wrap,
//! hostile packets against a responder in RTS, UC/UD under loss, and the
//! engine's packets read back by `rdmakit-wire`.

use std::time::Duration;

use proptest::prelude::*;
use rdmakit_proto::sim::{LinkConfig, Network};
use rdmakit_proto::{
    Access, Instant, MemTable, Pd, Psn, Qp, QpAttr, QpConfig, QpState, QpType, RecvWr, SendOp,
    SendWr, Sge, UdDest, WcStatus,
};
use rdmakit_wire::aeth::AethKind;
use rdmakit_wire::opcode::OpCode;
use rdmakit_wire::{aeth, atomic_ack_eth, atomic_eth, deth, ieth, immdt, reth, roce};

const M: u32 = 1 << 24;

proptest! {
    #[test]
    fn psn_add_sub_diff(a in 0u32..M, n in 0u32..(1 << 23)) {
        let p = Psn::new(a);
        prop_assert_eq!(p.add(n).sub(n), p);
        prop_assert_eq!(p.add(n).diff(p), n as i32);
        prop_assert_eq!(p.diff(p.add(n)), -(n as i32));
        prop_assert!(p.add(n).value() < M);
        if n > 0 {
            prop_assert!(p.before(p.add(n)));
            prop_assert!(p.add(n).after(p));
        }
        prop_assert!(p.add(n / 2).within(p, p.add(n)));
    }

    #[test]
    fn psn_diff_is_antisymmetric(a in 0u32..M, b in 0u32..M) {
        let (x, y) = (Psn::new(a), Psn::new(b));
        let d = x.diff(y);
        prop_assert!((-(1 << 23)..(1 << 23)).contains(&d));
        if d != -(1 << 23) {
            prop_assert_eq!(y.diff(x), -d);
        }
        prop_assert_eq!(y.add(d as u32), x);
    }
}

/// Mixed traffic over a lossy link with PSNs starting just below 2^24.
fn wrap_run(start_a: u32, start_b: u32, seed: u64, loss: f64) {
    let cfg = LinkConfig {
        loss,
        duplicate: loss / 2.0,
        reorder: loss / 2.0,
        jitter: Duration::from_nanos(500),
        timeout: 6,
        mtu: rdmakit_proto::Mtu::Mtu256,
        ..LinkConfig::default()
    };
    let mut net = Network::new(cfg, seed);
    let na = net.add_node();
    let nb = net.add_node();
    let a = net.add_qp(na, QpConfig::new(0x11, QpType::Rc, Pd(1)));
    let b = net.add_qp(nb, QpConfig::new(0x22, QpType::Rc, Pd(1)));
    net.connect_psn(a, b, start_a, start_b);
    net.connect_psn(b, a, start_b, start_a);
    let (alk, _) = net.register_all(a, 0x1000, 8192);
    let (blk, brk) = net.register_all(b, 0x1000, 8192);
    net.fill(a, alk, |k| k as u8);
    for i in 0..8 {
        let r = RecvWr {
            wr_id: i,
            sg_list: vec![Sge {
                addr: 0x1000 + i * 1024,
                length: 1024,
                lkey: blk,
            }],
        };
        net.qp_mut(b).post_recv(r).unwrap();
    }
    let src = |len| {
        vec![Sge {
            addr: 0x1000,
            length: len,
            lkey: alk,
        }]
    };
    let ops = [
        SendOp::Send,
        SendOp::Read {
            remote_addr: 0x1000,
            rkey: brk,
        },
        SendOp::FetchAdd {
            remote_addr: 0x1000 + 8184,
            rkey: brk,
            add: 1,
        },
        SendOp::SendWithImm { imm: 9 },
        SendOp::Write {
            remote_addr: 0x1000 + 4096,
            rkey: brk,
        },
    ];
    let mut n = 0;
    for (i, op) in ops.iter().cycle().take(20).enumerate() {
        let len = match op {
            SendOp::FetchAdd { .. } => 8,
            _ => (i as u32 * 97) % 1000,
        };
        let sgl = match op {
            SendOp::Read { .. } | SendOp::FetchAdd { .. } => {
                vec![Sge {
                    addr: 0x1000 + 4096 + 2048,
                    length: len,
                    lkey: alk,
                }]
            }
            _ => src(len),
        };
        if matches!(op, SendOp::Send | SendOp::SendWithImm { .. }) {
            n += 1;
        }
        net.qp_mut(a)
            .post_send(SendWr::new(i as u64, *op, sgl))
            .unwrap();
    }
    assert!(net.run_until_idle());
    let wa = net.take_completions(a);
    assert_eq!(wa.len(), 20);
    assert!(wa.iter().all(|w| w.status == WcStatus::Success), "{wa:?}");
    let wb = net.take_completions(b);
    assert_eq!(wb.len(), n);
    assert!(wb.iter().all(|w| w.status == WcStatus::Success));
    let d = &net.node(b).mem.region(blk).unwrap().data;
    assert_eq!(
        u64::from_le_bytes(d[8184..8192].try_into().unwrap()),
        4,
        "4 fetch-adds, once each"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn traffic_across_the_psn_wrap(da in 0u32..40, db in 0u32..40, seed in any::<u64>(), lossy in any::<bool>()) {
        wrap_run(M - da, M - db, seed, if lossy { 0.1 } else { 0.0 });
    }
}

/// A responder in RTS with registered memory: one region it may write
/// (REMOTE_WRITE | REMOTE_ATOMIC), one it may only read, one of another PD.
fn hostile_target() -> (Qp, MemTable, u32, u32, u32) {
    let mut qp = Qp::new(QpConfig::new(0x11, QpType::Rc, Pd(1)));
    let mut mem = MemTable::new();
    let (_, rw) = mem.register(
        Pd(1),
        0x1000,
        256,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
    );
    let (_, ro) = mem.register(Pd(1), 0x2000, 256, Access::REMOTE_READ);
    let (_, other) = mem.register(Pd(2), 0x3000, 256, Access::all());
    let (rlk, _) = mem.register(Pd(1), 0x4000, 256, Access::LOCAL_WRITE);
    let a = QpAttr {
        qp_state: QpState::Init,
        dest_qp_num: 0x22,
        qp_access_flags: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
        path_mtu: rdmakit_proto::Mtu::Mtu256,
        rq_psn: 10,
        max_dest_rd_atomic: 4,
        ..QpAttr::default()
    };
    qp.bring_up(&a, QpState::Rts).unwrap();
    for i in 0..4 {
        qp.post_recv(RecvWr {
            wr_id: i,
            sg_list: vec![Sge {
                addr: 0x4000 + i * 64,
                length: 64,
                lkey: rlk,
            }],
        })
        .unwrap();
    }
    (qp, mem, rw, ro, other)
}

fn arb_packet(rw: u32, ro: u32, other: u32) -> impl Strategy<Value = Vec<u8>> {
    let opcodes: Vec<u8> = OpCode::all_known().map(|o| o.0).collect();
    (
        proptest::sample::select(opcodes),
        0u32..30,
        prop_oneof![Just(0x11u32), Just(0x12u32)],
        prop_oneof![Just(rw), Just(ro), Just(other), any::<u32>()],
        prop_oneof![
            0x0f80u64..0x1200,
            0x1f00u64..0x2100,
            0x2f00u64..0x3100,
            any::<u64>()
        ],
        prop_oneof![0u32..300, any::<u32>()],
        proptest::collection::vec(any::<u8>(), 0..300),
        any::<bool>(),
        0usize..80,
    )
        .prop_map(move |(op, psn, dqpn, rkey, va, len, payload, ack, trunc)| {
            let info = OpCode(op).info().unwrap_or_else(|| unreachable!());
            let h = info.headers;
            let mut p = roce::Repr {
                deth: h.deth.then_some(deth::Repr { qkey: 0, src_qp: 1 }),
                reth: h.reth.then_some(reth::Repr {
                    va,
                    rkey,
                    dma_len: len,
                }),
                atomic_eth: h.atomic_eth.then_some(atomic_eth::Repr {
                    va,
                    rkey,
                    swap_add: 1,
                    compare: 0,
                }),
                aeth: h.aeth.then_some(aeth::Repr {
                    kind: AethKind::from_syndrome((len & 0xff) as u8),
                    msn: 0,
                }),
                atomic_ack_eth: h
                    .atomic_ack_eth
                    .then_some(atomic_ack_eth::Repr { orig_value: 7 }),
                immdt: h.immdt.then_some(immdt::Repr { imm: 1 }),
                ieth: h.ieth.then_some(ieth::Repr { rkey }),
                payload: &payload,
                ..roce::Repr::new(OpCode(op), dqpn, psn)
            };
            p.bth.ack_req = ack;
            // An opcode without payload gets as many zero bytes: malformed.
            let mut buf = vec![0u8; p.header_len() + payload.len() + 3];
            let (at, n) = p
                .emit_header_without_icrc(&mut buf, payload.len())
                .unwrap_or_else(|_| unreachable!());
            if info.has_payload {
                buf[at..at + payload.len()].copy_from_slice(&payload);
            }
            buf.truncate(n);
            // Sometimes cut it short, sometimes flip a byte.
            if trunc < 10 {
                buf.truncate(buf.len().saturating_sub(trunc + 1));
            } else if trunc < 20 && !buf.is_empty() {
                let i = trunc % buf.len();
                buf[i] ^= 0x5a;
            }
            buf
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Random (mostly well-formed) packets against a responder in RTS never
    /// panic, never touch read-only or foreign-PD memory, and every packet
    /// the engine answers with parses.
    #[test]
    fn hostile_packets_never_write_outside_rights(
        seeds in proptest::collection::vec(any::<u8>(), 1..2),
        pkts in proptest::collection::vec(arb_packet(0x22, 0x122, 0x222), 1..40),
    ) {
        let _ = seeds;
        let (mut qp, mut mem, rw, ro, other) = hostile_target();
        prop_assert_eq!((rw, ro, other), (0x22, 0x122, 0x222));
        let before_ro = mem.region(ro).unwrap().data.clone();
        let before_other = mem.region(other).unwrap().data.clone();
        let mut out = vec![0u8; 2048];
        let mut now = Instant::ZERO;
        for p in &pkts {
            qp.handle_packet(now, p, &mut mem);
            while let Some(t) = qp.poll_transmit(now, &mut out, &mut mem) {
                prop_assert!(roce::Repr::parse_without_icrc(&out[..t.len]).is_ok());
                prop_assert!(check_with_wire(&out[..t.len]));
            }
            while qp.poll_completion().is_some() {}
            if let Some(t) = qp.poll_timeout() {
                now = t;
                qp.handle_timeout(now);
            }
        }
        prop_assert_eq!(&mem.region(ro).unwrap().data, &before_ro);
        prop_assert_eq!(&mem.region(other).unwrap().data, &before_other);
    }
}

/// `rdmakit-wire`'s full parser reads what the engine wrote, given the
/// ICRC slot a driver appends, as the engine's ICRC-less parse does.
fn check_with_wire(pkt: &[u8]) -> bool {
    let mut framed = pkt.to_vec();
    framed.extend_from_slice(&[0; 4]); // ICRC slot (not checked here)
    let Ok(view) = roce::Packet::new_checked(&framed[..]) else {
        return false;
    };
    let Ok(w) = roce::Repr::parse(&view) else {
        return false;
    };
    roce::Repr::parse_without_icrc(pkt) == Ok(w)
}

#[test]
fn engine_packets_parse_with_wire() {
    let mut net = Network::new(
        LinkConfig {
            mtu: rdmakit_proto::Mtu::Mtu256,
            ..LinkConfig::default()
        },
        1,
    );
    let (a, b) = net.connected_pair(QpType::Rc);
    net.trace = Some(Vec::new());
    let (alk, _) = net.register_all(a, 0x1000, 4096);
    let (blk, brk) = net.register_all(b, 0x1000, 4096);
    for wr_id in [1, 3, 2] {
        net.qp_mut(b)
            .post_recv(RecvWr {
                wr_id,
                sg_list: vec![Sge {
                    addr: 0x1000,
                    length: 4096,
                    lkey: blk,
                }],
            })
            .unwrap();
    }
    let s = |len| {
        vec![Sge {
            addr: 0x1000,
            length: len,
            lkey: alk,
        }]
    };
    for (i, (op, len)) in [
        (SendOp::Send, 700),
        (SendOp::SendWithImm { imm: 1 }, 3),
        (
            SendOp::Write {
                remote_addr: 0x1100,
                rkey: brk,
            },
            600,
        ),
        (
            SendOp::WriteWithImm {
                remote_addr: 0x1100,
                rkey: brk,
                imm: 2,
            },
            0,
        ),
        (
            SendOp::Read {
                remote_addr: 0x1000,
                rkey: brk,
            },
            900,
        ),
        (
            SendOp::CompareSwap {
                remote_addr: 0x1008,
                rkey: brk,
                compare: 0,
                swap: 1,
            },
            8,
        ),
        (
            SendOp::FetchAdd {
                remote_addr: 0x1008,
                rkey: brk,
                add: 1,
            },
            8,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        net.qp_mut(a)
            .post_send(SendWr::new(i as u64, op, s(len)))
            .unwrap();
    }
    assert!(net.run_until_idle());
    let trace = net.trace.take().unwrap_or_default();
    assert!(trace.len() > 15);
    for (_, _, pkt) in &trace {
        assert!(check_with_wire(pkt), "wire disagrees on {pkt:02x?}");
    }
}

#[test]
fn uc_and_ud_under_loss_deliver_intact_or_not_at_all() {
    for t in [QpType::Uc, QpType::Ud] {
        let cfg = LinkConfig {
            loss: 0.1,
            duplicate: 0.05,
            corrupt: 0.05,
            reorder: 0.05,
            jitter: Duration::from_nanos(300),
            mtu: rdmakit_proto::Mtu::Mtu256,
            ..LinkConfig::default()
        };
        let mut net = Network::new(cfg, 77);
        let (a, b) = net.connected_pair(t);
        let (alk, _) = net.register_all(a, 0x1000, 1 << 16);
        let (blk, _) = net.register_all(b, 0x1000, 1 << 20);
        net.fill(a, alk, |k| (k / 3) as u8);
        let slot = 2048u64;
        for i in 0..400 {
            let r = RecvWr {
                wr_id: i,
                sg_list: vec![Sge {
                    addr: 0x1000 + i * slot,
                    length: slot as u32,
                    lkey: blk,
                }],
            };
            net.qp_mut(b).post_recv(r).unwrap();
        }
        let n = 300u64;
        let max = if t == QpType::Ud { 250 } else { 1000 };
        for i in 0..n {
            let len = ((i * 37) % max) as u32;
            let off = i * 7;
            let mut wr = SendWr::new(
                i,
                SendOp::SendWithImm { imm: i as u32 },
                vec![Sge {
                    addr: 0x1000 + off,
                    length: len,
                    lkey: alk,
                }],
            );
            wr.ud = Some(UdDest {
                ah: rdmakit_proto::AddressHandle(b.node as u32),
                remote_qpn: 0x22,
                remote_qkey: 0x1111_1111,
            });
            net.qp_mut(a).post_send(wr).unwrap();
            if i % 16 == 15 {
                net.run_until(net.now() + Duration::from_micros(20));
            }
        }
        assert!(net.run_until_idle());
        let wa = net.take_completions(a);
        assert_eq!(wa.len() as u64, n);
        assert!(wa.iter().all(|w| w.status == WcStatus::Success));
        let wb = net.take_completions(b);
        assert!(
            !wb.is_empty() && (wb.len() as u64) < n,
            "{t:?}: some lost, some delivered ({})",
            wb.len()
        );
        let mut last = None;
        for w in &wb {
            assert_eq!(w.status, WcStatus::Success);
            let i = u64::from(w.imm_data.unwrap());
            // UC: in order, never twice. UD has no PSN checks: a duplicated
            // or reordered datagram is delivered as it comes.
            assert!(
                t == QpType::Ud || last.is_none_or(|l| i > l),
                "{t:?}: duplicate or reordered delivery of {i}"
            );
            last = Some(i);
            let len = ((i * 37) % max) as usize;
            let grh = if t == QpType::Ud { 40 } else { 0 };
            assert_eq!(w.byte_len as usize, len + grh);
            let base = (w.wr_id * slot) as usize + grh;
            if t == QpType::Ud {
                // The GRH area holds 20 zero bytes and the IPv4 header
                // (version 4, UDP, from 10.0.0.1 to 10.0.0.2).
                assert!(w.grh);
                let g = &net.node(b).mem.region(blk).unwrap().data[base - 40..base];
                assert_eq!(&g[..20], &[0u8; 20]);
                assert_eq!((g[20], g[29]), (0x45, 17));
                assert_eq!(&g[32..40], &[10, 0, 0, 1, 10, 0, 0, 2]);
            }
            let got = &net.node(b).mem.region(blk).unwrap().data[base..base + len];
            let src = &net.node(a).mem.region(alk).unwrap().data
                [(i * 7) as usize..(i * 7) as usize + len];
            assert_eq!(got, src, "{t:?}: message {i} corrupted");
        }
    }
}

#[test]
fn state_after_hostile_input_is_consistent() {
    // A READ request for memory the QP cannot read: NAK, then ERR, then flush.
    let (mut qp, mut mem, _rw, _ro, other) = hostile_target();
    let mut p = roce::Repr {
        reth: Some(reth::Repr {
            va: 0x3000,
            rkey: other,
            dma_len: 16,
        }),
        ..roce::Repr::new(OpCode::RC_RDMA_READ_REQUEST, 0x11, 10)
    };
    let mut buf = [0u8; 64];
    let (_, n) = p.emit_header_without_icrc(&mut buf, 0).unwrap();
    qp.handle_packet(Instant::ZERO, &buf[..n], &mut mem);
    let mut out = [0u8; 1024];
    let t = qp.poll_transmit(Instant::ZERO, &mut out, &mut mem).unwrap();
    let r = roce::Repr::parse_without_icrc(&out[..t.len]).unwrap();
    assert_eq!(r.aeth.unwrap().kind.syndrome(), 0x62);
    assert_eq!(qp.state(), QpState::Err);
    let flushed: Vec<_> = std::iter::from_fn(|| qp.poll_completion()).collect();
    assert_eq!(flushed.len(), 4);
    assert!(flushed.iter().all(|w| w.status == WcStatus::WrFlushErr));
    p.bth.psn = 11;
    let (_, n) = p.emit_header_without_icrc(&mut buf, 0).unwrap();
    qp.handle_packet(Instant::ZERO, &buf[..n], &mut mem);
    assert!(qp
        .poll_transmit(Instant::ZERO, &mut out, &mut mem)
        .is_none());
}

#[test]
fn three_nodes_two_qps_on_one_host_under_loss() {
    // A -> B and C -> B, both RC, B hosting two QPs on one memory table.
    let cfg = LinkConfig {
        loss: 0.05,
        duplicate: 0.02,
        reorder: 0.02,
        jitter: Duration::from_nanos(400),
        mtu: rdmakit_proto::Mtu::Mtu512,
        ..LinkConfig::default()
    };
    let mut net = Network::new(cfg, 42);
    let (na, nb, nc) = (net.add_node(), net.add_node(), net.add_node());
    let a = net.add_qp(na, QpConfig::new(0x11, QpType::Rc, Pd(1)));
    let b1 = net.add_qp(nb, QpConfig::new(0x21, QpType::Rc, Pd(1)));
    let b2 = net.add_qp(nb, QpConfig::new(0x22, QpType::Rc, Pd(1)));
    let c = net.add_qp(nc, QpConfig::new(0x31, QpType::Rc, Pd(1)));
    net.connect(a, b1);
    net.connect(b1, a);
    net.connect(c, b2);
    net.connect(b2, c);
    let (alk, _) = net.register_all(a, 0x1000, 4096);
    let (clk, _) = net.register_all(c, 0x1000, 4096);
    let (_, brk) = net.register_all(b1, 0x10_0000, 1 << 16);
    net.fill(a, alk, |k| k as u8);
    net.fill(c, clk, |k| !(k as u8));
    for i in 0..16u64 {
        for (q, lk, base) in [(a, alk, 0x10_0000u64), (c, clk, 0x10_8000u64)] {
            let op = SendOp::Write {
                remote_addr: base + i * 2048,
                rkey: brk,
            };
            let sge = Sge {
                addr: 0x1000,
                length: 2048,
                lkey: lk,
            };
            net.qp_mut(q)
                .post_send(SendWr::new(i, op, vec![sge]))
                .unwrap();
        }
    }
    assert!(net.run_until_idle());
    for q in [a, c] {
        let w = net.take_completions(q);
        assert_eq!(w.len(), 16);
        assert!(w.iter().all(|w| w.status == WcStatus::Success));
    }
    let d = net.node(b1).mem.region(brk).unwrap().data.clone();
    for i in 0..16usize {
        for k in 0..2048usize {
            assert_eq!(d[i * 2048 + k], k as u8);
            assert_eq!(d[0x8000 + i * 2048 + k], !(k as u8));
        }
    }
}

/// Splits `len` bytes at `base` into SGEs at the cut points.
fn split_sgl(base: u64, len: u32, cuts: &[u32], lkey: u32) -> Vec<Sge> {
    let mut pts: Vec<u32> = cuts.iter().map(|c| c % (len + 1)).collect();
    pts.push(0);
    pts.push(len);
    pts.sort_unstable();
    pts.windows(2)
        .map(|w| Sge {
            addr: base + u64::from(w[0]),
            length: w[1] - w[0],
            lkey,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// Gather from several SGEs (some empty), scatter into several: SEND,
    /// WRITE and READ move exactly the bytes, under a little loss.
    #[test]
    fn scatter_gather_lists(
        len in 0u32..2000,
        gcuts in proptest::collection::vec(any::<u32>(), 0..4),
        scuts in proptest::collection::vec(any::<u32>(), 0..4),
        seed in any::<u64>(),
    ) {
        let cfg = LinkConfig { loss: 0.05, mtu: rdmakit_proto::Mtu::Mtu256, timeout: 5, ..LinkConfig::default() };
        let mut net = Network::new(cfg, seed);
        let (a, b) = net.connected_pair(QpType::Rc);
        let (alk, _) = net.register_all(a, 0x10000, 8192);
        let (blk, brk) = net.register_all(b, 0x10000, 8192);
        net.fill(a, alk, |k| (k * 13 + 1) as u8);
        for (k, x) in net.node_mut(b).mem.region_mut(blk).unwrap().data.iter_mut().enumerate() {
            if k >= 6144 {
                *x = (k * 7 + 3) as u8;
            }
        }
        let gather = split_sgl(0x10000, len, &gcuts, alk);
        // SEND: A[0..len] -> B[0..len] via a split receive list.
        let scatter = split_sgl(0x10000, len, &scuts, blk);
        net.qp_mut(b).post_recv(RecvWr { wr_id: 1, sg_list: scatter }).unwrap();
        net.qp_mut(a).post_send(SendWr::new(1, SendOp::Send, gather.clone())).unwrap();
        // WRITE: A[0..len] -> B[2048..].
        let w = SendOp::Write { remote_addr: 0x10000 + 2048, rkey: brk };
        net.qp_mut(a).post_send(SendWr::new(2, w, gather)).unwrap();
        // READ: B[6144..] -> A[4096..] via a split local list.
        let r = SendOp::Read { remote_addr: 0x10000 + 6144, rkey: brk };
        let local = split_sgl(0x10000 + 4096, len, &scuts, alk);
        net.qp_mut(a).post_send(SendWr::new(3, r, local)).unwrap();
        prop_assert!(net.run_until_idle());
        let wa = net.take_completions(a);
        prop_assert_eq!(wa.len(), 3);
        prop_assert!(wa.iter().all(|w| w.status == WcStatus::Success));
        let wb = net.take_completions(b);
        prop_assert_eq!(wb[0].byte_len, len);
        let n = len as usize;
        let ad = net.node(a).mem.region(alk).unwrap().data.clone();
        let bd = net.node(b).mem.region(blk).unwrap().data.clone();
        prop_assert_eq!(&bd[..n], &ad[..n]);
        prop_assert_eq!(&bd[2048..2048 + n], &ad[..n]);
        prop_assert_eq!(&ad[4096..4096 + n], &bd[6144..6144 + n]);
        // Nothing past the message was touched.
        prop_assert!(bd[n..2048].iter().all(|&x| x == 0));
        prop_assert!(bd[2048 + n..6144].iter().all(|&x| x == 0));
    }
}
