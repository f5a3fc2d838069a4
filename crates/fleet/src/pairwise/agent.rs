//! The test agent: a long-running process on each node that runs rdmakit
//! perf's bandwidth and latency tests against another agent when — and
//! only when — an authenticated coordinator asks.
//!
//! What it promises:
//! - it serves only a coordinator proving the run's token (see
//!   [`super::protocol`]); anything else — no proof, a wrong one, garbage,
//!   a line over the bound, a bad MAC later — is refused, logged (peer text
//!   escaped, [`super::logtext`]), and the connection closed, while the
//!   agent keeps serving;
//! - it never runs two tests at once (a second request gets `busy`);
//! - each test is bounded: message size, number of sizes, planned time,
//!   and a watchdog that cancels it past its time;
//! - a test whose coordinator hangs up (or speaks mid-test) is cancelled at
//!   once, and so is its peer's side, whose perf connection then closes;
//! - it exits after `idle_timeout` without a request, on `Shutdown`, and —
//!   with `once` — when its first coordinator goes away.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdmakit_perf::{ClientOpts, Params, Progress, Report, Row, ServerOpts, Test};

use super::auth::{self, hex, Token};
use super::link;
use super::logtext::escape;
use super::protocol::{
    self, AgentInfo, Conn, Measurement, PeerState, ProtoError, Refusal, Reply, Request, TestSpec,
};
use super::report::{BwPoint, Counters, LatPoint};

/// The agent's settings.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// Control address. A specific IPv4 address is also the soft NIC's and
    /// the tests'; `0.0.0.0` picks, per test, the source address of the
    /// route toward the peer.
    pub listen: SocketAddr,
    /// The name it answers to (the CLI defaults it to the hostname).
    pub name: String,
    /// Device to test with (None: the built-in soft NIC).
    pub device: Option<String>,
    /// The provider `device` is opened through (the CLI's `--provider`).
    pub provider: rdmakit_verbs::ProviderChoice,
    /// The soft NIC's configuration when `device` is `None` (its address
    /// is each test's; the CLI's is `DeviceConfig::from_env()`).
    pub soft: rdmakit_verbs::DeviceConfig,
    /// The run's shared secret.
    pub token: Token,
    /// Exit after this long without a request.
    pub idle_timeout: Duration,
    /// Largest message a test may use.
    pub max_size: usize,
    /// Longest planned test, seconds; the watchdog allows 10 s more for
    /// set-up before it cancels.
    pub max_test_seconds: f64,
    /// Exit when the first authenticated coordinator disconnects (a job
    /// step's agents).
    pub once: bool,
    /// Time a connecting peer has to complete the handshake.
    pub handshake_timeout: Duration,
    /// Control connections served at once; more are closed at accept.
    pub max_connections: usize,
    /// rdmakit's version, reported to coordinators.
    pub version: String,
}

