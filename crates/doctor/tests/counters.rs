//! Port error counters (RDK-H010) and transport counters (RDK-H011) on real NIC trees:
//! the ConnectX-3 of prometheus/procfs (clean), the same tree with two counters pegged
//! (fixtures/mlx4-saturated-edit: an EDIT, since no public capture of a failing cable
//! exists and no kernel here can produce one), and gpud's H100 tree.

mod common;

use common::*;
use rdmakit_doctor::checks::{Config, Status};
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::counters::Baseline;
use rdmakit_doctor::finding::Finding;
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;

const MLX4: &str = "/sys/class/infiniband/mlx4_0/ports/1";

fn baseline_of(b: &Bundle, age: Option<u64>) -> Baseline {
    let facts = collect(b, &b.header.options.clone());
    Baseline::from_facts(&facts, "bundle before.json.gz", age)
}

fn with_baseline(b: &Bundle, base: &Bundle) -> Report {
    report_with(
        b,
        &Config {
            baseline: Some(baseline_of(base, Some(7500))),
            ..Config::default()
        },
    )
}

fn of(r: &Report, code: Code) -> Vec<&Finding> {
    r.findings.iter().filter(|f| f.code == code).collect()
}

fn status(r: &Report, id: &str) -> Status {
    r.checks.iter().find(|c| c.id == id).unwrap().status.clone()
}

/// Pegged link counters on a real NIC's tree are an error
/// that names them (and says "saturated"); port 2 of the same card, untouched, is quiet.
#[test]
fn saturated_link_counters_on_the_connectx3_tree_edit_are_an_error() {
    let r = report(&import("mlx4-saturated-edit"));
    let f = of(&r, Code::H010);
    assert_eq!(f.len(), 1, "{}", summary(&r));
    let f = f[0];
    assert_eq!(f.subject, "mlx4_0 port 1");
    assert_eq!(f.severity, Severity::Error);
    assert!(
        f.message
            .contains("symbol_error 65535 (saturated: the 16-bit counter stopped at its maximum)")
            && f.message
                .contains("link_downed 255 (saturated: the 8-bit counter stopped at its maximum)"),
        "{}",
        f.message
    );
    let ev: Vec<(&str, &str)> = f
        .evidence
        .iter()
        .map(|e| (e.path.as_str(), e.value.as_str()))
        .collect();
    assert_eq!(
        ev,
        [
            (
                "/sys/class/infiniband/mlx4_0/ports/1/counters/symbol_error",
                "65535"
            ),
            (
                "/sys/class/infiniband/mlx4_0/ports/1/counters/link_downed",
                "255"
            ),
        ]
    );
    assert!(f.remedy.contains("cable"), "{}", f.remedy);
    assert!(r.fails(Severity::Error));
}

/// The clean capture of the same NIC (and the other real cards beside it): the check
/// runs and finds nothing, so `--fail-on warning` passes.
#[test]
fn clean_connectx3_capture_has_no_counter_finding() {
    let r = report(&import("real-nics-procfs"));
    assert!(of(&r, Code::H010).is_empty(), "{}", summary(&r));
    assert_eq!(status(&r, "port.errors"), Status::Pass);
    assert!(!r.fails(Severity::Warning), "{}", summary(&r));
}

#[test]
fn thresholds_are_ibqueryerrors_and_exclusive() {
    let at = |v: &str, counter: &str| {
        let mut b = import("real-nics-procfs");
        set(&mut b, &format!("{MLX4}/counters/{counter}"), v);
        report(&b)
    };
    for (counter, quiet, loud) in [
        ("symbol_error", "10\n", "11\n"),
        ("port_xmit_discards", "100\n", "101\n"),
        ("VL15_dropped", "100\n", "101\n"),
    ] {
        let r = at(quiet, counter);
        assert!(of(&r, Code::H010).is_empty(), "{counter}\n{}", summary(&r));
        let r = at(loud, counter);
        let f = of(&r, Code::H010);
        assert_eq!(f.len(), 1, "{counter}\n{}", summary(&r));
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(f[0].message.contains(counter), "{}", f[0].message);
    }
    // A saturated 4-bit counter is 15 events: a warning, not an error.
    let r = at("15\n", "local_link_integrity_errors");
    let f = of(&r, Code::H010);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        f[0].message.contains("saturated: the 4-bit"),
        "{}",
        f[0].message
    );
}

