//! A fleet of 22 nodes built from the real captures in fixtures/ (rxe VM captures,
//! hfi1/mlx4 trees of real hosts) as bundles, a capture directory, doctor JSON files
//! and JSON lines, with faults injected on five nodes and two bad inputs: exactly
//! those five nodes are flagged, each with the right reason, and no other; each kind
//! of hardware forms its own cohort.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rdmakit_fleet::input::{self, InputKind, LoadOptions};
use rdmakit_fleet::node::Severity;
use rdmakit_fleet::render::{self, HumanOptions};
use rdmakit_fleet::report::{FleetReport, Options, ReasonKind, Status};
use rdmakit_testkit::fleet::*;

/// The fleet's files, written once per test run (they take a while in a debug build).
fn fleet_files() -> &'static (PathBuf, Vec<String>) {
    static FILES: OnceLock<(PathBuf, Vec<String>)> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("real_fleet");
        let _ = std::fs::remove_dir_all(&dir);
        let inputs = faulty_fleet(&dir);
        (dir, inputs)
    })
}

fn faulty() -> (&'static Path, &'static FleetReport) {
    static REPORT: OnceLock<FleetReport> = OnceLock::new();
    let (dir, inputs) = fleet_files();
    let r = REPORT.get_or_init(|| {
        let loaded = input::load(inputs, &LoadOptions::default());
        FleetReport::from_loaded(loaded, &Options::default())
    });
    (dir.as_path(), r)
}

fn node<'a>(r: &'a FleetReport, name: &str) -> &'a rdmakit_fleet::report::FleetNode {
    r.nodes
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

#[test]
fn exactly_the_faulty_nodes_are_flagged_with_their_reasons() {
    let (_, r) = faulty();
    assert_eq!(r.summary.nodes, 22, "{:#?}", r.inputs);
    let flagged: BTreeMap<&str, Status> = r
        .nodes
        .iter()
        .filter(|n| n.status != Status::Ok)
        .map(|n| (n.name.as_str(), n.status))
        .collect();
    let want: BTreeMap<&str, Status> = [
        ("node03", Status::Error),
        ("node07", Status::Warning),
        ("hpc03", Status::Error),
        ("mlx4-02", Status::Warning),
        ("mlx4-04", Status::Warning),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        flagged,
        want,
        "{}",
        render::human(r, HumanOptions::default())
    );

    // node03: its own doctor's port-down finding.
    let n = node(r, "node03");
    assert!(n
        .reasons
        .iter()
        .any(|x| x.code.as_deref() == Some("RDK-H002") && x.severity == Severity::Error));
    // node07: the error counter, an outlier among 13 rxe nodes.
    let n = node(r, "node07");
    assert_eq!(n.reasons.len(), 1, "{:#?}", n.reasons);
    assert_eq!(n.reasons[0].kind, ReasonKind::Outlier);
    assert!(n.reasons[0].message.contains("retry_exceeded_err = 5000"));
    // hpc03: one HCA fewer than its cohort, and which one.
    let n = node(r, "hpc03");
    let dc = n
        .reasons
        .iter()
        .find(|x| x.subject.as_deref() == Some("device_count"))
        .expect("device_count reason");
    assert_eq!(dc.severity, Severity::Error);
    assert!(
        dc.message.contains("missing here: mlx4_0 (MT4099"),
        "{}",
        dc.message
    );
    assert_eq!(n.cohort, node(r, "hpc01").cohort);
    // mlx4-02: firmware drift, majority named.
    let n = node(r, "mlx4-02");
    assert_eq!(n.reasons.len(), 1, "{:#?}", n.reasons);
    assert_eq!(n.reasons[0].kind, ReasonKind::Drift);
    assert_eq!(n.reasons[0].subject.as_deref(), Some("fw_ver[mlx4_0]"));
    assert!(n.reasons[0].message.contains("2.31.5050 on 4 of 5"));
    // mlx4-04: the slow link is an outlier (and not also reported as rate drift).
    let n = node(r, "mlx4-04");
    assert_eq!(n.reasons.len(), 1, "{:#?}", n.reasons);
    assert_eq!(n.reasons[0].kind, ReasonKind::Outlier);
    assert!(n.reasons[0]
        .message
        .contains("mlx4_0 port 2 runs at 20 Gb/s"));

    // Bad input named, the rest reported.
    let bad: Vec<&str> = r.errors.iter().map(|e| e.input.as_str()).collect();
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad[0].ends_with("hpc.jsonl:3"), "{bad:?}");
    assert!(bad[1].ends_with("broken.json.gz"), "{bad:?}");
    assert_eq!(r.summary.exit_code, 2);
    let readme = r
        .inputs
        .iter()
        .flat_map(|i| i.skipped.iter())
        .any(|s| s.ends_with("bundles/README"));
    assert!(readme, "{:#?}", r.inputs);
    let kinds: Vec<InputKind> = r.inputs.iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [
            InputKind::Directory,
            InputKind::Capture,
            InputKind::JsonLines,
            InputKind::Directory,
            InputKind::Unreadable
        ]
    );
}

