//! One module per subcommand, plus what they share.

pub mod collect;
pub mod dev;
pub mod devinfo;
pub mod doctor;
pub mod explain;
pub mod fleet;
pub mod health;
pub mod html;
pub mod irq;
pub mod link;
pub mod metrics;
pub mod monitor;
pub mod npd;
pub mod pcap;
pub mod perf;
pub mod progress;
pub mod res;
pub mod shim;
pub mod soft;
pub mod stat;
pub mod surface;
pub mod verbstest;

use anyhow::Context as _;

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
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::CollectOptions;
use rdmakit_host::source::{LiveSource, Source};

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

/// Where host facts come from: `--root DIR`, `--from BUNDLE`, or the live host.
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

/// An opened source and what to call it in reports.
pub enum Opened {
    Live(LiveSource, String),
    Bundle(Box<Bundle>, String),
}

impl Opened {
    pub fn source(&self) -> &dyn Source {
        match self {
            Opened::Live(s, _) => s,
            Opened::Bundle(b, _) => b.as_ref(),
        }
    }

    pub fn label(&self) -> &str {
        match self {
            Opened::Live(_, l) | Opened::Bundle(_, l) => l,
        }
    }
}

impl SourceArgs {
    /// The collect options these flags ask for (a bundle brings its own).
    pub fn options(&self) -> CollectOptions {
        CollectOptions {
            pid: self.pid,
            kernel_log: self.kernel_log.clone(),
        }
    }

    /// Opens the source, and the options to collect with.
    pub fn open(&self) -> anyhow::Result<(Opened, CollectOptions)> {
        if let Some(path) = &self.from {
            let p = std::path::Path::new(path);
            let bundle = if p.is_dir() {
                rdmakit_host::capture::import_capture(p)
                    .with_context(|| format!("importing capture directory {path}"))?
            } else {
                Bundle::read(path)?
            };
            let mut opts = bundle.header.options.clone();
            if self.pid.is_some() {
                opts.pid = self.pid;
            }
            if self.kernel_log.is_some() {
                opts.kernel_log = self.kernel_log.clone();
            }
            let label = if p.is_dir() {
                format!("capture directory {path}")
            } else {
                format!("bundle {path} ({})", bundle.header.tool)
            };
            return Ok((Opened::Bundle(Box::new(bundle), label), opts));
        }
        if let Some(root) = &self.root {
            anyhow::ensure!(
                std::path::Path::new(root).is_dir(),
                "--root {root}: not a directory"
            );
            return Ok((
                Opened::Live(LiveSource::new(root), format!("tree at {root}")),
                self.options(),
            ));
        }
        Ok((
            Opened::Live(
                LiveSource::host().with_device_limits(device_limits()),
                "live host".into(),
            ),
            self.options(),
        ))
    }
}

/// Device limits (`ibv_query_device`) through rdma-core's libibverbs, asked
/// once per run when the doctor first needs them (RDK-R002) and recorded in
/// bundles like every other answer.
fn device_limits() -> rdmakit_host::source::LimitsFn {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    let cache: OnceLock<Option<HashMap<String, String>>> = OnceLock::new();
    std::sync::Arc::new(move |dev: &str| {
        cache
            .get_or_init(|| {
                let p = rdmakit_verbs::ibverbs::IbverbsProvider::load().ok()?;
                let (found, _) = p.device_limits().ok()?;
                Some(
                    found
                        .into_iter()
                        .map(|d| {
                            let a = &d.attr;
                            let text = format!(
                                "max_qp {}\nmax_cq {}\nmax_mr {}\nmax_pd {}\n",
                                a.max_qp, a.max_cq, a.max_mr, a.max_pd
                            );
                            (d.name, text)
                        })
                        .collect(),
                )
            })
            .as_ref()?
            .get(dev)
            .cloned()
    })
}
