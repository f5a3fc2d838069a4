//! What a fleet is compared against besides itself: the previous sweep
//! (`--baseline`) and an expected inventory (`--expect`, written by
//! `rdmakit fleet baseline`).
//!
//! Between two sweeps (nodes matched by name): error counters that grew, links that
//! went down, firmware that changed and devices that vanished are reasons on the
//! node; nodes of the previous sweep absent now are `missing`; counters that went
//! backwards (a reboot or driver reload) and new nodes are only listed.
//!
//! The expected inventory holds, per cohort (hardware key), the value of each field
//! a majority of the nodes had when it was written; a later report checks every
//! node of a matching cohort against it, which works for a cluster too small for
//! majorities to mean anything.

use std::collections::{BTreeMap, BTreeSet};

use rdmakit_doctor::inventory::Inventory;
use serde::{Deserialize, Serialize};

use crate::cohort::{self, Hardware, Key};
use crate::drift::{self, Fields};
use crate::node::{NodeReport, Severity};
use crate::outlier::is_error_counter;
use crate::report::SCHEMA as FLEET_SCHEMA;

/// The schema of `rdmakit fleet baseline`'s file.
pub const EXPECT_SCHEMA: &str = "rdmakit.fleet-expect/v1";

/// One node of the previous sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviousNode {
    pub name: String,
    pub inventory: Option<Inventory>,
    /// It was already missing then.
    pub missing: bool,
}

/// The previous sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Previous {
    /// Where it came from (shown in reasons).
    pub source: String,
    pub nodes: Vec<PreviousNode>,
}

/// Why a previous fleet report could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input}: {reason}")]
pub struct BaselineError {
    pub input: String,
    pub reason: String,
}

#[derive(Deserialize)]
struct FleetDoc {
    #[serde(deserialize_with = "crate::unique::at_most_max_nodes")]
    nodes: Vec<FleetDocNode>,
}

#[derive(Deserialize)]
struct FleetDocNode {
    name: String,
    status: String,
    #[serde(default)]
    inventory: Option<Inventory>,
}

impl Previous {
    /// From a previous `rdmakit fleet report --json` (schema `rdmakit.fleet/v1`).
    ///
    /// # Errors
    /// Not that schema, or its nodes are malformed.
    pub fn from_fleet_json(source: &str, v: serde_json::Value) -> Result<Previous, BaselineError> {
        let err = |reason: String| BaselineError {
            input: source.to_string(),
            reason,
        };
        if v.get("schema").and_then(|s| s.as_str()) != Some(FLEET_SCHEMA) {
            return Err(err(format!("not a fleet report (schema {FLEET_SCHEMA})")));
        }
        let doc: FleetDoc = serde_json::from_value(v).map_err(|e| err(e.to_string()))?;
        Ok(Previous::from_doc(source, doc))
    }

    /// [`Previous::from_fleet_json`] from the JSON text, read straight into its
    /// fields (a generic JSON value takes up to 16 times the text), at most
    /// [`crate::unique::MAX_NODES`] nodes.
    ///
    /// # Errors
    /// Not that schema, its nodes are malformed, or too many.
    pub fn from_fleet_bytes(source: &str, text: &[u8]) -> Result<Previous, BaselineError> {
        let err = |reason: String| BaselineError {
            input: source.to_string(),
            reason,
        };
        let head = crate::node::Head::of(text).map_err(|e| err(e.to_string()))?;
        if head.schema() != Some(FLEET_SCHEMA) {
            return Err(err(format!("not a fleet report (schema {FLEET_SCHEMA})")));
        }
        let doc: FleetDoc = serde_json::from_slice(text).map_err(|e| err(e.to_string()))?;
        Ok(Previous::from_doc(source, doc))
    }

    fn from_doc(source: &str, doc: FleetDoc) -> Previous {
        Previous {
            source: source.to_string(),
            nodes: doc
                .nodes
                .into_iter()
                .map(|n| PreviousNode {
                    name: n.name,
                    missing: n.status == "missing",
                    inventory: n.inventory,
                })
                .collect(),
        }
    }

