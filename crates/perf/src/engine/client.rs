//! The client: its options, connecting to a server and running every size.

use std::net::ToSocketAddrs;

use super::bandwidth::client_bw;
use super::latency::client_lat;
use super::*;

/// The client's options.
#[derive(Clone, Debug)]
pub struct ClientOpts {
    /// Server host.
    pub host: String,
    /// Server TCP port.
    pub port: u16,
    /// Device (`None`: the soft NIC).
    pub device: Option<String>,
    /// The provider `device` is opened through.
    pub provider: ProviderChoice,
    /// The soft NIC's configuration when `device` is `None` (its `addr`
    /// `None`: the host device's address); the CLI's is
    /// `DeviceConfig::from_env()`.
    pub soft: DeviceConfig,
    /// GID index (reported; the soft NIC's RoCEv2 GID is used).
    pub gid_index: u32,
    /// What to run.
    pub params: Params,
    /// How long to keep retrying the TCP connect while the server starts.
    pub connect_timeout: Duration,
    /// `-e`: sleep on CQ events instead of busy polling (this side only:
    /// not part of `params`, which the server adopts).
    pub use_event: bool,
}

/// Runs the client against `opts.host`: opens the device, connects (retrying
/// for `opts.connect_timeout` while the server starts), runs.
///
/// # Errors
/// [`PerfError`]: verbs (the device first, before any connect), resolve,
/// connect, completion (e.g. RETRY_EXC_ERR when the server vanishes),
/// exchange, validation.
pub fn run_client(opts: &ClientOpts, hooks: &mut Progress<'_>) -> Result<Report, PerfError> {
    let (l, init) = checked_bring_up(opts)?;
    let stream = dial(opts)?;
    run(stream, l, init, opts, hooks)
}

/// The parameters checked, then the device, buffer and QP brought up.
fn checked_bring_up(opts: &ClientOpts) -> Result<(Local, InitQp), PerfError> {
    let p = &opts.params;
    check_params(p)?;
    check_event(p.test, opts.use_event)?;
    bring_up(
        opts.provider,
        &opts.device,
        &opts.soft,
        p,
        buf_len(p),
        opts.use_event,
    )
}

/// The TCP connection to the server: the host resolved once, the connect
/// tried again every 50 ms until `opts.connect_timeout` has passed.
fn dial(opts: &ClientOpts) -> Result<TcpStream, PerfError> {
    let host = opts.host.as_str();
    let addrs: Vec<std::net::SocketAddr> = match (host, opts.port).to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => {
            let words = e.to_string();
            return Err(PerfError::Resolve {
                host: host.to_string(),
                detail: words
                    .strip_prefix("failed to lookup address information: ")
                    .unwrap_or(&words)
                    .to_string(),
            });
        }
    };
    let start = Instant::now();
    loop {
        match TcpStream::connect(&addrs[..]) {
            Ok(s) => return Ok(s),
            Err(_) if start.elapsed() < opts.connect_timeout => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(PerfError::connect(opts.params.test, host, opts.port, &e)),
        }
    }
}

/// Runs the client over `stream`, already connected to a server (the
/// caller chose how: a supervisor that authenticates its peers, say);
/// `opts.host`, `port` and `connect_timeout` are not used.
///
/// # Errors
/// As [`run_client`]; [`PerfError::Cancelled`] when `hooks.cancel` is set.
pub fn client_on(
    stream: TcpStream,
    opts: &ClientOpts,
    hooks: &mut Progress<'_>,
) -> Result<Report, PerfError> {
    let (l, init) = checked_bring_up(opts)?;
    run(stream, l, init, opts, hooks)
}

/// The client's run over a connected stream with its QP in INIT.
fn run(
    stream: TcpStream,
    mut l: Local,
    init: InitQp,
    opts: &ClientOpts,
    hooks: &mut Progress<'_>,
) -> Result<Report, PerfError> {
    let p = &opts.params;
    let stop = hooks.stop();
    let mut c = Lines::new(stream)?;
    c.send(&p.to_line())?;
    c.send(&format!("QP {}", l.info.to_line()))?;
    let remote = QpInfo::from_line(&c.expect("QP")?)?;
    connect(&mut l, init, &remote)?;
    let h = header("client", &l, &remote, p, opts.gid_index);
    if let Some(f) = hooks.on_header.as_mut() {
        f(&h);
    }
    let mut rows = Vec::new();
    let validated = p.validate.then_some(true);
    let mut client_recvs = 0u32;
    let n = p.sizes.len();
    for (k, &size) in p.sizes.iter().enumerate() {
        stop.check()?;
        c.send(&format!("SIZE {size}"))?;
        c.expect("GO")?;
        let mut prog = |f: f64| {
            if let Some(cb) = hooks.on_progress.as_mut() {
                cb(&Step {
                    size,
                    index: k + 1,
                    sizes: n,
                    done: (k as f64 + f.clamp(0.0, 1.0)) / n as f64,
                });
            }
        };
        let (row, count) = if p.test.is_bw() {
            let (r, count) = client_bw(&l, &remote, p, size, &mut prog, &stop)?;
            (Row::Bw(r), count)
        } else {
            let mut samples =
                client_lat(&l, &remote, p, size, &mut client_recvs, &mut prog, &stop)?;
            let count = samples.len() as u64;
            let r = lat_row(size, &mut samples).ok_or_else(|| {
                PerfError::Params("no latency samples (duration too short?)".into())
            })?;
            (Row::Lat(r), count)
        };
        if p.validate && matches!(p.test, Test::ReadBw | Test::ReadLat) {
            let got = l.buf().to_vec(0..size)?;
            if got != pattern(size) {
                return Err(PerfError::Validation(format!(
                    "READ of {size} bytes brought back other bytes than the server's pattern"
                )));
            }
        }
        c.send(&format!("DONE {count}"))?;
        let verdict = c.recv()?;
        if let Some(why) = verdict.strip_prefix("BAD ") {
            return Err(PerfError::Validation(format!("server: {why}")));
        } else if verdict != "OK" {
            return Err(unexpected("OK", &verdict));
        }
        rows.push(row);
    }
    c.send("END")?;
    let _ = c.recv();
    let qp_counters = l.qp_counters();
    let device_counters = l.device_counters();
    Ok(Report {
        header: h,
        results: rows,
        control: l.teardown(),
        validated,
        qp_counters,
        device_counters,
    })
}
