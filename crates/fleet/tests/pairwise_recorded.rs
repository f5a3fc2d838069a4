//! Localization and re-measurement planning on real matrices: reports that
//! `scripts/bench-pairwise` recorded on six namespaced agents (see
//! tests/data/pairwise/SOURCE). The screening cells are judged again with
//! the default thresholds; a report that does not parse fails the test.

use rdmakit_fleet::pairwise::confirm::{plan_links, plan_nodes, Probe};
use rdmakit_fleet::pairwise::localize::{judge, Judged, Suspect};
use rdmakit_fleet::pairwise::report::{Fault, MatrixThresholds, Outcome, PairwiseReport, Phase};

fn load(name: &str) -> PairwiseReport {
    let path = format!("{}/tests/data/pairwise/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn rejudge(r: &PairwiseReport) -> (Vec<String>, Judged) {
    let names: Vec<String> = r.nodes.iter().map(|n| n.name.clone()).collect();
    let idx = |s: &str| names.iter().position(|n| n == s).unwrap();
    let cells: Vec<_> = r
        .cells
        .iter()
        .filter(|c| c.phase == Phase::Screen)
        .map(|c| (idx(&c.from), idx(&c.to), c.mbs))
        .collect();
    assert_eq!(cells.len(), 30, "a full 6-node matrix");
    (names, judge(6, &cells, &MatrixThresholds::default()))
}

#[test]
fn clean_noisy_matrix_has_nothing_significant_and_its_verdict_is_clean() {
    let r = load("6ns-clean-1.json");
    let (_, j) = rejudge(&r);
    assert!(j.significant.is_empty(), "{:?}", j.significant);
    // The screening nominated suspects (the matrix is noisy) ...
    assert!(!j.suspects.is_empty());
    // ... and re-measuring dismissed every one.
    assert!(r.faults.is_empty());
    assert!(r
        .confirmations
        .iter()
        .all(|c| c.verdict == Outcome::Dismissed));
}

#[test]
fn slow_node_n3_is_the_node_suspect_and_checked_both_ways() {
    let r = load("6ns-slow-node-n3-9.json");
    let (names, j) = rejudge(&r);
    let n3 = names.iter().position(|n| n == "n3").unwrap();
    assert_eq!(
        j.suspects
            .iter()
            .filter(|s| matches!(s, Suspect::Node(_)))
            .collect::<Vec<_>>(),
        vec![&Suspect::Node(n3)]
    );
    assert_eq!(j.nodes[n3].slow_partners, 5);
    // tbf on both sides: its row and its column are slow.
    let plans = plan_nodes(&j, None);
    assert_eq!(plans.len(), 1);
    assert!(plans[0]
        .probes
        .iter()
        .any(|p| matches!(p, Probe::Dir(a, _) if *a == n3)));
    assert!(plans[0]
        .probes
        .iter()
        .any(|p| matches!(p, Probe::Dir(_, b) if *b == n3)));
    // Its pairs are not link suspects once it is a node fault.
    let mut faulty = [false; 6];
    faulty[n3] = true;
    assert!(plan_links(&j, None, &faulty)
        .iter()
        .all(|p| !matches!(p.suspect, Suspect::Link(a, b) if a == n3 || b == n3)));
    assert_eq!(r.faults, vec![Fault::node("n3")]);
}

#[test]
fn slow_pair_n1_n5_is_a_link_suspect_among_noise() {
    let r = load("6ns-slow-pair-n1-n5-2.json");
    let (names, j) = rejudge(&r);
    let (n1, n5) = (
        names.iter().position(|n| n == "n1").unwrap(),
        names.iter().position(|n| n == "n5").unwrap(),
    );
    assert!(
        j.suspects.contains(&Suspect::Link(n1.min(n5), n1.max(n5))),
        "{:?}",
        j.suspects
    );
    assert!(!j.suspects.iter().any(|s| matches!(s, Suspect::Node(_))));
    // The slow link stands far below the others' residuals.
    let lp = j
        .low_pairs
        .iter()
        .find(|p| (p.a, p.b) == (n1.min(n5), n1.max(n5)))
        .unwrap();
    assert_eq!(lp.low.len(), 2, "shaped both ways: {:?}", lp.low);
    assert_eq!(r.faults, vec![Fault::link("n1", "n5")]);
}

#[test]
fn a_report_without_a_verdict_renders_no_verdict_and_is_not_clean() {
    let mut r = load("6ns-clean-1.json");
    assert!(r.clean());
    // Older reports have no `inconclusive` field: it parses as none.
    assert_eq!(r.inconclusive, None);
    r.inconclusive = Some("30 of 30 bandwidth tests failed".into());
    assert!(!r.clean());
    let text = rdmakit_fleet::pairwise::render::human(&r);
    assert!(
        text.contains("No verdict: 30 of 30 bandwidth tests failed"),
        "{text}"
    );
    assert!(text.contains("-m 1024 on 1500-byte links"), "{text}");
    assert!(!text.contains("No fault"), "{text}");
    let json = serde_json::to_string(&r).unwrap();
    let back: PairwiseReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back.inconclusive, r.inconclusive);
}
