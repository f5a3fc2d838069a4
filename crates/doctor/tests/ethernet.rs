//! The Ethernet layer beneath RoCE (RDK-N001 … RDK-N012) on
//! fixtures/roce-mlx5-qos: real outputs of real hosts put together as one
//! correctly configured RoCE host (its SOURCE says which file came from where),
//! and faults made by editing the bundle here, one per test.

mod common;

use common::*;
use rdmakit_doctor::checks::{Config, Status};
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::counters::Baseline;
use rdmakit_doctor::finding::Finding;
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;
use rdmakit_host::source::{Op, Recorder};

const ECN: &str = "/sys/class/net/eth0/ecn";
const TOS: &str = "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos";

fn roce() -> Bundle {
    import("roce-mlx5-qos")
}

fn fixture(rel: &str) -> String {
    let p = rdmakit_testkit::fixtures_dir().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn of(r: &Report, code: Code) -> Vec<&Finding> {
    r.findings.iter().filter(|f| f.code == code).collect()
}

fn status(r: &Report, id: &str) -> Status {
    r.checks.iter().find(|c| c.id == id).unwrap().status.clone()
}

fn n_codes_at_warning(r: &Report) -> Vec<String> {
    r.findings
        .iter()
        .filter(|f| f.code.as_str().starts_with("RDK-N") && f.severity >= Severity::Warning)
        .map(|f| format!("{}: {}", f.code.as_str(), f.message))
        .collect()
}

#[test]
fn the_configured_host_resolves_its_chain_and_stays_clean() {
    let b = roce();
    let facts = collect(&b, &b.header.options.clone());
    let e = &facts.ethernet;
    assert_eq!(e.ports.len(), 1);
    let p = &e.ports[0];
    assert_eq!(p.netdev.as_deref(), Some("eth0"));
    assert_eq!(p.default_tos.value(), 106);
    let l = e.link("eth0").expect("eth0 facts");
    assert!(l.dcb.get().is_some(), "{:?}", l.dcb);
    assert!(l.stats.get().is_some_and(|s| s.len() > 100));
    assert!(l.module.get().is_some(), "{:?}", l.module);
    let r = report(&b);
    assert_eq!(n_codes_at_warning(&r), Vec::<String>::new());
    for id in [
        "roce.lossless",
        "roce.ecn",
        "ethernet.pause",
        "ethernet.optics",
    ] {
        assert_eq!(status(&r, id), Status::Pass, "{id}");
    }
}

#[test]
fn ecn_off_on_the_priority_the_tos_maps_to_is_one_finding_naming_all_three() {
    let mut b = roce();
    set_line(&mut b, &format!("{ECN}/roce_np/enable/3"), "0");
    set_line(&mut b, &format!("{ECN}/roce_rp/enable/3"), "0");
    let r = report(&b);
    let f = of(&r, Code::N002);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    let m = &f[0].message;
    assert!(m.contains("ToS 106") && m.contains("priority 3"), "{m}");
    assert!(
        f[0].evidence
            .iter()
            .any(|e| e.path == format!("{ECN}/roce_np/enable/3") && e.value == "0"),
        "{:#?}",
        f[0].evidence
    );
    assert!(of(&r, Code::N003).is_empty());
    // Priority 7 has NP on and RP off in the real tree: not the RoCE priority,
    // not reported.
    assert_eq!(n_codes_at_warning(&r).len(), 1);
}

#[test]
fn ecn_at_one_end_only_is_named_as_such() {
    let mut b = roce();
    set_line(&mut b, &format!("{ECN}/roce_rp/enable/3"), "0");
    let r = report(&b);
    let f = of(&r, Code::N003);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(f[0]
        .message
        .contains("notification point but not at the reaction point"));
}

#[test]
fn the_default_tos_lands_on_priority_0_which_pfc_does_not_protect() {
    let mut b = roce();
    remove(&mut b, TOS);
    let r = report(&b);
    let f = of(&r, Code::N001);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    let m = &f[0].message;
    assert!(
        m.contains("ToS 0 (DSCP 0)") && m.contains("priority 0"),
        "{m}"
    );
    assert!(m.contains("PFC is enabled only on priority 3"), "{m}");
    assert!(f[0].evidence.iter().any(|e| e.path == TOS));
}

#[test]
fn pfc_on_another_priority_breaks_the_chain() {
    let mut b = roce();
    set_probe(
        &mut b,
        "dcb:eth0",
        &fixture("ethernet/mlnx-qos-pfc-prio4-edit/mlnx_qos.txt"),
    );
    let r = report(&b);
    let f = of(&r, Code::N001);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(f[0].message.contains("priority 3") && f[0].message.contains("only on priority 4"));
}

#[test]
fn trust_pcp_with_untagged_roce_is_a_marking_mismatch() {
    let mut b = roce();
    let qos = fixture("ethernet/mlnx-qos-dscp-trust/mlnx_qos.txt")
        .replace("Priority trust state: dscp", "Priority trust state: pcp");
    set_probe(&mut b, "dcb:eth0", &qos);
    let r = report(&b);
    let f = of(&r, Code::N006);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(f[0].message.contains("untagged"), "{}", f[0].message);
    assert!(of(&r, Code::N001).is_empty());
}

#[test]
fn global_pause_beside_pfc() {
    let mut b = roce();
    set_probe(
        &mut b,
        "ethtool-pause:eth0",
        &fixture("ethernet/ethtool-pause-fec/pause-negotiated.txt"),
    );
    let r = report(&b);
    let f = of(&r, Code::N005);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(f[0].message.contains("RX on, TX on"));
}

/// `name: value` of `ethtool -S` text, with `value` raised by `by`.
fn grow(stats: &str, name: &str, by: u64) -> String {
    let mut found = false;
    let out: Vec<String> = stats
        .lines()
        .map(|l| match l.trim().split_once(": ") {
            Some((n, v)) if n == name => {
                found = true;
                format!("     {n}: {}", v.trim().parse::<u64>().unwrap() + by)
            }
            _ => l.to_string(),
        })
        .collect();
    assert!(found, "{name} not in the statistics");
    out.join("\n") + "\n"
}

#[test]
fn a_baseline_pair_gives_drop_and_pause_rates() {
    let before = roce();
    let mut after = roce();
    let stats = fixture("roce-mlx5-qos/ethtool/eth0/stats.txt");
    let stats = grow(&stats, "rx_out_of_buffer", 43_120);
    let stats = grow(&stats, "tx_global_pause_duration", 2_100_000);
    set_probe(&mut after, "ethtool-stats:eth0", &stats);
    let facts = collect(&before, &before.header.options.clone());
    let cfg = Config {
        baseline: Some(Baseline::from_facts(
            &facts,
            "bundle before.json.gz",
            Some(10),
        )),
        ..Config::default()
    };
    let r = report_with(&after, &cfg);
    let drops = of(&r, Code::N008);
    assert_eq!(drops.len(), 1, "{:#?}", r.findings);
    assert!(
        drops[0]
            .message
            .contains("rx_out_of_buffer +43,120 (4,312/s)"),
        "{}",
        drops[0].message
    );
    assert_eq!(drops[0].severity, Severity::Warning);
    let pause = of(&r, Code::N007);
    assert_eq!(pause.len(), 1, "{:#?}", r.findings);
    assert!(
        pause[0].message.contains("2.1 s of the last 10 s (21 %)"),
        "{}",
        pause[0].message
    );
    assert_eq!(pause[0].severity, Severity::Error);
    // The same pair with no growth: clean.
    let r = report_with(&before, &cfg);
    assert!(of(&r, Code::N007).is_empty() && of(&r, Code::N008).is_empty());
    assert_eq!(status(&r, "roce.congestion"), Status::Pass);
}

#[test]
fn a_module_below_its_own_rx_alarm() {
    let mut b = roce();
    set_probe(
        &mut b,
        "ethtool-module:eth0",
        &fixture("ethernet/sfp-intel-e10gsfpsrx-ice/module.txt"),
    );
    let r = report(&b);
    let f = of(&r, Code::N010);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!(f[0].severity, Severity::Error);
    assert!(
        f[0].message.contains("Rx power") && f[0].message.contains("low alarm"),
        "{}",
        f[0].message
    );
}

/// The bytes of an `ethtool -m … hex on` dump.
fn dump_bytes(text: &str) -> Vec<u8> {
    text.lines()
        .filter_map(|l| {
            l.split_once(':')
                .filter(|(o, _)| o.trim().starts_with("0x"))
        })
        .flat_map(|(_, v)| {
            v.split_whitespace()
                .map(|b| u8::from_str_radix(b, 16).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Bytes as ethtool prints them.
fn dump_text(bytes: &[u8]) -> String {
    let mut s = String::from("Offset\t\tValues\n------\t\t------");
    for (i, row) in bytes.chunks(16).enumerate() {
        s.push_str(&format!("\n0x{:04x}:\t\t", i * 16));
        for b in row {
            s.push_str(&format!("{b:02x} "));
        }
    }
    s + "\n"
}

#[test]
fn one_lane_far_below_its_siblings() {
    // The real QSFP28 (its lasers were off when dumped) with received power
    // written into lower page 00h, bytes 0x22.. (SFF-8636, 0.1 µW units):
    // lanes 1-3 0.8 mW (-0.97 dBm), lane 4 0.16 mW (-7.96 dBm).
    let mut m = dump_bytes(&fixture("ethernet/qsfp28-mellanox-mlxsw/module.txt"));
    for (lane, v) in [8000u16, 8000, 8000, 1600].iter().enumerate() {
        m[0x22 + 2 * lane..0x24 + 2 * lane].copy_from_slice(&v.to_be_bytes());
    }
    let mut b = roce();
    set_probe(&mut b, "ethtool-module:eth0", &dump_text(&m));
    let r = report(&b);
    let f = of(&r, Code::N011);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(
        f[0].message
            .contains("lane 4 receives -7.96 dBm, 7.0 dB below"),
        "{}",
        f[0].message
    );
}

/// The live doctor reads no module EEPROM unless told (`--optics`): the
/// module is never asked for, its alarm is not judged, and the optics checks
/// say how to read them; the same host with optics finds the alarm.
#[test]
fn without_optics_no_module_is_read_and_the_check_says_how() {
    let mut b = roce();
    set_probe(
        &mut b,
        "ethtool-module:eth0",
        &fixture("ethernet/sfp-intel-e10gsfpsrx-ice/module.txt"),
    );
    let mut opts = b.header.options.clone();
    opts.optics = false;
    let asked = Recorder::new(&b);
    let facts = collect(&asked, &opts);
    let probes = asked.keys(Op::Probe);
    assert!(
        probes.iter().any(|k| k == "ethtool-stats:eth0"),
        "{probes:?}"
    );
    assert!(
        !probes.iter().any(|k| k.starts_with("ethtool-module")),
        "{probes:?}"
    );
    assert!(!facts.ethernet.optics);
    let r = Report::build(&facts, &Config::default(), "rdmakit test", "test bundle");
    assert!(of(&r, Code::N010).is_empty(), "{:#?}", r.findings);
    for id in ["ethernet.optics", "ethernet.optics-lanes"] {
        match status(&r, id) {
            Status::NotChecked(why) => {
                assert!(why.contains("--optics") && why.contains("eth0"), "{why}")
            }
            s => panic!("{id}: {s:?}"),
        }
    }
    opts.optics = true;
    let r = Report::build(&collect(&b, &opts), &Config::default(), "t", "t");
    assert_eq!(of(&r, Code::N010).len(), 1, "{:#?}", r.findings);
}

/// `ethtool -S` text with one more counter at its end.
fn with_stat(stats: &str, name: &str, value: u64) -> String {
    format!("{stats}     {name}: {value}\n")
}

/// A link that went down since the baseline: the count, the rate and the
/// counter named; three times is flapping (an error); without a baseline the
/// total is info only; a link whose driver has no such counter is n/a.
#[test]
fn link_down_events_since_the_baseline() {
    let stats = fixture("roce-mlx5-qos/ethtool/eth0/stats.txt");
    let mut before = roce();
    set_probe(
        &mut before,
        "ethtool-stats:eth0",
        &with_stat(&stats, "link_down_events_phy", 2),
    );
    let facts = collect(&before, &before.header.options.clone());
    let cfg = Config {
        baseline: Some(Baseline::from_facts(
            &facts,
            "bundle before.json.gz",
            Some(600),
        )),
        ..Config::default()
    };
    for (now, sev) in [(3, Severity::Warning), (6, Severity::Error)] {
        let mut after = roce();
        set_probe(
            &mut after,
            "ethtool-stats:eth0",
            &with_stat(&stats, "link_down_events_phy", now),
        );
        let r = report_with(&after, &cfg);
        let f = of(&r, Code::N013);
        assert_eq!(f.len(), 1, "{:#?}", r.findings);
        assert_eq!(f[0].severity, sev);
        let times = if now - 2 == 1 {
            "once".to_string()
        } else {
            format!("{} times", now - 2)
        };
        assert!(
            f[0].message
                .contains(&format!("went down {times} since the baseline"))
                && f[0]
                    .message
                    .contains(&format!("link_down_events_phy +{}", now - 2)),
            "{}",
            f[0].message
        );
    }
    // No growth: clean; no baseline: the total, as info.
    assert!(of(&report_with(&before, &cfg), Code::N013).is_empty());
    let r = report(&before);
    let f = of(&r, Code::N013);
    assert_eq!(
        (f.len(), f[0].severity),
        (1, Severity::Info),
        "{:#?}",
        r.findings
    );
    assert!(f[0].message.contains("2 in all"), "{}", f[0].message);
    // The fixture's own driver statistics have no such counter.
    assert!(matches!(
        status(&report(&roce()), "ethernet.link-down"),
        Status::NotApplicable(_)
    ));
}
