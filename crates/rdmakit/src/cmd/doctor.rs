//! `rdmakit doctor`: run every check and report.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::bail;
pub(super) use rdmakit_doctor::assemble::Settings;
use rdmakit_doctor::assemble::{assemble, Assembly, RawOptions};
use rdmakit_doctor::counters::Baseline;
use rdmakit_doctor::render::{self, HumanOptions};
use rdmakit_doctor::report::Report;
use rdmakit_fleet::slurm::frame;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;
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
        default_value = "/var/lib/rdmakit/npd-state.json",
        requires = "npd"
    )]
    npd_state: String,
    /// --npd: seconds the check may take before the answer is "unknown" (keep it below
    /// the plugin's timeout in NPD's config).
    #[arg(long, value_name = "SECS", default_value_t = 15.0, requires = "npd")]
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

/// The port counters of the `--baseline` bundle, with its age relative to the
/// collection being judged when both times are known.
fn load_baseline(path: &str, current: &Opened, live: bool) -> anyhow::Result<Baseline> {
    let (opened, opts) = super::ReplayArgs::open_named("--baseline", path)?;
    let facts = collect(opened.source(), &opts);
    if facts.devices.iter().all(|d| d.ports.is_empty()) {
        bail!("--baseline {path}: holds no RDMA port, so there are no counters to compare with");
    }
    let then = opened.recorded_unix();
    let now = current.recorded_unix().or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        (live && matches!(current, Opened::Live(..))).then(|| now.map_or(0, |d| d.as_secs()))
    });
    let age = match (then, now) {
        (Some(t), Some(n)) if n >= t => Some(n - t),
        _ => None,
    };
    Ok(Baseline::from_facts(&facts, opened.label(), age))
}

/// Validated settings (the second step of argument parsing).
pub(super) fn settings(a: &Args) -> anyhow::Result<Settings> {
    Settings::parse(&RawOptions {
        expect_rate: a.expect_rate,
        netdev: a.netdev.as_deref(),
        memlock_min: &a.memlock_min,
        usage_warn: a.usage_warn,
        usage_error: a.usage_error,
        severity: &a.severity,
        fail_on: &a.fail_on,
    })
    .map_err(anyhow::Error::msg)
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if a.list_checks {
        anstream::stdout().write_all(render::list_checks(width()).as_bytes())?;
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
        super::html::doctor(path, &facts, &report, opened.recorded_unix())?;
    }
    let mut out = anstream::stdout();
    if a.frame {
        let node = super::health::node_name();
        // The same JSON as --json (groups included), so a sweep's node is the doctor's.
        let json = render::json(&report);
        let bundle = records.map(|(recs, opts)| {
            let tool = format!("rdmakit {} ({})", env!("CARGO_PKG_VERSION"), opened.label());
            Bundle::new(Bundle::header_now(&tool, opts), recs).to_json()
        });
        let text = frame::doctor_output(&node, json.as_bytes(), bundle.as_deref());
        out.write_all(text.as_bytes())?;
    } else if a.json {
        writeln!(out, "{}", render::json(&report))?;
    } else {
        let opts = HumanOptions {
            verbose: a.verbose,
            width: width(),
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

/// The columns human output wraps to: `COLUMNS` when set to a number, else
/// the terminal's width when stdout is one, else 80 (read here, at the edge).
pub(super) fn width() -> u16 {
    let columns = std::env::var("COLUMNS").ok();
    let terminal = terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| w.0);
    render::width_from(columns.as_deref(), terminal)
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

/// The report over `facts` (`rdmakit_doctor::assemble`), with what the
/// environment says of the soft NIC and libibverbs read here, at the edge.
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
    let library = super::ibverbs_library();
    let assembly = Assembly {
        device: a.device.as_deref(),
        probe: a.probe,
        no_probe: a.no_probe,
        auto_probe,
        live: a.source.from.is_none() && a.source.root.is_none(),
        input: a.source.from.as_deref().or(a.source.root.as_deref()),
        source_label: opened.label(),
        tool: &tool,
        soft: &rdmakit_verbs::SoftProvider::from_env(),
        soft_names: &super::soft_names(),
        library: &library,
    };
    assemble(facts, &s.cfg, &assembly, &phase).map_err(anyhow::Error::msg)
}
