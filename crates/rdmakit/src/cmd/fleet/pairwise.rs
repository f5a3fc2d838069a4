//! The pairwise fabric matrix (docs/pairwise.md): `rdmakit fleet pairwise`,
//! the coordinator (a `Request` of fleet's `pairwise::options`, measured and
//! rendered; exit 0 no fault, 1 a fault or an agent unreachable, 2 no run),
//! and `rdmakit fleet agent`, the test agent (`pairwise::agent::start`).

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use rdmakit_fleet::pairwise::agent::start::Request as AgentRequest;
use rdmakit_fleet::pairwise::agent::start::{start, Edge};
use rdmakit_fleet::pairwise::options::{self, Failure, Launch, Options, Request};
use rdmakit_fleet::pairwise::render;
use rdmakit_fleet::pairwise::report::PairwiseReport;
use rdmakit_report::progress::Progress;
use rdmakit_vocab::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The agents, HOST:PORT,HOST:PORT,... (each started with `rdmakit fleet agent`).
    #[arg(
        long,
        value_name = "HOST:PORT,...",
        value_delimiter = ',',
        required_unless_present_any = ["slurm", "from"],
        conflicts_with = "slurm"
    )]
    agents: Vec<String>,
    /// Measure nothing: render a saved run (its `--json` output) again, as text, --json or
    /// --html.
    #[arg(long, value_name = "RUN.json", conflicts_with_all = [
        "agents", "slurm", "quick", "reference", "token_file", "sizes", "seconds",
        "lat_seconds", "tx_depth", "mtu", "no_confirm", "confirm_parallel", "port_rate",
        "relative",
    ])]
    from: Option<PathBuf>,
    /// Start the agents as one Slurm job step (srun --ntasks-per-node=1) with a fresh token,
    /// coordinate from here, stop them when done.
    #[arg(long)]
    slurm: bool,
    /// With --slurm: how many nodes (default: the allocation's).
    #[arg(short = 'N', long, value_name = "N", requires = "slurm")]
    nodes: Option<u32>,
    /// With --slurm: the partition.
    #[arg(short = 'p', long, value_name = "NAME", requires = "slurm")]
    partition: Option<String>,
    /// With --slurm: the nodes (Slurm's hostlist syntax).
    #[arg(short = 'w', long, value_name = "LIST", requires = "slurm")]
    nodelist: Option<String>,
    /// With --slurm: the agents' TCP port (default: 18516).
    #[arg(long, value_name = "PORT", requires = "slurm")]
    agent_port: Option<u16>,
    /// With --slurm: the RDMA device the agents test with (default: the soft NIC).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV", requires = "slurm")]
    device: Option<String>,
    /// With --slurm: the srun program (default: srun).
    #[arg(long, value_name = "PROGRAM", requires = "slurm")]
    srun: Option<PathBuf>,
    /// With --slurm: the rdmakit binary on the nodes (default: this one's path).
    #[arg(long, value_name = "PATH", requires = "slurm")]
    agent_program: Option<PathBuf>,
    /// A ring instead of every pair: each node against its two neighbours (2-3 rounds, any N).
    #[arg(long)]
    quick: bool,
    /// A known-good node (name or address): the first partner of every suspect's re-test.
    #[arg(long, value_name = "NODE")]
    reference: Option<String>,
    /// One JSON object (schema rdmakit.pairwise/v1) on stdout.
    #[arg(long)]
    json: bool,
    /// Also write the run as one self-contained HTML file: the bandwidth matrix as a heat
    /// map with the faults outlined, the latency matrix, the re-measurements; the run's
    /// JSON embedded.
    #[arg(long, value_name = "FILE")]
    html: Option<String>,
    /// The run's shared secret (file readable by its owner alone); default RDMAKIT_FLEET_TOKEN.
    /// With --slurm a fresh one is made when neither is given.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// RC WRITE message sizes, bytes; the best average over them is judged.
    #[arg(
        long,
        value_name = "BYTES,...",
        value_delimiter = ',',
        default_value = "4096,65536,262144"
    )]
    sizes: Vec<usize>,
    /// Seconds per bandwidth size and direction.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.3)]
    seconds: f64,
    /// Seconds of RC SEND latency ping-pongs per direction (0: no latency test).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.2)]
    lat_seconds: f64,
    /// Send queue depth of the bandwidth tests (messages in flight).
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    tx_depth: u32,
    /// Path MTU (256, 512, 1024, 2048, 4096).
    #[arg(short = 'm', long, value_name = "BYTES", default_value_t = 4096)]
    mtu: u32,
    /// Report the screening's suspects without re-measuring them.
    #[arg(long)]
    no_confirm: bool,
    /// Re-measure at most this many suspect pairs at once (1: each alone, as one host
    /// running every agent needs; raise it on a real cluster).
    #[arg(long, value_name = "N", default_value_t = 1)]
    confirm_parallel: usize,
    /// The port rate in Gb/s, when the agents do not know it: nothing above 90 % of it is low.
    #[arg(long, value_name = "GBPS")]
    port_rate: Option<f64>,
    /// A node or cell below this fraction of its reference level is low.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.6)]
    relative: f64,
    #[command(flatten)]
    fabric: super::FabricArgs,
}

