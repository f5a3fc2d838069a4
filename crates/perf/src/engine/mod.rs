//! The test engines: bring-up with timings (here), the client
//! ([`client`]) with its bandwidth ([`bandwidth`]) and latency ([`latency`])
//! runs, and the server ([`server`]).

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmakit_proto::AddressHandle;
use rdmakit_verbs::{
    Access, Ah, CompChannel, ConnectOpts, Context, Cq, DeviceConfig, Errno, Gid, InitQp, MrBuf,
    Mtu, Pd, ProviderChoice, Qp, QpType, RecvWr, SendOp, SendRequest, SendWr, Sge, UdDest, Wc,
    WcStatus,
};

use crate::proto::{unexpected, Lines, Params, QpInfo};
use crate::stats::{bw_row, lat_row};
use crate::{ControlTimings, Header, PerfError, Report, Row, Test};

mod bandwidth;
mod client;
mod latency;
mod server;
pub use client::{client_on, run_client, ClientOpts};

pub use server::{run_server, serve_on, ServerOpts};

/// No completion (or peer activity) for this long ends a run with an error
/// instead of hanging. A vanished RC peer surfaces far earlier, as
/// RETRY_EXC_ERR after the QP's retries.
const STALL: Duration = Duration::from_secs(20);

/// Event mode (`-e`): the longest sleep on the completion channel, so a
/// loop still sees the end of a `-D` run, a cancel and a stall in time.
const EVENT_WAIT: Duration = Duration::from_millis(100);

/// The length of the bar [`Progress::reporting`] moves along.
pub const PERMILLE: u64 = 1000;

/// A callback receiving the header block.
pub type HeaderHook<'a> = Box<dyn FnMut(&Header) + 'a>;

/// A callback hearing where the run is.
pub type StepHook<'a> = Box<dyn FnMut(&Step) + 'a>;

/// Callbacks of a run (all optional).
#[derive(Default)]
pub struct Progress<'a> {
    /// [`run_server`]: called with the TCP port once it listens there (and
    /// so waits for its client).
    pub on_listening: Option<Box<dyn FnMut(u16) + 'a>>,
    /// Called once the QPs are connected, before the measurement.
    pub on_header: Option<HeaderHook<'a>>,
    /// Where the run is, at most every 100 ms.
    pub on_progress: Option<StepHook<'a>>,
    /// Set from another thread to end the run early: the engine's loops
    /// check it and return [`PerfError::Cancelled`] (a supervisor that
    /// also shuts the TCP stream down wakes a side blocked on it).
    pub cancel: Option<Arc<AtomicBool>>,
}

/// Where a run is, as [`Progress::on_progress`] hears it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// The message size under way, in bytes.
    pub size: usize,
    /// Its place among the run's sizes, from 1.
    pub index: usize,
    /// How many sizes the run has (1 without `-a`).
    pub sizes: usize,
    /// Fraction of the whole run done, 0..=1.
    pub done: f64,
}

impl<'a> Progress<'a> {
    /// The hooks of a run a person watches: unless `quiet` (`--json`), `say`
    /// gets what perftest prints while it runs — the server's "waiting" once
    /// it listens (a port in use fails first), the header once connected —
    /// and `meter` shows each step's label ([`crate::render::progress_label`])
    /// and the thousandths of the run done (a bar [`PERMILLE`] long).
    pub fn reporting(
        test: Test,
        quiet: bool,
        say: &'a dyn Fn(&str),
        meter: &'a dyn rdmakit_vocab::progress::Meter,
    ) -> Progress<'a> {
        Progress {
            on_listening: Some(Box::new(move |_port: u16| {
                if !quiet {
                    say(crate::render::waiting());
                }
            })),
            on_header: Some(Box::new(move |h: &Header| {
                if !quiet {
                    say(&crate::render::header(h));
                }
            })),
            on_progress: Some(Box::new(move |s: &Step| {
                meter.message(crate::render::progress_label(test, s));
                let n = (s.done.clamp(0.0, 1.0) * PERMILLE as f64) as u64;
                meter.position(n, None);
            })),
            cancel: None,
        }
    }

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
    /// Event mode (`-e`): the CQ's completion channel, slept on while the
    /// CQ is empty (None: busy polling).
    channel: Option<Arc<CompChannel>>,
    qp: Option<Qp>,
    buf: Option<MrBuf>,
    info: QpInfo,
    t: ControlTimings,
    device: String,
    /// UD: the address handle of the peer and its QPN.
    ud: Option<(Arc<Ah>, u32)>,
}

