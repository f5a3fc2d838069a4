//! The pages as files: snapshots of the HTML (deterministic: same input, same
//! bytes), nothing referenced outside the file, and the embedded data read back.

mod common;

use common::*;
use rdmakit_doctor::codes::Code;
use rdmakit_doctor::finding::{Evidence, Finding};
use rdmakit_report::embedded_json;

fn doctor_healthy() -> Doctor {
    doctor(&capture("healthy"), "capture directory fixtures/healthy")
}

fn doctor_pci() -> Doctor {
    doctor(
        &bundle("mlx5-pci.json.gz"),
        "bundle tests/data/mlx5-pci.json.gz",
    )
}

#[test]
fn doctor_healthy_rxe_capture() {
    let d = doctor_healthy();
    let html = doctor_html(&d);
    assert_self_contained(&html);
    // rxe: no IRQs and no PCIe path, said as such; its port and netdev drawn.
    assert!(html.contains("a software device: no interrupts of its own"));
    assert!(html.contains("data-plot=\"topology-0\""));
    assert!(!html.contains("data-plot=\"irq-"));
    insta::assert_snapshot!(for_snapshot(&html));
}

#[test]
fn doctor_pci_device_irqs_and_topology() {
    let d = doctor_pci();
    let html = doctor_html(&d);
    assert_self_contained(&html);
    for plot in ["irq-0", "topology-0", "topology-1"] {
        assert!(html.contains(&format!("data-plot=\"{plot}\"")), "{plot}");
    }
    // The findings the views carry, with their evidence.
    assert!(html.contains("RDK-I005") && html.contains("RDK-H004"));
    assert!(html.contains("/proc/irq/45/smp_affinity_list"));
    // The HCA's link: x8 of x16, below capability; the root port hangs off the complex.
    let hca = &d.topology.devices[0].path;
    assert_eq!(hca.len(), 2);
    assert_eq!(hca[0].role, "root port");
    assert!(hca[0].uplink.is_none());
    assert_eq!(hca[1].uplink.as_ref().unwrap().below_capability, Some(true));
    // Vectors 4..7 land on CPUs of the other node.
    let irq = &d.irq.devices[0];
    assert_eq!(irq.vectors_per_cpu, vec![2, 1, 1, 1, 1, 1, 1, 1]);
    assert_eq!(
        irq.vectors
            .iter()
            .filter(|v| v.numa_local == Some(false))
            .count(),
        4
    );
    insta::assert_snapshot!(for_snapshot(&html));
}

#[test]
fn doctor_data_reads_back() {
    for d in [doctor_healthy(), doctor_pci()] {
        let html = doctor_html(&d);
        let v = embedded_json(&html).unwrap();
        assert_eq!(v["schema"], "rdmakit.report/v1");
        assert_eq!(v["kind"], "doctor");
        assert_eq!(
            v["data"]["doctor"],
            serde_json::to_value(&d.report).unwrap()
        );
        assert_eq!(v["data"]["irq"], serde_json::to_value(&d.irq).unwrap());
        assert_eq!(
            v["data"]["topology"],
            serde_json::to_value(&d.topology).unwrap()
        );
    }
}

#[test]
fn same_input_same_bytes() {
    assert_eq!(doctor_html(&doctor_pci()), doctor_html(&doctor_pci()));
}

/// Data that holds URLs and `//` (a kernel log line, a note) still gives a page
/// that references nothing, and the data reads back unchanged.
#[test]
fn hostile_text_references_nothing() {
    let mut d = doctor_healthy();
    let f = Finding::new(
        Code::K001,
        "host <script>alert(1)</script>",
        "see https://example.invalid//x and //cdn.example/a.css",
    )
    .evidence(Evidence::new(
        "http://x/y",
        "url(//z) @import '//w' <img src=//q>",
    ));
    d.report.findings.push(f);
    d.report
        .notes
        .push("</script><script>alert(2)</script> //evil".into());
    let html = doctor_html(&d);
    assert_self_contained(&html);
    let v = embedded_json(&html).unwrap();
    assert_eq!(
        v["data"]["doctor"],
        serde_json::to_value(&d.report).unwrap()
    );
}

#[test]
fn perf_write_bw_sweep() {
    let run = perf_run("perf-write-bw-a.json");
    assert_eq!(run.results.len(), 23, "2 B .. 8 MiB");
    let html = rdmakit_report::perf::render(std::slice::from_ref(&run), &meta()).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("data-plot=\"perf-0-bandwidth\""));
    assert!(html.contains("data-plot=\"perf-0-msgrate\""));
    assert!(!html.contains("data-plot=\"perf-0-latency\""));
    insta::assert_snapshot!(for_snapshot(&html));
}

#[test]
fn perf_send_lat_sweep() {
    let run = perf_run("perf-send-lat-a.json");
    let html = rdmakit_report::perf::render(std::slice::from_ref(&run), &meta()).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("data-plot=\"perf-0-latency\""));
    for series in ["min", "typical (median)", "99 %", "99.9 %"] {
        assert!(html.contains(series), "{series}");
    }
    insta::assert_snapshot!(for_snapshot(&html));
}

#[test]
fn perf_data_reads_back() {
    let runs = vec![
        perf_run("perf-write-bw-a.json"),
        perf_run("perf-send-lat-a.json"),
    ];
    let html = rdmakit_report::perf::render(&runs, &meta()).unwrap();
    assert_self_contained(&html);
    let v = embedded_json(&html).unwrap();
    assert_eq!(v["kind"], "perf");
    assert_eq!(v["data"], serde_json::to_value(&runs).unwrap());
    // And the embedded runs are perf reports again.
    let back: Vec<rdmakit_perf::Report> = serde_json::from_value(v["data"].clone()).unwrap();
    assert_eq!(back, runs);
}
