//! Accepting control connections so that no stranger can keep the run's
//! coordinator out.
//!
//! One thread accepts and runs every handshake; it never blocks on a peer.
//! A new connection is sent the agent's challenge (a nonce, nothing else)
//! and joins the pool of pending handshakes ([`crate::pairwise::gate`]):
//! at most `max_handshakes` (256) of them, each with one deadline for the
//! whole handshake (`handshake_timeout`, 5 s) counted from accept, the
//! oldest closed when a new one arrives and the pool is full. Only a peer
//! whose proof verifies gets a thread and a session slot (`max_connections`,
//! 8, all of them proven coordinators).
//!
//! What that costs an attacker: idle or slow connections expire together
//! at their deadline, however they trickle bytes; holding the pool full
//! does not keep anyone out, because a real coordinator answers within a
//! round trip and its connection is then the youngest, so it would take
//! `max_handshakes` new connections within that round trip to evict it.
//! What it costs the agent: a socket and a few hundred bytes per pending
//! handshake, and at most [`LOG_BUDGET`] log lines a second about them.

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::gate::{LineError, Outcome, Pending, Pool};
use super::super::protocol::{AgentHandshake, HANDSHAKE_MAX, REFUSED};
use super::{lock, session, AgentError, Event, Exit, Logger, Shared};

/// Log lines a second about connections that had not proven the token;
/// more are counted and reported in one line ([`Event::Suppressed`]).
pub const LOG_BUDGET: u32 = 20;

/// Longest wait between checks of the stop flag and the idle clock.
const TICK: Duration = Duration::from_millis(100);

/// Connections accepted in one turn before the pending ones are read again.
const ACCEPT_BURST: usize = 64;

/// The accept loop: until an exit condition, then waits (boundedly) for the
/// sessions to end.
pub(super) fn serve(listener: &TcpListener, sh: &Arc<Shared>) -> Result<Exit, AgentError> {
    listener
        .set_nonblocking(true)
        .map_err(|source| AgentError::Io {
            verb: "set O_NONBLOCK on the listener",
            source,
        })?;
    let cfg = &sh.cfg;
    let mut pool: Pool<AgentHandshake> = Pool::new(cfg.max_handshakes);
    let mut budget = LogBudget::new(Arc::clone(&sh.log));
    let mut workers: Vec<std::thread::JoinHandle<()>> = Vec::new();
    let why = loop {
        if let Some(w) = *lock(&sh.stop) {
            break w;
        }
        if !sh.testing.load(Ordering::SeqCst) && lock(&sh.last).elapsed() >= cfg.idle_timeout {
            sh.exit(Exit::Idle);
            continue;
        }
        budget.roll();
        let (incoming, outcomes) =
            pool.poll(Some(listener), TICK)
                .map_err(|source| AgentError::Io {
                    verb: "poll",
                    source,
                })?;
        // The pending first: a coordinator's proof is not made to wait
        // behind a burst of new connections.
        for o in outcomes {
            match o {
                Outcome::Line(p, line) => {
                    if let Some(h) = proven(p, &line, sh, &mut budget) {
                        workers.push(h);
                    }
                }
                Outcome::Failed(p, e) => {
                    if e != LineError::Closed {
                        let _ = (&p.stream).write(REFUSED.as_bytes());
                    }
                    budget.refused(&p.from, e.to_string());
                }
            }
        }
        if incoming {
            accept_burst(listener, &mut pool, sh, &mut budget);
        }
        workers.retain(|h| !h.is_finished());
    };
    drop(pool);
    budget.flush();
    (sh.log)(&Event::Exiting { why });
    // Running tests see `stopping` and cancel; sessions notice within
    // their poll interval. Wait for them, boundedly.
    let t = Instant::now();
    while workers.iter().any(|h| !h.is_finished()) && t.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(why)
}

/// Accepts what is waiting (at most [`ACCEPT_BURST`]); each new connection
/// gets the challenge and a place in the pool.
fn accept_burst(
    listener: &TcpListener,
    pool: &mut Pool<AgentHandshake>,
    sh: &Shared,
    budget: &mut LogBudget,
) {
    for _ in 0..ACCEPT_BURST {
        match listener.accept() {
            Ok((s, from)) => stranger(s, from, pool, sh, budget),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                // Out of descriptors: the oldest stranger gives its back.
                match pool.evict_oldest() {
                    Some(old) => budget.refused(
                        &old.from,
                        format!("closed unauthenticated to accept another: accept: {e}"),
                    ),
                    None => {
                        budget.refused_anonymous(format!("accept: {e}"));
                        std::thread::sleep(Duration::from_millis(25));
                    }
                }
                return;
            }
            Err(e) => {
                // ECONNABORTED and friends: one peer's trouble, not ours.
                budget.refused_anonymous(format!("accept: {e}"));
                return;
            }
        }
    }
}