    /// From what was read at `path` (`--baseline PATH`): one previous
    /// fleet report, or node reports. Unreadable inputs are an error: the
    /// comparison would be meaningless.
    ///
    /// # Errors
    /// Read errors, no node report, several fleet reports or a mix, or a
    /// fleet report that is not one ([`Previous::from_fleet_json`]).
    pub fn from_loaded(path: &str, l: crate::input::Loaded) -> Result<Previous, String> {
        if !l.errors.is_empty() {
            let why: Vec<String> = l
                .errors
                .iter()
                .map(|e| format!("{}: {}", e.input, e.message))
                .collect();
            return Err(format!("--baseline {path}: {}", why.join("; ")));
        }
        match (l.fleets.len(), l.nodes.is_empty()) {
            (0, false) => Ok(Previous::from_nodes(path, &l.nodes)),
            (1, true) => {
                let (src, text) = l.fleets.into_iter().next().expect("one fleet report");
                Previous::from_fleet_bytes(&src, &text).map_err(|e| e.to_string())
            }
            (0, true) => Err(format!("--baseline {path}: holds no node report")),
            _ => Err(format!(
                "--baseline {path}: give one previous fleet report, or node reports"
            )),
        }
    }

    /// From node reports read like any other inputs.
    pub fn from_nodes(source: &str, nodes: &[NodeReport]) -> Previous {
        Previous {
            source: source.to_string(),
            nodes: nodes
                .iter()
                .map(|n| PreviousNode {
                    name: n.name.clone(),
                    inventory: n.inventory.clone(),
                    missing: n.missing.is_some(),
                })
                .collect(),
        }
    }
}

/// What changed on a node between two sweeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    CounterGrew,
    CounterReset,
    LinkDown,
    LinkUp,
    FirmwareChanged,
    DeviceGone,
    DeviceNew,
    NodeGone,
    NodeNew,
}

/// One change between the previous sweep and this one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub node: String,
    pub kind: ChangeKind,
    /// `mlx4_0 port 1 symbol_error`, `mlx4_0`, or empty for the node itself.
    pub subject: String,
    pub before: Option<String>,
    pub after: Option<String>,
    /// `info` changes are listed only; the others are reasons on the node.
    pub severity: Severity,
    pub message: String,
}

