//! `rdmakit metrics`: the host's RDMA facts and the doctor's findings in the
//! Prometheus text format, printed, written as a textfile for node_exporter, or served
//! over HTTP.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;
use rdmakit_metrics::{http, scrape, Options};

use super::ReplayArgs;
use rdmakit_vocab::exit::Exit;

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
}

pub fn run(a: Args) -> anyhow::Result<Exit> {
    let opts = Options {
        node_compat: !a.no_node_compat,
    };
    let (opened, copts) = a.source.open(a.pid, a.kernel_log.clone())?;
    if let Some(addr) = &a.listen {
        let listener = http::bind(addr).map_err(anyhow::Error::msg)?;
        let local = listener.local_addr().context("--listen: local address")?;
        eprintln!("rdmakit: serving metrics on http://{local}/metrics");
        http::serve_source(listener, opened, copts, opts).context("serving metrics")?;
        return Ok(Exit::Ok);
    }
    let text = scrape(opened.source(), &copts, opened.label(), &opts);
    match &a.output {
        Some(path) => rdmakit_metrics::textfile::write_atomically(Path::new(path), text.as_bytes())
            .map_err(anyhow::Error::msg)?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
    }
    Ok(Exit::Ok)
}
