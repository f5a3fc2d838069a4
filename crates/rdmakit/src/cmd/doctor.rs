//! `rdmakit doctor`: run every check and report.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use rdmakit_doctor::checks::Config;
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::counters::Baseline;
use rdmakit_doctor::probes::{self, ProbeConfig, ProbeReport, SOFT_LABEL};
use rdmakit_doctor::render::{self, HumanOptions};
use rdmakit_doctor::report::Report;
use rdmakit_fleet::slurm::frame;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;
use rdmakit_host::parse::proc::Limit;
use rdmakit_host::source::Recorder;

use super::{Opened, SourceArgs};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub(super) source: SourceArgs,
    /// Print the report as JSON (schema rdmakit.doctor/v1, see docs/json-schema.md).
    #[arg(long)]
    json: bool,
    /// Show every evidence line, every next command and every check's status.
    #[arg(short, long)]
    verbose: bool,
    /// Exit 1 when a finding at or above this severity is found: error, warning, info, never.
    #[arg(long, value_name = "LEVEL", default_value = "error")]
    fail_on: String,
    /// List the checks and the codes they emit, then exit.
    #[arg(long)]
    list_checks: bool,
    /// The port rate the fabric should run at, in Gb/s (e.g. 100, 200, 400).
    #[arg(long, value_name = "GBPS")]
    expect_rate: Option<f64>,
    /// The netdev RDMA traffic should use (for the RoCE GID index recommendation).
    #[arg(long, value_name = "IF")]
    netdev: Option<String>,
    /// Warn when RLIMIT_MEMLOCK is below this many bytes (suffixes K, M, G).
    #[arg(long, value_name = "BYTES", default_value = "64M")]
    memlock_min: String,
    /// Warn when QPs/CQs/MRs/PDs in use reach this percent of the device limit (RDK-R002).
    #[arg(long, value_name = "PCT", default_value_t = 80.0)]
    usage_warn: f64,
    /// Error when they reach this percent (RDK-R002).
    #[arg(long, value_name = "PCT", default_value_t = 95.0)]
    usage_error: f64,
    /// Override a code's severity, e.g. --severity RDK-H008=warning (repeatable).
    #[arg(long, value_name = "CODE=LEVEL")]
    severity: Vec<String>,
    /// Run active probes (MR registration, QP bring-up, loopback traffic). Default: on the
    /// soft NIC when the host has no RDMA device; on host devices (through rdma-core's
    /// libibverbs) only when asked.
    #[arg(long, conflicts_with = "no_probe")]
    probe: bool,
    /// Never run active probes.
    #[arg(long)]
    no_probe: bool,
    /// Check only this device: the soft NIC's name (soft0) runs the checklist on it alone.
    #[arg(long, value_name = "DEV", conflicts_with_all = ["from", "root"])]
    device: Option<String>,
    /// node-problem-detector custom plugin: one line, exit 0 ok / 1 problem / 2 unknown
    /// (no probes; docs/npd.md).
    #[arg(long, conflicts_with_all = ["json", "device", "list_checks"])]
    npd: bool,
    /// --npd: where the last completed check is kept between runs.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/var/lib/rdmakit/npd-state.json"
    )]
    npd_state: String,
    /// --npd: seconds the check may take before the answer is "unknown" (keep it below
    /// the plugin's timeout in NPD's config).
    #[arg(long, value_name = "SECS", default_value_t = 15.0)]
    npd_deadline: f64,
    /// Also write the report as one self-contained HTML file (checklist, findings, IRQs per
    /// CPU, device topology; the data embedded as JSON).
    #[arg(long, value_name = "FILE")]
    html: Option<String>,
    /// Judge port counters by their growth since this earlier `rdmakit collect` bundle
    /// (or capture directory) of the same host, instead of by their totals.
    #[arg(long, value_name = "BUNDLE", conflicts_with_all = ["device", "npd"])]
    baseline: Option<String>,
    /// Print the JSON report as a frame for `rdmakit fleet sweep`: gzip + base64 in
    /// short lines, which srun relays intact (docs/slurm.md).
    #[arg(long, conflicts_with_all = ["json", "npd", "device", "list_checks"])]
    frame: bool,
    /// With --frame: also send a bundle of everything the doctor read (one collection).
    #[arg(long, requires = "frame")]
    frame_bundle: bool,
    /// Slurm HealthCheckProgram / Prolog: fast checks only; drain this node on a finding
    /// at or above --fail-on, resume a drain rdmakit set when healthy (docs/slurm.md).
    #[arg(long, conflicts_with_all = ["json", "frame", "npd", "html", "device", "list_checks", "verbose", "baseline"])]
    pub(super) slurm_health_check: bool,
    /// With --slurm-health-check: seconds the checks may take before the node counts as hung
    /// (Slurm kills the program at 60).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 30,
        requires = "slurm_health_check"
    )]
    pub(super) health_timeout: u64,
    /// With --slurm-health-check: print the decision, change nothing in Slurm.
    #[arg(long, requires = "slurm_health_check")]
    pub(super) dry_run: bool,
}

