//! One node's report as the fleet sees it: its name, where it came from, its own
//! findings and its inventory — read from a doctor JSON report (schema
//! `rdmakit.doctor/v1`), built from a [`rdmakit_doctor::report::Report`], or a node
//! that sent nothing ([`NodeReport::missing`]).
//!
//! Only the doctor JSON fields the schema promises are relied on: `schema`,
//! `findings[]` (`code`, `severity`, `layer`, `subject`, `message`, `evidence[]`) and
//! `inventory`; everything else is ignored, so reports from newer doctors read too.

use rdmakit_doctor::inventory::Inventory;
use rdmakit_doctor::report::Report;
use serde::{Deserialize, Serialize};

/// The doctor's schema this crate reads.
pub const DOCTOR_SCHEMA: &str = "rdmakit.doctor/v1";

/// How bad something is (the doctor's severity, as its JSON carries it).
pub use rdmakit_doctor::codes::Severity;

/// One piece of evidence of a finding: the file (or probe) and the value read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub value: String,
}

/// A finding of the node's own doctor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeFinding {
    /// `RDK-H002`.
    pub code: String,
    pub severity: Severity,
    #[serde(default)]
    pub layer: String,
    #[serde(default)]
    pub subject: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub evidence: Vec<Evidence>,
}

/// One node: its name, its origin, and what its doctor said — or why nothing came.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeReport {
    /// The node's name: the inventory's host name, else its input's name.
    pub name: String,
    /// Where it was read: `sweep.jsonl:12`, `bundles/node17.json.gz`,
    /// `fixtures/healthy` (a capture directory).
    pub origin: String,
    /// Every finding of the node's doctor (info included; the fleet decides what counts).
    pub findings: Vec<NodeFinding>,
    /// `None` when the report has none (a doctor older than the inventory) or the
    /// node is missing.
    pub inventory: Option<Inventory>,
    /// Set when the node sent no usable report: why.
    pub missing: Option<String>,
}

/// Why a text is not a doctor report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("not JSON: {0}")]
    Json(String),
    #[error("not a doctor report: schema is {found:?}, expected \"rdmakit.doctor/v1\"")]
    Schema { found: Option<String> },
    #[error("malformed doctor report: {0}")]
    Shape(String),
}

/// The two fields that say what a JSON document is (`schema`, or `format` for a
/// bundle), read without keeping the rest of it.
#[derive(Deserialize)]
pub(crate) struct Head {
    #[serde(default)]
    pub schema: Option<serde_json::Value>,
    #[serde(default)]
    pub format: Option<serde_json::Value>,
}

impl Head {
    /// The head of `text`, or why it is not a JSON object.
    pub(crate) fn of(text: &[u8]) -> Result<Head, ParseError> {
        serde_json::from_slice(text).map_err(|e| match e.classify() {
            // JSON, but not an object: it has no schema.
            serde_json::error::Category::Data => ParseError::Schema { found: None },
            _ => ParseError::Json(e.to_string()),
        })
    }

    pub(crate) fn schema(&self) -> Option<&str> {
        self.schema.as_ref().and_then(|s| s.as_str())
    }
}

#[derive(Deserialize)]
struct DoctorDoc {
    #[serde(default)]
    findings: Vec<NodeFinding>,
    #[serde(default)]
    inventory: Option<Inventory>,
}

impl NodeReport {
    /// Reads one doctor JSON report (`rdmakit doctor --json`, pretty or one line).
    /// The node is named after the report's host name, else after `origin`
    /// ([`Inventory::name_from_input`]).
    ///
    /// # Errors
    /// The text is not JSON, not of schema `rdmakit.doctor/v1`, or its findings or
    /// inventory have the wrong shape.
    ///
    /// Read straight into its fields, never into a `serde_json::Value` (which
    /// takes up to 16 times the text's size): fields other than those above
    /// are skipped without being kept.
    pub fn from_doctor_json(text: &str, origin: &str) -> Result<NodeReport, ParseError> {
        let schema = Head::of(text.as_bytes())?;
        if schema.schema() != Some(DOCTOR_SCHEMA) {
            return Err(ParseError::Schema {
                found: schema.schema().map(str::to_string),
            });
        }
        let doc: DoctorDoc =
            serde_json::from_str(text).map_err(|e| ParseError::Shape(e.to_string()))?;
        Ok(NodeReport::named(doc.findings, doc.inventory, origin))
    }