/// The changes of one node present in both sweeps.
pub fn node_changes(name: &str, before: &Inventory, now: &Inventory) -> Vec<Change> {
    let mut out = Vec::new();
    let mut push = |kind, subject: String, b: Option<String>, a: Option<String>, sev, msg| {
        out.push(Change {
            node: name.to_string(),
            kind,
            subject,
            before: b,
            after: a,
            severity: sev,
            message: msg,
        })
    };
    for bd in &before.devices {
        let Some(nd) = now.devices.iter().find(|d| d.name == bd.name) else {
            push(
                ChangeKind::DeviceGone,
                bd.name.clone(),
                Some(cohort::ident(bd)),
                None,
                Severity::Error,
                format!(
                    "{} ({}) was there in the previous sweep and is gone",
                    bd.name,
                    cohort::ident(bd)
                ),
            );
            continue;
        };
        if bd.fw_ver != nd.fw_ver {
            push(
                ChangeKind::FirmwareChanged,
                bd.name.clone(),
                bd.fw_ver.clone(),
                nd.fw_ver.clone(),
                Severity::Warning,
                format!(
                    "{} firmware changed: {} -> {}",
                    bd.name,
                    bd.fw_ver.as_deref().unwrap_or("?"),
                    nd.fw_ver.as_deref().unwrap_or("?")
                ),
            );
        }
        for bp in &bd.ports {
            let Some(np) = nd.ports.iter().find(|p| p.num == bp.num) else {
                continue;
            };
            let subject = format!("{} port {}", bd.name, bp.num);
            let st = |p: &rdmakit_doctor::inventory::InventoryPort| {
                p.state.clone().unwrap_or_else(|| "?".into())
            };
            if bp.is_active() && !np.is_active() {
                push(
                    ChangeKind::LinkDown,
                    subject.clone(),
                    Some(st(bp)),
                    Some(st(np)),
                    Severity::Error,
                    format!("{subject} went down: {} -> {}", st(bp), st(np)),
                );
            } else if !bp.is_active() && np.is_active() {
                push(
                    ChangeKind::LinkUp,
                    subject.clone(),
                    Some(st(bp)),
                    Some(st(np)),
                    Severity::Info,
                    format!("{subject} came up: {} -> {}", st(bp), st(np)),
                );
            }
            for (dir, b_map, n_map) in [
                ("counters", &bp.counters, &np.counters),
                ("hw_counters", &bp.hw_counters, &np.hw_counters),
            ] {
                for (c, bv) in b_map.iter().filter(|(c, _)| is_error_counter(c)) {
                    let Some(nv) = n_map.get(c) else { continue };
                    let subj = format!("{subject} {c}");
                    if nv > bv {
                        push(
                            ChangeKind::CounterGrew,
                            subj.clone(),
                            Some(bv.to_string()),
                            Some(nv.to_string()),
                            Severity::Warning,
                            format!("{subj} grew by {} ({bv} -> {nv}, {dir}/)", nv - bv),
                        );
                    } else if nv < bv {
                        push(
                            ChangeKind::CounterReset,
                            subj.clone(),
                            Some(bv.to_string()),
                            Some(nv.to_string()),
                            Severity::Info,
                            format!("{subj} went back ({bv} -> {nv}): reset by a reboot or driver reload"),
                        );
                    }
                }
            }
        }
    }
    for nd in &now.devices {
        if !before.devices.iter().any(|d| d.name == nd.name) {
            push(
                ChangeKind::DeviceNew,
                nd.name.clone(),
                None,
                Some(cohort::ident(nd)),
                Severity::Info,
                format!(
                    "{} ({}) is new since the previous sweep",
                    nd.name,
                    cohort::ident(nd)
                ),
            );
        }
    }
    out
}

/// An expected inventory: per cohort, the value of each field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expected {
    pub schema: String,
    #[serde(default)]
    pub tool: String,
    pub cohorts: Vec<ExpectedCohort>,
}

/// The expected values of one cohort.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectedCohort {
    /// How the hardware reads (informative; `hardware` is what is matched).
    #[serde(default)]
    pub label: String,
    pub hardware: Key,
    /// How many nodes it was written from.
    #[serde(default)]
    pub nodes: usize,
    /// Field → expected value (`fw_ver[mlx4_0]` → `2.31.5050`).
    pub values: BTreeMap<String, String>,
    /// Fields that had no majority when written (left out of `values`; add them by
    /// hand to pin them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undecided: Vec<String>,
}

/// Why an expected inventory could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpectError {
    #[error("{0}: not JSON: {1}")]
    Json(String, String),
    #[error("{0}: not an expected inventory (schema {EXPECT_SCHEMA}): {1}")]
    Schema(String, String),
}

/// `rdmakit fleet baseline`'s result: the expected inventory of a fleet
/// known to be right, and what to say of it.
#[derive(Debug)]
pub struct Baselined {
    /// The inventory's JSON, for the file `-o` names.
    pub json: String,
    /// For stderr: what it expects per cohort, then each input that could not
    /// be read, a line each.
    pub notes: String,
    /// [`Exit::Failed`] when an input could not be read, else [`Exit::Ok`].
    pub exit: rdmakit_vocab::exit::Exit,
}

impl Baselined {
    /// The expected inventory of the nodes `loaded` holds (the majority per
    /// cohort of each field).
    pub fn of(loaded: crate::input::Loaded) -> Baselined {
        use rdmakit_vocab::exit::Exit;
        let r = crate::report::FleetReport::from_loaded(loaded, &Default::default());
        let exp = Expected::from_report(crate::TOOL, &r);
        let mut notes: String = exp.summary().iter().map(|l| format!("{l}\n")).collect();
        for e in &r.errors {
            notes.push_str(&format!("rdmakit: bad input: {}: {}\n", e.input, e.message));
        }
        Baselined {
            json: exp.to_json() + "\n",
            notes,
            exit: if r.summary.exit_code == 2 {
                Exit::Failed
            } else {
                Exit::Ok
            },
        }
    }
}

