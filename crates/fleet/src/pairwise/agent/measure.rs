//! The tests an agent runs for its coordinator: their bounds, one at a
//! time, the server and client sides, and the watchdog that cancels them.

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmakit_perf::{ClientOpts, Params, Progress, Report, Row, ServerOpts, Test};

use super::super::auth::{self, hex};
use super::super::deltas::{self, Deltas};
use super::super::gate::{Outcome, Pending, Pool};
use super::super::protocol::{Conn, Measurement, PeerState, ProtoError, Refusal, Reply, TestSpec};
use super::super::report::{BwPoint, Counters, LatPoint};
use super::net::test_ip;
use super::{AgentConfig, Event, Shared};

/// The perf parameters of a spec, or why it is out of bounds.
pub fn params_of(spec: &TestSpec, cfg: &AgentConfig) -> Result<Params, String> {
    let test = Test::parse(&spec.test).ok_or_else(|| format!("unknown test {:?}", spec.test))?;
    if spec.sizes.is_empty() || spec.sizes.len() > 16 {
        return Err(format!("{} sizes (1 to 16)", spec.sizes.len()));
    }
    if let Some(&s) = spec.sizes.iter().find(|&&s| s == 0 || s > cfg.max_size) {
        return Err(format!("message size {s} (1 to {})", cfg.max_size));
    }
    match spec.seconds {
        Some(s) if !(s > 0.0 && s.is_finite()) => return Err(format!("{s} seconds per size")),
        Some(s) if s * spec.sizes.len() as f64 > cfg.max_test_seconds => {
            return Err(format!(
                "{:.1} s planned, this agent runs at most {:.0} s per test",
                s * spec.sizes.len() as f64,
                cfg.max_test_seconds
            ))
        }
        None if spec.iters == 0 || spec.iters > 1_000_000 => {
            return Err(format!("{} iterations (1 to 1000000)", spec.iters))
        }
        _ => {}
    }
    if spec.tx_depth == 0 || spec.tx_depth > 1024 {
        return Err(format!("TX depth {} (1 to 1024)", spec.tx_depth));
    }
    if spec.inline > 256 {
        return Err(format!("inline {} (0 to 256)", spec.inline));
    }
    if ![256, 512, 1024, 2048, 4096].contains(&spec.mtu) {
        return Err(format!("MTU {}", spec.mtu));
    }
    Ok(Params {
        test,
        sizes: spec.sizes.clone(),
        iters: spec.iters,
        duration: spec.seconds,
        inline: spec.inline,
        tx_depth: spec.tx_depth,
        rx_depth: 512,
        validate: false,
        mtu: spec.mtu,
        ud: false,
        cq_mod: 100,
    })
}

/// The watchdog's limit for a test: its planned time (or the agent's
/// maximum when it runs by iterations) plus 10 s of set-up.
fn limit_of(p: &Params, cfg: &AgentConfig) -> Duration {
    let planned = p
        .duration
        .map_or(cfg.max_test_seconds, |d| d * p.sizes.len() as f64);
    Duration::from_secs_f64(planned.min(cfg.max_test_seconds) + 10.0)
}

/// Takes the one-test-at-a-time lock, or answers `busy`.
fn claim<'a>(
    conn: &mut Conn,
    sh: &'a Shared,
) -> Result<Option<std::sync::MutexGuard<'a, ()>>, ProtoError> {
    match sh.busy.try_lock() {
        Ok(g) => Ok(Some(g)),
        Err(std::sync::TryLockError::Poisoned(e)) => Ok(Some(e.into_inner())),
        Err(std::sync::TryLockError::WouldBlock) => {
            decline(conn, sh, Refusal::Busy, "another test is running".into())?;
            Ok(None)
        }
    }
}

/// Claims the agent for one test and checks the test against its bounds:
/// `None` when it is busy or the test is out of bounds (answered already).
fn admit<'a>(
    conn: &mut Conn,
    sh: &'a Shared,
    spec: &TestSpec,
) -> Result<Option<(std::sync::MutexGuard<'a, ()>, Params)>, ProtoError> {
    let Some(busy) = claim(conn, sh)? else {
        return Ok(None);
    };
    match params_of(spec, &sh.cfg) {
        Ok(p) => Ok(Some((busy, p))),
        Err(why) => decline(conn, sh, Refusal::Bounds, why).map(|()| None),
    }
}

