//! Localization: from a matrix of directed bandwidth cells to suspects —
//! a node slow with most of its partners, or a pair slow together while
//! both are fine with everyone else. Pure functions, no I/O.
//!
//! 1. Each pair's **figure** is the lower of its directions (a node or a
//!    path shaped one way only is still slow).
//! 2. Each node's **score** is the median of its pairs' figures: its row
//!    and column, robust to a bad link or two.
//! 3. A pair is **slow** below `relative` × the median node score (and,
//!    when the port rate is known, below `port_floor` × that rate). A node
//!    whose score is that low, and whose pairs are slow with a strict
//!    majority of its partners (at least two), is a **node suspect**: its
//!    row and column are low against the rest. (The majority rule keeps out
//!    the two ring neighbours of a slow node, whose scores it half drags
//!    down.)
//! 4. Each pair's **residual** is its figure over the lower score of its
//!    two nodes: about 1 for every healthy pair — also those touching a
//!    slow node, which pulls its own score down — and far below for a bad
//!    path. A pair whose residual is below `relative` × the median residual
//!    (and under the port floor) is **low**, and so are its cells under
//!    that cut; a low pair of two nodes that are not node suspects is a
//!    **link suspect**.
//! 5. A suspect is **significant** when it is also beyond the matrix's
//!    noise: a modified z-score ([`crate::stats`]: 0.6745 (x − median) / MAD,
//!    the MAD floored at `mad_floor` × median) at most −`z` — of its score among the nodes'
//!    scores, or of its residual among all residuals.
//!
//! Node faults do not inflate the noise scale of the link test (residuals
//! factor them out), and a clean, uniform fabric flags nothing. Where the
//! matrix is noisy (several soft NICs sharing two CPUs), relative suspects
//! that are not significant still go to re-measurement (see [`verdict`]),
//! which decides; without re-measurement only significant ones are
//! reported.

use std::collections::BTreeMap;

use super::report::{Check, MatrixStats, MatrixThresholds, Outcome};
use crate::stats::{median, Spread};

/// A directed measurement: requester index, responder index, MB/s.
pub type Cell = (usize, usize, f64);

/// What the screening points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Suspect {
    /// Node index.
    Node(usize),
    /// Two node indices, the smaller first.
    Link(usize, usize),
}

/// A node's share of the matrix.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeJudgement {
    /// Its score: median of its pairs' figures, MB/s (None: no cells).
    pub score: Option<f64>,
    /// Modified z-score of the score among the nodes'.
    pub z: f64,
    /// Distinct partners met.
    pub partners: usize,
    /// Partners whose pair with it is slow.
    pub slow_partners: usize,
    /// Its slow direction(s): which of its cells a re-measurement checks.
    pub slow_dir: SlowDir,
    /// A node suspect.
    pub suspect: bool,
    /// ... beyond the noise of the node scores.
    pub significant: bool,
}

/// Which way a node is slow: from the screening's directed cells below
/// the slow cut, by a strict majority of its cells that way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SlowDir {
    /// What it sends (its row).
    Out,
    /// What it receives (its column).
    In,
    /// Both.
    Both,
    /// Neither way by a majority (its pairs are slow one way or the other):
    /// check the lower direction.
    #[default]
    Either,
}

/// A low pair, whoever its nodes are.
#[derive(Clone, Debug, PartialEq)]
pub struct LowPair {
    /// The smaller node index.
    pub a: usize,
    /// The larger.
    pub b: usize,
    /// Its low directed cells (`from`, `to`).
    pub low: Vec<(usize, usize)>,
    /// Beyond the noise of the residuals.
    pub significant: bool,
}

/// One cell's judgement.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CellJudgement {
    /// Figure over the lower score of its two nodes (None: no score).
    pub residual: Option<f64>,
    /// Modified z-score of the residual.
    pub z: Option<f64>,
    /// Low for its nodes.
    pub low: bool,
    /// ... beyond the noise of the residuals.
    pub significant: bool,
}

/// The screening's verdict on a matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    /// Medians, MADs and the effective cuts.
    pub stats: MatrixStats,
    /// Per input cell, in input order.
    pub cells: Vec<CellJudgement>,
    /// Per node, by index.
    pub nodes: Vec<NodeJudgement>,
    /// Every low pair, also those of node suspects (a node suspect that
    /// re-measuring clears leaves its low pairs to be checked as links).
    pub low_pairs: Vec<LowPair>,
    /// Node suspects first, then link suspects (low pairs of two nodes that
    /// are not node suspects); sorted.
    pub suspects: Vec<Suspect>,
    /// The significant ones among them.
    pub significant: Vec<Suspect>,
}

