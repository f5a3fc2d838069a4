//! Changes between two sweeps (`--baseline`), the expected inventory of a small
//! cluster (`--expect`), duplicate names and missing nodes — on nodes built from
//! the real captures in fixtures/.

use std::collections::BTreeMap;

use rdmakit_fleet::baseline::{ChangeKind, Expected, Previous};
use rdmakit_fleet::node::{NodeReport, Severity};
use rdmakit_fleet::render;
use rdmakit_fleet::report::{analyze, FleetReport, Options, ReasonKind, Status};
use rdmakit_host::bundle::Bundle;
use rdmakit_testkit::bundle::*;
use rdmakit_testkit::fleet::*;

fn node(b: &Bundle, origin: &str) -> NodeReport {
    NodeReport::from_report(&report(b), origin)
}

fn statuses(r: &FleetReport) -> BTreeMap<String, Status> {
    r.nodes
        .iter()
        .filter(|n| n.status != Status::Ok)
        .map(|n| (n.name.clone(), n.status))
        .collect()
}

fn want(v: &[(&str, Status)]) -> BTreeMap<String, Status> {
    v.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

fn kinds(r: &FleetReport, name: &str) -> Vec<(ReasonKind, String)> {
    r.nodes
        .iter()
        .find(|n| n.name == name)
        .unwrap()
        .reasons
        .iter()
        .map(|x| (x.kind, x.message.clone()))
        .collect()
}

const SYMBOL_ERROR: &str = "/sys/class/infiniband/mlx4_0/ports/1/counters/symbol_error";
const FW: &str = "/sys/class/infiniband/mlx4_0/fw_ver";

/// The healthy fleet of the first sweep: six rxe nodes, four mlx4 nodes.
fn sweep0() -> Vec<NodeReport> {
    let mut v: Vec<NodeReport> = (1..=6)
        .map(|i| node(&rxe(&format!("node{i:02}"), false), "sweep0"))
        .collect();
    v.extend((1..=4).map(|i| node(&real_nics(&format!("mlx4-{i:02}"), &["mlx4_0"]), "sweep0")));
    v
}

#[test]
fn second_sweep_against_the_first() {
    let first = analyze(sweep0(), vec![], vec![], &Options::default());
    assert_eq!(
        first.summary.exit_code,
        0,
        "{}",
        render::human(&first, Default::default())
    );
    let prev_json: serde_json::Value = serde_json::from_str(&render::json(&first)).unwrap();

    // The second sweep: node02's port went down, node05 sent nothing, mlx4-03's
    // symbol errors grew (0 -> 120: below any outlier floor), mlx4-04 got new
    // firmware, node07 is new.
    let mut now = Vec::new();
    for i in [1, 2, 3, 4, 6, 7] {
        let mut b = rxe(&format!("node{i:02}"), false);
        if i == 2 {
            port_down(&mut b, "rxe0", 1);
        }
        now.push(node(&b, "sweep1"));
    }
    for i in 1..=4 {
        let mut b = real_nics(&format!("mlx4-{i:02}"), &["mlx4_0"]);
        match i {
            3 => set_line(&mut b, SYMBOL_ERROR, "120"),
            4 => set_line(&mut b, FW, "2.32.1000"),
            _ => {}
        }
        now.push(node(&b, "sweep1"));
    }

    for prev in [
        Previous::from_fleet_json("sweep0.json", prev_json).unwrap(),
        Previous::from_nodes("sweep0.json", &sweep0()),
    ] {
        let opts = Options {
            previous: Some(prev),
            ..Options::default()
        };
        let r = analyze(now.clone(), vec![], vec![], &opts);
        assert_eq!(
            statuses(&r),
            want(&[
                ("node02", Status::Error),
                ("node05", Status::Missing),
                ("mlx4-03", Status::Warning),
                ("mlx4-04", Status::Warning),
            ]),
            "{}",
            render::human(&r, Default::default())
        );
        assert!(kinds(&r, "node02")
            .iter()
            .any(|(k, m)| *k == ReasonKind::Change
                && m.contains("rxe0 port 1 went down: ACTIVE -> DOWN")));
        assert_eq!(
            kinds(&r, "node05"),
            [(
                ReasonKind::Missing,
                "in the baseline (sweep0.json), absent from this report".to_string()
            )]
        );
        // Its own doctor judges the counter (RDK-H010); the sweep adds the growth.
        assert_eq!(
            kinds(&r, "mlx4-03"),
            [
                (
                    ReasonKind::Finding,
                    "error counters since they were last cleared: symbol_error 120 (> 10)"
                        .to_string()
                ),
                (
                    ReasonKind::Change,
                    "mlx4_0 port 1 symbol_error grew by 120 (0 -> 120, counters/)".to_string()
                )
            ]
        );
        let k = kinds(&r, "mlx4-04");
        assert!(k.contains(&(
            ReasonKind::Change,
            "mlx4_0 firmware changed: 2.31.5050 -> 2.32.1000".to_string()
        )));
        assert!(k.iter().any(|(k, _)| *k == ReasonKind::Drift), "{k:?}");
        let ck: Vec<(&str, ChangeKind)> = r
            .changes
            .iter()
            .map(|c| (c.node.as_str(), c.kind))
            .collect();
        assert!(ck.contains(&("node07", ChangeKind::NodeNew)), "{ck:?}");
        assert!(ck.contains(&("node05", ChangeKind::NodeGone)), "{ck:?}");
        assert_eq!(r.summary.exit_code, 1);
    }
}

/// A counter that went backwards (a reboot) is listed, not a reason.
#[test]
fn a_reset_counter_is_only_listed() {
    let mut b = real_nics("mlx4-01", &["mlx4_0"]);
    set_line(&mut b, SYMBOL_ERROR, "500");
    let prev = Previous::from_nodes("before", &[node(&b, "before")]);
    let now = vec![node(&real_nics("mlx4-01", &["mlx4_0"]), "now")];
    let r = analyze(
        now,
        vec![],
        vec![],
        &Options {
            previous: Some(prev),
            ..Options::default()
        },
    );
    assert_eq!(r.nodes[0].status, Status::Ok);
    assert_eq!(r.changes.len(), 1);
    assert_eq!(r.changes[0].kind, ChangeKind::CounterReset);
    assert_eq!(r.changes[0].severity, Severity::Info);
}

#[test]
fn small_cluster_checked_against_expected_inventory() {
    // The expected inventory, from a fleet known to be right.
    let mut good = sweep0();
    good.extend((1..=2).map(|i| {
        node(
            &real_nics(&format!("hpc{i:02}"), &["hfi1_0", "mlx4_0"]),
            "good",
        )
    }));
    let exp = Expected::from_report(
        "rdmakit test",
        &analyze(good, vec![], vec![], &Options::default()),
    );
    assert_eq!(exp.cohorts.len(), 3);
    let exp = Expected::parse("expected.json", &exp.to_json()).unwrap();
    let mlx4 = exp
        .cohorts
        .iter()
        .find(|c| c.label.starts_with("MT4099"))
        .unwrap();
    assert_eq!(mlx4.values["fw_ver[mlx4_0]"], "2.31.5050");
    assert_eq!(mlx4.values["rate[mlx4_0/2]"], "40 Gb/sec (4X QDR)");

    // Two mlx4 nodes that disagree: by majority nobody can tell which is right.
    let mut bad = real_nics("small-b", &["mlx4_0"]);
    set_line(&mut bad, FW, "2.30.8000");
    let small = vec![
        node(&real_nics("small-a", &["mlx4_0"]), "small"),
        node(&bad, "small"),
        node(&real_nics("small-c", &["hfi1_0"]), "small"),
        node(&real_nics("small-d", &["mlx5_0"]), "small"),
    ];
    let r = analyze(small.clone(), vec![], vec![], &Options::default());
    assert_eq!(
        statuses(&r),
        want(&[("small-a", Status::Warning), ("small-b", Status::Warning),]),
        "{}",
        render::human(&r, Default::default())
    );
    assert!(kinds(&r, "small-a")[0].1.contains("no majority"));

    // With the expected inventory: the one with the wrong firmware; the node that
    // lost its mlx4 against its cohort's device count; hardware not in the file.
    let r = analyze(
        small,
        vec![],
        vec![],
        &Options {
            expected: Some(("expected.json".into(), exp)),
            ..Options::default()
        },
    );
    assert_eq!(
        statuses(&r),
        want(&[
            ("small-b", Status::Warning),
            ("small-c", Status::Error),
            ("small-d", Status::Warning),
        ]),
        "{}",
        render::human(&r, Default::default())
    );
    assert_eq!(
        kinds(&r, "small-b"),
        [(
            ReasonKind::Expect,
            "fw_ver[mlx4_0] is 2.30.8000; expected 2.31.5050 (--expect)".to_string()
        )]
    );
    assert!(kinds(&r, "small-c").contains(&(
        ReasonKind::Expect,
        "device_count is 1; expected 2 (--expect)".to_string()
    )));
    // small-d: hardware not in the expected inventory.
    let d = kinds(&r, "small-d");
    assert!(
        d.iter()
            .any(|(k, m)| *k == ReasonKind::Expect && m.contains("not in the expected inventory")),
        "{d:?}"
    );
}

/// Issue 34: a name counts once (the last report read), so copies of one
/// report can neither outvote a cohort nor multiply the output.
#[test]
fn a_duplicate_name_counts_once_the_last_report_used() {
    let a = node(&rxe("node01", false), "a/node01.json");
    let b = node(&rxe("node01", true), "b/node01.json");
    let c = node(&rxe("node02", false), "b/node02.json");
    let r = analyze(vec![a, b, c], vec![], vec![], &Options::default());
    let names: Vec<(&str, &str)> = r
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.origin.as_str()))
        .collect();
    assert_eq!(
        names,
        [("node01", "b/node01.json"), ("node02", "b/node02.json")]
    );
    assert_eq!(r.duplicates.len(), 1);
    assert_eq!(r.duplicates[0].origins, ["a/node01.json", "b/node01.json"]);
    assert_eq!(r.duplicates[0].used, "b/node01.json");
    assert_eq!(r.nodes[0].status, Status::Warning);
    let dup: Vec<&str> = r.nodes[0]
        .reasons
        .iter()
        .filter(|x| x.kind == ReasonKind::Duplicate)
        .map(|x| x.message.as_str())
        .collect();
    assert_eq!(
        dup,
        ["node01 appears in 2 inputs (a/node01.json); the last read, b/node01.json, was used"]
    );
    assert_eq!(r.nodes[1].status, Status::Ok);
    assert_eq!(r.summary.exit_code, 2);
}

