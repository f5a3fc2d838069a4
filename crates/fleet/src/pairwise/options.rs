//! The coordinator's command-line options, validated into a
//! [`PairwiseConfig`]; the agents' addresses resolved; a saved run read
//! back; a progress step said in words; a whole `fleet pairwise` invocation
//! ([`Request`]) measured ([`measure`]): the agents named, or started as one
//! Slurm job step with a fresh token, coordinated from here.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::auth::{Token, TokenError};
use super::coordinator::{self, PairwiseConfig, Step};
use super::report::{Mode, PairwiseReport, Phase, SCHEMA};
use super::slurm::{AgentStep, SlurmConfig};

/// What the coordinator measures and how it judges, as the command line
/// gives it.
#[derive(Clone, Debug)]
pub struct Options {
    /// A ring instead of every pair.
    pub quick: bool,
    /// A known-good node, the first partner of every suspect's re-test.
    pub reference: Option<String>,
    /// RC WRITE message sizes, bytes.
    pub sizes: Vec<usize>,
    /// Seconds per bandwidth size and direction.
    pub seconds: f64,
    /// Seconds of latency ping-pongs per direction (0: none).
    pub lat_seconds: f64,
    /// Send queue depth of the bandwidth tests.
    pub tx_depth: u32,
    /// Path MTU.
    pub mtu: u32,
    /// Report the screening's suspects without re-measuring them.
    pub no_confirm: bool,
    /// Suspect pairs re-measured at once.
    pub confirm_parallel: usize,
    /// The port rate in Gb/s, when the agents do not know it.
    pub port_rate: Option<f64>,
    /// A node or cell below this fraction of its reference level is low.
    pub relative: f64,
    /// Tell the agents to exit at the end (agents the run started).
    pub shutdown: bool,
}

impl Options {
    /// Checks each option's range.
    ///
    /// # Errors
    /// The first option out of range, named as its flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.sizes.is_empty() || self.sizes.iter().any(|&s| s == 0 || s > (8 << 20)) {
            return Err("--sizes: 1 to 8388608 bytes each".into());
        }
        if !(self.seconds > 0.0 && self.seconds <= 30.0) {
            return Err("--seconds: more than 0, at most 30".into());
        }
        if ![256, 512, 1024, 2048, 4096].contains(&self.mtu) {
            return Err(format!(
                "--mtu {}: one of 256, 512, 1024, 2048, 4096",
                self.mtu
            ));
        }
        if !(self.relative > 0.0 && self.relative < 1.0) {
            return Err("--relative: between 0 and 1".into());
        }
        if !(self.lat_seconds >= 0.0 && self.lat_seconds <= 30.0) {
            return Err("--lat-seconds: 0 to 30".into());
        }
        if self.confirm_parallel == 0 {
            return Err("--confirm-parallel: at least 1".into());
        }
        if self.port_rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            return Err("--port-rate: Gb/s, more than 0".into());
        }
        Ok(())
    }

    /// The run's configuration over `agents` with `token` (re-measuring
    /// takes twice the screening's time per size, at least 0.3 s).
    pub fn config(&self, agents: Vec<SocketAddr>, token: Token) -> PairwiseConfig {
        let mut cfg = PairwiseConfig::new(agents, token);
        cfg.mode = if self.quick { Mode::Quick } else { Mode::Full };
        cfg.reference = self.reference.clone();
        cfg.bw_sizes = self.sizes.clone();
        cfg.bw_seconds = self.seconds;
        cfg.lat_seconds = self.lat_seconds;
        cfg.lat_size = if self.lat_seconds == 0.0 { 0 } else { 8 };
        cfg.mtu = self.mtu;
        cfg.tx_depth = self.tx_depth;
        cfg.confirm = !self.no_confirm;
        cfg.confirm_parallel = self.confirm_parallel;
        cfg.confirm_seconds = (2.0 * self.seconds).max(0.3);
        cfg.thresholds.relative = self.relative;
        cfg.thresholds.port_rate_mbs = self.port_rate.map(|g| g * 1e9 / 8.0 / 1_048_576.0);
        cfg.shutdown = self.shutdown;
        cfg
    }
}

/// `--slurm`'s own flags: how the agents are started as one job step.
#[derive(Clone, Debug, Default)]
pub struct Launch {
    /// `-N`: how many nodes (default: the allocation's).
    pub nodes: Option<u32>,
    /// `-p`: the partition.
    pub partition: Option<String>,
    /// `-w`: the nodes, in Slurm's hostlist syntax.
    pub nodelist: Option<String>,
    /// `--agent-port` (default 18516).
    pub agent_port: Option<u16>,
    /// `-d`: the RDMA device the agents test with (default: the soft NIC).
    pub device: Option<String>,
    /// `--srun` (default: srun).
    pub srun: Option<PathBuf>,
    /// `--agent-program`: the rdmakit binary on the nodes (default: the
    /// caller's own path).
    pub agent_program: Option<PathBuf>,
}

