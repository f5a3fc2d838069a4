//! The fleet report (schema `rdmakit.fleet/v1`) and [`analyze`], which builds it
//! from node reports: every node's status and reasons, the findings grouped by code,
//! the cohorts, the drift, the outliers and the changes since a previous sweep.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use rdmakit_doctor::inventory::Inventory;
use serde::{Deserialize, Serialize};

use crate::baseline::{self, Change, ChangeKind, Expected, Previous};
use crate::cohort::{self, Key};
use crate::drift::{self, Drift, Fields};
use crate::input::{InputError, InputKind, InputSummary, Loaded};
use crate::node::{NodeReport, Severity};
use crate::outlier::{self, CohortThresholds, Rule};
use crate::unique::Unique;

/// The JSON schema identifier; bumped when a field changes meaning or disappears.
pub const SCHEMA: &str = "rdmakit.fleet/v1";

/// A node's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warning,
    Error,
    /// No usable report came from the node.
    Missing,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Error => "error",
            Status::Missing => "missing",
        }
    }

    /// Order of attention: error, missing, warning, ok.
    pub fn rank(self) -> u8 {
        match self {
            Status::Error => 0,
            Status::Missing => 1,
            Status::Warning => 2,
            Status::Ok => 3,
        }
    }
}

/// Where a reason comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonKind {
    /// The node's own doctor found it (`code` is the finding's).
    Finding,
    /// The node differs from its cohort's majority.
    Drift,
    /// A number far from its cohort's.
    Outlier,
    /// Changed since the previous sweep (`--baseline`).
    Change,
    /// Differs from the expected inventory (`--expect`).
    Expect,
    /// No usable report.
    Missing,
    /// Another input reported a node of the same name.
    Duplicate,
}

impl ReasonKind {
    /// The word reports print for the kind ("drift", "changed", ...).
    pub fn word(self) -> &'static str {
        match self {
            ReasonKind::Finding => "finding",
            ReasonKind::Drift => "drift",
            ReasonKind::Outlier => "outlier",
            ReasonKind::Change => "changed",
            ReasonKind::Expect => "expect",
            ReasonKind::Missing => "missing",
            ReasonKind::Duplicate => "duplicate",
        }
    }
}

/// Why a node needs attention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reason {
    pub severity: Severity,
    pub kind: ReasonKind,
    /// The doctor's code for `finding` reasons (`RDK-H002`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// `mlx5_0 port 1`, `fw_ver[mlx4_0]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub message: String,
}

/// One node of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetNode {
    pub name: String,
    pub status: Status,
    /// Most severe first; empty when `ok`.
    pub reasons: Vec<Reason>,
    /// Where its report was read.
    pub origin: String,
    /// Its cohort's id, when it has an inventory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    /// The node's inventory (what a later `--baseline` compares against).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Inventory>,
    /// Where its HCA ports meet the InfiniBand fabric (`--fabric`), for a
    /// node that needs attention: the switch port, its error counters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fabric: Vec<crate::fabric::Attachment>,
}

/// One finding code across nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingGroup {
    pub code: String,
    /// The most severe instance.
    pub severity: Severity,
    /// The nodes that have it.
    pub nodes: Vec<String>,
    /// How many findings (a node may have several).
    pub count: usize,
    /// One instance: `subject: message` of the first node.
    pub example: String,
}

/// A group of comparable nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cohort {
    /// `c1`, `c2`, ... largest first.
    pub id: String,
    pub label: String,
    pub hardware: Key,
    pub nodes: Vec<String>,
}

/// A value far from its cohort's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outlier {
    pub cohort: String,
    pub node: String,
    /// `rate_gbps` or `counters/symbol_error`, `hw_counters/retry_exceeded_err`.
    pub metric: String,
    /// `mlx4_0 port 2`.
    pub subject: String,
    pub value: f64,
    pub median: f64,
    pub mad: f64,
    /// Modified z-score.
    pub z: f64,
    pub rule: Rule,
    pub message: String,
}

impl Outlier {
    /// The outlier `f` flagged: `node`'s `value` of `metric` on `subject`, in cohort `cohort`.
    fn flagged(
        cohort: &str,
        node: &str,
        metric: &str,
        subject: &str,
        value: f64,
        f: &outlier::Flag,
        message: String,
    ) -> Outlier {
        Outlier {
            cohort: cohort.to_string(),
            node: node.to_string(),
            metric: metric.to_string(),
            subject: subject.to_string(),
            value,
            median: f.spread.median,
            mad: f.spread.mad,
            z: round2(f.z),
            rule: f.rule,
            message,
        }
    }
}

