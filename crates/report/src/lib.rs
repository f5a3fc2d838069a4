//! `rdmakit-report`: the HTML report people look at.
//!
//! One self-contained file per report: inline CSS and inline SVG plots (drawn
//! with plotters' SVG backend, no fonts loaded), readable without running any
//! script, loading nothing from anywhere (for air-gapped clusters: the output
//! holds no `http://`, `https://` or protocol-relative `//` reference at all, and
//! a Content-Security-Policy of `default-src 'none'`), with the source data
//! embedded as JSON (`<script type="application/json" id="rdmakit-data">`) so
//! tools can read it back ([`embedded_json`]).
//!
//! The report renders data that the other crates produce and computes nothing of
//! its own: [`doctor::render`] draws the doctor's report with the IRQ and topology
//! views of `rdmakit_doctor::views`, [`perf::render`] the rows of `rdmakit perf`,
//! [`fleet::render`] a fleet report (`rdmakit_fleet::report`) and
//! [`pairwise::render`] a pairwise run (`rdmakit_fleet::pairwise::report`) and
//! [`fabric::render`] the InfiniBand fabric (`rdmakit_fabric::view::Picture`).
//!
//! Promises: the same input gives the same bytes (no clock is read; a time is
//! shown only when the caller passes one in [`Meta`]; floats are printed with a
//! fixed number of digits); no panic on any input. [`file::write`] puts a page
//! where `--html FILE` says.
//!
//! Beside the pages, [`progress`] draws what people watch while a command
//! works (a bar or a spinner on a terminal's stderr); it alone reads the clock.
//!
//! ```
//! let html = rdmakit_report::perf::render(&[], &rdmakit_report::Meta::default()).unwrap();
//! assert!(html.starts_with("<!DOCTYPE html>"));
//! let data = rdmakit_report::embedded_json(&html).unwrap();
//! assert_eq!(data["kind"], "perf");
//! ```

pub mod doctor;
pub mod fabric;
pub mod file;
pub mod fleet;
mod html;
pub mod pairwise;
pub mod perf;
mod plot;
pub mod progress;

pub use html::{embedded_json, utc_timestamp, DATA_ID, SCHEMA};

/// What the page says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// The tool that made the data (`rdmakit 0.1.0`).
    pub tool: Option<String>,
    /// When the data was taken, as the caller wants it shown (none: no time shown).
    pub generated: Option<String>,
    /// The command that made the report, shown in the footer.
    pub command: Option<String>,
}

impl Meta {
    /// The page of an rdmakit command: this rdmakit's version, the data taken
    /// at `taken_unix` (seconds since the epoch, shown in UTC) and the command
    /// line `rdmakit ARGS...` (`args` without the program's name).
    pub fn of_command(taken_unix: u64, args: impl IntoIterator<Item = String>) -> Meta {
        let args: Vec<String> = args.into_iter().collect();
        Meta {
            tool: Some(format!("rdmakit {}", env!("CARGO_PKG_VERSION"))),
            generated: Some(utc_timestamp(taken_unix)),
            command: Some(format!("rdmakit {}", args.join(" "))),
        }
    }
}

/// Why a report could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The data could not be serialized or the embedded JSON parsed.
    #[error("report data (JSON): {0}")]
    Json(#[from] serde_json::Error),
    /// A plot could not be drawn.
    #[error("drawing plot {plot:?}: {detail}")]
    Plot {
        /// Which plot.
        plot: String,
        /// What plotters said.
        detail: String,
    },
    /// The file holds no `rdmakit-data` block.
    #[error("no <script type=\"application/json\" id=\"{DATA_ID}\"> block in the file")]
    NoData,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_page_names_the_tool_the_time_and_the_command_line() {
        let args = ["doctor", "--html", "r.html"].map(String::from);
        let m = Meta::of_command(86_400, args);
        assert_eq!(
            m.tool,
            Some(format!("rdmakit {}", env!("CARGO_PKG_VERSION")))
        );
        assert_eq!(m.generated, Some(utc_timestamp(86_400)));
        assert_eq!(m.command.as_deref(), Some("rdmakit doctor --html r.html"));
    }
}
