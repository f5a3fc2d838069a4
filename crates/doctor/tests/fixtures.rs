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

fn human(r: &rdmakit_doctor::report::Report, verbose: bool) -> String {
    human_at(r, verbose, 80)
}

/// The report in `width` columns (wide: a line per finding, to match whole).
fn human_at(r: &rdmakit_doctor::report::Report, verbose: bool, width: u16) -> String {
    let text = render::human(r, HumanOptions { verbose, width });
    anstream::adapter::strip_str(&text).to_string()
}

/// A healthy host's report fits one screen.
#[test]
fn healthy_reports_fit_40_lines() {
    for name in ["healthy", "healthy-busy", "real-nics-procfs"] {
        let text = human(&report(&import(name)), false);
        let n = text.lines().count();
        assert!(n <= 40, "{name}: {n} lines\n{text}");
    }
}

/// gpud's H100 tree: eight ports with the same counter readings are one entry in the
/// human report (mlx5_1, whose readings differ, keeps its own), while the JSON keeps
/// nine findings, each with its own subject, and adds the group beside them.
#[test]
fn gpud_h100_findings_are_grouped_in_text_and_kept_in_json() {
    let r = report(&import("gpud-h100"));
    let text = human(&r, false);
    // two entries, and "Start with RDK-H010: rdmakit explain RDK-H010"
    assert_eq!(text.matches("RDK-H010").count(), 4, "{text}");
    assert!(
        text.contains(
            "WARN  RDK-H010 [hardware] mlx5_0 port 1, mlx5_4 port 1 and 6 more (8 alike):"
        ),
        "{text}"
    );
    insta::assert_snapshot!(text);

    let v: serde_json::Value = serde_json::from_str(&render::json(&r)).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let h010: Vec<&serde_json::Value> = findings
        .iter()
        .filter(|f| f["code"] == "RDK-H010")
        .collect();
    assert_eq!(h010.len(), 9);
    for f in &h010 {
        // exactly the v1 fields, one subject each
        let mut keys: Vec<&str> = f.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            ["code", "evidence", "layer", "message", "next", "remedy", "severity", "subject"]
        );
        assert!(f["subject"].as_str().unwrap().ends_with(" port 1"));
    }
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{groups:#?}");
    let g = &groups[0];
    assert_eq!(g["code"], "RDK-H010");
    assert_eq!(g["subjects"].as_array().unwrap().len(), 8);
    for i in g["findings"].as_array().unwrap() {
        let f = &findings[i.as_u64().unwrap() as usize];
        assert_eq!(f["code"], "RDK-H010");
        assert_ne!(f["subject"], "mlx5_1 port 1");
    }
}

/// A DGX-class case, rebuilt as an EDIT of gpud's H100 tree (the original
/// capture is not public): a driver printing the placeholder "unsupported" in the same
/// five counters of each of eight HCAs gave 40 separate RDK-H009 findings. Same code,
/// same cause: one entry listing the 40 paths; the JSON keeps 40 findings.
#[test]
fn forty_placeholders_on_eight_hcas_are_one_entry() {
    let mut b = import("gpud-h100");
    let hcas = [
        "mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9",
    ];
    let attrs = [
        "counters/port_xmit_wait",
        "counters/multicast_rcv_packets",
        "counters/multicast_xmit_packets",
        "hw_counters/rx_dct_connect",
        "hw_counters/rx_icrc_encapsulated",
    ];
    for h in hcas {
        for a in attrs {
            set(
                &mut b,
                &format!("/sys/class/infiniband/{h}/ports/1/{a}"),
                "unsupported\n",
            );
        }
    }
    let r = report(&b);
    let h009 = r.findings.iter().filter(|f| f.code == Code::H009).count();
    assert_eq!(h009, 40, "{}", summary(&r));
    let text = human_at(&r, false, 1000);
    assert!(
        text.contains("RDK-H009 [hardware] /sys/class/infiniband/mlx5_0/ports/1/counters/multicast_rcv_packets, /sys/class/infiniband/mlx5_0/ports/1/counters/multicast_xmit_packets and 38 more (40 alike): unrecognized counter \"unsupported\""),
        "{text}"
    );
    assert_eq!(text.matches("RDK-H009").count(), 1, "{text}");
    let without = human_at(&report(&import("gpud-h100")), false, 1000)
        .lines()
        .count();
    assert_eq!(text.lines().count(), without + 1, "{text}");
    let verbose = human(&r, true);
    for h in hcas {
        for a in attrs {
            assert!(
                verbose.contains(&format!("/sys/class/infiniband/{h}/ports/1/{a}")),
                "--verbose lists every path: {h}/{a}"
            );
        }
    }
    let v: serde_json::Value = serde_json::from_str(&render::json(&r)).unwrap();
    let g = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["code"] == "RDK-H009")
        .unwrap();
    assert_eq!(g["findings"].as_array().unwrap().len(), 40);
    assert_eq!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == "RDK-H009")
            .count(),
        40
    );
}

#[test]
fn saturated_connectx3_human_report() {
    let r = report(&import("mlx4-saturated-edit"));
    insta::assert_snapshot!(human(&r, false));
}

#[test]
fn healthy_verbose_human_report() {
    let r = report(&import("healthy"));
    insta::assert_snapshot!(human(&r, true));
}
