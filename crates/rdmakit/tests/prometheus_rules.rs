//! The alerting rules shipped in deploy/prometheus: `promtool check rules`, their own
//! unit tests (`promtool test rules deploy/prometheus/rdmakit-rules.test.yml`), every
//! metric they name is one `rdmakit metrics` exports, and the rules fire on the real
//! expositions of the captures: the Soft-RoCE VM with its port down (a real kernel's
//! port_down bundle), the healthy VM, and the real-nics hosts.
//!
//! promtool is Debian's `prometheus` package: when it is missing the tests say so and
//! skip, unless RDMAKIT_REQUIRE_PROMETHEUS is set (scripts/test sets it and installs
//! the package), in which case they fail.

mod common;
mod metrics_common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use metrics_common::*;

fn deploy() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/prometheus"
    ))
}

fn run(tool: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(tool)
        .args(args)
        .output()
        .expect("promtool runs");
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn rules_text() -> String {
    std::fs::read_to_string(deploy().join("rdmakit-rules.yml"))
        .expect("deploy/prometheus/rdmakit-rules.yml")
}

#[test]
fn promtool_checks_the_rules_and_runs_their_tests() {
    let Some(pt) = prometheus_tool("promtool") else {
        return;
    };
    let rules = deploy().join("rdmakit-rules.yml");
    let (ok, out) = run(&pt, &["check", "rules", rules.to_str().unwrap()]);
    assert!(ok, "promtool check rules:\n{out}");
    let tests = deploy().join("rdmakit-rules.test.yml");
    let (ok, out) = run(&pt, &["test", "rules", tests.to_str().unwrap()]);
    assert!(ok, "promtool test rules:\n{out}");
}

/// Every node_infiniband_* / rdmakit_* name in the rules is exported by
/// `rdmakit metrics` (names inside the error-counter regex too).
#[test]
fn the_rules_name_only_exported_metrics() {
    let text = rules_text();
    let mut exported: BTreeSet<String> = BTreeSet::new();
    for f in ["healthy", "healthy-busy", "real-nics-procfs"] {
        let o = rdmakit(&["metrics", "--from", &fixture(f)]);
        assert!(o.status.success());
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            if let Some(name) = line
                .strip_prefix("# TYPE ")
                .and_then(|l| l.split(' ').next())
            {
                exported.insert(name.to_string());
            }
        }
    }
    exported.extend(
        rdmakit_metrics::expo::PORT_COUNTERS
            .iter()
            .map(|c| format!("node_infiniband_{}", c.metric)),
    );
    let mut named = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        let starts = rest.starts_with("node_infiniband_") || rest.starts_with("rdmakit_");
        let boundary = i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'_'
                || bytes[i - 1] == b':');
        if starts && boundary {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            if name.ends_with('_') && !rest[end..].starts_with('(') {
                // Prose: "node_infiniband_*".
            } else if name == "node_infiniband_" {
                // The error-counter regex: node_infiniband_(a|b|c)_total.
                let group = &rest[end + 1..rest.find(")_total").expect("regex group")];
                // (".+" in label_replace's pattern is not a name.)
                for alt in group
                    .split('|')
                    .filter(|a| a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                {
                    named.insert(format!("node_infiniband_{alt}_total"));
                }
            } else {
                named.insert(name.to_string());
            }
            i += end;
        } else {
            i += 1;
        }
    }
    assert!(named.len() >= 8, "{named:?}");
    let unknown: Vec<&String> = named.difference(&exported).collect();
    assert!(
        unknown.is_empty(),
        "rules name metrics rdmakit does not export: {unknown:?}"
    );
}

/// The real expositions as promtool input series: each line of `rdmakit metrics
/// --from X`, with an instance label, held for 40 minutes.
fn series(instance: &str, from: &str) -> String {
    let o = rdmakit(&["metrics", "--from", from]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut out = String::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (name_labels, value) = line.rsplit_once(' ').expect("name value");
        let s = match name_labels.split_once('{') {
            Some((n, l)) => format!("{n}{{instance=\"{instance}\",{l}"),
            None => format!("{name_labels}{{instance=\"{instance}\"}}"),
        };
        out.push_str(&format!(
            "      - series: '{}'\n        values: '{value}x40'\n",
            s.replace('\'', "''")
        ));
    }
    out
}

#[test]
fn rules_fire_on_the_real_expositions() {
    let Some(pt) = prometheus_tool("promtool") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        deploy().join("rdmakit-rules.yml"),
        dir.path().join("rdmakit-rules.yml"),
    )
    .unwrap();
    let vm_down = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../doctor/tests/data/vm/port_down.json.gz"
    ));
    assert!(
        vm_down.is_file(),
        "{} (part of the repository)",
        vm_down.display()
    );
    // The real kernel without ib_umad: a warning (RDK-K003), nothing else.
    let vm_noumad = vm_down.with_file_name("ib_umad_missing.json.gz");
    let mut input = String::new();
    input.push_str(&series("vm-down", vm_down.to_str().unwrap()));
    input.push_str(&series("vm-noumad", vm_noumad.to_str().unwrap()));
    input.push_str(&series("vm-healthy", &fixture("healthy")));
    input.push_str(&series("vm-busy", &fixture("healthy-busy")));
    input.push_str(&series("realnics", &fixture("real-nics-procfs")));
    let test = format!(
        r#"rule_files:
  - rdmakit-rules.yml
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
{input}    alert_rule_test:
      - eval_time: 35m
        alertname: RdmaPortDown
        exp_alerts:
          - exp_labels:
              severity: critical
              instance: vm-down
              device: rxe0
              port: "1"
            exp_annotations:
              summary: "RDMA port rxe0 port 1 on vm-down is not ACTIVE"
              description: "Port state id 1 (1 DOWN, 2 INIT, 3 ARMED) for 5 minutes. On the node: rdmakit doctor; rdmakit explain RDK-H002."
      - eval_time: 35m
        alertname: RdmakitDoctorError
        exp_alerts:
          - exp_labels:
              severity: critical
              instance: vm-down
              code: RDK-H002
              layer: hardware
            exp_annotations:
              summary: "rdmakit doctor: RDK-H002 (hardware layer) on vm-down"
              description: "1 error finding(s) with code RDK-H002. rdmakit explain RDK-H002; rdmakit doctor on the node for the evidence."
      - eval_time: 35m
        alertname: RdmakitDoctorWarning
        exp_alerts:
          - exp_labels:
              severity: warning
              instance: vm-noumad
              code: RDK-K003
              layer: kernel
            exp_annotations:
              summary: "rdmakit doctor: RDK-K003 (kernel layer) on vm-noumad"
              description: "1 warning finding(s) with code RDK-K003. rdmakit explain RDK-K003."
      - eval_time: 35m
        alertname: RdmaLinkBelowFleetMedian
        exp_alerts: []
      - eval_time: 35m
        alertname: RdmaPortErrorsRising
        exp_alerts: []
      - eval_time: 35m
        alertname: RdmaTransportErrorsRising
        exp_alerts: []
"#
    );
    let path = dir.path().join("real.test.yml");
    std::fs::write(&path, &test).unwrap();
    let (ok, out) = run(&pt, &["test", "rules", path.to_str().unwrap()]);
    assert!(ok, "promtool test rules on the real expositions:\n{out}");
}
