//! Re-measuring suspects before they are reported.
//!
//! Each suspect is measured again against healthy partners, with control
//! pairs of healthy nodes measured around it in the same conditions (so a
//! machine or fabric that got busier meanwhile moves both): a suspect whose
//! checks are below `confirm_ratio` × the controls' median in every pass is
//! confirmed; one that is fine in any pass was the screening's noise.
//!
//! - A **node** suspect is checked against two partners (the reference
//!   first, when given), in the direction it was slow in the screening (what
//!   it sends, what it receives, both, or the lower of the two); control: the
//!   two partners together.
//! - A **link** suspect is checked in the direction(s) that were low; its
//!   controls are each of its nodes with another partner — a link fault is
//!   exactly a pair slow while both are fine with others.
//!
//! Nodes go first; then every low pair neither of whose nodes turned out to
//! be a node fault — also the low pairs of a node suspect that re-measuring
//! cleared, so a bad link that made its node look bad is still found.
//!
//! The planning is pure ([`plan_nodes`], [`plan_links`]); [`confirm`] runs it.

use super::coordinator::{fault_of, run_rounds, Indexed, Run, Specs, Step};
use super::localize::{self, Judged, SlowDir, Suspect};
use super::report::{Check, Confirmation, MatrixThresholds, Outcome, Phase, RoundTiming};
use super::schedule;

/// One check: a directed cell that must be low again, or the lower of a
/// pair's two cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// `from` → `to`.
    Dir(usize, usize),
    /// The lower of both directions.
    Lower(usize, usize),
}

impl Probe {
    fn pair(self) -> (usize, usize) {
        match self {
            Probe::Dir(a, b) | Probe::Lower(a, b) => (a.min(b), a.max(b)),
        }
    }
}

/// What to measure for one suspect.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The suspect.
    pub suspect: Suspect,
    /// Its checks.
    pub probes: Vec<Probe>,
    /// Control pairs (both directions count).
    pub controls: Vec<(usize, usize)>,
}

/// Picks partners from a pool: the reference first, the others in turn so
/// suspects spread over the healthy nodes.
struct Picker {
    pool: Vec<usize>,
    reference: Option<usize>,
    next: usize,
}

impl Picker {
    /// `pool`: candidates in order of preference (the reference first).
    fn new(pool: Vec<usize>, reference: Option<usize>) -> Picker {
        Picker {
            pool,
            reference,
            next: 0,
        }
    }

    fn pick(&mut self, avoid: &[usize], allow_reference: bool) -> Option<usize> {
        if let Some(r) = self.reference {
            if allow_reference && self.pool.contains(&r) && !avoid.contains(&r) {
                return Some(r);
            }
        }
        // The next candidate in the pool after the last one picked.
        let len = self.pool.len();
        for k in 0..len {
            let i = (self.next + k) % len;
            let g = self.pool[i];
            if !avoid.contains(&g) && Some(g) != self.reference {
                self.next = i + 1;
                return Some(g);
            }
        }
        // Only the reference is left.
        self.reference
            .filter(|r| !avoid.contains(r) && self.pool.contains(r))
    }
}

/// Orders the pool: the reference, then by how many low pairs a node is
/// in (fewest first), then by index.
fn pool(judged: &Judged, reference: Option<usize>, exclude: &[bool]) -> Vec<usize> {
    let n = judged.nodes.len();
    let mut involved = vec![0usize; n];
    for p in &judged.low_pairs {
        involved[p.a] += 1;
        involved[p.b] += 1;
    }
    let mut v: Vec<usize> = reference.filter(|&r| !exclude[r]).into_iter().collect();
    let mut others: Vec<usize> = (0..n)
        .filter(|&k| !exclude[k] && Some(k) != reference && judged.nodes[k].partners > 0)
        .collect();
    others.sort_by_key(|&k| (involved[k], k));
    v.extend(others);
    v
}

/// The plans for the node suspects.
pub fn plan_nodes(judged: &Judged, reference: Option<usize>) -> Vec<Plan> {
    let suspects: Vec<bool> = judged.nodes.iter().map(|j| j.suspect).collect();
    let mut p = Picker::new(pool(judged, reference, &suspects), reference);
    judged
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, j)| j.suspect)
        .map(|(x, j)| {
            let g1 = p.pick(&[x], true);
            let g2 = g1.and_then(|g1| p.pick(&[x, g1], false));
            let partners: Vec<usize> = [g1, g2].into_iter().flatten().collect();
            let probes = partners
                .iter()
                .flat_map(|&g| match j.slow_dir {
                    SlowDir::Out => vec![Probe::Dir(x, g)],
                    SlowDir::In => vec![Probe::Dir(g, x)],
                    SlowDir::Both => vec![Probe::Dir(x, g), Probe::Dir(g, x)],
                    SlowDir::Either => vec![Probe::Lower(x, g)],
                })
                .collect();
            let controls = match (g1, g2) {
                (Some(g1), Some(g2)) => vec![(g1.min(g2), g1.max(g2))],
                _ => Vec::new(),
            };
            Plan {
                suspect: Suspect::Node(x),
                probes,
                controls,
            }
        })
        .collect()
}

