//! The test engines: bring-up with timings, the per-size runs of both sides.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmakit_proto::AddressHandle;
use rdmakit_verbs::{
    Access, Ah, ConnectOpts, Context, Cq, DeviceConfig, Gid, InitQp, MrBuf, Mtu, Pd,
    ProviderChoice, Qp, QpType, RecvWr, SendOp, SendRequest, SendWr, Sge, UdDest, Wc, WcStatus,
};

use crate::proto::{io, Lines, Params, QpInfo};
use crate::stats::{bw_row, lat_row};
use crate::{ControlTimings, Header, PerfError, Report, Row, Test};

/// No completion (or peer activity) for this long ends a run with an error
/// instead of hanging. A vanished RC peer surfaces far earlier, as
/// RETRY_EXC_ERR after the QP's retries.
const STALL: Duration = Duration::from_secs(20);

/// A callback receiving the header block.
pub type HeaderHook<'a> = Box<dyn FnMut(&Header) + 'a>;

/// Callbacks of a run (both optional).
#[derive(Default)]
pub struct Progress<'a> {
    /// Called once the QPs are connected, before the measurement.
    pub on_header: Option<HeaderHook<'a>>,
    /// Fraction of the whole run done, 0..=1, at most every 100 ms.
    pub on_progress: Option<Box<dyn FnMut(f64) + 'a>>,
    /// Set from another thread to end the run early: the engine's loops
    /// check it and return [`PerfError::Cancelled`] (a supervisor that
    /// also shuts the TCP stream down wakes a side blocked on it).
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Progress<'_> {
    fn stop(&self) -> Stop {
        Stop(self.cancel.clone())
    }
}

/// The cancel flag as the loops check it.
#[derive(Clone)]
struct Stop(Option<Arc<AtomicBool>>);

impl Stop {
    fn check(&self) -> Result<(), PerfError> {
        match &self.0 {
            Some(c) if c.load(Ordering::Relaxed) => Err(PerfError::Cancelled),
            _ => Ok(()),
        }
    }
}

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
}

/// The server's options.
#[derive(Clone, Debug)]
pub struct ServerOpts {
    /// TCP port to listen on.
    pub port: u16,
    /// Device (`None`: the soft NIC).
    pub device: Option<String>,
    /// The provider `device` is opened through.
    pub provider: ProviderChoice,
    /// The soft NIC's configuration when `device` is `None` (its `addr`
    /// `None`: the host device's address); the CLI's is
    /// `DeviceConfig::from_env()`.
    pub soft: DeviceConfig,
    /// GID index (reported).
    pub gid_index: u32,
    /// The test this server accepts.
    pub test: Test,
}

/// Q_Key of the UD tests.
const UD_QKEY: u32 = 0x1111_1111;

/// Bytes a UD receive gets in front of the message (the GRH area).
const GRH: usize = 40;

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The byte pattern of validated runs.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i % 251) as u8) ^ 0x5a).collect()
}

fn mtu_of(bytes: u32) -> Result<Mtu, PerfError> {
    Ok(match bytes {
        256 => Mtu::Mtu256,
        512 => Mtu::Mtu512,
        1024 => Mtu::Mtu1024,
        2048 => Mtu::Mtu2048,
        4096 => Mtu::Mtu4096,
        m => {
            return Err(PerfError::Params(format!(
                "MTU {m}: one of 256, 512, 1024, 2048, 4096"
            )))
        }
    })
}

/// This side's verbs objects.
struct Local {
    _ctx: Arc<Context>,
    _pd: Arc<Pd>,
    cq: Arc<Cq>,
    qp: Option<Qp>,
    buf: Option<MrBuf>,
    info: QpInfo,
    t: ControlTimings,
    device: String,
    /// UD: the address handle of the peer and its QPN.
    ud: Option<(Arc<Ah>, u32)>,
}

impl Local {
    fn qp(&self) -> &Qp {
        // Present from connect() until teardown(), which consumes self.
        self.qp.as_ref().expect("QP present until teardown")
    }

    /// A signaled send WR (with the UD destination on UD).
    fn wr(&self, id: u64, op: SendOp, sge: Sge) -> SendWr {
        let mut w = SendWr::new(id, op, vec![sge]);
        if let Some((ah, qpn)) = &self.ud {
            w.ud = Some(UdDest {
                ah: AddressHandle(ah.handle()),
                remote_qpn: *qpn,
                remote_qkey: UD_QKEY,
            });
        }
        w
    }

