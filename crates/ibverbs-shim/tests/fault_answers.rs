//! The fault plan's responder answers and port events under Debian's
//! unmodified tools on the drop-in library: `ibv_asyncwatch` sees the
//! link go down and come up, `ibv_rc_pingpong` gets the completion status
//! a real NIC gives when the link stays down past its retries or the
//! responder NAKs, and outlasts a counted RNR with its rnr_retry of 7.

mod common;

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use common::*;

const LIMIT: Duration = Duration::from_secs(60);

/// A link down 300 ms after the device opened, for 400 ms: ibv_asyncwatch
/// prints PORT_ERR, then PORT_ACTIVE, for port 1.
#[test]
fn asyncwatch_sees_the_link_go_down_and_come_up() {
    if !have("ibv_asyncwatch") {
        return;
    }
    let mut c = command("ibv_asyncwatch", &[]);
    c.env("RDMAKIT_SOFT_FAULTS", "link down after=300ms for=400ms");
    let mut child = c.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => {
                let done = l.contains("PORT_ACTIVE");
                lines.push(l);
                if done {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let events: Vec<&String> = lines.iter().filter(|l| l.contains("event_type")).collect();
    assert_eq!(events.len(), 2, "{lines:#?}");
    assert!(
        events[0].contains("PORT_ERR") && events[0].contains("port 1"),
        "{lines:#?}"
    );
    assert!(
        events[1].contains("PORT_ACTIVE") && events[1].contains("port 1"),
        "{lines:#?}"
    );
}

/// Runs ibv_rc_pingpong as a pair under `plan`; (server, client) text and
/// whether each succeeded.
fn pingpong(n: u16, plan: &str, iters: &str) -> [(bool, String); 2] {
    let _g = serial();
    let p = port(n);
    let env = [("RDMAKIT_SOFT_FAULTS", plan), ("RDMAKIT_SHIM_DEBUG", "1")];
    let (s, c) = pair(
        "ibv_rc_pingpong",
        &["-g", "0", "-p", &p, "-n", iters],
        &env,
        LIMIT,
    );
    [
        (s.status.success(), text(&s)),
        (c.status.success(), text(&c)),
    ]
}

/// The link goes down in the middle of a long run and stays down (10 s)
/// far longer than ibv_rc_pingpong's 8 tries of 67 ms (timeout 14,
/// retry_cnt 7): its SENDs complete with "transport retry counter
/// exceeded" (IBV_WC_RETRY_EXC_ERR, 12) and it exits non-zero. (The time
/// it takes is measured in crates/soft/tests/fault_answers.rs, where the
/// attributes are the test's.)
#[test]
fn rc_pingpong_gives_up_with_retry_exc_err_while_the_link_is_down() {
    if !have("ibv_rc_pingpong") {
        return;
    }
    let r = pingpong(90, "link down after=1500ms for=10s", "100000000");
    for (ok, t) in &r {
        assert!(!ok, "{t}");
    }
    let all = format!("{}\n{}", r[0].1, r[1].1);
    assert!(
        all.contains("transport retry counter exceeded (12)"),
        "{all}"
    );
    // (It exits without closing its device: no closing fault line.)
}

/// Every SEND is answered RNR 40 times (per side, counted) before it is
/// let through: ibv_rc_pingpong's rnr_retry of 7 retries for ever, so it
/// completes, checking its buffers.
#[test]
fn rc_pingpong_outlasts_a_counted_rnr() {
    if !have("ibv_rc_pingpong") {
        return;
    }
    let r = pingpong(91, "rnr opcode=send count=40", "200");
    for (ok, t) in &r {
        assert!(ok, "{t}");
        assert!(t.contains("faults answered: 40 RNR NAKs"), "{t}");
    }
}

/// The third request each side receives is NAKed: the side that sent it
/// reports the status a real NIC gives.
#[test]
fn rc_pingpong_reports_the_nak_status() {
    if !have("ibv_rc_pingpong") {
        return;
    }
    for (n, code, says) in [
        (92, "rem_access", "remote access error (10)"),
        (93, "rem_op", "remote operation error (11)"),
        (94, "inv_req", "invalid request error (9)"),
    ] {
        let r = pingpong(n, &format!("nak {code} nth=3"), "100");
        let all = format!("{}\n{}", r[0].1, r[1].1);
        assert!(!r[0].0 || !r[1].0, "{all}");
        assert!(all.contains(says), "nak {code}: {all}");
    }
}
