//! RoCE congestion control by its counters: a CNP storm (RDK-N014) and loss
//! without congestion control (RDK-N015), on fixtures/roce-mlx5-qos (the
//! real mlx5_0 tree of a ConnectX-4 Lx, its congestion counters 0 as the
//! fixture's SOURCE says), with the counters moved between a baseline and
//! now by editing a copy of the bundle; and never on the healthy captures.

mod common;

use common::*;
use rdmakit_doctor::checks::{Config, Status};
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::counters::Baseline;
use rdmakit_doctor::finding::Finding;
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;

const HW: &str = "/sys/class/infiniband/mlx5_0/ports/1/hw_counters";
const PMA: &str = "/sys/class/infiniband/mlx5_0/ports/1/counters";

fn roce() -> Bundle {
    import("roce-mlx5-qos")
}

fn of(r: &Report, code: Code) -> Vec<&Finding> {
    r.findings.iter().filter(|f| f.code == code).collect()
}

fn status(r: &Report, id: &str) -> Status {
    r.checks.iter().find(|c| c.id == id).unwrap().status.clone()
}

/// The capture's value of a counter file.
fn now(b: &Bundle, path: &str) -> u64 {
    text(b, path).trim().parse().unwrap()
}

/// The capture with each `(file, by)` counter raised by `by`.
fn grown(moves: &[(&str, u64)]) -> Bundle {
    let mut b = roce();
    for (path, by) in moves {
        let v = now(&b, path) + by;
        set_line(&mut b, path, &v.to_string());
    }
    b
}

/// The unedited capture as the baseline, `age` seconds earlier.
fn baseline(age: Option<u64>) -> Config {
    let before = roce();
    let facts = collect(&before, &before.header.options.clone());
    Config {
        baseline: Some(Baseline::from_facts(&facts, "bundle before.json.gz", age)),
        ..Config::default()
    }
}

/// Only the congestion findings (N009, N014, N015), as the snapshot shows them.
fn congestion_summary(r: &Report) -> String {
    let mut s = String::new();
    for id in ["roce.congestion", "roce.cnp-storm", "roce.loss-without-ecn"] {
        let c = r.checks.iter().find(|c| c.id == id).unwrap();
        s += &format!("check {id} {}\n", c.status.word());
    }
    for f in r
        .findings
        .iter()
        .filter(|f| [Code::N009, Code::N014, Code::N015].contains(&f.code))
    {
        s += &finding_text(f);
        s += &format!("    remedy: {}\n", f.remedy);
        for n in &f.next {
            s += &format!("    next: {n}\n");
        }
    }
    s
}

/// 60,000 CNPs sent in 10 s against 1,000,000 packets received: 6 %.
#[test]
fn cnps_sent_on_six_percent_of_received_packets_are_a_storm() {
    let after = grown(&[
        (&format!("{HW}/np_ecn_marked_roce_packets"), 75_000),
        (&format!("{HW}/np_cnp_sent"), 60_000),
        (&format!("{PMA}/port_rcv_packets"), 1_000_000),
        // The reverse direction: 0.15 % of 2,000,000 sent, under the threshold.
        (&format!("{HW}/rp_cnp_handled"), 3_000),
        (&format!("{PMA}/port_xmit_packets"), 2_000_000),
    ]);
    let r = report_with(&after, &baseline(Some(10)));
    let f = of(&r, Code::N014);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!(f[0].severity, Severity::Warning);
    let m = &f[0].message;
    assert!(
        m.contains("CNPs sent at 6,000/s")
            && m.contains("np_cnp_sent +60,000 in 10 s")
            && m.contains("6.0 % of the 1,000,000 packets the port received"),
        "{m}"
    );
    assert!(of(&r, Code::N015).is_empty());
    // N009 still lists the rates, as information.
    assert_eq!(of(&r, Code::N009)[0].severity, Severity::Info);
    insta::assert_snapshot!(congestion_summary(&r));
    // The threshold is the user's: at 10 % the same pair is no storm.
    let cfg = Config {
        cnp_storm_pct: 10.0,
        ..baseline(Some(10))
    };
    assert!(of(&report_with(&after, &cfg), Code::N014).is_empty());
}

/// Packet counters that did not move: the share is taken of the 25 Gb/s
/// line rate in 4096-byte packets (762,939/s; 1 % = 7,629 CNPs/s).
#[test]
fn without_moving_packet_counters_the_line_rate_is_the_basis() {
    let cfg = baseline(Some(10));
    let storm = grown(&[(&format!("{HW}/rp_cnp_handled"), 100_000)]);
    let r = report_with(&storm, &cfg);
    let f = of(&r, Code::N014);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    let m = &f[0].message;
    assert!(
        m.contains("CNPs handled (senders slowed) at 10,000/s")
            && m.contains("1.3 % of its 25 Gb/s line rate in 4096-byte packets (762,939/s"),
        "{m}"
    );
    let calm = grown(&[(&format!("{HW}/rp_cnp_handled"), 70_000)]);
    let r = report_with(&calm, &cfg);
    assert!(of(&r, Code::N014).is_empty(), "{:#?}", r.findings);
    assert_eq!(status(&r, "roce.cnp-storm"), Status::Pass);
}

