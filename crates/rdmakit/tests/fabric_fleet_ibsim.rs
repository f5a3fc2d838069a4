//! The fleet's views tied to a live fabric: ibsim with unmodified opensm runs
//! the 2-spine, 4-leaf, 16-host fat tree; `rdmakit fabric discover --json
//! --routes` and `rdmakit fabric counters --json` run under the umad2sim
//! preload before and after ibsim's `PerformanceSet` puts symbol errors on a
//! leaf's port to a spine. Then:
//! - a fleet of node reports (the real mlx4 capture, host names and GUIDs of
//!   simulated hosts edited in) → `fleet report --fabric` names each node's
//!   switch port and the leaf's port with symbol errors;
//! - a saved pairwise run with one slow pair (the recorded 6-node run, its
//!   nodes renamed after simulated hosts) → `fleet pairwise --from --fabric`
//!   names the pair's route, its switch ports and the counter that moved.
//!
//! Needs ibsim-utils, libumad2sim0, opensm and infiniband-diags; a missing
//! one fails the test naming the packages.

mod ibsim_common;

use std::path::Path;
use std::process::Output;

use ibsim_common::text;
use rdmakit_fabric::route::FabricFile;
use rdmakit_fabric::{fat_tree, Subnet};
use rdmakit_testkit::bundle::{real_nics, set_line};
use rdmakit_testkit::fleet::json_pretty;
use rdmakit_testkit::ibsim::Fabric;
use rdmakit_types::{Speed, Width};
use serde_json::Value;

/// Runs the rdmakit under test under the fabric's preload, bounded: it must
/// succeed.
fn under_preload(fab: &Fabric, args: &[&str]) -> String {
    ibsim_common::rdmakit_ok(fab, args, 0)
}

/// The rdmakit under test, no preload, in `dir`.
fn rdmakit(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rdmakit"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "400")
        .output()
        .expect("run rdmakit")
}

fn write(dir: &Path, name: &str, content: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.display().to_string()
}

fn ca_port_guid(s: &Subnet, desc: &str) -> (u64, u64) {
    let n = s
        .nodes_by_desc(desc)
        .next()
        .unwrap_or_else(|| panic!("{desc}"));
    (n.guid, n.ports[0].guid)
}