fn decline(conn: &mut Conn, sh: &Shared, kind: Refusal, why: String) -> Result<(), ProtoError> {
    (sh.log)(&Event::Declined {
        peer: conn.peer().to_string(),
        why: why.clone(),
    });
    conn.send(&Reply::Refused { kind, message: why })
}

/// How a supervised test ended early.
#[derive(Clone, Debug, PartialEq)]
enum Abort {
    CoordinatorGone,
    CoordinatorSpoke,
    TimeLimit(Duration),
    Stopping,
}

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Abort::CoordinatorGone => f.write_str("the coordinator went away mid-test"),
            Abort::CoordinatorSpoke => f.write_str("the coordinator spoke mid-test"),
            Abort::TimeLimit(d) => write!(f, "over its time limit of {:.0} s", d.as_secs_f64()),
            Abort::Stopping => f.write_str("the agent is exiting"),
        }
    }
}

/// Runs `work` on a worker thread while watching the coordinator, the
/// clock and the agent's stop flag; on any of them it sets the cancel flag
/// and shuts `sock` (the test's own connection) down, then waits for the
/// worker. Returns the worker's result and why it was cancelled, if it was.
fn supervise<T: Send>(
    conn: &mut Conn,
    sh: &Shared,
    sock: &TcpStream,
    limit: Duration,
    work: impl FnOnce(Arc<AtomicBool>) -> T + Send,
) -> (T, Option<Abort>) {
    let cancel = Arc::new(AtomicBool::new(false));
    sh.testing.store(true, Ordering::SeqCst);
    let start = Instant::now();
    let out = std::thread::scope(|s| {
        let c = Arc::clone(&cancel);
        let h = s.spawn(move || work(c));
        let mut why: Option<Abort> = None;
        while !h.is_finished() {
            if why.is_some() {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            why = match conn.poll_peer(Duration::from_millis(10)) {
                Ok(PeerState::Quiet) => None,
                Ok(PeerState::Data) => Some(Abort::CoordinatorSpoke),
                Ok(PeerState::Closed) | Err(_) => Some(Abort::CoordinatorGone),
            };
            if why.is_none() && start.elapsed() > limit {
                why = Some(Abort::TimeLimit(limit));
            }
            if why.is_none() && sh.stopping.load(Ordering::SeqCst) {
                why = Some(Abort::Stopping);
            }
            if why.is_some() {
                cancel.store(true, Ordering::SeqCst);
                let _ = sock.shutdown(std::net::Shutdown::Both);
            }
        }
        let r = match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        };
        (r, why)
    });
    sh.testing.store(false, Ordering::SeqCst);
    out
}

/// Logs why a running test was cancelled; the coordinator going away or
/// speaking mid-test ends its session too.
fn cancelled(sh: &Shared, conn: &Conn, id: u64, why: &Abort) -> Result<(), ProtoError> {
    (sh.log)(&Event::Cancelled {
        id,
        why: why.to_string(),
    });
    if matches!(why, Abort::CoordinatorGone | Abort::CoordinatorSpoke) {
        return Err(ProtoError::Closed {
            peer: conn.peer().into(),
        });
    }
    Ok(())
}

fn perf_error(e: &rdmakit_perf::PerfError) -> String {
    e.to_string()
}

