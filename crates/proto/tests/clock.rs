//! The engine reads its clock only where it arms or checks a timer: with a
//! [`LazyClock`] per call, a ping-pong round costs each side one reading
//! (its post arms the local ACK timer), not one per packet. A guest whose
//! clock source has no vDSO path pays a system call per reading.

mod scripted;

use std::cell::Cell;

use rdmakit_proto::{local_ack_timeout, Clock, LazyClock};
use scripted::*;

/// The fixture's QP (QPN 0x11, sq_psn 500) and its peer (0x22, expecting
/// PSN 500, sending from 100), both RC in RTS.
fn pair() -> (Fix, Fix) {
    let a = qp_rts(QpType::Rc);
    let peer = QpAttr {
        dest_qp_num: QPN,
        rq_psn: attrs().sq_psn,
        sq_psn: attrs().rq_psn,
        ..attrs()
    };
    let b = qp_with(QpConfig::new(RQPN, QpType::Rc, Pd(1)), QpState::Rts, &peer);
    (a, b)
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
fn transmit(from: &mut Fix, now: impl Clock) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 2048];
    while let Some(t) = from.qp.poll_transmit(now, &mut buf, &mut from.mem) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

#[test]
fn a_ping_pong_round_reads_the_clock_once_per_side() {
    let (mut a, mut b) = pair();
    let clock = Counting {
        reads: Cell::new(0),
        t: Cell::new(1_000),
    };
    for round in 0..3u64 {
        // One packet each way: a message of one path MTU.
        let len = MTU as u32;
        a.post_recv(round, 0, len);
        b.post_recv(round, 0, len);
        let send = |s: &Fix| SendWr::new(round, SendOp::Send, vec![s.sge(len)]);
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
            let st: Vec<_> = s.wcs().iter().map(|w| w.status).collect();
            assert_eq!(st, [WcStatus::Success, WcStatus::Success], "round {round}");
            assert_eq!(s.qp.poll_timeout(), None, "nothing outstanding");
        }
        clock.t.set(clock.t.get() + 10_000);
    }
}

#[test]
fn the_timer_armed_through_a_lazy_clock_counts_from_its_reading() {
    let (mut a, _) = pair();
    let clock = Counting {
        reads: Cell::new(0),
        t: Cell::new(5_000_000),
    };
    a.qp.post_send(SendWr::new(1, SendOp::Send, vec![a.sge(8)]))
        .unwrap();
    assert_eq!(transmit(&mut a, &clock.lazy()).len(), 1);
    assert_eq!(clock.reads.get(), 1, "arming the timer read the clock");
    let rto = local_ack_timeout(attrs().timeout).unwrap();
    assert_eq!(
        a.qp.poll_timeout(),
        Some(Instant::from_nanos(5_000_000) + rto)
    );
    // Checking the timers reads the clock (lazily, once) and fires only
    // once it is due: the message goes again.
    clock.t.set(5_000_000 + 1_000);
    a.qp.handle_timeout(&clock.lazy());
    assert!(transmit(&mut a, &clock.lazy()).is_empty(), "not due yet");
    clock
        .t
        .set(5_000_000 + u64::try_from(rto.as_nanos()).unwrap());
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
    assert_eq!(n.get(), 0, "made, not read");
    assert_eq!((&lazy).now(), Instant::from_nanos(7));
    assert_eq!((&lazy).now(), Instant::from_nanos(7));
    assert_eq!(n.get(), 1);
    assert_eq!(Instant::from_nanos(3).now(), Instant::from_nanos(3));
}