/// A doctor report of the mlx4 capture as host `name`, its mlx4_0 port 1
/// carrying the GUIDs of the simulated host `desc`; `old_fw` gives it the
/// firmware its peers do not run (a drift the fleet report names).
fn node_report(s: &Subnet, name: &str, desc: &str, old_fw: bool) -> String {
    let mut b = real_nics(name, &["mlx4_0"]);
    if old_fw {
        set_line(&mut b, "/sys/class/infiniband/mlx4_0/fw_ver", "2.30.8000");
    }
    let mut v: Value = serde_json::from_str(&json_pretty(&b)).unwrap();
    let (node, port) = ca_port_guid(s, desc);
    let dev = &mut v["inventory"]["devices"][0];
    assert_eq!(dev["name"], "mlx4_0");
    let g = format!("{node:016x}");
    dev["node_guid"] = Value::String(format!(
        "{}:{}:{}:{}",
        &g[..4],
        &g[4..8],
        &g[8..12],
        &g[12..]
    ));
    dev["ports"][0]["port_guid"] = Value::String(format!("{port:#018x}"));
    assert_eq!(dev["ports"][0]["num"], 1);
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn fleet_report_and_pairwise_name_switch_ports_routes_and_moved_counters() {
    let net = fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).expect("the test tree");
    let mut fab = Fabric::start(&net);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    let first = under_preload(&fab, &["fabric", "discover", "--json", "--routes"]);
    let file = FabricFile::from_json(&first).unwrap();
    let s = &file.subnet;
    let slow_route = file
        .route(
            rdmakit_fabric::route::resolve(s, "host-01 HCA-1").unwrap(),
            rdmakit_fabric::route::resolve(s, "host-16 HCA-1").unwrap(),
        )
        .expect("host-01 to host-16 is routed");
    let uplink = slow_route.isls()[0].from;
    let leaf = s.node(uplink.guid).unwrap().desc.clone();
    assert_eq!(leaf, "leaf1");

    let before = under_preload(&fab, &["fabric", "counters", "--json"]);
    let said = fab.console(&format!(
        "PerformanceSet \"{leaf}\"[{}] PortCounters.SymbolErrorCounter=100",
        uplink.port
    ));
    assert!(said.contains("has been set to 100"), "{said}");
    let after = under_preload(&fab, &["fabric", "counters", "--json"]);
    let fabric_json = under_preload(&fab, &["fabric", "discover", "--json", "--routes"]);
    drop(fab);
    let fabric = write(d, "fabric.json", &fabric_json);
    let before = write(d, "before.json", &before);
    let after = write(d, "after.json", &after);

    // The fleet: five nodes named after simulated hosts, host-02 on old firmware.
    let nodes = d.join("nodes");
    std::fs::create_dir(&nodes).unwrap();
    for (i, h) in [1, 2, 3, 5, 9].iter().enumerate() {
        let name = format!("host-{h:02}");
        let desc = format!("{name} HCA-1");
        write(
            &nodes,
            &format!("{name}.json"),
            &node_report(s, &name, &desc, i == 1),
        );
    }
    let nodes = nodes.display().to_string();
    // `fleet report` of the nodes with the fabric and its counters after the
    // errors, in the output `how` names.
    let report = |how: &[&str]| {
        let mut args = vec![
            "fleet",
            "report",
            &nodes,
            "--fabric",
            &fabric,
            "--fabric-counters",
            &after,
        ];
        args.extend_from_slice(how);
        rdmakit(d, &args)
    };
    let o = report(&["--json"]);
    let out = text(&o.stdout);
    let v: Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}\n{}", text(&o.stderr)));
    let n2 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "host-02")
        .expect("host-02 in the report");
    assert_ne!(n2["status"], "ok", "{n2}");
    let a = &n2["fabric"][0];
    assert_eq!(a["device"], "mlx4_0", "{n2}");
    assert_eq!(
        (a["switch"].as_str(), a["switch_port"].as_u64()),
        (Some("leaf1"), Some(2))
    );
    assert_eq!(a["uplinks"][0]["port"], uplink.port);
    assert_eq!(a["uplinks"][0]["errors"]["SymbolErrorCounter"], 100);
    assert!(
        a.get("errors").is_none(),
        "host-02's own switch port is clean: {a}"
    );
    // The text names the switch port and the leaf's port with symbol errors.
    let o = report(&["--html", "fleet.html"]);
    let human = text(&o.stdout);
    let want = format!(
        "host-02 mlx4_0/1 ↔ leaf1 port 2; leaf1 port {} → ",
        uplink.port
    );
    assert!(human.contains(&want), "{human}");
    assert!(human.contains("SymbolErrorCounter 100"), "{human}");
    let page = std::fs::read_to_string(d.join("fleet.html")).unwrap();
    assert!(
        page.contains("host-02 mlx4_0/1 ↔ leaf1 port 2"),
        "the page names it too"
    );

    // The recorded 6-node run, slow between n1 and n5, renamed after hosts.
    let run = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../report/tests/data/6ns-slow-pair-n1-n5-2.json"
    ))
    .unwrap();
    let mut run: Value = serde_json::from_str(&run).unwrap();
    let rename = |n: &str| match n {
        "n1" => "host-01",
        "n2" => "host-02",
        "n3" => "host-05",
        "n4" => "host-09",
        "n5" => "host-16",
        "n6" => "host-12",
        other => panic!("node {other}"),
    };
    for n in run["nodes"].as_array_mut().unwrap() {
        n["name"] = rename(n["name"].as_str().unwrap()).into();
    }
    for c in run["cells"].as_array_mut().unwrap() {
        for k in ["from", "to"] {
            c[k] = rename(c[k].as_str().unwrap()).into();
        }
    }
    for f in run["faults"].as_array_mut().unwrap() {
        for n in f["nodes"].as_array_mut().unwrap() {
            *n = rename(n.as_str().unwrap()).into();
        }
    }
    // The confirmations name the nodes in their own fields.
    let mut t = run["confirmations"].to_string();
    for (a, b) in [
        ("n1", "host-01"),
        ("n2", "host-02"),
        ("n3", "host-05"),
        ("n4", "host-09"),
        ("n5", "host-16"),
        ("n6", "host-12"),
    ] {
        t = t.replace(&format!("\"{a}\""), &format!("\"{b}\""));
    }
    run["confirmations"] = serde_json::from_str(&t).unwrap();
    let run = write(d, "run.json", &run.to_string());
    let args = [
        "fleet",
        "pairwise",
        "--from",
        &run,
        "--fabric",
        &fabric,
        "--fabric-counters",
        &before,
        "--fabric-counters",
        &after,
    ];
    let o = rdmakit(d, &[&args[..], &["--json"]].concat());
    assert_eq!(o.status.code(), Some(1), "a fault: {}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let routes = v["routes"].as_array().expect("routes in the JSON");
    let there = routes
        .iter()
        .find(|r| r["from"] == "host-01" && r["to"] == "host-16")
        .expect("host-01 → host-16 routed");
    let moved = format!("leaf1 port {} SymbolErrorCounter +100", uplink.port);
    assert_eq!(there["counters"], serde_json::json!([moved]), "{there}");
    assert_eq!(
        there["route"],
        rdmakit_fabric::route::compact(&slow_route).as_str()
    );
    assert!(there["isls"].as_array().unwrap().len() == 2, "{there}");
    assert!(
        there["switch_ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == &Value::String(format!("leaf1 port {}", uplink.port))),
        "{there}"
    );
    assert!(routes
        .iter()
        .any(|r| r["from"] == "host-16" && r["to"] == "host-01"));
    // The verdict's text and the page's fault list and heat map say it.
    let o = rdmakit(d, &[&args[..], &["--html", "pairwise.html"]].concat());
    let human = text(&o.stdout);
    assert!(
        human.contains("host-01 -> host-16: route leaf1[1->"),
        "{human}"
    );
    assert!(human.contains(&moved), "{human}");
    let page = std::fs::read_to_string(d.join("pairwise.html")).unwrap();
    assert!(
        page.contains(&format!(
            "host-01 → host-16: route leaf1[1→{}]",
            uplink.port
        )),
        "the page names the route"
    );

    // A fabric file that is not one is refused before anything is read.
    let bad = write(d, "bad.json", "{\"subnet\": 3}");
    let o = rdmakit(d, &["fleet", "pairwise", "--from", &run, "--fabric", &bad]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--fabric"), "{}", text(&o.stderr));
}