/// `Serve`: listen for the client agent on a fresh port, hand out a
/// one-time ticket, run the server side.
pub(super) fn serve(
    conn: &mut Conn,
    sh: &Shared,
    id: u64,
    spec: &TestSpec,
    peer: IpAddr,
) -> Result<(), ProtoError> {
    let cfg = &sh.cfg;
    let Some((_busy, params)) = admit(conn, sh, spec)? else {
        return Ok(());
    };
    let ip = match test_ip(cfg, peer) {
        Ok(ip) => ip,
        Err(why) => return decline(conn, sh, Refusal::Failed, why),
    };
    let listener = match TcpListener::bind((ip, 0)).and_then(|l| {
        l.set_nonblocking(true)?;
        Ok(l)
    }) {
        Ok(l) => l,
        Err(e) => return decline(conn, sh, Refusal::Failed, format!("bind {ip}:0: {e}")),
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let ticket = match auth::nonce() {
        Ok(n) => hex(&n[..16]),
        Err(why) => return decline(conn, sh, Refusal::Failed, why),
    };
    conn.send(&Reply::Listening {
        id,
        port,
        ticket: ticket.clone(),
    })?;
    // Wait for the client agent (with the ticket), watching the coordinator.
    // Connections to the test port wait in a pool of their own, each with
    // TICKET_TIME for its whole ticket line and the oldest closed when the
    // pool is full: a stranger on the port cannot keep the client agent out.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut pool: Pool<()> = Pool::new(TICKET_POOL);
    let stream = 'wait: loop {
        let (incoming, outcomes) = match pool.poll(Some(&listener), Duration::from_millis(10)) {
            Ok(x) => x,
            Err(e) => {
                return conn.send(&Reply::Served {
                    id,
                    error: Some(format!("poll the port of test {id}: {e}")),
                    counters: Deltas::default(),
                })
            }
        };
        for o in outcomes {
            match o {
                Outcome::Line(p, line) if ticket_ok(&line, &ticket) => {
                    break 'wait p.into_parts().0
                }
                Outcome::Line(p, _) => (sh.log)(&Event::Refused {
                    peer: p.from.to_string(),
                    why: format!("wrong ticket on the port of test {id}"),
                }),
                Outcome::Failed(p, e) => (sh.log)(&Event::Refused {
                    peer: p.from.to_string(),
                    why: format!("no ticket on the port of test {id}: {e}"),
                }),
            }
        }
        if incoming {
            accept_ticket_holders(&listener, &mut pool, sh, id);
        }
        // The coordinator waits for our reply: anything from it now ends the test.
        let stop = match conn.poll_peer(Duration::from_millis(1))? {
            PeerState::Quiet => None,
            PeerState::Data => Some((
                Abort::CoordinatorSpoke,
                ProtoError::Malformed {
                    peer: conn.peer().into(),
                    why: "a request while a test was starting".into(),
                },
            )),
            PeerState::Closed => Some((
                Abort::CoordinatorGone,
                ProtoError::Closed {
                    peer: conn.peer().into(),
                },
            )),
        };
        if let Some((abort, err)) = stop {
            (sh.log)(&Event::Cancelled {
                id,
                why: abort.to_string(),
            });
            return Err(err);
        }
        if Instant::now() > deadline || sh.stopping.load(Ordering::SeqCst) {
            return conn.send(&Reply::Served {
                id,
                error: Some("the client agent never connected".into()),
                counters: Deltas::default(),
            });
        }
    };
    drop(pool);
    drop(listener);
    let _ = stream.set_nonblocking(false);
    let sock = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            return conn.send(&Reply::Served {
                id,
                error: Some(format!("dup the test socket: {e}")),
                counters: Deltas::default(),
            })
        }
    };
    let opts = ServerOpts {
        port: 0,
        device: cfg.device.clone(),
        provider: cfg.provider,
        soft: cfg.soft_at(ip),
        gid_index: 0,
        test: params.test,
        use_event: false,
    };
    let expected = params.clone();
    let before = Before::read(cfg);
    let start = Instant::now();
    let (r, why) = supervise(conn, sh, &sock, limit_of(&params, cfg), |cancel| {
        let admit = |p: &Params| {
            if *p == expected {
                Ok(())
            } else {
                Err("parameters other than the coordinator asked for".to_string())
            }
        };
        let mut hooks = Progress {
            cancel: Some(cancel),
            ..Progress::default()
        };
        rdmakit_perf::serve_on(stream, &opts, &admit, &mut hooks)
    });
    let seconds = start.elapsed().as_secs_f64();
    if let Some(w) = &why {
        cancelled(sh, conn, id, w)?;
    }
    let counters = before.deltas(r.as_ref().ok());
    let error = r.err().map(|e| perf_error(&e));
    (sh.log)(&Event::TestDone {
        id,
        role: "server",
        seconds,
        error: error.clone(),
    });
    conn.send(&Reply::Served {
        id,
        error,
        counters,
    })
}

