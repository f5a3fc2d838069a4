//! `rdmakit fabric route` and `rdmakit fabric discover --routes` against
//! unmodified ibtracert on a simulated fabric: ibsim with unmodified opensm,
//! the fat tree of 2 spines, 4 leaves and 16 hosts, all under the umad2sim
//! preload (`rdmakit_testkit::ibsim`). Each route is compared hop by hop
//! (egress port, next node, ingress port) with what ibtracert printed, before
//! and after an inter-switch cable is unplugged and opensm routes around it.
//!
//! Needs ibsim-utils, libumad2sim0, opensm and infiniband-diags; a missing
//! one fails the test naming the packages.

mod ibsim_common;

use std::time::{Duration, Instant};

use ibsim_common::{rdmakit, rdmakit_ok, text};
use rdmakit_fabric::route::{self, FabricFile, Route};
use rdmakit_fabric::{fat_tree, NodeKind, Subnet};
use rdmakit_testkit::ibsim::Fabric;
use rdmakit_types::{Speed, Width};

/// A hop as both tools name it: the port it leaves by, the port it reaches
/// (its port GUID: a switch's port 0's) and the port number it enters by.
type Step = (u8, u64, u8);

/// ibtracert's `[out] -> kind port {guid}[in] ...` lines.
fn ibtracert_steps(out: &str) -> Vec<Step> {
    out.lines()
        .filter_map(|l| {
            let (out_port, rest) = l.strip_prefix('[')?.split_once("] -> ")?;
            let (_, rest) = rest.split_once('{')?;
            let (guid, rest) = rest.split_once("}[")?;
            let (in_port, _) = rest.split_once(']')?;
            let guid = u64::from_str_radix(guid.trim_start_matches("0x"), 16).ok()?;
            Some((out_port.parse().ok()?, guid, in_port.parse().ok()?))
        })
        .collect()
}

fn our_steps(r: &Route) -> Vec<Step> {
    let mut v = Vec::new();
    let mut out = r.src.port;
    for h in &r.hops {
        v.push((out, h.guid, h.in_port));
        out = h.out_port;
    }
    // A switch destination is the last hop itself (its out port is 0).
    if r.dst.kind != NodeKind::Switch {
        v.push((out, r.dst.port_guid, r.dst.port));
    }
    v
}

fn ibtracert(fab: &mut Fabric, s: u16, d: u16) -> Option<Vec<Step>> {
    let o = fab.tool("ibtracert", &[&s.to_string(), &d.to_string()]);
    o.status
        .success()
        .then(|| ibtracert_steps(&text(&o.stdout)))
}

fn lid(s: &Subnet, desc: &str) -> u16 {
    route::resolve(s, desc).unwrap_or_else(|e| panic!("{desc}: {e}"))
}

fn discover(fab: &Fabric) -> FabricFile {
    let out = rdmakit_ok(fab, &["fabric", "discover", "--json", "--routes"], 0);
    FabricFile::from_json(&out).unwrap_or_else(|e| panic!("{e}\n{out}"))
}

/// `rdmakit fabric route` by description, as JSON.
fn our_route(fab: &Fabric, src: &str, dst: &str) -> Route {
    let out = rdmakit_ok(fab, &["fabric", "route", src, dst, "--json"], 0);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"))
}

const PAIRS: [(&str, &str); 5] = [
    ("host-01 HCA-1", "host-02 HCA-1"),
    ("host-01 HCA-1", "host-16 HCA-1"),
    ("host-05 HCA-1", "host-12 HCA-1"),
    ("host-16 HCA-1", "host-03 HCA-1"),
    ("host-09 HCA-1", "spine2"),
];

