//! The engine reads its clock only where it arms or checks a timer: with a
//! [`LazyClock`] per call, a ping-pong round costs each side one reading
//! (its post arms the local ACK timer), not one per packet. A guest whose
//! clock source has no vDSO path pays a system call per reading.

use std::cell::Cell;
use std::time::Duration;

use rdmakit_proto::{
    Access, Clock, Instant, LazyClock, MemTable, Mtu, Pd, Qp, QpAttr, QpConfig, QpState, QpType,
    RecvWr, SendOp, SendWr, Sge, WcStatus,
};

const BUF: u64 = 0x10_000;
const LEN: usize = 4096;

struct Side {
    qp: Qp,
    mem: MemTable,
    lkey: u32,
}

fn side(qpn: u32, dqpn: u32) -> Side {
    let mut c = QpConfig::new(qpn, QpType::Rc, Pd(1));
    c.port_mtu = Mtu::Mtu1024;
    let mut qp = Qp::new(c);
    let attr = QpAttr {
        path_mtu: Mtu::Mtu1024,
        dest_qp_num: dqpn,
        timeout: 14,
        retry_cnt: 3,
        rnr_retry: 3,
        ..QpAttr::default()
    };
    qp.bring_up(&attr, QpState::Rts).unwrap();
    let mut mem = MemTable::new();
    let (lkey, _) = mem.register(Pd(1), BUF, LEN, Access::LOCAL_WRITE);
    Side { qp, mem, lkey }
}

/// A clock that counts its readings; time stands at `t`.
struct Counting {
    reads: Cell<u32>,
    t: Cell<u64>,
}

impl Counting {
    fn lazy(&self) -> LazyClock<impl Fn() -> Instant + '_> {
        LazyClock::new(|| {
            self.reads.set(self.reads.get() + 1);
            Instant::from_nanos(self.t.get())
        })
    }
}

/// Transmits everything `from` has, at `now`; the packets.
fn transmit(from: &mut Side, now: impl Clock) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 2048];
    while let Some(t) = from.qp.poll_transmit(now, &mut buf, &mut from.mem) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

fn sge(s: &Side, len: u32) -> Sge {
    Sge {
        addr: BUF,
        length: len,
        lkey: s.lkey,
    }
}

#[test]
fn a_ping_pong_round_reads_the_clock_once_per_side() {
    let mut a = side(0x11, 0x22);
    let mut b = side(0x22, 0x11);
    let clock = Counting {
        reads: Cell::new(0),
        t: Cell::new(1_000),
    };
    for round in 0..3u64 {
        for s in [&mut a, &mut b] {
            let wr = RecvWr {
                wr_id: round,
                sg_list: vec![sge(s, 1024)],
            };
            s.qp.post_recv(wr).unwrap();
        }
        let send = |s: &Side| SendWr::new(round, SendOp::Send, vec![sge(s, 1024)]);
        let before = clock.reads.get();
        // A's post leaves: it arms A's local ACK timer (one reading).
        a.qp.post_send(send(&a)).unwrap();
        let ping = transmit(&mut a, &clock.lazy());
        assert_eq!(ping.len(), 1);
        assert_eq!(clock.reads.get(), before + 1, "round {round}: A's post");
        // B takes the message and sends its ACK: no timer, no reading.
        for p in &ping {
            b.qp.handle_packet(&clock.lazy(), p, &mut b.mem);
        }
        let ack = transmit(&mut b, &clock.lazy());
        assert_eq!(ack.len(), 1, "B's ACK");
        assert_eq!(clock.reads.get(), before + 1, "round {round}: B's receive");
        // B's reply arms B's timer; A's ACK of it and B's ACK reaching A
        // (everything acknowledged: the timer stops) read nothing.
        b.qp.post_send(send(&b)).unwrap();
        let pong = transmit(&mut b, &clock.lazy());
        assert_eq!(clock.reads.get(), before + 2, "round {round}: B's post");
        for p in ack.iter().chain(&pong) {
            a.qp.handle_packet(&clock.lazy(), p, &mut a.mem);
        }
        for p in transmit(&mut a, &clock.lazy()) {
            b.qp.handle_packet(&clock.lazy(), &p, &mut b.mem);
        }
        assert_eq!(clock.reads.get(), before + 2, "round {round}: the ACKs");
        for s in [&mut a, &mut b] {
            let st: Vec<_> = std::iter::from_fn(|| s.qp.poll_completion())
                .map(|w| w.status)
                .collect();
            assert_eq!(st, [WcStatus::Success, WcStatus::Success], "round {round}");
            assert_eq!(s.qp.poll_timeout(), None, "nothing outstanding");
        }
        clock.t.set(clock.t.get() + 10_000);
    }
}

#[test]
fn the_timer_armed_through_a_lazy_clock_counts_from_its_reading() {
    let mut a = side(0x11, 0x22);
    let clock = Counting {
        reads: Cell::new(0),
        t: Cell::new(5_000_000),
    };
    a.qp.post_send(SendWr::new(1, SendOp::Send, vec![sge(&a, 8)]))
        .unwrap();
    let lazy = clock.lazy();
    assert_eq!(transmit(&mut a, &lazy).len(), 1);
    assert!(lazy.was_read());
    // timeout 14: 4.096 µs << 14.
    let rto = Duration::from_nanos(4096 << 14);
    assert_eq!(
        a.qp.poll_timeout(),
        Some(Instant::from_nanos(5_000_000) + rto)
    );
    // Checking the timers reads the clock (lazily, once) and fires only
    // once it is due: the message goes again.
    clock.t.set(5_000_000 + 1_000);
    a.qp.handle_timeout(&clock.lazy());
    assert!(transmit(&mut a, &clock.lazy()).is_empty(), "not due yet");
    clock.t.set(5_000_000 + 67_108_864);
    a.qp.handle_timeout(&clock.lazy());
    assert_eq!(transmit(&mut a, &clock.lazy()).len(), 1, "resent");
}

#[test]
fn a_lazy_clock_reads_once_and_only_when_asked() {
    let n = Cell::new(0u32);
    let lazy = LazyClock::new(|| {
        n.set(n.get() + 1);
        Instant::from_nanos(u64::from(n.get()) * 7)
    });
    assert!(!lazy.was_read());
    assert_eq!(n.get(), 0);
    assert_eq!((&lazy).now(), Instant::from_nanos(7));
    assert_eq!((&lazy).now(), Instant::from_nanos(7));
    assert_eq!(n.get(), 1);
    assert!(lazy.was_read());
    assert_eq!(Instant::from_nanos(3).now(), Instant::from_nanos(3));
}