impl Expected {
    /// Reads `--expect FILE`: a regular file or a pipe of at most one JSON
    /// document ([`rdmakit_host::bounded::Cap::DOCUMENT`]), UTF-8, an expected
    /// inventory.
    ///
    /// # Errors
    /// The file cannot be read, is not UTF-8 or not an expected inventory; the
    /// message names the flag and the file.
    pub fn read(path: &str) -> Result<Expected, String> {
        use rdmakit_host::bounded::{read_named, Cap};
        let bytes = read_named(std::path::Path::new(path), Cap::DOCUMENT)
            .map_err(|e| format!("--expect {e}"))?;
        let text = String::from_utf8(bytes).map_err(|e| format!("--expect {path}: {e}"))?;
        Expected::parse(path, &text).map_err(|e| e.to_string())
    }

    /// Builds the expected inventory of a fleet: per cohort, every field's majority
    /// value (`members` are each cohort's key and its nodes' fields).
    pub fn build(tool: &str, cohorts: &[(Key, Vec<&Fields>)]) -> Expected {
        Expected {
            schema: EXPECT_SCHEMA.to_string(),
            tool: tool.to_string(),
            cohorts: cohorts
                .iter()
                .map(|(key, members)| {
                    let mut by: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
                    for f in members {
                        for (k, v) in f.iter() {
                            by.entry(k).or_default().push(("", v));
                        }
                    }
                    let mut values = BTreeMap::new();
                    let mut undecided = Vec::new();
                    for (k, vals) in by {
                        match drift::majority(&vals) {
                            Some((v, _)) => {
                                values.insert(k.to_string(), v.to_string());
                            }
                            None => undecided.push(k.to_string()),
                        }
                    }
                    ExpectedCohort {
                        label: cohort::label(key),
                        hardware: key.clone(),
                        nodes: members.len(),
                        values,
                        undecided,
                    }
                })
                .collect(),
        }
    }

    /// The expected inventory of an analyzed fleet: each cohort's majority values.
    pub fn from_report(tool: &str, r: &crate::report::FleetReport) -> Expected {
        let fields: Vec<(Option<&str>, Fields)> = r
            .nodes
            .iter()
            .filter_map(|n| {
                n.inventory
                    .as_ref()
                    .map(|inv| (n.cohort.as_deref(), drift::fields(inv)))
            })
            .collect();
        // Grouped once by cohort id: linear in the nodes, however many cohorts.
        let mut by_cohort: std::collections::HashMap<&str, Vec<&Fields>> =
            std::collections::HashMap::new();
        for (id, f) in &fields {
            if let Some(id) = id {
                by_cohort.entry(id).or_default().push(f);
            }
        }
        let cohorts: Vec<(Key, Vec<&Fields>)> = r
            .cohorts
            .iter()
            .map(|c| {
                let members = by_cohort.remove(c.id.as_str()).unwrap_or_default();
                (c.hardware.clone(), members)
            })
            .collect();
        Expected::build(tool, &cohorts)
    }

    /// Parses an expected inventory.
    ///
    /// # Errors
    /// Not JSON, or not of schema `rdmakit.fleet-expect/v1`.
    pub fn parse(source: &str, text: &str) -> Result<Expected, ExpectError> {
        // Into its own type, never a generic JSON value (16 times the text).
        let head = match crate::node::Head::of(text.as_bytes()) {
            Ok(h) => h,
            Err(crate::node::ParseError::Json(e)) => {
                return Err(ExpectError::Json(source.to_string(), e))
            }
            Err(_) => crate::node::Head {
                schema: None,
                format: None,
            },
        };
        let schema = head.schema().unwrap_or_default();
        if schema != EXPECT_SCHEMA {
            return Err(ExpectError::Schema(
                source.to_string(),
                format!("found schema {schema:?}"),
            ));
        }
        serde_json::from_str(text)
            .map_err(|e| ExpectError::Schema(source.to_string(), e.to_string()))
    }

