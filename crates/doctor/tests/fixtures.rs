//! Replays every real capture in fixtures/ and snapshots the findings.

mod common;

use common::*;
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::render::{self, HumanOptions};
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;
use rdmakit_host::source::Recorder;

#[test]
fn healthy_rxe_capture() {
    let r = report(&import("healthy"));
    // A healthy Soft-RoCE host: no error or warning; the GID index and MTU notes.
    assert!(
        codes_at(&r, Severity::Warning).is_empty(),
        "{}",
        summary(&r)
    );
    assert!(all_codes(&r).contains(&Code::H007));
    insta::assert_snapshot!(summary(&r));
}

#[test]
fn healthy_busy_rxe_capture() {
    let r = report(&import("healthy-busy"));
    assert!(
        codes_at(&r, Severity::Warning).is_empty(),
        "{}",
        summary(&r)
    );
    insta::assert_snapshot!(summary(&r));
}

#[test]
fn real_nics_procfs_capture() {
    // Only /sys/class/infiniband was captured: everything else is "not checked".
    let r = report(&import("real-nics-procfs"));
    insta::assert_snapshot!(summary(&r));
}

#[test]
fn healthy_human_report() {
    let r = report(&import("healthy"));
    let text = render::human(&r, HumanOptions::default());
    insta::assert_snapshot!(anstream::adapter::strip_str(&text).to_string());
}

#[test]
fn healthy_json_report_is_valid_and_versioned() {
    let r = report(&import("healthy"));
    let v: serde_json::Value = serde_json::from_str(&render::json(&r)).unwrap();
    assert_eq!(v["schema"], "rdmakit.doctor/v1");
    assert_eq!(v["checklist"].as_array().unwrap().len(), 4);
    assert!(v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["code"].as_str().unwrap().starts_with("RDK-")));
}

/// Recording a replay and replaying the recording gives the same report, and the
/// bundle survives its file format.
#[test]
fn recorded_bundle_replays_identically() {
    for name in ["healthy", "healthy-busy", "real-nics-procfs"] {
        let captured = import(name);
        let rec = Recorder::new(&captured);
        let facts = collect(&rec, &captured.header.options.clone());
        let bundle = Bundle::new(captured.header.clone(), rec.into_records());
        let reread = Bundle::from_bytes("mem", &bundle.to_json()).unwrap();
        let again = collect(&reread, &reread.header.options.clone());
        assert_eq!(format!("{facts:?}"), format!("{again:?}"), "{name}");
        assert_eq!(
            reread.misses(),
            0,
            "{name}: replay asked something the recording lacks"
        );
        assert_eq!(
            summary(&report(&captured)),
            summary(&report(&reread)),
            "{name}"
        );
    }
}