/// Reports of one node name from several inputs ([`crate::unique`]).
pub use crate::unique::Duplicate;

/// Counts and the exit status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub nodes: usize,
    pub ok: usize,
    pub warning: usize,
    pub error: usize,
    pub missing: usize,
    pub cohorts: usize,
    /// Inputs or lines that could not be read (`errors[]`).
    pub bad_inputs: usize,
    /// 0 every node ok, 1 a node is not, 2 bad input (unreadable, duplicate names).
    pub exit_code: u8,
}

/// The fleet report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetReport {
    pub schema: String,
    pub tool: String,
    pub summary: Summary,
    /// Every node, by name.
    pub nodes: Vec<FleetNode>,
    /// Warning and error findings by code, most nodes first.
    pub findings: Vec<FindingGroup>,
    pub cohorts: Vec<Cohort>,
    pub drift: Vec<Drift>,
    pub outliers: Vec<Outlier>,
    /// Changes since `--baseline` (empty without one).
    pub changes: Vec<Change>,
    pub inputs: Vec<InputSummary>,
    /// Inputs (or lines) that could not be read.
    pub errors: Vec<InputError>,
    pub duplicates: Vec<Duplicate>,
    /// What could not be compared, and why.
    pub notes: Vec<String>,
    /// The `--baseline` source, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// The `--expect` source, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
}

/// How to analyze.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub thresholds: CohortThresholds,
    /// `rdmakit 0.1.0`.
    pub tool: String,
    /// The previous sweep (`--baseline`).
    pub previous: Option<Previous>,
    /// The expected inventory and where it came from (`--expect`).
    pub expected: Option<(String, Expected)>,
}

impl FleetReport {
    /// The exit status the summary gives ([`Summary::exit_code`]): 0 every
    /// node fine, 1 a node needing attention, 2 bad inputs.
    pub fn exit(&self) -> rdmakit_vocab::exit::Exit {
        rdmakit_vocab::exit::Exit::from_code(self.summary.exit_code)
            .unwrap_or(rdmakit_vocab::exit::Exit::Failed)
    }
}

impl Options {
    /// How `fleet report` and `fleet sweep` judge: this rdmakit as the tool,
    /// the previous sweep `--baseline PREVIOUS` names (a previous fleet
    /// report, or inputs of the kinds `report` reads, read with `load`) and the
    /// expected inventory `--expect FILE` names ([`Expected::read`]). Read
    /// before any work, so a bad file costs nothing.
    ///
    /// # Errors
    /// Either file unreadable or not of its kind: an error (exit 2), since the
    /// comparison would be meaningless.
    pub fn of_flags(
        baseline: Option<&str>,
        expect: Option<&str>,
        load: &dyn Fn(&[String]) -> Loaded,
    ) -> Result<Options, String> {
        let previous = match baseline {
            Some(path) => Some(Previous::from_loaded(path, load(&[path.to_string()]))?),
            None => None,
        };
        Ok(Options {
            tool: crate::TOOL.to_string(),
            previous,
            expected: match expect {
                Some(p) => Some((p.to_string(), Expected::read(p)?)),
                None => None,
            },
            ..Options::default()
        })
    }
}

impl FleetReport {
    /// Analyzes what [`crate::input::load`] read. A previous fleet report among the
    /// inputs is an input error (it belongs to `--baseline`).
    pub fn from_loaded(loaded: Loaded, opts: &Options) -> FleetReport {
        let mut errors = loaded.errors;
        for (path, _) in &loaded.fleets {
            errors.push(InputError {
                input: path.clone(),
                message: "a fleet report, not a node's: pass it with --baseline".into(),
            });
        }
        let mut inputs = loaded.inputs;
        for i in &mut inputs {
            if i.kind == InputKind::FleetJson {
                i.errors += 1;
            }
        }
        analyze_with(loaded.nodes, loaded.duplicates, errors, inputs, opts)
    }

    /// Whether any node is not ok.
    pub fn any_attention(&self) -> bool {
        self.nodes.iter().any(|n| n.status != Status::Ok)
    }
}