/// `Run`: connect to the server agent, present the ticket, run the client.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    conn: &mut Conn,
    sh: &Shared,
    id: u64,
    spec: &TestSpec,
    peer: IpAddr,
    server: SocketAddr,
    ticket: &str,
) -> Result<(), ProtoError> {
    let cfg = &sh.cfg;
    let Some((_busy, params)) = admit(conn, sh, spec)? else {
        return Ok(());
    };
    if server.ip() != peer {
        return decline(
            conn,
            sh,
            Refusal::Bounds,
            format!("the test server {server} is not the peer {peer}"),
        );
    }
    if ticket.len() > 64 || !ticket.bytes().all(|b| b.is_ascii_hexdigit()) {
        return decline(conn, sh, Refusal::Bounds, "a malformed ticket".into());
    }
    let ip = match test_ip(cfg, peer) {
        Ok(ip) => ip,
        Err(why) => return decline(conn, sh, Refusal::Failed, why),
    };
    let failed = |conn: &mut Conn, error: String| {
        (sh.log)(&Event::TestDone {
            id,
            role: "client",
            seconds: 0.0,
            error: Some(error.clone()),
        });
        conn.send(&Reply::RunFailed { id, error })
    };
    let mut stream = match TcpStream::connect_timeout(&server, Duration::from_secs(5)) {
        Ok(s) => s,
        Err(e) => return failed(conn, format!("connect {server}: {e}")),
    };
    if let Err(e) = stream.write_all(format!("TICKET {ticket}\n").as_bytes()) {
        return failed(conn, format!("write to {server}: {e}"));
    }
    let sock = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => return failed(conn, format!("dup the test socket: {e}")),
    };
    let opts = ClientOpts {
        host: server.ip().to_string(),
        port: server.port(),
        device: cfg.device.clone(),
        provider: cfg.provider,
        soft: cfg.soft_at(ip),
        gid_index: 0,
        params: params.clone(),
        connect_timeout: Duration::from_secs(5),
        use_event: false,
    };
    let before = Before::read(cfg);
    let start = Instant::now();
    let (r, why) = supervise(conn, sh, &sock, limit_of(&params, cfg), |cancel| {
        let mut hooks = Progress {
            cancel: Some(cancel),
            ..Progress::default()
        };
        rdmakit_perf::client_on(stream, &opts, &mut hooks)
    });
    let seconds = start.elapsed().as_secs_f64();
    if let Some(w) = &why {
        cancelled(sh, conn, id, w)?;
    }
    match r {
        Ok(rep) => {
            (sh.log)(&Event::TestDone {
                id,
                role: "client",
                seconds,
                error: None,
            });
            let mut result = measurement(&rep, seconds);
            result.deltas = before.deltas(Some(&rep));
            conn.send(&Reply::Measured { id, result })
        }
        Err(e) => {
            let error = match why {
                Some(w) => format!("{} ({w})", perf_error(&e)),
                None => perf_error(&e),
            };
            (sh.log)(&Event::TestDone {
                id,
                role: "client",
                seconds,
                error: Some(error.clone()),
            });
            conn.send(&Reply::RunFailed { id, error })
        }
    }
}

/// A real device's counters before a test, to subtract from those after
/// it. The soft NIC needs none: its context is opened for the test, so
/// its counters at the end (in the perf report) are what the test moved.
struct Before {
    real: Option<(
        std::path::PathBuf,
        Option<String>,
        std::collections::BTreeMap<String, u64>,
    )>,
}

impl Before {
    fn read(cfg: &AgentConfig) -> Before {
        let real = cfg.device.as_ref().and_then(|d| {
            if !deltas::name_is_safe(d) {
                return None;
            }
            let root = std::path::Path::new("/sys/class/infiniband").join(d);
            if !root.is_dir() {
                return None;
            }
            let ifname = deltas::netdev_of(&root);
            let now = deltas::read_real(&root, 1, ifname.as_deref());
            Some((root, ifname, now))
        });
        Before { real }
    }

    /// What moved: the real device's counters since [`Before::read`], and
    /// the soft NIC's in the perf report.
    fn deltas(&self, rep: Option<&Report>) -> Deltas {
        let real = self
            .real
            .as_ref()
            .map_or_else(Deltas::default, |(root, ifname, before)| {
                let after = deltas::read_real(root, 1, ifname.as_deref());
                Deltas::between(before, after.iter().map(|(n, &v)| (n.as_str(), v)))
            });
        let soft = rep.map_or_else(Deltas::default, |r| {
            Deltas::largest(r.device_counters.iter().map(|(n, &v)| (n.as_str(), v)))
        });
        real.sum(&soft)
    }
}

/// A perf report's figures.
pub fn measurement(r: &Report, seconds: f64) -> Measurement {
    let mut m = Measurement {
        seconds,
        ..Measurement::default()
    };
    for row in &r.results {
        match row {
            Row::Bw(b) => m.bw.push(BwPoint {
                size: b.size,
                avg_mbs: b.bw_avg,
                peak_mbs: b.bw_peak,
                msg_rate_mpps: b.msg_rate,
                iters: b.iters,
            }),
            Row::Lat(l) => m.lat.push(LatPoint {
                size: l.size,
                iters: l.iters,
                t_min_us: l.t_min,
                t_typical_us: l.t_typical,
                t_p99_us: l.p99,
                t_max_us: l.t_max,
            }),
        }
    }
    m.counters = r.qp_counters.map(|q| Counters {
        tx_packets: q.tx_packets,
        retransmitted: q.retransmitted,
        timeouts: q.timeouts,
        dropped: q.dropped,
    });
    m
}