impl AgentConfig {
    /// Defaults for everything but what identifies the run.
    pub fn new(listen: SocketAddr, name: &str, token: Token) -> AgentConfig {
        AgentConfig {
            listen,
            name: name.into(),
            device: None,
            provider: rdmakit_verbs::ProviderChoice::Auto,
            soft: rdmakit_verbs::DeviceConfig::default(),
            token,
            idle_timeout: Duration::from_secs(600),
            max_size: 8 << 20,
            max_test_seconds: 60.0,
            once: false,
            handshake_timeout: Duration::from_secs(5),
            max_connections: 8,
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// What the agent reports as it goes (the CLI logs each as one line).
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Listening.
    Listening {
        /// Where.
        addr: SocketAddr,
    },
    /// A connection was refused (no proof, wrong token, garbage, bad MAC,
    /// too many connections, a wrong ticket on a test port).
    Refused {
        /// Who.
        peer: String,
        /// Why.
        why: String,
    },
    /// A coordinator authenticated.
    Coordinator {
        /// Who.
        peer: String,
    },
    /// A request was refused (busy, out of bounds).
    Declined {
        /// Who asked.
        peer: String,
        /// Why.
        why: String,
    },
    /// A test ended.
    TestDone {
        /// Test id.
        id: u64,
        /// `server` or `client`.
        role: &'static str,
        /// Seconds.
        seconds: f64,
        /// Why it failed.
        error: Option<String>,
    },
    /// A test was cancelled.
    Cancelled {
        /// Test id.
        id: u64,
        /// Why.
        why: String,
    },
    /// Exiting.
    Exiting {
        /// Why.
        why: Exit,
    },
}

/// One line each; every piece of text a peer may have chosen goes through
/// [`escape`], so no event writes more than one line.
impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Listening { addr } => write!(f, "listening on {addr}"),
            Event::Refused { peer, why } => {
                write!(f, "refused {}: {}", escape(peer), escape(why))
            }
            Event::Coordinator { peer } => write!(f, "coordinator {} authenticated", escape(peer)),
            Event::Declined { peer, why } => {
                write!(f, "declined a request of {}: {}", escape(peer), escape(why))
            }
            Event::TestDone {
                id,
                role,
                seconds,
                error,
            } => match error {
                None => write!(f, "test {id} ({role}) done in {seconds:.2} s"),
                Some(e) => write!(
                    f,
                    "test {id} ({role}) failed after {seconds:.2} s: {}",
                    escape(e)
                ),
            },
            Event::Cancelled { id, why } => write!(f, "test {id} cancelled: {}", escape(why)),
            Event::Exiting { why } => write!(f, "exiting: {why}"),
        }
    }
}

