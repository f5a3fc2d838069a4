//! `rdmakit fleet`: the doctor across a cluster. Each subcommand parses its
//! arguments into settings, calls crates/fleet and renders through it; `report`,
//! `baseline` and `sweep` here, the pairwise matrix (`agent`, `pairwise`) in its
//! module.

pub mod pairwise;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use rdmakit_fleet::baseline::Baselined;
use rdmakit_fleet::input::{self, LoadOptions, Loaded};
use rdmakit_fleet::pairwise::auth::{Token, TokenError};
use rdmakit_fleet::render;
use rdmakit_fleet::report::{FleetReport, Options};
use rdmakit_fleet::slurm::run::{self, Event, SweepRequest};
use rdmakit_report::progress::Progress;
use rdmakit_vocab::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Aggregate node reports: nodes needing attention, findings by code, cohorts, drift,
    /// outliers, changes since a previous sweep.
    Report(ReportInputs),
    /// Write the fleet's majority inventory per cohort, for a later `report --expect`.
    Baseline(BaselineArgs),
    /// Run the doctor on every node of a Slurm partition as one job step (srun's output
    /// is the transport) and report; silent, garbled or hung nodes are `missing`.
    Sweep(SweepArgs),
    /// The pairwise test agent: serves bandwidth/latency tests to a coordinator holding the run's token.
    Agent(pairwise::AgentArgs),
    /// Measure every pair of agents (or a ring), localize a slow node or a slow link.
    Pairwise(pairwise::Args),
}

/// `rdmakit fleet report INPUT...`.
#[derive(clap::Args, Debug)]
pub struct ReportInputs {
    /// Directories of `rdmakit collect` bundles, capture directories, `rdmakit doctor --json`
    /// files, JSON lines (one doctor report per line); gzip is fine.
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<String>,
    #[command(flatten)]
    report: ReportArgs,
    #[command(flatten)]
    fabric: FabricArgs,
}

/// The InfiniBand fabric beside the fleet (`fleet report`, `fleet pairwise`).
#[derive(clap::Args, Debug)]
pub struct FabricArgs {
    /// A saved `rdmakit fabric discover --json --routes`: each node needing attention is
    /// matched to its CA by GUID and its switch port named (pairwise: the route of each
    /// slow pair, by the CAs' node descriptions).
    #[arg(long, value_name = "FABRIC.json")]
    fabric: Option<String>,
    /// Saved counters (`rdmakit fabric counters --json`, or fabric check --save): once, the
    /// counters now (nonzero error counters are named); twice, before and after (what
    /// moved).
    #[arg(long, value_name = "FILE", requires = "fabric")]
    fabric_counters: Vec<String>,
}

impl FabricArgs {
    /// The fabric, read before any other work; None without --fabric.
    pub fn read(&self) -> anyhow::Result<Option<rdmakit_fleet::fabric::Fabric>> {
        self.fabric
            .as_deref()
            .map(|p| rdmakit_fleet::fabric::Fabric::read(p, &self.fabric_counters))
            .transpose()
            .map_err(anyhow::Error::msg)
    }
}

/// `rdmakit fleet baseline INPUT... -o expected.json`.
#[derive(clap::Args, Debug)]
pub struct BaselineArgs {
    /// Node reports of a fleet known to be right (the kinds `fleet report` reads).
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<String>,
    /// Where to write the expected inventory (`-` for stdout).
    #[arg(short, long, value_name = "FILE")]
    output: String,
}

impl Args {
    /// Whether it opens a device through a verbs provider: the agent's `-d DEV`.
    pub fn opens_devices(&self) -> bool {
        matches!(self.command, Command::Agent(_))
    }
}

pub fn run(a: Args, provider: rdmakit_verbs::ProviderSetting) -> anyhow::Result<Exit> {
    match a.command {
        Command::Report(a) => {
            let opts = a.report.options().map_err(anyhow::Error::msg)?;
            let fabric = a.fabric.read()?;
            let mut r = FleetReport::from_loaded(load(&a.inputs), &opts);
            if let Some(f) = &fabric {
                rdmakit_fleet::fabric::tie(&mut r, f);
            }
            a.report.emit(&r, None, None)
        }
        Command::Baseline(a) => {
            let b = Baselined::of(load(&a.inputs));
            match a.output.as_str() {
                "-" => anstream::stdout().write_all(b.json.as_bytes())?,
                path => std::fs::write(path, &b.json).with_context(|| format!("writing {path}"))?,
            }
            anstream::stderr().write_all(b.notes.as_bytes())?;
            Ok(b.exit)
        }
        Command::Sweep(a) => sweep(a),
        Command::Agent(a) => pairwise::agent(a, provider),
        Command::Pairwise(a) => pairwise::run(a),
    }
}

