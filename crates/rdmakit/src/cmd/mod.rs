//! The subcommands, a module per library crate they call (`doctor` holds
//! doctor, explain and irq; `res` dev, link, stat, res and monitor; ...), and
//! what they share: where host facts come from, `--color`, `--html FILE` (the
//! self-contained HTML report, crates/report, of a command's result).

pub mod collect;
pub mod doctor;
pub mod fabric;
pub mod fleet;
pub mod metrics;
pub mod pcap;
pub mod perf;
pub mod res;
pub mod soft;
pub mod verbs;

use anyhow::Context as _;
use rdmakit_host::collect::CollectOptions;
pub use rdmakit_host::open::Opened;
use rdmakit_host::open::SourceSpec;
use rdmakit_report::{Meta, ReportError};

/// Sets `--color` for every anstream writer (auto honours NO_COLOR,
/// CLICOLOR_FORCE and whether the output is a terminal).
pub fn apply_color(when: clap::ColorChoice) {
    let c = match when {
        clap::ColorChoice::Auto => anstream::ColorChoice::Auto,
        clap::ColorChoice::Always => anstream::ColorChoice::Always,
        clap::ColorChoice::Never => anstream::ColorChoice::Never,
    };
    c.write_global();
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

/// What the page says about how it was made: the time the data was taken
/// (`taken_unix`; now when `None`) and the command line (read here, at the edge).
pub fn page_meta(taken_unix: Option<u64>) -> Meta {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Meta::of_command(taken_unix.unwrap_or(now), std::env::args().skip(1))
}

/// Writes the rendered `page` to `path` and says so on stderr.
pub fn write_page(path: &str, page: Result<String, ReportError>) -> anyhow::Result<()> {
    rdmakit_report::file::write(path, &page.context("--html")?)?;
    eprintln!("rdmakit: HTML report written to {path}");
    Ok(())
}
