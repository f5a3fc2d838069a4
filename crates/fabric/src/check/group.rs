//! One cause on many ports of one node, said once.
//!
//! Each check yields a [`Draft`] per port: the finding for that port, and
//! the cause in words that do not change from port to port ("SymbolErrorCounter
//! above the threshold 10"). [`merge`] turns drafts of one code, severity,
//! node and cause on two or more ports into one finding about the node that
//! lists each port with its value and keeps every port's evidence and next
//! commands; a draft alone stays as it is. Across nodes the doctor's
//! renderer groups findings whose messages say the same thing
//! (`rdmakit_doctor::group`), as it does for a host's devices.

use std::collections::BTreeMap;

use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::finding::Finding;

/// How many ports a merged message lists before "and N more" (the evidence
/// keeps them all).
pub const LISTED_PORTS: usize = 8;

/// A finding about one port, before grouping.
#[derive(Clone, Debug, PartialEq)]
pub struct Draft {
    /// The finding for this port alone.
    pub finding: Finding,
    /// The node it is about (GUID and name) when it is about one port of
    /// one node; None: never merged.
    pub node: Option<(u64, String)>,
    /// The port.
    pub port: u8,
    /// The cause without this port's values; None: never merged.
    pub cause: Option<String>,
    /// This port's values, as a merged message lists them ("100").
    pub value: String,
}

impl Draft {
    /// A draft that is never merged.
    pub fn alone(finding: Finding) -> Draft {
        Draft {
            finding,
            node: None,
            port: 0,
            cause: None,
            value: String::new(),
        }
    }

    /// A draft about `port` of a node, merged with the node's other drafts
    /// of the same code, severity and cause.
    pub fn port(
        finding: Finding,
        node: (u64, String),
        port: u8,
        cause: impl Into<String>,
        value: impl Into<String>,
    ) -> Draft {
        Draft {
            finding,
            node: Some(node),
            port,
            cause: Some(cause.into()),
            value: value.into(),
        }
    }
}

/// The findings of the drafts, those of one code, severity, node and cause
/// on two or more ports merged into one; in the order of each one's first
/// draft.
pub fn merge(drafts: Vec<Draft>) -> Vec<Finding> {
    type Key = (Code, Severity, u64, String);
    let mut members: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (i, d) in drafts.iter().enumerate() {
        if let (Some((guid, _)), Some(cause)) = (&d.node, &d.cause) {
            members
                .entry((d.finding.code, d.finding.severity, *guid, cause.clone()))
                .or_default()
                .push(i);
        }
    }
    let mut group_of: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut merged = vec![false; drafts.len()];
    for v in members.into_values().filter(|v| v.len() > 1) {
        for &i in &v {
            merged[i] = true;
        }
        group_of.insert(v[0], v);
    }
    let mut out = Vec::new();
    for (i, d) in drafts.iter().enumerate() {
        if let Some(v) = group_of.get(&i) {
            let ds: Vec<&Draft> = v.iter().map(|&j| &drafts[j]).collect();
            out.push(one(&ds));
        } else if !merged[i] {
            out.push(d.finding.clone());
        }
    }
    out
}

/// The finding for a node of several drafts (all with a node and a cause).
fn one(ds: &[&Draft]) -> Finding {
    let first = ds[0];
    let name = first.node.as_ref().map_or("", |n| n.1.as_str());
    let cause = first.cause.as_deref().unwrap_or("");
    let listed: Vec<String> = ds
        .iter()
        .take(LISTED_PORTS)
        .map(|d| {
            if d.value.is_empty() {
                d.port.to_string()
            } else {
                format!("{} ({})", d.port, d.value)
            }
        })
        .collect();
    let more = ds.len().saturating_sub(LISTED_PORTS);
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let message = format!(
        "{name}: {cause} on {} ports: {}{tail}",
        ds.len(),
        listed.join(", ")
    );
    let mut f = Finding::new(first.finding.code, name, message)
        .severity(first.finding.severity)
        .remedy(first.finding.remedy.clone())
        .brief(format!("{name}: {cause} on {} ports", ds.len()));
    f.layer = first.finding.layer;
    f.omission = first.finding.omission;
    for d in ds {
        f.evidence.extend(d.finding.evidence.iter().cloned());
        for n in &d.finding.next {
            if !f.next.contains(n) {
                f.next.push(n.clone());
            }
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(guid: u64, port: u8, cause: &str, value: &str) -> Draft {
        let name = format!("sw{guid}");
        let f = Finding::new(
            Code::F005,
            format!("{name} port {port}"),
            format!("{name} port {port}: {cause}: {value}"),
        )
        .next(format!("perfquery -x {guid} {port}"))
        .next("ibqueryerrors");
        Draft::port(f, (guid, name), port, cause, value)
    }

    #[test]
    fn one_cause_on_many_ports_of_a_node_is_one_finding() {
        let mut v: Vec<Draft> = (1..=10)
            .map(|p| d(2, p, "SymbolErrorCounter", "100"))
            .collect();
        v.insert(3, d(3, 1, "SymbolErrorCounter", "7"));
        v.push(d(2, 11, "PortRcvErrors", "12"));
        let out = merge(v);
        assert_eq!(out.len(), 3, "{out:#?}");
        assert_eq!(out[0].subject, "sw2");
        assert!(
            out[0]
                .message
                .starts_with("sw2: SymbolErrorCounter on 10 ports: 1 (100), 2 (100)"),
            "{}",
            out[0].message
        );
        assert!(out[0].message.ends_with("and 2 more"), "{}", out[0].message);
        assert_eq!(
            out[0].next.len(),
            11,
            "each port's command once, ibqueryerrors once"
        );
        assert_eq!(out[1].subject, "sw3 port 1");
        assert_eq!(out[2].subject, "sw2 port 11");
    }
}
