//! The pairwise fabric matrix (docs/pairwise.md): `rdmakit fleet pairwise`,
//! the coordinator (a `Request` of fleet's `pairwise::options`, measured and
//! rendered; exit 0 no fault, 1 a fault or an agent unreachable, 2 no run),
//! and `rdmakit fleet agent`, the test agent (`pairwise::agent::start`). The
//! flags are `rdmakit_fleet::cli::pairwise`'s.

use std::io::Write as _;
use std::time::Duration;

use rdmakit_fleet::cli::pairwise::{AgentArgs, PairwiseArgs};
use rdmakit_fleet::pairwise::agent::start::{start, Edge};
use rdmakit_fleet::pairwise::options::{self, Failure};
use rdmakit_fleet::pairwise::render;
use rdmakit_fleet::pairwise::report::PairwiseReport;
use rdmakit_report::progress::Progress;
use rdmakit_vocab::exit::Exit;

pub fn run(a: PairwiseArgs) -> anyhow::Result<Exit> {
    // Read before measuring: a bad file costs nothing.
    let fabric = a.fabric.read().map_err(anyhow::Error::msg)?;
    let bar = Progress::new("{spinner} {msg} {prefix}", None, Duration::ZERO, !a.json);
    let token = || super::token(a.token_file.as_deref());
    let mut m = options::measure(&a.request(), &token, &std::env::current_exe, &bar);
    drop(bar);
    if let Some(status) = m.stop().filter(|_| !a.json) {
        eprintln!("rdmakit fleet pairwise: the agents' job step ended ({status})");
    }
    match m.report {
        Ok(report) => show(&a, &report, fabric.as_ref()),
        Err(Failure::Refused(e)) => Ok(crate::cmd::fail("rdmakit fleet pairwise", e)),
        Err(Failure::Error(e)) => Err(anyhow::Error::from_boxed(e)),
    }
}

pub fn agent(a: AgentArgs, provider: rdmakit_verbs::ProviderSetting) -> anyhow::Result<Exit> {
    let edge = Edge {
        provider,
        token: &|| super::token(a.token_file.as_deref()),
        soft: rdmakit_verbs::DeviceConfig::from_env().map_err(Into::into),
        env: &|k: &str| std::env::var(k).ok(),
    };
    let fail = |e| crate::cmd::fail("rdmakit fleet agent", e);
    let s = match start(&a.request(), edge, &|l| {
        eprintln!("rdmakit fleet agent {l}")
    }) {
        Ok(s) => s,
        Err(e) => return Ok(fail(e)),
    };
    if let Some(line) = &s.ready {
        println!("{line}");
        let _ = std::io::stdout().flush();
    }
    let served = s.serve(|line| eprintln!("rdmakit fleet agent {line}"));
    Ok(served.map_or_else(fail, |()| Exit::Ok))
}

/// Prints the run (text or JSON) with the fabric routes of its faults when
/// `--fabric` was given, writes its page, and gives the exit status.
fn show(
    a: &PairwiseArgs,
    report: &PairwiseReport,
    fabric: Option<&rdmakit_fleet::fabric::Fabric>,
) -> anyhow::Result<Exit> {
    let report = &*rdmakit_fleet::fabric::with_routes(report, fabric);
    anstream::print!("{}", render::output(report, a.json));
    if let Some(path) = &a.html {
        let taken = (report.started_unix > 0).then_some(report.started_unix);
        let page = rdmakit_report::pairwise::render(report, &crate::cmd::page_meta(taken));
        crate::cmd::write_page(path, page)?;
    }
    Ok(report.exit())
}
