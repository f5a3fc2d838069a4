//! The transaction rules against a scripted port.

use std::collections::VecDeque;

use super::*;

/// What the scripted port does with each send.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Answer every request (status `status`), replies queued newest first.
    Answer { status: u16 },
    /// Hand every send back with `ETIMEDOUT`, as a port does on a timeout.
    HandBack,
    /// Say nothing.
    Silent,
}

struct Script {
    mode: Mode,
    queue: VecDeque<(i32, usize, [u8; MAD_LEN])>,
    sent: usize,
    outstanding: usize,
    max_outstanding: usize,
    /// MADs to deliver before any reply.
    noise: Vec<(i32, usize, [u8; MAD_LEN])>,
}

impl Script {
    fn new(mode: Mode) -> Script {
        Script {
            mode,
            queue: VecDeque::new(),
            sent: 0,
            outstanding: 0,
            max_outstanding: 0,
            noise: Vec::new(),
        }
    }
}

impl Io for Script {
    fn send(&mut self, _req: &Request, mad: &[u8; MAD_LEN], _timeout_ms: u64) -> Result<(), Error> {
        self.sent += 1;
        self.outstanding += 1;
        self.max_outstanding = self.max_outstanding.max(self.outstanding);
        let mut r = *mad;
        match self.mode {
            Mode::Answer { status } => {
                r[3] |= 0x80;
                r[4..6].copy_from_slice(&status.to_be_bytes());
                self.queue.push_front((0, MAD_LEN, r));
            }
            Mode::HandBack => self.queue.push_back((110, MAD_LEN, r)),
            Mode::Silent => {}
        }
        Ok(())
    }

    fn recv(&mut self, wait: Duration) -> Result<Received, Error> {
        let next = self.noise.pop().or_else(|| self.queue.pop_front());
        match next {
            Some((status, len, mad)) => {
                self.outstanding = self.outstanding.saturating_sub(1);
                Ok(Received::Mad {
                    status,
                    len,
                    mad: Box::new(mad),
                })
            }
            None => {
                std::thread::sleep(wait.min(Duration::from_millis(2)));
                Ok(Received::Nothing)
            }
        }
    }
}