/// Builds the report. `errors` and `inputs` come from reading the inputs.
///
/// A name that several reports carry counts once: the last of them is used and
/// the name is one `duplicates[]` entry and one reason on that node
/// ([`crate::unique`]). The work is linear in the number of reports (names are
/// looked up by hash, no message lists more than a few of its peers).
pub fn analyze(
    nodes: Vec<NodeReport>,
    errors: Vec<InputError>,
    inputs: Vec<InputSummary>,
    opts: &Options,
) -> FleetReport {
    analyze_with(nodes, Vec::new(), errors, inputs, opts)
}

/// [`analyze`], with the duplicates found while the inputs were read.
fn analyze_with(
    nodes: Vec<NodeReport>,
    mut duplicates: Vec<Duplicate>,
    errors: Vec<InputError>,
    inputs: Vec<InputSummary>,
    opts: &Options,
) -> FleetReport {
    let (mut nodes, more) = nodes.into_iter().collect::<Unique>().into_parts();
    duplicates.extend(more);
    duplicates.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    if let Some(prev) = &opts.previous {
        let now: BTreeSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
        for p in prev.nodes.iter().filter(|p| !now.contains(&p.name)) {
            nodes.push(NodeReport::missing(
                &p.name,
                &prev.source,
                &format!("in the baseline ({}), absent from this report", prev.source),
            ));
        }
    }
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut reasons: Vec<Vec<Reason>> = nodes.iter().map(own_reasons).collect();
    for d in &duplicates {
        if let Some(&i) = index.get(d.name.as_str()) {
            reasons[i].push(Reason {
                severity: Severity::Warning,
                kind: ReasonKind::Duplicate,
                code: None,
                subject: None,
                message: d.message(),
            });
        }
    }

    // Cohorts, of the nodes with an inventory.
    let fields: Vec<Option<Fields>> = nodes
        .iter()
        .map(|n| {
            n.missing
                .is_none()
                .then_some(n.inventory.as_ref())
                .flatten()
                .map(drift::fields)
        })
        .collect();
    let keys: Vec<(usize, Key)> = nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| fields[*i].is_some())
        .filter_map(|(i, n)| n.inventory.as_ref().map(|inv| (i, cohort::key(inv))))
        .collect();
    let own_key: BTreeMap<usize, Key> = keys.iter().cloned().collect();
    let groups = cohort::group(&keys);
    let mut cohort_of: Vec<Option<String>> = vec![None; nodes.len()];
    let mut cohorts = Vec::new();
    let mut notes = Vec::new();
    for (ci, (key, members)) in groups.iter().enumerate() {
        let id = format!("c{}", ci + 1);
        for &m in members {
            cohort_of[m] = Some(id.clone());
        }
        let mut names: Vec<String> = members.iter().map(|&m| nodes[m].name.clone()).collect();
        names.sort_by(|a, b| natural_cmp(a, b));
        if members.len() == 1 {
            notes.push(format!(
                "cohort {id} ({}) has one node ({}): nothing to compare it with",
                cohort::label(key),
                names[0]
            ));
        }
        cohorts.push(Cohort {
            id,
            label: cohort::label(key),
            hardware: key.clone(),
            nodes: names,
        });
    }
    let no_inventory = nodes
        .iter()
        .filter(|n| n.missing.is_none() && n.inventory.is_none())
        .count();
    if no_inventory > 0 {
        notes.push(format!(
            "{no_inventory} node report(s) carry no inventory (a doctor older than the fleet \
             inventory): they are judged by their own findings only"
        ));
    }

    // Expected inventory.
    let expected = opts.expected.as_ref().map(|(_, e)| e);
    let mut expected_fields: Vec<BTreeSet<String>> = vec![BTreeSet::new(); groups.len()];
    if let Some(exp) = expected {
        for (ci, (_, members)) in groups.iter().enumerate() {
            for &m in members {
                let (Some(f), Some(k)) = (&fields[m], own_key.get(&m)) else {
                    continue;
                };
                match exp.cohort_for(k) {
                    Some(ec) => {
                        expected_fields[ci].extend(ec.values.keys().cloned());
                        for (sev, field, msg) in baseline::expect_mismatches(f, ec) {
                            reasons[m].push(Reason {
                                severity: sev,
                                kind: ReasonKind::Expect,
                                code: None,
                                subject: Some(field),
                                message: msg,
                            });
                        }
                    }
                    None => reasons[m].push(Reason {
                        severity: Severity::Warning,
                        kind: ReasonKind::Expect,
                        code: None,
                        subject: None,
                        message: format!(
                            "hardware {} is not in the expected inventory",
                            cohort::label(k)
                        ),
                    }),
                }
            }
        }
    }

    // Outliers first: a low rate that is an outlier is not also reported as drift.
    let mut outliers = Vec::new();
    for (ci, (_, members)) in groups.iter().enumerate() {
        let id = &cohorts[ci].id;
        outliers.extend(cohort_outliers(id, members, &nodes, &opts.thresholds));
    }
    outliers.sort_by(|a, b| {
        natural_cmp(&a.cohort, &b.cohort)
            .then_with(|| a.metric.cmp(&b.metric))
            .then_with(|| a.subject.cmp(&b.subject))
            .then_with(|| natural_cmp(&a.node, &b.node))
    });
    let rate_outlier: BTreeSet<(String, String)> = outliers
        .iter()
        .filter(|o| o.rule == Rule::BelowMedianRate)
        .map(|o| (o.node.clone(), o.subject.replace(" port ", "/")))
        .collect();
    for o in &outliers {
        if let Some(&i) = index.get(o.node.as_str()) {
            reasons[i].push(Reason {
                severity: Severity::Warning,
                kind: ReasonKind::Outlier,
                code: None,
                subject: Some(o.subject.clone()),
                message: o.message.clone(),
            });
        }
    }

    // Drift.
    let mut drifts = Vec::new();
    for (ci, (_, members)) in groups.iter().enumerate() {
        let id = &cohorts[ci].id;
        let m: Vec<(&str, &Fields)> = members
            .iter()
            .filter_map(|&i| fields[i].as_ref().map(|f| (nodes[i].name.as_str(), f)))
            .collect();
        let skip = &expected_fields[ci];
        let d = drift::cohort_drift(id, &m, &|k| skip.contains(k));
        // The devices most of the cohort has, worked out once per cohort.
        let mut majority_devices = None;
        for dr in &d {
            for vn in &dr.minority {
                for name in &vn.nodes {
                    let Some(&i) = index.get(name.as_str()) else {
                        continue;
                    };
                    if let Some(port) = dr
                        .field
                        .strip_prefix("rate[")
                        .and_then(|s| s.strip_suffix(']'))
                    {
                        if rate_outlier.contains(&(name.clone(), port.to_string())) {
                            continue;
                        }
                    }
                    let (sev, mut msg) = dr.reason_for(&vn.value);
                    if dr.field == "device_count" {
                        let common =
                            majority_devices.get_or_insert_with(|| cohort_devices(members, &nodes));
                        if let Some(extra) = missing_devices(i, common, &nodes) {
                            msg.push_str(&extra);
                        }
                    }
                    reasons[i].push(Reason {
                        severity: sev,
                        kind: ReasonKind::Drift,
                        code: None,
                        subject: Some(dr.field.clone()),
                        message: msg,
                    });
                }
            }
        }
        drifts.extend(d);
    }

    // Changes since the previous sweep.
    let mut changes = Vec::new();
    if let Some(prev) = &opts.previous {
        let before: BTreeMap<&str, &baseline::PreviousNode> =
            prev.nodes.iter().map(|p| (p.name.as_str(), p)).collect();
        for (i, n) in nodes.iter().enumerate() {
            if n.missing.is_some() {
                if before.get(n.name.as_str()).is_some_and(|p| !p.missing)
                    && n.origin == prev.source
                {
                    changes.push(Change {
                        node: n.name.clone(),
                        kind: ChangeKind::NodeGone,
                        subject: String::new(),
                        before: Some("reported".into()),
                        after: None,
                        severity: Severity::Error,
                        message: format!("in the baseline ({}), absent now", prev.source),
                    });
                }
                continue;
            }
            match before.get(n.name.as_str()) {
                Some(p) => {
                    if let (Some(b), Some(a)) = (&p.inventory, &n.inventory) {
                        let c = baseline::node_changes(&n.name, b, a);
                        for ch in c.iter().filter(|c| c.severity > Severity::Info) {
                            reasons[i].push(Reason {
                                severity: ch.severity,
                                kind: ReasonKind::Change,
                                code: None,
                                subject: Some(ch.subject.clone()),
                                message: ch.message.clone(),
                            });
                        }
                        changes.extend(c);
                    }
                }
                None => changes.push(Change {
                    node: n.name.clone(),
                    kind: ChangeKind::NodeNew,
                    subject: String::new(),
                    before: None,
                    after: Some("reported".into()),
                    severity: Severity::Info,
                    message: format!("not in the baseline ({})", prev.source),
                }),
            }
        }
    }

    changes.sort_by(|a, b| {
        natural_cmp(&a.node, &b.node)
            .then_with(|| a.subject.cmp(&b.subject))
            .then_with(|| a.message.cmp(&b.message))
    });

    drop(index);
    // Statuses.
    let mut fleet_nodes: Vec<FleetNode> = nodes
        .into_iter()
        .zip(reasons)
        .zip(cohort_of)
        .map(|((n, mut r), cohort)| {
            if let Some(why) = &n.missing {
                r.insert(
                    0,
                    Reason {
                        severity: Severity::Error,
                        kind: ReasonKind::Missing,
                        code: None,
                        subject: None,
                        message: why.clone(),
                    },
                );
            }
            r.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.kind.cmp(&b.kind)));
            let status = if n.missing.is_some() {
                Status::Missing
            } else {
                match r.iter().map(|r| r.severity).max() {
                    Some(Severity::Error) => Status::Error,
                    Some(Severity::Warning) => Status::Warning,
                    _ => Status::Ok,
                }
            };
            FleetNode {
                name: n.name,
                status,
                reasons: r,
                origin: n.origin,
                cohort,
                inventory: n.inventory,
                fabric: Vec::new(),
            }
        })
        .collect();
    let findings = group_findings(&fleet_nodes);
    fleet_nodes.sort_by(|a, b| natural_cmp(&a.name, &b.name));

    let count = |s: Status| fleet_nodes.iter().filter(|n| n.status == s).count();
    let bad_inputs = errors.len();
    let exit_code = if bad_inputs > 0 || !duplicates.is_empty() {
        2
    } else if fleet_nodes.iter().any(|n| n.status != Status::Ok) {
        1
    } else {
        0
    };
    FleetReport {
        schema: SCHEMA.to_string(),
        tool: opts.tool.clone(),
        summary: Summary {
            nodes: fleet_nodes.len(),
            ok: count(Status::Ok),
            warning: count(Status::Warning),
            error: count(Status::Error),
            missing: count(Status::Missing),
            cohorts: cohorts.len(),
            bad_inputs,
            exit_code,
        },
        nodes: fleet_nodes,
        findings,
        cohorts,
        drift: drifts,
        outliers,
        changes,
        inputs,
        errors,
        duplicates,
        notes,
        baseline: opts.previous.as_ref().map(|p| p.source.clone()),
        expect: opts.expected.as_ref().map(|(s, _)| s.clone()),
    }
}