#[test]
fn routes_agree_with_ibtracert_before_and_after_an_inter_switch_cable_is_unplugged() {
    let net = fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).expect("the test tree");
    let mut fab = Fabric::start(&net);
    let file = discover(&fab);
    let lfts = file.lfts.as_ref().expect("--routes writes lfts");
    assert!(lfts.complete(), "{:?}", lfts.unread);
    assert_eq!(lfts.switches.len(), 6);
    let s = &file.subnet;
    for (a, b) in PAIRS {
        let (sl, dl) = (lid(s, a), lid(s, b));
        let theirs = ibtracert(&mut fab, sl, dl).expect("ibtracert succeeds");
        let ours = our_route(&fab, a, b);
        assert_eq!(our_steps(&ours), theirs, "{a} -> {b}");
        // The saved file gives the same route as the live command.
        assert_eq!(file.route(sl, dl).expect("a route from the file"), ours);
        // By LID and by GUID too, and in ibtracert's shape.
        let by_lid = rdmakit_ok(
            &fab,
            &["fabric", "route", &sl.to_string(), &dl.to_string()],
            0,
        );
        assert_eq!(ibtracert_steps(&by_lid), theirs, "{by_lid}");
        assert!(by_lid.starts_with("From ca {"), "{by_lid}");
    }
    let same_leaf = our_route(&fab, PAIRS[0].0, PAIRS[0].1);
    assert_eq!(same_leaf.hops.len(), 1);
    let across = our_route(&fab, PAIRS[1].0, PAIRS[1].1);
    assert_eq!(across.hops.len(), 3);
    let isl = across.isls()[0];
    let leaf = &across.hops[0];
    let spine = &across.hops[1];

    // Unplug the first inter-switch cable of host-01 -> host-16 and wait
    // for opensm's next sweep to route around it.
    let said = fab.console(&format!("Unlink \"{}\"[{}]", leaf.desc, isl.from.port));
    assert!(!said.contains("cannot"), "{said}");
    let (sl, dl) = (lid(s, PAIRS[1].0), lid(s, PAIRS[1].1));
    let start = Instant::now();
    let theirs = loop {
        if let Some(t) = ibtracert(&mut fab, sl, dl) {
            if !t.is_empty() && t[1] != (isl.from.port, spine.guid, isl.to.port) {
                break t;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "opensm did not reroute around {}[{}]\n{}",
            leaf.desc,
            isl.from.port,
            fab.logs()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let after = our_route(&fab, PAIRS[1].0, PAIRS[1].1);
    assert_eq!(our_steps(&after), theirs);
    assert_ne!(
        after.isls()[0],
        isl,
        "the route still crosses the unplugged cable"
    );
    // Every other pair agrees again too.
    for (a, b) in PAIRS {
        let theirs = ibtracert(&mut fab, lid(s, a), lid(s, b)).expect("ibtracert");
        assert_eq!(
            our_steps(&our_route(&fab, a, b)),
            theirs,
            "{a} -> {b} after the unlink"
        );
    }
}

#[test]
fn route_names_what_it_cannot_find_and_where_the_local_port_is() {
    let net = fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).expect("the test tree");
    let fab = Fabric::start(&net);
    let o = rdmakit(&fab, &["fabric", "route", "host-01 HCA-1", "nobody"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("no node is named \"nobody\""),
        "{}",
        text(&o.stderr)
    );
    // --ca and --port pick the local port; the summary says the tables were read.
    let out = rdmakit_ok(
        &fab,
        &[
            "fabric",
            "route",
            "--ca",
            "ibsim0",
            "--port",
            "1",
            "host-01 HCA-1",
            "leaf1",
        ],
        0,
    );
    assert!(out.contains("To switch {"), "{out}");
    let out = rdmakit_ok(
        &fab,
        &["fabric", "route", "--json", "host-01 HCA-1", "leaf1"],
        0,
    );
    let r: Route = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert_eq!((r.hops.len(), r.dst.desc.as_str()), (1, "leaf1"));
    let out = rdmakit_ok(&fab, &["fabric", "discover", "--routes"], 0);
    assert!(out.contains("forwarding tables: 6 switches read"), "{out}");
}
