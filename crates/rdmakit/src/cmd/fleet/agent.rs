//! `rdmakit fleet agent`: the long-running test agent of the pairwise
//! matrix. Serves only a coordinator proving the run's token; logs one line
//! per event on stderr; `--announce` prints a READY line (JSON) on stdout
//! once listening, which `fleet pairwise --slurm` reads through srun.

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use rdmakit_fleet::pairwise::agent::start::{start, Edge, Request};
use rdmakit_fleet::pairwise::agent::{Event, Logger};
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

pub fn run(a: Args, provider: crate::cmd::ProviderSetting) -> anyhow::Result<Exit> {
    let req = Request {
        listen: a.listen,
        name: a.name.clone(),
        device: a.device.clone(),
        idle_timeout: a.idle_timeout,
        max_test_seconds: a.max_test_seconds,
        max_size: a.max_size,
        once: a.once,
        announce: a.announce,
        advertise: a.advertise,
        user: a.user.clone(),
    };
    let edge = Edge {
        provider,
        token: &|| super::token(a.token_file.as_deref()),
        soft: rdmakit_verbs::DeviceConfig::from_env().map_err(Into::into),
        env: &|k: &str| std::env::var(k).ok(),
    };
    let fail = |e| crate::cmd::fail("rdmakit fleet agent", e);
    let s = match start(&req, edge, &|l| eprintln!("rdmakit fleet agent {l}")) {
        Ok(s) => s,
        Err(e) => return Ok(fail(e)),
    };
    if let Some(line) = &s.ready {
        println!("{line}");
        let _ = std::io::stdout().flush();
    }
    let (name, started) = (s.name, Instant::now());
    let log: Logger = Arc::new(move |e: &Event| {
        let t = started.elapsed().as_secs_f64();
        eprintln!("rdmakit fleet agent {name} [{t:>8.1}s]: {e}");
    });
    Ok(s.agent
        .run(log)
        .map_or_else(|e| fail(e.to_string()), |_| Exit::Ok))
}
