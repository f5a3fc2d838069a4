//! The coordinator: connects to every agent, runs the screening rounds
//! (every pair of a round at once), judges the matrix, re-measures the
//! suspects against healthy partners, and returns the report as data.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::auth::Token;
use super::confirm;
use super::deltas::Deltas;
use super::link;
use super::localize::{self, Suspect};
use super::logtext::escape;
use super::protocol::{self, Conn, Measurement, ProtoError, Reply, Request, TestSpec};
use super::report::{
    Cell, Confirmation, Fault, MatrixThresholds, Mode, Node, Outcome, PairwiseReport, Phase,
    RoundTiming, Settings, Unreachable, SCHEMA,
};
use super::schedule;

/// What to run and how to judge it.
#[derive(Clone, Debug)]
pub struct PairwiseConfig {
    /// The agents' control addresses.
    pub agents: Vec<SocketAddr>,
    /// The run's shared secret.
    pub token: Token,
    /// Full matrix or quick ring.
    pub mode: Mode,
    /// A known-good node (by name or address): the first partner of every
    /// suspect's re-measurement.
    pub reference: Option<String>,
    /// RC WRITE sizes; the best average of them is judged.
    pub bw_sizes: Vec<usize>,
    /// Seconds per bandwidth size.
    pub bw_seconds: f64,
    /// RC SEND latency size (0: no latency test).
    pub lat_size: usize,
    /// Seconds of latency ping-pongs per direction.
    pub lat_seconds: f64,
    /// Path MTU.
    pub mtu: u32,
    /// Send queue depth of the bandwidth tests.
    pub tx_depth: u32,
    /// Re-measure suspects before reporting them.
    pub confirm: bool,
    /// At most this many confirmation pairs at once (1: each alone, which
    /// a single host running every agent needs; more on a real cluster).
    pub confirm_parallel: usize,
    /// Seconds per direction of a confirmation measurement.
    pub confirm_seconds: f64,
    /// Localization thresholds (the port rate: given, else the agents').
    pub thresholds: MatrixThresholds,
    /// Connect and handshake timeout per agent.
    pub connect_timeout: Duration,
    /// Ask every agent to exit when done (agents of one job step).
    pub shutdown: bool,
}

impl PairwiseConfig {
    /// The defaults (`rdmakit fleet pairwise` without options).
    pub fn new(agents: Vec<SocketAddr>, token: Token) -> PairwiseConfig {
        PairwiseConfig {
            agents,
            token,
            mode: Mode::Full,
            reference: None,
            bw_sizes: vec![4096, 65536, 262_144],
            bw_seconds: 0.3,
            lat_size: 8,
            lat_seconds: 0.2,
            mtu: 4096,
            tx_depth: 16,
            confirm: true,
            confirm_parallel: 1,
            confirm_seconds: 0.6,
            thresholds: MatrixThresholds::default(),
            connect_timeout: Duration::from_secs(5),
            shutdown: false,
        }
    }
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    /// Fewer than two agents answered.
    #[error("{reachable} agent(s) answered, a matrix needs at least 2{}", details(.unreachable))]
    TooFew {
        /// How many answered.
        reachable: usize,
        /// The others and why.
        unreachable: Vec<Unreachable>,
    },
    /// Two agents answered with the same name.
    #[error("agents {0} and {1} both call themselves {2:?}: give each its own --name")]
    DuplicateName(String, String, String),
    /// `--reference` names no agent.
    #[error("--reference {0}: no agent of that name or address")]
    UnknownReference(String),
    /// Settings that cannot work.
    #[error("{0}")]
    Settings(String),
}

fn details(u: &[Unreachable]) -> String {
    u.iter()
        .map(|x| format!("\n  {}: {}", escape(&x.agent), escape(&x.error)))
        .collect()
}

