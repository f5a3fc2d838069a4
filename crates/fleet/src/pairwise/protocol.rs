//! The control protocol between a coordinator and an agent: JSON lines over
//! TCP, bounded in length.
//!
//! Handshake (plain lines), [`PROTO`]:
//! 1. agent → `{"nonce":Na}` — 32 random bytes and nothing else: before
//!    the coordinator has proven the token, the agent says nothing about
//!    itself (no name, no version, not even the protocol's name);
//! 2. coordinator → `{"auth":HMAC(token, coordinator|Na|Nc),"nonce":Nc}`
//! 3. agent → `{"welcome":HMAC(token, agent|Nc|Na|N),"name":N}` or
//!    `{"refused":why}` (to a peer that has not proven the token, always
//!    the same `authentication failed`).
//!
//! Both prove the token without sending it; fresh nonces on both sides
//! make a recorded exchange useless; the agent's proof covers its name.
//! The whole handshake has one deadline on each side, however the peer
//! spreads its bytes. After it, every line is `MAC JSON` with MAC =
//! HMAC(session key, direction|sequence|JSON), the session key being
//! HMAC(token, session|Na|Nc): a message altered, replayed, reordered or
//! injected into the TCP stream fails its MAC and ends the connection.
//!
//! The agent's side is split so that a thread serving many strangers never
//! blocks on one ([`AgentHandshake`]: the first line out, the proof in,
//! the welcome out); [`accept`] runs it on one blocking socket.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::auth::{self, hex, unhex, Purpose, Token};
use super::deltas::Deltas;
use super::gate::{self, LineError};
use super::logtext::escape;
use super::report::{BwPoint, Counters, LatPoint};

/// This protocol's name and version (never sent: the proofs' labels carry
/// the version, and error messages name it).
pub const PROTO: &str = "rdmakit.fleet.agent/2";

/// What the agent answers a peer that has not proven the token, whatever
/// went wrong (the log says what).
pub const REFUSED: &str = "{\"refused\":\"authentication failed\"}\n";

/// Longest handshake line.
pub const HANDSHAKE_MAX: usize = 1024;

/// Longest message line after the handshake.
pub const LINE_MAX: usize = 1 << 20;

/// Why the control connection failed.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// A socket call failed.
    #[error("{verb} {peer}: {source}")]
    Io {
        /// The call (`connect`, `read from`, `write to`).
        verb: &'static str,
        /// The other side.
        peer: String,
        /// The OS error (errno included).
        source: std::io::Error,
    },
    /// Nothing arrived in time.
    #[error("{peer}: no answer within {secs:.0} s ({what})")]
    Timeout {
        /// The other side.
        peer: String,
        /// What was awaited.
        what: &'static str,
        /// How long.
        secs: f64,
    },
    /// The other side closed the connection.
    #[error("{peer} closed the connection")]
    Closed {
        /// The other side.
        peer: String,
    },
    /// Not a message of this protocol.
    #[error("{peer}: malformed message: {}", escape(.why))]
    Malformed {
        /// The other side.
        peer: String,
        /// What was wrong.
        why: String,
    },
    /// A line over the bound.
    #[error("{peer}: a line longer than {max} bytes")]
    TooLong {
        /// The other side.
        peer: String,
        /// The bound.
        max: usize,
    },
    /// A message whose MAC does not verify.
    #[error("{peer}: message authentication failed (bad MAC)")]
    BadMac {
        /// The other side.
        peer: String,
    },
    /// The proof of the token was missing or wrong.
    #[error("{peer}: authentication failed: {}", escape(.why))]
    AuthFailed {
        /// The other side.
        peer: String,
        /// What failed.
        why: String,
    },
}

impl ProtoError {
    fn io(verb: &'static str, peer: &str, e: std::io::Error, what: &'static str) -> ProtoError {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => ProtoError::Timeout {
                peer: peer.into(),
                what,
                secs: 0.0,
            },
            _ => ProtoError::Io {
                verb,
                peer: peer.into(),
                source: e,
            },
        }
    }
}

