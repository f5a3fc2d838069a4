//! The fault plan's responder answers and port events on a device: an RC
//! SEND between two QPs of one device gets exactly the completion a real
//! NIC gives when its responder says RNR or NAKs, and a link that goes
//! down makes the requester give up after its retries (timed), with the
//! port's state and events to show for it.

mod common;

use std::time::{Duration, Instant};

use common::open;
use rdmakit_soft::proto::{
    Access, QpAttr, QpState, QpType, RecvWr, SendOp, SendWr, Sge, Wc, WcStatus,
};
use rdmakit_soft::{AsyncEvent, Device, QpInit, SendRequest};

/// What a test sets of the requester's retry behaviour.
#[derive(Clone, Copy)]
struct Retry {
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
}

/// Two connected RC QPs of `d` (`a` sends to `b`), with `r`'s attributes.
fn rc_pair(d: &Device, pd: u32, cq: u32, r: Retry) -> (u32, u32) {
    let at = QpAttr {
        timeout: r.timeout,
        retry_cnt: r.retry_cnt,
        rnr_retry: r.rnr_retry,
        ..common::rc_attr()
    };
    common::rc_pair(d, &QpInit::new(QpType::Rc, pd, cq, 8), &at)
}

/// One 64-byte SEND from `a` to `b` (a receive posted at `b`); the
/// sender's completion and how long it took.
fn send_once(plan: &str, r: Retry, before: impl FnOnce(&Device)) -> (Wc, Duration, Device) {
    let d = open(plan);
    let pd = d.alloc_pd().unwrap();
    let cq = d.create_cq(16, None).unwrap();
    let (a, b) = rc_pair(&d, pd, cq, r);
    let mut buf = vec![7u8; 128];
    // SAFETY: `buf` outlives the device (leaked below).
    let key = unsafe { d.reg_mr(pd, buf.as_mut_ptr(), buf.len(), Access::all()) }.unwrap();
    let sge = |off: u64| Sge {
        addr: buf.as_ptr() as u64 + off,
        length: 64,
        lkey: key,
    };
    d.post_recv(
        b,
        &[RecvWr {
            wr_id: 2,
            sg_list: vec![sge(64)],
        }],
    )
    .unwrap();
    before(&d);
    let mut wr = SendWr::new(1, SendOp::Send, vec![sge(0)]);
    wr.signaled = true;
    let t = Instant::now();
    // SAFETY: the registered buffer lives until the device is dropped.
    unsafe { d.post_send(a, &[SendRequest { wr, inline: false }]) }.unwrap();
    let mut wcs: Vec<Wc> = Vec::new();
    while t.elapsed() < Duration::from_secs(20) {
        d.poll_cq(cq, &mut wcs, 16).unwrap();
        if let Some(w) = wcs.iter().find(|w| w.wr_id == 1) {
            let took = t.elapsed();
            let w = *w;
            // The device goes back to the caller: the buffer must outlive
            // it, so it is leaked (128 bytes per test).
            std::mem::forget(buf);
            return (w, took, d);
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    panic!("no completion for the SEND: {wcs:?}, {:?}", d.counters());
}

const RNR: Retry = Retry {
    timeout: 14,
    retry_cnt: 7,
    rnr_retry: 3,
};

/// rnr_retry 3: the first try and three retries are answered RNR, then
/// the requester gives up with RNR_RETRY_EXC_ERR.
#[test]
fn rnr_retry_exhausted_is_rnr_retry_exc_err() {
    let (wc, _, d) = send_once("rnr opcode=send", RNR, |_| {});
    assert_eq!(wc.status, WcStatus::RnrRetryExcErr);
    let c = d.counters();
    assert_eq!(c.faults.rnr, 4, "{c:?}");
    assert_eq!(c.rnr_naks_received, 4, "{c:?}");
}

/// rnr_retry 7 retries for ever: once the rule's count ran out the SEND
/// goes through.
#[test]
fn rnr_retry_7_outlasts_a_counted_rnr() {
    let r = Retry {
        rnr_retry: 7,
        ..RNR
    };
    let (wc, _, d) = send_once("rnr opcode=send count=20", r, |_| {});
    assert_eq!(wc.status, WcStatus::Success);
    assert_eq!(d.counters().faults.rnr, 20);
}

/// Each NAK code gives the requester its status, as from a real
/// responder; a PSN sequence error is recovered from.
#[test]
fn each_nak_gives_its_status() {
    for (code, status) in [
        ("rem_access", WcStatus::RemAccessErr),
        ("rem_op", WcStatus::RemOpErr),
        ("inv_req", WcStatus::RemInvReqErr),
        ("psn_seq", WcStatus::Success),
    ] {
        let (wc, _, d) = send_once(&format!("nak {code} nth=1"), RNR, |_| {});
        assert_eq!(wc.status, status, "nak {code}");
        assert_eq!(d.counters().faults.nak, 1, "nak {code}");
    }
}

/// The link goes down 100 ms after the device opened, for 2 s: the port is
/// DOWN (and PORT_ERR raised), a SEND posted then is never acknowledged,
/// and the requester gives up with RETRY_EXC_ERR after its first try and
/// retry_cnt retries, each waiting 4.096 µs × 2^timeout; then PORT_ACTIVE.
#[test]
fn a_link_down_times_out_after_retry_cnt_retries() {
    let r = Retry {
        timeout: 14,
        retry_cnt: 5,
        rnr_retry: 7,
    };
    let plan = "link down after=100ms for=2s";
    let (wc, took, d) = send_once(plan, r, |d| {
        assert_eq!(d.port_attr(1).unwrap().state as u8, 4, "ACTIVE before");
        let ev = d.get_async_event(Duration::from_millis(1000));
        assert_eq!(ev, Some(AsyncEvent::PortErr { port: 1 }));
        let p = d.port_attr(1).unwrap();
        assert_eq!((p.state as u8, p.phys_state), (1, 3), "DOWN, Disabled");
    });
    assert_eq!(wc.status, WcStatus::RetryExcErr);
    let per_try = 4.096e-6 * f64::from(1u32 << r.timeout);
    let computed = per_try * f64::from(r.retry_cnt + 1);
    let measured = took.as_secs_f64();
    eprintln!(
        "RETRY_EXC_ERR after {measured:.3} s; computed {computed:.3} s \
         ((retry_cnt + 1) × {per_try:.4} s)"
    );
    assert!(
        (measured - computed).abs() <= 0.2 * computed,
        "{measured} s vs {computed} s"
    );
    // (The QP that gave up raised its own event before.)
    let next_port_event = std::iter::from_fn(|| d.get_async_event(Duration::from_secs(3)))
        .find(|e| !matches!(e, AsyncEvent::QpFatal { .. }));
    assert_eq!(next_port_event, Some(AsyncEvent::PortActive { port: 1 }));
    assert_eq!(d.port_attr(1).unwrap().state as u8, 4, "ACTIVE again");
    let f = d.counters().faults;
    assert_eq!(f.link_down, 1);
    assert!(
        f.link_drop > u64::from(r.retry_cnt),
        "every try lost: {f:?}"
    );
}

/// qp_fatal puts the QPs in ERR with IBV_EVENT_QP_FATAL; device_fatal
/// raises DEVICE_FATAL and takes the port down for good.
#[test]
fn qp_fatal_and_device_fatal_raise_their_events() {
    let d = open("qp_fatal after=50ms; device_fatal after=200ms");
    let pd = d.alloc_pd().unwrap();
    let cq = d.create_cq(16, None).unwrap();
    let (a, b) = rc_pair(&d, pd, cq, RNR);
    let mut seen = Vec::new();
    while let Some(e) = d.get_async_event(Duration::from_millis(1000)) {
        seen.push(e);
        if e == AsyncEvent::DeviceFatal {
            break;
        }
    }
    assert!(seen.contains(&AsyncEvent::QpFatal { qpn: a }), "{seen:?}");
    assert!(seen.contains(&AsyncEvent::QpFatal { qpn: b }), "{seen:?}");
    assert_eq!(seen.last(), Some(&AsyncEvent::DeviceFatal), "{seen:?}");
    assert_eq!(d.query_qp(a).unwrap().0.qp_state, QpState::Err);
    assert_eq!(d.port_attr(1).unwrap().state as u8, 1, "DOWN");
    assert_eq!(d.counters().faults.qp_fatal, 2);
    assert_eq!(d.counters().faults.device_fatal, 1);
}
