//! `rdmakit fabric discover` and `rdmakit fabric counters` against the real
//! tools on a simulated fabric: ibsim with unmodified opensm, a fat tree of
//! 2 spines, 4 leaves and 16 hosts from `rdmakit_fabric::fat_tree`, and
//! unmodified ibnetdiscover and perfquery as the reference, all under the
//! umad2sim preload (`rdmakit_testkit::ibsim`). Every comparison is made by
//! the test, field by field, from what both sides printed.
//!
//! Needs ibsim-utils, libumad2sim0, opensm and infiniband-diags; a missing
//! one fails the test naming the packages (scripts/test installs them).

mod ibsim_common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ibsim_common::{rdmakit, rdmakit_ok, text, tree};
use rdmakit_fabric::counters::{Counters, ERROR_COUNTERS};
use rdmakit_fabric::topology::{Link, NodeKind, PortRef};
use rdmakit_fabric::{ibnetdiscover, Subnet};
use rdmakit_testkit::ibsim::Fabric;
use rdmakit_types::{PortState, Speed, Width};

/// An unmodified tool, which must succeed.
fn tool(fab: &mut Fabric, program: &str, args: &[&str]) -> String {
    let o = fab.tool(program, args);
    assert!(
        o.status.success(),
        "{program} {args:?}: {:?}\n{}",
        o.status,
        text(&o.stderr)
    );
    text(&o.stdout)
}

fn discover_json(fab: &Fabric, code: i32) -> (Subnet, serde_json::Value) {
    let out = rdmakit_ok(fab, &["fabric", "discover", "--json"], code);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    let subnet: Subnet =
        serde_json::from_value(v["subnet"].clone()).expect("a rdmakit.fabric/v1 subnet");
    (subnet, v)
}

/// What both ibnetdiscover's format and rdmakit's model carry of a node:
/// kind, description, port count, system image GUID, vendor and device,
/// port 0 (GUID, LID, LMC, enhanced), and each cabled port (GUID, LID, LMC,
/// active width and speed, the peer's node GUID and port).
type Seen = (
    NodeKind,
    String,
    u8,
    Option<u64>,
    (u32, u16),
    Option<(u64, u16, u8, bool)>,
    Vec<(u8, u64, u16, u8, Option<Width>, Option<Speed>, PortRef)>,
);

fn seen(s: &Subnet) -> BTreeMap<u64, Seen> {
    s.nodes()
        .iter()
        .map(|n| {
            let ports = n
                .ports
                .iter()
                .filter_map(|p| {
                    let r = p.remote?;
                    Some((
                        p.num,
                        p.guid,
                        p.lid,
                        p.lmc,
                        p.width.active,
                        p.speed.active,
                        r,
                    ))
                })
                .collect();
            let p0 = n.port0.map(|p| (p.guid, p.lid, p.lmc, p.enhanced));
            let ids = (n.vendor_id, n.device_id);
            (
                n.guid,
                (
                    n.kind,
                    n.desc.clone(),
                    n.num_ports,
                    n.system_guid,
                    ids,
                    p0,
                    ports,
                ),
            )
        })
        .collect()
}

fn links(s: &Subnet) -> BTreeSet<Link> {
    s.links().collect()
}

