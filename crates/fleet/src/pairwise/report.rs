//! The result of a pairwise run as data (`rdmakit.pairwise/v1`): every
//! directed cell's figures, the per-node statistics, the confirmations and
//! the faults. `--json` prints it; a renderer (human table here, HTML in
//! the report crate) takes it as it is. Serialize and Deserialize, so a
//! saved run renders again later.

use serde::{Deserialize, Serialize};

pub use super::cause::{Cause, Diagnosis};
pub use super::deltas::Deltas;
pub use crate::fabric::RouteNote;

/// Schema tag of [`PairwiseReport`].
pub const SCHEMA: &str = "rdmakit.pairwise/v1";

/// A whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairwiseReport {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// `full` (every pair, the circle method) or `quick` (a ring).
    pub mode: Mode,
    /// Start, seconds since the Unix epoch.
    pub started_unix: u64,
    /// Wall time of the whole run, seconds.
    pub seconds: f64,
    /// What was measured and how it was judged.
    pub settings: Settings,
    /// The agents that answered, in the order given; cells name them.
    pub nodes: Vec<Node>,
    /// Agents that could not be reached or refused us; left out of the
    /// matrix, and a reason for exit status 1.
    pub unreachable: Vec<Unreachable>,
    /// Every measured directed cell (`from` writes to `to`), screening
    /// rounds first, then confirmations.
    pub cells: Vec<Cell>,
    /// Wall time of each round.
    pub rounds: Vec<RoundTiming>,
    /// Robust statistics of the screening matrix.
    pub matrix: MatrixStats,
    /// What the screening suspected and what re-measuring found.
    pub confirmations: Vec<Confirmation>,
    /// The verdict: empty on a clean fabric.
    pub faults: Vec<Fault>,
    /// Set when the matrix could not be judged — most bandwidth tests
    /// failed, so there is no level to compare against — and why; a reason
    /// for exit status 1 even without a fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inconclusive: Option<String>,
    /// The fabric routes of the faults' pairs (`--fabric`): the switch
    /// ports and inter-switch cables crossed and the counters that moved
    /// there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteNote>,
    /// What the faults' counters say: congested (CNPs or ECN marks moved)
    /// or lossy without ECN (retransmissions, no CNP), with the counters
    /// ([`PairwiseReport::causes`]); a fault whose counters say nothing is
    /// not listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Diagnosis>,
}

impl PairwiseReport {
    /// How many pairs the screen (the first phase) measured.
    pub fn screen_pairs(&self) -> usize {
        self.rounds
            .iter()
            .filter(|t| t.phase == Phase::Screen)
            .map(|t| t.pairs.len())
            .sum()
    }

    /// Nothing wrong found and every agent measured: exit status 0.
    pub fn clean(&self) -> bool {
        self.faults.is_empty() && self.unreachable.is_empty() && self.inconclusive.is_none()
    }

    /// `fleet pairwise`'s exit status: 0 no fault, 1 a fault found or an
    /// agent unreachable (or the run inconclusive).
    pub fn exit(&self) -> rdmakit_vocab::exit::Exit {
        match self.clean() {
            true => rdmakit_vocab::exit::Exit::Ok,
            false => rdmakit_vocab::exit::Exit::Found,
        }
    }
}

/// Full matrix or quick screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Every pair, N−1 rounds (N odd: N rounds with a bye each).
    Full,
    /// A ring: every node against its two neighbours, 2–3 rounds.
    Quick,
}

impl Mode {
    /// "full matrix" or "quick ring", as reports title a run.
    pub fn describe(self) -> &'static str {
        match self {
            Mode::Full => "full matrix",
            Mode::Quick => "quick ring",
        }
    }
}

