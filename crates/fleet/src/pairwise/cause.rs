//! Why a slow pair is slow, by the counters its ends moved during its tests
//! ([`super::deltas`]): **congested** — CNPs or ECN marks moved at either
//! end, so switches on the path marked its packets and DCQCN slowed the
//! sender (the path is busy, not broken) — or **lossy without ECN** —
//! retransmission-class counters moved and no CNP or mark did, so packets
//! were lost and the congestion loop never ran (ECN marking off on the
//! switch, NP/RP disabled, or a lossy class). Neither moved: nothing to say
//! beyond the fault itself (a bad cable, port or route, as before).
//!
//! The cells judged are those a fault's verdict cites
//! ([`PairwiseReport::fault_pairs`]): a link's two directions, a slow
//! node's slowest cells. Pure: [`PairwiseReport::cause`] is a function of
//! the report's cells, so a saved run (`--from RUN.json`) gives the same
//! answer.
//!
//! Counters are mlx5's names: a real device's `hw_counters`, and the soft
//! NIC's (`rdmakit_soft::TRANSPORT_COUNTERS`, the same names plus its own
//! `retransmitted_packets`). The soft NIC's names before it took mlx5's
//! (`ack_timeouts`, `seq_err_naks_received`, `duplicate_requests`) still
//! count, for saved runs and agents of older builds. Only counters that
//! moved travel, so "no CNP moved" cannot tell a device without CNP
//! counters (rxe, an older soft NIC) from one whose loop never ran: the
//! wording says what was counted, not more.

use serde::{Deserialize, Serialize};

use super::deltas::{show, Deltas};
use super::report::{Cell, Fault, PairwiseReport, Phase};

/// The congestion loop's counters: a mark or a CNP at either end.
pub const CONGESTION: [&str; 7] = [
    "np_ecn_marked_roce_packets",
    "np_cnp_sent",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    // mlx5's optional per-QP-capable set.
    "cc_rx_ce_pkts",
    "cc_rx_cnp_pkts",
    "cc_tx_cnp_pkts",
];

/// Retransmission-class counters: mlx5's, the soft NIC's own
/// `retransmitted_packets`, then its names before it took mlx5's.
pub const LOSS: [&str; 9] = [
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "duplicate_request",
    "implied_nak_seq_err",
    "retransmitted_packets",
    "ack_timeouts",
    "seq_err_naks_received",
    "duplicate_requests",
];

/// Counters a cause cites, at most.
const CITED: usize = 4;

/// Why a slow pair (or node) is slow, by its counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// CNPs or ECN marks moved: the path is congested, not broken.
    Congested,
    /// Retransmissions moved, no CNP or mark did: loss the congestion loop
    /// never saw.
    LossyWithoutEcn,
}

impl Cause {
    /// "congested", "lossy without ECN".
    pub fn describe(self) -> &'static str {
        match self {
            Cause::Congested => "congested",
            Cause::LossyWithoutEcn => "lossy without ECN",
        }
    }
}

/// A fault's cause and the counters that show it (`n5 np_cnp_sent
/// +1,200`, largest first).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// The fault it explains.
    pub fault: Fault,
    /// What its counters say.
    pub cause: Cause,
    /// The counters, `node name +delta`, at most four.
    pub evidence: Vec<String>,
}

/// The cause the cells' counters show, with its evidence: see the module
/// doc. `cells` are directed cells of one fault.
pub fn judge(cells: &[&Cell]) -> Option<(Cause, Vec<String>)> {
    // Per node and counter, summed over the cells.
    let mut moved: Vec<(String, String, u64)> = Vec::new();
    for c in cells {
        for (node, d) in [(&c.from, &c.from_counters), (&c.to, &c.to_counters)] {
            add(&mut moved, node, d);
        }
    }
    let of = |names: &[&str]| -> Vec<String> {
        let mut v: Vec<&(String, String, u64)> = moved
            .iter()
            .filter(|(_, n, _)| names.contains(&n.as_str()))
            .collect();
        v.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
        v.into_iter()
            .take(CITED)
            .map(|(node, n, d)| format!("{node} {n} {}", show(n, *d)))
            .collect()
    };
    let cc = of(&CONGESTION);
    if !cc.is_empty() {
        return Some((Cause::Congested, cc));
    }
    let loss = of(&LOSS);
    (!loss.is_empty()).then_some((Cause::LossyWithoutEcn, loss))
}

/// Adds `d`'s counters of `node` to `moved`.
fn add(moved: &mut Vec<(String, String, u64)>, node: &str, d: &Deltas) {
    for (n, x) in d.iter() {
        match moved.iter_mut().find(|(a, b, _)| a == node && b == n) {
            Some(e) => e.2 = e.2.saturating_add(x),
            None => moved.push((node.to_string(), n.to_string(), x)),
        }
    }
}

impl PairwiseReport {
    /// What `f`'s counters say about it ([`judge`] over the screening cells
    /// of [`PairwiseReport::fault_pairs`]), or None when they say nothing.
    pub fn cause(&self, f: &Fault) -> Option<Diagnosis> {
        let pairs = self.fault_pairs(f);
        let cells: Vec<&Cell> = self
            .cells
            .iter()
            .filter(|c| c.phase == Phase::Screen)
            .filter(|c| pairs.iter().any(|(a, b)| &c.from == a && &c.to == b))
            .collect();
        let (cause, evidence) = judge(&cells)?;
        Some(Diagnosis {
            fault: f.clone(),
            cause,
            evidence,
        })
    }

    /// [`PairwiseReport::cause`] of every fault that has one.
    pub fn causes(&self) -> Vec<Diagnosis> {
        self.faults.iter().filter_map(|f| self.cause(f)).collect()
    }
}
