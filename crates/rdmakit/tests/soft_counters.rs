//! The soft NIC's counters are device-wide and outlive the processes that
//! counted them: two `rdmakit perf` processes on soft0 over loopback, then
//! `rdmakit stat --json` (and `metrics`) shows what both counted, summed,
//! after both exited; `collect` records them and the doctor judges them
//! from the bundle. Each test has its own registry base
//! (`RDMAKIT_SOFT_REGISTRY_DIR`), so no real user's counters mix in.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rdmakit_soft::registry::counters::{NAMES, PORT_COUNTERS};

const BIN: &str = env!("CARGO_BIN_EXE_rdmakit");

fn rdmakit(base: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("RDMAKIT_SOFT_REGISTRY_DIR", base)
        .env("RDMAKIT_SOFT_NAME", "soft0")
        .env_remove("RDMAKIT_PROVIDER");
    c
}

fn json(o: &Output, who: &str) -> serde_json::Value {
    assert!(
        o.status.success(),
        "{who} failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{who}: not JSON ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}

/// Runs a perf pair on soft0; returns the server's and the client's JSON.
fn perf_pair(base: &Path, test: &str) -> [serde_json::Value; 2] {
    perf_pair_with(base, test, None)
}

/// [`perf_pair`] with both devices applying the fault plan `faults`.
fn perf_pair_with(base: &Path, test: &str, faults: Option<&str>) -> [serde_json::Value; 2] {
    let port = free_port().to_string();
    let with = |mut c: Command| {
        if let Some(f) = faults {
            c.env("RDMAKIT_SOFT_FAULTS", f);
        }
        c
    };
    let mut s = with(rdmakit(base, &["perf", test, "-p", &port, "--json"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let c = with(rdmakit(
        base,
        &["perf", test, "127.0.0.1", "-p", &port, "--json"],
    ))
    .output()
    .unwrap();
    let t = Instant::now();
    while s.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = s.kill();
    let so = s.wait_with_output().unwrap();
    [json(&so, "perf server"), json(&c, "perf client")]
}

fn soft0_row(stat: &serde_json::Value) -> &serde_json::Value {
    stat.as_array()
        .and_then(|rows| rows.iter().find(|r| r["ifname"] == "soft0"))
        .unwrap_or_else(|| panic!("no soft0 row in {stat}"))
}

#[test]
fn stat_shows_two_exited_perf_processes_counters_summed() {
    let base = tempfile::tempdir().unwrap();
    let runs = perf_pair(base.path(), "send-bw");
    // A closing device folds its counters only if the user's lock is free
    // at that moment (it never waits): when server and client exit
    // together, one may be left to the next open's sweep. Open the device
    // once, as any later soft NIC user would.
    let o = rdmakit(base.path(), &["--provider", "soft", "devinfo"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stat = json(
        &rdmakit(base.path(), &["stat", "--json"]).output().unwrap(),
        "stat",
    );
    let row = soft0_row(&stat);
    assert_eq!(row["port"], 1, "{row}");
    let got = |n: &str| row[n].as_u64().unwrap_or_else(|| panic!("no {n} in {row}"));
    // The transport counters are what the two runs reported, summed.
    for n in NAMES.iter().filter(|n| !PORT_COUNTERS.contains(n)) {
        let sum: u64 = runs
            .iter()
            .map(|r| r["device_counters"][n].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(got(n), sum, "{n}: {row}");
    }
    // The packets each QP counted, plus what the devices sent or took after
    // the runs read them (held ACKs flushed at close): a few at most.
    for (n, q) in [
        ("port_xmit_packets", "tx_packets"),
        ("port_rcv_packets", "rx_packets"),
    ] {
        let qp: u64 = runs
            .iter()
            .map(|r| r["qp_counters"][q].as_u64().unwrap_or(0))
            .sum();
        assert!(qp > 0, "{runs:?}");
        assert!(
            got(n) >= qp && got(n) <= qp + 16,
            "{n} {} vs QPs' {qp}",
            got(n)
        );
    }
    // Both processes are gone: everything is folded into the user's file.
    let users = row["users"].as_array().unwrap();
    assert_eq!(users.len(), 1, "{row}");
    assert!(users[0]["contexts"].as_array().unwrap().is_empty(), "{row}");
    assert_eq!(users[0]["folded"], users[0]["counters"]);
    // A third run adds to them: the counters never go back.
    let before = got("port_xmit_packets");
    perf_pair(base.path(), "send-bw");
    let stat = json(
        &rdmakit(base.path(), &["stat", "--json"]).output().unwrap(),
        "stat",
    );
    assert!(soft0_row(&stat)["port_xmit_packets"].as_u64().unwrap() > before);
    // The text form reads like a kernel port's row.
    let o = rdmakit(base.path(), &["stat", "soft0"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("link soft0/1 port_xmit_packets "),
        "{text}"
    );
    // And metrics exports them under a real device's families.
    let o = rdmakit(base.path(), &["metrics"]).output().unwrap();
    let m = String::from_utf8_lossy(&o.stdout);
    assert!(
        m.lines().any(|l| l.starts_with(
            "node_infiniband_port_packets_transmitted_total{device=\"soft0\",port=\"1\"}"
        )),
        "{m}"
    );
    assert!(
        m.contains("rdmakit_infiniband_hw_counters_total{counter=\"np_cnp_sent\",device=\"soft0\",port=\"1\"}")
            || m.contains("rdmakit_infiniband_hw_counters_total{device=\"soft0\",port=\"1\",counter=\"np_cnp_sent\"}"),
        "{m}"
    );
}

/// The doctor's report of `args` (it exits 1 when it finds a warning).
fn doctor(base: &Path, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["doctor", "--no-probe", "--json"];
    a.extend_from_slice(args);
    let o = rdmakit(base, &a).output().unwrap();
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "doctor {args:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The soft port's findings of `code`.
fn soft_findings<'a>(r: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code && f["subject"] == "soft0 port 1")
        .collect()
}

/// A recorded value of the soft port in a finding's evidence.
fn evidence(f: &serde_json::Value, name: &str) -> Option<u64> {
    f["evidence"].as_array()?.iter().find_map(|e| {
        let p = e["path"].as_str()?;
        (p.starts_with("soft_counters:soft0/ports/1/") && p.ends_with(&format!("/{name}")))
            .then(|| e["value"].as_str()?.parse().ok())?
    })
}

fn collect(base: &Path, out: &Path) {
    let o = rdmakit(base, &["collect", "-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A clean run, then one losing every tenth SEND (3,000 at most: go-back-N
/// must get through; about 230 PSN gaps), then one whose received packets
/// are half marked CE (about 5 % of them answered by a CNP): each collected into a bundle. The
/// doctor judges the soft port from the bundles alone, its counters being
/// `stat`'s: loss without CNPs since the first (RDK-N015), a CNP storm
/// since the second (RDK-N014).
#[test]
fn collected_soft_counters_are_judged_from_bundles_and_baselines() {
    let base = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bundle = |n: &str| dir.path().join(n);
    perf_pair(base.path(), "send-bw");
    collect(base.path(), &bundle("clean.json.gz"));
    // Bundle times are in seconds: the baselines must have an age.
    std::thread::sleep(Duration::from_millis(1100));
    perf_pair_with(
        base.path(),
        "send-bw",
        Some("drop every=10 count=3000 opcode=send"),
    );
    collect(base.path(), &bundle("lossy.json.gz"));
    let stat = json(
        &rdmakit(base.path(), &["stat", "--json"]).output().unwrap(),
        "stat",
    );
    let row = soft0_row(&stat).clone();
    let lossy = bundle("lossy.json.gz");
    let lossy = lossy.to_str().unwrap();

    // From the bundle alone: the totals, the numbers stat reads now.
    let r = doctor(base.path(), &["--from", lossy]);
    let h = soft_findings(&r, "RDK-H011");
    assert_eq!(h.len(), 1, "{r}");
    for n in ["out_of_sequence", "packet_seq_err", "local_ack_timeout_err"] {
        if let Some(v) = evidence(h[0], n) {
            assert_eq!(Some(v), row[n].as_u64(), "{n}: {row}");
        }
    }
    // Against the clean run's bundle: growth, and no CNP moved.
    let clean = bundle("clean.json.gz");
    let r = doctor(
        base.path(),
        &["--from", lossy, "--baseline", clean.to_str().unwrap()],
    );
    let n = soft_findings(&r, "RDK-N015");
    assert_eq!(n.len(), 1, "{r}");
    assert_eq!(n[0]["severity"], "warning", "{r}");
    assert!(soft_findings(&r, "RDK-N014").is_empty(), "{r}");

    std::thread::sleep(Duration::from_millis(1100));
    perf_pair_with(base.path(), "send-bw", Some("ce p=0.5 opcode=send"));
    let marked = bundle("marked.json.gz");
    collect(base.path(), &marked);
    let r = doctor(
        base.path(),
        &["--from", marked.to_str().unwrap(), "--baseline", lossy],
    );
    // Both ends are this host: CNPs sent and CNPs handled, each a storm.
    let s = soft_findings(&r, "RDK-N014");
    assert_eq!(s.len(), 2, "{r}");
    assert!(evidence(s[0], "np_cnp_sent").is_some_and(|v| v > 0), "{r}");
    assert!(
        evidence(s[1], "rp_cnp_handled").is_some_and(|v| v > 0),
        "{r}"
    );
    assert!(soft_findings(&r, "RDK-N015").is_empty(), "{r}");
}
