use super::fake::{assign_lids, shortest_lfts, FakeLfts};
use super::*;
use crate::{fat_tree, ibnetdiscover};
use rdmakit_types::{Speed, Width};

/// The fat tree of the live tests: 2 spines, 4 leaves, 16 hosts, LIDs in
/// node order (hosts 1-16, leaves 17-20, spines 21-22).
fn tree() -> Subnet {
    let net = fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).unwrap();
    let mut s = ibnetdiscover::parse(&net).unwrap();
    assign_lids(&mut s);
    s
}

fn lid(s: &Subnet, name: &str) -> u16 {
    resolve(s, name).unwrap()
}

fn guid(s: &Subnet, desc: &str) -> u64 {
    s.nodes_by_desc(desc).next().unwrap().guid
}

#[test]
fn read_lfts_reads_switch_info_then_every_block_in_two_batches() {
    let s = tree();
    let want = shortest_lfts(&s);
    let mut fake = FakeLfts::new(want.clone());
    let got = read_lfts(&mut fake, &s);
    assert!(got.complete(), "{:?}", got.unread);
    assert_eq!(got.switches, want.switches);
    // 6 SwitchInfo, then 6 switches x 1 block (LIDs up to 22).
    assert_eq!(fake.batches, [6, 6]);
    assert_eq!(got.mads, 12);
}

#[test]
fn read_lfts_bounds_blocks_whatever_linear_fdb_top_claims() {
    let s = tree();
    let mut tables = shortest_lfts(&s);
    tables.switches[0].linear_fdb_top = 0xffff;
    let mut fake = FakeLfts::new(tables);
    let got = read_lfts(&mut fake, &s);
    assert_eq!(fake.batches[1], 5 + MAX_BLOCKS as usize);
    assert_eq!(got.switches[0].ports.len(), 49152);
}

#[test]
fn read_lfts_names_a_switch_that_does_not_answer() {
    let s = tree();
    let mut tables = shortest_lfts(&s);
    let gone = tables.switches.remove(2);
    let mut fake = FakeLfts::new(tables);
    let got = read_lfts(&mut fake, &s);
    assert_eq!(got.switches.len(), 5);
    assert_eq!(got.unread.len(), 1);
    assert_eq!(got.unread[0].guid, gone.guid);
    assert_eq!(got.unread[0].what, "SwitchInfo");
    // A route through it says which switch has no table.
    let e = route(&s, &got, lid(&s, "host-01 HCA-1"), lid(&s, "host-09 HCA-1")).unwrap_err();
    assert!(
        matches!(&e, RouteError::NoTable { desc, .. } if desc == "leaf3"),
        "{e}"
    );
}

#[test]
fn same_leaf_route_crosses_one_switch() {
    let s = tree();
    let l = shortest_lfts(&s);
    let r = route(&s, &l, lid(&s, "host-01 HCA-1"), lid(&s, "host-02 HCA-1")).unwrap();
    let hops: Vec<_> = r
        .hops
        .iter()
        .map(|h| (h.desc.as_str(), h.in_port, h.out_port))
        .collect();
    assert_eq!(hops, [("leaf1", 1, 2)]);
    assert!(r.isls().is_empty());
    assert_eq!(compact(&r), "leaf1[1→2]");
    assert_eq!(r.ports().len(), 4);
}

#[test]
fn cross_leaf_route_goes_up_a_spine_and_down() {
    let s = tree();
    let l = shortest_lfts(&s);
    let r = route(&s, &l, lid(&s, "host-01 HCA-1"), lid(&s, "host-16 HCA-1")).unwrap();
    let hops: Vec<_> = r
        .hops
        .iter()
        .map(|h| (h.desc.as_str(), h.in_port, h.out_port))
        .collect();
    // Min-hop, lowest port: leaf1 port 5 to spine1 port 1, spine1 port 4
    // to leaf4 port 5, leaf4 port 4 to host 16.
    assert_eq!(hops, [("leaf1", 1, 5), ("spine1", 1, 4), ("leaf4", 5, 4)]);
    let isls = r.isls();
    assert_eq!(isls.len(), 2);
    assert_eq!(
        isls[0].from,
        PortRef {
            guid: guid(&s, "leaf1"),
            port: 5
        }
    );
    assert_eq!(
        isls[0].to,
        PortRef {
            guid: guid(&s, "spine1"),
            port: 1
        }
    );
    let t = text(&r);
    assert!(t.starts_with("From ca {"), "{t}");
    assert!(t.contains("[5] -> switch port {"), "{t}");
    assert!(t.contains("[4] -> ca port {"), "{t}");
    assert!(t.ends_with("lid 16 \"host-16 HCA-1\"\n"), "{t}");
}

#[test]
fn a_route_to_a_switch_ends_at_its_port_0() {
    let s = tree();
    let l = shortest_lfts(&s);
    let r = route(&s, &l, lid(&s, "host-01 HCA-1"), lid(&s, "spine2")).unwrap();
    assert_eq!(
        r.hops.last().map(|h| (h.desc.as_str(), h.out_port)),
        Some(("spine2", 0))
    );
    let back = route(&s, &l, lid(&s, "spine2"), lid(&s, "host-01 HCA-1")).unwrap();
    assert_eq!(back.hops[0].in_port, 0);
    assert_eq!(back.hops.len(), 2);
}