    /// [`Local::wr`] for the `n`th echo (from 1), signaled every `every`th:
    /// nothing waits for an echo's completion.
    fn signaled_every(&self, n: u64, op: SendOp, sge: Sge, every: u64) -> SendWr {
        let mut w = self.wr(n, op, sge);
        w.signaled = n % every == 0;
        w
    }

    fn buf(&self) -> &MrBuf {
        // Present until teardown(), which consumes self.
        self.buf.as_ref().expect("buffer present until teardown")
    }

    /// The soft NIC's counters of this side's QP (None on other providers).
    fn qp_counters(&self) -> Option<crate::QpCounters> {
        let qp = self.qp.as_ref()?;
        let s = self._ctx.soft()?.qp_stats(qp.qpn())?;
        Some(crate::QpCounters::from(&s))
    }

    /// Destroys the QP and the MR, timing both.
    fn teardown(mut self) -> ControlTimings {
        let t = Instant::now();
        drop(self.qp.take());
        self.t.destroy_qp = us(t.elapsed());
        let t = Instant::now();
        drop(self.buf.take());
        self.t.dereg_mr = us(t.elapsed());
        self.t
    }
}

/// Opens the device, registers `buf_len` bytes, creates CQ and QP, moves it
/// to INIT (every step timed).
fn bring_up(
    provider: ProviderChoice,
    device: &Option<String>,
    soft: &DeviceConfig,
    p: &Params,
    buf_len: usize,
) -> Result<(Local, InitQp), PerfError> {
    let ctx = match device {
        Some(n) => rdmakit_verbs::open_device(provider, n)?,
        None => Context::open_soft(soft.clone())?,
    };
    let mut t = ControlTimings::default();
    let pd = ctx.alloc_pd()?;
    let s = Instant::now();
    let buf = pd.alloc_buf(buf_len, Access::all())?;
    t.reg_mr = us(s.elapsed());
    t.mr_bytes = buf_len;
    let cqe = (p.tx_depth + p.rx_depth + 16).max(64);
    let s = Instant::now();
    let cq = ctx.create_cq(cqe, None)?;
    t.create_cq = us(s.elapsed());
    let s = Instant::now();
    let qp = pd
        .qp_builder(if p.ud { QpType::Ud } else { QpType::Rc }, &cq)
        // Headroom of 32: the soft NIC can show a completion a moment
        // before it frees the work queue slot, so reposting at once on
        // a full queue would fail with ENOMEM.
        .max_send_wr(p.tx_depth.max(16) + 32)
        .max_recv_wr(p.rx_depth.max(1) + 32)
        .max_inline_data(p.inline)
        .build()?;
    t.create_qp = us(s.elapsed());
    let o = ConnectOpts {
        path_mtu: mtu_of(p.mtu)?,
        // perftest's default. 7 is not "retry forever" for retry_cnt (only for
        // rnr_retry; IBA 9.7.5.2.8): rdmakit-proto counts it down like rxe, so
        // a vanished peer surfaces as RETRY_EXC_ERR after 8 tries.
        retry_cnt: 7,
        qkey: UD_QKEY,
        // 4.096 us * 2^16 = 268 ms per try (perftest: 14, 67 ms): a soft
        // NIC's progress thread on a loaded 2-core host can miss 67 ms.
        timeout: 16,
        ..ConnectOpts::default()
    };
    let s = Instant::now();
    let init = qp.into_init(o)?;
    t.modify_qp_init = us(s.elapsed());
    let ep = init.endpoint()?;
    let info = QpInfo {
        lid: 0,
        qpn: ep.qpn,
        psn: ep.psn,
        rkey: buf.mr().rkey(),
        vaddr: buf.mr().addr(),
        gid: ep.gid.0,
    };
    let device = ctx.name();
    Ok((
        Local {
            _ctx: ctx,
            _pd: pd,
            cq,
            qp: None,
            buf: Some(buf),
            info,
            t,
            device,
            ud: None,
        },
        init,
    ))
}

