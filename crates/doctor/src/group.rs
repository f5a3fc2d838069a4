//! Repeated findings, grouped: findings of one code, severity and layer whose messages
//! say the same thing once the subject is left out (the same cause on several ports,
//! devices or files). The human report prints a group once, listing its subjects and
//! evidence; the JSON keeps every finding and adds the groups beside them
//! (`groups[]`, docs/json-schema.md). Pure: computed from the findings on demand, so
//! it can never disagree with them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::codes::{Code, Layer, Severity};
use crate::finding::Finding;

/// Findings that share a cause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingGroup {
    pub code: Code,
    pub severity: Severity,
    #[serde(serialize_with = "crate::codes::layer_serde::one")]
    pub layer: Layer,
    /// The shared message, without the subject it started with.
    pub message: String,
    /// Each member's subject, in report order.
    pub subjects: Vec<String>,
    /// Indices of the members in the report's `findings[]`.
    pub findings: Vec<usize>,
}

impl FindingGroup {
    /// Its subjects in a line: "a, b, c" for up to three, else "a, b and 6 more"
    /// (the terminal's and the HTML report's heading of a group).
    pub fn subjects_inline(&self) -> String {
        let s = &self.subjects;
        if s.len() <= 3 {
            s.join(", ")
        } else {
            format!("{}, {} and {} more", s[0], s[1], s.len() - 2)
        }
    }
}

/// A finding's message without its leading subject ("mlx5_0 port 1 trained at 1X"
/// → "trained at 1X"); messages that do not start with it are kept whole.
pub fn cause(f: &Finding) -> &str {
    if f.subject.is_empty() {
        return &f.message;
    }
    match f.message.strip_prefix(f.subject.as_str()) {
        Some(rest) if rest.starts_with([' ', ':', ',']) => {
            rest.trim_start_matches([':', ',']).trim_start()
        }
        _ => &f.message,
    }
}

/// The groups of two or more findings, in the order of their first member.
pub fn groups(findings: &[Finding]) -> Vec<FindingGroup> {
    let mut by: BTreeMap<(Code, Severity, Layer, &str), Vec<usize>> = BTreeMap::new();
    for (i, f) in findings.iter().enumerate() {
        by.entry((f.code, f.severity, f.layer, cause(f)))
            .or_default()
            .push(i);
    }
    let mut out: Vec<FindingGroup> = by
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|((code, severity, layer, message), members)| FindingGroup {
            code,
            severity,
            layer,
            message: message.to_string(),
            subjects: members
                .iter()
                .map(|i| findings[*i].subject.clone())
                .collect(),
            findings: members,
        })
        .collect();
    out.sort_by_key(|g| g.findings[0]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(code: Code, subject: &str, message: &str) -> Finding {
        Finding::new(code, subject, message)
    }

    #[test]
    fn same_cause_across_devices_groups() {
        let v = vec![
            f(Code::H009, "/sys/a/rate", "unrecognized rate \"N/A\""),
            f(
                Code::H003,
                "mlx5_0 port 1",
                "mlx5_0 port 1 trained at 1X width",
            ),
            f(Code::H009, "/sys/b/rate", "unrecognized rate \"N/A\""),
            f(
                Code::H003,
                "mlx5_1 port 1",
                "mlx5_1 port 1 trained at 1X width",
            ),
            f(Code::H009, "/sys/c/state", "unrecognized port state \"?\""),
        ];
        let g = groups(&v);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].code, Code::H009);
        assert_eq!(g[0].findings, [0, 2]);
        assert_eq!(g[0].subjects, ["/sys/a/rate", "/sys/b/rate"]);
        assert_eq!(g[1].message, "trained at 1X width");
        assert_eq!(g[1].findings, [1, 3]);
    }

    #[test]
    fn different_severity_or_cause_stays_apart() {
        let v = vec![
            f(Code::H010, "a port 1", "error counters: x 12 (> 10)"),
            f(Code::H010, "b port 1", "error counters: x 13 (> 10)"),
            f(Code::H010, "c port 1", "error counters: x 12 (> 10)").severity(Severity::Error),
        ];
        assert!(groups(&v).is_empty());
        // A subject that is only a prefix of a word is not stripped.
        let g = f(Code::K002, "host", "hostile words");
        assert_eq!(cause(&g), "hostile words");
    }
}