/// The probe configuration for this host: its RLIMIT_MEMLOCK (none for root,
/// whose CAP_IPC_LOCK ignores it).
fn probe_config(facts: &rdmakit_host::model::HostFacts) -> ProbeConfig {
    let root = facts.identity.as_ref().is_some_and(|i| i.euid == 0);
    let memlock_limit = match facts.memlock.effective() {
        Some((Limit::Bytes(b), _)) if !root => Some(b),
        _ => None,
    };
    ProbeConfig {
        memlock_limit,
        ..ProbeConfig::default()
    }
}

/// Opens soft NIC `name` and runs the probes on it.
fn probe_soft(name: &str, cfg: &ProbeConfig) -> anyhow::Result<ProbeReport> {
    let p = rdmakit_verbs::SoftProvider::from_env().with_context(|| format!("opening {name}"))?;
    let ctx = rdmakit_verbs::Context::open(&p, name).with_context(|| format!("opening {name}"))?;
    Ok(probes::run(&ctx, cfg))
}

/// The active probes on the host's own devices, through rdma-core's
/// libibverbs (the rdma-core provider): one probe report per device that
/// opens; a library that does not load is RDK-L001, a device that does not
/// open a note (the device and provider rules say why).
fn probe_host(mut report: Report, names: &[String], cfg: &ProbeConfig, dcfg: &Config) -> Report {
    use rdmakit_verbs::ibverbs::{IbverbsProvider, DEFAULT_LIBRARY, LIBRARY_ENV};
    let p = match IbverbsProvider::load() {
        Ok(p) => p,
        Err(e) => {
            let looked_for = std::env::var(LIBRARY_ENV)
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| DEFAULT_LIBRARY.to_string());
            return probes::with_library_load_error(report, &looked_for, &e.to_string(), dcfg);
        }
    };
    for name in names {
        match rdmakit_verbs::Context::open(&p, name) {
            Ok(ctx) => report = report.with_probes(probes::run(&ctx, cfg), dcfg),
            Err(e) => report.notes.push(format!(
                "--probe: {name} could not be opened through {}: {e}",
                p.library().path()
            )),
        }
    }
    report
}

/// The port counters of the `--baseline` bundle, with its age relative to the
/// collection being judged when both times are known.
fn load_baseline(path: &str, current: &Opened, live: bool) -> anyhow::Result<Baseline> {
    let args = SourceArgs {
        root: None,
        from: Some(path.to_string()),
        pid: None,
        kernel_log: None,
    };
    let (opened, opts) = args.open().with_context(|| format!("--baseline {path}"))?;
    let facts = collect(opened.source(), &opts);
    if facts.devices.iter().all(|d| d.ports.is_empty()) {
        bail!("--baseline {path}: holds no RDMA port, so there are no counters to compare with");
    }
    let then = match &opened {
        Opened::Bundle(b, _) => b.header.created_unix,
        Opened::Live(..) => 0,
    };
    let now = match current {
        Opened::Bundle(b, _) => b.header.created_unix,
        Opened::Live(..) if live => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        Opened::Live(..) => 0,
    };
    let age = (then > 0 && now >= then).then(|| now - then);
    Ok(Baseline::from_facts(&facts, opened.label(), age))
}

/// Parses "64M", "8388608", "1G", "512K".
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&s[..s.len() - 1], 1 << 20),
        Some('g' | 'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num
        .parse()
        .with_context(|| format!("{s:?} is not a size (e.g. 64M, 8388608)"))?;
    n.checked_mul(mult).context("size too large")
}

/// Validated settings (the second step of argument parsing).
#[derive(Clone)]
pub(super) struct Settings {
    pub(super) cfg: Config,
    pub(super) fail_on: Option<Severity>,
}