/// Progress of a run, for a progress bar.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Agents connected.
    Connected {
        /// Names.
        nodes: Vec<String>,
        /// Addresses that did not answer.
        unreachable: usize,
    },
    /// A round begins.
    Round {
        /// Screening or confirmation.
        phase: Phase,
        /// Index (from 0).
        index: usize,
        /// Rounds planned in this phase.
        of: usize,
    },
    /// A pair measurement finished.
    PairDone {
        /// Done so far in the phase.
        done: usize,
        /// Planned in the phase.
        of: usize,
    },
}

/// One agent as the coordinator holds it.
struct Agent {
    addr: SocketAddr,
    name: String,
    /// The largest path MTU its link carries, when it says.
    mtu: Option<u32>,
    conn: Option<Conn>,
}

pub(super) struct Run<'a> {
    pub(super) cfg: &'a PairwiseConfig,
    agents: Vec<Mutex<Agent>>,
    next_id: AtomicU64,
}

impl Run<'_> {
    fn names(&self) -> Vec<String> {
        self.agents.iter().map(|a| lock(a).name.clone()).collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A pair thread that panicked leaves a plain Agent behind: usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs the whole thing.
///
/// # Errors
/// [`CoordError`] when there is nothing to measure; a failed test is a
/// cell with an error, never an error of the run.
pub fn run(
    cfg: &PairwiseConfig,
    on: &(dyn Fn(&Step) + Sync),
) -> Result<PairwiseReport, CoordError> {
    check_settings(cfg)?;
    let started = Instant::now();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (agents, infos, unreachable) = connect_all(cfg);
    if agents.len() < 2 {
        return Err(CoordError::TooFew {
            reachable: agents.len(),
            unreachable,
        });
    }
    for i in 0..agents.len() {
        for j in 0..i {
            if agents[i].name == agents[j].name {
                return Err(CoordError::DuplicateName(
                    agents[j].addr.to_string(),
                    agents[i].addr.to_string(),
                    agents[i].name.clone(),
                ));
            }
        }
    }
    let reference = match &cfg.reference {
        None => None,
        Some(r) => Some(
            agents
                .iter()
                .position(|a| {
                    &a.name == r || a.addr.to_string() == *r || a.addr.ip().to_string() == *r
                })
                .ok_or_else(|| CoordError::UnknownReference(r.clone()))?,
        ),
    };
    let mut thresholds = cfg.thresholds;
    if thresholds.port_rate_mbs.is_none() {
        // The slowest port the agents report (none on the soft NIC).
        thresholds.port_rate_mbs = infos
            .iter()
            .filter_map(|i| i.port_rate_mbs)
            .min_by(|a, b| a.total_cmp(b));
    }
    let mut nodes: Vec<Node> = agents
        .iter()
        .zip(&infos)
        .map(|(a, i)| Node {
            name: a.name.clone(),
            addr: a.addr.to_string(),
            device: i.device.clone(),
            port_rate_mbs: i.port_rate_mbs,
            mtu: i.mtu,
            version: i.version.clone(),
            median_mbs: None,
            z: 0.0,
            partners: 0,
            slow_partners: 0,
            significant: false,
        })
        .collect();
    let n = agents.len();
    let run = Run {
        cfg,
        agents: agents.into_iter().map(Mutex::new).collect(),
        next_id: AtomicU64::new(1),
    };
    on(&Step::Connected {
        nodes: run.names(),
        unreachable: unreachable.len(),
    });

    // Screening.
    let rounds = match cfg.mode {
        Mode::Full => schedule::circle(n),
        Mode::Quick => schedule::ring(n),
    };
    let screen_spec = Specs::screening(cfg);
    let (mut cells, mut timings) = run_rounds(&run, &rounds, Phase::Screen, 0, &screen_spec, on);
    let idx: Vec<localize::Cell> = cells.iter().map(|c| (c.0, c.1, c.2.mbs)).collect();
    let judged = localize::judge(n, &idx, &thresholds);
    for (c, j) in cells.iter_mut().zip(&judged.cells) {
        c.2.residual = j.residual;
        c.2.z = j.z;
        c.2.low = j.low;
        c.2.significant = j.significant;
    }
    for (node, j) in nodes.iter_mut().zip(&judged.nodes) {
        node.median_mbs = j.score;
        node.z = j.z;
        node.partners = j.partners;
        node.slow_partners = j.slow_partners;
        node.significant = j.significant;
    }
    let names = run.names();
    let inconclusive = inconclusive(&cells);
    // Confirmation.
    let mut confirmations = Vec::new();
    if !judged.suspects.is_empty() && inconclusive.is_none() {
        if cfg.confirm {
            let (conf, more_cells, more_timings) =
                confirm::confirm(&run, &judged, reference, &names, &thresholds, on);
            confirmations = conf;
            cells.extend(more_cells);
            timings.extend(more_timings);
        } else {
            // Unconfirmed: only what stands out of the matrix's noise.
            confirmations = judged
                .significant
                .iter()
                .map(|s| Confirmation {
                    suspect: fault_of(*s, &names),
                    checks: Vec::new(),
                    verdict: Outcome::Unconfirmed,
                })
                .collect();
        }
    }
    // Done with the agents: close the connections (they go idle), or ask
    // them to exit.
    for a in &run.agents {
        let mut a = lock(a);
        if cfg.shutdown {
            if let Some(c) = a.conn.as_mut() {
                if c.send(&Request::Shutdown).is_ok() {
                    let _ = c.recv::<Reply>(Some(Duration::from_secs(2)), "bye");
                }
            }
        }
        a.conn = None;
    }
    // Confirmed faults, and those that could not be re-measured if they
    // stand out of the matrix's noise on their own.
    let mut significant: Vec<Fault> = judged
        .significant
        .iter()
        .map(|s| fault_of(*s, &names))
        .collect();
    significant.extend(
        judged
            .low_pairs
            .iter()
            .filter(|p| p.significant)
            .map(|p| Fault::link(&names[p.a], &names[p.b])),
    );
    let mut faults: Vec<Fault> = confirmations
        .iter()
        .filter(|c| match c.verdict {
            Outcome::Confirmed => true,
            Outcome::Dismissed => false,
            Outcome::Unconfirmed => significant.contains(&c.suspect),
        })
        .map(|c| c.suspect.clone())
        .collect();
    faults.sort();
    faults.dedup();
    if inconclusive.is_some() {
        // No level to judge against: no claim about any node or link.
        faults.clear();
    }
    let mut report = PairwiseReport {
        schema: SCHEMA.into(),
        mode: cfg.mode,
        started_unix,
        seconds: started.elapsed().as_secs_f64(),
        settings: Settings {
            bw_sizes: cfg.bw_sizes.clone(),
            bw_seconds: cfg.bw_seconds,
            lat_size: cfg.lat_size,
            lat_seconds: cfg.lat_seconds,
            mtu: cfg.mtu,
            reference: reference.map(|r| names[r].clone()),
            confirm: cfg.confirm,
            thresholds,
        },
        nodes,
        unreachable,
        cells: cells.into_iter().map(|c| c.2).collect(),
        rounds: timings,
        matrix: judged.stats,
        confirmations,
        faults,
        inconclusive,
        routes: Vec::new(),
        causes: Vec::new(),
    };
    report.causes = report.causes();
    Ok(report)
}

/// Why the screening cannot be judged, when more than half of its
/// bandwidth tests failed: the medians the thresholds are relative to are
/// then failures themselves (all zero when every test failed, which would
/// otherwise read as a clean fabric).
fn inconclusive(cells: &[Indexed]) -> Option<String> {
    let failed: Vec<&Cell> = cells
        .iter()
        .map(|c| &c.2)
        .filter(|c| c.error.is_some() && c.mbs <= 0.0)
        .collect();
    if cells.is_empty() || 2 * failed.len() <= cells.len() {
        return None;
    }
    let first = failed
        .first()
        .and_then(|c| c.error.as_deref())
        .unwrap_or("");
    Some(format!(
        "{} of {} bandwidth tests failed, too many to judge the fabric by; first, {} -> {}: {first}",
        failed.len(),
        cells.len(),
        failed.first().map_or("", |c| c.from.as_str()),
        failed.first().map_or("", |c| c.to.as_str()),
    ))
}

fn check_settings(cfg: &PairwiseConfig) -> Result<(), CoordError> {
    let bad = |s: String| Err(CoordError::Settings(s));
    if cfg.bw_sizes.is_empty() {
        return bad("no bandwidth sizes".into());
    }
    if !(cfg.bw_seconds > 0.0 && cfg.bw_seconds.is_finite()) {
        return bad(format!("{} seconds per size", cfg.bw_seconds));
    }
    if !(cfg.confirm_seconds > 0.0 && cfg.confirm_seconds.is_finite()) {
        return bad(format!("{} seconds per confirmation", cfg.confirm_seconds));
    }
    if cfg.lat_size > 0 && !(cfg.lat_seconds > 0.0 && cfg.lat_seconds.is_finite()) {
        return bad(format!("{} seconds of latency test", cfg.lat_seconds));
    }
    if cfg.confirm_parallel == 0 {
        return bad("--confirm-parallel must be at least 1".into());
    }
    Ok(())
}

/// Connects to every agent at once; returns the reachable ones with their
/// info, and the others with why.
fn connect_all(cfg: &PairwiseConfig) -> (Vec<Agent>, Vec<protocol::AgentInfo>, Vec<Unreachable>) {
    let results: Vec<Result<(Agent, protocol::AgentInfo), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = cfg
            .agents
            .iter()
            .map(|&addr| s.spawn(move || hello(addr, cfg)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("connect thread panicked".into()))
            })
            .collect()
    });
    let mut agents = Vec::new();
    let mut infos = Vec::new();
    let mut unreachable = Vec::new();
    for (r, addr) in results.into_iter().zip(&cfg.agents) {
        match r {
            Ok((a, i)) => {
                agents.push(a);
                infos.push(i);
            }
            Err(error) => unreachable.push(Unreachable {
                agent: addr.to_string(),
                error,
            }),
        }
    }
    (agents, infos, unreachable)
}

