//! The walk over fake fabrics built from ibsim net files: the test fat tree
//! of the ibsim tests, ibsim's dumbbell, and a line of switches longer than
//! a directed route.

use std::collections::BTreeSet;

use rdmakit_types::{PortState, Speed, Width};

use super::fake::FakeFabric;
use super::*;
use crate::topology::Link;
use crate::{fat_tree, ibnetdiscover};

fn net(text: &str) -> Subnet {
    ibnetdiscover::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The 22-node tree of the ibsim tests: 2 spines, 4 leaves, 16 hosts.
fn tree() -> Subnet {
    net(&fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).unwrap())
}

fn first_host(s: &Subnet) -> PortRef {
    PortRef {
        guid: s.nodes()[0].guid,
        port: 1,
    }
}

fn links(s: &Subnet) -> BTreeSet<Link> {
    s.links().collect()
}

fn guid_of(s: &Subnet, desc: &str) -> u64 {
    s.nodes_by_desc(desc).next().unwrap().guid
}

#[test]
fn fat_tree_is_found_whole_and_each_spine_once() {
    let want = tree();
    let mut fab = FakeFabric::new(want.clone(), first_host(&want));
    let d = discover(&mut fab, &Options::default());
    assert!(d.complete(), "{:?}", d.unread);
    assert_eq!(d.subnet.nodes().len(), 22);
    // Each spine is reached from four leaves on one level: one node, four
    // cables.
    let spine = guid_of(&d.subnet, "spine1");
    assert_eq!(
        d.subnet.nodes().iter().filter(|n| n.guid == spine).count(),
        1
    );
    let spine_node = d.subnet.node(spine).unwrap();
    assert_eq!(
        spine_node
            .ports
            .iter()
            .filter(|p| p.remote.is_some())
            .count(),
        4
    );
    assert_eq!(links(&d.subnet), links(&want));
    // Same GUIDs, kinds, descriptions and port counts.
    for n in want.nodes() {
        let got = d.subnet.node(n.guid).unwrap();
        assert_eq!(
            (got.kind, &got.desc, got.num_ports, got.system_guid),
            (n.kind, &n.desc, n.num_ports, n.system_guid)
        );
    }
    let o = d.subnet.origin().unwrap();
    assert_eq!(
        (o.node_guid, o.port_guid),
        (want.nodes()[0].guid, want.nodes()[0].guid + 1)
    );
    // Levels: the host, its leaf, the spines, the other leaves, their
    // hosts; each one batch of NodeInfo and one of the rest.
    let levels: Vec<usize> = fab.batches.iter().step_by(2).copied().collect();
    assert_eq!(levels, [1, 1, 5, 6, 12], "{:?}", fab.batches);
    assert_eq!(d.mads, fab.batches.iter().sum::<usize>() as u64);
}

#[test]
fn widths_speeds_and_states_come_from_port_info() {
    let want = tree();
    let mut fab = FakeFabric::new(want.clone(), first_host(&want));
    let d = discover(&mut fab, &Options::default());
    let leaf = d.subnet.node(guid_of(&d.subnet, "leaf1")).unwrap();
    let p = leaf.port(5).unwrap();
    assert_eq!(p.width.active, Some(Width::X4));
    assert_eq!(p.speed.active, Some(Speed::Qdr));
    assert_eq!(p.state, Some(PortState::Active));
    assert_eq!(p.phys_state, Some(5));
    assert_eq!(p.lid, 0, "a switch's external port has no LID");
}

#[test]
fn down_ports_are_recorded_with_their_state_and_not_walked() {
    let want = net(&rdmakit_testkit::ibsim::dumbbell());
    let mut fab = FakeFabric::new(want.clone(), first_host(&want));
    let d = discover(&mut fab, &Options::default());
    assert!(d.complete(), "{:?}", d.unread);
    assert_eq!(d.subnet.nodes().len(), 6);
    assert_eq!(links(&d.subnet), links(&want));
    let s1 = d.subnet.node(guid_of(&d.subnet, "S1")).unwrap();
    assert_eq!(s1.ports.len(), 8);
    for n in 3..=6 {
        let p = s1.port(n).unwrap();
        assert_eq!(
            (p.state, p.phys_state, p.remote),
            (Some(PortState::Down), Some(2), None)
        );
    }
    // Two cables between S1 and S2: both recorded, S2 found once.
    let s2 = guid_of(&d.subnet, "S2");
    assert_eq!(
        s1.port(7).unwrap().remote,
        Some(PortRef { guid: s2, port: 7 })
    );
    assert_eq!(
        s1.port(8).unwrap().remote,
        Some(PortRef { guid: s2, port: 8 })
    );
}