/// INIT → RTR → RTS towards `remote`.
fn connect(l: &mut Local, init: InitQp, remote: &QpInfo) -> Result<(), PerfError> {
    if init.qp().qp_type() == QpType::Ud {
        l.ud = Some((l._pd.create_ah(Gid(remote.gid))?, remote.qpn));
    }
    let s = Instant::now();
    let rtr = init.connect(&remote.endpoint())?;
    l.t.modify_qp_rtr = us(s.elapsed());
    let s = Instant::now();
    l.qp = Some(rtr.ready_to_send()?);
    l.t.modify_qp_rts = us(s.elapsed());
    Ok(())
}

fn header(role: &str, l: &Local, remote: &QpInfo, p: &Params, gid_index: u32) -> Header {
    Header {
        role: role.into(),
        test: p.test.name().into(),
        title: p.test.title().into(),
        device: l.device.clone(),
        transport: "IB".into(),
        connection: if p.ud { "UD" } else { "RC" }.into(),
        mtu: p.mtu,
        link_type: "Ethernet".into(),
        gid_index,
        inline: p.inline,
        tx_depth: p.tx_depth,
        rx_depth: p.rx_depth,
        cq_mod: p.signal_every(),
        iterations: if p.duration.is_some() { 0 } else { p.iters },
        duration: p.duration,
        validate: p.validate,
        local: l.info,
        remote: *remote,
    }
}

/// Buffer: two regions of the largest message (the second receives
/// write-lat echoes).
fn buf_len(p: &Params) -> usize {
    2 * p.max_size() + 2 * GRH
}

/// Runs the client against `opts.host`.
///
/// # Errors
/// [`PerfError`]: verbs, completion (e.g. RETRY_EXC_ERR when the server
/// vanishes), exchange, validation.
pub fn run_client(opts: &ClientOpts, hooks: &mut Progress<'_>) -> Result<Report, PerfError> {
    check_params(&opts.params)?;
    let start = Instant::now();
    let stream = loop {
        match TcpStream::connect((opts.host.as_str(), opts.port)) {
            Ok(s) => break s,
            Err(e) if start.elapsed() < opts.connect_timeout => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(PerfError::Exchange(format!(
                    "couldn't connect to {}:{}: {e}",
                    opts.host, opts.port
                )))
            }
        }
    };
    client_on(stream, opts, hooks)
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
    let p = &opts.params;
    check_params(p)?;
    let (mut l, init) = bring_up(opts.provider, &opts.device, &opts.soft, p, buf_len(p))?;
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
                cb((k as f64 + f.clamp(0.0, 1.0)) / n as f64);
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
            return Err(PerfError::Exchange(format!("expected OK, got {verdict:?}")));
        }
        rows.push(row);
    }
    c.send("END")?;
    let _ = c.recv();
    let qp_counters = l.qp_counters();
    Ok(Report {
        header: h,
        results: rows,
        control: l.teardown(),
        validated,
        qp_counters,
    })
}

fn check_params(p: &Params) -> Result<(), PerfError> {
    if p.sizes.iter().any(|&s| s == 0 || s > crate::SWEEP_MAX) {
        return Err(PerfError::Params(format!(
            "message sizes must be 1..={}",
            crate::SWEEP_MAX
        )));
    }
    if p.test == Test::AtomicBw && p.sizes.iter().any(|&s| s != 8) {
        return Err(PerfError::Params(
            "atomic-bw moves 8 bytes per message".into(),
        ));
    }
    if p.test == Test::WriteLat && p.sizes.iter().any(|&s| s < 2) {
        return Err(PerfError::Params("write-lat needs at least 2 bytes".into()));
    }
    if p.ud && !matches!(p.test, Test::SendBw | Test::SendLat) {
        return Err(PerfError::Params(format!(
            "{} runs over RC only (UD: send-bw, send-lat)",
            p.test
        )));
    }
    if p.ud && p.sizes.iter().any(|&s| s > p.mtu as usize) {
        return Err(PerfError::Params(format!(
            "UD messages must fit the MTU ({} bytes)",
            p.mtu
        )));
    }
    if p.tx_depth == 0 || p.rx_depth == 0 {
        return Err(PerfError::Params(
            "TX and RX depth must be at least 1".into(),
        ));
    }
    if p.duration.is_none() && p.iters == 0 {
        return Err(PerfError::Params("iterations must be at least 1".into()));
    }
    mtu_of(p.mtu).map(|_| ())
}

