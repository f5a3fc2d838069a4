//! `--html FILE`: the self-contained HTML report (crates/report) of a command's result.

use anyhow::Context as _;
use rdmakit_report::{Meta, ReportError};

/// What the page says about how it was made: the time the data was taken
/// (`taken_unix`; now when `None`) and the command line (read here, at the edge).
pub fn meta(taken_unix: Option<u64>) -> Meta {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Meta::of_command(taken_unix.unwrap_or(now), std::env::args().skip(1))
}

/// Writes the rendered `page` to `path` and says so on stderr.
pub fn write(path: &str, page: Result<String, ReportError>) -> anyhow::Result<()> {
    rdmakit_report::file::write(path, &page.context("--html")?)?;
    eprintln!("rdmakit: HTML report written to {path}");
    Ok(())
}