fn hello(addr: SocketAddr, cfg: &PairwiseConfig) -> Result<(Agent, protocol::AgentInfo), String> {
    let (mut conn, name) =
        protocol::connect(addr, &cfg.token, cfg.connect_timeout).map_err(|e| e.to_string())?;
    conn.send(&Request::Info).map_err(|e| e.to_string())?;
    match conn.recv::<Reply>(Some(cfg.connect_timeout), "the agent's info") {
        Ok(Reply::Info { info }) => Ok((
            Agent {
                addr,
                name,
                mtu: info.mtu,
                conn: Some(conn),
            },
            info,
        )),
        Ok(other) => Err(format!("answered {other:?} to info")),
        Err(e) => Err(e.to_string()),
    }
}

/// The specs a pair measurement runs.
pub(super) struct Specs {
    bw: TestSpec,
    lat: Option<TestSpec>,
}

impl Specs {
    fn screening(cfg: &PairwiseConfig) -> Specs {
        Specs {
            bw: TestSpec {
                test: "write-bw".into(),
                sizes: cfg.bw_sizes.clone(),
                seconds: Some(cfg.bw_seconds),
                iters: 0,
                tx_depth: cfg.tx_depth,
                mtu: cfg.mtu,
                inline: 0,
            },
            lat: (cfg.lat_size > 0).then(|| TestSpec {
                test: "send-lat".into(),
                sizes: vec![cfg.lat_size],
                seconds: Some(cfg.lat_seconds),
                iters: 0,
                tx_depth: 1,
                mtu: cfg.mtu,
                inline: 220,
            }),
        }
    }