fn line_error(e: LineError, peer: &str, what: &'static str) -> ProtoError {
    match e {
        LineError::Closed => ProtoError::Closed { peer: peer.into() },
        LineError::TooLong(max) => ProtoError::TooLong {
            peer: peer.into(),
            max,
        },
        LineError::Timeout(d) => ProtoError::Timeout {
            peer: peer.into(),
            what,
            secs: d.as_secs_f64(),
        },
        LineError::Io(e) => ProtoError::Io {
            verb: "read from",
            peer: peer.into(),
            source: std::io::Error::other(e),
        },
    }
}

/// A test the coordinator asks for, as it travels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestSpec {
    /// `write-bw`, `send-lat`, ... (rdmakit perf's names).
    pub test: String,
    /// Message sizes, bytes.
    pub sizes: Vec<usize>,
    /// Seconds per size (duration mode), else `iters`.
    pub seconds: Option<f64>,
    /// Iterations per size when `seconds` is None.
    pub iters: u64,
    /// Send queue depth.
    pub tx_depth: u32,
    /// Path MTU, bytes.
    pub mtu: u32,
    /// Inline threshold, bytes.
    pub inline: u32,
}

/// What the coordinator sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// The agent's identity and limits.
    Info,
    /// Be the server of test `id` for `peer`: answer `Listening`, then
    /// `Served` when the test is over.
    Serve {
        /// Test id (the coordinator's).
        id: u64,
        /// The test.
        spec: TestSpec,
        /// The client agent's address.
        peer: IpAddr,
    },
    /// Be the client of test `id` against `server`, presenting `ticket`:
    /// answer `Measured`.
    Run {
        /// Test id.
        id: u64,
        /// The test.
        spec: TestSpec,
        /// The server agent's address.
        peer: IpAddr,
        /// Where the server agent listens for this test.
        server: SocketAddr,
        /// The one-time ticket the server handed out.
        ticket: String,
    },
    /// Exit now (the coordinator is done with this agent).
    Shutdown,
}

/// What an agent is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    /// Its name.
    pub name: String,
    /// rdmakit version.
    pub version: String,
    /// Device it tests with.
    pub device: String,
    /// The device port's rate, MB/s, when known (not on the soft NIC).
    pub port_rate_mbs: Option<f64>,
    /// The largest path MTU its link carries (the port's active MTU; on
    /// the soft NIC, from its interface's MTU), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Largest message it accepts.
    pub max_size: usize,
    /// Longest test it runs, seconds.
    pub max_test_seconds: f64,
}

/// Why an agent said no.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// It is running another test.
    Busy,
    /// The test is over its bounds.
    Bounds,
    /// The request could not be carried out.
    Failed,
}

/// A test's figures, as the client side measured them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Bandwidth rows.
    pub bw: Vec<BwPoint>,
    /// Latency rows.
    pub lat: Vec<LatPoint>,
    /// The client QP's counters (soft NIC).
    pub counters: Option<Counters>,
    /// Wall time, seconds.
    pub seconds: f64,
    /// What the client end's device counters moved during the test
    /// (bounded as it is parsed: [`Deltas`]).
    #[serde(default, skip_serializing_if = "Deltas::is_empty")]
    pub deltas: Deltas,
}