#[test]
fn discover_agrees_with_ibnetdiscover_on_a_fat_tree() {
    let mut fab = Fabric::start(&tree());
    let (ours, json) = discover_json(&fab, 0);
    assert_eq!(json["unread"], serde_json::json!([]), "{json}");
    let theirs_text = tool(&mut fab, "ibnetdiscover", &[]);
    let theirs =
        ibnetdiscover::parse(&theirs_text).unwrap_or_else(|e| panic!("{e}\n{theirs_text}"));
    // The tree the generator wrote: 6 switches, 16 hosts, 24 cables.
    assert_eq!(ours.nodes().len(), 22);
    assert_eq!(links(&ours).len(), 24);
    assert_eq!(seen(&ours), seen(&theirs));
    assert_eq!(links(&ours), links(&theirs));
    assert_eq!(ours.origin(), theirs.origin());
    // Every LID opensm gave is there, and they are all different.
    let lids: BTreeSet<u16> = ours
        .nodes()
        .iter()
        .flat_map(|n| n.ports.iter().map(move |p| n.lid_of(p)))
        .collect();
    assert_eq!(lids.len(), 22, "{lids:?}");
    assert!(!lids.contains(&0));

    // The topology form, from the port named explicitly, reads back as the
    // same subnet.
    let topo = rdmakit_ok(
        &fab,
        &[
            "fabric",
            "discover",
            "--topology",
            "--ca",
            "ibsim0",
            "--port",
            "1",
        ],
        0,
    );
    let back = ibnetdiscover::parse(&topo).unwrap_or_else(|e| panic!("{e}\n{topo}"));
    assert_eq!(seen(&back), seen(&ours));
    assert_eq!(back.origin(), ours.origin());

    // The summary counts what the JSON holds.
    let summary = rdmakit_ok(&fab, &["fabric", "discover"], 0);
    assert!(
        summary.starts_with("6 switches, 16 CAs, 24 links; 0 ports without a peer;"),
        "{summary}"
    );
    let spine_rows = summary
        .lines()
        .filter(|l| l.trim_start().starts_with("spine1 "))
        .count();
    assert_eq!(spine_rows, 4, "{summary}");

    // A CA that is not there: exit 2, the layer named.
    let o = rdmakit(&fab, &["fabric", "discover", "--ca", "mlx5_9"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("layer"), "{}", text(&o.stderr));
}

/// `perfquery [-x] LID PORT`'s `Name:....value` lines.
fn perfquery(fab: &mut Fabric, extended: bool, lid: u16, port: u8) -> BTreeMap<String, u64> {
    let (l, p) = (lid.to_string(), port.to_string());
    let mut args = vec![l.as_str(), p.as_str()];
    if extended {
        args.insert(0, "-x");
    }
    let out = tool(fab, "perfquery", &args);
    out.lines()
        .filter_map(|l| {
            let (name, value) = l.split_once(':')?;
            let value = value.trim_start_matches('.');
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The data and packet counters, which count the simulated MADs themselves:
/// perfquery, reading after rdmakit, sees at least as much.
const TRAFFIC: [&str; 8] = [
    "PortXmitData",
    "PortRcvData",
    "PortXmitPkts",
    "PortRcvPkts",
    "PortUnicastXmitPkts",
    "PortUnicastRcvPkts",
    "PortMulticastXmitPkts",
    "PortMulticastRcvPkts",
];

#[test]
fn counters_agree_with_perfquery_and_reset_clears_them() {
    let mut fab = Fabric::start(&tree());
    let set = [
        ("leaf1", 5, "PortCounters.SymbolErrorCounter", 77),
        ("leaf1", 5, "PortCounters.LinkDownedCounter", 3),
        ("leaf1", 5, "PortCounters.PortXmitWait", 5000),
        ("spine2", 3, "PortCounters.PortRcvErrors", 7),
        ("spine2", 3, "PortCounters.PortXmitDiscards", 12),
        ("spine2", 3, "PortCounters.LinkErrorRecoveryCounter", 255),
        (
            "host-03 HCA-1",
            1,
            "PortCounters.ExcessiveBufferOverrunErrors",
            2,
        ),
        ("host-03 HCA-1", 1, "PortCounters.VL15Dropped", 4),
        (
            "leaf3",
            2,
            "PortCountersExtended.PortXmitData",
            1_234_567_890_123,
        ),
    ];
    for (node, port, field, value) in set {
        let said = fab.console(&format!(
            "PerformanceSet \"{node}\"[{port}] {field}={value}"
        ));
        assert!(said.contains("has been set"), "{said}");
    }
    let out = rdmakit_ok(
        &fab,
        &[
            "fabric", "counters", "--json", "--ca", "ibsim0", "--port", "1",
        ],
        0,
    );
    let c: Counters = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert!(c.complete() && !c.reset, "{:?}", c.unread);
    // 16 hosts, 6 cabled leaf ports × 4, 4 cabled spine ports × 2.
    assert_eq!(c.ports.len(), 16 + 24 + 8);
    let by = |desc: &str, port: u8| {
        c.ports
            .iter()
            .find(|p| p.node_desc == desc && p.port == port)
            .unwrap_or_else(|| panic!("{desc} port {port} not read"))
    };
    // What was set is what rdmakit read.
    for (node, port, field, value) in set {
        let name = field.split_once('.').unwrap().1;
        let got = by(node, port).value(name).unwrap();
        match TRAFFIC.contains(&name) {
            // Counting the MADs since the set.
            true => assert!(
                got >= value && got - value < 100_000,
                "{node}[{port}] {name}: {got}"
            ),
            false => assert_eq!(got, value, "{node}[{port}] {name}"),
        }
    }
    assert_eq!(by("spine2", 3).saturated, ["LinkErrorRecoveryCounter"]);

    // Port by port against perfquery: the ports set and every fifth other.
    let mut checked = 0;
    for (i, p) in c.ports.iter().enumerate() {
        let was_set = set.iter().any(|s| s.0 == p.node_desc && s.1 == p.port);
        if !was_set && i % 5 != 0 {
            continue;
        }
        let pq = perfquery(&mut fab, false, p.lid, p.port);
        for (name, ours) in &p.counters {
            if name == "QP1Dropped" {
                // perfquery 44 prints VL15Dropped's bits under this name;
                // ibsim leaves the real field (bytes 20-21) at 0.
                assert_eq!((pq[name], *ours), (pq["VL15Dropped"], 0));
                continue;
            }
            let theirs = pq[name];
            match TRAFFIC.contains(&name.as_str()) {
                true => assert!(theirs >= *ours, "{} {name}: {ours} > {theirs}", p.node_desc),
                false => assert_eq!(theirs, *ours, "{}[{}] {name}", p.node_desc, p.port),
            }
        }
        let pqx = perfquery(&mut fab, true, p.lid, p.port);
        let ext = p
            .extended
            .as_ref()
            .expect("ibsim's PMA has PortCountersExtended");
        assert_eq!(ext.len(), 8);
        for (name, ours) in ext {
            assert!(
                pqx[name] >= *ours,
                "{} -x {name}: {ours} > {}",
                p.node_desc,
                pqx[name]
            );
            assert!(
                pqx[name] - ours < 100_000,
                "{} -x {name}: {ours} vs {}",
                p.node_desc,
                pqx[name]
            );
        }
        checked += 1;
    }
    assert!(checked >= 12, "{checked}");

    // The default table: the ports with errors and only those counters.
    let table = rdmakit_ok(&fab, &["fabric", "counters"], 0);
    let rows: Vec<&str> = table
        .lines()
        .skip(1)
        .filter(|l| !l.contains("ports read"))
        .collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert!(
        table.contains("SymbolErrorCounter") && table.contains("255 (saturated)"),
        "{table}"
    );
    assert!(!table.contains("PortRcvData"), "{table}");
    assert!(
        table.contains("48 ports read, 3 with error counters not 0"),
        "{table}"
    );
    let all = rdmakit_ok(&fab, &["fabric", "counters", "--all"], 0);
    assert_eq!(all.lines().count(), 1 + 48 + 1, "{all}");
    assert!(all.contains("PortMulticastRcvPkts"), "{all}");

    // --reset reads, then clears: perfquery sees the error counters at 0.
    let out = rdmakit_ok(&fab, &["fabric", "counters", "--reset", "--json"], 0);
    let before: Counters = serde_json::from_str(&out).unwrap();
    assert!(before.reset && before.complete());
    let p = before
        .ports
        .iter()
        .find(|p| p.node_desc == "leaf1" && p.port == 5)
        .unwrap();
    assert_eq!(
        p.value("SymbolErrorCounter"),
        Some(77),
        "read before the reset"
    );
    for (node, port, _, _) in set {
        let p = by(node, port);
        let pq = perfquery(&mut fab, false, p.lid, p.port);
        for name in ERROR_COUNTERS {
            assert_eq!(pq[name], 0, "{node}[{port}] {name} after --reset");
        }
        let pqx = perfquery(&mut fab, true, p.lid, p.port);
        assert!(pqx["PortXmitData"] < 1_000_000, "{node}[{port}] {pqx:?}");
    }
}

#[test]
fn an_unlinked_port_is_down_and_a_dropping_port_hides_what_is_behind_it() {
    let mut fab = Fabric::start(&tree());
    let said = fab.console("Unlink \"leaf1\"[2]");
    assert!(!said.contains("cannot"), "{said}");
    let (s, _) = discover_json(&fab, 0);
    let leaf1 = s.nodes_by_desc("leaf1").next().unwrap();
    let p2 = leaf1.port(2).expect("the unlinked port is recorded");
    assert_eq!(
        (p2.state, p2.phys_state, p2.remote),
        (Some(PortState::Down), Some(2), None)
    );
    assert!(s.nodes_by_desc("host-02 HCA-1").next().is_none());
    assert_eq!(s.nodes().len(), 21);
    let summary = rdmakit_ok(&fab, &["fabric", "discover"], 0);
    assert!(summary.contains("1 ports without a peer"), "{summary}");

    // Both of leaf4's uplinks drop every MAD they receive: leaf4 and its
    // four hosts are unreachable, reported, and the walk ends in bounded time.
    for port in [5, 6] {
        let said = fab.console(&format!("Error \"leaf4\"[{port}] 100"));
        assert!(!said.contains("cannot"), "{said}");
    }
    let t = Instant::now();
    let o = rdmakit(&fab, &["fabric", "discover", "--json"]);
    let took = t.elapsed();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(took < Duration::from_secs(10), "{took:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s: Subnet = serde_json::from_value(v["subnet"].clone()).unwrap();
    assert_eq!(s.nodes().len(), 21 - 5);
    assert!(s.nodes_by_desc("leaf4").next().is_none());
    let unread = v["unread"].as_array().unwrap();
    assert_eq!(unread.len(), 2, "{unread:?}");
    let spines: BTreeSet<u64> = ["spine1", "spine2"]
        .iter()
        .map(|d| s.nodes_by_desc(d).next().unwrap().guid)
        .collect();
    for u in unread {
        assert_eq!(u["what"], "NodeInfo");
        // host → leaf1 uplink → the spine's port 4 (leaf4's cable).
        let path: Vec<u64> = u["path"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!((path.len(), path[0], path[2]), (3, 1, 4), "{u}");
        let from = u["from"]["guid"].as_str().unwrap();
        let g = u64::from_str_radix(from.trim_start_matches("0x"), 16).unwrap();
        assert!(spines.contains(&g), "{u}");
        assert!(u["error"].as_str().unwrap().contains("fabric layer"), "{u}");
    }
    let err = text(&o.stderr);
    assert!(
        err.contains("unreachable: NodeInfo by route [1,5,4]"),
        "{err}"
    );
    let summary = rdmakit_ok(&fab, &["fabric", "discover"], 3);
    assert!(
        summary.contains("unreachable: NodeInfo by route [1,6,4]"),
        "{summary}"
    );
}
