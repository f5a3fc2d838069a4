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
//! - before the proof it says nothing about itself: its first line is a
//!   random nonce, nothing else;
//! - strangers cannot keep a coordinator out ([`listen`]): the handshake
//!   has one deadline, however slowly a peer sends; connections that have
//!   not proven the token wait in a pool of their own, read by one thread
//!   that never blocks on any of them, whose oldest is closed when a new
//!   one arrives and it is full; only proven coordinators hold a session
//!   slot;
//! - it never runs two tests at once (a second request gets `busy`);
//! - each test is bounded: message size, number of sizes, planned time,
//!   and a watchdog that cancels it past its time;
//! - a test whose coordinator hangs up (or speaks mid-test) is cancelled at
//!   once, and so is its peer's side, whose perf connection then closes;
//! - it exits after `idle_timeout` without a request, on `Shutdown`, and —
//!   with `once` — when its first coordinator goes away.
//!
//! Modules: [`listen`] (accepting, the handshakes), `session` (a proven
//! coordinator's requests), `measure` (the tests and their bounds), `net`
//! (addresses and routes), [`start`] (an agent as `rdmakit fleet agent`
//! starts it).

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::auth::Token;
use super::logtext::escape;

pub mod listen;
mod measure;
mod net;
mod session;
pub mod start;

pub use measure::{measurement, params_of};
pub use net::{advertised, hostname, route_source};
pub use session::port_gbps;

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
    /// Time a connecting peer has to complete the whole handshake (one
    /// deadline from accept, not per read).
    pub handshake_timeout: Duration,
    /// Proven coordinators served at once; one more is refused (`busy`)
    /// after its proof.
    pub max_connections: usize,
    /// Connections waiting for their handshake at once; when one more
    /// arrives, the oldest of them is closed.
    pub max_handshakes: usize,
    /// rdmakit's version, reported to coordinators.
    pub version: String,
}

/// Whether `device` is one the provider lists, so an agent started with a wrong
/// `-d` fails at once rather than at its first test.
///
/// # Errors
/// The device is not listed (the message names those that are), or the
/// provider cannot list devices.
pub fn check_device(provider: rdmakit_verbs::ProviderChoice, device: &str) -> Result<(), String> {
    match rdmakit_verbs::devices(provider) {
        Ok(names) if names.iter().any(|n| n == device) => Ok(()),
        Ok(names) => Err(format!(
            "-d {device}: no such RDMA device (devices: {}); `rdmakit devinfo` lists them",
            names.join(", ")
        )),
        Err(e) => Err(format!("-d {device}: {e}")),
    }
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
            max_handshakes: 256,
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    /// The soft NIC's configuration for one test: [`AgentConfig::soft`] at
    /// the test's address `ip`.
    pub(crate) fn soft_at(&self, ip: std::net::Ipv4Addr) -> rdmakit_verbs::DeviceConfig {
        rdmakit_verbs::DeviceConfig {
            addr: Some(ip),
            ..self.soft.clone()
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
    /// out of time, evicted, a wrong ticket on a test port).
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
    /// Refusals of connections that had not proven the token, over the
    /// log's budget ([`listen::LOG_BUDGET`] lines a second), counted
    /// instead of logged one by one.
    Suppressed {
        /// How many.
        count: u64,
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
            Event::Suppressed { count } => write!(
                f,
                "refused {count} more unauthenticated connection(s) without a line each \
                 (at most {} a second)",
                listen::LOG_BUDGET
            ),
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
    /// A name with control characters (coordinators refuse it).
    #[error("--name {}: control characters are not allowed", escape(.0))]
    BadName(String),
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
    /// Proven coordinators in session (at most `cfg.max_connections`).
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
    /// [`AgentError::Bind`], [`AgentError::NotIpv4`], [`AgentError::BadName`].
    pub fn bind(cfg: AgentConfig) -> Result<Agent, AgentError> {
        if !cfg.listen.is_ipv4() {
            return Err(AgentError::NotIpv4(cfg.listen));
        }
        if cfg.name.is_empty() || matches!(escape(&cfg.name), std::borrow::Cow::Owned(_)) {
            return Err(AgentError::BadName(cfg.name));
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
        listen::serve(&self.listener, &sh)
    }
}