#[test]
fn different_hardware_is_its_own_cohort_never_drift() {
    let (_, r) = faulty();
    let cohorts: Vec<(&str, usize)> = r
        .cohorts
        .iter()
        .map(|c| (c.label.as_str(), c.nodes.len()))
        .collect();
    assert_eq!(cohorts.len(), 3, "{cohorts:#?}");
    assert_eq!(cohorts[0], ("rdma_rxe (1 port, Ethernet)", 13));
    assert!(
        cohorts[1].0.starts_with("MT4099 SM_1141000001000 (2 ports"),
        "{cohorts:?}"
    );
    assert_eq!(cohorts[1].1, 5);
    assert!(
        cohorts[2].0.starts_with("HPE 100Gb 1-port OP101"),
        "{cohorts:?}"
    );
    assert_eq!(cohorts[2].1, 4);
    // Only the injected differences are drift: no kernel, rdma-core, memlock or
    // device-count drift between the rxe VM and the real NIC hosts.
    let drift: Vec<(&str, &str)> = r
        .drift
        .iter()
        .map(|d| (d.cohort.as_str(), d.field.as_str()))
        .collect();
    assert_eq!(
        drift,
        [
            ("c2", "fw_ver[mlx4_0]"),
            ("c2", "rate[mlx4_0/2]"),
            ("c3", "device_count"),
            ("c3", "port_count"),
        ]
    );
    let outliers: Vec<(&str, &str)> = r
        .outliers
        .iter()
        .map(|o| (o.node.as_str(), o.metric.as_str()))
        .collect();
    assert_eq!(
        outliers,
        [
            ("node07", "hw_counters/retry_exceeded_err"),
            ("mlx4-04", "rate_gbps")
        ]
    );
}

/// The healthy-busy nodes carry real retry and duplicate counts from their traffic
/// (completer_retry_err 86, duplicate_request 2596 on 4 of 13 nodes): a pattern
/// shared by a third of the cohort is not an outlier.
#[test]
fn busy_nodes_real_counters_are_not_outliers() {
    let (_, r) = faulty();
    for n in ["node09", "node10", "node11", "node12"] {
        assert_eq!(node(r, n).status, Status::Ok, "{n}");
        let inv = node(r, n).inventory.as_ref().unwrap();
        assert_eq!(
            inv.devices[0].ports[0]
                .hw_counters
                .get("completer_retry_err"),
            Some(&86)
        );
    }
}

/// The samples the outliers were judged on read back from the report: every
/// outlier is one of them, with its value, and a cohort's rate sample holds every
/// member with that ACTIVE port (mlx4-04's 20 Gb/s among its peers' 40).
#[test]
fn metric_samples_hold_every_outlier() {
    let (_, r) = faulty();
    let samples = r.metric_samples();
    assert!(!samples.is_empty());
    for o in &r.outliers {
        let s = samples
            .iter()
            .find(|s| s.cohort == o.cohort && s.metric == o.metric && s.subject == o.subject)
            .unwrap_or_else(|| panic!("no sample for {o:?}"));
        let v = s.values.iter().find(|v| v.node == o.node).unwrap();
        assert_eq!(v.value, o.value, "{o:?}");
        let values: Vec<f64> = s.values.iter().map(|v| v.value).collect();
        assert_eq!(
            rdmakit_fleet::stats::median(&values),
            Some(o.median),
            "{o:?}"
        );
    }
    let mlx4 = r
        .cohorts
        .iter()
        .find(|c| c.nodes.iter().any(|n| n == "mlx4-04"))
        .unwrap();
    let rate = samples
        .iter()
        .find(|s| s.cohort == mlx4.id && s.metric == "rate_gbps" && s.subject == "mlx4_0 port 2")
        .unwrap();
    let got: Vec<(&str, f64)> = rate
        .values
        .iter()
        .map(|v| (v.node.as_str(), v.value))
        .collect();
    assert_eq!(
        got,
        [
            ("mlx4-01", 40.0),
            ("mlx4-02", 40.0),
            ("mlx4-03", 40.0),
            ("mlx4-04", 20.0),
            ("mlx4-05", 40.0)
        ]
    );
    // Every member of a cohort appears only under its cohort.
    for s in &samples {
        let c = r.cohorts.iter().find(|c| c.id == s.cohort).unwrap();
        assert!(s.values.iter().all(|v| c.nodes.contains(&v.node)), "{s:?}");
    }
}

#[test]
fn human_report_snapshot() {
    let (dir, r) = faulty();
    let text = render::human(r, HumanOptions::default());
    let text = anstream::adapter::strip_str(&text).to_string();
    insta::assert_snapshot!(scrub(&text, dir));
}

#[test]
fn json_report_snapshot() {
    let (dir, r) = faulty();
    let mut v: serde_json::Value = serde_json::from_str(&render::json(r)).unwrap();
    assert_eq!(v["schema"], "rdmakit.fleet/v1");
    // Inventories are the doctor's (snapshotted there); keep one to show the shape.
    for n in v["nodes"].as_array_mut().unwrap() {
        let keep = n["name"] == "mlx4-02";
        let obj = n.as_object_mut().unwrap();
        if !keep {
            obj.remove("inventory");
        }
    }
    let text = serde_json::to_string_pretty(&v).unwrap();
    insta::assert_snapshot!(scrub(&text, dir));
}

#[test]
fn same_fleet_in_any_input_order_gives_the_same_report() {
    let (_, inputs) = fleet_files();
    let a = FleetReport::from_loaded(
        input::load(inputs, &LoadOptions::default()),
        &Options::default(),
    );
    let mut rev = inputs.clone();
    rev.reverse();
    let b = FleetReport::from_loaded(
        input::load(&rev, &LoadOptions::default()),
        &Options::default(),
    );
    let strip = |r: &FleetReport| {
        let mut v: serde_json::Value = serde_json::from_str(&render::json(r)).unwrap();
        v.as_object_mut().unwrap().remove("inputs");
        v.as_object_mut().unwrap().remove("errors");
        v
    };
    assert_eq!(strip(&a), strip(&b));
}
