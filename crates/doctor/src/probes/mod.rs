//! Active probes: exercise a device through the Verbs API (`rdmakit-verbs`)
//! the way an application would: a full memory-registration and QP-creation
//! test, which a device that merely shows up in `ibv_devinfo` can still fail.
//!
//! Unlike the rules, probes touch a device; they run outside
//! [`crate::report::Report::build`] (which stays a pure function of host
//! facts) and their results, plain data, are attached with
//! [`crate::report::Report::with_probes`]:
//!
//! * MR registration at 4 KiB … 64 MiB, skipping sizes above the
//!   RLIMIT_MEMLOCK limit passed in [`ProbeConfig::memlock_limit`];
//! * QP bring-up RESET → INIT → RTR → RTS for RC and UD;
//! * loopback traffic with data checks: RC SEND, WRITE, READ, fetch-and-add,
//!   compare-and-swap, UD SEND;
//! * a short latency (8-byte RC SEND ping-pong) and bandwidth (64 KiB RC
//!   WRITE) sample.
//!
//! Every object a probe creates is destroyed before [`run`] returns; on a
//! soft device the resource counts before and after are compared and a
//! difference is a failed probe.
//!
//! ```
//! use rdmakit_doctor::probes::{run, ProbeConfig};
//! use rdmakit_verbs::{Context, DeviceConfig};
//! let ctx = Context::open_soft(DeviceConfig::default()).unwrap();
//! let r = run(&ctx, &ProbeConfig::quick());
//! assert!(r.results.iter().all(|p| p.passed), "{r:#?}");
//! ```

mod leaks;
mod library;
mod traffic;

pub use leaks::{
    soft_headroom_findings, soft_leak_findings, soft_registry, with_soft_headroom, with_soft_leaks,
    with_soft_registry, SoftLeak, SoftRegistry, SoftUsage,
};
pub use library::{library_load_finding, with_library_load_error};

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use rdmakit_soft::ResourceCounts;
use rdmakit_verbs::{Access, Context, Error as VerbsError, PortState};

/// How reports label the soft NIC: probed, but not a device of the host.
pub const SOFT_LABEL: &str = "rdmakit soft NIC in userspace, not a host device";

/// What the probes do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeConfig {
    /// RLIMIT_MEMLOCK in bytes; `None` when unlimited or not enforced (root).
    pub memlock_limit: Option<u64>,
    /// MR sizes to register, smallest first.
    pub mr_sizes: Vec<usize>,
    /// Ping-pong round trips of the latency sample.
    pub latency_iters: usize,
    /// 64 KiB WRITEs of the bandwidth sample.
    pub bw_iters: usize,
    /// How long to wait for any one completion.
    pub timeout: Duration,
}

impl Default for ProbeConfig {
    fn default() -> ProbeConfig {
        ProbeConfig {
            memlock_limit: None,
            mr_sizes: (0..=14).map(|i| 4096usize << i).collect(), // 4 KiB … 64 MiB
            latency_iters: 200,
            bw_iters: 128,
            timeout: Duration::from_secs(5),
        }
    }
}

impl ProbeConfig {
    /// Fewer iterations (tests, doc examples).
    pub fn quick() -> ProbeConfig {
        ProbeConfig {
            latency_iters: 20,
            bw_iters: 16,
            ..ProbeConfig::default()
        }
    }
}

/// What a probe exercises (decides the finding code when it fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// Memory registration (RDK-P001).
    MemoryRegistration,
    /// QP state transitions (RDK-P002).
    QpBringup,
    /// Loopback traffic and data checks (RDK-P003).
    Traffic,
    /// Latency / bandwidth sample (RDK-P003).
    Performance,
    /// Resource counts back to where they were (RDK-P002).
    Cleanup,
}

/// One probe's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeResult {
    /// e.g. `"mr.reg 4 MiB"`, `"qp.rc RESET->INIT->RTR->RTS"`, `"rc.write"`.
    pub name: String,
    pub kind: ProbeKind,
    pub passed: bool,
    /// Not run (e.g. above the memlock limit); `passed` is true then.
    pub skipped: bool,
    /// Wall time in microseconds.
    pub duration_us: u64,
    /// What was done or measured, or what went wrong.
    pub detail: String,
    /// The verb that failed (`ibv_reg_mr`), when a verb failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
    /// Its errno name (`ENOMEM`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// The stack layer the failure belongs to (`application` for data mismatches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
}

/// The probes of one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeReport {
    /// Device name (`soft0`).
    pub device: String,
    /// What the device is, e.g. [`SOFT_LABEL`].
    pub label: String,
    /// `"N: STATE LINK_LAYER MTU"` per port.
    pub ports: Vec<String>,
    /// The memlock limit honoured (bytes), null when unlimited.
    pub memlock_limit: Option<u64>,
    pub results: Vec<ProbeResult>,
}

impl ProbeReport {
    /// Whether every probe passed (or was skipped).
    pub fn passed(&self) -> bool {
        self.results.iter().all(|r| r.passed)
    }

    /// The results of one kind.
    pub fn of(&self, kind: ProbeKind) -> impl Iterator<Item = &ProbeResult> {
        self.results.iter().filter(move |r| r.kind == kind)
    }
}

/// A failure inside a probe: a verb error or a check of ours.
#[derive(Debug)]
pub(crate) enum Fail {
    Verbs(VerbsError),
    Check(String),
}