#[test]
fn a_hole_names_the_switch() {
    let s = tree();
    let mut l = shortest_lfts(&s);
    let dst = lid(&s, "host-16 HCA-1");
    let spine1 = guid(&s, "spine1");
    let t = l.switches.iter_mut().find(|t| t.guid == spine1).unwrap();
    t.ports[usize::from(dst)] = 0xff;
    let e = route(&s, &l, lid(&s, "host-01 HCA-1"), dst).unwrap_err();
    assert!(
        matches!(&e, RouteError::Hole { desc, dlid, .. } if desc == "spine1" && *dlid == dst),
        "{e}"
    );
    assert!(e.to_string().contains("\"spine1\""), "{e}");
    // Past LinearFDBTop is a hole too.
    let t = l.switches.iter_mut().find(|t| t.guid == spine1).unwrap();
    t.linear_fdb_top = 3;
    let e = route(&s, &l, lid(&s, "host-01 HCA-1"), lid(&s, "host-15 HCA-1")).unwrap_err();
    assert!(matches!(e, RouteError::Hole { .. }), "{e}");
}

#[test]
fn a_loop_names_the_switch_met_again() {
    let s = tree();
    let mut l = shortest_lfts(&s);
    let dst = lid(&s, "host-16 HCA-1");
    // spine1 sends host 16 back down to leaf1 (its port 1).
    let spine1 = guid(&s, "spine1");
    let t = l.switches.iter_mut().find(|t| t.guid == spine1).unwrap();
    t.ports[usize::from(dst)] = 1;
    let e = route(&s, &l, lid(&s, "host-01 HCA-1"), dst).unwrap_err();
    assert!(
        matches!(&e, RouteError::Loop { desc, hops: 2, .. } if desc == "leaf1"),
        "{e}"
    );
}

#[test]
fn a_route_longer_than_the_bound_is_stopped() {
    // A chain of 70 switches: host A - sw1 - sw2 - ... - sw70 - host B.
    let mut net = String::new();
    net.push_str("Hca\t1 \"A\"\n[1]\t\"sw1\"[1]\n\nHca\t1 \"B\"\n[1]\t\"sw70\"[2]\n\n");
    for i in 1..=70 {
        net.push_str(&format!("Switch\t3 \"sw{i}\"\n"));
        match i {
            1 => net.push_str("[1]\t\"A\"[1]\n"),
            _ => net.push_str(&format!("[1]\t\"sw{}\"[2]\n", i - 1)),
        }
        match i {
            70 => net.push_str("[2]\t\"B\"[1]\n"),
            _ => net.push_str(&format!("[2]\t\"sw{}\"[1]\n", i + 1)),
        }
        net.push('\n');
    }
    let mut s = ibnetdiscover::parse(&net).unwrap();
    assign_lids(&mut s);
    let l = shortest_lfts(&s);
    let e = route(&s, &l, lid(&s, "A"), lid(&s, "B")).unwrap_err();
    assert!(
        matches!(&e, RouteError::TooLong { desc, .. } if desc == "sw65"),
        "{e}"
    );
}

#[test]
fn an_uncabled_egress_port_is_a_dead_end() {
    let s = tree();
    let mut l = shortest_lfts(&s);
    let dst = lid(&s, "host-05 HCA-1");
    let leaf1 = guid(&s, "leaf1");
    let t = l.switches.iter_mut().find(|t| t.guid == leaf1).unwrap();
    t.ports[usize::from(dst)] = 8; // leaf1 has 6 ports cabled
    let e = route(&s, &l, lid(&s, "host-01 HCA-1"), dst).unwrap_err();
    assert!(
        matches!(&e, RouteError::DeadEnd { port: 8, desc, .. } if desc == "leaf1"),
        "{e}"
    );
}

#[test]
fn resolve_takes_a_lid_a_guid_or_a_description() {
    let s = tree();
    let h = s.nodes_by_desc("host-03 HCA-1").next().unwrap();
    let l = h.ports[0].lid;
    assert_eq!(resolve(&s, &l.to_string()).unwrap(), l);
    assert_eq!(resolve(&s, &format!("{:#x}", h.guid)).unwrap(), l);
    assert_eq!(resolve(&s, &format!("{:#x}", h.ports[0].guid)).unwrap(), l);
    assert!(resolve(&s, "nobody")
        .unwrap_err()
        .to_string()
        .contains("no node"));
    assert!(matches!(
        resolve(&s, "999"),
        Err(RouteError::UnknownLid(999))
    ));
}

#[test]
fn a_saved_fabric_without_routes_still_reads() {
    let s = tree();
    let old = format!(
        r#"{{"subnet": {}, "unread": [], "mads": 3, "stopped": null}}"#,
        serde_json::to_string(&s).unwrap()
    );
    let f = FabricFile::from_json(&old).unwrap();
    assert!(f.lfts.is_none());
    assert!(matches!(f.route(1, 2), Err(RouteError::NoTable { .. })));
    let new = format!(
        r#"{{"subnet": {}, "lfts": {}}}"#,
        serde_json::to_string(&s).unwrap(),
        serde_json::to_string(&shortest_lfts(&s)).unwrap()
    );
    let f = FabricFile::from_json(&new).unwrap();
    assert!(f.route(1, 16).is_ok());
    assert!(FabricFile::from_json("{").is_err());
}