/// The run's parameters, recorded with its result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// RC WRITE bandwidth message sizes, bytes; the best is judged.
    pub bw_sizes: Vec<usize>,
    /// Seconds per bandwidth size.
    pub bw_seconds: f64,
    /// RC SEND latency message size, bytes.
    pub lat_size: usize,
    /// Seconds of latency ping-pongs per direction.
    pub lat_seconds: f64,
    /// Path MTU, bytes.
    pub mtu: u32,
    /// The known-good node, when given.
    pub reference: Option<String>,
    /// Suspects re-measured before they are reported.
    pub confirm: bool,
    /// MatrixThresholds of the localization.
    pub thresholds: MatrixThresholds,
}

/// When a node or a pair counts as low (see `localize`): relative (and
/// under the port floor when the port rate is known) makes a suspect; the
/// robust z ([`crate::stats`]) makes it significant. A uniform fabric flags
/// nothing. A fleet report's cohorts have theirs,
/// [`crate::outlier::CohortThresholds`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixThresholds {
    /// Below this fraction of the reference level (nodes: the median node
    /// score; pairs: the median residual).
    pub relative: f64,
    /// Significant: at least this many robust standard deviations below
    /// (modified z-score: 0.6745 (x − median) / MAD).
    pub z: f64,
    /// The MAD used is at least this fraction of the median: noise below
    /// it is not noise worth a finding.
    pub mad_floor: f64,
    /// ... and below this fraction of the port rate, when known.
    pub port_floor: f64,
    /// The port rate, MB/s (2^20 bytes), when known: given, or the
    /// slowest agent's device rate. None on the soft NIC.
    pub port_rate_mbs: Option<f64>,
    /// Confirmation: a suspect re-measured below this fraction of the
    /// control pairs measured around it is low again.
    pub confirm_ratio: f64,
    /// Confirmation passes: a suspect must be low in every one (a second
    /// pass only for those low in the first).
    pub confirm_passes: usize,
}

impl Default for MatrixThresholds {
    fn default() -> MatrixThresholds {
        MatrixThresholds {
            relative: 0.6,
            z: crate::stats::Z_CUT,
            mad_floor: 0.1,
            port_floor: 0.9,
            port_rate_mbs: None,
            confirm_ratio: 0.6,
            confirm_passes: 3,
        }
    }
}

/// An agent and what the matrix says about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The agent's name (its hostname unless given).
    pub name: String,
    /// Where the coordinator reached it.
    pub addr: String,
    /// Its device (`soft0` for the built-in soft NIC).
    pub device: String,
    /// Its device's port rate, MB/s, when it reports one.
    pub port_rate_mbs: Option<f64>,
    /// The largest path MTU its link carries (port active MTU; on the soft
    /// NIC, from its interface's MTU), when it reports one: its tests use
    /// the smallest of this, the partner's and `settings.mtu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// rdmakit version of the agent.
    pub version: String,
    /// Its score: the median over its partners of the pair figure (the
    /// lower direction), MB/s.
    pub median_mbs: Option<f64>,
    /// Modified z-score of the score against the other nodes'.
    pub z: f64,
    /// Partners met in the screening.
    pub partners: usize,
    /// Partners whose pair with it is slow.
    pub slow_partners: usize,
    /// A node suspect beyond the noise of the node scores.
    pub significant: bool,
}

/// An agent left out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unreachable {
    /// The address given.
    pub agent: String,
    /// Why.
    pub error: String,
}

/// Why a cell was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The screening rounds (full matrix or ring).
    Screen,
    /// A suspect re-measured.
    Suspect,
    /// A control pair measured around a suspect.
    Control,
}

