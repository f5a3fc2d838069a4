//! `rdmakit perf TEST [HOST]`: perftest-shaped bandwidth and latency tests
//! (`rdmakit_perf::options::Request` says what a run is and how it exits).
use std::io::Write as _;
use std::time::Duration;

use rdmakit_perf::options::{self, parse_duration, parse_mtu, parse_test, parse_ud};
use rdmakit_perf::options::{Options, Refused, Request};
use rdmakit_perf::{render, Progress, Test, PERMILLE};
use rdmakit_report::progress::Progress as Bar;
use rdmakit_vocab::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The test: write-bw, read-bw, send-bw, atomic-bw, write-lat, read-lat, send-lat.
    #[arg(value_name = "TEST", value_parser = parse_test)]
    test: Test,
    /// Run as the client against this server (without it: wait as the server).
    #[arg(value_name = "HOST")]
    host: Option<String>,
    /// RDMA device (default: the soft NIC, address picked automatically).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    device: Option<String>,
    /// GID index (reported; the soft NIC has one RoCEv2 GID, index 0).
    #[arg(short = 'x', long = "gid-index", value_name = "N", default_value_t = 0)]
    gid_index: u32,
    /// TCP port of the QP information exchange.
    #[arg(short = 'p', long, value_name = "PORT", default_value_t = rdmakit_perf::DEFAULT_PORT)]
    port: u16,
    /// Message size in bytes (default 65536 for bandwidth, 2 for latency, 8 for atomics);
    /// with -a, the largest size of the sweep.
    #[arg(short = 's', long, value_name = "BYTES",
          value_parser = clap::value_parser!(u64).range(1..=rdmakit_perf::SWEEP_MAX as u64))]
    size: Option<u64>,
    /// Sweep message sizes 2, 4, ... 2^23 (or up to -s).
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Iterations per size (default 5000 for bandwidth, 1000 for latency).
    #[arg(short = 'n', long = "iters", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "duration")]
    iters: Option<u64>,
    /// Run each size for this many seconds instead of -n iterations.
    #[arg(short = 'D', long, value_name = "SECONDS", value_parser = parse_duration)]
    duration: Option<f64>,
    /// Send messages up to this size inline (default 0 for bandwidth, 220 for latency).
    #[arg(short = 'I', long = "inline_size", value_name = "BYTES",
          value_parser = clap::value_parser!(u32).range(0..=256))]
    inline: Option<u32>,
    /// Send queue depth: messages in flight (default 128 for bandwidth, 1 for latency).
    #[arg(short = 't', long = "tx-depth", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=8192))]
    tx_depth: Option<u32>,
    /// Ask for a send completion every N sends (perftest's CQ moderation),
    /// capped at half the send window. Unsignaled sends also go without an
    /// ACK request: fewer ACK datagrams in both directions.
    #[arg(short = 'Q', long = "cq-mod", value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..))]
    cq_mod: u32,
    /// Receives kept posted by the SEND tests.
    #[arg(short = 'r', long = "rx-depth", value_name = "N", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..=8192))]
    rx_depth: u32,
    /// Path MTU in bytes (256, 512, 1024, 2048, 4096).
    #[arg(short = 'm', long, value_name = "BYTES", default_value = "4096", value_parser = parse_mtu)]
    mtu: u32,
    /// Connection type: RC, or UD (send-bw and send-lat; messages up to the MTU).
    #[arg(short = 'c', long = "connection", value_name = "RC|UD", default_value = "RC",
          value_parser = parse_ud, action = clap::ArgAction::Set)]
    ud: bool,
    /// Check the bytes moved (patterns, lengths, the atomic counter).
    #[arg(long)]
    validate: bool,
    /// Sleep on CQ events instead of busy polling (perftest's --use_event): this side
    /// only, the peer decides for itself. Frees the core a spinning poller takes, at some
    /// latency; not for write-lat, whose echoes arrive in memory, not as completions.
    #[arg(short = 'e', long = "use_event")]
    use_event: bool,
    /// Report bandwidth in Gb/sec instead of MB/sec.
    #[arg(long = "report_gbits")]
    report_gbits: bool,
    /// Print one JSON object (header, results, control-path timings) — always valid JSON.
    #[arg(long)]
    json: bool,
    /// Also write the results as one self-contained HTML file (bandwidth, message rate and
    /// latency percentiles against message size; the data embedded as JSON).
    #[arg(long, value_name = "FILE")]
    html: Option<String>,
    /// Client: keep retrying the TCP connect this long while the server starts.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0, hide = true)]
    connect_timeout: f64,
}

pub fn run(a: Args, provider: rdmakit_verbs::ProviderSetting) -> anyhow::Result<Exit> {
    let req = Request {
        options: Options {
            test: a.test,
            size: a.size,
            all: a.all,
            iters: a.iters,
            duration: a.duration,
            inline: a.inline,
            tx_depth: a.tx_depth,
            cq_mod: a.cq_mod,
            rx_depth: a.rx_depth,
            mtu: a.mtu,
            ud: a.ud,
            validate: a.validate,
        },
        host: a.host.clone(),
        port: a.port,
        device: a.device.clone(),
        gid_index: a.gid_index,
        connect_timeout: a.connect_timeout,
        use_event: a.use_event,
    };
    let template = "{msg} [{bar:30}] {percent:>3}%";
    let bar = Bar::new(template, Some(PERMILLE), Duration::from_secs(1), true);
    let say = |text: &str| {
        print!("{text}");
        let _ = std::io::stdout().flush();
    };
    let mut hooks = Progress::reporting(a.test, a.json, &say, &bar);
    // The soft NIC as the environment configures it (read here, the edge).
    let soft = rdmakit_verbs::DeviceConfig::from_env().map_err(Into::into);
    let result = options::run(&req, provider, soft, &mut hooks);
    drop(hooks);
    drop(bar);
    let r = match result {
        Ok(r) => r,
        Err(Refused::Provider(e)) => {
            return Err(anyhow::Error::new(e).context("choosing a verbs provider"))
        }
        Err(e) => {
            if let Some(j) = e.json(a.test).filter(|_| a.json) {
                println!("{j}");
            }
            eprintln!("rdmakit perf: error: {e}");
            return Ok(e.exit());
        }
    };
    print!("{}", render::output(&r, a.json, a.report_gbits));
    if let Some(path) = &a.html {
        let page = rdmakit_report::perf::render(std::slice::from_ref(&r), &super::page_meta(None));
        super::write_page(path, page)?;
    }
    Ok(Exit::Ok)
}