impl From<VerbsError> for Fail {
    fn from(e: VerbsError) -> Fail {
        Fail::Verbs(e)
    }
}

pub(crate) type PResult<T> = Result<T, Fail>;

/// Times `f` and turns its outcome into a result.
pub(crate) fn probe(
    name: impl Into<String>,
    kind: ProbeKind,
    f: impl FnOnce() -> PResult<String>,
) -> ProbeResult {
    let t = Instant::now();
    let r = f();
    let duration_us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
    let mut p = ProbeResult {
        name: name.into(),
        kind,
        passed: true,
        skipped: false,
        duration_us,
        detail: String::new(),
        verb: None,
        errno: None,
        layer: None,
    };
    match r {
        Ok(d) => p.detail = d,
        Err(Fail::Verbs(e)) => {
            p.passed = false;
            p.detail = e.to_string();
            p.verb = Some(e.verb.to_string());
            p.errno = Some(e.errno.name().to_string());
            p.layer = Some(e.layer.to_string());
        }
        Err(Fail::Check(d)) => {
            p.passed = false;
            p.detail = d;
            p.layer = Some("application".into());
        }
    }
    p
}

fn size_text(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

/// A port state as `ibv_port_state` names it, without the prefix: "ACTIVE".
fn port_state_name(s: PortState) -> &'static str {
    match s {
        PortState::Down => "DOWN",
        PortState::Init => "INIT",
        PortState::Armed => "ARMED",
        PortState::Active => "ACTIVE",
    }
}

/// "PD 1, MR 0, CQ 2, QP 2, SRQ 0, AH 0": live objects of each type.
fn counts_text(c: &ResourceCounts) -> String {
    format!(
        "PD {}, MR {}, CQ {}, QP {}, SRQ {}, AH {}",
        c.pd, c.mr, c.cq, c.qp, c.srq, c.ah
    )
}

/// Describes the ports of `ctx` like the report's device lines.
fn ports(ctx: &Context) -> Vec<String> {
    let Ok(a) = ctx.query_device() else {
        return Vec::new();
    };
    (1..=a.phys_port_cnt)
        .map(|p| match ctx.query_port(p) {
            Ok(pa) => format!(
                "{p}: {} {} active_mtu {}",
                port_state_name(pa.state),
                pa.link_layer.name(),
                pa.active_mtu.bytes()
            ),
            Err(e) => format!("{p}: {e}"),
        })
        .collect()
}

/// Runs every probe on `ctx` and restores its resource counts.
pub fn run(ctx: &Arc<Context>, cfg: &ProbeConfig) -> ProbeReport {
    let before = ctx.soft().map(|d| d.resource_counts());
    let mut results = Vec::new();
    mr_probes(ctx, cfg, &mut results);
    traffic::run(ctx, cfg, &mut results);
    let after = ctx.soft().map(|d| d.resource_counts());
    results.push(probe("resources.restored", ProbeKind::Cleanup, || {
        match (before, after) {
            (Some(b), Some(a)) if a == b => Ok(format!(
                "resource counts back to where they were: {}",
                counts_text(&a)
            )),
            (Some(b), Some(a)) => Err(Fail::Check(format!(
                "resource counts changed: before {}; after {}",
                counts_text(&b),
                counts_text(&a)
            ))),
            _ => Ok("the provider does not report resource counts".into()),
        }
    }));
    let label = if ctx.soft().is_some() {
        SOFT_LABEL.to_string()
    } else {
        "host device".to_string()
    };
    ProbeReport {
        device: ctx.name(),
        label,
        ports: ports(ctx),
        memlock_limit: cfg.memlock_limit,
        results,
    }
}

fn mr_probes(ctx: &Arc<Context>, cfg: &ProbeConfig, out: &mut Vec<ProbeResult>) {
    let pd = match ctx.alloc_pd() {
        Ok(pd) => pd,
        Err(e) => {
            out.push(probe("mr.alloc_pd", ProbeKind::MemoryRegistration, || {
                Err(e.into())
            }));
            return;
        }
    };
    for &size in &cfg.mr_sizes {
        let name = format!("mr.reg {}", size_text(size as u64));
        if let Some(limit) = cfg.memlock_limit.filter(|l| size as u64 > *l) {
            out.push(ProbeResult {
                name,
                kind: ProbeKind::MemoryRegistration,
                passed: true,
                skipped: true,
                duration_us: 0,
                detail: format!(
                    "skipped: above RLIMIT_MEMLOCK ({}); ibv_reg_mr would fail with ENOMEM \
                     (raise it: ulimit -l, limits.conf memlock)",
                    size_text(limit)
                ),
                verb: None,
                errno: None,
                layer: None,
            });
            continue;
        }
        out.push(probe(name, ProbeKind::MemoryRegistration, || {
            let buf = pd.alloc_buf(size, Access::all())?;
            let (lkey, rkey) = (buf.mr().lkey(), buf.mr().rkey());
            buf.write(0, b"head")?;
            buf.write(size - 4, b"tail")?;
            if buf.to_vec(0..4)? != b"head" || buf.to_vec(size - 4..size)? != b"tail" {
                return Err(Fail::Check("registered buffer does not read back".into()));
            }
            buf.close()?; // ibv_dereg_mr, then the memory is freed
            Ok(format!(
                "registered and deregistered {} (lkey {lkey:#x}, rkey {rkey:#x})",
                size_text(size as u64)
            ))
        }));
    }
}
