//! Engine-only throughput: two RC engines wired back to back (no simulator
//! queue, no ICRC, no loss), 4 KiB path MTU. Each iteration moves 16 messages
//! of 64 KiB (256 data packets plus ACKs) with RDMA WRITE or SEND.
//!
//! `cargo bench -p rdmakit-proto --bench throughput`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rdmakit_proto::{
    Access, AddressHandle, Instant, MemTable, Mtu, Pd, Qp, QpAttr, QpConfig, QpState, QpType,
    RecvWr, SendOp, SendWr, Sge,
};

const MSG: u32 = 64 * 1024;
const MSGS: u64 = 16;

struct Side {
    qp: Qp,
    mem: MemTable,
    lkey: u32,
    rkey: u32,
}

fn side(qpn: u32, peer: u32) -> Side {
    let mut qp = Qp::new(QpConfig::new(qpn, QpType::Rc, Pd(1)));
    let a = QpAttr {
        qp_state: QpState::Init,
        path_mtu: Mtu::Mtu4096,
        dest_qp_num: peer,
        qp_access_flags: Access::all(),
        ah: AddressHandle(0),
        timeout: 14,
        max_rd_atomic: 16,
        max_dest_rd_atomic: 16,
        ..QpAttr::default()
    };
    qp.bring_up(&a, QpState::Rts).expect("bring-up");
    let mut mem = MemTable::new();
    let (lkey, rkey) = mem.register(
        Pd(1),
        0x10_0000,
        (MSG as usize) * MSGS as usize,
        Access::all(),
    );
    Side {
        qp,
        mem,
        lkey,
        rkey,
    }
}

/// Runs one batch; returns packets moved.
fn batch(a: &mut Side, b: &mut Side, send: bool, buf: &mut [u8]) -> u64 {
    let now = Instant::ZERO;
    for i in 0..MSGS {
        let addr = 0x10_0000 + i * u64::from(MSG);
        let sge = Sge {
            addr,
            length: MSG,
            lkey: a.lkey,
        };
        let op = if send {
            let r = Sge {
                addr,
                length: MSG,
                lkey: b.lkey,
            };
            b.qp.post_recv(RecvWr {
                wr_id: i,
                sg_list: vec![r],
            })
            .expect("recv");
            SendOp::Send
        } else {
            SendOp::Write {
                remote_addr: addr,
                rkey: b.rkey,
            }
        };
        a.qp.post_send(SendWr::new(i, op, vec![sge])).expect("send");
    }
    let mut pkts = 0;
    let mut done = 0;
    while done < MSGS {
        let mut moved = false;
        while let Some(t) = a.qp.poll_transmit(now, buf, &mut a.mem) {
            b.qp.handle_packet(now, &buf[..t.len], &mut b.mem);
            pkts += 1;
            moved = true;
        }
        while let Some(t) = b.qp.poll_transmit(now, buf, &mut b.mem) {
            a.qp.handle_packet(now, &buf[..t.len], &mut a.mem);
            pkts += 1;
            moved = true;
        }
        while let Some(wc) = a.qp.poll_completion() {
            black_box(wc);
            done += 1;
        }
        while b.qp.poll_completion().is_some() {}
        assert!(moved || done == MSGS, "stalled");
    }
    pkts
}

fn bench(c: &mut Criterion) {
    let mut buf = vec![0u8; 4096 + 128];
    for (name, send) in [("write", false), ("send", true)] {
        let mut a = side(0x11, 0x22);
        let mut b = side(0x22, 0x11);
        let pkts = batch(&mut a, &mut b, send, &mut buf);
        let mut g = c.benchmark_group(format!("rc_{name}_4k_mtu_bytes"));
        g.throughput(Throughput::Bytes(u64::from(MSG) * MSGS));
        g.bench_function("16x64KiB", |bn| {
            bn.iter(|| batch(&mut a, &mut b, send, &mut buf))
        });
        g.finish();
        let mut g = c.benchmark_group(format!("rc_{name}_4k_mtu_packets"));
        g.throughput(Throughput::Elements(pkts));
        g.bench_function("16x64KiB", |bn| {
            bn.iter(|| batch(&mut a, &mut b, send, &mut buf))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
