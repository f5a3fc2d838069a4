use std::collections::BTreeMap;

use rdmakit_types::{Speed, Width};

use super::*;
use crate::check::{self, CounterSnapshot, Facts};
use crate::counters::{PortCounters, SCHEMA as COUNTERS_SCHEMA};
use crate::discover::{self, fake::FakeFabric};
use crate::{fat_tree, ibnetdiscover};

/// Discovers `net` over the fake fabric and gives every node a LID, as an
/// SM would.
fn found(net: &str) -> Subnet {
    let want = ibnetdiscover::parse(net).unwrap_or_else(|e| panic!("{e}\n{net}"));
    let start = PortRef {
        guid: want.nodes()[0].guid,
        port: 1,
    };
    let mut fab = FakeFabric::new(want, start);
    let mut s = discover::discover(&mut fab, &discover::Options::default()).subnet;
    let guids: Vec<u64> = s.nodes().iter().map(|n| n.guid).collect();
    for (i, g) in guids.into_iter().enumerate() {
        let n = s.node_mut(g).unwrap();
        let lid = i as u16 + 1;
        match n.port0.as_mut() {
            Some(p0) => p0.lid = lid,
            None => n.ports.iter_mut().for_each(|p| p.lid = lid),
        }
    }
    s
}

fn by_desc<'a>(s: &'a Subnet, d: &str) -> &'a Node {
    s.nodes().iter().find(|n| n.desc == d).unwrap()
}

fn symbol_errors(s: &Subnet, desc: &str, port: u8, n: u64) -> Counters {
    let node = by_desc(s, desc);
    let counters: BTreeMap<String, u64> = [("SymbolErrorCounter", n), ("PortXmitWait", 7)]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    Counters {
        schema: COUNTERS_SCHEMA.to_string(),
        reset: false,
        mads: 1,
        ports: vec![PortCounters {
            node_guid: node.guid,
            node_desc: node.desc.clone(),
            kind: node.kind,
            port,
            lid: node.lid_of(node.port(port).unwrap()),
            counters,
            extended: None,
            saturated: Vec::new(),
        }],
        unread: Vec::new(),
    }
}

/// 2 spines, 2 leaves, 2 hosts a leaf; host-02 cabled at 1X; the cable
/// leaf2[4] - spine2[2] planned but not there.
fn small() -> (Subnet, Expected) {
    let plan = fat_tree(2, 2, 2, 1, Width::X4, Speed::Qdr).unwrap();
    let expected = Expected::parse(&plan).unwrap();
    let mut text = String::new();
    let mut record = String::new();
    for l in plan.lines() {
        if l.starts_with("Hca") || l.starts_with("Switch") {
            record = l.to_string();
        }
        if l.contains("\"spine2\"[2]") && record.contains("\"leaf2\"")
            || l.contains("\"leaf2\"[4]") && record.contains("\"spine2\"")
        {
            continue;
        }
        let narrow = (record.contains("\"host-02 HCA-1\"") && l.starts_with('['))
            || (record.contains("\"leaf1\"") && l.contains("\"host-02 HCA-1\""));
        let l = match narrow {
            true => l.replace("w=2", "w=1"),
            false => l.to_string(),
        };
        text.push_str(&l);
        text.push('\n');
    }
    (found(&text), expected)
}

fn small_picture() -> Picture {
    let (s, e) = small();
    let c = symbol_errors(&s, "leaf1", 3, 100);
    let snap = CounterSnapshot::new(c.clone(), Some(1.0));
    let findings = check::run(
        &Facts::new(&s).counters(&snap).expected(&e),
        &check::Config::default(),
    );
    picture(&s, Some(&c), &findings, Some(&e), &Options::default())
}

#[test]
fn picture_of_a_small_tree_with_three_faults() {
    let p = small_picture();
    insta::assert_json_snapshot!(p);
}

#[test]
fn each_fault_is_on_its_link() {
    let p = small_picture();
    let find = |a: &str, pa: u8, b: &str| {
        p.links
            .iter()
            .find(|l| l.a.desc == a && l.a.port == pa && l.b.desc == b)
            .unwrap_or_else(|| panic!("no {a}[{pa}] - {b} in {:#?}", p.links))
    };
    let narrow = find("leaf1", 2, "host-02 HCA-1");
    assert_eq!(narrow.health, Health::Degraded, "{narrow:?}");
    assert!(
        narrow.why.iter().any(|w| w.starts_with("RDK-F001")),
        "{narrow:?}"
    );
    let errors = find("spine1", 1, "leaf1");
    assert_eq!(errors.health, Health::Errors, "{errors:?}");
    assert_eq!(errors.b.errors["SymbolErrorCounter"], 100);
    assert!(
        errors.evidence.iter().any(
            |(w, v)| w.contains("port 3 PortCounters.SymbolErrorCounter") && v.contains("100")
        ),
        "{errors:?}"
    );
    let missing = find("spine2", 2, "leaf2");
    assert_eq!(missing.health, Health::Down, "{missing:?}");
    assert!(missing.why[0].contains("expected cable"), "{missing:?}");
    let ok = p.links.iter().filter(|l| l.health == Health::Ok).count();
    assert_eq!(p.links.len() - ok, 3, "{:#?}", p.links);
    // Tiers: spines on top, leaves, hosts.
    let kinds: Vec<Vec<&str>> = p
        .tiers
        .iter()
        .map(|t| t.iter().map(|b| p.boxes[*b].label.as_str()).collect())
        .collect();
    assert_eq!(
        kinds,
        [
            vec!["spine1", "spine2"],
            vec!["leaf1", "leaf2"],
            vec![
                "host-01 HCA-1",
                "host-02 HCA-1",
                "host-03 HCA-1",
                "host-04 HCA-1"
            ]
        ]
    );
}