pub(super) fn settings(a: &Args) -> anyhow::Result<Settings> {
    let mut cfg = Config {
        expect_rate_gbps: a.expect_rate,
        netdev: a.netdev.clone(),
        memlock_warn: parse_size(&a.memlock_min).context("--memlock-min")?,
        usage_warn_pct: a.usage_warn,
        usage_error_pct: a.usage_error,
        ..Config::default()
    };
    if !(a.usage_warn > 0.0 && a.usage_warn <= a.usage_error && a.usage_error <= 100.0) {
        bail!(
            "--usage-warn {} / --usage-error {}: need 0 < warn <= error <= 100",
            a.usage_warn,
            a.usage_error
        );
    }
    if let Some(r) = a.expect_rate {
        if !(r.is_finite() && r > 0.0) {
            bail!("--expect-rate {r}: must be a positive number of Gb/s");
        }
    }
    for o in &a.severity {
        let Some((code, level)) = o.split_once('=') else {
            bail!("--severity {o:?}: expected CODE=LEVEL, e.g. RDK-H008=warning");
        };
        let c = Code::lookup(code).with_context(|| {
            format!("--severity: unknown code {code:?} (rdmakit doctor --list-checks)")
        })?;
        let l = Severity::parse(level).with_context(|| {
            format!("--severity: unknown level {level:?} (info, warning, error)")
        })?;
        cfg.overrides.insert(c, l);
    }
    let fail_on = match a.fail_on.to_ascii_lowercase().as_str() {
        "never" | "none" => None,
        other => Some(Severity::parse(other).with_context(|| {
            format!("--fail-on {other:?}: expected error, warning, info or never")
        })?),
    };
    Ok(Settings { cfg, fail_on })
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if a.list_checks {
        anstream::stdout().write_all(render::list_checks().as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut s = settings(&a)?;
    if a.npd {
        return super::npd::run(&a.source, &s.cfg, s.fail_on, &a.npd_state, a.npd_deadline);
    }
    if a.slurm_health_check {
        return super::health::run(a, s);
    }
    let (opened, opts) = a.source.open()?;
    let spinner = super::progress::Spinner::start("collecting host facts");
    let (facts, records) = if a.frame_bundle {
        let rec = Recorder::new(opened.source());
        let facts = collect(&rec, &opts);
        (facts, Some((rec.into_records(), opts.clone())))
    } else {
        (collect(opened.source(), &opts), None)
    };
    if let Some(path) = &a.baseline {
        let live = a.source.from.is_none() && a.source.root.is_none();
        s.cfg.baseline = Some(load_baseline(path, &opened, live)?);
    }
    note_bundle_misses(&a, &opened);
    // Active probes: by default only on a live host without RDMA devices (the soft NIC).
    let report = build_report(&a, &s, &facts, &opened, true, Some(&spinner))?;
    drop(spinner);
    if let Some(path) = &a.html {
        let taken = match &opened {
            Opened::Bundle(b, _) => Some(b.header.created_unix).filter(|t| *t > 0),
            Opened::Live(..) => None,
        };
        super::html::doctor(path, &facts, &report, taken)?;
    }
    let mut out = anstream::stdout();
    if a.frame {
        let node = super::health::node_name();
        // The same JSON as --json (groups included), so a sweep's node is the doctor's.
        let json = render::json(&report);
        let mut text = frame::encode(frame::Kind::Report, &node, json.as_bytes());
        if let Some((recs, opts)) = records {
            let tool = format!("rdmakit {} ({})", env!("CARGO_PKG_VERSION"), opened.label());
            let bundle = Bundle::new(Bundle::header_now(&tool, opts), recs);
            text.push_str(&frame::encode(
                frame::Kind::Bundle,
                &node,
                &bundle.to_json(),
            ));
        }
        out.write_all(text.as_bytes())?;
    } else if a.json {
        writeln!(out, "{}", render::json(&report))?;
    } else {
        let opts = HumanOptions {
            verbose: a.verbose,
            ..HumanOptions::default()
        };
        out.write_all(render::human(&report, opts).as_bytes())?;
    }
    let failed = s.fail_on.is_some_and(|l| report.fails(l));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A bundle without answers to some questions says so (a capture directory holds
/// only what it captured, so it does not).
pub(super) fn note_bundle_misses(a: &Args, opened: &Opened) {
    let from_dir = a
        .source
        .from
        .as_deref()
        .is_some_and(|p| std::path::Path::new(p).is_dir());
    if let Opened::Bundle(b, _) = opened {
        if b.misses() > 0 && !from_dir {
            eprintln!(
                "rdmakit: note: the bundle had no answer for {} questions (recorded by another \
                 rdmakit version or a partial capture); those facts count as absent",
                b.misses()
            );
        }
    }
}

/// The report over `facts`: the checks, plus active probes when asked (`--probe`),
/// or — when `auto_probe` — on a live host without RDMA devices (the soft NIC).
/// `spinner` (on a terminal) names the probes under way.
pub(super) fn build_report(
    a: &Args,
    s: &Settings,
    facts: &rdmakit_host::model::HostFacts,
    opened: &Opened,
    auto_probe: bool,
    spinner: Option<&super::progress::Spinner>,
) -> anyhow::Result<Report> {
    let phase = |msg: String| {
        if let Some(sp) = spinner {
            sp.set_message(&msg);
        }
    };
    let tool = format!("rdmakit {}", env!("CARGO_PKG_VERSION"));
    // The soft NIC's own names, whatever provider the tools default to.
    let soft_names = super::soft_names();
    let report = if let Some(dev) = &a.device {
        if !soft_names.contains(dev) {
            let host: Vec<&str> = facts.devices.iter().map(|d| d.name.as_str()).collect();
            bail!(
                "--device {dev}: not a device rdmakit can check alone (soft NIC: {}; host \
                 devices {host:?} are checked together by plain `rdmakit doctor`)",
                soft_names.join(", ")
            );
        }
        if a.no_probe {
            bail!("--device {dev}: the soft NIC's checklist is its active probes; drop --no-probe");
        }
        phase(format!("active probes on {dev}"));
        let p = probe_soft(dev, &probe_config(facts))?;
        let kernel = facts.kernel.release.text().map(str::to_string);
        let r = Report::for_probed_device(p, &s.cfg, &tool, kernel);
        let r = probes::with_soft_leaks(r, &probes::soft_leaks(dev), &s.cfg);
        probes::with_soft_headroom(r, &probes::soft_usage(dev), &s.cfg)
    } else {
        let mut report = Report::build(facts, &s.cfg, &tool, opened.label());
        if let (Some(input), Some(inv)) = (
            a.source.from.as_ref().or(a.source.root.as_ref()),
            report.inventory.as_mut(),
        ) {
            inv.name_from_input(input);
        }
        if let Some(b) = &s.cfg.baseline {
            let shared = facts
                .devices
                .iter()
                .flat_map(|d| d.ports.iter().map(move |p| format!("{}/{}", d.name, p.num)))
                .filter(|k| b.ports.contains_key(k))
                .count();
            report.notes.push(if shared == 0 {
                format!(
                    "--baseline {}: no port of this host is in it; counters were judged by \
                     their totals",
                    b.describe()
                )
            } else {
                format!(
                    "port counters judged by their growth since the baseline {} ({shared} \
                     port(s) in both)",
                    b.describe()
                )
            });
        }
        let live = a.source.from.is_none() && a.source.root.is_none();
        let no_host_device = facts.devices.is_empty();
        let want = !a.no_probe && (a.probe || (auto_probe && live && no_host_device));
        if want && !live {
            report
                .notes
                .push("--probe: active probes need the live host; not run on a replay".into());
        } else if want && !no_host_device {
            let names: Vec<String> = facts.devices.iter().map(|d| d.name.clone()).collect();
            phase(format!("active probes on {}", names.join(", ")));
            report = probe_host(report, &names, &probe_config(facts), &s.cfg);
        } else if want {
            if let Some(name) = soft_names.first() {
                phase(format!("active probes on {name}"));
            }
            match soft_names.first() {
                Some(name) => match probe_soft(name, &probe_config(facts)) {
                    Ok(p) => {
                        report = report.with_probes(p, &s.cfg);
                        report = probes::with_soft_leaks(report, &probes::soft_leaks(name), &s.cfg);
                        report =
                            probes::with_soft_headroom(report, &probes::soft_usage(name), &s.cfg);
                    }
                    Err(e) => report
                        .notes
                        .push(format!("the {SOFT_LABEL} could not be probed: {e:#}")),
                },
                None => report.notes.push("no soft NIC to probe".into()),
            }
        }
        report
    };
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("8388608").unwrap(), 8388608);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999999G").is_err());
    }
}