#[test]
fn a_silent_leaf_is_unread_and_the_walk_goes_on() {
    let want = tree();
    let mut fab = FakeFabric::new(want.clone(), first_host(&want));
    let leaf2 = guid_of(&want, "leaf2");
    fab.silence(leaf2);
    let d = discover(&mut fab, &Options::default());
    // leaf2 and its four hosts are missing; everything else is there.
    assert_eq!(d.subnet.nodes().len(), 22 - 5);
    assert!(d.subnet.node(leaf2).is_none());
    assert!(d.stopped.is_none());
    // leaf2 is behind both spines: each route to it is reported.
    let to_leaf2: Vec<&Unread> = d.unread.iter().filter(|u| u.what == "NodeInfo").collect();
    assert_eq!(to_leaf2.len(), 2, "{:?}", d.unread);
    let spine1 = guid_of(&want, "spine1");
    let u = to_leaf2
        .iter()
        .find(|u| u.from.map(|f| f.guid) == Some(spine1))
        .unwrap();
    // host-01 port 1 → leaf1 port 5 → spine1 port 2 (leaf2's cable).
    assert_eq!(u.path, [1, 5, 2]);
    assert!(
        u.error.contains("timed out") && u.error.contains("fabric layer"),
        "{}",
        u.error
    );
    let sp = d.subnet.node(spine1).unwrap();
    assert_eq!(sp.port(2).unwrap().remote, None);
    assert_eq!(sp.port(2).unwrap().state, Some(PortState::Active));
}

/// A host and a line of 70 switches, each cabled to the next by port 2.
fn line_of_switches(n: usize) -> String {
    let mut s = String::from("Hca\t1 \"H1\"\n[1]\t\"S1\"[1]\n\n");
    for k in 1..=n {
        s.push_str(&format!("Switch\t2 \"S{k}\"\n"));
        match k {
            1 => s.push_str("[1]\t\"H1\"[1]\n"),
            _ => s.push_str(&format!("[1]\t\"S{}\"[2]\n", k - 1)),
        }
        if k < n {
            s.push_str(&format!("[2]\t\"S{}\"[1]\n", k + 1));
        }
        s.push('\n');
    }
    s
}

#[test]
fn routes_stop_at_63_hops_and_say_so() {
    let want = net(&line_of_switches(70));
    let mut fab = FakeFabric::new(want.clone(), first_host(&want));
    let d = discover(&mut fab, &Options::default());
    // H1 and S1..S63: S63 is 63 hops away, S64 would be 64.
    assert_eq!(d.subnet.nodes().len(), 64);
    assert!(d.subnet.nodes_by_desc("S63").next().is_some());
    assert!(d.subnet.nodes_by_desc("S64").next().is_none());
    assert_eq!(d.unread.len(), 1, "{:?}", d.unread);
    let u = &d.unread[0];
    assert_eq!((u.what.as_str(), u.path.len()), ("route", 63));
    assert!(u.error.contains("64 hops, more than 63"), "{}", u.error);
    assert!(!d.complete());
    // A smaller bound is honoured too.
    let d = discover(
        &mut fab,
        &Options {
            max_hops: 5,
            ..Options::default()
        },
    );
    assert_eq!(d.subnet.nodes().len(), 6);
}

#[test]
fn node_and_mad_bounds_stop_the_walk() {
    let want = tree();
    let mut fab = FakeFabric::new(want.clone(), first_host(&want));
    let d = discover(
        &mut fab,
        &Options {
            max_nodes: 4,
            ..Options::default()
        },
    );
    assert_eq!(d.subnet.nodes().len(), 4);
    assert!(
        d.stopped.as_deref().unwrap().contains("4 nodes"),
        "{:?}",
        d.stopped
    );
    let d = discover(
        &mut fab,
        &Options {
            mad_budget: 20,
            ..Options::default()
        },
    );
    assert!(d.mads <= 20);
    assert!(
        d.stopped.as_deref().unwrap().contains("budget of 20"),
        "{:?}",
        d.stopped
    );
}

#[test]
fn a_walk_from_a_switch_starts_at_its_port_0() {
    let want = net(&rdmakit_testkit::ibsim::dumbbell());
    let s1 = guid_of(&want, "S1");
    let mut fab = FakeFabric::new(want.clone(), PortRef { guid: s1, port: 0 });
    let d = discover(&mut fab, &Options::default());
    assert!(d.complete(), "{:?}", d.unread);
    assert_eq!(links(&d.subnet), links(&want));
    assert_eq!(d.subnet.origin().map(|o| o.node_guid), Some(s1));
}

#[test]
fn a_silent_local_node_gives_an_empty_subnet() {
    let want = tree();
    let start = first_host(&want);
    let mut fab = FakeFabric::new(want, start);
    fab.silence(start.guid);
    let d = discover(&mut fab, &Options::default());
    assert!(d.subnet.nodes().is_empty());
    assert_eq!(d.unread.len(), 1);
    assert!(d.unread[0].path.is_empty() && d.unread[0].from.is_none());
}