impl Local {
    /// Polls the CQ into `wcs` like [`poll`]; in event mode an empty CQ is
    /// armed, polled again (a completion may have landed in between) and
    /// slept on for at most `bound`, then polled once more. Without a
    /// channel it is [`poll`]: the caller decides whether to yield.
    fn reap(&self, wcs: &mut Vec<Wc>, bound: Duration) -> Result<usize, PerfError> {
        let n = poll(&self.cq, wcs)?;
        let Some(ch) = self.channel.as_ref().filter(|_| n == 0) else {
            return Ok(n);
        };
        self.cq.req_notify(false)?;
        let n = poll(&self.cq, wcs)?;
        if n > 0 {
            return Ok(n);
        }
        match ch.get_cq_event(Some(bound.min(EVENT_WAIT))) {
            Ok(_) => {}
            Err(e) if e.errno == Errno::ETIMEDOUT => return Ok(0),
            Err(e) => return Err(e.into()),
        }
        poll(&self.cq, wcs)
    }

    /// Whether this side sleeps on a completion channel (`-e`).
    fn event(&self) -> bool {
        self.channel.is_some()
    }

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
        let soft = self._ctx.soft()?;
        let s = soft.qp_stats(qp.qpn())?;
        Some(crate::QpCounters {
            ring: soft.qp_on_ring(qp.qpn()).unwrap_or(false),
            ..crate::QpCounters::from(&s)
        })
    }

    /// The soft NIC's transport counters, by name (empty on other
    /// providers).
    fn device_counters(&self) -> std::collections::BTreeMap<String, u64> {
        self._ctx.soft().map_or_else(Default::default, |d| {
            d.counters()
                .transport()
                .iter()
                .map(|&(n, v)| (n.to_string(), v))
                .collect()
        })
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
/// to INIT (every step timed). With `event` (`-e`) the CQ gets a completion
/// channel, and the soft NIC runs without busy polling: its progress thread
/// receives while the application sleeps, as a kernel driver would.
fn bring_up(
    provider: ProviderChoice,
    device: &Option<String>,
    soft: &DeviceConfig,
    p: &Params,
    buf_len: usize,
    event: bool,
) -> Result<(Local, InitQp), PerfError> {
    let ctx = match device {
        Some(n) => rdmakit_verbs::open_device(provider, n)?,
        None => Context::open_soft(DeviceConfig {
            busy_poll: soft.busy_poll && !event,
            ..soft.clone()
        })?,
    };
    let mut t = ControlTimings::default();
    let pd = ctx.alloc_pd()?;
    let s = Instant::now();
    let buf = pd.alloc_buf(buf_len, Access::all())?;
    t.reg_mr = us(s.elapsed());
    t.mr_bytes = buf_len;
    let cqe = (p.tx_depth + p.rx_depth + 16).max(64);
    let channel = match event {
        true => Some(ctx.create_comp_channel()?),
        false => None,
    };
    let s = Instant::now();
    let cq = ctx.create_cq(cqe, channel.as_ref())?;
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
            channel,
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
        use_event: l.event(),
        local: l.info,
        remote: *remote,
    }
}

/// Buffer: two regions of the largest message (the second receives
/// write-lat echoes).
fn buf_len(p: &Params) -> usize {
    2 * p.max_size() + 2 * GRH
}

/// `-e` needs a completion to sleep on: write-lat sees the peer's echo in
/// its memory, not as a completion, so each side would spin anyway.
fn check_event(test: Test, event: bool) -> Result<(), PerfError> {
    if event && test == Test::WriteLat {
        return Err(PerfError::Params(EVENT_WRITE_LAT.into()));
    }
    Ok(())
}

/// Why write-lat refuses `-e`.
pub(crate) const EVENT_WRITE_LAT: &str =
    "write-lat sees each echo in memory, not as a completion: -e (sleep on CQ events) \
     cannot apply; use send-lat or read-lat";

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