    /// Confirmation: the largest size only, longer, no latency.
    pub(super) fn confirmation(cfg: &PairwiseConfig) -> Specs {
        let largest = cfg.bw_sizes.iter().copied().max().unwrap_or(65536);
        Specs {
            bw: TestSpec {
                test: "write-bw".into(),
                sizes: vec![largest],
                seconds: Some(cfg.confirm_seconds),
                iters: 0,
                tx_depth: cfg.tx_depth,
                mtu: cfg.mtu,
                inline: 0,
            },
            lat: None,
        }
    }
}

/// A measured directed cell, with the indices of its nodes.
pub(super) type Indexed = (usize, usize, Cell);

/// Runs `rounds`, all pairs of a round at once.
pub(super) fn run_rounds(
    run: &Run<'_>,
    rounds: &[schedule::Round],
    phase: Phase,
    first: usize,
    specs: &Specs,
    on: &(dyn Fn(&Step) + Sync),
) -> (Vec<Indexed>, Vec<RoundTiming>) {
    let names = run.names();
    let total: usize = rounds.iter().map(Vec::len).sum();
    let done = AtomicUsize::new(0);
    let mut cells = Vec::new();
    let mut timings = Vec::new();
    for (k, round) in rounds.iter().enumerate() {
        let index = first + k;
        on(&Step::Round {
            phase,
            index,
            of: first + rounds.len(),
        });
        let t = Instant::now();
        let got: Vec<Vec<Indexed>> = std::thread::scope(|s| {
            let hs: Vec<_> = round
                .iter()
                .map(|&(a, b)| {
                    let done = &done;
                    s.spawn(move || {
                        let r = measure_pair(run, a, b, phase, index, specs);
                        let d = done.fetch_add(1, Ordering::SeqCst) + 1;
                        on(&Step::PairDone { done: d, of: total });
                        r
                    })
                })
                .collect();
            hs.into_iter()
                .zip(round)
                .map(|(h, &(a, b))| {
                    h.join().unwrap_or_else(|_| {
                        let err = "the pair's thread panicked".to_string();
                        vec![
                            (a, b, failed_cell(&names, a, b, phase, index, err.clone())),
                            (b, a, failed_cell(&names, b, a, phase, index, err)),
                        ]
                    })
                })
                .collect()
        });
        cells.extend(got.into_iter().flatten());
        timings.push(RoundTiming {
            phase,
            index,
            pairs: round
                .iter()
                .map(|&(a, b)| [names[a].clone(), names[b].clone()])
                .collect(),
            seconds: t.elapsed().as_secs_f64(),
        });
    }
    (cells, timings)
}

