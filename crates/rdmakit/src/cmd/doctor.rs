//! `rdmakit doctor`: run every check and report.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use rdmakit_doctor::assemble::{RawOptions, Settings};
use rdmakit_doctor::health::{Edge, NodeCheck, Probes, Verdict};
use rdmakit_doctor::npd;
use rdmakit_doctor::render::{self, HumanOptions};
use rdmakit_fleet::slurm::check::{self, HealthCheck, SlurmEnv};
use rdmakit_fleet::slurm::{env, frame};
use rdmakit_host::open::SourceSpec;

use super::SourceArgs;
use rdmakit_report::progress::Progress;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,
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
    slurm_health_check: bool,
    /// With --slurm-health-check: seconds the checks may take before the node counts as hung
    /// (Slurm kills the program at 60).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 30,
        requires = "slurm_health_check"
    )]
    health_timeout: u64,
    /// With --slurm-health-check: print the decision, change nothing in Slurm.
    #[arg(long, requires = "slurm_health_check")]
    dry_run: bool,
}

/// Validated settings (the second step of argument parsing).
fn settings(a: &Args) -> anyhow::Result<Settings> {
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

/// The check the flags ask for, with what the environment says of the soft NIC
/// and libibverbs read here, at the edge. The health checks (--npd,
/// --slurm-health-check) never probe by default; --npd never does.
fn node_check(a: &Args, settings: Settings) -> NodeCheck {
    let s = &a.source;
    NodeCheck {
        source: SourceSpec {
            root: s.root.clone(),
            from: s.from.clone(),
            pid: s.pid,
            kernel_log: s.kernel_log.clone(),
            from_flag: "--from",
        },
        settings,
        baseline: a.baseline.clone(),
        probes: match a.npd {
            true => Probes::default(),
            false => Probes {
                device: a.device.clone(),
                probe: a.probe,
                no_probe: a.no_probe,
                auto: !a.slurm_health_check,
            },
        },
        record: a.frame_bundle,
        edge: Edge {
            tool: format!("rdmakit {}", env!("CARGO_PKG_VERSION")),
            soft: rdmakit_verbs::SoftProvider::from_env(),
            soft_names: super::soft_names(),
            library: super::ibverbs_library(),
        },
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if a.list_checks {
        anstream::stdout().write_all(render::list_checks(width()).as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let s = settings(&a)?;
    let fail_on = s.fail_on;
    let check = node_check(&a, s);
    let env = |k: &str| std::env::var(k).ok();
    if a.npd {
        let d = a.npd_deadline;
        anyhow::ensure!(
            d.is_finite() && d > 0.0,
            "--npd-deadline {d}: must be a positive number of seconds"
        );
        let answer = npd::run(check, &a.npd_state, Duration::from_secs_f64(d));
        if let Some(note) = &answer.note {
            eprintln!("rdmakit: {note}");
        }
        writeln!(std::io::stdout(), "{}", answer.line)?;
        return Ok(ExitCode::from(answer.exit));
    }
    if a.slurm_health_check {
        let hc = HealthCheck {
            check,
            timeout: Duration::from_secs(a.health_timeout),
            dry_run: a.dry_run,
            env: SlurmEnv {
                path: env("PATH"),
                slurm_conf: env("SLURM_CONF"),
                slurmd_nodename: env("SLURMD_NODENAME"),
            },
        };
        return Ok(ExitCode::from(check::run(hc, &mut |l| println!("{l}"))));
    }
    let spinner = Progress::spinner("collecting host facts");
    let c = check.run(&|m| spinner.message(m))?;
    drop(spinner);
    if c.misses > 0 {
        eprintln!(
            "rdmakit: note: the bundle had no answer for {} questions (recorded by another \
             rdmakit version or a partial capture); those facts count as absent",
            c.misses
        );
    }
    if let Some(path) = &a.html {
        let meta = super::html::meta(c.recorded_unix);
        super::html::write(path, rdmakit_report::doctor::render_checked(&c, &meta))?;
    }
    let mut out = anstream::stdout();
    if a.frame {
        let hostname = c.node.hostname.as_deref().unwrap_or_default();
        let node = env::node_name(env("SLURMD_NODENAME").as_deref(), hostname);
        // The same JSON as --json (groups included), so a sweep's node is the doctor's.
        let json = render::json(&c.report);
        let bundle = c.bundle.map(|b| b.to_json());
        let text = frame::doctor_output(&node, json.as_bytes(), bundle.as_deref());
        out.write_all(text.as_bytes())?;
    } else if a.json {
        writeln!(out, "{}", render::json(&c.report))?;
    } else {
        let opts = HumanOptions {
            verbose: a.verbose,
            width: width(),
        };
        out.write_all(render::human(&c.report, opts).as_bytes())?;
    }
    Ok(ExitCode::from(
        Verdict::of(&c.report.findings, fail_on).exit_code(),
    ))
}

/// The columns human output wraps to: `COLUMNS` when set to a number, else
/// the terminal's width when stdout is one, else 80 (read here, at the edge).
pub(super) fn width() -> u16 {
    let columns = std::env::var("COLUMNS").ok();
    let terminal = terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| w.0);
    render::width_from(columns.as_deref(), terminal)
}