/// One directed measurement: `from` is the RC WRITE / SEND requester.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Requester.
    pub from: String,
    /// Responder.
    pub to: String,
    /// Screening, suspect or control.
    pub phase: Phase,
    /// Round index within its phase.
    pub round: usize,
    /// RC WRITE bandwidth per size.
    pub bw: Vec<BwPoint>,
    /// RC SEND latency (half round trip), when measured.
    pub lat: Option<LatPoint>,
    /// The requester's QP transport counters on the soft NIC.
    pub counters: Option<Counters>,
    /// What the requester's (`from`'s) device counters moved during the
    /// cell's tests, name → delta: pauses, discards, CNPs, sequence
    /// errors, retransmissions (only those that moved; at most 32).
    #[serde(default, skip_serializing_if = "Deltas::is_empty")]
    pub from_counters: Deltas,
    /// ... and the responder's (`to`'s).
    #[serde(default, skip_serializing_if = "Deltas::is_empty")]
    pub to_counters: Deltas,
    /// Why the test failed (then `bw` may be empty: judged as 0 MB/s).
    pub error: Option<String>,
    /// The judged figure: the best average over its sizes, MB/s (0 on
    /// error) — what the path can do; CPU contention only pulls it down.
    pub mbs: f64,
    /// `mbs` over the lower of its two nodes' scores (screening cells).
    pub residual: Option<f64>,
    /// Modified z-score of the residual against all cells' (screening).
    pub z: Option<f64>,
    /// Low for its two nodes: this cell makes its pair a link suspect.
    pub low: bool,
    /// ... beyond the matrix's noise (robust z).
    pub significant: bool,
}

impl Cell {
    /// The counters that moved at both ends, largest first, at most
    /// [`super::deltas::CITED`] per end: `n5 out_of_sequence +4,312`.
    pub fn moved(&self) -> Vec<String> {
        let mut v: Vec<(u64, String)> = Vec::new();
        for (node, d) in [
            (&self.to, &self.to_counters),
            (&self.from, &self.from_counters),
        ] {
            for (n, x) in d.top(super::deltas::CITED) {
                v.push((x, format!("{node} {n} {}", super::deltas::show(n, x))));
            }
        }
        v.sort_by_key(|x| std::cmp::Reverse(x.0));
        v.into_iter().map(|(_, t)| t).collect()
    }

    /// The cell and what moved, as a verdict cites it:
    /// `n1 → n5: 10 MB/s; n5 rx_prio3_pause_duration +2.1 s, n1 out_of_sequence +4,312`
    /// (None when nothing moved).
    pub fn citation(&self) -> Option<String> {
        let m = self.moved();
        (!m.is_empty()).then(|| {
            format!(
                "{} → {}: {:.0} MB/s; {}",
                self.from,
                self.to,
                self.mbs,
                m.join(", ")
            )
        })
    }
}

impl PairwiseReport {
    /// What a fault's verdict cites: the slowest (at most 3) of the cells
    /// it is judged on whose counters moved — a link's two directions, a
    /// slow node's slow cells — each as [`Cell::citation`].
    pub fn cited(&self, f: &Fault) -> Vec<String> {
        let slow = self.matrix.slow_below_mbs;
        let mut cells: Vec<&Cell> = self
            .cells
            .iter()
            .filter(|c| c.phase == Phase::Screen)
            .filter(|c| match f {
                Fault::Link { nodes } => {
                    (c.from == nodes[0] && c.to == nodes[1])
                        || (c.from == nodes[1] && c.to == nodes[0])
                }
                Fault::Node { node } => {
                    (&c.from == node || &c.to == node) && (c.low || c.mbs < slow)
                }
            })
            .collect();
        cells.sort_by(|a, b| a.mbs.total_cmp(&b.mbs));
        cells.iter().filter_map(|c| c.citation()).take(3).collect()
    }
}

impl PairwiseReport {
    /// The cells a fault is judged on, slowest first: a link's two
    /// directions; a slow node's slow screening cells (at most 3).
    pub fn fault_pairs(&self, f: &Fault) -> Vec<(String, String)> {
        match f {
            Fault::Link { nodes } => vec![
                (nodes[0].clone(), nodes[1].clone()),
                (nodes[1].clone(), nodes[0].clone()),
            ],
            Fault::Node { node } => {
                let slow = self.matrix.slow_below_mbs;
                let mut cells: Vec<&Cell> = self
                    .cells
                    .iter()
                    .filter(|c| c.phase == Phase::Screen)
                    .filter(|c| (&c.from == node || &c.to == node) && (c.low || c.mbs < slow))
                    .collect();
                cells.sort_by(|a, b| a.mbs.total_cmp(&b.mbs));
                cells
                    .iter()
                    .take(3)
                    .map(|c| (c.from.clone(), c.to.clone()))
                    .collect()
            }
        }
    }