/// Why the agent stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// No request for `idle_timeout`.
    Idle,
    /// A coordinator said so.
    Shutdown,
    /// `once`, and the coordinator went away.
    CoordinatorGone,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Exit::Idle => "idle timeout",
            Exit::Shutdown => "the coordinator asked",
            Exit::CoordinatorGone => "the coordinator went away (--once)",
        })
    }
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The control port could not be bound.
    #[error("bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// Only IPv4 works with the soft NIC and the RoCEv2 GIDs used here.
    #[error("--listen {0}: an IPv4 address is needed")]
    NotIpv4(SocketAddr),
    /// A socket call on the listener failed.
    #[error("{verb}: {source}")]
    Io {
        /// The call.
        verb: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A log sink.
pub type Logger = Arc<dyn Fn(&Event) + Send + Sync>;

/// A bound agent, ready to [`Agent::run`].
pub struct Agent {
    listener: TcpListener,
    local: SocketAddr,
    cfg: Arc<AgentConfig>,
}

/// State shared by the agent's threads.
struct Shared {
    cfg: Arc<AgentConfig>,
    log: Logger,
    /// Held while a test runs: one at a time.
    busy: Mutex<()>,
    /// Last request (or test end).
    last: Mutex<Instant>,
    /// Set when the agent is exiting; running tests cancel.
    stop: Mutex<Option<Exit>>,
    stopping: AtomicBool,
    connections: AtomicUsize,
    /// A test is running (the idle clock does not run meanwhile).
    testing: AtomicBool,
}

impl Shared {
    fn touch(&self) {
        *lock(&self.last) = Instant::now();
    }

    fn exit(&self, why: Exit) {
        let mut s = lock(&self.stop);
        if s.is_none() {
            *s = Some(why);
        }
        self.stopping.store(true, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicking holder leaves plain data (an Instant, an Option) behind:
    // still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Agent {
    /// Binds the control port.
    ///
    /// # Errors
    /// [`AgentError::Bind`], [`AgentError::NotIpv4`].
    pub fn bind(cfg: AgentConfig) -> Result<Agent, AgentError> {
        if !cfg.listen.is_ipv4() {
            return Err(AgentError::NotIpv4(cfg.listen));
        }
        let listener = TcpListener::bind(cfg.listen).map_err(|source| AgentError::Bind {
            addr: cfg.listen,
            source,
        })?;
        let local = listener.local_addr().map_err(|source| AgentError::Io {
            verb: "getsockname",
            source,
        })?;
        Ok(Agent {
            listener,
            local,
            cfg: Arc::new(cfg),
        })
    }

    /// Where it listens (the port resolved when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves until an exit condition; returns which.
    ///
    /// # Errors
    /// [`AgentError::Io`] when the listener breaks.
    pub fn run(self, log: Logger) -> Result<Exit, AgentError> {
        let sh = Arc::new(Shared {
            cfg: Arc::clone(&self.cfg),
            log,
            busy: Mutex::new(()),
            last: Mutex::new(Instant::now()),
            stop: Mutex::new(None),
            stopping: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            testing: AtomicBool::new(false),
        });
        (sh.log)(&Event::Listening { addr: self.local });
        self.listener
            .set_nonblocking(true)
            .map_err(|source| AgentError::Io {
                verb: "set O_NONBLOCK on the listener",
                source,
            })?;
        let mut workers: Vec<std::thread::JoinHandle<()>> = Vec::new();
        let why = loop {
            if let Some(w) = *lock(&sh.stop) {
                break w;
            }
            if !sh.testing.load(Ordering::SeqCst)
                && lock(&sh.last).elapsed() >= self.cfg.idle_timeout
            {
                sh.exit(Exit::Idle);
                continue;
            }
            match self.listener.accept() {
                Ok((s, from)) => {
                    let _ = s.set_nonblocking(false);
                    if sh.connections.load(Ordering::SeqCst) >= self.cfg.max_connections {
                        (sh.log)(&Event::Refused {
                            peer: from.to_string(),
                            why: format!(
                                "{} control connections already open",
                                self.cfg.max_connections
                            ),
                        });
                        continue;
                    }
                    sh.connections.fetch_add(1, Ordering::SeqCst);
                    let sh2 = Arc::clone(&sh);
                    let spawned = std::thread::Builder::new()
                        .name(format!("agent-{from}"))
                        .spawn(move || {
                            session(s, from, &sh2);
                            sh2.connections.fetch_sub(1, Ordering::SeqCst);
                        });
                    match spawned {
                        Ok(h) => workers.push(h),
                        Err(e) => {
                            sh.connections.fetch_sub(1, Ordering::SeqCst);
                            (sh.log)(&Event::Refused {
                                peer: from.to_string(),
                                why: format!("cannot start a thread: {e}"),
                            });
                        }
                    }
                    workers.retain(|h| !h.is_finished());
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(25));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // ECONNABORTED and friends: one peer's trouble, not ours.
                    (sh.log)(&Event::Refused {
                        peer: "?".into(),
                        why: format!("accept: {e}"),
                    });
                    std::thread::sleep(Duration::from_millis(25));
                }
            }
        };
        (sh.log)(&Event::Exiting { why });
        // Running tests see `stopping` and cancel; sessions notice within
        // their poll interval. Wait for them, boundedly.
        let t = Instant::now();
        while workers.iter().any(|h| !h.is_finished()) && t.elapsed() < Duration::from_secs(15) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(why)
    }
}

/// How often an idle session wakes to notice the agent stopping.
const SESSION_TICK: Duration = Duration::from_millis(250);

fn session(s: TcpStream, from: SocketAddr, sh: &Arc<Shared>) {
    let cfg = &sh.cfg;
    // The address the coordinator reached us on: the interface whose MTU
    // bounds the soft NIC's path MTU when we listen on 0.0.0.0.
    let local = s.local_addr().ok().map(|a| a.ip());
    let mut conn = match protocol::accept(s, &cfg.token, &cfg.name, cfg.handshake_timeout) {
        Ok(c) => c,
        Err(e) => {
            (sh.log)(&Event::Refused {
                peer: from.to_string(),
                why: e.to_string(),
            });
            return;
        }
    };
    (sh.log)(&Event::Coordinator {
        peer: from.to_string(),
    });
    sh.touch();
    loop {
        if sh.stopping.load(Ordering::SeqCst) {
            break;
        }
        let req: Request = match conn.recv(Some(SESSION_TICK), "a request") {
            Ok(r) => r,
            Err(ProtoError::Timeout { .. }) => continue,
            Err(ProtoError::Closed { .. }) => break,
            Err(e) => {
                (sh.log)(&Event::Refused {
                    peer: from.to_string(),
                    why: e.to_string(),
                });
                break;
            }
        };
        sh.touch();
        let r = match req {
            Request::Info => conn.send(&Reply::Info {
                info: info(cfg, local),
            }),
            Request::Shutdown => {
                let _ = conn.send(&Reply::Bye);
                sh.exit(Exit::Shutdown);
                break;
            }
            Request::Serve { id, spec, peer } => serve(&mut conn, sh, id, &spec, peer),
            Request::Run {
                id,
                spec,
                peer,
                server,
                ticket,
            } => run(&mut conn, sh, id, &spec, peer, server, &ticket),
        };
        sh.touch();
        if let Err(e) = r {
            if !matches!(e, ProtoError::Closed { .. }) {
                (sh.log)(&Event::Refused {
                    peer: from.to_string(),
                    why: e.to_string(),
                });
            }
            break;
        }
    }
    if cfg.once {
        sh.exit(Exit::CoordinatorGone);
    }
}

fn info(cfg: &AgentConfig, local: Option<IpAddr>) -> AgentInfo {
    let (device, port_rate_mbs, mtu) = match &cfg.device {
        None => ("soft0".to_string(), None, soft_mtu(cfg, local)),
        Some(d) => {
            let (rate, mtu) = port_rate_mtu(cfg.provider, d);
            (d.clone(), rate, mtu)
        }
    };
    AgentInfo {
        name: cfg.name.clone(),
        version: cfg.version.clone(),
        device,
        port_rate_mbs,
        mtu,
        max_size: cfg.max_size,
        max_test_seconds: cfg.max_test_seconds,
    }
}

/// Port 1's data rate in MB/s (2^20 bytes) from `ibv_query_port`'s active
/// width and speed, when the device reports them, and its active MTU.
fn port_rate_mtu(provider: rdmakit_verbs::ProviderChoice, dev: &str) -> (Option<f64>, Option<u32>) {
    let Ok(ctx) = rdmakit_verbs::open_device(provider, dev) else {
        return (None, None);
    };
    let Ok(p) = ctx.query_port(1) else {
        return (None, None);
    };
    let rate = port_gbps(p.active_width, p.active_speed).map(|g| g * 1e9 / 8.0 / 1_048_576.0);
    (rate, Some(p.active_mtu.bytes()))
}

/// The soft NIC's path MTU: what the interface holding the agent's address
/// carries (the listen address, else the one the coordinator reached);
/// unknown (no limit) when that cannot be read.
fn soft_mtu(cfg: &AgentConfig, local: Option<IpAddr>) -> Option<u32> {
    let ip = match (cfg.listen.ip(), local) {
        (IpAddr::V4(a), _) if !a.is_unspecified() => a,
        (_, Some(IpAddr::V4(a))) => a,
        _ => return None,
    };
    link::interface_mtu(ip).ok().map(link::path_mtu_for_netdev)
}

/// Data rate in Gb/s of an IB width × speed (the verbs encodings), after
/// line coding (8b/10b up to QDR, 64b/66b from FDR).
pub fn port_gbps(width: u8, speed: u8) -> Option<f64> {
    let lanes = match width {
        1 => 1.0,
        2 => 4.0,
        4 => 8.0,
        8 => 12.0,
        16 => 2.0,
        _ => return None,
    };
    let lane = match speed {
        1 => 2.0,
        2 => 4.0,
        4 | 8 => 8.0,
        16 => 13.64,
        32 => 25.0,
        64 => 50.0,
        128 => 100.0,
        _ => return None,
    };
    Some(lanes * lane)
}

/// The address this agent tests from toward `peer`: the listen address
/// when it is specific, else the source of the route toward `peer`.
fn test_ip(cfg: &AgentConfig, peer: IpAddr) -> Result<Ipv4Addr, String> {
    if let IpAddr::V4(a) = cfg.listen.ip() {
        if !a.is_unspecified() {
            return Ok(a);
        }
    }
    route_source(peer)
}

/// The address an agent announces: `advertise` when given, else its own
/// listen address when specific, else the source of the route toward the
/// Slurm launch node (`launch_node`: SLURM_LAUNCH_NODE_IPADDR, read by the
/// caller).
///
/// # Errors
/// A wildcard listen address with neither, a launch node that is not an
/// address, or no route toward it.
pub fn advertised(
    advertise: Option<Ipv4Addr>,
    local: SocketAddr,
    launch_node: Option<&str>,
) -> Result<Ipv4Addr, String> {
    if let Some(ip) = advertise {
        return Ok(ip);
    }
    if let IpAddr::V4(ip) = local.ip() {
        if !ip.is_unspecified() {
            return Ok(ip);
        }
    }
    let toward = launch_node.ok_or_else(|| {
        "--announce with --listen 0.0.0.0 needs --advertise IP (or SLURM_LAUNCH_NODE_IPADDR)"
            .to_string()
    })?;
    let toward: IpAddr = toward
        .trim()
        .parse()
        .map_err(|_| format!("SLURM_LAUNCH_NODE_IPADDR={toward:?} is not an address"))?;
    route_source(toward)
}

/// The source address of the route toward `peer` (nothing is sent: a UDP
/// `connect` only picks the route).
///
/// # Errors
/// No route, or an IPv6 source.
pub fn route_source(peer: IpAddr) -> Result<Ipv4Addr, String> {
    let u = UdpSocket::bind("0.0.0.0:0").map_err(|e| format!("bind a UDP socket: {e}"))?;
    u.connect((peer, 9))
        .map_err(|e| format!("no route toward {peer}: {e}"))?;
    match u.local_addr() {
        Ok(SocketAddr::V4(a)) => Ok(*a.ip()),
        Ok(a) => Err(format!("route toward {peer} leaves from {a}, not IPv4")),
        Err(e) => Err(format!("getsockname: {e}")),
    }
}

/// This host's name (`uname -n`): an agent's default name.
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

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

fn perf_error(e: &rdmakit_perf::PerfError) -> String {
    e.to_string()
}

/// `Serve`: listen for the client agent on a fresh port, hand out a
/// one-time ticket, run the server side.
fn serve(
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
    let deadline = Instant::now() + Duration::from_secs(15);
    let stream = loop {
        match listener.accept() {
            Ok((s, from)) => match read_ticket(&s) {
                Ok(t) if ct_eq(t.as_bytes(), ticket.as_bytes()) => break s,
                Ok(_) => (sh.log)(&Event::Refused {
                    peer: from.to_string(),
                    why: format!("wrong ticket on the port of test {id}"),
                }),
                Err(e) => (sh.log)(&Event::Refused {
                    peer: from.to_string(),
                    why: format!("no ticket on the port of test {id}: {e}"),
                }),
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => {
                (sh.log)(&Event::Refused {
                    peer: "?".into(),
                    why: format!("accept on the port of test {id}: {e}"),
                });
            }
        }
        match conn.poll_peer(Duration::from_millis(10))? {
            PeerState::Quiet => {}
            PeerState::Data => {
                (sh.log)(&Event::Cancelled {
                    id,
                    why: Abort::CoordinatorSpoke.to_string(),
                });
                return Err(ProtoError::Malformed {
                    peer: conn.peer().into(),
                    why: "a request while a test was starting".into(),
                });
            }
            PeerState::Closed => {
                (sh.log)(&Event::Cancelled {
                    id,
                    why: Abort::CoordinatorGone.to_string(),
                });
                return Err(ProtoError::Closed {
                    peer: conn.peer().into(),
                });
            }
        }
        if Instant::now() > deadline || sh.stopping.load(Ordering::SeqCst) {
            return conn.send(&Reply::Served {
                id,
                error: Some("the client agent never connected".into()),
            });
        }
    };
    drop(listener);
    let _ = stream.set_nonblocking(false);
    let sock = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            return conn.send(&Reply::Served {
                id,
                error: Some(format!("dup the test socket: {e}")),
            })
        }
    };
    let opts = ServerOpts {
        port: 0,
        device: cfg.device.clone(),
        provider: cfg.provider,
        soft: rdmakit_verbs::DeviceConfig {
            addr: Some(ip),
            ..cfg.soft.clone()
        },
        gid_index: 0,
        test: params.test,
    };
    let expected = params.clone();
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
    if let Some(w) = why {
        (sh.log)(&Event::Cancelled {
            id,
            why: w.to_string(),
        });
        if matches!(w, Abort::CoordinatorGone | Abort::CoordinatorSpoke) {
            return Err(ProtoError::Closed {
                peer: conn.peer().into(),
            });
        }
    }
    let error = r.err().map(|e| perf_error(&e));
    (sh.log)(&Event::TestDone {
        id,
        role: "server",
        seconds,
        error: error.clone(),
    });
    conn.send(&Reply::Served { id, error })
}

/// `Run`: connect to the server agent, present the ticket, run the client.
#[allow(clippy::too_many_arguments)]
fn run(
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
        soft: rdmakit_verbs::DeviceConfig {
            addr: Some(ip),
            ..cfg.soft.clone()
        },
        gid_index: 0,
        params: params.clone(),
        connect_timeout: Duration::from_secs(5),
    };
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
        (sh.log)(&Event::Cancelled {
            id,
            why: w.to_string(),
        });
        if matches!(w, Abort::CoordinatorGone | Abort::CoordinatorSpoke) {
            return Err(ProtoError::Closed {
                peer: conn.peer().into(),
            });
        }
    }
    match r {
        Ok(rep) => {
            (sh.log)(&Event::TestDone {
                id,
                role: "client",
                seconds,
                error: None,
            });
            conn.send(&Reply::Measured {
                id,
                result: measurement(&rep, seconds),
            })
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

/// Reads `TICKET <hex>\n` byte by byte (nothing past the newline is
/// consumed: the perf exchange follows on the same stream), in at most 2 s.
fn read_ticket(s: &TcpStream) -> Result<String, String> {
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    let mut r = s;
    while line.len() < 80 {
        match r.read(&mut b) {
            Ok(0) => return Err("closed".into()),
            Ok(_) if b[0] == b'\n' => {
                let _ = s.set_read_timeout(None);
                let l = String::from_utf8_lossy(&line).into_owned();
                return l
                    .strip_prefix("TICKET ")
                    .map(str::to_string)
                    .ok_or_else(|| "not a ticket line".to_string());
            }
            Ok(_) => line.push(b[0]),
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("a line over 80 bytes".into())
}

/// Constant-time equality (the ticket is a secret of the test).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_announced_address_is_the_flag_the_listen_address_or_the_route() {
        let any: SocketAddr = "0.0.0.0:1".parse().unwrap();
        let ip = Ipv4Addr::new(10, 0, 0, 7);
        assert_eq!(advertised(Some(ip), any, None), Ok(ip));
        assert_eq!(
            advertised(None, "10.0.0.8:1".parse().unwrap(), None),
            Ok(Ipv4Addr::new(10, 0, 0, 8))
        );
        assert!(advertised(None, any, None)
            .unwrap_err()
            .contains("needs --advertise"));
        assert_eq!(
            advertised(None, any, Some("x")).unwrap_err(),
            "SLURM_LAUNCH_NODE_IPADDR=\"x\" is not an address"
        );
        assert_eq!(
            advertised(None, any, Some("127.0.0.1")),
            Ok(Ipv4Addr::LOCALHOST)
        );
    }

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
    fn port_rates() {
        // 4X EDR: 100 Gb/s of data; 4X QDR: 32 Gb/s after 8b/10b.
        assert_eq!(port_gbps(2, 32), Some(100.0));
        assert_eq!(port_gbps(2, 4), Some(32.0));
        assert_eq!(port_gbps(3, 4), None);
    }

    #[test]
    fn tickets_compare_in_full() {
        assert!(ct_eq(b"abcd", b"abcd"));
        assert!(!ct_eq(b"abcd", b"abce"));
        assert!(!ct_eq(b"abc", b"abcd"));
    }
}