/// Polls `cq` into `wcs`; any error status ends the run.
fn poll(cq: &Cq, wcs: &mut Vec<Wc>) -> Result<usize, PerfError> {
    wcs.clear();
    let n = cq.poll_into(wcs, 64)?;
    if let Some(bad) = wcs.iter().find(|w| w.status != WcStatus::Success) {
        return Err(PerfError::completion(bad));
    }
    Ok(n)
}

/// A throttle for progress callbacks.
struct Tick(Instant);

impl Tick {
    fn due(&mut self) -> bool {
        if self.0.elapsed() >= Duration::from_millis(100) {
            self.0 = Instant::now();
            true
        } else {
            false
        }
    }
}

/// An SGE naming `bytes` for an inline send (no lkey: the bytes are copied
/// at post time).
fn inline_sge(bytes: &[u8]) -> Sge {
    Sge {
        addr: bytes.as_ptr() as u64,
        length: bytes.len() as u32,
        lkey: 0,
    }
}

/// The client's operation in `test` against the peer's buffer.
fn op_of(test: Test, remote: &QpInfo) -> SendOp {
    let (remote_addr, rkey) = (remote.vaddr, remote.rkey);
    match test {
        Test::WriteBw | Test::WriteLat => SendOp::Write { remote_addr, rkey },
        Test::ReadBw | Test::ReadLat => SendOp::Read { remote_addr, rkey },
        Test::SendBw | Test::SendLat => SendOp::Send,
        Test::AtomicBw => SendOp::FetchAdd {
            remote_addr,
            rkey,
            add: 1,
        },
    }
}

fn client_bw(
    l: &Local,
    remote: &QpInfo,
    p: &Params,
    size: usize,
    prog: &mut dyn FnMut(f64),
    cancel: &Stop,
) -> Result<(crate::BwResult, u64), PerfError> {
    let op = op_of(p.test, remote);
    let data = pattern(size);
    if p.test != Test::ReadBw {
        l.buf().write(0, &data)?;
    }
    let inline = p.inline as usize >= size && matches!(p.test, Test::WriteBw | Test::SendBw);
    let sge = if inline {
        inline_sge(&data[..size])
    } else {
        l.buf().sge(0..size)?
    };
    let depth = u64::from(p.tx_depth.max(1));
    let every = p.signal_every();
    let qp = l.qp();
    let mut wcs = Vec::with_capacity(64);
    let start = Instant::now();
    let end = p.duration.map(|d| start + Duration::from_secs_f64(d));
    // `done`: sends known complete — completions come in order, so a
    // signaled send's completion completes every send before it.
    let (mut posted, mut done) = (0u64, 0u64);
    let mut tail_signaled = true;
    let (mut last, mut tick) = (start, Tick(start));
    // Peak: best rate over windows of `win` completions.
    let win = depth.max(16);
    let (mut w_start, mut w_done, mut peak) = (start, 0u64, 0f64);
    let mut reqs = Vec::with_capacity(32);
    loop {
        let now = Instant::now();
        let stop = match end {
            Some(e) => now >= e,
            None => posted >= p.iters,
        };
        if !stop && posted - done < depth {
            let mut n = (depth - (posted - done)).min(32);
            if end.is_none() {
                n = n.min(p.iters - posted);
            }
            reqs.clear();
            for i in 0..n {
                let id = posted + i;
                let mut wr = l.wr(id, op, sge);
                wr.signaled = (id + 1) % every == 0 || (end.is_none() && id + 1 == p.iters);
                tail_signaled = wr.signaled;
                reqs.push(SendRequest { wr, inline });
            }
            // SAFETY: inline SGEs cover `data`, alive for this call; the
            // others name the registered buffer, which outlives the QP's use
            // (completions are reaped before it is freed).
            unsafe { qp.post_send(&reqs)? };
            posted += n;
        } else if stop && !tail_signaled {
            // Duration mode ended after an unsignaled send: one more,
            // signaled, so the last sends are known complete.
            let mut wr = l.wr(posted, op, sge);
            wr.signaled = true;
            // SAFETY: as above.
            unsafe { qp.post_send(&[SendRequest { wr, inline }])? };
            posted += 1;
            tail_signaled = true;
        }
        cancel.check()?;
        let got = poll(&l.cq, &mut wcs)? as u64;
        if got > 0 {
            done = wcs.iter().map(|w| w.wr_id + 1).fold(done, u64::max);
            last = Instant::now();
            if done - w_done >= win {
                let dt = last.duration_since(w_start).as_secs_f64();
                if dt > 0.0 {
                    peak = peak.max((done - w_done) as f64 * size as f64 / dt);
                }
                (w_start, w_done) = (last, done);
            }
        } else if last.elapsed() > STALL {
            return Err(PerfError::Stalled(
                STALL,
                format!("{done} of {posted} completed"),
            ));
        } else if posted - done >= depth || stop {
            // Nothing to post and nothing done: let the NIC's threads run
            // (2 shared cores: a spinning poller starves the progress thread).
            std::thread::yield_now();
        }
        if stop && done == posted {
            break;
        }
        if tick.due() {
            prog(match end {
                Some(_) => start.elapsed().as_secs_f64() / p.duration.unwrap_or(1.0),
                None => done as f64 / p.iters as f64,
            });
        }
    }
    let secs = last.duration_since(start).as_secs_f64();
    Ok((bw_row(size, done, secs, peak), done))
}

