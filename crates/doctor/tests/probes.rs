//! Active probes on the soft NIC, in process: every probe passes, the
//! memlock limit is honoured, and resource counts return to baseline.

use rdmakit_doctor::probes::{run, ProbeConfig, ProbeKind, SOFT_LABEL};
use rdmakit_verbs::{Context, DeviceConfig};

fn ctx() -> std::sync::Arc<Context> {
    Context::open_soft(DeviceConfig::default()).expect("open soft NIC")
}

#[test]
fn every_probe_passes_on_the_soft_nic_and_resources_return_to_baseline() {
    let c = ctx();
    let dev = c.soft().expect("soft device");
    let before = dev.resource_counts();
    let r = run(&c, &ProbeConfig::quick());
    assert!(r.passed(), "{r:#?}");
    assert_eq!(r.label, SOFT_LABEL);
    assert_eq!(dev.resource_counts(), before);
    let names: Vec<&str> = r.results.iter().map(|p| p.name.as_str()).collect();
    for want in [
        "mr.reg 4 KiB",
        "mr.reg 64 MiB",
        "qp.rc RESET->INIT->RTR->RTS",
        "qp.ud RESET->INIT->RTR->RTS",
        "rc.send",
        "rc.write",
        "rc.read",
        "rc.atomic",
        "ud.send",
        "sample.latency",
        "sample.bandwidth",
        "resources.restored",
    ] {
        assert!(names.contains(&want), "missing {want}: {names:?}");
    }
    assert_eq!(r.of(ProbeKind::MemoryRegistration).count(), 15);
    assert!(r.results.iter().all(|p| !p.skipped));
    // Runs again on the same device: nothing was left behind.
    let again = run(&c, &ProbeConfig::quick());
    assert!(again.passed());
    assert_eq!(dev.resource_counts(), before);
}

#[test]
fn memlock_limit_skips_larger_registrations_and_says_so() {
    let c = ctx();
    let cfg = ProbeConfig {
        memlock_limit: Some(64 << 10),
        ..ProbeConfig::quick()
    };
    let r = run(&c, &cfg);
    assert!(r.passed(), "{r:#?}");
    assert_eq!(r.memlock_limit, Some(64 << 10));
    let mr: Vec<_> = r.of(ProbeKind::MemoryRegistration).collect();
    let ran: Vec<&str> = mr
        .iter()
        .filter(|p| !p.skipped)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        ran,
        [
            "mr.reg 4 KiB",
            "mr.reg 8 KiB",
            "mr.reg 16 KiB",
            "mr.reg 32 KiB",
            "mr.reg 64 KiB"
        ]
    );
    let skipped: Vec<_> = mr.iter().filter(|p| p.skipped).collect();
    assert_eq!(skipped.len(), 10);
    assert!(skipped
        .iter()
        .all(|p| p.passed && p.detail.contains("RLIMIT_MEMLOCK (64 KiB)")));
    assert_eq!(c.soft().unwrap().resource_counts(), Default::default());
}

mod common;

use rdmakit_doctor::checks::Config;
use rdmakit_doctor::codes::{Code, Layer, Severity};
use rdmakit_doctor::probes::{ProbeReport, ProbeResult};
use rdmakit_doctor::report::{Report, SCHEMA};

fn result(name: &str, kind: ProbeKind, fail: Option<(&str, &str, &str)>) -> ProbeResult {
    ProbeResult {
        name: name.into(),
        kind,
        passed: fail.is_none(),
        skipped: false,
        duration_us: 10,
        detail: fail.map_or("ok".into(), |f| format!("{} failed with {}", f.0, f.1)),
        verb: fail.map(|f| f.0.to_string()),
        errno: fail.map(|f| f.1.to_string()),
        layer: fail.map(|f| f.2.to_string()),
    }
}