fn failed_cell(
    names: &[String],
    from: usize,
    to: usize,
    phase: Phase,
    round: usize,
    error: String,
) -> Cell {
    Cell {
        from: names[from].clone(),
        to: names[to].clone(),
        phase,
        round,
        bw: Vec::new(),
        lat: None,
        counters: None,
        from_counters: Deltas::default(),
        to_counters: Deltas::default(),
        error: Some(error),
        mbs: 0.0,
        residual: None,
        z: None,
        low: false,
        significant: false,
    }
}

/// Both directions of a pair: bandwidth a→b and b→a, then latency with
/// each side as the requester.
fn measure_pair(
    run: &Run<'_>,
    a: usize,
    b: usize,
    phase: Phase,
    round: usize,
    specs: &Specs,
) -> Vec<Indexed> {
    // Disjoint pairs per round: these two locks are this thread's alone
    // (taken in index order all the same).
    let (lo, hi) = (a.min(b), a.max(b));
    let mut g_lo = lock(&run.agents[lo]);
    let mut g_hi = lock(&run.agents[hi]);
    let (ga, gb) = if a == lo {
        (&mut *g_lo, &mut *g_hi)
    } else {
        (&mut *g_hi, &mut *g_lo)
    };
    let mut out = Vec::with_capacity(2);
    for forward in [true, false] {
        let (from, to, fa, ta) = if forward {
            (a, b, &mut *ga, &mut *gb)
        } else {
            (b, a, &mut *gb, &mut *ga)
        };
        // The requester (client) writes into the responder's memory.
        let bw = test(run, ta, fa, &specs.bw);
        let lat = specs.lat.as_ref().map(|l| test(run, ta, fa, l));
        out.push((from, to, cell_of(fa, ta, phase, round, bw, lat)));
    }
    out
}