/// Issue 34: copies of one bad node do not become its cohort's majority.
#[test]
fn copies_of_one_node_do_not_outvote_its_cohort() {
    let mut nodes: Vec<_> = (1..=4)
        .map(|i| node(&rxe(&format!("good{i}"), false), &format!("g{i}.json")))
        .collect();
    let mut bad = rxe("bad", false);
    set_line(&mut bad, "/proc/sys/kernel/osrelease", "6.1.0-99-amd64");
    let bad = node(&bad, "sweep.jsonl");
    nodes.extend((1..=50).map(|i| {
        let mut n = bad.clone();
        n.origin = format!("sweep.jsonl:{i}");
        n
    }));
    let r = analyze(nodes, vec![], vec![], &Options::default());
    assert_eq!(r.summary.nodes, 5);
    let st = statuses(&r);
    assert_eq!(st, want(&[("bad", Status::Warning)]), "{:?}", r.drift);
    let k = kinds(&r, "bad");
    assert!(
        k.iter().any(|(k, m)| *k == ReasonKind::Drift
            && m == "kernel is 6.1.0-99-amd64; cohort c1 has 6.1.0-57-amd64 on 4 of 5 nodes"),
        "{k:?}"
    );
}

#[test]
fn a_node_that_sent_nothing_is_missing_with_its_reason() {
    let r = analyze(
        vec![
            node(&rxe("node01", false), "sweep"),
            NodeReport::missing("node02", "sweep", "srun: no output within 60 s"),
        ],
        vec![],
        vec![],
        &Options::default(),
    );
    assert_eq!(r.nodes[1].status, Status::Missing);
    assert_eq!(r.nodes[1].reasons[0].message, "srun: no output within 60 s");
    assert_eq!((r.summary.missing, r.summary.exit_code), (1, 1));
    // A missing node has no cohort and is not compared.
    assert_eq!(r.cohorts.len(), 1);
    assert_eq!(r.cohorts[0].nodes, ["node01"]);
}