#[test]
fn hosts_collapse_per_switch_and_faulty_host_links_stay_apart() {
    let s = found(&fat_tree(2, 4, 16, 1, Width::X4, Speed::Qdr).unwrap());
    let c = symbol_errors(&s, "leaf2", 5, 500);
    let snap = CounterSnapshot::new(c.clone(), Some(1.0));
    let findings = check::run(&Facts::new(&s).counters(&snap), &check::Config::default());
    let p = picture(&s, Some(&c), &findings, None, &Options::default());
    let bottom: Vec<&NodeBox> = p.tiers[2].iter().map(|b| &p.boxes[*b]).collect();
    assert_eq!(bottom.len(), 4);
    assert!(bottom.iter().all(|b| b.kind == "hosts" && b.hosts == 16));
    // Per leaf: one line for the 16 healthy cables, or 15 and the faulty
    // one (leaf2 port 5, host 21) on its own.
    let into_groups: Vec<&LinkView> = p
        .links
        .iter()
        .filter(|l| p.boxes[l.b.box_id].kind == "hosts")
        .collect();
    assert_eq!(into_groups.len(), 5, "{into_groups:#?}");
    let bad: Vec<&&LinkView> = into_groups
        .iter()
        .filter(|l| l.health != Health::Ok)
        .collect();
    assert_eq!(bad.len(), 1);
    assert_eq!((bad[0].a.desc.as_str(), bad[0].a.port), ("leaf2", 5));
    assert_eq!(bad[0].b.desc, "host-21 HCA-1");
    let cables: usize = into_groups.iter().map(|l| l.cables).sum();
    assert_eq!(cables, 64);
    assert_eq!(p.boxes[bad[0].b.box_id].health, Health::Errors);
}

#[test]
fn five_hundred_hosts_stay_a_few_dozen_boxes() {
    // 26 leaves of 20 hosts under 4 spines: 550 nodes.
    let s = ibnetdiscover::parse(&fat_tree(4, 26, 20, 1, Width::X4, Speed::Qdr).unwrap()).unwrap();
    assert_eq!(s.nodes().len(), 550);
    let p = picture(&s, None, &[], None, &Options::default());
    let widths: Vec<usize> = p.tiers.iter().map(Vec::len).collect();
    assert_eq!(widths, [4, 26, 26]);
    // 520 host cables in 26 lines, 104 uplinks one each.
    assert_eq!(p.links.len(), 26 + 104);
    // Many small leaves: past max_host_boxes every switch's hosts collapse.
    let s = ibnetdiscover::parse(&fat_tree(2, 100, 5, 1, Width::X4, Speed::Qdr).unwrap()).unwrap();
    let p = picture(&s, None, &[], None, &Options::default());
    assert_eq!(p.tiers[2].len(), 100, "one box a leaf, not 500");
}

#[test]
fn tiers_come_from_the_graph() {
    let s = ibnetdiscover::parse(&fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).unwrap()).unwrap();
    let t = tiers(&s);
    for n in s.nodes() {
        let want = match n.desc.as_str() {
            d if d.starts_with("spine") => 2,
            d if d.starts_with("leaf") => 1,
            _ => 0,
        };
        assert_eq!(t[&n.guid], want, "{}", n.desc);
    }
}

#[test]
fn evidence_paths_name_ports_exactly() {
    let r = ports_named(
        "leaf1 (0x0000000000200000) port 3 PortCounters.X and (0x0000000000000001) port 12",
    );
    assert_eq!(
        r,
        [
            PortRef {
                guid: 0x20_0000,
                port: 3
            },
            PortRef { guid: 1, port: 12 }
        ]
    );
    assert!(ports_named("(0xzz) port 1 (0x00000000002) port").is_empty());
    assert!(on_port_path(
        "x (0x0000000000000001) port 3 y",
        "(0x0000000000000001) port 3"
    ));
    assert!(!on_port_path(
        "x (0x0000000000000001) port 30",
        "(0x0000000000000001) port 3"
    ));
    assert_eq!(health_of(&[], true), Health::Down);
    assert_eq!(health_of(&[], false), Health::Ok);
}