fn cell_of(
    from: &Agent,
    to: &Agent,
    phase: Phase,
    round: usize,
    bw: Result<(Measurement, Deltas), String>,
    lat: Option<Result<(Measurement, Deltas), String>>,
) -> Cell {
    let (mut from_counters, mut to_counters) = (Deltas::default(), Deltas::default());
    let (bw_pts, counters, mut error) = match bw {
        Ok((m, served)) => {
            from_counters = m.deltas;
            to_counters = served;
            (m.bw, m.counters, None)
        }
        Err(e) => (Vec::new(), None, Some(format!("write-bw: {e}"))),
    };
    let lat_pt = match lat {
        Some(Ok((m, served))) => {
            from_counters = from_counters.sum(&m.deltas);
            to_counters = to_counters.sum(&served);
            m.lat.first().copied()
        }
        Some(Err(e)) => {
            let msg = format!("send-lat: {e}");
            error = Some(match error {
                Some(b) => format!("{b}; {msg}"),
                None => msg,
            });
            None
        }
        None => None,
    };
    let mbs = bw_pts.iter().map(|p| p.avg_mbs).fold(0.0, f64::max);
    Cell {
        from: from.name.clone(),
        to: to.name.clone(),
        phase,
        round,
        bw: bw_pts,
        lat: lat_pt,
        counters,
        from_counters,
        to_counters,
        error,
        mbs,
        residual: None,
        z: None,
        low: false,
        significant: false,
    }
}

/// Extra time a test may take past its plan before the coordinator gives
/// up on the agents (they cancel on their own before that).
const GRACE: Duration = Duration::from_secs(20);

/// One test: `srv` serves, `cli` runs the client (the requester). A broken
/// control connection is dropped (its agent cancels whatever it ran) and
/// made again for the next test.
fn test(
    run: &Run<'_>,
    srv: &mut Agent,
    cli: &mut Agent,
    spec: &TestSpec,
) -> Result<(Measurement, Deltas), String> {
    // The path MTU both links carry (perftest lowers -m to the active MTU).
    let mtu = link::effective(spec.mtu, srv.mtu, cli.mtu);
    let lowered;
    let spec = if mtu == spec.mtu {
        spec
    } else {
        lowered = TestSpec {
            mtu,
            ..spec.clone()
        };
        &lowered
    };
    let id = run.next_id.fetch_add(1, Ordering::SeqCst);
    let planned =
        Duration::from_secs_f64(spec.seconds.map_or(10.0, |s| s * spec.sizes.len() as f64));
    let r = (|| {
        let sc = ensure(run, srv)?;
        sc.send(&Request::Serve {
            id,
            spec: spec.clone(),
            peer: cli.addr.ip(),
        })
        .map_err(Failure::Srv)?;
        let (port, ticket) = match sc
            .recv::<Reply>(Some(Duration::from_secs(10)), "Listening")
            .map_err(Failure::Srv)?
        {
            Reply::Listening {
                id: i,
                port,
                ticket,
            } if i == id => (port, ticket),
            Reply::Refused { kind, message } => {
                return Err(Failure::Said(format!(
                    "{} refused: {kind:?}: {message}",
                    srv.name
                )))
            }
            other => return Err(Failure::Srv(unexpected(&srv.name, &other))),
        };
        let server = SocketAddr::new(srv.addr.ip(), port);
        let cc = match ensure(run, cli) {
            Ok(c) => c,
            Err(e) => {
                // The server agent waits for a client that will not come.
                srv.conn = None;
                return Err(e);
            }
        };
        cc.send(&Request::Run {
            id,
            spec: spec.clone(),
            peer: srv.addr.ip(),
            server,
            ticket,
        })
        .map_err(Failure::Cli)?;
        let m = match cc
            .recv::<Reply>(Some(planned + GRACE), "the measurement")
            .map_err(Failure::Cli)?
        {
            Reply::Measured { id: i, result } if i == id => Ok(result),
            Reply::RunFailed { id: i, error } if i == id => Err(error),
            Reply::Refused { kind, message } => Err(format!("{kind:?}: {message}")),
            other => return Err(Failure::Cli(unexpected(&cli.name, &other))),
        };
        let sc = srv.conn.as_mut().ok_or(Failure::Said("lost".into()))?;
        let served = match sc
            .recv::<Reply>(Some(GRACE), "the server's end")
            .map_err(Failure::Srv)?
        {
            Reply::Served {
                id: i,
                error,
                counters,
            } if i == id => (error, counters),
            other => return Err(Failure::Srv(unexpected(&srv.name, &other))),
        };
        match (m, served) {
            (Ok(m), (_, counters)) => Ok((m, counters)),
            (Err(e), (Some(s), _)) => Err(Failure::Said(format!("{e} (server {}: {s})", srv.name))),
            (Err(e), (None, _)) => Err(Failure::Said(e)),
        }
    })();
    match r {
        Ok(m) => Ok(m),
        Err(Failure::Said(e)) => Err(e),
        Err(Failure::Srv(e)) => {
            srv.conn = None;
            cli.conn = None;
            Err(format!("{}: {e}", srv.name))
        }
        Err(Failure::Cli(e)) => {
            srv.conn = None;
            cli.conn = None;
            Err(format!("{}: {e}", cli.name))
        }
    }
}