/// "N/A (no PMA)" and absent counters are not errors, and not unrecognized values.
#[test]
fn counters_without_a_pma_are_not_errors() {
    let mut b = import("mlx4-saturated-edit");
    for port in [1, 2] {
        for c in rdmakit_doctor::counters::ERROR_COUNTERS {
            set(
                &mut b,
                &format!(
                    "/sys/class/infiniband/mlx4_0/ports/{port}/counters/{}",
                    c.name
                ),
                "N/A (no PMA)\n",
            );
        }
    }
    let r = report(&b);
    assert!(of(&r, Code::H010).is_empty(), "{}", summary(&r));
    assert!(of(&r, Code::H009).is_empty(), "{}", summary(&r));
    assert!(
        matches!(status(&r, "port.errors"), Status::NotApplicable(ref w) if w.contains("N/A")),
        "{:?}",
        status(&r, "port.errors")
    );
    let mut b = import("mlx4-saturated-edit");
    remove(&mut b, &format!("{MLX4}/counters/symbol_error"));
    remove(&mut b, &format!("{MLX4}/counters/link_downed"));
    assert!(of(&report(&b), Code::H010).is_empty());
}

/// With a baseline the operator sees growth: the clean capture then, the pegged
/// counters now.
#[test]
fn baseline_turns_totals_into_growth() {
    let clean = import("real-nics-procfs");
    let r = with_baseline(&import("mlx4-saturated-edit"), &clean);
    let f = of(&r, Code::H010);
    assert_eq!(f.len(), 1, "{}", summary(&r));
    assert_eq!(f[0].severity, Severity::Error);
    assert!(
        f[0].message.starts_with(
            "error counters since the baseline (bundle before.json.gz, 2 h 5 min earlier): \
             symbol_error 65535 (saturated since the baseline's 0: the 16-bit counter stopped \
             at its maximum, at least +65535)"
        ),
        "{}",
        f[0].message
    );
    assert!(f[0]
        .evidence
        .iter()
        .any(|e| e.path == format!("baseline {MLX4}/counters/symbol_error") && e.value == "0"));

    // Large totals that did not grow (much) since the baseline are quiet.
    let mut then = import("real-nics-procfs");
    set(
        &mut then,
        &format!("{MLX4}/counters/symbol_error"),
        "5000\n",
    );
    let mut now = import("real-nics-procfs");
    set(&mut now, &format!("{MLX4}/counters/symbol_error"), "5009\n");
    assert!(
        of(&report(&now), Code::H010).len() == 1,
        "without a baseline 5009 is over 10"
    );
    let r = with_baseline(&now, &then);
    assert!(of(&r, Code::H010).is_empty(), "{}", summary(&r));
    set(&mut now, &format!("{MLX4}/counters/symbol_error"), "5500\n");
    let r = with_baseline(&now, &then);
    assert!(
        of(&r, Code::H010)[0]
            .message
            .contains("symbol_error +500 (> 10)"),
        "{}",
        summary(&r)
    );
    // Lower than the baseline: cleared in between; the value counts since then.
    set(&mut now, &format!("{MLX4}/counters/symbol_error"), "50\n");
    let r = with_baseline(&now, &then);
    assert!(
        of(&r, Code::H010)[0]
            .message
            .contains("symbol_error 50 since it was cleared after the baseline (> 10)"),
        "{}",
        summary(&r)
    );
}