/// A node's own warning and error findings as reasons.
fn own_reasons(n: &NodeReport) -> Vec<Reason> {
    n.findings_at(Severity::Warning)
        .map(|f| Reason {
            severity: f.severity,
            kind: ReasonKind::Finding,
            code: Some(f.code.clone()),
            subject: (!f.subject.is_empty()).then(|| f.subject.clone()),
            message: f.message.clone(),
        })
        .collect()
}

/// The devices more than half of a cohort's members have: (name, identity).
fn cohort_devices(members: &[usize], nodes: &[NodeReport]) -> Vec<(String, String)> {
    let mut seen: BTreeMap<&str, (usize, String)> = BTreeMap::new();
    for &m in members {
        if let Some(other) = &nodes[m].inventory {
            for d in &other.devices {
                let e = seen.entry(d.name.as_str()).or_insert((0, cohort::ident(d)));
                e.0 += 1;
            }
        }
    }
    seen.into_iter()
        .filter(|(_, (n, _))| n * 2 > members.len())
        .map(|(name, (_, ident))| (name.to_string(), ident))
        .collect()
}

/// " (missing here: mlx4_0 (MT4099 ...))" for a node with fewer devices than most of
/// its cohort (`common`: [`cohort_devices`]).
fn missing_devices(i: usize, common: &[(String, String)], nodes: &[NodeReport]) -> Option<String> {
    let inv = nodes[i].inventory.as_ref()?;
    let missing: Vec<String> = common
        .iter()
        .filter(|(name, _)| !inv.devices.iter().any(|d| &d.name == name))
        .map(|(name, ident)| format!("{name} ({ident})"))
        .collect();
    (!missing.is_empty()).then(|| format!(" (missing here: {})", missing.join(", ")))
}