/// How a test went wrong: an answer (the connections are fine), or a
/// broken connection to the server or client agent.
enum Failure {
    Said(String),
    Srv(ProtoError),
    Cli(ProtoError),
}

fn unexpected(name: &str, r: &Reply) -> ProtoError {
    ProtoError::Malformed {
        peer: name.into(),
        why: format!("unexpected answer {r:?}"),
    }
}

/// The agent's connection, made again when a failure dropped it.
fn ensure<'a>(run: &Run<'_>, a: &'a mut Agent) -> Result<&'a mut Conn, Failure> {
    if a.conn.is_none() {
        let (c, name) = protocol::connect(a.addr, &run.cfg.token, run.cfg.connect_timeout)
            .map_err(|e| Failure::Said(format!("reconnect {}: {e}", a.addr)))?;
        if name != a.name {
            return Err(Failure::Said(format!(
                "{} now answers as {name:?}, not {:?}",
                a.addr, a.name
            )));
        }
        a.conn = Some(c);
    }
    a.conn
        .as_mut()
        .ok_or_else(|| Failure::Said("no connection".into()))
}

pub(super) fn fault_of(s: Suspect, names: &[String]) -> Fault {
    match s {
        Suspect::Node(k) => Fault::node(&names[k]),
        Suspect::Link(a, b) => Fault::link(&names[a], &names[b]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(failed: usize, ok: usize) -> Vec<Indexed> {
        let names: Vec<String> = (1..=4).map(|i| format!("n{i}")).collect();
        (0..failed + ok)
            .map(|k| {
                let (a, b) = (k % 4, (k + 1) % 4);
                let mut c = failed_cell(&names, a, b, Phase::Screen, 0, "RETRY_EXC_ERR".into());
                if k >= failed {
                    c.error = None;
                    c.mbs = 800.0;
                }
                (a, b, c)
            })
            .collect()
    }

    #[test]
    fn a_matrix_of_failures_is_no_verdict_not_a_clean_one() {
        let why = inconclusive(&cells(12, 0)).expect("all failed");
        assert!(why.starts_with("12 of 12 bandwidth tests failed"), "{why}");
        assert!(why.contains("n1 -> n2: RETRY_EXC_ERR"), "{why}");
        assert!(inconclusive(&cells(7, 5)).is_some());
    }

    #[test]
    fn a_few_failed_pairs_are_judged_as_slow_cells() {
        // Half or fewer: zero figures that localization judges (a dead
        // link or node), with a healthy level to compare against.
        assert_eq!(inconclusive(&cells(6, 6)), None);
        assert_eq!(inconclusive(&cells(2, 10)), None);
        assert_eq!(inconclusive(&cells(0, 12)), None);
        assert_eq!(inconclusive(&[]), None);
    }
}