/// Robust location and scale of `v`, with the MAD floored at `mad_floor` × the
/// median.
struct Robust {
    spread: Spread,
    mad_floor: f64,
}

impl Robust {
    fn of(v: &[f64], t: &MatrixThresholds) -> Robust {
        let spread = Spread::of(v);
        Robust {
            mad_floor: t.mad_floor * spread.median,
            spread,
        }
    }

    fn z(&self, x: f64) -> f64 {
        self.spread.z(x, self.mad_floor)
    }
}

/// Judges `n` nodes' directed screening `cells`. Cells naming a node
/// outside `0..n`, or a node with itself, are ignored.
pub fn judge(n: usize, cells: &[Cell], t: &MatrixThresholds) -> Judged {
    let valid = |&(a, b, _): &Cell| a < n && b < n && a != b;
    let fig = |c: &Cell| if c.2.is_finite() { c.2.max(0.0) } else { 0.0 };
    let port_cut = t.port_rate_mbs.map(|r| t.port_floor * r);
    let under_port = |x: f64| match port_cut {
        Some(p) => x < p,
        None => true,
    };

    // 1. Pair figures: the lower direction.
    let mut pairs: BTreeMap<(usize, usize), f64> = BTreeMap::new();
    for c in cells.iter().filter(|c| valid(c)) {
        let k = (c.0.min(c.1), c.0.max(c.1));
        let v = fig(c);
        pairs.entry(k).and_modify(|x| *x = x.min(v)).or_insert(v);
    }
    // 2. Node scores.
    let mut per_node: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    for (&(a, b), &v) in &pairs {
        per_node[a].push((b, v));
        per_node[b].push((a, v));
    }
    let scores: Vec<Option<f64>> = per_node
        .iter()
        .map(|p| median(&p.iter().map(|x| x.1).collect::<Vec<_>>()))
        .collect();
    let known: Vec<f64> = scores.iter().flatten().copied().collect();
    let nr = Robust::of(&known, t);
    let slow_cut = port_cut.map_or(t.relative * nr.spread.median, |p| {
        (t.relative * nr.spread.median).min(p)
    });
    // 3. Node suspects.
    let dir_of = |k: usize| {
        let (mut out, mut out_slow, mut inn, mut in_slow) = (0, 0, 0, 0);
        for c in cells.iter().filter(|c| valid(c)) {
            if c.0 == k {
                out += 1;
                out_slow += usize::from(fig(c) < slow_cut);
            } else if c.1 == k {
                inn += 1;
                in_slow += usize::from(fig(c) < slow_cut);
            }
        }
        match (2 * out_slow > out, 2 * in_slow > inn) {
            (true, true) => SlowDir::Both,
            (true, false) => SlowDir::Out,
            (false, true) => SlowDir::In,
            (false, false) => SlowDir::Either,
        }
    };
    let nodes: Vec<NodeJudgement> = (0..n)
        .map(|k| {
            let slow = per_node[k].iter().filter(|x| x.1 < slow_cut).count();
            let partners = per_node[k].len();
            let z = scores[k].map_or(0.0, |s| nr.z(s));
            let suspect =
                scores[k].is_some_and(|s| s < slow_cut) && slow >= 2 && 2 * slow > partners;
            NodeJudgement {
                score: scores[k],
                z,
                partners,
                slow_partners: slow,
                slow_dir: dir_of(k),
                suspect,
                significant: suspect && z <= -t.z,
            }
        })
        .collect();
    // 4. Residuals (per pair: its figure over the lower score of its two
    //    nodes) and link suspects.
    let expected = |a: usize, b: usize| -> Option<f64> { Some(scores[a]?.min(scores[b]?)) };
    let ratio_to = |x: f64, e: f64| if e > 0.0 { x / e } else { 1.0 };
    let pair_res: BTreeMap<(usize, usize), f64> = pairs
        .iter()
        .filter_map(|(&(a, b), &v)| Some(((a, b), ratio_to(v, expected(a, b)?))))
        .collect();
    let rr = Robust::of(&pair_res.values().copied().collect::<Vec<_>>(), t);
    let link_cut = t.relative * rr.spread.median;
    let pair_low = |a: usize, b: usize| -> (bool, bool) {
        let k = (a.min(b), a.max(b));
        match (pair_res.get(&k), pairs.get(&k)) {
            (Some(&r), Some(&v)) => {
                let low = r < link_cut && under_port(v);
                (low, low && rr.z(r) <= -t.z)
            }
            _ => (false, false),
        }
    };
    // A cell is low when its pair is and it is itself under the cut.
    let judged: Vec<CellJudgement> = cells
        .iter()
        .map(|c| {
            if !valid(c) {
                return CellJudgement::default();
            }
            let r = expected(c.0, c.1).map(|e| ratio_to(fig(c), e));
            let z = r.map(|r| rr.z(r));
            let (pl, ps) = pair_low(c.0, c.1);
            let low = pl && r.is_some_and(|r| r < link_cut);
            CellJudgement {
                residual: r,
                z,
                low,
                significant: low && ps,
            }
        })
        .collect();
    let mut suspects: Vec<Suspect> = Vec::new();
    let mut significant: Vec<Suspect> = Vec::new();
    for (k, j) in nodes.iter().enumerate() {
        if j.suspect {
            suspects.push(Suspect::Node(k));
        }
        if j.significant {
            significant.push(Suspect::Node(k));
        }
    }
    let mut low_pairs = Vec::new();
    for &(a, b) in pair_res.keys() {
        let (low, sig) = pair_low(a, b);
        if !low {
            continue;
        }
        let dirs: Vec<(usize, usize)> = cells
            .iter()
            .zip(&judged)
            .filter(|(c, j)| j.low && (c.0.min(c.1), c.0.max(c.1)) == (a, b))
            .map(|(c, _)| (c.0, c.1))
            .collect();
        low_pairs.push(LowPair {
            a,
            b,
            low: dirs,
            significant: sig,
        });
        if !nodes[a].suspect && !nodes[b].suspect {
            suspects.push(Suspect::Link(a, b));
            if sig {
                significant.push(Suspect::Link(a, b));
            }
        }
    }
    let all: Vec<f64> = cells.iter().filter(|c| valid(c)).map(fig).collect();
    Judged {
        stats: MatrixStats {
            cells: all.len(),
            median_mbs: median(&all).unwrap_or(0.0),
            node_median_mbs: nr.spread.median,
            node_mad_mbs: nr.spread.mad,
            slow_below_mbs: slow_cut,
            residual_median: rr.spread.median,
            residual_mad: rr.spread.mad,
            link_below_residual: link_cut,
        },
        cells: judged,
        nodes,
        low_pairs,
        suspects,
        significant,
    }
}

