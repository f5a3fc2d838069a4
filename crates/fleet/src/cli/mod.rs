//! `rdmakit fleet`'s command line (feature `cli`): the subcommands' flags and
//! their mapping onto this crate's requests (`report`, `baseline`, `sweep`
//! here, `agent` and `pairwise` in [`pairwise`]). The binary flattens [`Args`]
//! and keeps what sits above this crate: progress bars, HTML pages, printing.

pub mod pairwise;

use std::path::PathBuf;

use crate::fabric::Fabric;
use crate::input::Loaded;
use crate::report::{FleetReport, Options};
use crate::slurm::run::SweepRequest;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Subcommand, Debug)]
pub enum Command {
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
    Pairwise(pairwise::PairwiseArgs),
}

/// `rdmakit fleet report INPUT...`.
#[derive(clap::Args, Debug)]
pub struct ReportInputs {
    /// Directories of `rdmakit collect` bundles, capture directories, `rdmakit doctor --json`
    /// files, JSON lines (one doctor report per line); gzip is fine.
    #[arg(value_name = "INPUT", required = true)]
    pub inputs: Vec<String>,
    #[command(flatten)]
    pub report: ReportArgs,
    #[command(flatten)]
    pub fabric: FabricArgs,
}

/// The InfiniBand fabric beside the fleet (`fleet report`, `fleet pairwise`).
#[derive(clap::Args, Debug)]
pub struct FabricArgs {
    /// A saved `rdmakit fabric discover --json --routes`: each node needing attention is
    /// matched to its CA by GUID and its switch port named (pairwise: the route of each
    /// slow pair, by the CAs' node descriptions).
    #[arg(long, value_name = "FABRIC.json")]
    pub fabric: Option<String>,
    /// Saved counters (`rdmakit fabric counters --json`, or fabric check --save): once, the
    /// counters now (nonzero error counters are named); twice, before and after (what
    /// moved).
    #[arg(long, value_name = "FILE", requires = "fabric")]
    pub fabric_counters: Vec<String>,
}

impl ReportInputs {
    /// The fleet report of the inputs as the flags say, tied to `--fabric`
    /// when given; every file is read through `load`, the flags' files
    /// before the inputs (a bad file costs nothing).
    ///
    /// # Errors
    /// A `--baseline`, `--expect` or `--fabric` file unreadable or not of
    /// its kind.
    pub fn report(&self, load: &dyn Fn(&[String]) -> Loaded) -> Result<FleetReport, String> {
        let opts = self.report.options(load)?;
        let fabric = self.fabric.read()?;
        let mut r = FleetReport::from_loaded(load(&self.inputs), &opts);
        if let Some(f) = &fabric {
            crate::fabric::tie(&mut r, f);
        }
        Ok(r)
    }
}

impl FabricArgs {
    /// The fabric, read before any other work; None without --fabric.
    pub fn read(&self) -> Result<Option<Fabric>, String> {
        self.fabric
            .as_deref()
            .map(|p| Fabric::read(p, &self.fabric_counters))
            .transpose()
    }
}

/// `rdmakit fleet baseline INPUT... -o expected.json`.
#[derive(clap::Args, Debug)]
pub struct BaselineArgs {
    /// Node reports of a fleet known to be right (the kinds `fleet report` reads).
    #[arg(value_name = "INPUT", required = true)]
    pub inputs: Vec<String>,
    /// Where to write the expected inventory (`-` for stdout).
    #[arg(short, long, value_name = "FILE")]
    pub output: String,
}

impl Args {
    /// Whether it opens a device through a verbs provider: the agent's `-d DEV`.
    pub fn opens_devices(&self) -> bool {
        matches!(self.command, Command::Agent(_))
    }
}

/// `rdmakit fleet sweep`: one doctor per node as one Slurm job step.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// The partition to sweep (default: the default partition's nodes).
    #[arg(short, long, value_name = "P")]
    pub partition: Option<String>,
    /// The nodes to sweep, a Slurm hostlist: n[1-12],gpu7.
    #[arg(short = 'w', long, value_name = "LIST")]
    pub nodelist: Option<String>,
    /// Where to keep the evidence: srun.out/srun.err (the raw lines), reports.jsonl (one
    /// report per line, for `rdmakit fleet report`), sweep.json, fleet.json, bundles/
    /// [default: ./rdmakit-sweep-<unix time>].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Also bring back each node's bundle of everything its doctor read (bundles/NODE.json.gz).
    #[arg(long)]
    pub bundles: bool,
    /// Seconds to wait for every report; a node still silent then is missing (hung).
    #[arg(long, value_name = "S", default_value_t = 60)]
    pub timeout: u64,
    #[command(flatten)]
    pub report: ReportArgs,
    /// rdmakit's path on the nodes [default: this binary's path].
    #[arg(long, value_name = "PATH")]
    pub rdmakit: Option<String>,
    /// More doctor arguments for every node, after `--` (e.g. -- --fail-on warning).
    /// Active probes run only with -- --probe.
    #[arg(last = true, value_name = "DOCTOR_ARGS")]
    pub doctor_args: Vec<String>,
}

impl SweepArgs {
    /// The sweep these flags ask for.
    pub fn request(&self) -> SweepRequest {
        SweepRequest {
            partition: self.partition.clone(),
            nodelist: self.nodelist.clone(),
            output: self.output.clone(),
            bundles: self.bundles,
            timeout: self.timeout,
            rdmakit: self.rdmakit.clone(),
            doctor_args: self.doctor_args.clone(),
        }
    }
}

/// How `fleet report` and `fleet sweep` judge and show the fleet report.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Print the fleet report as JSON (schema rdmakit.fleet/v1, docs/fleet.md; a sweep's
    /// own account, rdmakit.sweep/v1, is DIR/sweep.json).
    #[arg(long)]
    pub json: bool,
    /// Also write the report as one self-contained HTML file: the nodes needing attention,
    /// drift per cohort, each numeric metric as a dot plot with its outliers; the report's
    /// JSON embedded.
    #[arg(long, value_name = "FILE")]
    pub html: Option<String>,
    /// Every reason of every node, cohort members, every change.
    #[arg(short, long)]
    pub verbose: bool,
    /// The previous sweep: its `fleet report --json` (a sweep's DIR/fleet.json), or its
    /// node reports. Error counters that grew, links that went down, firmware that
    /// changed; nodes gone are `missing`.
    #[arg(long, value_name = "PREVIOUS")]
    pub baseline: Option<String>,
    /// Check every node against an expected inventory (`rdmakit fleet baseline -o FILE`).
    #[arg(long, value_name = "FILE")]
    pub expect: Option<String>,
}

impl ReportArgs {
    /// The report options `--baseline` and `--expect` give, their files read
    /// through `load`.
    ///
    /// # Errors
    /// As [`Options::of_flags`].
    pub fn options(&self, load: &dyn Fn(&[String]) -> Loaded) -> Result<Options, String> {
        Options::of_flags(self.baseline.as_deref(), self.expect.as_deref(), load)
    }
}