    /// The route of one direction, when `--fabric` gave one.
    pub fn route_of(&self, from: &str, to: &str) -> Option<&RouteNote> {
        self.routes.iter().find(|n| n.from == from && n.to == to)
    }

    /// A fault's routes, one line each ([`RouteNote::line`]); the reverse
    /// of a route already shown is left out when it crosses the same
    /// switch ports and no other counter moved on it.
    pub fn routed(&self, f: &Fault) -> Vec<String> {
        let mut shown: Vec<&RouteNote> = Vec::new();
        for (a, b) in self.fault_pairs(f) {
            let Some(n) = self.route_of(&a, &b) else {
                continue;
            };
            let mirror = shown.iter().any(|s| {
                s.from == n.to && s.to == n.from && s.same_ports(n) && s.counters == n.counters
            });
            if !mirror {
                shown.push(n);
            }
        }
        shown.into_iter().map(RouteNote::line).collect()
    }
}

/// A bandwidth figure.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BwPoint {
    /// Message size, bytes.
    pub size: usize,
    /// Average, MB/s (2^20 bytes).
    pub avg_mbs: f64,
    /// Best window, MB/s.
    pub peak_mbs: f64,
    /// Messages per second, millions.
    pub msg_rate_mpps: f64,
    /// Messages completed.
    pub iters: u64,
}

/// A latency figure, microseconds (half the round trip, as perftest).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatPoint {
    /// Message size, bytes.
    pub size: usize,
    /// Samples.
    pub iters: u64,
    /// Smallest.
    pub t_min_us: f64,
    /// Median.
    pub t_typical_us: f64,
    /// 99th percentile.
    pub t_p99_us: f64,
    /// Largest.
    pub t_max_us: f64,
}

/// Transport counters that explain a poor figure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Packets sent.
    pub tx_packets: u64,
    /// Request packets sent again.
    pub retransmitted: u64,
    /// ACK timeouts.
    pub timeouts: u64,
    /// Packets dropped.
    pub dropped: u64,
}

/// Wall time of one round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundTiming {
    /// Screening, suspect or control rounds.
    pub phase: Phase,
    /// Index within the phase.
    pub index: usize,
    /// The pairs, by name.
    pub pairs: Vec<[String; 2]>,
    /// Seconds.
    pub seconds: f64,
}

/// Robust statistics of the screening matrix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MatrixStats {
    /// Directed cells judged.
    pub cells: usize,
    /// Median of the cells, MB/s.
    pub median_mbs: f64,
    /// Median of the node scores (each node's median pair figure), MB/s.
    pub node_median_mbs: f64,
    /// Their median absolute deviation, MB/s.
    pub node_mad_mbs: f64,
    /// A pair (or a node's score) below this is slow, MB/s.
    pub slow_below_mbs: f64,
    /// Median of the residuals (a cell's figure over the lower of its two
    /// nodes' scores).
    pub residual_median: f64,
    /// Their median absolute deviation: the matrix's noise.
    pub residual_mad: f64,
    /// A cell whose residual is below this is low.
    pub link_below_residual: f64,
}

/// A suspect and what re-measuring it found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    /// What the screening suspected.
    pub suspect: Fault,
    /// Re-measurements: the suspect's figure against its controls'.
    pub checks: Vec<Check>,
    /// The outcome.
    pub verdict: Outcome,
}

/// One re-measurement of a suspect.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Confirmation pass (from 1).
    pub pass: usize,
    /// The requester of the cell checked.
    pub from: String,
    /// Its responder.
    pub to: String,
    /// The lower of both directions was checked, not `from` → `to` alone
    /// (a node slow one way with some partners, the other way with others).
    pub either_way: bool,
    /// Its figure, MB/s.
    pub mbs: f64,
    /// The median of the control pairs' cells (both directions), MB/s.
    pub control_mbs: f64,
    /// `mbs / control_mbs`.
    pub ratio: f64,
}

