//! `rdmakit metrics`: the host's RDMA facts and the doctor's findings in the
//! Prometheus text format, printed, written as a textfile for node_exporter, or served
//! over HTTP (`rdmakit_metrics::export`); with `--fabric`, every port of the
//! InfiniBand fabric instead.

use std::io::Write as _;

use rdmakit_metrics::export::{self, To};
use rdmakit_metrics::Options;
use rdmakit_vocab::exit::Exit;

use super::ReplayArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    source: ReplayArgs,
    /// Also export the doctor's findings about the host as this process sees it (its
    /// memlock limit, /dev/infiniband access, network namespace, RDMA cgroup).
    #[arg(long, value_name = "PID")]
    pid: Option<u32>,
    /// Read the kernel log from FILE (journalctl -k, dmesg output) instead of
    /// /dev/kmsg: its RDMA messages become findings.
    #[arg(long, value_name = "FILE")]
    kernel_log: Option<String>,
    /// Write the exposition to FILE atomically (a temporary file renamed over it), for
    /// node_exporter's textfile collector (name it *.prom in its directory).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        conflicts_with = "listen"
    )]
    output: Option<String>,
    /// Serve the metrics over HTTP at ADDR (e.g. 127.0.0.1:9879, [::]:9879); every GET
    /// /metrics reads the facts afresh.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Leave out the node_infiniband_* families (use when node_exporter's own
    /// infiniband collector runs beside the textfile: the same series twice fail it).
    #[arg(long)]
    no_node_compat: bool,
    /// Export the whole InfiniBand fabric instead of this host: every port's PMA counters,
    /// link states, widths and speeds (rdmakit_fabric_*), from a discovery over the local
    /// port (kept for 5 minutes while serving) and a counters read at every scrape.
    #[arg(long, conflicts_with_all = ["pid", "kernel_log", "no_node_compat", "root", "from"])]
    fabric: bool,
    /// With --fabric: the CA the MADs leave by (as ibstat names it); default: the first
    /// with an Active port.
    #[arg(long, value_name = "NAME", requires = "fabric")]
    ca: Option<String>,
    /// With --fabric: the CA's port; default: its first Active port.
    #[arg(long, value_name = "N", requires = "fabric")]
    port: Option<u8>,
}

pub fn run(a: Args) -> anyhow::Result<Exit> {
    let to = To::of_flags(a.listen.as_deref(), a.output.as_deref());
    let text = match a.fabric {
        true => export::fabric(a.ca.as_deref(), a.port, to, &|at| {
            eprintln!("rdmakit: serving the fabric's metrics on http://{at}/metrics")
        })?,
        false => {
            let opts = Options {
                node_compat: !a.no_node_compat,
            };
            let (opened, copts) = a.source.open(a.pid, a.kernel_log.clone())?;
            export::host(opened, copts, opts, to, &|at| {
                eprintln!("rdmakit: serving metrics on http://{at}/metrics")
            })?
        }
    };
    if let Some(text) = text {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()?;
    }
    Ok(Exit::Ok)
}
