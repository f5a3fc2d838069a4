//! Categorical drift within a cohort: for each compared field, the value more than
//! half the cohort's nodes have (the majority) and the nodes that differ.
//!
//! Fields (from the doctor's inventory; a node without a value is not compared):
//! `kernel`, `rdma_core`, `memlock`, `device_count`, `port_count`, per device
//! `driver[DEV]`, `fw_ver[DEV]`, `pcie_speed[DEV]`, `pcie_width[DEV]` (current link),
//! and per ACTIVE port `rate[DEV/PORT]`, `width[DEV/PORT]`, `active_mtu[DEV/PORT]`;
//! per RoCE port whose DCB facts were read `roce_tos`, `trust`, `roce_priority`,
//! `pfc`, `ecn_np`, `ecn_rp` (`[DEV/PORT]`); per link beneath RoCE
//! `module_part[IF]`, `fec[IF]`, `global_pause[IF]`.
//!
//! When no value has a strict majority (two nodes that disagree, a 2–2 split) every
//! node of the field is reported: nothing says which side is right, which is what
//! `--expect` is for.

use std::collections::BTreeMap;

use rdmakit_doctor::inventory::Inventory;
use serde::{Deserialize, Serialize};

use crate::node::Severity;

/// The compared fields of one node: field name → value as shown.
pub type Fields = BTreeMap<String, String>;

/// The fields of an inventory.
pub fn fields(inv: &Inventory) -> Fields {
    let mut f = Fields::new();
    let mut put = |k: String, v: Option<String>| {
        if let Some(v) = v {
            f.insert(k, v);
        }
    };
    put("kernel".into(), inv.kernel.clone());
    put("rdma_core".into(), inv.rdma_core.clone());
    put("memlock".into(), inv.memlock.clone());
    put("device_count".into(), Some(inv.devices.len().to_string()));
    put(
        "port_count".into(),
        Some(
            inv.devices
                .iter()
                .map(|d| d.ports.len())
                .sum::<usize>()
                .to_string(),
        ),
    );
    for d in &inv.devices {
        let n = &d.name;
        put(format!("driver[{n}]"), d.driver.clone());
        put(format!("fw_ver[{n}]"), d.fw_ver.clone());
        if let Some(p) = &d.pcie {
            put(format!("pcie_speed[{n}]"), p.current_speed.clone());
            put(
                format!("pcie_width[{n}]"),
                p.current_width.map(|w| format!("x{w}")),
            );
        }
        for p in d.ports.iter().filter(|p| p.is_active()) {
            let s = format!("{n}/{}", p.num);
            put(format!("rate[{s}]"), p.rate.clone());
            put(format!("width[{s}]"), p.width.clone());
            put(
                format!("active_mtu[{s}]"),
                p.active_mtu.map(|m| m.to_string()),
            );
        }
        for p in &d.ports {
            let Some(q) = &p.qos else { continue };
            let s = format!("{n}/{}", p.num);
            put(format!("roce_tos[{s}]"), Some(q.tos.to_string()));
            put(format!("trust[{s}]"), Some(q.trust.clone()));
            put(
                format!("roce_priority[{s}]"),
                q.priority.map(|v| v.to_string()),
            );
            put(format!("pfc[{s}]"), q.pfc.clone());
            put(format!("ecn_np[{s}]"), q.ecn_np.clone());
            put(format!("ecn_rp[{s}]"), q.ecn_rp.clone());
        }
    }
    for l in &inv.links {
        let n = &l.name;
        put(format!("module_part[{n}]"), l.module_part.clone());
        put(format!("fec[{n}]"), l.fec.clone());
        put(format!("global_pause[{n}]"), l.global_pause.clone());
    }
    f
}

/// Nodes that share one value of a field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueNodes {
    pub value: String,
    pub nodes: Vec<String>,
}

/// A field on which a cohort's nodes disagree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    /// The cohort's id (`c1`).
    pub cohort: String,
    /// `fw_ver[mlx4_0]`.
    pub field: String,
    /// The value more than half the nodes with a value have; `null` when none does.
    pub majority: Option<String>,
    /// How many nodes have the majority value.
    pub majority_nodes: usize,
    /// How many nodes have a value for the field.
    pub nodes: usize,
    /// Every other value and the nodes that have it (every value when there is no
    /// majority), most common first.
    pub minority: Vec<ValueNodes>,
}

impl Drift {
    /// The reason given to a node with `value`: severity and message.
    pub fn reason_for(&self, value: &str) -> (Severity, String) {
        let sev = match (self.field.as_str(), &self.majority) {
            ("device_count" | "port_count", Some(m)) => {
                let below = match (value.parse::<u64>(), m.parse::<u64>()) {
                    (Ok(v), Ok(m)) => v < m,
                    _ => false,
                };
                if below {
                    Severity::Error
                } else {
                    Severity::Warning
                }
            }
            _ => Severity::Warning,
        };
        let value = shown(value);
        let msg = match &self.majority {
            Some(m) => format!(
                "{} is {value}; cohort {} has {} on {} of {} nodes",
                self.field,
                self.cohort,
                shown(m),
                self.majority_nodes,
                self.nodes
            ),
            None => {
                // The most common few: every node of a split gets this message, so
                // it must not grow with the number of values.
                const SHOWN: usize = 4;
                let mut split = self
                    .minority
                    .iter()
                    .take(SHOWN)
                    .map(|v| format!("{} on {}", shown(&v.value), v.nodes.len()))
                    .collect::<Vec<_>>()
                    .join(", ");
                if self.minority.len() > SHOWN {
                    split.push_str(&format!(
                        " and {} other values",
                        self.minority.len() - SHOWN
                    ));
                }
                format!(
                    "{} is {value}; cohort {} is split ({split}), no majority: pin it with --expect",
                    self.field, self.cohort,
                )
            }
        };
        (sev, msg)
    }
}