impl Launch {
    /// The first flag given, as the user typed it.
    fn given(&self) -> Option<&'static str> {
        let flags = [
            ("-N/--nodes", self.nodes.is_some()),
            ("-p/--partition", self.partition.is_some()),
            ("-w/--nodelist", self.nodelist.is_some()),
            ("--agent-port", self.agent_port.is_some()),
            ("-d/--ib-dev", self.device.is_some()),
            ("--srun", self.srun.is_some()),
            ("--agent-program", self.agent_program.is_some()),
        ];
        flags.iter().find(|(_, set)| *set).map(|(flag, _)| *flag)
    }

    /// The job step these flags describe, running `program` on the nodes.
    fn config(&self, program: PathBuf) -> SlurmConfig {
        let mut sc = SlurmConfig::new(program);
        sc.srun = self.srun.clone().unwrap_or_else(|| PathBuf::from("srun"));
        sc.nodes = self.nodes;
        sc.partition = self.partition.clone();
        sc.nodelist = self.nodelist.clone();
        sc.port = self.agent_port.unwrap_or(18516);
        if let Some(d) = &self.device {
            sc.agent_args = vec!["-d".into(), d.clone()];
        }
        sc
    }
}

/// `rdmakit fleet pairwise` as the command line gives it.
#[derive(Clone, Debug)]
pub struct Request {
    /// `--agents HOST:PORT,...`, each started with `rdmakit fleet agent`.
    pub agents: Vec<String>,
    /// `--from RUN.json`: measure nothing, show a saved run.
    pub from: Option<PathBuf>,
    /// `--slurm`: start the agents as one job step, stop them when done.
    pub slurm: bool,
    /// The job step's flags (given only with `--slurm`).
    pub launch: Launch,
    /// What to measure and how to judge it.
    pub options: Options,
}

/// Why [`measure`] has no run to show.
#[derive(Debug)]
pub enum Failure {
    /// The run could not be made, said as the command's own error line
    /// (exit 2): a flag out of place or out of range, no token, agents that do
    /// not resolve, a job step that did not start, nothing to measure.
    Refused(String),
    /// This process could not find its own path or make a token.
    Error(Box<dyn std::error::Error + Send + Sync>),
}

/// What [`measure`] gives: the run, or why there is none, and the agents'
/// job step when the run started one (still running: [`Measured::stop`]).
pub struct Measured {
    /// The run.
    pub report: Result<PairwiseReport, Failure>,
    step: Option<AgentStep>,
}

impl Measured {
    /// Stops the agents' job step, when the run started one, giving it 10 s
    /// to end; returns its exit status.
    pub fn stop(&mut self) -> Option<String> {
        let mut s = self.step.take()?;
        Some(s.stop(Duration::from_secs(10)))
    }
}

/// The run `req` asks for (or the saved one `--from` names): the agents
/// resolved, or with `--slurm` started as one job step (running `program`,
/// the caller's own path, unless `--agent-program` names another) with
/// `token` — the run's token as the caller's edge reads it, asked for only
/// once the flags are known to be right; with `--slurm` a fresh one is made
/// when neither a file nor the environment gives one — then coordinated,
/// each step shown on `meter` ([`Step::text`]).
pub fn measure(
    req: &Request,
    token: &dyn Fn() -> Result<Token, TokenError>,
    program: &dyn Fn() -> std::io::Result<PathBuf>,
    meter: &dyn rdmakit_vocab::progress::Meter,
) -> Measured {
    let on = |s: &Step| match s.text() {
        StepText::Message(m) => meter.message(m),
        StepText::Prefix(p) => meter.prefix(p),
    };
    let mut step = None;
    let report = measure_into(req, token, program, &on, &mut step);
    Measured { report, step }
}

fn measure_into(
    req: &Request,
    token: &dyn Fn() -> Result<Token, TokenError>,
    program: &dyn Fn() -> std::io::Result<PathBuf>,
    on: &(dyn Fn(&Step) + Sync),
    step: &mut Option<AgentStep>,
) -> Result<PairwiseReport, Failure> {
    let refused = |e: String| Failure::Refused(e);
    // clap drops `requires = "slurm"` once --agents (which conflicts with
    // --slurm) is given: the Slurm-only flags are checked here.
    if let Some(flag) = req.launch.given().filter(|_| !req.slurm) {
        return Err(refused(format!(
            "{flag} applies with --slurm (agents started as a job step); agents named with \
             --agents were started by you: leave {flag} out"
        )));
    }
    if let Some(f) = &req.from {
        return saved(f).map_err(|e| refused(format!("--from {}: {e}", f.display())));
    }
    req.options.validate().map_err(refused)?;
    let token = match token() {
        Ok(t) => t,
        Err(TokenError::Missing) if req.slurm => {
            Token::generate().map_err(|e| Failure::Error(e.into()))?
        }
        Err(e) => return Err(refused(e.to_string())),
    };
    let agents: Vec<SocketAddr> = if req.slurm {
        let program = match &req.launch.agent_program {
            Some(p) => p.clone(),
            None => program().map_err(|e| Failure::Error(e.into()))?,
        };
        match AgentStep::launch(&req.launch.config(program), &token) {
            Ok(s) => step.insert(s).agents.iter().map(|r| r.addr).collect(),
            Err(e) => return Err(refused(format!("--slurm: {e}"))),
        }
    } else {
        resolve(&req.agents).map_err(|e| refused(format!("--agents: {e}")))?
    };
    let cfg = req.options.config(agents, token);
    coordinator::run(&cfg, on).map_err(|e| refused(e.to_string()))
}