fn client_lat(
    l: &Local,
    remote: &QpInfo,
    p: &Params,
    size: usize,
    posted_recvs: &mut u32,
    prog: &mut dyn FnMut(f64),
    stop: &Stop,
) -> Result<Vec<f64>, PerfError> {
    let qp = l.qp();
    let buf = l.buf();
    let max = p.max_size();
    let mut data = pattern(size);
    buf.write(0, &data)?;
    let inline = p.inline as usize >= size && p.test != Test::ReadLat;
    let grh = if p.ud { GRH } else { 0 };
    let mut wcs = Vec::with_capacity(64);
    let mut samples = Vec::with_capacity(p.iters.min(1 << 20) as usize);
    let start = Instant::now();
    let end = p.duration.map(|d| start + Duration::from_secs_f64(d));
    let mut tick = Tick(start);
    let recv_wr = |id| -> Result<RecvWr, PerfError> {
        Ok(RecvWr {
            wr_id: id,
            sg_list: vec![buf.sge(max..2 * max + grh)?],
        })
    };
    if p.test == Test::SendLat && *posted_recvs == 0 {
        *posted_recvs = p.rx_depth;
        let wrs = (0..p.rx_depth)
            .map(|i| recv_wr(u64::from(i)))
            .collect::<Result<Vec<_>, _>>()?;
        qp.post_recv(&wrs)?;
    }
    if p.test == Test::WriteLat {
        buf.write(max + size - 1, &[0])?;
    }
    let sq_cap = u64::from(p.tx_depth.max(16));
    let every = p.signal_every();
    // Sends posted, sends known complete (in order: a signaled send's
    // completion completes the unsignaled ones before it), and the count
    // the last signaled send completes.
    let (mut posted, mut sends_done, mut want) = (0u64, 0u64, 0u64);
    let mut early_recv = 0u32;
    let mut i = 0u64;
    // The work requests are built once, like perftest's; the loop sets ids.
    let op = op_of(p.test, remote);
    let sge = if inline {
        inline_sge(&data[..size])
    } else {
        buf.sge(0..size)?
    };
    let mut req = SendRequest {
        wr: l.wr(0, op, sge),
        inline,
    };
    let mut rwr = recv_wr(0)?;
    loop {
        match end {
            Some(e) if Instant::now() >= e => break,
            None if i >= p.iters => break,
            _ => {}
        }
        let marker = (i % 255) as u8 + 1;
        if p.test == Test::WriteLat {
            data[size - 1] = marker;
            if !inline {
                buf.write(size - 1, &[marker])?;
            }
        }
        stop.check()?;
        // Keep the send queue from overflowing: reap send completions.
        while posted - sends_done >= sq_cap {
            stop.check()?;
            poll(&l.cq, &mut wcs)?;
            for w in &wcs {
                if w.is_recv() {
                    early_recv += 1;
                } else {
                    sends_done = sends_done.max(w.wr_id + 1);
                }
            }
        }
        req.wr.wr_id = i;
        req.wr.signaled = (i + 1) % every == 0 || (end.is_none() && i + 1 == p.iters);
        if req.wr.signaled {
            want = i + 1;
        }
        let t0 = Instant::now();
        // SAFETY: an inline SGE covers `data` (never reallocated: only its
        // last byte changes), alive for this call; others name the
        // registered buffer.
        unsafe { qp.post_send(std::slice::from_ref(&req))? };
        posted += 1;
        let mut arrived = false;
        let mut spins = 0u32;
        let mut b = [0u8; 1];
        while !arrived {
            poll(&l.cq, &mut wcs)?;
            for w in &wcs {
                if w.is_recv() {
                    early_recv += 1;
                    if p.validate && w.byte_len as usize != size + grh {
                        return Err(PerfError::Validation(format!(
                            "received {} bytes, expected {size}",
                            w.byte_len
                        )));
                    }
                } else {
                    sends_done = sends_done.max(w.wr_id + 1);
                    if p.test == Test::ReadLat {
                        arrived = true;
                    }
                }
            }
            match p.test {
                Test::SendLat if early_recv > 0 => {
                    early_recv -= 1;
                    arrived = true;
                }
                Test::WriteLat => {
                    buf.read(max + size - 1, &mut b)?;
                    arrived = b[0] == marker;
                }
                _ => {}
            }
            spins += 1;
            if spins % 256 == 0 {
                stop.check()?;
            }
            if spins % 4096 == 0 && t0.elapsed() > STALL {
                return Err(PerfError::Stalled(STALL, format!("iteration {i}")));
            }
        }
        let rtt = us(t0.elapsed());
        samples.push(match p.test {
            Test::ReadLat => rtt,
            _ => rtt / 2.0,
        });
        if p.validate && p.test != Test::ReadLat {
            let got = buf.to_vec(max + grh..max + grh + size - 1)?;
            if got[..] != pattern(size)[..size - 1] {
                return Err(PerfError::Validation(format!(
                    "iteration {i}: the echoed {size} bytes differ from the pattern"
                )));
            }
        }
        if p.test == Test::SendLat {
            rwr.wr_id = i;
            qp.post_recv(std::slice::from_ref(&rwr))?;
        }
        i += 1;
        if tick.due() {
            prog(match end {
                Some(_) => start.elapsed().as_secs_f64() / p.duration.unwrap_or(1.0),
                None => i as f64 / p.iters as f64,
            });
        }
    }
    // Reap the last signaled send so the next size starts clean. (An
    // unsignaled tail of a duration run needs no wait: each send's echo
    // came back, and the next size's first ACK covers it.)
    let t = Instant::now();
    while sends_done < want && t.elapsed() < STALL {
        stop.check()?;
        poll(&l.cq, &mut wcs)?;
        for w in &wcs {
            if !w.is_recv() {
                sends_done = sends_done.max(w.wr_id + 1);
            }
        }
    }
    Ok(samples)
}