/// The verdict on a suspect from its re-measurements (every pass):
/// confirmed when every check is below `confirm_ratio` × its controls,
/// dismissed when any is not (a real fault is low every time; noise is
/// not), unconfirmed when there was nothing to check against.
pub fn verdict(checks: &[Check], t: &MatrixThresholds) -> Outcome {
    if checks.is_empty() {
        return Outcome::Unconfirmed;
    }
    if checks.iter().all(|c| c.ratio < t.confirm_ratio) {
        Outcome::Confirmed
    } else {
        Outcome::Dismissed
    }
}

/// A check's ratio: `mbs / control` (0 when the control is 0 too, so a
/// dead fabric is not "fine").
pub fn ratio(mbs: f64, control: f64) -> f64 {
    if control > 0.0 {
        mbs / control
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full directed matrix of `n` nodes where `f(a, b)` gives each cell.
    fn matrix(n: usize, f: impl Fn(usize, usize) -> f64) -> Vec<Cell> {
        let mut v = Vec::new();
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    v.push((a, b, f(a, b)));
                }
            }
        }
        v
    }

    /// Deterministic noise in [-amp, +amp] (an LCG, so every run replays).
    fn noise(seed: u64, amp: f64) -> impl Fn(usize, usize) -> f64 {
        move |a, b| {
            let x = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(((a * 131 + b) as u64).wrapping_mul(1442695040888963407));
            let u = ((x >> 11) as f64) / ((1u64 << 53) as f64);
            (2.0 * u - 1.0) * amp
        }
    }

    fn t() -> MatrixThresholds {
        MatrixThresholds::default()
    }

    #[test]
    fn clean_uniform_matrix_reports_nothing() {
        let j = judge(6, &matrix(6, |_, _| 1000.0), &t());
        assert!(j.suspects.is_empty());
        assert!(j.cells.iter().all(|c| !c.low));
        assert_eq!(j.stats.median_mbs, 1000.0);
    }

    #[test]
    fn clean_noisy_matrix_reports_nothing() {
        for seed in 0..200 {
            let nz = noise(seed, 0.25);
            let j = judge(6, &matrix(6, |a, b| 1000.0 * (1.0 + nz(a, b))), &t());
            assert!(j.suspects.is_empty(), "seed {seed}: {:?}", j.suspects);
        }
    }

    #[test]
    fn slow_node_is_that_node() {
        for seed in 0..50 {
            let nz = noise(seed, 0.2);
            let cells = matrix(6, |a, b| {
                let base = if a == 3 || b == 3 { 100.0 } else { 1000.0 };
                base * (1.0 + nz(a, b))
            });
            let j = judge(6, &cells, &t());
            assert_eq!(j.suspects, vec![Suspect::Node(3)], "seed {seed}");
            assert_eq!(j.nodes[3].slow_partners, 5);
            assert!(j.nodes[0].slow_partners <= 1);
        }
    }

    #[test]
    fn node_slow_one_way_only_is_still_the_node() {
        // Egress shaped only: its row low, its column fine.
        let cells = matrix(6, |a, _| if a == 2 { 80.0 } else { 1000.0 });
        assert_eq!(judge(6, &cells, &t()).suspects, vec![Suspect::Node(2)]);
    }

    #[test]
    fn slow_pair_is_that_link_either_direction() {
        for (dirs, name) in [(2, "both ways"), (1, "one way")] {
            let cells = matrix(6, |a, b| {
                let hit = (a, b) == (1, 4) || (dirs == 2 && (a, b) == (4, 1));
                if hit {
                    120.0
                } else {
                    1000.0
                }
            });
            let j = judge(6, &cells, &t());
            assert_eq!(j.suspects, vec![Suspect::Link(1, 4)], "{name}");
        }
    }

    #[test]
    fn two_slow_nodes_are_two_nodes_not_links() {
        let cells = matrix(8, |a, b| {
            if [2, 5].contains(&a) || [2, 5].contains(&b) {
                50.0
            } else {
                900.0
            }
        });
        assert_eq!(
            judge(8, &cells, &t()).suspects,
            vec![Suspect::Node(2), Suspect::Node(5)]
        );
    }

    #[test]
    fn ring_neighbours_of_a_slow_node_are_not_suspects() {
        // Quick mode: each node meets only its two neighbours.
        let n = 8;
        let mut cells = Vec::new();
        for i in 0..n {
            let j = (i + 1) % n;
            let v = if i == 5 || j == 5 { 30.0 } else { 700.0 };
            cells.push((i, j, v));
            cells.push((j, i, v));
        }
        let j = judge(n, &cells, &t());
        assert_eq!(j.suspects, vec![Suspect::Node(5)]);
        assert_eq!(j.nodes[4].slow_partners, 1);
        assert_eq!(j.nodes[4].partners, 2);
    }

    #[test]
    fn absolute_floor_keeps_line_rate_cells_quiet() {
        // One cell at 70 % of the median is low relatively, but every cell
        // is above 90 % of a 1000 MB/s port: nothing to report.
        let tight = MatrixThresholds {
            relative: 0.8,
            mad_floor: 0.01,
            port_rate_mbs: Some(1000.0),
            ..t()
        };
        let cells = matrix(4, |a, b| if (a, b) == (0, 1) { 1000.0 } else { 1400.0 });
        let j = judge(4, &cells, &tight);
        assert!(j.suspects.is_empty(), "{:?}", j.suspects);
        // Without the port rate, the same cell is a link suspect.
        let j = judge(
            4,
            &cells,
            &MatrixThresholds {
                port_rate_mbs: None,
                ..tight
            },
        );
        assert_eq!(j.suspects, vec![Suspect::Link(0, 1)]);
    }

    #[test]
    fn failed_cells_count_as_zero() {
        let cells = matrix(5, |a, b| {
            if (a, b) == (0, 2) || (a, b) == (2, 0) {
                0.0
            } else {
                500.0
            }
        });
        assert_eq!(judge(5, &cells, &t()).suspects, vec![Suspect::Link(0, 2)]);
    }

    #[test]
    fn verdicts() {
        let c = |r: f64| Check {
            pass: 1,
            from: "a".into(),
            to: "b".into(),
            either_way: false,
            mbs: r * 100.0,
            control_mbs: 100.0,
            ratio: r,
        };
        assert_eq!(verdict(&[], &t()), Outcome::Unconfirmed);
        assert_eq!(verdict(&[c(0.1), c(0.2)], &t()), Outcome::Confirmed);
        assert_eq!(verdict(&[c(0.1), c(0.9)], &t()), Outcome::Dismissed);
        assert_eq!(verdict(&[c(0.95)], &t()), Outcome::Dismissed);
        assert_eq!(ratio(0.0, 0.0), 0.0);
    }
}
