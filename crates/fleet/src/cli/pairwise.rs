//! `rdmakit fleet pairwise` (the coordinator's flags, mapped onto
//! [`crate::pairwise::options::Request`]) and `rdmakit fleet agent` (the test
//! agent's, onto [`crate::pairwise::agent::start::Request`]); docs/pairwise.md.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use crate::pairwise::agent::start::Request as AgentRequest;
use crate::pairwise::options::{Launch, Options, Request};

#[derive(clap::Args, Debug)]
pub struct PairwiseArgs {
    /// The agents, HOST:PORT,HOST:PORT,... (each started with `rdmakit fleet agent`).
    #[arg(
        long,
        value_name = "HOST:PORT,...",
        value_delimiter = ',',
        required_unless_present_any = ["slurm", "from"],
        conflicts_with = "slurm"
    )]
    pub agents: Vec<String>,
    /// Measure nothing: render a saved run (its `--json` output) again, as text, --json or
    /// --html.
    #[arg(long, value_name = "RUN.json", conflicts_with_all = [
        "agents", "slurm", "quick", "reference", "token_file", "sizes", "seconds",
        "lat_seconds", "tx_depth", "mtu", "no_confirm", "confirm_parallel", "port_rate",
        "relative",
    ])]
    pub from: Option<PathBuf>,
    /// Start the agents as one Slurm job step (srun --ntasks-per-node=1) with a fresh token,
    /// coordinate from here, stop them when done.
    #[arg(long)]
    pub slurm: bool,
    /// With --slurm: how many nodes (default: the allocation's).
    #[arg(short = 'N', long, value_name = "N", requires = "slurm")]
    pub nodes: Option<u32>,
    /// With --slurm: the partition.
    #[arg(short = 'p', long, value_name = "NAME", requires = "slurm")]
    pub partition: Option<String>,
    /// With --slurm: the nodes (Slurm's hostlist syntax).
    #[arg(short = 'w', long, value_name = "LIST", requires = "slurm")]
    pub nodelist: Option<String>,
    /// With --slurm: the agents' TCP port (default: 18516).
    #[arg(long, value_name = "PORT", requires = "slurm")]
    pub agent_port: Option<u16>,
    /// With --slurm: the RDMA device the agents test with (default: the soft NIC).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV", requires = "slurm")]
    pub device: Option<String>,
    /// With --slurm: the srun program (default: srun).
    #[arg(long, value_name = "PROGRAM", requires = "slurm")]
    pub srun: Option<PathBuf>,
    /// With --slurm: the rdmakit binary on the nodes (default: this one's path).
    #[arg(long, value_name = "PATH", requires = "slurm")]
    pub agent_program: Option<PathBuf>,
    /// A ring instead of every pair: each node against its two neighbours (2-3 rounds, any N).
    #[arg(long)]
    pub quick: bool,
    /// A known-good node (name or address): the first partner of every suspect's re-test.
    #[arg(long, value_name = "NODE")]
    pub reference: Option<String>,
    /// One JSON object (schema rdmakit.pairwise/v1) on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also write the run as one self-contained HTML file: the bandwidth matrix as a heat
    /// map with the faults outlined, the latency matrix, the re-measurements; the run's
    /// JSON embedded.
    #[arg(long, value_name = "FILE")]
    pub html: Option<String>,
    /// The run's shared secret (file readable by its owner alone); default RDMAKIT_FLEET_TOKEN.
    /// With --slurm a fresh one is made when neither is given.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// RC WRITE message sizes, bytes; the best average over them is judged.
    #[arg(
        long,
        value_name = "BYTES,...",
        value_delimiter = ',',
        default_value = "4096,65536,262144"
    )]
    pub sizes: Vec<usize>,
    /// Seconds per bandwidth size and direction.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.3)]
    pub seconds: f64,
    /// Seconds of RC SEND latency ping-pongs per direction (0: no latency test).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.2)]
    pub lat_seconds: f64,
    /// Send queue depth of the bandwidth tests (messages in flight).
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub tx_depth: u32,
    /// Path MTU (256, 512, 1024, 2048, 4096).
    #[arg(short = 'm', long, value_name = "BYTES", default_value_t = 4096)]
    pub mtu: u32,
    /// Report the screening's suspects without re-measuring them.
    #[arg(long)]
    pub no_confirm: bool,
    /// Re-measure at most this many suspect pairs at once (1: each alone, as one host
    /// running every agent needs; raise it on a real cluster).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub confirm_parallel: usize,
    /// The port rate in Gb/s, when the agents do not know it: nothing above 90 % of it is low.
    #[arg(long, value_name = "GBPS")]
    pub port_rate: Option<f64>,
    /// A node or cell below this fraction of its reference level is low.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.6)]
    pub relative: f64,
    #[command(flatten)]
    pub fabric: super::FabricArgs,
}