/// The values of one numeric metric within one cohort: what its outliers are
/// judged on (ACTIVE ports' rates, error counters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSamples {
    /// The cohort's id (`c1`).
    pub cohort: String,
    /// `rate_gbps`, `counters/symbol_error`, `hw_counters/retry_exceeded_err`.
    pub metric: String,
    /// `mlx4_0 port 2`.
    pub subject: String,
    /// Each node's value, in the cohort's node order.
    pub values: Vec<NodeValue>,
}

/// One node's value of a metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeValue {
    pub node: String,
    pub value: f64,
}

impl FleetReport {
    /// Every numeric metric the outliers are judged on, per cohort (cohort order,
    /// then link rates by subject, then error counters by subject and name), with
    /// each member's value: the samples [`analyze`] compared, read back from the
    /// nodes' inventories.
    pub fn metric_samples(&self) -> Vec<MetricSamples> {
        let mut out = Vec::new();
        let by_name: HashMap<&str, &FleetNode> =
            self.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        for c in &self.cohorts {
            let in_cohort: Vec<(&str, &Inventory)> = c
                .nodes
                .iter()
                .filter_map(|name| by_name.get(name.as_str()).copied())
                .filter(|n| n.cohort.as_deref() == Some(c.id.as_str()))
                .filter_map(|n| n.inventory.as_ref().map(|i| (n.name.as_str(), i)))
                .collect();
            let members: Vec<(usize, &Inventory)> = in_cohort
                .iter()
                .enumerate()
                .map(|(i, (_, inv))| (i, *inv))
                .collect();
            for s in samples(&members) {
                out.push(MetricSamples {
                    cohort: c.id.clone(),
                    metric: s.metric,
                    subject: s.subject,
                    values: s
                        .values
                        .into_iter()
                        .map(|(i, value)| NodeValue {
                            node: in_cohort[i].0.to_string(),
                            value,
                        })
                        .collect(),
                });
            }
        }
        out
    }
}