/// The plans for the low pairs of nodes that are not `faulty`.
pub fn plan_links(judged: &Judged, reference: Option<usize>, faulty: &[bool]) -> Vec<Plan> {
    let mut p = Picker::new(pool(judged, reference, faulty), reference);
    judged
        .low_pairs
        .iter()
        .filter(|l| !faulty[l.a] && !faulty[l.b])
        .map(|l| {
            let g1 = p.pick(&[l.a, l.b], true);
            let g2 = g1.and_then(|g1| p.pick(&[l.a, l.b, g1], false)).or(g1);
            let controls: Vec<(usize, usize)> = [g1.map(|g| (l.a, g)), g2.map(|g| (l.b, g))]
                .into_iter()
                .flatten()
                .map(|(a, b)| (a.min(b), a.max(b)))
                .collect();
            let probes = if controls.is_empty() {
                Vec::new()
            } else if l.low.is_empty() {
                vec![Probe::Lower(l.a, l.b)]
            } else {
                l.low.iter().map(|&(f, t)| Probe::Dir(f, t)).collect()
            };
            Plan {
                suspect: Suspect::Link(l.a, l.b),
                probes,
                controls,
            }
        })
        .collect()
}

/// Plans and runs the re-measurements (nodes, then links), and judges each
/// suspect. Returns the confirmations, the cells measured and the rounds.
pub(super) fn confirm(
    run: &Run<'_>,
    judged: &Judged,
    reference: Option<usize>,
    names: &[String],
    t: &MatrixThresholds,
    on: &(dyn Fn(&Step) + Sync),
) -> (Vec<Confirmation>, Vec<Indexed>, Vec<RoundTiming>) {
    let n = names.len();
    let mut cells = Vec::new();
    let mut timings = Vec::new();
    let nodes = plan_nodes(judged, reference);
    let mut out = passes(run, &nodes, names, t, on, &mut cells, &mut timings);
    // Node faults: confirmed, or not re-measurable but significant.
    let mut faulty = vec![false; n];
    for (c, p) in out.iter().zip(&nodes) {
        if let Suspect::Node(x) = p.suspect {
            faulty[x] = match c.verdict {
                Outcome::Confirmed => true,
                Outcome::Dismissed => false,
                Outcome::Unconfirmed => judged.nodes[x].significant,
            };
        }
    }
    let links = plan_links(judged, reference, &faulty);
    out.extend(passes(run, &links, names, t, on, &mut cells, &mut timings));
    (out, cells, timings)
}

