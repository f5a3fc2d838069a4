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
        // The doctor's part is what `rdmakit doctor --json` prints, groups included.
        let json: serde_json::Value =
            serde_json::from_str(&rdmakit_doctor::render::json(&d.report)).unwrap();
        assert_eq!(v["data"]["doctor"], json);
        assert_eq!(v["data"]["irq"], serde_json::to_value(&d.irq).unwrap());
        assert_eq!(
            v["data"]["topology"],
            serde_json::to_value(&d.topology).unwrap()
        );
    }
}

/// The `Findings` section of a doctor page.
fn findings_section(html: &str) -> &str {
    let a = html
        .find("<section id=\"findings\">")
        .expect("findings section");
    let b = html[a..].find("</section>").expect("section ends");
    &html[a..a + b]
}

/// gpud's H100 node (fixtures/gpud-h100): eight ports read the same error
/// counters, which the terminal prints as one finding ("mlx5_0 port 1, mlx5_4
/// port 1 and 6 more (8 alike)"); the page shows one card for them, its eight
/// ports and their evidence behind a `<details>`, and mlx5_1's worse port alone.
#[test]
fn doctor_gpud_h100_eight_alike_ports_one_card() {
    let d = doctor(
        &capture("gpud-h100"),
        "capture directory fixtures/gpud-h100",
    );
    let html = doctor_html(&d);
    assert_self_contained(&html);
    let groups = rdmakit_doctor::group::groups(&d.report.findings);
    let h010 = groups
        .iter()
        .find(|g| g.code == Code::H010)
        .expect("the eight ports are one group");
    assert_eq!(h010.subjects.len(), 8);
    let terminal = rdmakit_doctor::render::human(&d.report, Default::default());
    assert!(terminal.contains("and 6 more (8 alike)"), "{terminal}");

    let section = findings_section(&html);
    let grouped: usize = groups.iter().map(|g| g.findings.len()).sum();
    assert_eq!(
        section.matches("<div class=\"finding").count(),
        d.report.findings.len() - grouped + groups.len(),
        "one card per group, one per other finding"
    );
    // RDK-H010: mlx5_1 (an error: link_downed saturated) and the group of eight.
    assert_eq!(section.matches("<code>RDK-H010</code>").count(), 2);
    let card = &section[section.find("data-alike=\"8\"").expect("the group's card")..];
    let card = &card[..card.find("</details>").expect("details close")];
    assert!(card.contains("mlx5_0 port 1, mlx5_4 port 1 and 6 more (8 alike)"));
    for s in &h010.subjects {
        assert!(card.contains(&format!("<li>{s}</li>")), "{s}");
    }
    assert!(card.contains("/sys/class/infiniband/mlx5_9/ports/1/counters/port_rcv_errors"));
    // The page's data holds the groups, as --json does.
    let v = embedded_json(&html).unwrap();
    assert_eq!(
        v["data"]["doctor"]["groups"],
        serde_json::to_value(&groups).unwrap()
    );
    insta::assert_snapshot!(for_snapshot(&html));
}

/// A host without RDMA (no answer in the source for any RDMA file) whose
/// doctor probed rdmakit's soft NIC: the summary names soft0 as the soft NIC,
/// not a device of the host, as the terminal does under "Active probes".
#[test]
fn doctor_host_without_rdma_names_the_soft_nic_it_probed() {
    use rdmakit_doctor::checks::Config;
    use rdmakit_doctor::probes::{run, ProbeConfig, SOFT_LABEL};
    let empty = rdmakit_host::bundle::Bundle::new(
        rdmakit_host::bundle::Bundle::header_now("rdmakit test", Default::default()),
        Default::default(),
    );
    let mut d = doctor(&empty, "live host");
    assert!(d.report.devices.is_empty());
    let ctx = rdmakit_verbs::Context::open_soft(rdmakit_verbs::DeviceConfig::default())
        .expect("open the soft NIC");
    let probes = run(&ctx, &ProbeConfig::quick());
    let device = probes.device.clone();
    d.report = d.report.with_probes(probes, &Config::default());
    let html = doctor_html(&d);
    assert_self_contained(&html);
    assert!(!html.contains("No RDMA device in the source"));
    let summary = &html[html.find("<section id=\"summary\">").unwrap()..];
    let summary = &summary[..summary.find("</section>").unwrap()];
    assert!(
        summary.contains("RDMA devices on the host: none."),
        "{summary}"
    );
    assert!(
        summary.contains(&format!(
            "<tr class=\"probed-only\"><td><b>{device}</b></td><td>{SOFT_LABEL}</td>"
        )),
        "{summary}"
    );
    assert!(summary.contains("1: ACTIVE"), "{summary}");
    // The IRQ and topology views say why the soft NIC has none of theirs.
    assert!(html.contains(&format!("{device}, rdmakit's soft NIC, runs in userspace")));
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
    let json: serde_json::Value =
        serde_json::from_str(&rdmakit_doctor::render::json(&d.report)).unwrap();
    assert_eq!(v["data"]["doctor"], json);
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