#[test]
fn a_storm_needs_a_baseline_of_known_age() {
    let after = grown(&[(&format!("{HW}/np_cnp_sent"), 1_000_000)]);
    for cfg in [Config::default(), baseline(None)] {
        let r = report_with(&after, &cfg);
        assert!(of(&r, Code::N014).is_empty());
        assert!(
            matches!(status(&r, "roce.cnp-storm"), Status::NotChecked(ref w) if w.contains("baseline")),
            "{:?}",
            status(&r, "roce.cnp-storm")
        );
    }
}

/// ACK timeouts and out-of-sequence packets grow, no CNP moves: a warning
/// naming both, with the CNP counters' evidence.
#[test]
fn retransmissions_without_cnps_since_the_baseline() {
    let after = grown(&[
        (&format!("{HW}/local_ack_timeout_err"), 500),
        (&format!("{HW}/out_of_sequence"), 2_000),
        // Under its threshold of 100: not named.
        (&format!("{HW}/duplicate_request"), 40),
    ]);
    let r = report_with(&after, &baseline(Some(600)));
    let f = of(&r, Code::N015);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!(f[0].severity, Severity::Warning);
    let m = &f[0].message;
    assert!(
        m.contains("out_of_sequence +2,000, local_ack_timeout_err +500, while np_cnp_sent and rp_cnp_handled did not move"),
        "{m}"
    );
    assert!(!m.contains("duplicate_request"), "{m}");
    assert!(f[0]
        .evidence
        .iter()
        .any(|e| e.path.ends_with("hw_counters/np_cnp_sent") && e.value == "0"));
    assert!(of(&r, Code::N014).is_empty());
    insta::assert_snapshot!(congestion_summary(&r));
}

/// The loop ran (CNPs sent), or it is broken in a way RDK-N009 names
/// (ignored CNPs; marks without CNPs): no RDK-N015, never twice.
#[test]
fn loss_with_cnps_or_with_a_broken_loop_n009_names_is_not_n015() {
    let loss = [
        (format!("{HW}/local_ack_timeout_err"), 500u64),
        (format!("{HW}/out_of_sequence"), 2_000),
    ];
    let cfg = baseline(Some(600));
    for (extra, n009) in [
        ("np_cnp_sent", Severity::Info),
        ("rp_cnp_ignored", Severity::Warning),
        ("np_ecn_marked_roce_packets", Severity::Warning),
    ] {
        let mut moves: Vec<(&str, u64)> = loss.iter().map(|(p, v)| (p.as_str(), *v)).collect();
        let p = format!("{HW}/{extra}");
        moves.push((&p, 50));
        let r = report_with(&grown(&moves), &cfg);
        assert!(of(&r, Code::N015).is_empty(), "{extra}: {:#?}", r.findings);
        let f = of(&r, Code::N009);
        assert_eq!(
            (f.len(), f[0].severity),
            (1, n009),
            "{extra}: {:#?}",
            r.findings
        );
    }
}

/// Without a baseline: the totals since the driver loaded. The capture has
/// 131 ACK timeouts and CNP counters at 0: the loop never ran, information.
/// One CNP ever sent and the rule has nothing to say.
#[test]
fn without_a_baseline_totals_with_cnps_never_sent_are_information() {
    let r = report(&roce());
    let f = of(&r, Code::N015);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!(f[0].severity, Severity::Info);
    assert!(
        f[0].message.contains(
            "since the driver loaded: local_ack_timeout_err 131, while np_cnp_sent and \
             rp_cnp_handled are 0: the congestion loop never ran"
        ),
        "{}",
        f[0].message
    );
    let mut b = roce();
    set_line(&mut b, &format!("{HW}/np_cnp_sent"), "5");
    assert!(of(&report(&b), Code::N015).is_empty());
}

/// A garbage CNP counter is RDK-H009's: these rules do not judge the port
/// and say why, nothing panics.
#[test]
fn a_garbage_cnp_counter_is_not_judged() {
    let mut b = roce();
    set_line(&mut b, &format!("{HW}/np_cnp_sent"), "0x-garbage");
    let r = report_with(&b, &baseline(Some(10)));
    assert!(of(&r, Code::N014).is_empty() && of(&r, Code::N015).is_empty());
    assert!(matches!(
        status(&r, "roce.loss-without-ecn"),
        Status::NotChecked(_)
    ));
    assert!(!of(&r, Code::H009).is_empty(), "{:#?}", r.findings);
}

/// Every real capture, alone and against itself as its own baseline (no
/// counter moved): neither rule fires at warning; against itself, not at
/// all. The rxe captures have no CNP counters: not checked.
#[test]
fn healthy_captures_raise_neither() {
    for (name, b) in every_capture() {
        let r = report(&b);
        for c in [Code::N014, Code::N015] {
            assert!(
                of(&r, c).iter().all(|f| f.severity < Severity::Warning),
                "{name}: {:#?}",
                of(&r, c)
            );
        }
        let facts = collect(&b, &b.header.options.clone());
        let cfg = Config {
            baseline: Some(Baseline::from_facts(&facts, "itself", Some(600))),
            ..Config::default()
        };
        let r = report_with(&b, &cfg);
        assert!(
            of(&r, Code::N014).is_empty() && of(&r, Code::N015).is_empty(),
            "{name}: {:#?}",
            r.findings
        );
    }
}