/// Runs `plans` for up to `confirm_passes` passes (a suspect goes on to
/// the next pass only while it stays low).
fn passes(
    run: &Run<'_>,
    plans: &[Plan],
    names: &[String],
    t: &MatrixThresholds,
    on: &(dyn Fn(&Step) + Sync),
    all_cells: &mut Vec<Indexed>,
    timings: &mut Vec<RoundTiming>,
) -> Vec<Confirmation> {
    let specs = Specs::confirmation(run.cfg);
    let mut checks: Vec<Vec<Check>> = vec![Vec::new(); plans.len()];
    let mut active: Vec<usize> = (0..plans.len())
        .filter(|&i| !plans[i].probes.is_empty())
        .collect();
    for pass in 1..=t.confirm_passes.max(1) {
        if active.is_empty() {
            break;
        }
        // Every distinct pair once, in plan order (each suspect's first
        // control, its checks, its other controls), packed into rounds of
        // at most confirm_parallel disjoint pairs.
        let mut order: Vec<(usize, usize)> = Vec::new();
        for &i in &active {
            let p = &plans[i];
            let probes = p.probes.iter().map(|x| x.pair());
            let seq = p
                .controls
                .iter()
                .copied()
                .take(1)
                .chain(probes)
                .chain(p.controls.iter().copied().skip(1));
            for k in seq {
                if !order.contains(&k) {
                    order.push(k);
                }
            }
        }
        let mut rounds: Vec<schedule::Round> = Vec::new();
        for chunk in order.chunks(run.cfg.confirm_parallel.max(1)) {
            rounds.extend(schedule::pack(chunk));
        }
        let (cells, tm) = run_rounds(run, &rounds, Phase::Suspect, timings.len(), &specs, on);
        timings.extend(tm);
        let cell =
            |a: usize, b: usize| cells.iter().find(|c| c.0 == a && c.1 == b).map(|c| c.2.mbs);
        let mut still = Vec::new();
        for &i in &active {
            let p = &plans[i];
            let control_vals: Vec<f64> = p
                .controls
                .iter()
                .flat_map(|&(a, b)| [cell(a, b), cell(b, a)])
                .flatten()
                .collect();
            let Some(control) = crate::stats::median(&control_vals) else {
                continue;
            };
            let now: Vec<Check> = p
                .probes
                .iter()
                .filter_map(|&pr| {
                    let (from, to, mbs, either_way) = match pr {
                        Probe::Dir(a, b) => (a, b, cell(a, b)?, false),
                        Probe::Lower(a, b) => (a, b, cell(a, b)?.min(cell(b, a)?), true),
                    };
                    Some(Check {
                        pass,
                        from: names[from].clone(),
                        to: names[to].clone(),
                        either_way,
                        mbs,
                        control_mbs: control,
                        ratio: localize::ratio(mbs, control),
                    })
                })
                .collect();
            let low = !now.is_empty() && now.iter().all(|c| c.ratio < t.confirm_ratio);
            checks[i].extend(now);
            if low {
                still.push(i);
            }
        }
        // Mark which re-measured cells were checks and which controls.
        let probe_pairs: Vec<(usize, usize)> = active
            .iter()
            .flat_map(|&i| plans[i].probes.iter().map(|x| x.pair()))
            .collect();
        all_cells.extend(cells.into_iter().map(|(a, b, mut c)| {
            c.phase = if probe_pairs.contains(&(a.min(b), a.max(b))) {
                Phase::Suspect
            } else {
                Phase::Control
            };
            (a, b, c)
        }));
        active = still;
    }
    plans
        .iter()
        .zip(checks)
        .map(|(p, checks)| Confirmation {
            suspect: fault_of(p.suspect, names),
            verdict: localize::verdict(&checks, t),
            checks,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairwise::localize::judge;

    fn matrix(n: usize, f: impl Fn(usize, usize) -> f64) -> Vec<localize::Cell> {
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

    #[test]
    fn a_node_slow_sending_is_checked_sending_against_two_partners() {
        let j = judge(
            6,
            &matrix(6, |a, _| if a == 2 { 50.0 } else { 900.0 }),
            &MatrixThresholds::default(),
        );
        let p = plan_nodes(&j, None);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].suspect, Suspect::Node(2));
        assert_eq!(p[0].probes, vec![Probe::Dir(2, 0), Probe::Dir(2, 1)]);
        assert_eq!(p[0].controls, vec![(0, 1)]);
    }

    #[test]
    fn the_reference_is_the_first_partner() {
        let cells = matrix(6, |a, b| if a == 4 || b == 4 { 50.0 } else { 900.0 });
        let j = judge(6, &cells, &MatrixThresholds::default());
        let p = plan_nodes(&j, Some(3));
        assert_eq!(
            p[0].probes,
            vec![
                Probe::Dir(4, 3),
                Probe::Dir(3, 4),
                Probe::Dir(4, 0),
                Probe::Dir(0, 4)
            ]
        );
        assert_eq!(p[0].controls, vec![(0, 3)]);
    }

    #[test]
    fn a_slow_link_is_checked_in_its_low_direction_with_each_node_elsewhere() {
        let cells = matrix(6, |a, b| if (a, b) == (1, 4) { 60.0 } else { 900.0 });
        let j = judge(6, &cells, &MatrixThresholds::default());
        let p = plan_links(&j, None, &[false; 6]);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].suspect, Suspect::Link(1, 4));
        assert_eq!(p[0].probes, vec![Probe::Dir(1, 4)]);
        // Each end with a partner of its own, neither 1 nor 4.
        assert_eq!(p[0].controls.len(), 2);
        for (k, &(a, b)) in p[0].controls.iter().enumerate() {
            let end = [1, 4][k];
            assert!(a == end || b == end, "{:?}", p[0].controls);
            let other = if a == end { b } else { a };
            assert!(![1, 4].contains(&other), "{:?}", p[0].controls);
        }
    }

    #[test]
    fn low_pairs_of_a_confirmed_node_are_not_links() {
        let cells = matrix(6, |a, b| {
            if a == 2 || b == 2 {
                50.0
            } else if (a, b) == (0, 5) {
                40.0
            } else {
                900.0
            }
        });
        let j = judge(6, &cells, &MatrixThresholds::default());
        let mut faulty = [false; 6];
        faulty[2] = true;
        let p = plan_links(&j, None, &faulty);
        assert_eq!(
            p.iter().map(|x| x.suspect).collect::<Vec<_>>(),
            vec![Suspect::Link(0, 5)]
        );
    }

    #[test]
    fn no_partner_no_probe() {
        // Two nodes: nothing to compare with.
        let j = judge(
            2,
            &[(0, 1, 10.0), (1, 0, 900.0)],
            &MatrixThresholds::default(),
        );
        assert!(plan_links(&j, None, &[false; 2])
            .iter()
            .all(|p| p.probes.is_empty()));
    }
}
