//! Against a running ibsim (testkit's [`Fabric`]: ibsim, opensm and
//! unmodified infiniband-diags under the umad2sim preload):
//! - ibsim reads the topology [`ibnetdiscover::write`] printed for the real
//!   capture, and ibnetdiscover against that fabric finds the same nodes,
//!   ports, LIDs, widths and cables;
//! - a 536-node fat tree from [`fat_tree`] comes up, and what ibnetdiscover
//!   finds in it is exactly the cabling the generator wrote.
//!
//! Needs ibsim-utils, libumad2sim0, opensm and infiniband-diags; a missing
//! one is a failure naming the packages, never a skip.

use std::time::Instant;

use rdmakit_fabric::ibnetdiscover::{self, WriteOptions};
use rdmakit_fabric::{compare, fat_tree, Expected, Node, NodeKind, Subnet};
use rdmakit_testkit::fixture_bytes;
use rdmakit_testkit::ibsim::Fabric;
use rdmakit_types::{Speed, Width};

fn fixture_text(name: &str) -> String {
    String::from_utf8(fixture_bytes(&format!("fabric/{name}"))).expect("UTF-8 fixture")
}

/// Runs ibnetdiscover in the fabric and parses its output.
fn discover(fabric: &mut Fabric) -> Subnet {
    let out = fabric.tool("ibnetdiscover", &[]);
    assert!(
        out.status.success(),
        "ibnetdiscover: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        fabric.logs()
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    ibnetdiscover::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The nodes by GUID: the order and the origin depend on where the
/// discovery started (ibsim attaches to the file's first node).
fn by_guid(s: &Subnet) -> Vec<Node> {
    let mut v = s.nodes().to_vec();
    v.sort_by_key(|n| n.guid);
    v
}

#[test]
fn ibsim_builds_the_fabric_the_writer_printed() {
    let capture = ibnetdiscover::parse(&fixture_text("ibnetdiscover.txt")).unwrap();
    let written = ibnetdiscover::write(&capture, &WriteOptions::default());
    let mut fabric = Fabric::start(&written);
    let again = discover(&mut fabric);
    // ibsim takes the GUIDs, descriptions, port counts, LIDs (opensm keeps
    // the ones the ports already have) and widths from the written file.
    assert_eq!(by_guid(&again), by_guid(&capture));
    assert_eq!(compare(&Expected::from_subnet(&capture), &again), []);
    // The clients attach to the first node written: the first switch.
    let first = capture.nodes().iter().find(|n| n.kind == NodeKind::Switch);
    assert_eq!(again.origin().map(|o| o.node_guid), first.map(|n| n.guid));
}

#[test]
fn a_536_node_fat_tree_comes_up_cabled_as_generated() {
    // 8 spines, 16 leaves of 32 hosts: 512 hosts, 536 nodes, 640 cables.
    let net = fat_tree(8, 16, 32, 1, Width::X4, Speed::Edr).unwrap();
    let t0 = Instant::now();
    let mut fabric = Fabric::start(&net);
    let up = t0.elapsed();
    let t1 = Instant::now();
    let found = discover(&mut fabric);
    eprintln!(
        "536 nodes: ibsim + opensm up in {up:?}, ibnetdiscover + parse in {:?}",
        t1.elapsed()
    );
    assert_eq!(found.nodes().len(), 536);
    assert_eq!(found.links().count(), 512 + 8 * 16);
    let expected = Expected::parse(&net).unwrap();
    assert_eq!(compare(&expected, &found), []);
    // Every host got a LID and runs at 4X EDR.
    for n in found.nodes().iter().filter(|n| n.kind == NodeKind::Ca) {
        let p = &n.ports[0];
        assert_ne!(p.lid, 0, "{}", n.desc);
        assert_eq!(
            (p.width.active, p.speed.active),
            (Some(Width::X4), Some(Speed::Edr)),
            "{}",
            n.desc
        );
    }
}
