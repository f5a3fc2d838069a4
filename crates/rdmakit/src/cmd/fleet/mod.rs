//! `rdmakit fleet`: the doctor across a cluster. The flags and their mapping
//! onto crates/fleet's requests are `rdmakit_fleet::cli`'s; here, what sits
//! above that crate: the progress bars, the HTML pages and printing —
//! `report`, `baseline` and `sweep` here, the pairwise matrix (`agent`,
//! `pairwise`) in its module.

pub mod pairwise;

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use rdmakit_fleet::baseline::Baselined;
pub use rdmakit_fleet::cli::Args;
use rdmakit_fleet::cli::{Command, ReportArgs, SweepArgs};
use rdmakit_fleet::input::{self, LoadOptions, Loaded};
use rdmakit_fleet::pairwise::auth::{Token, TokenError};
use rdmakit_fleet::render;
use rdmakit_fleet::report::FleetReport;
use rdmakit_fleet::slurm::run::{self, Event};
use rdmakit_report::progress::Progress;
use rdmakit_vocab::exit::Exit;

pub fn run(a: Args, provider: rdmakit_verbs::ProviderSetting) -> anyhow::Result<Exit> {
    match a.command {
        Command::Report(a) => {
            let r = a.report(&load).map_err(anyhow::Error::msg)?;
            emit(&a.report, &r, None, None)
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
fn sweep(a: SweepArgs) -> anyhow::Result<Exit> {
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
    let options = || a.report.options(&load);
    let s = run::sweep(&a.request(), &options, &std::env::current_exe, &mut on)?;
    emit(&a.report, &s.report, Some(&s.json), Some(s.summary))
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

/// Prints the report (JSON, or human lines followed by `tail`), then writes
/// `--html FILE`; the exit code is the report's. `json` is the report's JSON
/// when the caller rendered it already.
fn emit(
    a: &ReportArgs,
    r: &FleetReport,
    json: Option<&str>,
    tail: Option<String>,
) -> anyhow::Result<Exit> {
    let text = render::output(r, a.json, json, a.verbose, tail.as_deref());
    anstream::stdout().write_all(text.as_bytes())?;
    if let Some(path) = &a.html {
        let page = rdmakit_report::fleet::render(r, &crate::cmd::page_meta(None));
        crate::cmd::write_page(path, page)?;
    }
    Ok(r.exit())
}
