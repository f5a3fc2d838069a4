//! One module per subcommand, plus what they share.

pub mod collect;
pub mod dev;
pub mod devinfo;
pub mod doctor;
pub mod explain;
pub mod fleet;
pub mod html;
pub mod irq;
pub mod link;
pub mod metrics;
pub mod monitor;
pub mod pcap;
pub mod perf;
pub mod res;
pub mod shim;
pub mod soft;
pub mod stat;
pub mod surface;
pub mod verbstest;

/// The verbs provider chosen at the edge (`--provider`, else
/// `RDMAKIT_PROVIDER`), or why that choice is bad; read once in `main` and
/// passed to the commands that open devices.
pub type ProviderSetting = Result<rdmakit_verbs::ProviderChoice, rdmakit_verbs::Error>;

/// The soft NIC's device names as the environment names it
/// (`RDMAKIT_SOFT_NAME`, else soft0), whatever provider the tools default to.
pub fn soft_names() -> Vec<String> {
    let p = rdmakit_verbs::SoftProvider {
        config: rdmakit_verbs::DeviceConfig {
            name: std::env::var("RDMAKIT_SOFT_NAME").ok(),
            ..rdmakit_verbs::DeviceConfig::default()
        },
    };
    rdmakit_verbs::Provider::device_names(&p).unwrap_or_default()
}
use rdmakit_host::collect::CollectOptions;
use rdmakit_host::open::SourceSpec;

/// `--color`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ColorWhen {
    Auto,
    Always,
    Never,
}

impl ColorWhen {
    /// Sets the choice for every anstream writer (auto honours NO_COLOR,
    /// CLICOLOR_FORCE and whether the output is a terminal).
    pub fn apply(self) {
        let c = match self {
            ColorWhen::Auto => anstream::ColorChoice::Auto,
            ColorWhen::Always => anstream::ColorChoice::Always,
            ColorWhen::Never => anstream::ColorChoice::Never,
        };
        c.write_global();
    }
}

/// Where host facts come from: `--root DIR`, `--from BUNDLE`, or the live host —
/// what every view that replays a bundle takes (dev, link, res, stat, irq,
/// devinfo, collect, metrics).
#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    /// Read a captured host tree rooted at DIR instead of / (like libibverbs' SYSFS_PATH).
    #[arg(long, value_name = "DIR", conflicts_with = "from")]
    pub root: Option<String>,
    /// Replay a bundle recorded by `rdmakit collect` (or a capture directory) instead
    /// of reading this host.
    #[arg(long, value_name = "BUNDLE")]
    pub from: Option<String>,
}

impl ReplayArgs {
    /// Opens the source, and the options to collect with.
    pub fn open(&self) -> anyhow::Result<(Opened, CollectOptions)> {
        self.open_with(None, None)
    }

    /// Opens the source, also as process `pid` sees the host, with the kernel
    /// log read from `kernel_log`: a process the source does not have or a log
    /// that cannot be read fails here, naming why.
    pub fn open_with(
        &self,
        pid: Option<u32>,
        kernel_log: Option<&str>,
    ) -> anyhow::Result<(Opened, CollectOptions)> {
        let spec = SourceSpec {
            root: self.root.clone(),
            from: self.from.clone(),
            pid,
            kernel_log: kernel_log.map(str::to_string),
            from_flag: "--from",
        };
        spec.open(device_limits).map_err(anyhow::Error::new)
    }

    /// The live host (neither --root nor --from).
    pub fn live(&self) -> bool {
        self.root.is_none() && self.from.is_none()
    }
}

/// The doctor's source flags: where host facts come from, and the process and
/// kernel log it also checks.
#[derive(clap::Args, Debug, Clone)]
pub struct SourceArgs {
    /// Read a captured host tree rooted at DIR instead of / (like libibverbs' SYSFS_PATH).
    #[arg(long, value_name = "DIR", conflicts_with = "from")]
    pub root: Option<String>,
    /// Replay a bundle recorded by `rdmakit collect` (or a capture directory).
    #[arg(long, value_name = "BUNDLE")]
    pub from: Option<String>,
    /// Also check the host as this process sees it: its memlock limit, /dev/infiniband
    /// through /proc/PID/root against its credentials, its network namespace, its
    /// RDMA cgroup.
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Read the kernel log from FILE (journalctl -k, dmesg output) instead of /dev/kmsg.
    #[arg(long, value_name = "FILE")]
    pub kernel_log: Option<String>,
}

pub use rdmakit_host::open::Opened;
/// Prints `WHO: error: WHAT` on stderr in rdmakit's words (an errno by its
/// name, never Rust's "(os error N)") and gives exit status 2: for the
/// commands that report their own failures (fleet agent, fleet pairwise).
pub fn fail(who: &str, what: impl std::fmt::Display) -> std::process::ExitCode {
    eprintln!(
        "{who}: error: {}",
        rdmakit_vocab::errno::plain(&what.to_string())
    );
    rdmakit_vocab::exit::Exit::Failed.into()
}

/// Device limits (`ibv_query_device`) through rdma-core's libibverbs, asked
/// once per run when the doctor first needs them (RDK-R002) and recorded in
/// bundles like every other answer.
fn device_limits() -> rdmakit_host::source::LimitsFn {
    std::sync::Arc::new(rdmakit_verbs::ibverbs::limits_by_name(ibverbs_library()))
}

/// The libibverbs to load for host devices: `RDMAKIT_IBVERBS_LIB`, else
/// libibverbs.so.1 (read here, at the edge).
pub fn ibverbs_library() -> String {
    rdmakit_verbs::ibverbs::select::library_from_env()
}