pub fn run(a: Args) -> anyhow::Result<Exit> {
    let req = Request {
        agents: a.agents.clone(),
        from: a.from.clone(),
        slurm: a.slurm,
        launch: Launch {
            nodes: a.nodes,
            partition: a.partition.clone(),
            nodelist: a.nodelist.clone(),
            agent_port: a.agent_port,
            device: a.device.clone(),
            srun: a.srun.clone(),
            agent_program: a.agent_program.clone(),
        },
        options: Options {
            quick: a.quick,
            reference: a.reference.clone(),
            sizes: a.sizes.clone(),
            seconds: a.seconds,
            lat_seconds: a.lat_seconds,
            tx_depth: a.tx_depth,
            mtu: a.mtu,
            no_confirm: a.no_confirm,
            confirm_parallel: a.confirm_parallel,
            port_rate: a.port_rate,
            relative: a.relative,
            shutdown: a.slurm,
        },
    };
    // Read before measuring: a bad file costs nothing.
    let fabric = a.fabric.read()?;
    let bar = Progress::new("{spinner} {msg} {prefix}", None, Duration::ZERO, !a.json);
    let token = || super::token(a.token_file.as_deref());
    let mut m = options::measure(&req, &token, &std::env::current_exe, &bar);
    drop(bar);
    if let Some(status) = m.stop().filter(|_| !a.json) {
        eprintln!("rdmakit fleet pairwise: the agents' job step ended ({status})");
    }
    match m.report {
        Ok(report) => show(&a, &report, fabric.as_ref()),
        Err(Failure::Refused(e)) => Ok(crate::cmd::fail("rdmakit fleet pairwise", e)),
        Err(Failure::Error(e)) => Err(anyhow::Error::from_boxed(e)),
    }
}

#[derive(clap::Args, Debug)]
pub struct AgentArgs {
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

pub fn agent(a: AgentArgs, provider: rdmakit_verbs::ProviderSetting) -> anyhow::Result<Exit> {
    let req = AgentRequest {
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
    let served = s.serve(|line| eprintln!("rdmakit fleet agent {line}"));
    Ok(served.map_or_else(fail, |()| Exit::Ok))
}

/// Prints the run (text or JSON) with the fabric routes of its faults when
/// `--fabric` was given, writes its page, and gives the exit status.
fn show(
    a: &Args,
    report: &PairwiseReport,
    fabric: Option<&rdmakit_fleet::fabric::Fabric>,
) -> anyhow::Result<Exit> {
    let report = &*rdmakit_fleet::fabric::with_routes(report, fabric);
    anstream::print!("{}", render::output(report, a.json));
    if let Some(path) = &a.html {
        let taken = (report.started_unix > 0).then_some(report.started_unix);
        let page = rdmakit_report::pairwise::render(report, &crate::cmd::page_meta(taken));
        crate::cmd::write_page(path, page)?;
    }
    Ok(report.exit())
}