/// What an agent answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    /// To `Info`.
    Info {
        /// The agent.
        info: AgentInfo,
    },
    /// To `Serve`: waiting for the client.
    Listening {
        /// Test id.
        id: u64,
        /// TCP port of the test's exchange.
        port: u16,
        /// The ticket the client must present.
        ticket: String,
    },
    /// The served test ended (error: why it failed).
    Served {
        /// Test id.
        id: u64,
        /// Why it failed, if it did.
        error: Option<String>,
        /// What the server end's device counters moved during the test
        /// (bounded as it is parsed: [`Deltas`]).
        #[serde(default, skip_serializing_if = "Deltas::is_empty")]
        counters: Deltas,
    },
    /// To `Run`: the figures.
    Measured {
        /// Test id.
        id: u64,
        /// The figures.
        result: Measurement,
    },
    /// To `Run` when the test failed.
    RunFailed {
        /// Test id.
        id: u64,
        /// Why.
        error: String,
    },
    /// No.
    Refused {
        /// Why, as a kind.
        kind: Refusal,
        /// Why, in words.
        message: String,
    },
    /// To `Shutdown`.
    Bye,
}

/// The agent's first line: its nonce, nothing else.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Challenge {
    nonce: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Auth {
    auth: String,
    nonce: String,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Welcome {
    Welcome { welcome: String, name: String },
    Refused { refused: String },
}

/// Which end of the connection this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The coordinator.
    Coordinator,
    /// The agent.
    Agent,
}

impl Side {
    fn tag(self) -> &'static [u8] {
        match self {
            Side::Coordinator => b"c>a",
            Side::Agent => b"a>c",
        }
    }

    fn other(self) -> Side {
        match self {
            Side::Coordinator => Side::Agent,
            Side::Agent => Side::Coordinator,
        }
    }
}

/// An authenticated control connection.
pub struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
    /// A partial line left by a timeout.
    pending: Vec<u8>,
    peer: String,
    side: Side,
    key: [u8; 32],
    sent: u64,
    received: u64,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("peer", &self.peer)
            .field("side", &self.side)
            .finish()
    }
}

/// Reads one line of at most `max` bytes (without its newline) into
/// `buf`, which keeps a partial line across a timeout.
fn read_line(
    r: &mut BufReader<TcpStream>,
    buf: &mut Vec<u8>,
    max: usize,
    peer: &str,
    what: &'static str,
) -> Result<String, ProtoError> {
    let room = (max + 1).saturating_sub(buf.len()) as u64;
    std::io::Read::take(&mut *r, room)
        .read_until(b'\n', buf)
        .map_err(|e| ProtoError::io("read from", peer, e, what))?;
    if buf.last() != Some(&b'\n') {
        // Stopped short of a newline: the bound, or the end of the stream.
        if buf.len() > max {
            return Err(ProtoError::TooLong {
                peer: peer.into(),
                max,
            });
        }
        return Err(ProtoError::Closed { peer: peer.into() });
    }
    let mut line = std::mem::take(buf);
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line).map_err(|_| ProtoError::Malformed {
        peer: peer.into(),
        why: "not UTF-8".into(),
    })
}

fn write_line(mut w: impl Write, line: &str, peer: &str) -> Result<(), ProtoError> {
    let mut b = Vec::with_capacity(line.len() + 1);
    b.extend_from_slice(line.as_bytes());
    b.push(b'\n');
    w.write_all(&b)
        .map_err(|e| ProtoError::io("write to", peer, e, "a write"))
}

fn parse<T: DeserializeOwned>(line: &str, peer: &str, what: &str) -> Result<T, ProtoError> {
    serde_json::from_str(line).map_err(|e| ProtoError::Malformed {
        peer: peer.into(),
        why: format!("expected {what}: {e}"),
    })
}

fn to_json<T: Serialize>(v: &T) -> String {
    // Serializing these plain structs and enums cannot fail.
    serde_json::to_string(v).unwrap_or_else(|e| unreachable!("serializing a message: {e}"))
}

fn nonce_of(s: &str, peer: &str) -> Result<Vec<u8>, ProtoError> {
    match unhex(s) {
        Some(n) if n.len() == auth::NONCE_LEN => Ok(n),
        _ => Err(ProtoError::Malformed {
            peer: peer.into(),
            why: "a nonce must be 32 bytes of hex".into(),
        }),
    }
}