/// One metric's values of one subject: (member key, value).
struct Sample {
    metric: String,
    subject: String,
    values: Vec<(usize, f64)>,
}

/// The numeric metrics of a cohort's members: ACTIVE ports' rates by subject, then
/// error counters by subject and name.
fn samples(members: &[(usize, &Inventory)]) -> Vec<Sample> {
    // subject → [(member, value)]; (subject, metric) → [(member, value)]
    let mut rates: BTreeMap<String, Vec<(usize, f64)>> = BTreeMap::new();
    let mut counters: BTreeMap<(String, String), Vec<(usize, f64)>> = BTreeMap::new();
    for &(m, inv) in members {
        for (d, p) in inv.ports() {
            let subject = format!("{} port {}", d.name, p.num);
            if let (true, Some(r)) = (p.is_active(), p.rate_gbps) {
                rates.entry(subject.clone()).or_default().push((m, r));
            }
            for (dir, map) in [("counters", &p.counters), ("hw_counters", &p.hw_counters)] {
                for (c, v) in map.iter().filter(|(c, _)| outlier::is_error_counter(c)) {
                    counters
                        .entry((subject.clone(), format!("{dir}/{c}")))
                        .or_default()
                        .push((m, *v as f64));
                }
            }
        }
    }
    // The Ethernet links beneath RoCE: pause time, discards, CRC/FEC errors.
    for &(m, inv) in members {
        for l in &inv.links {
            for (c, v) in &l.counters {
                counters
                    .entry((format!("link {}", l.name), format!("ethtool/{c}")))
                    .or_default()
                    .push((m, *v as f64));
            }
        }
    }
    let rates = rates.into_iter().map(|(subject, values)| Sample {
        metric: "rate_gbps".into(),
        subject,
        values,
    });
    let counters = counters
        .into_iter()
        .map(|((subject, metric), values)| Sample {
            metric,
            subject,
            values,
        });
    rates.chain(counters).collect()
}

