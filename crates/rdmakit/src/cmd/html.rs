//! `--html FILE`: the self-contained HTML report (crates/report) of a command's result.

use std::path::Path;

use anyhow::Context as _;
use rdmakit_doctor::report::Report;
use rdmakit_doctor::views::irq::IrqView;
use rdmakit_doctor::views::topology::TopologyView;
use rdmakit_host::model::HostFacts;
use rdmakit_report::{doctor::DoctorPage, Meta};

/// What the page says about how it was made: the tool, the time the data was
/// taken (`taken_unix`; now when `None`) and the command line.
pub fn meta(taken_unix: Option<u64>) -> Meta {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let args: Vec<String> = std::env::args().skip(1).collect();
    Meta {
        tool: Some(format!("rdmakit {}", env!("CARGO_PKG_VERSION"))),
        generated: Some(rdmakit_report::utc_timestamp(taken_unix.unwrap_or(now))),
        command: Some(format!("rdmakit {}", args.join(" "))),
    }
}

/// Writes `html` to `path` (through a temporary file renamed over it) and says so on stderr.
pub fn write(path: &str, html: &str) -> anyhow::Result<()> {
    let p = Path::new(path);
    let dir = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = p.file_name().context("--html: not a file name")?;
    let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
    std::fs::write(&tmp, html).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, p).with_context(|| format!("writing {path}"))?;
    eprintln!("rdmakit: HTML report written to {path}");
    Ok(())
}

/// The doctor's page: the report with the IRQ and topology views of the same facts.
pub fn doctor(
    path: &str,
    facts: &HostFacts,
    report: &Report,
    taken_unix: Option<u64>,
) -> anyhow::Result<()> {
    let irq = IrqView::build(facts, report);
    let topology = TopologyView::build(facts, report);
    let page = DoctorPage {
        doctor: report,
        irq: &irq,
        topology: &topology,
    };
    let html = rdmakit_report::doctor::render(&page, &meta(taken_unix)).context("--html")?;
    write(path, &html)
}

/// The fleet report's page (`fleet report`, `fleet sweep`).
pub fn fleet(path: &str, report: &rdmakit_fleet::report::FleetReport) -> anyhow::Result<()> {
    let html = rdmakit_report::fleet::render(report, &meta(None)).context("--html")?;
    write(path, &html)
}

/// The pairwise run's page, dated by the run's start.
pub fn pairwise(
    path: &str,
    report: &rdmakit_fleet::pairwise::report::PairwiseReport,
) -> anyhow::Result<()> {
    let taken = (report.started_unix > 0).then_some(report.started_unix);
    let html = rdmakit_report::pairwise::render(report, &meta(taken)).context("--html")?;
    write(path, &html)
}