impl PairwiseArgs {
    /// The run these flags ask for.
    pub fn request(&self) -> Request {
        Request {
            agents: self.agents.clone(),
            from: self.from.clone(),
            slurm: self.slurm,
            launch: Launch {
                nodes: self.nodes,
                partition: self.partition.clone(),
                nodelist: self.nodelist.clone(),
                agent_port: self.agent_port,
                device: self.device.clone(),
                srun: self.srun.clone(),
                agent_program: self.agent_program.clone(),
            },
            options: Options {
                quick: self.quick,
                reference: self.reference.clone(),
                sizes: self.sizes.clone(),
                seconds: self.seconds,
                lat_seconds: self.lat_seconds,
                tx_depth: self.tx_depth,
                mtu: self.mtu,
                no_confirm: self.no_confirm,
                confirm_parallel: self.confirm_parallel,
                port_rate: self.port_rate,
                relative: self.relative,
                shutdown: self.slurm,
            },
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct AgentArgs {
    /// Control address. A specific IPv4 address is also the soft NIC's; 0.0.0.0 picks per test
    /// the source address of the route toward the peer.
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:18516")]
    pub listen: SocketAddr,
    /// The name it answers to (default: the hostname).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// RDMA device to test with (default: the built-in soft NIC).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub device: Option<String>,
    /// The run's shared secret, from a file readable by its owner alone (default:
    /// RDMAKIT_FLEET_TOKEN). The agent does not start without one.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Exit after this many seconds without a request.
    #[arg(long, value_name = "SECONDS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: u64,
    /// Longest test it runs, seconds (planned; a watchdog cancels 10 s past it).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub max_test_seconds: f64,
    /// Largest message a test may use, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20,
          value_parser = clap::value_parser!(u64).range(1..=(8 << 20)))]
    pub max_size: u64,
    /// Exit when the first coordinator disconnects (agents of one job step).
    #[arg(long)]
    pub once: bool,
    /// Print a READY line (JSON: name, address, Slurm rank) on stdout once listening.
    #[arg(long)]
    pub announce: bool,
    /// The address to announce (default: the listen address, or with 0.0.0.0 the source of the
    /// route toward SLURM_LAUNCH_NODE_IPADDR).
    #[arg(long, value_name = "IP", requires = "announce")]
    pub advertise: Option<Ipv4Addr>,
    /// Once the port is bound, become USER (a name or a uid) for good: the agent needs
    /// no privilege after binding. Only root can switch; without it a root agent says
    /// so on stderr and keeps root.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
}

impl AgentArgs {
    /// The agent these flags ask for.
    pub fn request(&self) -> AgentRequest {
        AgentRequest {
            listen: self.listen,
            name: self.name.clone(),
            device: self.device.clone(),
            idle_timeout: self.idle_timeout,
            max_test_seconds: self.max_test_seconds,
            max_size: self.max_size,
            once: self.once,
            announce: self.announce,
            advertise: self.advertise,
            user: self.user.clone(),
        }
    }
}