fn node_info_get(lid: u16) -> Request {
    let mut m = [0u8; MAD_LEN];
    m[..4].copy_from_slice(&[1, CLASS_SMI, 1, 0x01]);
    m[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
    m[64] = lid as u8; // lets a reply be told apart
    Request::new(Dest::smi(lid), m)
}

fn fast(window: usize, retries: u32) -> Policy {
    Policy {
        window,
        timeout: Duration::from_millis(5),
        retries,
    }
}

#[test]
fn replies_out_of_order_find_their_requests_and_the_window_holds() {
    let mut io = Script::new(Mode::Answer { status: 0 });
    let mut st = State::default();
    let reqs: Vec<Request> = (1..=40).map(node_info_get).collect();
    let out = run(&mut io, &mut st, &reqs, &fast(8, 0));
    for (i, r) in out.iter().enumerate() {
        let m = r.as_ref().expect("every request answered");
        assert_eq!(m[64], reqs[i].mad[64], "reply {i} belongs to request {i}");
    }
    let tids: std::collections::BTreeSet<_> = out
        .iter()
        .map(|r| r.as_ref().unwrap()[8..16].to_vec())
        .collect();
    assert_eq!(tids.len(), 40, "every request got its own TID");
    assert!(
        io.max_outstanding <= 8,
        "window exceeded: {}",
        io.max_outstanding
    );
    assert_eq!(
        (st.stats.sent, st.stats.replies, st.stats.unmatched),
        (40, 40, 0)
    );
}

#[test]
fn a_reply_that_matches_nothing_or_is_no_reply_is_dropped_and_counted() {
    let mut io = Script::new(Mode::Answer { status: 0 });
    let mut st = State::default();
    let req = node_info_get(2);
    // A stranger's TID; a short MAD, a request (no response bit) and another
    // attribute, each with the TID the request will get (1).
    let mut stranger = req.mad;
    stranger[3] |= 0x80;
    stranger[12..16].copy_from_slice(&999u32.to_be_bytes());
    let mut ours = stranger;
    ours[12..16].copy_from_slice(&1u32.to_be_bytes());
    let mut no_resp = ours;
    no_resp[3] &= 0x7f;
    let mut other_attr = ours;
    other_attr[16..18].copy_from_slice(&0x0015u16.to_be_bytes());
    io.noise = vec![
        (0, MAD_LEN, stranger),
        (0, 100, ours),
        (0, MAD_LEN, no_resp),
        (0, MAD_LEN, other_attr),
    ];
    let out = run(&mut io, &mut st, &[req], &fast(1, 0));
    assert!(out[0].is_ok(), "{:?}", out[0]);
    assert_eq!(
        (st.stats.unmatched, st.stats.invalid, st.stats.replies),
        (1, 3, 1)
    );
}

#[test]
fn a_nonzero_status_is_a_status_error_but_the_directed_route_d_bit_is_not() {
    let mut io = Script::new(Mode::Answer { status: 0x001c });
    let mut st = State::default();
    let out = run(&mut io, &mut st, &[node_info_get(2)], &fast(1, 0));
    assert_eq!(out[0], Err(MadError::Status(0x001c)));

    let mut io = Script::new(Mode::Answer { status: 0x8000 });
    let mut m = node_info_get(2).mad;
    m[1] = CLASS_SMI_DIRECT;
    let out = run(
        &mut io,
        &mut st,
        &[Request::new(Dest::Directed, m)],
        &fast(1, 0),
    );
    assert!(out[0].is_ok(), "{:?}", out[0]);
}

#[test]
fn sends_handed_back_as_timed_out_are_retried_then_fail_as_timeout() {
    let mut io = Script::new(Mode::HandBack);
    let mut st = State::default();
    let out = run(
        &mut io,
        &mut st,
        &[node_info_get(2), node_info_get(3)],
        &fast(2, 2),
    );
    for r in &out {
        assert_eq!(
            *r,
            Err(MadError::Timeout {
                attempts: 3,
                timeout_ms: 5
            })
        );
    }
    assert_eq!(io.sent, 6, "1 + 2 retries each");
}

#[test]
fn silence_times_out_after_every_attempt_within_the_policy() {
    let mut io = Script::new(Mode::Silent);
    let mut st = State::default();
    let t = Instant::now();
    let out = run(&mut io, &mut st, &[node_info_get(2)], &fast(1, 3));
    let took = t.elapsed();
    assert_eq!(
        out[0],
        Err(MadError::Timeout {
            attempts: 4,
            timeout_ms: 5
        })
    );
    assert_eq!(io.sent, 4);
    assert!(
        took >= Duration::from_millis(20) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(st.stats.timeouts, 4);
}

#[test]
fn bad_requests_are_refused_without_sending() {
    let mut io = Script::new(Mode::Answer { status: 0 });
    let mut st = State::default();
    let mut wrong_class = node_info_get(2);
    wrong_class.class = CLASS_PMA;
    let mut response = node_info_get(2);
    response.mad[3] |= 0x80;
    let mut dr_by_lid = node_info_get(2);
    dr_by_lid.mad[1] = CLASS_SMI_DIRECT;
    dr_by_lid.class = CLASS_SMI_DIRECT;
    let smp_to_qp1 = Request::new(Dest::gsi(2), node_info_get(2).mad);
    let out = run(
        &mut io,
        &mut st,
        &[wrong_class, response, dr_by_lid, smp_to_qp1],
        &fast(4, 0),
    );
    assert!(
        out.iter().all(|r| matches!(r, Err(MadError::Invalid(_)))),
        "{out:?}"
    );
    assert_eq!(io.sent, 0);
}

#[test]
fn more_requests_than_one_call_handles_are_refused_past_the_cap() {
    let mut io = Script::new(Mode::Answer { status: 0 });
    let mut st = State::default();
    let mut bad = node_info_get(2);
    bad.class = CLASS_SA; // refused without sending: keeps the test fast
    let reqs = vec![bad; MAX_REQUESTS + 3];
    let out = run(&mut io, &mut st, &reqs, &fast(64, 0));
    assert_eq!(out.len(), MAX_REQUESTS + 3);
    assert_eq!(
        out[MAX_REQUESTS],
        Err(MadError::Invalid(
            "more requests than one call handles (65536)"
        ))
    );
    assert_eq!(io.sent, 0);
}

#[test]
fn window_and_timeout_are_clamped() {
    assert_eq!(
        Policy {
            window: 0,
            ..Policy::default()
        }
        .window(),
        1
    );
    assert_eq!(
        Policy {
            window: 1000,
            ..Policy::default()
        }
        .window(),
        MAX_WINDOW
    );
    assert_eq!(
        Policy {
            timeout: Duration::ZERO,
            ..Policy::default()
        }
        .timeout_ms(),
        1
    );
    let d = Policy::default();
    assert_eq!(
        (d.window, d.timeout, d.retries),
        (16, Duration::from_millis(200), 3)
    );
}

mod prop {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Whatever arrives before the reply (any bytes, any length, any
        /// port status), the loop neither panics nor takes it as the reply,
        /// and counts every piece of it.
        #[test]
        fn garbage_before_the_reply_is_counted_and_never_taken(
            noise in proptest::collection::vec(
                (prop_oneof![Just(0i32), Just(110), any::<i32>()], 0usize..300,
                 proptest::collection::vec(any::<u8>(), MAD_LEN)),
                0..8),
        ) {
            let mut io = Script::new(Mode::Answer { status: 0 });
            let mut st = State::default();
            let n = noise.len() as u64;
            io.noise = noise
                .into_iter()
                .map(|(status, len, bytes)| {
                    let mut m = [0u8; MAD_LEN];
                    m.copy_from_slice(&bytes);
                    // Never the TID the request gets (1): a reply it is not.
                    if m[12..16] == 1u32.to_be_bytes() {
                        m[15] = 2;
                    }
                    (status, len, m)
                })
                .collect();
            let req = node_info_get(2);
            let out = run(&mut io, &mut st, std::slice::from_ref(&req), &fast(1, 0));
            let reply = out[0].as_ref().expect("the real reply is taken");
            prop_assert_eq!(reply[64], req.mad[64]);
            prop_assert_eq!(st.stats.unmatched + st.stats.invalid, n);
            prop_assert_eq!(st.stats.replies, 1);
        }
    }
}