/// `rdmakit fleet sweep`: one doctor per node as one Slurm job step.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// The partition to sweep (default: the default partition's nodes).
    #[arg(short, long, value_name = "P")]
    partition: Option<String>,
    /// The nodes to sweep, a Slurm hostlist: n[1-12],gpu7.
    #[arg(short = 'w', long, value_name = "LIST")]
    nodelist: Option<String>,
    /// Where to keep the evidence: srun.out/srun.err (the raw lines), reports.jsonl (one
    /// report per line, for `rdmakit fleet report`), sweep.json, fleet.json, bundles/
    /// [default: ./rdmakit-sweep-<unix time>].
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Also bring back each node's bundle of everything its doctor read (bundles/NODE.json.gz).
    #[arg(long)]
    bundles: bool,
    /// Seconds to wait for every report; a node still silent then is missing (hung).
    #[arg(long, value_name = "S", default_value_t = 60)]
    timeout: u64,
    #[command(flatten)]
    report: ReportArgs,
    /// rdmakit's path on the nodes [default: this binary's path].
    #[arg(long, value_name = "PATH")]
    rdmakit: Option<String>,
    /// More doctor arguments for every node, after `--` (e.g. -- --fail-on warning).
    /// Active probes run only with -- --probe.
    #[arg(last = true, value_name = "DOCTOR_ARGS")]
    doctor_args: Vec<String>,
}

fn sweep(a: SweepArgs) -> anyhow::Result<Exit> {
    let req = SweepRequest {
        partition: a.partition.clone(),
        nodelist: a.nodelist.clone(),
        output: a.output.clone(),
        bundles: a.bundles,
        timeout: a.timeout,
        rdmakit: a.rdmakit.clone(),
        doctor_args: a.doctor_args.clone(),
    };
    let mut bar = Progress::hidden();
    let mut on = |e: Event| match e {
        Event::Planned(n) => {
            let t = "{spinner} {pos}/{len} nodes reported {elapsed} {wide_msg}";
            bar = Progress::new(t, Some(n as u64), Duration::ZERO, n > 0);
        }
        Event::Progress { reported, .. } => bar.position(reported as u64, None),
        Event::Srun(m) => bar.message(m),
        Event::TimedOut => bar.message(format!("timeout ({} s): stopping srun", a.timeout)),
        Event::Ran => bar = Progress::hidden(),
    };
    let options = || a.report.options();
    let s = run::sweep(&req, &options, &std::env::current_exe, &mut on)?;
    a.report.emit(&s.report, Some(&s.json), Some(s.summary))
}

/// The pairwise run's token: `--token-file`, else `RDMAKIT_FLEET_TOKEN` (read
/// here, at the edge).
pub fn token(file: Option<&std::path::Path>) -> Result<Token, TokenError> {
    let env = std::env::var_os(rdmakit_fleet::pairwise::slurm::TOKEN_ENV);
    Token::from_file_or_env(file, env.as_deref())
}

/// Reads inputs, with a progress bar on a terminal once it has taken a second.
fn load(paths: &[String]) -> Loaded {
    let bar = Progress::new("{wide_bar} {pos}/{len}", None, Duration::from_secs(1), true);
    let opts = LoadOptions {
        progress: Some(&bar),
        ..LoadOptions::default()
    };
    input::load(paths, &opts)
}

/// How `fleet report` and `fleet sweep` judge and show the fleet report.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Print the fleet report as JSON (schema rdmakit.fleet/v1, docs/fleet.md; a sweep's
    /// own account, rdmakit.sweep/v1, is DIR/sweep.json).
    #[arg(long)]
    json: bool,
    /// Also write the report as one self-contained HTML file: the nodes needing attention,
    /// drift per cohort, each numeric metric as a dot plot with its outliers; the report's
    /// JSON embedded.
    #[arg(long, value_name = "FILE")]
    html: Option<String>,
    /// Every reason of every node, cohort members, every change.
    #[arg(short, long)]
    verbose: bool,
    /// The previous sweep: its `fleet report --json` (a sweep's DIR/fleet.json), or its
    /// node reports. Error counters that grew, links that went down, firmware that
    /// changed; nodes gone are `missing`.
    #[arg(long, value_name = "PREVIOUS")]
    baseline: Option<String>,
    /// Check every node against an expected inventory (`rdmakit fleet baseline -o FILE`).
    #[arg(long, value_name = "FILE")]
    expect: Option<String>,
}

impl ReportArgs {
    /// The report options `--baseline` and `--expect` give.
    fn options(&self) -> Result<Options, String> {
        Options::of_flags(self.baseline.as_deref(), self.expect.as_deref(), &load)
    }

    /// Prints the report (JSON, or human lines followed by `tail`), then
    /// writes `--html FILE`; the exit code is the report's.
    /// `json` is the report's JSON when the caller rendered it already.
    fn emit(
        &self,
        r: &FleetReport,
        json: Option<&str>,
        tail: Option<String>,
    ) -> anyhow::Result<Exit> {
        let text = render::output(r, self.json, json, self.verbose, tail.as_deref());
        anstream::stdout().write_all(text.as_bytes())?;
        if let Some(path) = &self.html {
            let page = rdmakit_report::fleet::render(r, &crate::cmd::page_meta(None));
            crate::cmd::write_page(path, page)?;
        }
        Ok(r.exit())
    }
}
