//! One module per subcommand, plus what they share.

pub mod collect;
pub mod devinfo;
pub mod doctor;
pub mod explain;
pub mod fleet;
pub mod html;
pub mod irq;
pub mod metrics;
pub mod monitor;
pub mod pcap;
pub mod perf;
pub mod res;
pub mod shim;
pub mod soft;
pub mod surface;
pub mod verbstest;

/// The verbs provider chosen at the edge (`--provider`, else
/// `RDMAKIT_PROVIDER`), or why that choice is bad; read once in `main` and
/// passed to the commands that open devices.
pub type ProviderSetting = Result<rdmakit_verbs::ProviderChoice, rdmakit_verbs::Error>;

use rdmakit_host::collect::CollectOptions;
pub use rdmakit_host::open::Opened;
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
    /// Opens the source, also as process `pid` sees the host, with the kernel
    /// log read from `kernel_log` (a process the source does not have or a log
    /// that cannot be read fails here, naming why), and the options to collect
    /// with.
    pub fn open(
        &self,
        pid: Option<u32>,
        kernel_log: Option<String>,
    ) -> anyhow::Result<(Opened, CollectOptions)> {
        let spec = SourceSpec::of_flags(self.root.clone(), self.from.clone(), pid, kernel_log);
        let library = rdmakit_verbs::ibverbs::select::library_from_env();
        Ok(rdmakit_doctor::health::open(&spec, library)?)
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

impl SourceArgs {
    /// The source these flags name.
    pub fn spec(&self) -> SourceSpec {
        let (root, from) = (self.root.clone(), self.from.clone());
        SourceSpec::of_flags(root, from, self.pid, self.kernel_log.clone())
    }
}

/// Prints `WHO: error: WHAT` on stderr in rdmakit's words (an errno by its
/// name, never Rust's "(os error N)") and gives exit status 2: for the
/// commands that report their own failures (fleet agent, fleet pairwise).
pub fn fail(who: &str, what: impl std::fmt::Display) -> rdmakit_vocab::exit::Exit {
    eprintln!(
        "{who}: error: {}",
        rdmakit_vocab::errno::plain(&what.to_string())
    );
    rdmakit_vocab::exit::Exit::Failed
}