#[test]
fn saturated_then_and_now_is_growth_unknown() {
    let b = import("mlx4-saturated-edit");
    let r = with_baseline(&b, &b);
    let f = of(&r, Code::H010);
    assert_eq!(f.len(), 1, "{}", summary(&r));
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        f[0].message.contains(
            "symbol_error 65535 (saturated at the baseline and now: growth \
                               unknown until it is cleared)"
        ),
        "{}",
        f[0].message
    );
}

/// A baseline of another device of the same name is not compared with.
#[test]
fn baseline_of_another_device_is_not_used() {
    let mut then = import("real-nics-procfs");
    set(
        &mut then,
        "/sys/class/infiniband/mlx5_0/node_guid",
        "0a7f:bc12:45ef:0000\n",
    );
    set(
        &mut then,
        "/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors",
        "0\n",
    );
    let mut now = import("real-nics-procfs");
    set(
        &mut now,
        "/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors",
        "12\n",
    );
    let r = with_baseline(&now, &then);
    let f = of(&r, Code::H010);
    assert_eq!(f.len(), 1, "{}", summary(&r));
    assert!(
        f[0].message.contains("another device, absolute values")
            && f[0].message.contains("port_rcv_errors 12 (> 10)"),
        "{}",
        f[0].message
    );
}

/// Transport counters: totals are info (the real mlx5_0's 131 ACK timeouts since the
/// driver loaded), growth since a baseline is a warning, no growth is silence.
#[test]
fn transport_counters_info_then_growth() {
    let now = import("real-nics-procfs");
    let r = report(&now);
    let f = of(&r, Code::H011);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, Severity::Info);
    assert!(
        f[0].message.contains("local_ack_timeout_err 131"),
        "{}",
        f[0].message
    );

    let r = with_baseline(&now, &now);
    assert!(of(&r, Code::H011).is_empty(), "{}", summary(&r));

    let mut then = import("real-nics-procfs");
    set(
        &mut then,
        "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err",
        "100\n",
    );
    let r = with_baseline(&now, &then);
    let f = of(&r, Code::H011);
    assert_eq!(f.len(), 1, "{}", summary(&r));
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        f[0].message.contains("local_ack_timeout_err +31 (> 10)"),
        "{}",
        f[0].message
    );
    // Exactly at the threshold: quiet.
    set(
        &mut then,
        "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err",
        "121\n",
    );
    assert!(of(&with_baseline(&now, &then), Code::H011).is_empty());
}

/// gpud's H100 tree: the same readings on eight ports plus mlx5_1's edited
/// link_downed 255. Every port gets its finding; mlx5_1's is an error.
#[test]
fn gpud_h100_tree_counters() {
    let r = report(&import("gpud-h100"));
    let f = of(&r, Code::H010);
    assert_eq!(f.len(), 9, "{}", summary(&r));
    for f in &f {
        assert!(
            f.message
                .contains("excessive_buffer_overrun_errors 15 (saturated: the 4-bit")
                && f.message.contains("port_rcv_errors 14 (> 10)"),
            "{}",
            f.message
        );
        let want = if f.subject == "mlx5_1 port 1" {
            Severity::Error
        } else {
            Severity::Warning
        };
        assert_eq!(f.severity, want, "{}", f.subject);
    }
    // Its RoCE bond's GID table was not captured: not checked, never "no GID".
    assert!(of(&r, Code::H005).is_empty(), "{}", summary(&r));
    assert!(matches!(status(&r, "roce.gid"), Status::NotChecked(_)));
}

/// rxe has no PMA counters: n/a, not a failure; its transport counters are read.
#[test]
fn rxe_has_no_pma_counters() {
    let r = report(&import("healthy"));
    assert!(matches!(
        status(&r, "port.errors"),
        Status::NotApplicable(_)
    ));
    assert_eq!(status(&r, "port.transport"), Status::Pass);
}