impl Conn {
    fn new(s: TcpStream, peer: String, side: Side, key: [u8; 32]) -> Result<Conn, ProtoError> {
        let w = s
            .try_clone()
            .map_err(|e| ProtoError::io("dup socket of", &peer, e, "a dup"))?;
        Ok(Conn {
            r: BufReader::new(s),
            w,
            pending: Vec::new(),
            peer,
            side,
            key,
            sent: 0,
            received: 0,
        })
    }
}

/// The agent's side of one handshake: its nonce, which is all its first
/// line says; then [`AgentHandshake::check`] of the coordinator's proof.
#[derive(Debug)]
pub struct AgentHandshake {
    na: [u8; auth::NONCE_LEN],
}

/// A coordinator that proved the token: the welcome to send it and the
/// session key ([`Proven::into_conn`]).
#[derive(Debug)]
pub struct Proven {
    welcome: String,
    key: [u8; 32],
}

impl AgentHandshake {
    /// A fresh nonce; returns the handshake and the first line to send
    /// (newline included).
    ///
    /// # Errors
    /// [`ProtoError::AuthFailed`] when the random source fails.
    pub fn start(peer: &str) -> Result<(AgentHandshake, String), ProtoError> {
        let na = auth::nonce().map_err(|why| ProtoError::AuthFailed {
            peer: peer.into(),
            why,
        })?;
        let line = format!("{}\n", to_json(&Challenge { nonce: hex(&na) }));
        Ok((AgentHandshake { na }, line))
    }

    /// Checks the coordinator's line (its proof of the token). On success
    /// the welcome, which names the agent, is ready to send; on failure
    /// the caller answers [`REFUSED`] and logs the error.
    ///
    /// # Errors
    /// [`ProtoError::Malformed`] for anything but a proof of this
    /// protocol, [`ProtoError::AuthFailed`] for a wrong one.
    pub fn check(
        self,
        line: &[u8],
        token: &Token,
        name: &str,
        peer: &str,
    ) -> Result<Proven, ProtoError> {
        let line = std::str::from_utf8(line).map_err(|_| ProtoError::Malformed {
            peer: peer.into(),
            why: "not UTF-8".into(),
        })?;
        let a: Auth = parse(line, peer, "the coordinator's proof")?;
        let nc = nonce_of(&a.nonce, peer)?;
        let tag = unhex(&a.auth).unwrap_or_default();
        if !auth::check(token, Purpose::Coordinator, &[&self.na, &nc], &tag) {
            return Err(ProtoError::AuthFailed {
                peer: peer.into(),
                why: "wrong token (the proof does not verify)".into(),
            });
        }
        let proof = auth::prove(token, Purpose::Agent, &[&nc, &self.na, name.as_bytes()]);
        let welcome = to_json(&Welcome::Welcome {
            welcome: hex(&proof),
            name: name.into(),
        });
        Ok(Proven {
            welcome: format!("{welcome}\n"),
            key: auth::prove(token, Purpose::Session, &[&self.na, &nc]),
        })
    }
}

impl Proven {
    /// Sends the welcome on `stream` (made blocking, at most `timeout` for
    /// the write) and returns the authenticated connection.
    ///
    /// # Errors
    /// Socket errors.
    pub fn into_conn(
        self,
        stream: TcpStream,
        peer: &str,
        timeout: Duration,
    ) -> Result<Conn, ProtoError> {
        let setup = |e| ProtoError::io("set up", peer, e, "setup");
        stream.set_nonblocking(false).map_err(setup)?;
        stream.set_write_timeout(Some(timeout)).map_err(setup)?;
        let _ = stream.set_nodelay(true);
        (&stream)
            .write_all(self.welcome.as_bytes())
            .map_err(|e| ProtoError::io("write to", peer, e, "the welcome"))?;
        Conn::new(stream, peer.into(), Side::Agent, self.key)
    }
}