/// Low links and high error counters within one cohort.
fn cohort_outliers(
    id: &str,
    members: &[usize],
    nodes: &[NodeReport],
    t: &CohortThresholds,
) -> Vec<Outlier> {
    let inv: Vec<(usize, &Inventory)> = members
        .iter()
        .filter_map(|&m| nodes[m].inventory.as_ref().map(|i| (m, i)))
        .collect();
    let all = samples(&inv);
    let rates = all
        .iter()
        .filter(|s| s.metric == "rate_gbps")
        .map(|s| (s.subject.clone(), s.values.clone()));
    let counters = all
        .iter()
        .filter(|s| s.metric != "rate_gbps")
        .map(|s| ((s.subject.clone(), s.metric.clone()), s.values.clone()));
    let mut out = Vec::new();
    for (subject, samples) in rates {
        let values: Vec<f64> = samples.iter().map(|s| s.1).collect();
        for f in outlier::low_rates(&values, t) {
            let (node, value) = samples[f.index];
            let message = format!(
                "{subject} runs at {value} Gb/s, below {:.0} % of cohort {id}'s median {} Gb/s",
                t.rate_fraction * 100.0,
                f.spread.median
            );
            out.push(Outlier::flagged(
                id,
                &nodes[node].name,
                "rate_gbps",
                &subject,
                value,
                &f,
                message,
            ));
        }
    }
    for ((subject, metric), samples) in counters {
        let values: Vec<f64> = samples.iter().map(|s| s.1).collect();
        for f in outlier::high_counters(&values, t) {
            let (node, value) = samples[f.index];
            let counter = metric.rsplit('/').next().unwrap_or(&metric);
            let why = match f.rule {
                Rule::ModifiedZ => format!("modified z-score {:.1}", f.z),
                _ => format!(
                    "at least {} x (median + {})",
                    t.counter_far_factor, t.counter_far_min
                ),
            };
            let message = format!(
                "{subject} {counter} = {value}, far above cohort {id}'s median {} ({why})",
                f.spread.median
            );
            out.push(Outlier::flagged(
                id,
                &nodes[node].name,
                &metric,
                &subject,
                value,
                &f,
                message,
            ));
        }
    }
    out
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Warning and error findings by code: most nodes first, then by code.
fn group_findings(nodes: &[FleetNode]) -> Vec<FindingGroup> {
    let mut by: BTreeMap<&str, FindingGroup> = BTreeMap::new();
    let mut order: Vec<&FleetNode> = nodes.iter().collect();
    order.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    for n in order {
        for r in n.reasons.iter().filter(|r| r.kind == ReasonKind::Finding) {
            let Some(code) = r.code.as_deref() else {
                continue;
            };
            let g = by.entry(code).or_insert_with(|| FindingGroup {
                code: code.to_string(),
                severity: r.severity,
                nodes: Vec::new(),
                count: 0,
                example: match &r.subject {
                    Some(s) => format!("{s}: {}", r.message),
                    None => r.message.clone(),
                },
            });
            g.severity = g.severity.max(r.severity);
            g.count += 1;
            if g.nodes.last() != Some(&n.name) {
                g.nodes.push(n.name.clone());
            }
        }
    }
    let mut out: Vec<FindingGroup> = by.into_values().collect();
    out.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.nodes.len().cmp(&a.nodes.len()))
            .then(a.code.cmp(&b.code))
    });
    out
}

/// Orders names the way people count: `node2` before `node10`.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a, b);
    loop {
        match (x.is_empty(), y.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        let dx = x.starts_with(|c: char| c.is_ascii_digit());
        let dy = y.starts_with(|c: char| c.is_ascii_digit());
        let split = |s: &str, digits: bool| {
            s.find(|c: char| c.is_ascii_digit() != digits)
                .unwrap_or(s.len())
        };
        let (cx, rx) = x.split_at(split(x, dx));
        let (cy, ry) = y.split_at(split(y, dy));
        let o = if dx && dy {
            let tx = cx.trim_start_matches('0');
            let ty = cy.trim_start_matches('0');
            tx.len()
                .cmp(&ty.len())
                .then(tx.cmp(ty))
                .then(cx.len().cmp(&cy.len()))
        } else {
            cx.cmp(cy)
        };
        if o != Ordering::Equal {
            return o;
        }
        x = rx;
        y = ry;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        let mut v = vec!["node10", "node2", "node1", "gpu01", "node02"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["gpu01", "node1", "node2", "node02", "node10"]);
    }
}