/// `HOST:PORT` each → its first IPv4 address; blank entries are skipped.
///
/// # Errors
/// The first entry that does not resolve, or resolves to no IPv4 address.
pub fn resolve(list: &[String]) -> Result<Vec<SocketAddr>, String> {
    list.iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let s = s.trim();
            s.to_socket_addrs()
                .map_err(|e| format!("{s}: {e}"))?
                .find(SocketAddr::is_ipv4)
                .ok_or_else(|| format!("{s}: no IPv4 address"))
        })
        .collect()
}

/// A run saved with `--json`.
///
/// # Errors
/// The file unreadable, not a pairwise run, or of another schema.
pub fn saved(path: &Path) -> Result<PairwiseReport, String> {
    // A file the user named: regular or a pipe, at most one JSON document's cap.
    let bytes = rdmakit_host::bounded::read_named(path, rdmakit_host::bounded::Cap::DOCUMENT)
        .map_err(|e| e.reason())?;
    let r: PairwiseReport =
        serde_json::from_slice(&bytes).map_err(|e| format!("not a pairwise run: {e}"))?;
    if r.schema != SCHEMA {
        return Err(format!("schema {:?}, not {SCHEMA}", r.schema));
    }
    Ok(r)
}

/// What a progress display shows for a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepText {
    /// The line's message.
    Message(String),
    /// The line's prefix (the pairs counter).
    Prefix(String),
}

impl Step {
    /// The step in words, for a progress line.
    pub fn text(&self) -> StepText {
        match self {
            Step::Connected { nodes, unreachable } => StepText::Message(format!(
                "{} agents connected{}",
                nodes.len(),
                if *unreachable > 0 {
                    format!(", {unreachable} unreachable")
                } else {
                    String::new()
                }
            )),
            Step::Round { phase, index, of } => StepText::Message(format!(
                "{} round {}/{of}",
                match phase {
                    Phase::Screen => "screening",
                    _ => "re-measuring suspects:",
                },
                index + 1
            )),
            Step::PairDone { done, of } => StepText::Prefix(format!("{done}/{of} pairs")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            quick: false,
            reference: None,
            sizes: vec![4096, 65536, 262_144],
            seconds: 0.3,
            lat_seconds: 0.2,
            tx_depth: 16,
            mtu: 4096,
            no_confirm: false,
            confirm_parallel: 1,
            port_rate: None,
            relative: 0.6,
            shutdown: false,
        }
    }

    #[test]
    fn options_out_of_range_name_their_flag() {
        assert_eq!(opts().validate(), Ok(()));
        let mut o = opts();
        o.sizes = vec![0];
        assert_eq!(
            o.validate().unwrap_err(),
            "--sizes: 1 to 8388608 bytes each"
        );
        let mut o = opts();
        o.mtu = 1500;
        assert_eq!(
            o.validate().unwrap_err(),
            "--mtu 1500: one of 256, 512, 1024, 2048, 4096"
        );
        let mut o = opts();
        o.relative = 1.0;
        assert_eq!(o.validate().unwrap_err(), "--relative: between 0 and 1");
        let mut o = opts();
        o.port_rate = Some(f64::INFINITY);
        assert_eq!(o.validate().unwrap_err(), "--port-rate: Gb/s, more than 0");
        let mut o = opts();
        o.confirm_parallel = 0;
        assert_eq!(o.validate().unwrap_err(), "--confirm-parallel: at least 1");
    }

    #[test]
    fn config_follows_the_options() {
        let mut o = opts();
        (o.quick, o.lat_seconds, o.seconds, o.port_rate) = (true, 0.0, 0.1, Some(100.0));
        let c = o.config(vec![], Token::generate().unwrap());
        assert_eq!(c.mode, Mode::Quick);
        assert_eq!((c.lat_size, c.confirm_seconds), (0, 0.3));
        let mbs = c.thresholds.port_rate_mbs.unwrap();
        assert!((mbs - 100e9 / 8.0 / 1_048_576.0).abs() < 1e-6, "{mbs}");
    }

    #[test]
    fn addresses_resolve_and_steps_read() {
        let v = resolve(&["127.0.0.1:9".into(), " ".into()]).unwrap();
        assert_eq!(v, vec!["127.0.0.1:9".parse().unwrap()]);
        assert!(resolve(&["nope".into()]).unwrap_err().starts_with("nope: "));
        let s = Step::Connected {
            nodes: vec!["a".into(), "b".into()],
            unreachable: 1,
        };
        assert_eq!(
            s.text(),
            StepText::Message("2 agents connected, 1 unreachable".into())
        );
        let s = Step::PairDone { done: 3, of: 6 };
        assert_eq!(s.text(), StepText::Prefix("3/6 pairs".into()));
    }
}
