//! The soft NIC's own cost per 8-byte RC SEND round trip, next to a raw UDP
//! round trip, both in ONE thread: each side's datagram is already queued
//! when the other side looks (loopback delivers inside `sendto`), so there
//! is no waiting and no wake-up in either figure — only syscalls and, for
//! the soft NIC, its processing (ICRC, engine, rings, completions). The
//! ratio of the two is the processing overhead that two-process ping-pongs
//! (`scripts/bench-perf`, P3) see on each side's critical path, without
//! their scheduling noise.
//!
//! `cargo bench -p rdmakit-verbs --bench pingpong`

use std::net::UdpSocket;

use criterion::{criterion_group, criterion_main, Criterion};
use rdmakit_verbs::{
    Access, ConnectOpts, Context, Cq, DeviceConfig, MrBuf, Qp, QpType, RecvWr, SendOp, SendRequest,
    SendWr, Sge, Wc,
};

/// One side: context, CQ, QP and a buffer for receives.
struct Side {
    _ctx: std::sync::Arc<Context>,
    cq: std::sync::Arc<Cq>,
    qp: Qp,
    buf: MrBuf,
}

fn pair() -> (Side, Side) {
    let open = || {
        let ctx = Context::open_soft(DeviceConfig::from_env().unwrap()).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(1024, None).unwrap();
        let qp = pd
            .qp_builder(QpType::Rc, &cq)
            .max_send_wr(64)
            .max_recv_wr(64)
            .max_inline_data(64)
            .build()
            .unwrap()
            .into_init(ConnectOpts::default())
            .unwrap();
        let buf = pd.alloc_buf(64 * 64, Access::all()).unwrap();
        (ctx, cq, qp, buf)
    };
    let (a, b) = (open(), open());
    let (ea, eb) = (a.2.endpoint().unwrap(), b.2.endpoint().unwrap());
    let side = |(ctx, cq, qp, buf): (_, _, rdmakit_verbs::InitQp, MrBuf), peer| {
        let qp = qp.connect(peer).unwrap().ready_to_send().unwrap();
        let wrs: Vec<RecvWr> = (0..32u64)
            .map(|i| RecvWr {
                wr_id: i,
                sg_list: vec![buf.sge(0..64).unwrap()],
            })
            .collect();
        qp.post_recv(&wrs).unwrap();
        Side {
            _ctx: ctx,
            cq,
            qp,
            buf,
        }
    };
    (side(a, &eb), side(b, &ea))
}

/// Sends 8 inline bytes (signaled every 8th, as `rdmakit perf` does by
/// default) and reposts one receive once the peer's message completed.
fn ping(from: &Side, to: &Side, n: u64, wcs: &mut Vec<Wc>) {
    let data = [7u8; 8];
    let mut wr = SendWr::new(
        n,
        SendOp::Send,
        vec![Sge {
            addr: data.as_ptr() as u64,
            length: 8,
            lkey: 0,
        }],
    );
    wr.signaled = n % 8 == 7;
    // SAFETY: the inline SGE covers `data`, alive for the call.
    unsafe { from.qp.post_send(&[SendRequest { wr, inline: true }]) }.unwrap();
    loop {
        wcs.clear();
        to.cq.poll_into(wcs, 16).unwrap();
        if wcs.iter().any(Wc::is_recv) {
            break;
        }
    }
    to.qp
        .post_recv(&[RecvWr {
            wr_id: n,
            sg_list: vec![to.buf.sge(0..64).unwrap()],
        }])
        .unwrap();
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("round_trip_8B_one_thread");
    g.measurement_time(std::time::Duration::from_secs(4));
    {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let mut buf = [0u8; 64];
        g.bench_function("raw_udp", |it| {
            it.iter(|| {
                a.send_to(&[7u8; 8], ba).unwrap();
                let (n, _) = b.recv_from(&mut buf).unwrap();
                b.send_to(&buf[..n], aa).unwrap();
                a.recv_from(&mut buf).unwrap();
            })
        });
    }
    {
        let (a, b) = pair();
        let mut wcs = Vec::with_capacity(16);
        let mut n = 0u64;
        g.bench_function("soft_rc_send", |it| {
            it.iter(|| {
                ping(&a, &b, n, &mut wcs);
                ping(&b, &a, n, &mut wcs);
                n += 1;
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