/// A new connection: the challenge out, then into the pool (whose oldest
/// may make room).
fn stranger(
    s: TcpStream,
    from: SocketAddr,
    pool: &mut Pool<AgentHandshake>,
    sh: &Shared,
    budget: &mut LogBudget,
) {
    let cfg = &sh.cfg;
    let (hs, first) = match AgentHandshake::start(&from.to_string()) {
        Ok(x) => x,
        Err(e) => return budget.refused(&from, e.to_string()),
    };
    let p = match Pending::new(s, from, cfg.handshake_timeout, HANDSHAKE_MAX, hs) {
        Ok(p) => p,
        Err(e) => return budget.refused(&from, format!("set O_NONBLOCK: {e}")),
    };
    let _ = p.stream.set_nodelay(true);
    // Some 80 bytes into a fresh socket's empty send buffer: all or nothing.
    match (&p.stream).write(first.as_bytes()) {
        Ok(n) if n == first.len() => {}
        Ok(n) => return budget.refused(&from, format!("sent {n} bytes of the challenge")),
        Err(e) => return budget.refused(&from, format!("write the challenge: {e}")),
    }
    if let Some(old) = pool.push(p) {
        budget.refused(
            &old.from,
            format!(
                "closed unauthenticated after {:.1} s: {} handshakes pending, this the oldest",
                old.since.elapsed().as_secs_f64(),
                cfg.max_handshakes
            ),
        );
    }
}

/// A pending connection's line: a proof that verifies gets a session
/// thread (or `busy`, past `max_connections`); anything else is refused.
fn proven(
    p: Pending<AgentHandshake>,
    line: &[u8],
    sh: &Arc<Shared>,
    budget: &mut LogBudget,
) -> Option<std::thread::JoinHandle<()>> {
    let cfg = &sh.cfg;
    let (stream, from, hs) = p.into_parts();
    let peer = from.to_string();
    let proven = match hs.check(line, &cfg.token, &cfg.name, &peer) {
        Ok(x) => x,
        Err(e) => {
            let _ = (&stream).write(REFUSED.as_bytes());
            budget.refused(&from, e.to_string());
            return None;
        }
    };
    // From here on the peer holds the token: it is told and logged in full.
    let open = sh.connections.load(Ordering::SeqCst);
    if open >= cfg.max_connections {
        let why = format!("busy: {open} coordinators already connected");
        let _ = (&stream).write(format!("{{\"refused\":\"{why}\"}}\n").as_bytes());
        (sh.log)(&Event::Refused { peer, why });
        return None;
    }
    sh.connections.fetch_add(1, Ordering::SeqCst);
    let sh2 = Arc::clone(sh);
    let timeout = cfg.handshake_timeout;
    let spawned = std::thread::Builder::new()
        .name(format!("agent-{from}"))
        .spawn(move || {
            match proven.into_conn(stream, &peer, timeout) {
                Ok(conn) => session::run(conn, from, &sh2),
                Err(e) => (sh2.log)(&Event::Refused {
                    peer,
                    why: e.to_string(),
                }),
            }
            sh2.connections.fetch_sub(1, Ordering::SeqCst);
        });
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            sh.connections.fetch_sub(1, Ordering::SeqCst);
            (sh.log)(&Event::Refused {
                peer: from.to_string(),
                why: format!("cannot start a thread: {e}"),
            });
            None
        }
    }
}

/// At most [`LOG_BUDGET`] lines a second about strangers; the rest counted.
struct LogBudget {
    log: Logger,
    window: Instant,
    used: u32,
    suppressed: u64,
}

impl LogBudget {
    fn new(log: Logger) -> LogBudget {
        LogBudget {
            log,
            window: Instant::now(),
            used: 0,
            suppressed: 0,
        }
    }

    /// Starts a new second when the last one is over, reporting what it
    /// suppressed.
    fn roll(&mut self) {
        if self.window.elapsed() >= Duration::from_secs(1) {
            self.flush();
        }
    }

    /// Reports what was suppressed and starts a new second.
    fn flush(&mut self) {
        if self.suppressed > 0 {
            (self.log)(&Event::Suppressed {
                count: self.suppressed,
            });
        }
        self.window = Instant::now();
        self.used = 0;
        self.suppressed = 0;
    }

    fn refused(&mut self, from: &SocketAddr, why: String) {
        self.line(from.to_string(), why);
    }

    fn refused_anonymous(&mut self, why: String) {
        self.line("?".into(), why);
    }

    fn line(&mut self, peer: String, why: String) {
        self.roll();
        if self.used < LOG_BUDGET {
            self.used += 1;
            (self.log)(&Event::Refused { peer, why });
        } else {
            self.suppressed += 1;
        }
    }
}
