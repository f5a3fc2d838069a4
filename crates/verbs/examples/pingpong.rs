//! 8-byte ping-pong median RTT (RC SEND) and 64 KiB RC WRITE bandwidth over
//! two soft devices vs a raw UDP socket pair, measured in the same run on
//! loopback.
//!
//! `cargo run --release -p rdmakit-verbs --example pingpong [ITERS]`

use std::net::UdpSocket;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmakit_verbs::{
    Access, ConnectOpts, Context, Cq, DeviceConfig, Pd, Qp, QpBuilder, QpType, WcStatus,
};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn raw_udp(iters: usize) -> Duration {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        for _ in 0..iters {
            let (n, _) = b.recv_from(&mut buf).unwrap();
            b.send_to(&buf[..n], aa).unwrap();
        }
    });
    let mut buf = [0u8; 64];
    let mut rtts = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        a.send_to(&[7u8; 8], ba).unwrap();
        a.recv_from(&mut buf).unwrap();
        rtts.push(t.elapsed());
    }
    echo.join().unwrap();
    median(rtts)
}

/// A soft device configured from the environment, a PD and a CQ of `cqe`.
fn side(cqe: u32) -> (Arc<Context>, Arc<Pd>, Arc<Cq>) {
    let ctx = Context::open_soft(DeviceConfig::from_env().unwrap()).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(cqe, None).unwrap();
    (ctx, pd, cq)
}

/// The QPs `a` and `b` build, connected to each other and at RTS.
fn rc_pair(a: QpBuilder, b: QpBuilder, o: ConnectOpts) -> (Qp, Qp) {
    let qa = a.build().unwrap().into_init(o).unwrap();
    let qb = b.build().unwrap().into_init(o).unwrap();
    let (ea, eb) = (qa.endpoint().unwrap(), qb.endpoint().unwrap());
    (
        qa.connect(&eb).unwrap().ready_to_send().unwrap(),
        qb.connect(&ea).unwrap().ready_to_send().unwrap(),
    )
}

fn rc_send(iters: usize) -> Duration {
    let t = Duration::from_secs(10);
    let (_a, pa, ca) = side(256);
    let (_b, pb, cb) = side(256);
    let (qa, qb) = rc_pair(
        pa.qp_builder(QpType::Rc, &ca),
        pb.qp_builder(QpType::Rc, &cb),
        ConnectOpts::default(),
    );
    let ba = pa.alloc_buf(64, Access::all()).unwrap();
    let bb = pb.alloc_buf(64, Access::all()).unwrap();
    qb.recv(0, &bb, 0..64).unwrap();
    qa.recv(0, &ba, 0..64).unwrap();
    let echo = std::thread::spawn(move || {
        for _ in 0..iters {
            // Wait for the ping (and the completion of our previous pong).
            loop {
                let w = cb.wait(1, t).unwrap();
                assert_eq!(w[0].status, WcStatus::Success);
                if w[0].is_recv() {
                    break;
                }
            }
            qb.recv(0, &bb, 0..64).unwrap();
            qb.send_inline(1, &[9u8; 8]).unwrap();
        }
        (qb, cb, bb)
    });
    let mut rtts = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t0 = Instant::now();
        qa.send_inline(1, &[7u8; 8]).unwrap();
        loop {
            let w = ca.wait(1, t).unwrap();
            assert_eq!(w[0].status, WcStatus::Success);
            if w[0].is_recv() {
                break;
            }
        }
        rtts.push(t0.elapsed());
        qa.recv(0, &ba, 0..64).unwrap();
    }
    let _keep = echo.join().unwrap();
    median(rtts)
}

fn main() {
    let iters = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let raw = raw_udp(iters);
    let rc = rc_send(iters);
    let bw_raw = raw_udp_bw(500, 65536);
    let bw_rc = rc_write_bw(500, 65536, 16);
    println!(
        "64 KiB bandwidth: raw UDP 4 KiB datagrams {:.0} MB/s, RC WRITE {:.0} MB/s, ratio {:.2}",
        bw_raw / 1e6,
        bw_rc / 1e6,
        bw_rc / bw_raw
    );
    println!(
        "8-byte ping-pong median RTT over {iters} iterations: raw UDP {raw:?}, RC SEND {rc:?}, ratio {:.2}",
        rc.as_secs_f64() / raw.as_secs_f64()
    );
}

/// Receiver-side bandwidth of raw UDP: `msgs` messages of `size` bytes as
/// 4096-byte datagrams.
pub fn raw_udp_bw(msgs: usize, size: usize) -> f64 {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    b.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let ba = b.local_addr().unwrap();
    let total = msgs * size;
    let rx = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut got = 0usize;
        let mut first = None;
        let mut last = Instant::now();
        while got < total {
            match b.recv_from(&mut buf) {
                Ok((n, _)) => {
                    first.get_or_insert_with(Instant::now);
                    got += n;
                    last = Instant::now();
                }
                Err(_) => break,
            }
        }
        (got, first.map(|f| last - f))
    });
    let d = vec![1u8; 4096];
    for _ in 0..msgs {
        for _ in 0..size / 4096 {
            a.send_to(&d, ba).unwrap();
        }
    }
    let (got, dt) = rx.join().unwrap();
    got as f64 / dt.unwrap_or(Duration::from_secs(1)).as_secs_f64()
}

/// RC WRITE bandwidth: `msgs` WRITEs of `size` bytes, `depth` in flight.
pub fn rc_write_bw(msgs: usize, size: usize, depth: usize) -> f64 {
    let t = Duration::from_secs(30);
    let (a, pa, ca) = side(1024);
    let (_b, pb, cb) = side(1024);
    let o = ConnectOpts {
        path_mtu: rdmakit_verbs::Mtu::Mtu4096,
        ..ConnectOpts::default()
    };
    let (qa, _qb) = rc_pair(
        pa.qp_builder(QpType::Rc, &ca).max_send_wr(depth as u32),
        pb.qp_builder(QpType::Rc, &cb),
        o,
    );
    let ba = pa.alloc_buf(size, Access::all()).unwrap();
    let bb = pb.alloc_buf(size, Access::all()).unwrap();
    let start = Instant::now();
    let (mut posted, mut done) = (0, 0);
    while done < msgs {
        while posted < msgs && posted - done < depth {
            qa.write(posted as u64, &ba, 0..size, bb.remote(0)).unwrap();
            posted += 1;
        }
        let w = ca.wait(1, t).unwrap();
        assert_eq!(w[0].status, WcStatus::Success);
        done += 1;
    }
    let el = start.elapsed();
    if let Some(s) = a.soft() {
        eprintln!(
            "sender counters {:?} qp {:?}",
            s.counters(),
            s.qp_stats(qa.qpn()).map(|x| (x.retransmitted, x.timeouts))
        );
    }
    (msgs * size) as f64 / el.as_secs_f64()
}
