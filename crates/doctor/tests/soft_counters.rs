//! The soft NIC's published device-wide counters as the doctor sees them: a
//! bundle holding the `soft_counters` probe's answer (what `rdmakit collect`
//! records on a host where the soft NIC was used) gives the soft device a
//! port 1 with those counters, and RDK-H011, RDK-N014 and RDK-N015 judge it
//! as a kernel port's; the baseline keys it `soft0/1`. The host is the
//! healthy rxe capture (fixtures/healthy), whose own findings stay as they
//! were; the soft counters are set by hand.

mod common;

use common::*;
use rdmakit_doctor::checks::Config;
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::counters::Baseline;
use rdmakit_doctor::finding::Finding;
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;
use rdmakit_host::source::{Answer, Op};

/// The healthy rxe host with soft0's counters `(name, value)` recorded.
fn with_soft(values: &[(&str, u64)]) -> Bundle {
    let mut b = import("healthy");
    let text: String = values
        .iter()
        .map(|(n, v)| format!("soft0 {n} {v}\n"))
        .collect();
    b.set(Op::Probe, "soft_counters", Answer::Data(text.into_bytes()));
    b
}

/// A run's counters: packets both ways, no loss, no congestion.
const CLEAN: [(&str, u64); 12] = [
    ("port_xmit_packets", 200_000),
    ("port_rcv_packets", 200_000),
    ("retransmitted_packets", 0),
    ("local_ack_timeout_err", 0),
    ("out_of_sequence", 0),
    ("packet_seq_err", 0),
    ("duplicate_request", 0),
    ("rnr_nak_retry_err", 0),
    ("np_ecn_marked_roce_packets", 0),
    ("np_cnp_sent", 0),
    ("rp_cnp_handled", 0),
    ("rp_cnp_ignored", 0),
];

/// [`CLEAN`] with each `(name, by)` raised.
fn grown(moves: &[(&str, u64)]) -> Bundle {
    let v: Vec<(&str, u64)> = CLEAN
        .iter()
        .map(|(n, v)| {
            let by: u64 = moves.iter().filter(|(m, _)| m == n).map(|(_, b)| b).sum();
            (*n, v + by)
        })
        .collect();
    with_soft(&v)
}

/// [`CLEAN`] as the baseline, `age` seconds earlier.
fn baseline(age: u64) -> Config {
    let before = with_soft(&CLEAN);
    let facts = collect(&before, &before.header.options.clone());
    let b = Baseline::from_facts(&facts, "bundle before.json.gz", Some(age));
    assert!(b.ports.contains_key("soft0/1"), "{:?}", b.ports.keys());
    Config {
        baseline: Some(b),
        ..Config::default()
    }
}

fn of(r: &Report, code: Code) -> Vec<&Finding> {
    r.findings.iter().filter(|f| f.code == code).collect()
}

/// The soft port's findings, as the snapshots show them.
fn soft_summary(r: &Report) -> String {
    let mut s = String::new();
    for f in r.findings.iter().filter(|f| f.subject == "soft0 port 1") {
        s += &finding_text(f);
        for n in &f.next {
            s += &format!("    next: {n}\n");
        }
    }
    s
}

#[test]
fn the_collector_gives_the_soft_device_a_port_with_its_counters() {
    let b = with_soft(&CLEAN);
    let facts = collect(&b, &b.header.options.clone());
    assert_eq!(facts.soft_devices.len(), 1);
    let d = &facts.soft_devices[0];
    assert_eq!((d.name.as_str(), d.ports.len()), ("soft0", 1));
    let p = &d.ports[0];
    assert_eq!(p.num, 1);
    assert_eq!(
        p.counters["port_rcv_packets"].path,
        "soft_counters:soft0/ports/1/counters/port_rcv_packets"
    );
    assert_eq!(p.counters.len(), 2);
    assert_eq!(p.hw_counters.len(), 10);
    // The kernel's devices are as they were: the soft one is apart.
    let plain = import("healthy");
    let kernel = collect(&plain, &plain.header.options.clone());
    assert!(kernel.soft_devices.is_empty());
    assert_eq!(facts.devices.len(), kernel.devices.len());
    // And the report of the host is unchanged but for the soft port's findings.
    assert_eq!(
        report(&b)
            .findings
            .iter()
            .filter(|f| f.subject != "soft0 port 1")
            .count(),
        report(&plain).findings.len()
    );
}

#[test]
fn an_answer_that_does_not_parse_is_unrecognized_not_a_device() {
    let mut b = import("healthy");
    b.set(
        Op::Probe,
        "soft_counters",
        Answer::Data(b"soft0 np_cnp_sent lots\n".to_vec()),
    );
    let facts = collect(&b, &b.header.options.clone());
    assert!(facts.soft_devices.is_empty());
    assert!(facts.unrecognized.iter().any(|u| u.path == "soft_counters"));
}

/// Totals without a baseline: ACK timeouts are H011's (since counting
/// began), and, with CNPs at 0, N015's information.
#[test]
fn retransmissions_in_the_totals_are_h011_and_n015_information() {
    let b = grown(&[("local_ack_timeout_err", 40), ("out_of_sequence", 300)]);
    let r = report(&b);
    let h = of(&r, Code::H011);
    assert_eq!(h.len(), 1, "{:#?}", r.findings);
    assert_eq!(h[0].subject, "soft0 port 1");
    let n = of(&r, Code::N015);
    assert_eq!(n.len(), 1, "{:#?}", r.findings);
    assert_eq!(n[0].severity, Severity::Info);
    insta::assert_snapshot!(soft_summary(&r));
}

/// 6,000 CNPs sent in 10 s against 100,000 packets received: 6 %.
#[test]
fn cnp_growth_on_the_soft_port_since_the_baseline_is_a_storm() {
    let after = grown(&[
        ("np_ecn_marked_roce_packets", 7_000),
        ("np_cnp_sent", 6_000),
        ("port_rcv_packets", 100_000),
        ("port_xmit_packets", 100_000),
    ]);
    let r = report_with(&after, &baseline(10));
    let f = of(&r, Code::N014);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!(f[0].subject, "soft0 port 1");
    assert!(
        f[0].message
            .contains("6.0 % of the 100,000 packets the port received"),
        "{}",
        f[0].message
    );
    assert!(of(&r, Code::N015).is_empty());
    insta::assert_snapshot!(soft_summary(&r));
}

/// Retransmissions grow, no CNP moves: N015 as a warning, and H011's growth.
#[test]
fn retransmission_growth_without_cnps_on_the_soft_port_is_n015() {
    let after = grown(&[
        ("local_ack_timeout_err", 500),
        ("packet_seq_err", 2_000),
        ("port_xmit_packets", 50_000),
    ]);
    let r = report_with(&after, &baseline(600));
    let f = of(&r, Code::N015);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(of(&r, Code::N014).is_empty());
    let h = of(&r, Code::H011);
    assert_eq!(h.len(), 1, "{:#?}", r.findings);
    assert!(
        h[0].message.contains("since the baseline"),
        "{}",
        h[0].message
    );
    insta::assert_snapshot!(soft_summary(&r));
    // Against itself nothing moved: nothing on the soft port.
    let r = report_with(&with_soft(&CLEAN), &baseline(600));
    assert_eq!(soft_summary(&r), "");
}
