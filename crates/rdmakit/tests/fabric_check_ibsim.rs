//! `rdmakit fabric check` on a simulated fabric: ibsim with unmodified
//! opensm on the generated fat tree (2 spines, 4 leaves, 16 hosts), rdmakit
//! run under the umad2sim preload (`rdmakit_testkit::ibsim`), faults injected
//! with ibsim's console and by stopping opensm.
//!
//! Needs ibsim-utils, libumad2sim0, opensm and infiniband-diags; a missing
//! one fails the test naming the packages.

mod ibsim_common;

use ibsim_common::{rdmakit, rdmakit_ok, text, tree};
use rdmakit_testkit::ibsim::Fabric;
use serde_json::Value;

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}\n{out}"))
}

/// (code, subject) of each finding.
fn found(v: &Value) -> Vec<(String, String)> {
    v["findings"]
        .as_array()
        .expect("findings[]")
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap_or("").to_string(),
                f["subject"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn check_judges_a_live_fabric_since_its_saved_counters_and_against_its_cabling() {
    let mut fab = Fabric::start(&tree());
    let dir = tempfile::tempdir().unwrap();
    let net = dir.path().join("expected.net");
    std::fs::write(&net, tree()).unwrap();
    let before = dir.path().join("before.json");
    let (net_s, before_s) = (net.to_str().unwrap(), before.to_str().unwrap());

    let out = rdmakit_ok(
        &fab,
        &[
            "fabric",
            "check",
            "--expected",
            net_s,
            "--save",
            before_s,
            "--ca",
            "ibsim0",
            "--port",
            "1",
        ],
        0,
    );
    assert!(
        out.contains("22 nodes, 24 links, counters of 48 ports"),
        "{out}"
    );
    assert!(out.contains("No findings."), "{out}");
    let saved = json(&std::fs::read_to_string(&before).unwrap());
    assert_eq!(saved["schema"], "rdmakit.fabric.counters/v1");
    assert!(
        saved["taken_at"].as_f64().is_some_and(|t| t > 1.7e9),
        "{saved}"
    );

    for field in ["SymbolErrorCounter=100", "LinkDownedCounter=3"] {
        let reply = fab.console(&format!("PerformanceSet \"leaf1\"[3] PortCounters.{field}"));
        assert!(reply.contains("has been set"), "{reply}");
    }

    // Totals: 100 symbol errors (> 10), a warning; 3 link drops are not
    // above 10. The default --fail-on error lets a warning pass.
    let v = json(&rdmakit_ok(&fab, &["fabric", "check", "--json"], 0));
    assert_eq!(v["schema"], "rdmakit.fabric.check/v1");
    assert_eq!(
        found(&v),
        [("RDK-F005".to_string(), "leaf1 port 3".to_string())]
    );
    assert_eq!(v["findings"][0]["layer"], "fabric");
    assert_eq!(v["sm"]["answers"][0]["reply"]["Info"]["state"], "Master");
    // Every CA port and every switch's port 0 names the SM at LID 1.
    let lids = v["sm"]["port_sm_lids"].as_array().expect("port_sm_lids[]");
    assert_eq!(lids.len(), 22, "{lids:?}");
    assert!(lids.iter().all(|l| l[1] == 1), "{lids:?}");
    rdmakit_ok(&fab, &["fabric", "check", "--fail-on", "warning"], 1);
    let v = json(&rdmakit_ok(
        &fab,
        &["fabric", "check", "--json", "--severity", "RDK-F005=error"],
        1,
    ));
    assert_eq!(v["findings"][0]["severity"], "error");
    let limits = dir.path().join("error_thresholds");
    std::fs::write(&limits, "# site limits\nSymbolErrorCounter=1000\n").unwrap();
    let out = rdmakit_ok(
        &fab,
        &[
            "fabric",
            "check",
            "--thresholds",
            limits.to_str().unwrap(),
            "--fail-on",
            "info",
        ],
        0,
    );
    assert!(out.contains("No findings."), "{out}");
    let o = rdmakit(&fab, &["fabric", "check", "--severity", "RDK-K003=error"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("is not a fabric code"),
        "{}",
        text(&o.stderr)
    );

    // Since the saved counters: the link went down three times, an error.
    let v = json(&rdmakit_ok(
        &fab,
        &[
            "fabric",
            "check",
            "--json",
            "--baseline",
            before_s,
            "--expected",
            net_s,
        ],
        1,
    ));
    let want = [
        ("RDK-F004".to_string(), "leaf1 port 3".to_string()),
        ("RDK-F005".to_string(), "leaf1 port 3".to_string()),
    ];
    assert_eq!(found(&v), want);
    assert_eq!(v["findings"][0]["severity"], "error");
    let msg = v["findings"][1]["message"].as_str().unwrap();
    assert!(msg.contains("SymbolErrorCounter +100"), "{msg}");
    assert!(msg.contains("/s"), "{msg}");

    // The human report: every evidence line and next command.
    let out = rdmakit_ok(
        &fab,
        &[
            "fabric",
            "check",
            "--verbose",
            "--baseline",
            before_s,
            "--fail-on",
            "never",
        ],
        0,
    );
    for part in [
        "ERROR RDK-F004 [fabric] leaf1 port 3",
        "WARN  RDK-F005 [fabric] leaf1 port 3",
        "leaf1 (0x0000000000200000) port 3 PortCounters.SymbolErrorCounter",
        "perfquery -x 2 3",
        "1 error(s), 1 warning(s), 0 info",
    ] {
        assert!(out.contains(part), "{part}:\n{out}");
    }
}

#[test]
fn check_without_a_subnet_manager_finds_no_master() {
    let mut fab = Fabric::start(&tree());
    fab.stop_sm();
    let v = json(&rdmakit_ok(&fab, &["fabric", "check", "--json"], 1));
    assert_eq!(
        found(&v),
        [("RDK-F008".to_string(), "subnet manager".to_string())]
    );
}

#[test]
fn check_refuses_unreadable_files_before_sending_a_mad() {
    let fab = Fabric::start(&tree());
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"schema\": \"something/v9\"}").unwrap();
    let o = rdmakit(
        &fab,
        &["fabric", "check", "--baseline", bad.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--baseline"),
        "{}",
        text(&o.stderr)
    );
    let o = rdmakit(
        &fab,
        &["fabric", "check", "--expected", "/nonexistent/cables"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--expected /nonexistent/cables"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn check_finds_a_cable_enabled_at_1x_and_a_swapped_pair() {
    // host-03's cable with LinkWidthEnabled 1X (w=1) at both ends; host-01
    // and host-02 exchange their leaf1 ports. The expected cabling is the
    // generated tree.
    let net = tree()
        .replace(
            "[3]\t\"host-03 HCA-1\"[1]\tw=2",
            "[3]\t\"host-03 HCA-1\"[1]\tw=1",
        )
        .replace("[1]\t\"leaf1\"[3]\tw=2", "[1]\t\"leaf1\"[3]\tw=1")
        .replace("[1]\t\"host-01 HCA-1\"[1]", "[1]\t\"host-0X HCA-1\"[1]")
        .replace("[2]\t\"host-02 HCA-1\"[1]", "[2]\t\"host-01 HCA-1\"[1]")
        .replace("[1]\t\"host-0X HCA-1\"[1]", "[1]\t\"host-02 HCA-1\"[1]")
        .replace(
            "\"host-01 HCA-1\"\n[1]\t\"leaf1\"[1]",
            "\"host-01 HCA-1\"\n[1]\t\"leaf1\"[2]",
        )
        .replace(
            "\"host-02 HCA-1\"\n[1]\t\"leaf1\"[2]",
            "\"host-02 HCA-1\"\n[1]\t\"leaf1\"[1]",
        );
    assert_eq!(net.matches("w=1").count(), 2);
    assert_eq!(net.matches("\"leaf1\"[2]").count(), 1);
    let fab = Fabric::start(&net);
    let dir = tempfile::tempdir().unwrap();
    let expected = dir.path().join("expected.net");
    std::fs::write(&expected, tree()).unwrap();
    let v = json(&rdmakit_ok(
        &fab,
        &[
            "fabric",
            "check",
            "--json",
            "--expected",
            expected.to_str().unwrap(),
        ],
        1,
    ));
    assert_eq!(
        found(&v),
        [
            (
                "RDK-F018".to_string(),
                "leaf1 port 1 and leaf1 port 2".to_string()
            ),
            ("RDK-F001".to_string(), "leaf1 port 3".to_string()),
        ],
        "{v:#}"
    );
    let m = v["findings"][1]["message"].as_str().unwrap();
    assert!(
        m.contains("runs at 1X; both ends support 4X but enable only up to 1X"),
        "{m}"
    );
}

#[test]
fn check_says_an_unplugged_cable_and_a_lost_leaf_once_each() {
    let mut fab = Fabric::start(&tree());
    let dir = tempfile::tempdir().unwrap();
    let expected = dir.path().join("expected.net");
    std::fs::write(&expected, tree()).unwrap();
    let args = [
        "fabric",
        "check",
        "--json",
        "--expected",
        expected.to_str().unwrap(),
    ];

    // The leaf4 - spine2 cable unplugged: both ports poll.
    let reply = fab.console("Unlink \"leaf4\"[6]");
    assert!(!reply.contains("cannot"), "{reply}");
    let v = json(&rdmakit_ok(&fab, &args, 1));
    assert_eq!(
        found(&v),
        [("RDK-F003".to_string(), "leaf4 port 6".to_string())],
        "{v:#}"
    );
    let m = v["findings"][0]["message"].as_str().unwrap();
    assert!(
        m.starts_with(
            "leaf4 port 6: physical state Polling, but the expected topology has a cable to \
             spine2 port 4, physical state Polling there too"
        ),
        "{m}"
    );

    // leaf3's two uplinks unplugged: leaf3 and its four hosts are gone.
    for p in [5, 6] {
        fab.console(&format!("Unlink \"leaf3\"[{p}]"));
    }
    let v = json(&rdmakit_ok(&fab, &args, 1));
    assert_eq!(
        found(&v),
        [
            ("RDK-F003".to_string(), "leaf4 port 6".to_string()),
            ("RDK-F016".to_string(), "leaf3".to_string()),
        ],
        "{v:#}"
    );
    let m = v["findings"][1]["message"].as_str().unwrap();
    assert_eq!(
        m,
        "leaf3: not in the fabric, nor are the 4 nodes reached only through it (host-09 \
         HCA-1, host-10 HCA-1, host-11 HCA-1, host-12 HCA-1): 6 expected cables are missing"
    );
    let evidence = v["findings"][1]["evidence"].to_string();
    assert!(
        evidence.contains("spine1 (0x0000000000200004) port 3 PortState / PortPhysicalState"),
        "{evidence}"
    );
}

/// MADs dropped on one inter-switch port (`Error "spine1"[3] 30`: ibsim drops
/// 30 % of what that port receives and counts each in its PortRcvErrors)
/// while rdmakit's own MADs cross it: since the saved counters, exactly that
/// port's receive errors are found, with their growth, and nothing else.
#[test]
fn check_finds_the_port_that_drops_mads_and_no_other() {
    let mut fab = Fabric::start(&tree());
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json");
    let base = base.to_str().unwrap();
    let v = json(&rdmakit_ok(
        &fab,
        &["fabric", "check", "--json", "--save", base],
        0,
    ));
    assert!(found(&v).is_empty(), "a clean tree: {v:#}");

    let reply = fab.console("Error \"spine1\"[3] 30");
    assert!(!reply.contains("cannot"), "{reply}");
    // Traffic through the port: discovery and counters reach leaf3 and its
    // hosts through spine1 port 3; retries hide most drops (exit 0 or 3).
    for _ in 0..3 {
        let o = rdmakit(&fab, &["fabric", "counters", "--json"]);
        assert!(matches!(o.status.code(), Some(0 | 3)), "{o:?}");
    }
    fab.console("Error \"spine1\"[3] 0");
    let o = rdmakit(&fab, &["fabric", "check", "--json", "--baseline", base]);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{o:?}\n{}",
        fab.logs()
    );
    let v = json(&text(&o.stdout));
    let at_warning: Vec<_> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "info")
        .map(|f| (f["code"].as_str().unwrap(), f["subject"].as_str().unwrap()))
        .collect();
    assert_eq!(at_warning, [("RDK-F005", "spine1 port 3")], "{v:#}");
    let f = &v["findings"][0];
    let said = format!("{} {}", f["message"], f["evidence"]);
    assert!(said.contains("PortRcvErrors"), "{said}");
    // Unmodified perfquery, asked of that port by its switch's GUID, reads
    // the drops too.
    let guid = said
        .split("spine1 (")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_else(|| panic!("no spine1 GUID in {said}"))
        .to_string();
    let o = fab.tool("perfquery", &["-G", &guid, "3"]);
    let out = text(&o.stdout);
    let rcv: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("PortRcvErrors:"))
        .and_then(|v| v.trim_start_matches('.').trim().parse().ok())
        .unwrap_or_else(|| panic!("perfquery -G {guid} 3:\n{out}{}", text(&o.stderr)));
    assert!(rcv > 0, "{out}");
}
