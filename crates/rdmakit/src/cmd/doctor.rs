//! `rdmakit doctor` (run every check and report), `explain` (what a code,
//! errno, verb:errno or WC status means) and `irq` (per RDMA device, its
//! interrupt vectors, the CPUs they land on, the device's NUMA node, and what
//! the doctor's IRQ checks conclude): the doctor crate's commands.

use std::io::Write as _;
use std::time::Duration;

use rdmakit_doctor::assemble::RawOptions;
use rdmakit_doctor::explain;
use rdmakit_doctor::health::{Edge, NodeCheck, Options, Verdict};
use rdmakit_doctor::npd;
use rdmakit_doctor::render::{self, HumanOptions};
use rdmakit_doctor::views::irq::IrqView;
use rdmakit_fleet::slurm::check::{self, HealthCheck, SlurmEnv};
use rdmakit_fleet::slurm::frame;
use rdmakit_report::progress::Progress;
use rdmakit_vocab::exit::Exit;

use super::{ReplayArgs, SourceArgs};

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
    /// Report a CNP storm (RDK-N014) when CNPs sent or handled since --baseline exceed this
    /// percent of the port's packets.
    #[arg(long, value_name = "PCT", default_value_t = 1.0)]
    cnp_storm_pct: f64,
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
    /// Also read each RoCE link's optical module (ethtool -m): tens of ms per module,
    /// taken one after another under the kernel's RTNL lock. Replays always use them.
    #[arg(long, conflicts_with_all = ["npd", "slurm_health_check"])]
    optics: bool,
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

pub fn run(a: Args) -> anyhow::Result<Exit> {
    if a.list_checks {
        anstream::stdout().write_all(render::list_checks(width()).as_bytes())?;
        return Ok(Exit::Ok);
    }
    let o = Options {
        source: a.source.spec(),
        raw: RawOptions {
            expect_rate: a.expect_rate,
            netdev: a.netdev.as_deref(),
            memlock_min: &a.memlock_min,
            usage_warn: a.usage_warn,
            usage_error: a.usage_error,
            cnp_storm_pct: a.cnp_storm_pct,
            severity: &a.severity,
            fail_on: &a.fail_on,
        },
        baseline: a.baseline.clone(),
        device: a.device.clone(),
        probe: a.probe,
        no_probe: a.no_probe,
        npd: a.npd,
        health_check: a.slurm_health_check,
        record: a.frame_bundle,
        optics: a.optics,
    };
    let edge = Edge::from_env(format!("rdmakit {}", env!("CARGO_PKG_VERSION")));
    let check = NodeCheck::from_options(o, edge).map_err(anyhow::Error::msg)?;
    let fail_on = check.settings.fail_on;
    if a.npd {
        let deadline = npd::deadline(a.npd_deadline).map_err(anyhow::Error::msg)?;
        let answer = npd::run(check, &a.npd_state, deadline);
        if let Some(note) = &answer.note {
            eprintln!("rdmakit: {note}");
        }
        writeln!(std::io::stdout(), "{}", answer.line)?;
        return Ok(Exit::from_code(answer.exit).unwrap_or(Exit::Failed));
    }
    if a.slurm_health_check {
        let hc = HealthCheck {
            check,
            timeout: Duration::from_secs(a.health_timeout),
            dry_run: a.dry_run,
            env: SlurmEnv::from_env(),
        };
        let code = check::run(hc, &mut |l| println!("{l}"));
        return Ok(Exit::from_code(code).unwrap_or(Exit::Failed));
    }
    let spinner = Progress::spinner("collecting host facts");
    let c = check.run(&|m| spinner.message(m))?;
    drop(spinner);
    if let Some(note) = c.misses_note() {
        eprintln!("rdmakit: note: {note}");
    }
    if let Some(path) = &a.html {
        let meta = super::page_meta(c.recorded_unix);
        super::write_page(path, rdmakit_report::doctor::render_checked(&c, &meta))?;
    }
    let text = match a.frame {
        true => frame::of_check(&c, std::env::var("SLURMD_NODENAME").ok().as_deref()),
        false => {
            let opts = HumanOptions {
                verbose: a.verbose,
                width: width(),
            };
            render::output(&c.report, a.json, opts)
        }
    };
    anstream::stdout().write_all(text.as_bytes())?;
    Ok(Verdict::of(&c.report.findings, fail_on).exit())
}

#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// RDK-K003, ib-umad-missing, ENOSPC, 28, ibv_create_qp:ENOSPC, wc:12, RETRY_EXC_ERR.
    query: String,
    /// Print the explanation as JSON.
    #[arg(long, conflicts_with = "raw")]
    json: bool,
    /// Print a finding code's page as the Markdown source (crates/doctor/findings/CODE.md).
    #[arg(long)]
    raw: bool,
}

pub fn explain(a: ExplainArgs) -> anyhow::Result<Exit> {
    let q = explain::parse_query(&a.query)?;
    let e = explain::explain(&q);
    let text = explain::output(&e, a.json, a.raw, width());
    anstream::stdout().write_all(text.as_bytes())?;
    Ok(Exit::Ok)
}

#[derive(clap::Args, Debug)]
pub struct IrqArgs {
    /// Print the view as JSON (schema rdmakit.irq/v1).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    source: ReplayArgs,
}

/// Exit 1 when the doctor's IRQ checks fail, 0 otherwise, 2 when rdmakit
/// itself failed (`IrqView::exit`).
pub fn irq(a: IrqArgs) -> anyhow::Result<Exit> {
    let (opened, opts) = a.source.open(None, None)?;
    let facts = rdmakit_host::collect::collect(opened.source(), &opts);
    let tool = format!("rdmakit {}", env!("CARGO_PKG_VERSION"));
    let view = IrqView::of_facts(&facts, &tool, opened.label());
    anstream::stdout().write_all(view.output(a.json).as_bytes())?;
    Ok(view.exit())
}

/// The columns human output wraps to: `COLUMNS` when set to a number, else
/// the terminal's width when stdout is one, else 80 (read here, at the edge).
pub(super) fn width() -> u16 {
    let columns = std::env::var("COLUMNS").ok();
    let terminal = terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| w.0);
    render::width_from(columns.as_deref(), terminal)
}
