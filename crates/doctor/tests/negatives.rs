//! Every check that can raise a warning or an error has a test where
//! it runs and must not fire. Each source below is a real capture (or, for the IRQ and
//! PCIe checks that no software device exercises, the real mlx5 tree grafted onto the
//! healthy capture: `pci_host`); a check is covered when its status there is "pass".
//! A new check that no source passes fails this test until it gets its negative case.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use common::*;
use rdmakit_doctor::checks::{Config, Status, CHECKS};
use rdmakit_doctor::codes::Severity;
use rdmakit_doctor::counters::Baseline;
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;

fn vm(name: &str) -> Bundle {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/vm")
        .join(format!("{name}.json.gz"));
    Bundle::read(p.to_str().unwrap()).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Checks whose codes can be raised to warning or error: a default severity of
/// warning or above, or one the rule raises (RDK-H008 below 1024 bytes, RDK-H011
/// with a baseline, RDK-N009 when CNPs are ignored).
fn can_warn() -> BTreeSet<&'static str> {
    CHECKS
        .iter()
        .filter(|c| {
            c.codes
                .iter()
                .any(|code| code.info().severity >= Severity::Warning)
                || matches!(c.id, "roce.mtu" | "port.transport" | "roce.congestion")
        })
        .map(|c| c.id)
        .collect()
}

#[test]
fn every_check_that_can_warn_passes_somewhere() {
    let mut reports: Vec<(String, Report)> = Vec::new();
    for name in [
        "healthy",
        "healthy-busy",
        "real-nics-procfs",
        "roce-mlx5-qos",
    ] {
        reports.push((name.into(), report(&import(name))));
    }
    // Port counters judged against a baseline of the same capture: no growth.
    let nics = import("real-nics-procfs");
    let facts = collect(&nics, &nics.header.options.clone());
    reports.push((
        "real-nics-procfs --baseline itself".into(),
        report_with(
            &nics,
            &Config {
                baseline: Some(Baseline::from_facts(&facts, "itself", None)),
                ..Config::default()
            },
        ),
    ));
    // The Ethernet counters judged against a baseline of the same RoCE host.
    let roce = import("roce-mlx5-qos");
    let facts = collect(&roce, &roce.header.options.clone());
    reports.push((
        "roce-mlx5-qos --baseline itself".into(),
        report_with(
            &roce,
            &Config {
                baseline: Some(Baseline::from_facts(&facts, "itself", Some(10))),
                ..Config::default()
            },
        ),
    ));
    // A driver that counts link-down events (real bnxt_en statistics, which
    // say 4) in the same host, judged against itself: no new drop of the link.
    let mut bnxt = import("roce-mlx5-qos");
    let stats = rdmakit_testkit::fixtures_dir().join("ethernet/bnxt-en-sfp-10g/stats.txt");
    rdmakit_testkit::bundle::set_probe(
        &mut bnxt,
        "ethtool-stats:eth0",
        &std::fs::read_to_string(&stats).expect("bnxt_en statistics"),
    );
    let facts = collect(&bnxt, &bnxt.header.options.clone());
    reports.push((
        "roce-mlx5-qos, bnxt_en statistics, --baseline itself".into(),
        report_with(
            &bnxt,
            &Config {
                baseline: Some(Baseline::from_facts(&facts, "itself", Some(10))),
                ..Config::default()
            },
        ),
    ));
    // A four-lane module (a real CMIS QSFP+ dump) in the same host.
    let mut four_lanes = import("roce-mlx5-qos");
    let cmis = rdmakit_testkit::fixtures_dir()
        .join("ethernet/cmis-hisense-def8504/sfputil-eeprom-hexdump.txt");
    rdmakit_testkit::bundle::set_probe(
        &mut four_lanes,
        "ethtool-module:eth0",
        &std::fs::read_to_string(&cmis).expect("CMIS fixture"),
    );
    reports.push(("roce-mlx5-qos, CMIS module".into(), report(&four_lanes)));
    for name in ["healthy", "orphaned_by_fork"] {
        reports.push((format!("vm {name}"), report(&vm(name))));
    }
    reports.push((
        "pci_host (edit)".into(),
        report(&pci_host(&PciSpec::default())),
    ));

    let mut missing = Vec::new();
    for id in can_warn() {
        let passed: Vec<&str> = reports
            .iter()
            .filter(|(_, r)| {
                r.checks
                    .iter()
                    .any(|c| c.id == id && c.status == Status::Pass)
            })
            .map(|(n, _)| n.as_str())
            .collect();
        if passed.is_empty() {
            missing.push(id);
        }
    }
    assert!(
        missing.is_empty(),
        "checks that can warn but pass on no source: {missing:?}"
    );
    // The healthy real captures themselves raise nothing at warning or above.
    for (name, r) in &reports[..3] {
        assert!(!r.fails(Severity::Warning), "{name}\n{}", summary(r));
    }
}
