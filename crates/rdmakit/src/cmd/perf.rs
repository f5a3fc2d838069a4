//! `rdmakit perf TEST [HOST]`: perftest-shaped bandwidth and latency tests
//! (write-bw, read-bw, send-bw, atomic-bw, write-lat, read-lat, send-lat)
//! over RC, plus the control-path verb timings no common tool reports.
//!
//! Without HOST it waits as the server on TCP port 18515 (`-p`); with HOST
//! it runs the client, whose parameters (-s/-a/-n/-D/-I/-t/...) the server
//! adopts. Exit codes: 0 success, 1 the run failed (a completion error such as
//! RETRY_EXC_ERR when the peer vanished, a broken exchange, a validation
//! failure), 2 invalid arguments.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use rdmakit_perf::options::{parse_duration, parse_mtu, parse_test, parse_ud, Options};
use rdmakit_perf::{
    render, run_client, run_server, ClientOpts, Header, PerfError, Progress, ServerOpts, Step, Test,
};
use rdmakit_report::progress::Progress as Bar;

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

pub fn run(a: Args, provider: super::ProviderSetting) -> anyhow::Result<ExitCode> {
    let test = a.test;
    let opts = Options {
        test,
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
    };
    let params = match opts.params() {
        Ok(p) => p,
        Err(m) => return Ok(usage(&m)),
    };
    // The provider opens `-d DEV` only; the soft NIC is built in.
    let provider = match provider {
        Ok(c) => c,
        Err(e) if a.device.is_some() => {
            return Err(anyhow::Error::new(e).context("choosing a verbs provider"))
        }
        Err(_) => rdmakit_verbs::ProviderChoice::Auto,
    };
    let json = a.json;
    let gbits = a.report_gbits;

    let bar = Bar::new(
        "{msg} [{bar:30}] {percent:>3}%",
        Some(1000),
        Duration::from_secs(1),
        true,
    );
    let bar_ref = &bar;
    let mut hooks = Progress {
        // The server says it waits once it listens (a port in use fails first).
        on_listening: Some(Box::new(move |_port: u16| {
            if !json {
                print!("{}", render::waiting());
                let _ = std::io::stdout().flush();
            }
        })),
        on_header: Some(Box::new(move |h: &Header| {
            if !json {
                print!("{}", render::header(h));
                let _ = std::io::stdout().flush();
            }
        })),
        on_progress: Some(Box::new(move |s: &Step| {
            bar_ref.message(render::progress_label(test, s));
            bar_ref.position((s.done.clamp(0.0, 1.0) * 1000.0) as u64, None);
        })),
        cancel: None,
    };
    // The soft NIC as the environment configures it (read here, the edge);
    // a malformed RDMAKIT_SOFT_ADDR fails the run as opening it did.
    let soft = match rdmakit_verbs::DeviceConfig::from_env() {
        Ok(c) => c,
        Err(e) if a.device.is_none() => return failed(test, json, PerfError::Verbs(e.into())),
        Err(_) => rdmakit_verbs::DeviceConfig::default(),
    };
    let result = match &a.host {
        Some(host) => run_client(
            &ClientOpts {
                host: host.clone(),
                port: a.port,
                device: a.device.clone(),
                provider,
                soft: soft.clone(),
                gid_index: a.gid_index,
                params,
                connect_timeout: Duration::from_secs_f64(a.connect_timeout.max(0.0)),
            },
            &mut hooks,
        ),
        None => run_server(
            &ServerOpts {
                port: a.port,
                device: a.device.clone(),
                provider,
                soft,
                gid_index: a.gid_index,
                test,
            },
            &mut hooks,
        ),
    };
    drop(hooks);
    drop(bar);
    match result {
        Ok(r) => {
            if json {
                println!("{}", render::json(&r, gbits));
            } else {
                print!("{}", render::results(&r, gbits));
            }
            if let Some(path) = &a.html {
                let meta = super::html::meta(None);
                let page = rdmakit_report::perf::render(std::slice::from_ref(&r), &meta);
                super::html::write(path, page)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => failed(test, json, e),
    }
}

/// Reports a failed run: its JSON object with `--json`, the error on
/// stderr, exit 2 for bad parameters and 1 otherwise.
fn failed(test: Test, json: bool, e: PerfError) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", render::error_json(test, &e));
    }
    eprintln!("rdmakit perf: error: {e}");
    Ok(ExitCode::from(e.exit_code()))
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("rdmakit perf: error: {msg}");
    ExitCode::from(2)
}