/// Time a connection to a test port has for its whole ticket line.
const TICKET_TIME: Duration = Duration::from_secs(2);

/// Connections to a test port waiting for their ticket line at once.
const TICKET_POOL: usize = 16;

/// Longest ticket line (`TICKET ` and 32 hex digits, with room to spare).
const TICKET_MAX: usize = 80;

/// Whether `line` is `TICKET <ticket>` (the ticket compared in constant
/// time).
fn ticket_ok(line: &[u8], ticket: &str) -> bool {
    line.strip_prefix(b"TICKET ")
        .is_some_and(|t| ct_eq(t, ticket.as_bytes()))
}

/// Accepts what is waiting on a test port into its pool (the oldest out
/// when it is full, logged).
fn accept_ticket_holders(listener: &TcpListener, pool: &mut Pool<()>, sh: &Shared, id: u64) {
    for _ in 0..TICKET_POOL {
        let refused = |peer: String, why: String| (sh.log)(&Event::Refused { peer, why });
        match listener.accept() {
            Ok((s, from)) => match Pending::new(s, from, TICKET_TIME, TICKET_MAX, ()) {
                Ok(p) => {
                    if let Some(old) = pool.push(p) {
                        refused(
                            old.from.to_string(),
                            format!(
                                "closed on the port of test {id}: {TICKET_POOL} connections \
                                 without a ticket, this the oldest"
                            ),
                        );
                    }
                }
                Err(e) => refused(from.to_string(), format!("set O_NONBLOCK: {e}")),
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                refused("?".into(), format!("accept on the port of test {id}: {e}"));
                return;
            }
        }
    }
}

/// Constant-time equality (the ticket is a secret of the test).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairwise::auth::Token;

    fn cfg() -> AgentConfig {
        AgentConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            "n1",
            Token::new(b"0123456789abcdef").unwrap(),
        )
    }

    fn spec() -> TestSpec {
        TestSpec {
            test: "write-bw".into(),
            sizes: vec![65536],
            seconds: Some(1.0),
            iters: 0,
            tx_depth: 16,
            mtu: 4096,
            inline: 0,
        }
    }

    #[test]
    fn bounds() {
        let c = cfg();
        assert!(params_of(&spec(), &c).is_ok());
        let big = TestSpec {
            sizes: vec![1 << 30],
            ..spec()
        };
        assert!(params_of(&big, &c).unwrap_err().contains("message size"));
        let long = TestSpec {
            seconds: Some(40.0),
            sizes: vec![4096, 65536],
            ..spec()
        };
        assert!(params_of(&long, &c).unwrap_err().contains("at most 60 s"));
        let nan = TestSpec {
            seconds: Some(f64::NAN),
            ..spec()
        };
        assert!(params_of(&nan, &c).is_err());
        let iters = TestSpec {
            seconds: None,
            iters: 0,
            ..spec()
        };
        assert!(params_of(&iters, &c).is_err());
        let unknown = TestSpec {
            test: "rm -rf /".into(),
            ..spec()
        };
        assert!(params_of(&unknown, &c)
            .unwrap_err()
            .contains("unknown test"));
        let deep = TestSpec {
            tx_depth: 100_000,
            ..spec()
        };
        assert!(params_of(&deep, &c).is_err());
        assert_eq!(
            limit_of(&params_of(&spec(), &c).unwrap(), &c),
            Duration::from_secs(11)
        );
    }

    #[test]
    fn tickets_compare_in_full() {
        assert!(ct_eq(b"abcd", b"abcd"));
        assert!(!ct_eq(b"abcd", b"abce"));
        assert!(!ct_eq(b"abc", b"abcd"));
    }

    #[test]
    fn a_ticket_line_is_the_word_and_the_whole_ticket() {
        assert!(ticket_ok(b"TICKET abcd", "abcd"));
        assert!(!ticket_ok(b"TICKET abc", "abcd"));
        assert!(!ticket_ok(b"ticket abcd", "abcd"));
        assert!(!ticket_ok(b"abcd", "abcd"));
    }
}