/// Waits for one client on `opts.port`, serves its run, returns this side's
/// report (header and control timings; the client measures).
///
/// # Errors
/// [`PerfError`]; `Exchange` when the client asks for another test or goes away.
pub fn run_server(opts: &ServerOpts, hooks: &mut Progress<'_>) -> Result<Report, PerfError> {
    let listener = TcpListener::bind(("0.0.0.0", opts.port)).map_err(|e| {
        PerfError::Exchange(format!("couldn't listen on TCP port {}: {e}", opts.port))
    })?;
    let (stream, _) = listener.accept().map_err(io)?;
    drop(listener);
    serve_on(stream, opts, &|_| Ok(()), hooks)
}

/// Serves one client over `stream`, already accepted (the caller chose
/// how); `opts.port` is not used. `admit` sees the client's parameters
/// first: its error refuses the run (sent to the client as `ERR why`) —
/// a supervisor bounds what a run may cost with it.
///
/// # Errors
/// As [`run_server`]; [`PerfError::Params`] when `admit` refuses;
/// [`PerfError::Cancelled`] when `hooks.cancel` is set.
pub fn serve_on(
    stream: TcpStream,
    opts: &ServerOpts,
    admit: &dyn Fn(&Params) -> Result<(), String>,
    hooks: &mut Progress<'_>,
) -> Result<Report, PerfError> {
    let stop = hooks.stop();
    let mut c = Lines::new(stream)?;
    let p = Params::from_line(&c.recv()?)?;
    if p.test != opts.test {
        let why = format!(
            "the server runs {}, the client asked for {}",
            opts.test, p.test
        );
        let _ = c.send(&format!("ERR {why}"));
        return Err(PerfError::Exchange(why));
    }
    if let Err(e) = check_params(&p) {
        let _ = c.send(&format!("ERR {e}"));
        return Err(e);
    }
    if let Err(why) = admit(&p) {
        let _ = c.send(&format!("ERR {why}"));
        return Err(PerfError::Params(why));
    }
    let remote = QpInfo::from_line(&c.expect("QP")?)?;
    let (mut l, init) = match bring_up(opts.provider, &opts.device, &opts.soft, &p, buf_len(&p)) {
        Ok(x) => x,
        Err(e) => {
            let _ = c.send(&format!("ERR {e}"));
            return Err(e);
        }
    };
    connect(&mut l, init, &remote)?;
    c.send(&format!("QP {}", l.info.to_line()))?;
    let h = header("server", &l, &remote, &p, opts.gid_index);
    if let Some(f) = hooks.on_header.as_mut() {
        f(&h);
    }
    let mut validated = p.validate.then_some(true);
    let mut posted_recvs = 0u32;
    loop {
        stop.check()?;
        let line = c.recv()?;
        if line == "END" {
            let _ = c.send("BYE");
            break;
        }
        let size: usize = line
            .strip_prefix("SIZE ")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| PerfError::Exchange(format!("expected SIZE, got {line:?}")))?;
        if size == 0 || size > p.max_size() {
            return Err(PerfError::Exchange(format!(
                "size {size} outside the run's sizes"
            )));
        }
        let verdict = serve_size(&l, &remote, &p, size, &mut c, &mut posted_recvs, &stop)?;
        if let Err(why) = &verdict {
            validated = Some(false);
            c.send(&format!("BAD {why}"))?;
        } else {
            c.send("OK")?;
        }
    }
    let qp_counters = l.qp_counters();
    Ok(Report {
        header: h,
        results: Vec::new(),
        control: l.teardown(),
        validated,
        qp_counters,
    })
}