/// The agent's side of the handshake on one freshly accepted, blocking
/// connection, within `timeout` for the whole of it. On a wrong or
/// missing proof it answers [`REFUSED`] and returns
/// [`ProtoError::AuthFailed`]; on garbage, [`ProtoError::Malformed`].
/// (The agent itself serves many strangers at once from one thread with
/// [`AgentHandshake`] and [`super::gate`].)
///
/// # Errors
/// As above; I/O errors and `timeout` expiring.
pub fn accept(
    stream: TcpStream,
    token: &Token,
    name: &str,
    timeout: Duration,
) -> Result<Conn, ProtoError> {
    let deadline = Instant::now() + timeout;
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "coordinator".to_string(), |a| a.to_string());
    let (hs, first) = AgentHandshake::start(&peer)?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| ProtoError::io("set timeout on", &peer, e, "setup"))?;
    (&stream)
        .write_all(first.as_bytes())
        .map_err(|e| ProtoError::io("write to", &peer, e, "a write"))?;
    let what = "the coordinator's proof";
    let line = gate::read_line_by(&stream, HANDSHAKE_MAX, deadline, timeout)
        .map_err(|e| line_error(e, &peer, what))?;
    match hs.check(&line, token, name, &peer) {
        Ok(p) => p.into_conn(stream, &peer, timeout),
        Err(e) => {
            let _ = (&stream).write_all(REFUSED.as_bytes());
            Err(e)
        }
    }
}

/// The coordinator's side: connects to `addr` and proves the token; the
/// agent must prove it too. Returns the connection and the agent's name.
/// `timeout` bounds the whole of it, connect included.
///
/// # Errors
/// [`ProtoError`]: unreachable, refused (wrong token), an agent that cannot
/// prove the token (an impostor), an agent of an older protocol, garbage,
/// timeouts.
pub fn connect(
    addr: SocketAddr,
    token: &Token,
    timeout: Duration,
) -> Result<(Conn, String), ProtoError> {
    let deadline = Instant::now() + timeout;
    let peer = addr.to_string();
    let stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| ProtoError::io("connect", &peer, e, "connect"))
        .map_err(|e| with_secs(e, timeout))?;
    let _ = stream.set_nodelay(true);
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| ProtoError::io("set timeout on", &peer, e, "setup"))?;
    let line = handshake_line(&stream, deadline, timeout, &peer, "the agent's first line")?;
    let h: Challenge = match serde_json::from_str(&line) {
        Ok(h) => h,
        Err(e) => return Err(not_a_challenge(&line, &peer, &e)),
    };
    let na = nonce_of(&h.nonce, &peer)?;
    let nc = auth::nonce().map_err(|why| ProtoError::AuthFailed {
        peer: peer.clone(),
        why,
    })?;
    let proof = auth::prove(token, Purpose::Coordinator, &[&na, &nc]);
    let auth_line = to_json(&Auth {
        auth: hex(&proof),
        nonce: hex(&nc),
    });
    write_line(&mut &stream, &auth_line, &peer)?;
    let line = handshake_line(&stream, deadline, timeout, &peer, "the agent's welcome")?;
    match parse::<Welcome>(&line, &peer, "the agent's welcome")? {
        Welcome::Refused { refused } if refused == "authentication failed" => {
            Err(ProtoError::AuthFailed {
                peer,
                why: "the agent refused us (authentication failed): is RDMAKIT_FLEET_TOKEN \
                      the run's?"
                    .into(),
            })
        }
        Welcome::Refused { refused } => Err(ProtoError::AuthFailed {
            peer,
            why: format!("the agent refused us ({refused})"),
        }),
        Welcome::Welcome { welcome, name } => {
            let tag = unhex(&welcome).unwrap_or_default();
            if !auth::check(token, Purpose::Agent, &[&nc, &na, name.as_bytes()], &tag) {
                return Err(ProtoError::AuthFailed {
                    peer,
                    why: "the agent could not prove the token (not our agent)".into(),
                });
            }
            if matches!(escape(&name), std::borrow::Cow::Owned(_)) {
                return Err(ProtoError::Malformed {
                    peer,
                    why: format!("the agent's name {name:?} has control characters"),
                });
            }
            let key = auth::prove(token, Purpose::Session, &[&na, &nc]);
            // Requests may wait on any reply; Conn::recv sets its own timeouts.
            let _ = stream.set_read_timeout(None);
            Ok((Conn::new(stream, peer, Side::Coordinator, key)?, name))
        }
    }
}