    /// As [`NodeReport::from_doctor_json`], from parsed JSON.
    ///
    /// # Errors
    /// Not of schema `rdmakit.doctor/v1`, or a field of the wrong shape.
    pub fn from_doctor_value(v: serde_json::Value, origin: &str) -> Result<NodeReport, ParseError> {
        let schema = v.get("schema").and_then(|s| s.as_str());
        if schema != Some(DOCTOR_SCHEMA) {
            return Err(ParseError::Schema {
                found: schema.map(str::to_string),
            });
        }
        let doc: DoctorDoc =
            serde_json::from_value(v).map_err(|e| ParseError::Shape(e.to_string()))?;
        Ok(NodeReport::named(doc.findings, doc.inventory, origin))
    }

    /// The fleet's view of a report the doctor just built (a replayed bundle or
    /// capture directory).
    pub fn from_report(report: &Report, origin: &str) -> NodeReport {
        let findings = report
            .findings
            .iter()
            .map(|f| NodeFinding {
                code: f.code.as_str().to_string(),
                severity: f.severity,
                layer: f.layer.as_str().to_string(),
                subject: f.subject.clone(),
                message: f.message.clone(),
                evidence: f
                    .evidence
                    .iter()
                    .map(|e| Evidence {
                        path: e.path.clone(),
                        value: e.value.clone(),
                    })
                    .collect(),
            })
            .collect();
        NodeReport::named(findings, report.inventory.clone(), origin)
    }

    /// A node that sent no usable report (`reason` says why: no output, garbage,
    /// gone since the baseline).
    pub fn missing(name: &str, origin: &str, reason: &str) -> NodeReport {
        NodeReport {
            name: name.to_string(),
            origin: origin.to_string(),
            findings: Vec::new(),
            inventory: None,
            missing: Some(reason.to_string()),
        }
    }

    /// Renames the node (e.g. to the Slurm node name a sweep line came from).
    pub fn with_name(mut self, name: &str) -> NodeReport {
        self.name = name.to_string();
        self
    }

    fn named(findings: Vec<NodeFinding>, inventory: Option<Inventory>, origin: &str) -> NodeReport {
        let mut inventory = inventory;
        let name = match inventory.as_mut() {
            Some(inv) => {
                inv.name_from_input(origin);
                inv.hostname.clone()
            }
            None => None,
        };
        let name = name.unwrap_or_else(|| {
            let mut inv = Inventory::default();
            inv.name_from_input(origin);
            inv.hostname.unwrap_or_else(|| origin.to_string())
        });
        NodeReport {
            name,
            origin: origin.to_string(),
            findings,
            inventory,
            missing: None,
        }
    }

    /// The node's own findings at or above `level`.
    pub fn findings_at(&self, level: Severity) -> impl Iterator<Item = &NodeFinding> {
        self.findings.iter().filter(move |f| f.severity >= level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_checked() {
        let e = NodeReport::from_doctor_json(r#"{"schema":"rdmakit.fleet/v1"}"#, "x").unwrap_err();
        assert!(matches!(e, ParseError::Schema { .. }), "{e}");
        let e = NodeReport::from_doctor_json("{not json", "x").unwrap_err();
        assert!(matches!(e, ParseError::Json(_)), "{e}");
        let e = NodeReport::from_doctor_json(
            r#"{"schema":"rdmakit.doctor/v1","findings":[{"code":"RDK-H002","severity":"fatal"}]}"#,
            "x",
        )
        .unwrap_err();
        assert!(matches!(e, ParseError::Shape(_)), "{e}");
    }

    #[test]
    fn named_after_host_then_origin() {
        let n = NodeReport::from_doctor_json(
            r#"{"schema":"rdmakit.doctor/v1","findings":[],"inventory":{"hostname":"gpu7"}}"#,
            "sweep.jsonl:3",
        )
        .unwrap();
        assert_eq!(n.name, "gpu7");
        let n = NodeReport::from_doctor_json(
            r#"{"schema":"rdmakit.doctor/v1","findings":[]}"#,
            "/d/node9.json",
        )
        .unwrap();
        assert_eq!(n.name, "node9");
        assert!(n.inventory.is_none());
    }
}
