//! Starting an agent as `rdmakit fleet agent` asks: its flags checked, the
//! device it tests with checked at once, the port bound, root given up, the
//! READY line `fleet pairwise --slurm` reads through srun made.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{check_device, Agent, AgentConfig, Event, Logger};
use crate::pairwise::auth::{Token, TokenError};
use crate::pairwise::privilege;
use crate::pairwise::slurm::Ready;

/// `rdmakit fleet agent` as the command line gives it.
#[derive(Clone, Debug)]
pub struct Request {
    /// `--listen`: the control address; a specific IPv4 address is also the
    /// soft NIC's, 0.0.0.0 picks per test the source of the route to the peer.
    pub listen: SocketAddr,
    /// `--name` (default: the hostname).
    pub name: Option<String>,
    /// `-d`: the RDMA device to test with (default: the built-in soft NIC).
    pub device: Option<String>,
    /// `--idle-timeout`, seconds without a request before it exits.
    pub idle_timeout: u64,
    /// `--max-test-seconds`: the longest test it runs (0 to 3600).
    pub max_test_seconds: f64,
    /// `--max-size`: the largest message a test may use, bytes.
    pub max_size: u64,
    /// `--once`: exit when the first coordinator disconnects.
    pub once: bool,
    /// `--announce`: make a READY line once listening.
    pub announce: bool,
    /// `--advertise`: the address to announce.
    pub advertise: Option<Ipv4Addr>,
    /// `--user`: become this user once the port is bound.
    pub user: Option<String>,
}

/// What the caller's edge reads for an agent.
pub struct Edge<'a> {
    /// The provider `-d DEV` opens through (`--provider`, else
    /// `RDMAKIT_PROVIDER`); the soft NIC is built in.
    pub provider: rdmakit_verbs::Result<rdmakit_verbs::ProviderChoice>,
    /// The run's token (`--token-file`, else `RDMAKIT_FLEET_TOKEN`), read
    /// when the provider is known to be right.
    pub token: &'a dyn Fn() -> Result<Token, TokenError>,
    /// The soft NIC as the environment configures it (used without `-d`).
    pub soft: rdmakit_verbs::Result<rdmakit_verbs::DeviceConfig>,
    /// The process's environment, for the READY line (the launch node, the
    /// Slurm rank).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// An agent bound and ready to [`Agent::run`].
pub struct Started {
    /// The agent.
    pub agent: Agent,
    /// The name it answers to.
    pub name: String,
    /// With `--announce`: the READY line (JSON: name, address, Slurm rank)
    /// to print on stdout.
    pub ready: Option<String>,
}

impl Started {
    /// Serves until the agent exits, telling `log` one line per event
    /// (`NAME [SECONDS s]: EVENT`, the time since it started serving).
    ///
    /// # Errors
    /// Why the agent stopped serving.
    pub fn serve(self, log: impl Fn(&str) + Send + Sync + 'static) -> Result<(), String> {
        let (name, started) = (self.name, Instant::now());
        let logger: Logger = Arc::new(move |e: &Event| {
            let t = started.elapsed().as_secs_f64();
            log(&format!("{name} [{t:>8.1}s]: {e}"));
        });
        self.agent.run(logger).map(drop).map_err(|e| e.to_string())
    }
}

/// Starts the agent `req` asks for; `note` hears what the user should know
/// on the way (`NAME: running as USER ...`, or that a root agent keeps root).
///
/// # Errors
/// The command's error line: a bad provider for `-d`, no token, a flag out
/// of range, a device that is not there, a port that does not bind, a user
/// it cannot become, an address it cannot announce.
pub fn start(req: &Request, edge: Edge, note: &dyn Fn(&str)) -> Result<Started, String> {
    let say = |e: &dyn std::fmt::Display| e.to_string();
    let provider = match edge.provider {
        Ok(c) => c,
        Err(e) if req.device.is_some() => return Err(say(&e)),
        Err(_) => rdmakit_verbs::ProviderChoice::Auto,
    };
    let token = (edge.token)().map_err(|e| say(&e))?;
    if !(req.max_test_seconds > 0.0 && req.max_test_seconds <= 3600.0) {
        return Err("--max-test-seconds: 0 to 3600".into());
    }
    // A device that is not there fails now, not at the first test.
    if let Some(d) = &req.device {
        check_device(provider, d)?;
    }
    let name = req.name.clone().unwrap_or_else(super::hostname);
    let mut cfg = AgentConfig::new(req.listen, &name, token);
    cfg.device = req.device.clone();
    cfg.provider = provider;
    if req.device.is_none() {
        cfg.soft = edge.soft.map_err(|e| say(&e))?;
    }
    cfg.idle_timeout = Duration::from_secs(req.idle_timeout);
    cfg.max_test_seconds = req.max_test_seconds;
    cfg.max_size = req.max_size as usize;
    cfg.once = req.once;
    let agent = Agent::bind(cfg).map_err(|e| say(&e))?;
    let local = agent.local_addr();
    match &req.user {
        Some(user) => {
            let d = privilege::drop_to(user).map_err(|e| say(&e))?;
            note(&format!("{name}: {d} from here on"));
        }
        None if privilege::is_root() => note(&format!(
            "{name}: warning: running as root; --user NAME gives root up once the port is \
             bound"
        )),
        None => {}
    }
    let ready = match req.announce {
        true => {
            let launch = (edge.env)("SLURM_LAUNCH_NODE_IPADDR");
            let ip = super::advertised(req.advertise, local, launch.as_deref())?;
            let addr = SocketAddr::new(IpAddr::V4(ip), local.port());
            Some(Ready::new(&name, addr, edge.env).line())
        }
        false => None,
    };
    Ok(Started { agent, name, ready })
}