/// Why an agent's first line is not this protocol's challenge: an agent of
/// an older rdmakit says so by its `hello`.
fn not_a_challenge(line: &str, peer: &str, e: &serde_json::Error) -> ProtoError {
    let old = serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("hello").and_then(|h| h.as_str()).map(str::to_string));
    ProtoError::Malformed {
        peer: peer.into(),
        why: match old {
            Some(p) => format!(
                "the agent speaks {p}, this coordinator {PROTO}: run the same rdmakit on \
                 every node"
            ),
            None => format!("expected an rdmakit fleet agent's challenge: {e}"),
        },
    }
}

/// One line of the handshake from `stream` as text, read by `deadline`.
fn handshake_line(
    stream: &TcpStream,
    deadline: Instant,
    timeout: Duration,
    peer: &str,
    what: &'static str,
) -> Result<String, ProtoError> {
    let line = gate::read_line_by(stream, HANDSHAKE_MAX, deadline, timeout)
        .map_err(|e| line_error(e, peer, what))?;
    String::from_utf8(line).map_err(|_| ProtoError::Malformed {
        peer: peer.into(),
        why: "not UTF-8".into(),
    })
}

fn with_secs(e: ProtoError, t: Duration) -> ProtoError {
    match e {
        ProtoError::Timeout { peer, what, .. } => ProtoError::Timeout {
            peer,
            what,
            secs: t.as_secs_f64(),
        },
        e => e,
    }
}

impl Conn {
    /// Sends one message with its MAC.
    ///
    /// # Errors
    /// I/O errors.
    pub fn send<T: Serialize>(&mut self, msg: &T) -> Result<(), ProtoError> {
        let json = to_json(msg);
        let seq = self.sent.to_be_bytes();
        let tag = auth::mac(&self.key, &[self.side.tag(), &seq, json.as_bytes()]);
        self.sent += 1;
        write_line(&mut self.w, &format!("{} {json}", hex(&tag)), &self.peer)
    }

    /// Receives one message, waiting at most `timeout` (None: forever).
    ///
    /// # Errors
    /// Timeouts, a closed connection, a bad MAC, garbage.
    pub fn recv<T: DeserializeOwned>(
        &mut self,
        timeout: Option<Duration>,
        what: &'static str,
    ) -> Result<T, ProtoError> {
        self.w
            .set_read_timeout(timeout)
            .map_err(|e| ProtoError::io("set timeout on", &self.peer, e, what))?;
        let line =
            read_line(&mut self.r, &mut self.pending, LINE_MAX, &self.peer, what).map_err(|e| {
                match e {
                    ProtoError::Timeout { peer, what, .. } => ProtoError::Timeout {
                        peer,
                        what,
                        secs: timeout.map_or(0.0, |t| t.as_secs_f64()),
                    },
                    e => e,
                }
            })?;
        let (tag, json) = line.split_once(' ').ok_or_else(|| ProtoError::Malformed {
            peer: self.peer.clone(),
            why: "no MAC".into(),
        })?;
        let tag = unhex(tag).unwrap_or_default();
        let seq = self.received.to_be_bytes();
        if !auth::verify(
            &self.key,
            &[self.side.other().tag(), &seq, json.as_bytes()],
            &tag,
        ) {
            return Err(ProtoError::BadMac {
                peer: self.peer.clone(),
            });
        }
        self.received += 1;
        parse(json, &self.peer, what)
    }

