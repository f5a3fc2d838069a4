//! The soft NIC's counters are device-wide and outlive the processes that
//! counted them: two `rdmakit perf` processes on soft0 over loopback, then
//! `rdmakit stat --json` (and `metrics`) shows what both counted, summed,
//! after both exited. Each test has its own registry base
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
    let port = free_port().to_string();
    let mut s = rdmakit(base, &["perf", test, "-p", &port, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let c = rdmakit(base, &["perf", test, "127.0.0.1", "-p", &port, "--json"])
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