    /// The expected cohort a hardware key is checked against: the one with the
    /// same key, else the only one whose key is a strict superset (a node that
    /// lost an adapter kind).
    pub fn cohort_for(&self, key: &Key) -> Option<&ExpectedCohort> {
        if let Some(c) = self.cohorts.iter().find(|c| &c.hardware == key) {
            return Some(c);
        }
        let set: BTreeSet<&Hardware> = key.iter().collect();
        let mut supersets = self
            .cohorts
            .iter()
            .filter(|c| c.hardware.len() > key.len() && set.iter().all(|h| c.hardware.contains(h)));
        let first = supersets.next()?;
        supersets.next().is_none().then_some(first)
    }

    /// One line per cohort, for whoever wrote the file: "LABEL: N node(s), M
    /// expected value(s)", and the fields no majority decided (left out, to be
    /// pinned by hand).
    pub fn summary(&self) -> Vec<String> {
        self.cohorts
            .iter()
            .map(|c| {
                let undecided = match c.undecided.is_empty() {
                    true => String::new(),
                    false => format!(
                        "; no majority for {} (left out: pin them by hand)",
                        c.undecided.join(", ")
                    ),
                };
                format!(
                    "{}: {} node(s), {} expected value(s){undecided}",
                    c.label,
                    c.nodes,
                    c.values.len()
                )
            })
            .collect()
    }

    /// The JSON file (pretty, stable order).
    pub fn to_json(&self) -> String {
        // Plain data with string keys: serialization cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// A node's mismatches against an expected cohort: (severity, field, message).
pub fn expect_mismatches(fields: &Fields, exp: &ExpectedCohort) -> Vec<(Severity, String, String)> {
    let mut out = Vec::new();
    for (k, want) in &exp.values {
        let got = fields.get(k);
        if got == Some(want) {
            continue;
        }
        // Per-port values of a port that is not ACTIVE here are absent: the port
        // state is the doctor's finding; a missing device is device_count's.
        if got.is_none() && k.contains('[') {
            continue;
        }
        let have = got.map_or("absent", String::as_str);
        let below = matches!(k.as_str(), "device_count" | "port_count")
            && matches!((have.parse::<u64>(), want.parse::<u64>()), (Ok(h), Ok(w)) if h < w);
        let sev = if below {
            Severity::Error
        } else {
            Severity::Warning
        };
        out.push((
            sev,
            k.clone(),
            format!("{k} is {have}; expected {want} (--expect)"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{InputError, Loaded};

    fn loaded() -> Loaded {
        Loaded {
            nodes: vec![],
            errors: vec![],
            inputs: vec![],
            fleets: vec![],
            duplicates: vec![],
        }
    }

    #[test]
    fn a_previous_sweep_that_cannot_be_used_says_why() {
        let e = Previous::from_loaded("old", loaded()).unwrap_err();
        assert_eq!(e, "--baseline old: holds no node report");
        let mut l = loaded();
        l.errors.push(InputError {
            input: "old/a.json".into(),
            message: "not JSON".into(),
        });
        let e = Previous::from_loaded("old", l).unwrap_err();
        assert_eq!(e, "--baseline old: old/a.json: not JSON");
        let mut l = loaded();
        l.fleets
            .push(("f.json".into(), br#"{"schema": "x"}"#.to_vec()));
        let e = Previous::from_loaded("f.json", l).unwrap_err();
        assert!(e.starts_with("f.json: not a fleet report"), "{e}");
        let mut l = loaded();
        l.fleets = vec![("a".into(), b"{}".to_vec()), ("b".into(), b"{}".to_vec())];
        let e = Previous::from_loaded("d", l).unwrap_err();
        assert_eq!(
            e,
            "--baseline d: give one previous fleet report, or node reports"
        );
    }
}