fn failing() -> ProbeReport {
    ProbeReport {
        device: "soft0".into(),
        label: SOFT_LABEL.into(),
        ports: vec!["1: ACTIVE Ethernet active_mtu 4096".into()],
        memlock_limit: Some(8 << 20),
        results: vec![
            result("mr.reg 4 KiB", ProbeKind::MemoryRegistration, None),
            result(
                "mr.reg 8 MiB",
                ProbeKind::MemoryRegistration,
                Some(("ibv_reg_mr", "ENOMEM", "application")),
            ),
            result(
                "qp.rc RESET->INIT->RTR->RTS",
                ProbeKind::QpBringup,
                Some(("ibv_modify_qp", "EINVAL", "kernel")),
            ),
            ProbeResult {
                detail: "RDMA WRITE: data mismatch at byte 3 of 8192".into(),
                ..result(
                    "rc.write",
                    ProbeKind::Traffic,
                    Some(("x", "y", "application")),
                )
            },
        ],
    }
}

#[test]
fn failed_probes_become_findings_in_the_soft_device_report() {
    let r = Report::for_probed_device(failing(), &Config::default(), "test", None);
    assert_eq!(r.schema, SCHEMA);
    let codes: Vec<(Code, Layer, Severity)> = r
        .findings
        .iter()
        .map(|f| (f.code, f.layer, f.severity))
        .collect();
    assert!(codes.contains(&(Code::P001, Layer::Application, Severity::Error)));
    assert!(codes.contains(&(Code::P002, Layer::Kernel, Severity::Error)));
    assert!(codes.contains(&(Code::P003, Layer::Application, Severity::Error)));
    assert_eq!(r.counts.error, 3);
    let mr_row = &r.checklist[2];
    assert_eq!(
        (mr_row.result, mr_row.codes.as_slice()),
        ("fail", &[Code::P001][..])
    );
    assert_eq!(r.checklist[0].result, "n/a");
    assert_eq!(r.checklist[1].result, "pass");
    assert_eq!(r.checklist[3].result, "n/a");
    let text = rdmakit_doctor::render::human(&r, Default::default());
    assert!(
        text.contains("Active probes")
            && text.contains("soft0 (rdmakit soft NIC in userspace, not a host device)")
    );
    assert!(text.contains("FAIL"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&rdmakit_doctor::render::json(&r)).unwrap();
    assert_eq!(json["probes"][0]["results"][1]["errno"], "ENOMEM");
    assert_eq!(json["probes"][0]["label"], SOFT_LABEL);
}

#[test]
fn with_probes_adds_findings_and_updates_the_mr_row_of_a_host_report() {
    let base = common::report(&common::import("healthy"));
    assert!(serde_json::to_value(&base).unwrap().get("probes").is_none());
    let errors = base.counts.error;
    // The soft NIC's probes never change the host's own verdict...
    let soft = base.clone().with_probes(failing(), &Config::default());
    assert_eq!(soft.counts.error, errors + 3);
    assert_eq!(soft.checklist, base.checklist);
    // ...a probe of one of the host's devices does.
    let mut on_host = failing();
    on_host.device = "rxe0".into();
    let r = base.clone().with_probes(on_host, &Config::default());
    assert_eq!(r.counts.error, errors + 3);
    let row = r
        .checklist
        .iter()
        .find(|c| c.check == "Memory registration and mapping")
        .unwrap();
    assert_eq!(row.result, "fail");
    assert!(row.codes.contains(&Code::P001));
    // Severity overrides apply to probe codes too.
    let mut cfg = Config::default();
    cfg.overrides.insert(Code::P003, Severity::Warning);
    let r = base.with_probes(failing(), &cfg);
    let p3 = r.findings.iter().find(|f| f.code == Code::P003).unwrap();
    assert_eq!(p3.severity, Severity::Warning);
}

#[test]
fn passing_probes_turn_the_mr_row_to_pass() {
    let c = ctx();
    let p = run(&c, &ProbeConfig::quick());
    let r = Report::for_probed_device(p, &Config::default(), "test", None);
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    let words: Vec<&str> = r.checklist.iter().map(|c| c.result).collect();
    assert_eq!(words, ["n/a", "pass", "pass", "n/a"]);
    assert!(!r.fails(Severity::Error));
}

#[test]
fn a_probe_failure_in_the_fabric_layer_keeps_its_layer() {
    let mut p = failing();
    p.results = vec![result(
        "qp.rc RESET->INIT->RTR->RTS",
        ProbeKind::QpBringup,
        Some(("ibv_modify_qp", "ETIMEDOUT", "fabric")),
    )];
    let r = Report::for_probed_device(p, &Config::default(), "test", None);
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    assert_eq!(r.findings[0].layer, Layer::Fabric);
}
