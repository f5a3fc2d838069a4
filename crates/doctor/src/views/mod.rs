//! Views of the host for people: the IRQ layout per device ([`irq`]) and the
//! device topology from the PCIe root port to the netdevs ([`topology`]), each
//! with what the doctor concluded about it.
//!
//! Views are data (Serialize); `rdmakit irq` prints [`irq::IrqView`] as a table
//! or JSON, and the HTML report (crates/report) draws both. They are pure
//! functions of the facts and the doctor's report: the same inputs give the same
//! view, and nothing is read here.

pub mod irq;
pub mod topology;

use crate::checks::{CheckResult, Status};
use crate::finding::Finding;
use crate::report::Report;
use serde::Serialize;

/// A check's [`crate::checks::Status`] as a view carries it (its JSON keeps the
/// name `verdicts`). One check's conclusion, not the node's:
/// [`crate::health::Verdict`] is that.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckStatus {
    /// The check id (`irq.vectors`).
    pub check: &'static str,
    /// `pass`, `fail`, `n/a` or `not checked`.
    pub result: &'static str,
    /// Why it did not apply or could not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

fn verdicts(report: &Report, ids: &[&str]) -> Vec<CheckStatus> {
    report
        .checks
        .iter()
        .filter(|c| ids.contains(&c.id))
        .map(|c: &CheckResult| CheckStatus {
            check: c.id,
            result: c.status.word(),
            reason: match &c.status {
                Status::NotApplicable(w) | Status::NotChecked(w) => Some(w.clone()),
                _ => None,
            },
        })
        .collect()
}

/// The findings of checks `ids` about `device` (their subject starts with its name).
fn findings_about(report: &Report, ids: &[&str], device: &str) -> Vec<Finding> {
    report
        .checks
        .iter()
        .filter(|c| ids.contains(&c.id))
        .flat_map(|c| c.findings.iter())
        .filter(|f| {
            f.subject == device
                || f.subject
                    .strip_prefix(device)
                    .is_some_and(|rest| rest.starts_with(' '))
        })
        .cloned()
        .collect()
}