/// What became of a suspect once re-measured (serialized as a confirmation's
/// `verdict`). It judges one measurement against its controls, not a node's
/// health: that is `rdmakit_doctor::health::Verdict`, from the doctor's findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Low again against healthy controls: reported.
    Confirmed,
    /// Fine when measured again: the screening's noise, not reported.
    Dismissed,
    /// Not re-measured (`--no-confirm`, or no healthy partner): reported
    /// only when it is significant (beyond the matrix's noise).
    Unconfirmed,
}

/// A localized fault.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fault {
    /// A node slow with (most of) everyone: its NIC, its PCIe slot, its
    /// port's link, its host.
    Node {
        /// The node.
        node: String,
    },
    /// A pair slow together while both are fine with everyone else: the
    /// path between them (cable, switch port, route).
    Link {
        /// The two nodes, sorted.
        nodes: [String; 2],
    },
}

impl Fault {
    /// A link fault with its nodes in order.
    pub fn link(a: &str, b: &str) -> Fault {
        let (a, b) = if a <= b { (a, b) } else { (b, a) };
        Fault::Link {
            nodes: [a.to_string(), b.to_string()],
        }
    }

    /// A node fault.
    pub fn node(n: &str) -> Fault {
        Fault::Node {
            node: n.to_string(),
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Node { node } => write!(f, "node {node}"),
            Fault::Link { nodes } => write!(f, "link {} <-> {}", nodes[0], nodes[1]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(from: &str, to: &str, mbs: f64) -> Cell {
        Cell {
            from: from.into(),
            to: to.into(),
            phase: Phase::Screen,
            round: 0,
            bw: Vec::new(),
            lat: None,
            counters: None,
            from_counters: Deltas::default(),
            to_counters: Deltas::default(),
            error: None,
            mbs,
            residual: None,
            z: None,
            low: false,
            significant: false,
        }
    }

    #[test]
    fn a_verdict_cites_the_counters_that_moved() {
        let mut c = cell("n1", "n5", 10.2);
        assert_eq!(c.citation(), None);
        c.from_counters =
            Deltas::largest([("out_of_sequence", 4312), ("a", 1), ("b", 2), ("c", 3)]);
        c.to_counters = Deltas::largest([("rx_prio3_pause_duration", 2_100_000)]);
        assert_eq!(
            c.citation().unwrap(),
            "n1 → n5: 10 MB/s; n5 rx_prio3_pause_duration +2.1 s, n1 out_of_sequence +4,312, \
             n1 c +3, n1 b +2"
        );
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["from_counters"]["out_of_sequence"], 4312);
        assert_eq!(v["to_counters"]["rx_prio3_pause_duration"], 2_100_000);
        // Older JSON, without the counters, still reads.
        let mut old = serde_json::to_value(cell("n1", "n2", 5.0)).unwrap();
        assert!(old.get("from_counters").is_none());
        old.as_object_mut().unwrap().remove("to_counters");
        let back: Cell = serde_json::from_value(old).unwrap();
        assert!(back.from_counters.is_empty() && back.to_counters.is_empty());
    }

    #[test]
    fn a_fault_serializes_as_a_node_or_a_sorted_link() {
        let v = serde_json::to_value([Fault::node("n3"), Fault::link("n5", "n2")]).unwrap();
        assert_eq!(
            v,
            serde_json::json!([
                {"kind": "node", "node": "n3"},
                {"kind": "link", "nodes": ["n2", "n5"]}
            ])
        );
        let back: Vec<Fault> = serde_json::from_value(v).unwrap();
        assert_eq!(back[1], Fault::link("n2", "n5"));
        assert_eq!(back[1].to_string(), "link n2 <-> n5");
    }
}