    /// The other side, as text.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// The socket (for `peek`, shutdown, addresses).
    pub fn socket(&self) -> &TcpStream {
        &self.w
    }

    /// Whether the other side sent something or hung up, waiting at most
    /// `wait`, without consuming anything.
    ///
    /// # Errors
    /// Socket errors other than a timeout.
    pub fn poll_peer(&mut self, wait: Duration) -> Result<PeerState, ProtoError> {
        if !self.r.buffer().is_empty() || !self.pending.is_empty() {
            return Ok(PeerState::Data);
        }
        self.w
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .map_err(|e| ProtoError::io("set timeout on", &self.peer, e, "a peek"))?;
        let mut b = [0u8; 1];
        match self.w.peek(&mut b) {
            Ok(0) => Ok(PeerState::Closed),
            Ok(_) => Ok(PeerState::Data),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(PeerState::Quiet)
            }
            Err(_) => Ok(PeerState::Closed),
        }
    }
}

/// What [`Conn::poll_peer`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerState {
    /// Nothing.
    Quiet,
    /// Bytes are waiting.
    Data,
    /// The other side hung up (or the connection broke).
    Closed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn tok(s: &str) -> Token {
        Token::new(s.as_bytes()).unwrap()
    }

    fn pair(
        agent_tok: Token,
        coord_tok: Token,
    ) -> (Result<Conn, ProtoError>, Result<(Conn, String), ProtoError>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            accept(s, &agent_tok, "n1", Duration::from_secs(5))
        });
        let c = connect(addr, &coord_tok, Duration::from_secs(5));
        (t.join().unwrap(), c)
    }

    #[test]
    fn handshake_then_macs_both_ways() {
        let (a, c) = pair(tok("0123456789abcdef-run"), tok("0123456789abcdef-run"));
        let (mut a, (mut c, name)) = (a.unwrap(), c.unwrap());
        assert_eq!(name, "n1");
        c.send(&Request::Info).unwrap();
        let r: Request = a.recv(Some(Duration::from_secs(5)), "a request").unwrap();
        assert_eq!(r, Request::Info);
        a.send(&Reply::Bye).unwrap();
        let r: Reply = c.recv(Some(Duration::from_secs(5)), "a reply").unwrap();
        assert_eq!(r, Reply::Bye);
        // A second message has the next sequence number: still verifies.
        c.send(&Request::Shutdown).unwrap();
        let r: Request = a.recv(Some(Duration::from_secs(5)), "a request").unwrap();
        assert_eq!(r, Request::Shutdown);
    }

    /// Issue 34: the agent's first line said its name and protocol to
    /// anyone who connected. Now it is 32 random bytes and nothing else.
    #[test]
    fn the_challenge_is_a_nonce_and_nothing_else() {
        let (_, line) = AgentHandshake::start("peer").unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.keys().collect::<Vec<_>>(), ["nonce"]);
        let n = obj["nonce"].as_str().unwrap();
        assert!(
            n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()),
            "{n}"
        );
        assert!(line.ends_with('\n') && line.len() == r#"{"nonce":""}"#.len() + 65);
    }

    /// The handshake has one deadline, not one per read: a coordinator (or
    /// a stranger) sending a byte every 200 ms is cut off at 600 ms.
    #[test]
    fn a_trickling_peer_is_cut_at_the_handshake_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let t = std::thread::spawn(move || {
            for _ in 0..30 {
                if c.write_all(b" ").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let start = std::time::Instant::now();
        let e = accept(
            s,
            &tok("0123456789abcdef-run"),
            "n1",
            Duration::from_millis(600),
        )
        .unwrap_err();
        assert!(matches!(e, ProtoError::Timeout { .. }), "{e}");
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
        t.join().unwrap();
    }

    #[test]
    fn peer_text_in_an_error_is_escaped() {
        let e = parse::<Auth>(r#"{"x\n\u001b[2Kforged":1}"#, "10.0.0.1:5", "a proof")
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n') && !e.contains('\u{1b}'), "{e}");
        assert!(e.contains("x\\n\\u{1b}[2Kforged"), "{e}");
    }

    #[test]
    fn wrong_token_is_refused_on_both_sides() {
        let (a, c) = pair(tok("0123456789abcdef-run"), tok("0123456789abcdef-bad"));
        let ea = a.unwrap_err();
        assert!(matches!(ea, ProtoError::AuthFailed { .. }), "{ea}");
        let ec = c.unwrap_err();
        assert!(ec.to_string().contains("refused us"), "{ec}");
    }

    #[test]
    fn injected_line_fails_its_mac() {
        let (a, c) = pair(tok("0123456789abcdef-run"), tok("0123456789abcdef-run"));
        let (mut a, (c, _)) = (a.unwrap(), c.unwrap());
        // Someone writes into the stream a message with a made-up MAC.
        let mut w = c.socket().try_clone().unwrap();
        let json = to_json(&Request::Shutdown);
        writeln!(w, "{} {json}", hex(&[0u8; 32])).unwrap();
        let e = a
            .recv::<Request>(Some(Duration::from_secs(5)), "a request")
            .unwrap_err();
        assert!(matches!(e, ProtoError::BadMac { .. }), "{e}");
    }

    #[test]
    fn counter_reports_travel_bounded() {
        let served = Reply::Served {
            id: 3,
            error: None,
            counters: Deltas::largest([("rx_prio3_pause", 12), ("out_of_sequence", 4)]),
        };
        let line = to_json(&served);
        assert!(
            line.contains(r#""counters":{"out_of_sequence":4,"rx_prio3_pause":12}"#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Reply>(&line).unwrap(), served);
        // An agent that reports nothing sends no field; an older one's
        // reply reads.
        let quiet = to_json(&Reply::Served {
            id: 3,
            error: None,
            counters: Deltas::default(),
        });
        assert_eq!(quiet, r#"{"reply":"served","id":3,"error":null}"#);
        assert!(serde_json::from_str::<Reply>(r#"{"reply":"measured","id":1,"result":{"bw":[],"lat":[],"counters":null,"seconds":1.0}}"#).is_ok());
        // A report over its bounds or not numeric fails the whole message.
        let many: std::collections::BTreeMap<String, u64> =
            (0..40).map(|i| (format!("c{i}"), 1)).collect();
        let bad = format!(
            r#"{{"reply":"served","id":3,"error":null,"counters":{}}}"#,
            serde_json::to_string(&many).unwrap()
        );
        assert!(serde_json::from_str::<Reply>(&bad).is_err());
        let text = r#"{"reply":"served","id":3,"error":null,"counters":{"a":"1"}}"#;
        assert!(serde_json::from_str::<Reply>(text).is_err());
    }

    #[test]
    fn requests_round_trip_and_unknown_fields_are_refused() {
        let spec = TestSpec {
            test: "write-bw".into(),
            sizes: vec![4096, 65536],
            seconds: Some(0.5),
            iters: 0,
            tx_depth: 16,
            mtu: 4096,
            inline: 0,
        };
        let r = Request::Run {
            id: 7,
            spec: spec.clone(),
            peer: "10.0.0.2".parse().unwrap(),
            server: "10.0.0.2:4000".parse().unwrap(),
            ticket: "ab".into(),
        };
        let back: Request = serde_json::from_str(&to_json(&r)).unwrap();
        assert_eq!(back, r);
        let mut extra = serde_json::to_value(&r).unwrap();
        extra["spec"]["evil"] = 1.into();
        assert!(serde_json::from_value::<Request>(extra).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"op":"rm -rf"}"#).is_err());
    }
}