/// A value as a message shows it: an empty one (soft-RoCE's fw_ver) as `(empty)`.
pub fn shown(value: &str) -> &str {
    if value.is_empty() {
        "(empty)"
    } else {
        value
    }
}

/// The majority value of a field among `values` (node name, value), if one value
/// is held by more than half of them.
pub fn majority<'a>(values: &[(&'a str, &'a str)]) -> Option<(&'a str, usize)> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, v) in values {
        *counts.entry(v).or_default() += 1;
    }
    let (v, n) = counts.into_iter().max_by_key(|(_, n)| *n)?;
    (n * 2 > values.len()).then_some((v, n))
}

/// The drift of one cohort: `members` are (node name, fields); fields in `skip`
/// (checked against an expected inventory instead) are left out.
pub fn cohort_drift(
    cohort: &str,
    members: &[(&str, &Fields)],
    skip: &dyn Fn(&str) -> bool,
) -> Vec<Drift> {
    let mut by_field: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for (name, f) in members {
        for (k, v) in f.iter() {
            by_field
                .entry(k.as_str())
                .or_default()
                .push((name, v.as_str()));
        }
    }
    let mut out = Vec::new();
    for (field, values) in by_field {
        if skip(field) {
            continue;
        }
        let first = values[0].1;
        if values.iter().all(|(_, v)| *v == first) {
            continue;
        }
        let maj = majority(&values);
        let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (n, v) in &values {
            if maj.map(|(m, _)| m) != Some(*v) {
                groups.entry(v).or_default().push(n.to_string());
            }
        }
        let mut minority: Vec<ValueNodes> = groups
            .into_iter()
            .map(|(value, mut nodes)| {
                nodes.sort_by(|a, b| crate::report::natural_cmp(a, b));
                ValueNodes {
                    value: value.to_string(),
                    nodes,
                }
            })
            .collect();
        minority.sort_by(|a, b| {
            b.nodes
                .len()
                .cmp(&a.nodes.len())
                .then(a.value.cmp(&b.value))
        });
        out.push(Drift {
            cohort: cohort.to_string(),
            field: field.to_string(),
            majority: maj.map(|(m, _)| m.to_string()),
            majority_nodes: maj.map_or(0, |(_, n)| n),
            nodes: values.len(),
            minority,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn majority_and_minority() {
        let a = f(&[("fw_ver[mlx4_0]", "2.31.5050"), ("device_count", "2")]);
        let b = f(&[("fw_ver[mlx4_0]", "2.30.8000"), ("device_count", "1")]);
        let members = [("n1", &a), ("n2", &a), ("n3", &b), ("n4", &a)];
        let d = cohort_drift("c1", &members, &|_| false);
        assert_eq!(d.len(), 2);
        let fw = d.iter().find(|d| d.field.starts_with("fw_ver")).unwrap();
        assert_eq!(fw.majority.as_deref(), Some("2.31.5050"));
        assert_eq!(fw.majority_nodes, 3);
        assert_eq!(fw.minority[0].nodes, vec!["n3"]);
        let dc = d.iter().find(|d| d.field == "device_count").unwrap();
        assert_eq!(dc.reason_for("1").0, Severity::Error);
        assert_eq!(fw.reason_for("2.30.8000").0, Severity::Warning);
    }

    #[test]
    fn an_empty_value_is_named_not_left_blank() {
        // Soft-RoCE's fw_ver is empty (fixtures/healthy); one node with firmware drifts.
        let a = f(&[("fw_ver[rxe0]", "")]);
        let b = f(&[("fw_ver[rxe0]", "20.31.1014")]);
        let d = cohort_drift("c1", &[("n1", &a), ("n2", &a), ("n3", &b)], &|_| false);
        assert_eq!(
            d[0].reason_for("20.31.1014").1,
            "fw_ver[rxe0] is 20.31.1014; cohort c1 has (empty) on 2 of 3 nodes"
        );
        assert!(d[0]
            .reason_for("")
            .1
            .starts_with("fw_ver[rxe0] is (empty);"));
    }

    #[test]
    fn a_split_has_no_majority_and_names_everyone() {
        let a = f(&[("kernel", "6.1")]);
        let b = f(&[("kernel", "6.5")]);
        let d = cohort_drift("c1", &[("n1", &a), ("n2", &b)], &|_| false);
        assert_eq!(d[0].majority, None);
        assert_eq!(d[0].minority.len(), 2);
        assert!(d[0].reason_for("6.1").1.contains("no majority"));
    }

    #[test]
    fn skipped_and_uniform_fields_are_not_drift() {
        let a = f(&[("kernel", "6.1"), ("memlock", "1")]);
        let b = f(&[("kernel", "6.5"), ("memlock", "1")]);
        assert!(cohort_drift("c1", &[("n1", &a), ("n2", &b)], &|k| k == "kernel").is_empty());
    }
}
