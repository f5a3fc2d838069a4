//! `rdmakit fleet`: the doctor across a cluster. One subcommand per module; each
//! parses its arguments into settings, calls crates/fleet and renders through it.

pub mod agent;
pub mod baseline;
pub mod pairwise;
pub mod report;
pub mod sweep;

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use rdmakit_fleet::baseline::{Expected, Previous};
use rdmakit_fleet::input::{self, LoadOptions, Loaded};
use rdmakit_fleet::pairwise::auth::{Token, TokenError};
use rdmakit_fleet::render::{self, HumanOptions};
use rdmakit_fleet::report::{FleetReport, Options};
use rdmakit_host::bounded::{read_named, Cap};
use rdmakit_vocab::exit::Exit;

use rdmakit_report::progress::Progress;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Aggregate node reports: nodes needing attention, findings by code, cohorts, drift,
    /// outliers, changes since a previous sweep.
    Report(report::Args),
    /// Write the fleet's majority inventory per cohort, for a later `report --expect`.
    Baseline(baseline::Args),
    /// Run the doctor on every node of a Slurm partition as one job step (srun's output
    /// is the transport) and report; silent, garbled or hung nodes are `missing`.
    Sweep(sweep::Args),
    /// The pairwise test agent: serves bandwidth/latency tests to a coordinator holding the run's token.
    Agent(agent::Args),
    /// Measure every pair of agents (or a ring), localize a slow node or a slow link.
    Pairwise(pairwise::Args),
}

impl Args {
    /// Whether it opens a device through a verbs provider: the agent's `-d DEV`.
    pub fn opens_devices(&self) -> bool {
        matches!(self.command, Command::Agent(_))
    }
}

pub fn run(a: Args, provider: super::ProviderSetting) -> anyhow::Result<ExitCode> {
    match a.command {
        Command::Report(a) => report::run(a),
        Command::Baseline(a) => baseline::run(a),
        Command::Sweep(a) => sweep::run(a),
        Command::Agent(a) => agent::run(a, provider),
        Command::Pairwise(a) => pairwise::run(a),
    }
}

/// The pairwise run's token: `--token-file`, else `RDMAKIT_FLEET_TOKEN` (read
/// here, at the edge).
pub fn token(file: Option<&std::path::Path>) -> Result<Token, TokenError> {
    let env = std::env::var_os(rdmakit_fleet::pairwise::slurm::TOKEN_ENV);
    Token::from_file_or_env(file, env.as_deref())
}

fn tool() -> String {
    format!("rdmakit {}", env!("CARGO_PKG_VERSION"))
}

/// Reads inputs, with a progress bar on a terminal once it has taken a second.
fn load(paths: &[String]) -> Loaded {
    let bar = Progress::new("{wide_bar} {pos}/{len}", None, Duration::from_secs(1), true);
    let progress = |done: usize, total: usize| bar.position(done as u64, Some(total as u64));
    let opts = LoadOptions {
        tool: tool(),
        progress: Some(&progress),
        ..LoadOptions::default()
    };
    input::load(paths, &opts)
}

/// `--baseline PREVIOUS`: a previous fleet report, or inputs of the kinds `report`
/// reads. Unreadable is an error (exit 2): the comparison would be meaningless.
fn previous(path: &str) -> anyhow::Result<Previous> {
    Previous::from_loaded(path, load(&[path.to_string()])).map_err(anyhow::Error::msg)
}

/// `--expect FILE`.
fn expected(path: &str) -> anyhow::Result<Expected> {
    let bytes = read_named(std::path::Path::new(path), Cap::DOCUMENT)
        .map_err(|e| anyhow::anyhow!("--expect {}", e))?;
    let text = String::from_utf8(bytes).with_context(|| format!("--expect {path}"))?;
    Ok(Expected::parse(path, &text)?)
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
    /// The report options `--baseline` and `--expect` give; read before any
    /// work, so a bad file costs nothing.
    fn options(&self) -> anyhow::Result<Options> {
        Ok(Options {
            tool: tool(),
            previous: self.baseline.as_deref().map(previous).transpose()?,
            expected: match &self.expect {
                Some(p) => Some((p.clone(), expected(p)?)),
                None => None,
            },
            ..Options::default()
        })
    }

    /// Prints the report (JSON, or human lines followed by `tail`), then
    /// writes `--html FILE`; the exit code is the report's.
    /// `json` is the report's JSON when the caller rendered it already.
    fn emit(
        &self,
        r: &FleetReport,
        json: Option<&str>,
        tail: Option<String>,
    ) -> anyhow::Result<ExitCode> {
        let mut out = anstream::stdout();
        if self.json {
            let j = json.map_or_else(|| render::json(r).into(), std::borrow::Cow::Borrowed);
            writeln!(out, "{j}")?;
        } else {
            let o = HumanOptions {
                verbose: self.verbose,
                ..HumanOptions::default()
            };
            out.write_all(render::human(r, o).as_bytes())?;
            if let Some(t) = tail {
                writeln!(out, "{t}")?;
            }
        }
        if let Some(path) = &self.html {
            let page = rdmakit_report::fleet::render(r, &crate::cmd::html::meta(None));
            crate::cmd::html::write(path, page)?;
        }
        Ok(Exit::from_code(r.summary.exit_code)
            .unwrap_or(Exit::Failed)
            .into())
    }
}
