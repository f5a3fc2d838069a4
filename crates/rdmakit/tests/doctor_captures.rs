//! `rdmakit doctor` on every real capture in fixtures/: the healthy ones pass with
//! `--fail-on warning` (one test each), the faulty ones fail with the finding that
//! names their fault, and `--baseline` turns counter totals into growth.

mod common;

use common::*;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures")).join(name);
    assert!(
        p.join("root").is_dir(),
        "fixture {} is missing",
        p.display()
    );
    p.to_str().unwrap().to_string()
}

/// The captures of healthy hosts (fixtures/<name>/SOURCE says where each came from).
const HEALTHY: &[&str] = &[
    "healthy",
    "healthy-busy",
    "real-nics-procfs",
    "roce-mlx5-qos",
];
/// Captures (or edits, said in their SOURCE) of hosts with a fault.
const FAULTY: &[&str] = &["gpud-h100", "mlx4-saturated-edit"];

fn passes_fail_on_warning(name: &str) {
    let o = rdmakit(&["doctor", "--from", &fixture(name), "--fail-on", "warning"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{name}: a healthy capture must pass --fail-on warning\n{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(text(&o.stdout).contains("0 errors, 0 warnings"));
}

#[test]
fn healthy_rxe_capture_passes_fail_on_warning() {
    passes_fail_on_warning("healthy");
}

#[test]
fn healthy_busy_rxe_capture_passes_fail_on_warning() {
    passes_fail_on_warning("healthy-busy");
}

#[test]
fn real_nics_procfs_capture_passes_fail_on_warning() {
    passes_fail_on_warning("real-nics-procfs");
}

#[test]
fn configured_roce_host_passes_fail_on_warning() {
    passes_fail_on_warning("roce-mlx5-qos");
}

/// A new fixture must be put in one list or the other, so its verdict is tested.
#[test]
fn every_fixture_is_classified() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures"));
    let mut unclassified = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        if !e.path().join("root").is_dir() {
            continue; // pcap/, _capture-tools/
        }
        if !HEALTHY.contains(&name.as_str()) && !FAULTY.contains(&name.as_str()) {
            unclassified.push(name);
        }
    }
    assert!(
        unclassified.is_empty(),
        "fixtures not in HEALTHY or FAULTY: {unclassified:?}"
    );
}

#[test]
fn saturated_counters_fail_and_are_named() {
    let o = rdmakit(&["doctor", "--from", &fixture("mlx4-saturated-edit")]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("ERROR RDK-H010 [hardware] mlx4_0 port 1:")
            && out.contains("symbol_error 65535 (saturated")
            && out.contains("link_downed 255 (saturated"),
        "{out}"
    );
    let o = rdmakit(&["doctor", "--from", &fixture("gpud-h100"), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let h010 = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "RDK-H010")
        .count();
    assert_eq!(h010, 9, "one finding per port in the JSON");
}

/// `--baseline`: a bundle collected earlier (here: the clean capture converted with
/// `rdmakit collect --from`) against the capture with pegged counters.
#[test]
fn baseline_reports_growth_since_the_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let before = dir.path().join("before.json.gz");
    let before = before.to_str().unwrap();
    let o = rdmakit(&[
        "collect",
        "--from",
        &fixture("real-nics-procfs"),
        "-o",
        before,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = rdmakit(&[
        "doctor",
        "--from",
        &fixture("mlx4-saturated-edit"),
        "--baseline",
        before,
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "RDK-H010")
        .expect("H010");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.starts_with(&format!(
            "error counters since the baseline (bundle {before}"
        )) && m.contains("at least +65535")
            && m.contains("link_downed 255 (saturated since the baseline's 0"),
        "{m}"
    );
    let notes = v["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("judged by their growth since the baseline")),
        "{notes:?}"
    );
    // The same capture as its own baseline: still saturated, growth unknown: a warning.
    let o = rdmakit(&[
        "doctor",
        "--from",
        &fixture("mlx4-saturated-edit"),
        "--baseline",
        &fixture("mlx4-saturated-edit"),
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("growth unknown until it is cleared"), "{out}");
}

#[test]
fn baseline_without_ports_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("root/proc")).unwrap();
    std::fs::write(dir.path().join("root/proc/modules"), "").unwrap();
    let o = rdmakit(&[
        "doctor",
        "--from",
        &fixture("healthy"),
        "--baseline",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("holds no RDMA port"),
        "{}",
        text(&o.stderr)
    );
    let o = rdmakit(&["doctor", "--baseline", "/nonexistent/before.json.gz"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--baseline /nonexistent/before.json.gz"));
}