fn parse_done(line: &str) -> Result<u64, PerfError> {
    line.strip_prefix("DONE ")
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| PerfError::Exchange(format!("expected DONE, got {line:?}")))
}

/// The server's part of one size. Outer error: the run failed; inner error:
/// the data did not validate.
fn serve_size(
    l: &Local,
    remote: &QpInfo,
    p: &Params,
    size: usize,
    c: &mut Lines,
    posted_recvs: &mut u32,
    stop: &Stop,
) -> Result<Result<(), String>, PerfError> {
    let buf = l.buf();
    let qp = l.qp();
    let max = p.max_size();
    let pat = pattern(size);
    let grh = if p.ud { GRH } else { 0 };
    match p.test {
        Test::ReadBw | Test::ReadLat => buf.write(0, &pat)?,
        Test::AtomicBw => buf.write(0, &0u64.to_le_bytes())?,
        Test::WriteBw => buf.write(0, &vec![0u8; size])?,
        Test::WriteLat => buf.write(size - 1, &[0])?,
        Test::SendBw | Test::SendLat => {
            let want = p.rx_depth.saturating_sub(*posted_recvs);
            let wrs = (0..want)
                .map(|i| {
                    Ok(RecvWr {
                        wr_id: u64::from(i),
                        sg_list: vec![buf.sge(0..max + grh)?],
                    })
                })
                .collect::<Result<Vec<_>, PerfError>>()?;
            if !wrs.is_empty() {
                qp.post_recv(&wrs)?;
            }
            *posted_recvs += want;
        }
    }
    c.send("GO")?;
    let mut bad: Option<String> = None;
    match p.test {
        Test::WriteBw | Test::ReadBw | Test::ReadLat | Test::AtomicBw => {
            let n = parse_done(&c.recv()?)?;
            if p.validate && p.test == Test::WriteBw && buf.to_vec(0..size)? != pat {
                bad = Some(format!("the {size} bytes written differ from the pattern"));
            }
            if p.validate && p.test == Test::AtomicBw {
                let v = buf.read_u64(0)?;
                if v != n {
                    bad = Some(format!("{n} fetch-and-adds of 1 left {v}, not {n}"));
                }
            }
        }
        Test::SendBw | Test::SendLat | Test::WriteLat => {
            let mut wcs = Vec::with_capacity(64);
            let (mut got, mut done_at): (u64, Option<u64>) = (0, None);
            let mut last = Instant::now();
            let mut spins = 0u32;
            let mut done_when = Instant::now();
            let mut seen = 0u8;
            let mut b = [0u8; 1];
            let echo_sge = |len: usize| buf.sge(grh..grh + len);
            let echo_op = SendOp::Write {
                remote_addr: remote.vaddr + max as u64,
                rkey: remote.rkey,
            };
            let inline = p.inline as usize >= size;
            let every = p.signal_every();
            // Built once, like perftest's: the loop only sets the ids (no
            // allocation on the echo's critical path).
            let mut echo = vec![0u8; size];
            let mut rwr = RecvWr {
                wr_id: 0,
                sg_list: vec![buf.sge(0..max + grh)?],
            };
            let mut pong = SendRequest {
                wr: l.wr(
                    0,
                    SendOp::Send,
                    if inline {
                        inline_sge(&echo[..size])
                    } else {
                        echo_sge(size)?
                    },
                ),
                inline,
            };
            loop {
                if poll(&l.cq, &mut wcs)? > 0 {
                    last = Instant::now();
                    for w in &wcs {
                        if !w.is_recv() {
                            continue;
                        }
                        got += 1;
                        *posted_recvs -= 1;
                        if p.validate && bad.is_none() {
                            if w.byte_len as usize != size + grh {
                                bad = Some(format!(
                                    "received {} bytes, expected {size}",
                                    (w.byte_len as usize).saturating_sub(grh)
                                ));
                            } else if p.test == Test::SendBw && buf.to_vec(grh..grh + size)? != pat
                            {
                                bad = Some(format!("message {got}: bytes differ from the pattern"));
                            }
                        }
                        rwr.wr_id = got;
                        if p.test == Test::SendLat {
                            if inline {
                                // The pong's inline bytes: the ping's.
                                buf.read(grh, &mut echo)?;
                            }
                            // Repost first: the next ping may follow our pong at once.
                            qp.post_recv(std::slice::from_ref(&rwr))?;
                            *posted_recvs += 1;
                            pong.wr.wr_id = got;
                            pong.wr.signaled = got % every == 0;
                            // SAFETY: an inline SGE covers `echo`, alive (and
                            // not reallocated) for the whole loop.
                            unsafe { qp.post_send(std::slice::from_ref(&pong))? };
                        } else {
                            qp.post_recv(std::slice::from_ref(&rwr))?;
                            *posted_recvs += 1;
                        }
                    }
                }
                if p.test == Test::WriteLat {
                    buf.read(size - 1, &mut b)?;
                    if b[0] != 0 && b[0] != seen {
                        seen = b[0];
                        got += 1;
                        last = Instant::now();
                        if p.validate
                            && bad.is_none()
                            && buf.to_vec(0..size - 1)? != pat[..size - 1]
                        {
                            bad = Some(format!("write {got}: bytes differ from the pattern"));
                        }
                        let data = buf.to_vec(0..size)?;
                        let sge = if inline {
                            inline_sge(&data[..size])
                        } else {
                            echo_sge(size)?
                        };
                        // SAFETY: an inline SGE covers `data`, alive for the call.
                        unsafe {
                            qp.post_send(&[SendRequest {
                                wr: l.signaled_every(got, echo_op, sge, every),
                                inline,
                            }])?
                        };
                    }
                }
                if let Some(n) = done_at {
                    // UD is unreliable: what has not arrived shortly after
                    // the client's DONE was dropped (no receive posted).
                    if got >= n || (p.ud && done_when.elapsed() > Duration::from_millis(200)) {
                        break;
                    }
                }
                spins += 1;
                if spins % 1024 == 0 {
                    stop.check()?;
                }
                if spins % 1024 == 0 && done_at.is_none() {
                    if let Some(line) = c.try_recv()? {
                        done_at = Some(parse_done(&line)?);
                        done_when = Instant::now();
                    }
                }
                if spins % 1024 == 0 && last.elapsed() > STALL {
                    return Err(PerfError::Stalled(
                        STALL,
                        format!("{got} messages received"),
                    ));
                }
            }
            // Reap our echoes' completions before the next size.
            let _ = poll(&l.cq, &mut wcs);
        }
    }
    Ok(match bad {
        Some(why) => Err(why),
        None => Ok(()),
    })
}
