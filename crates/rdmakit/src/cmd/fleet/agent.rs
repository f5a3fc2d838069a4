//! `rdmakit fleet agent`: the long-running test agent of the pairwise
//! matrix. Serves only a coordinator proving the run's token; logs one line
//! per event on stderr; `--announce` prints a READY line (JSON) on stdout
//! once listening, which `fleet pairwise --slurm` reads through srun.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmakit_fleet::pairwise::agent::{self, Agent, AgentConfig, Event};
use rdmakit_fleet::pairwise::privilege;
use rdmakit_fleet::pairwise::slurm::Ready;
use rdmakit_vocab::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Control address. A specific IPv4 address is also the soft NIC's; 0.0.0.0 picks per test
    /// the source address of the route toward the peer.
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:18516")]
    listen: SocketAddr,
    /// The name it answers to (default: the hostname).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// RDMA device to test with (default: the built-in soft NIC).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    device: Option<String>,
    /// The run's shared secret, from a file readable by its owner alone (default:
    /// RDMAKIT_FLEET_TOKEN). The agent does not start without one.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Exit after this many seconds without a request.
    #[arg(long, value_name = "SECONDS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout: u64,
    /// Longest test it runs, seconds (planned; a watchdog cancels 10 s past it).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    max_test_seconds: f64,
    /// Largest message a test may use, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20,
          value_parser = clap::value_parser!(u64).range(1..=(8 << 20)))]
    max_size: u64,
    /// Exit when the first coordinator disconnects (agents of one job step).
    #[arg(long)]
    once: bool,
    /// Print a READY line (JSON: name, address, Slurm rank) on stdout once listening.
    #[arg(long)]
    announce: bool,
    /// The address to announce (default: the listen address, or with 0.0.0.0 the source of the
    /// route toward SLURM_LAUNCH_NODE_IPADDR).
    #[arg(long, value_name = "IP", requires = "announce")]
    advertise: Option<Ipv4Addr>,
    /// Once the port is bound, become USER (a name or a uid) for good: the agent needs
    /// no privilege after binding. Only root can switch; without it a root agent says
    /// so on stderr and keeps root.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
}

pub fn run(a: Args, provider: crate::cmd::ProviderSetting) -> anyhow::Result<ExitCode> {
    Ok(serve(a, provider).unwrap_or_else(|e| crate::cmd::fail("rdmakit fleet agent", e)))
}

/// Starts the agent and serves until it exits; any failure is the message
/// `fail` prints.
fn serve(a: Args, provider: crate::cmd::ProviderSetting) -> Result<ExitCode, String> {
    let say = |e: &dyn std::fmt::Display| e.to_string();
    // The provider opens `-d DEV` only; the soft NIC is built in.
    let provider = match provider {
        Ok(c) => c,
        Err(e) if a.device.is_some() => return Err(say(&e)),
        Err(_) => rdmakit_verbs::ProviderChoice::Auto,
    };
    let token = super::token(a.token_file.as_deref()).map_err(|e| say(&e))?;
    if !(a.max_test_seconds > 0.0 && a.max_test_seconds <= 3600.0) {
        return Err("--max-test-seconds: 0 to 3600".into());
    }
    // A device that is not there fails now, not at the first test.
    if let Some(d) = &a.device {
        agent::check_device(provider, d)?;
    }
    let name = a.name.clone().unwrap_or_else(agent::hostname);
    let mut cfg = AgentConfig::new(a.listen, &name, token);
    cfg.device = a.device.clone();
    cfg.provider = provider;
    if a.device.is_none() {
        cfg.soft = rdmakit_verbs::DeviceConfig::from_env().map_err(|e| say(&e))?;
    }
    cfg.idle_timeout = Duration::from_secs(a.idle_timeout);
    cfg.max_test_seconds = a.max_test_seconds;
    cfg.max_size = a.max_size as usize;
    cfg.once = a.once;
    let agent = Agent::bind(cfg).map_err(|e| say(&e))?;
    let local = agent.local_addr();
    match &a.user {
        Some(user) => {
            let d = privilege::drop_to(user).map_err(|e| say(&e))?;
            eprintln!("rdmakit fleet agent {name}: {d} from here on");
        }
        None if privilege::is_root() => eprintln!(
            "rdmakit fleet agent {name}: warning: running as root; --user NAME gives root up \
             once the port is bound"
        ),
        None => {}
    }
    if a.announce {
        let env = |k: &str| std::env::var(k).ok();
        let launch = env("SLURM_LAUNCH_NODE_IPADDR");
        let ip = agent::advertised(a.advertise, local, launch.as_deref())?;
        let r = Ready::new(&name, SocketAddr::new(IpAddr::V4(ip), local.port()), &env);
        println!("{}", r.line());
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }
    let start = Instant::now();
    let log: agent::Logger = Arc::new(move |e: &Event| {
        let t = start.elapsed().as_secs_f64();
        eprintln!("rdmakit fleet agent {name} [{t:>8.1}s]: {e}");
    });
    agent.run(log).map(|_| Exit::Ok.into()).map_err(|e| say(&e))
}
