use std::collections::BTreeMap;

use rdmakit_fabric::check::{self, CounterSnapshot, Facts};
use rdmakit_fabric::counters::{Counters, PortCounters, SCHEMA};
use rdmakit_fabric::view::{self, Options};
use rdmakit_fabric::{fat_tree, ibnetdiscover, LinkWidths, Subnet};
use rdmakit_types::{Speed, Width};

use super::*;
use crate::embedded_json;

/// 1 spine, 2 leaves, 2 hosts a leaf, read from ibsim's net format (no LIDs:
/// a finding on no link); host-02's link at 1X where leaf1 could do 4X, 100
/// symbol errors on leaf2's uplink.
fn small() -> (Subnet, Counters) {
    let net = fat_tree(1, 2, 2, 1, Width::X4, Speed::Qdr).unwrap();
    let mut text = String::new();
    let mut record = String::new();
    for l in net.lines() {
        if !l.starts_with('[') {
            record = l.to_string();
        }
        let narrow = record.contains("\"host-02 HCA-1\"") && l.starts_with('[')
            || record.contains("\"leaf1\"") && l.contains("\"host-02 HCA-1\"");
        text.push_str(&if narrow {
            l.replace("w=2", "w=1")
        } else {
            l.to_string()
        });
        text.push('\n');
    }
    let mut s = ibnetdiscover::parse(&text).unwrap();
    // Discovery's view of the narrow link: 1X active, 4X supported and
    // enabled at both ends.
    for (d, port, enabled) in [("leaf1", 2, 0x3), ("host-02 HCA-1", 1, 0x3)] {
        let g = s.nodes().iter().find(|n| n.desc == d).unwrap().guid;
        let p = s.node_mut(g).unwrap().port_mut(port).unwrap();
        p.width = LinkWidths::from_port_info(1, enabled, 0x3);
    }
    let leaf2 = s.nodes().iter().find(|n| n.desc == "leaf2").unwrap();
    let counters: BTreeMap<String, u64> = [("SymbolErrorCounter".to_string(), 100)].into();
    let c = Counters {
        schema: SCHEMA.into(),
        reset: false,
        mads: 1,
        ports: vec![PortCounters {
            node_guid: leaf2.guid,
            node_desc: leaf2.desc.clone(),
            kind: leaf2.kind,
            port: 3,
            lid: 3,
            counters,
            extended: None,
            saturated: Vec::new(),
        }],
        unread: Vec::new(),
    };
    (s, c)
}

fn page() -> String {
    let (s, c) = small();
    let snap = CounterSnapshot::new(c.clone(), Some(1.0));
    let findings = check::run(&Facts::new(&s).counters(&snap), &check::Config::default());
    let p = view::picture(&s, Some(&c), &findings, None, &Options::default());
    render(&p, "rdmakit fabric", &Meta::default()).unwrap()
}

/// The page's structure without coordinates: each group of the SVG (its
/// class, id, data attributes) with its hover text, and the fault list.
fn outline(html: &str) -> String {
    let mut out = String::new();
    for part in html.split("<g ").skip(1) {
        let head = &part[..part.find('>').unwrap()];
        let attrs: Vec<&str> = head
            .split("\" ")
            .filter(|a| a.starts_with("class=") || a.starts_with("id=") || a.starts_with("data-"))
            .collect();
        let _ = writeln!(out, "g {}", attrs.join("\" ").trim_end_matches('"'));
        if let Some(t) = part
            .strip_prefix(head)
            .and_then(|r| r.strip_prefix("><title>"))
        {
            let t = &t[..t.find("</title>").unwrap()];
            for l in t.lines() {
                let _ = writeln!(out, "  | {l}");
            }
        }
    }
    let list = &html[html.find("<aside").unwrap()..html.find("</aside>").unwrap()];
    for li in list.split("<li class=\"fault").skip(1) {
        let head = &li[..li.find('>').unwrap()];
        let _ = writeln!(out, "fault{head}");
    }
    out
}

#[test]
fn page_of_a_small_tree_with_a_narrow_link_and_symbol_errors() {
    let html = page();
    insta::assert_snapshot!(outline(&html));
}

#[test]
fn the_page_is_self_contained_and_carries_the_picture() {
    let html = page();
    for bad in ["http:", "https:", "//", "<script src", "<link"] {
        assert!(!html.contains(bad), "{bad} in the page");
    }
    let data = embedded_json(&html).unwrap();
    assert_eq!(data["kind"], "fabric");
    assert_eq!(data["data"]["schema"], view::SCHEMA);
    // Two faults, framed and listed, numbered alike.
    assert_eq!(html.matches("<g class=\"frame ").count(), 2);
    assert!(html.contains("id=\"fault-1\"") && html.contains("id=\"fault-2\""));
    assert!(!html.contains("id=\"fault-3\""));
}

#[test]
fn a_healthy_fabric_says_so() {
    let s = ibnetdiscover::parse(&fat_tree(1, 2, 2, 1, Width::X4, Speed::Qdr).unwrap()).unwrap();
    let p = view::picture(&s, None, &[], None, &Options::default());
    let html = render(&p, "rdmakit fabric", &Meta::default()).unwrap();
    assert!(html.contains("0 faulty links"), "{html}");
    assert!(html.contains("None: every link is up"));
    assert_eq!(html.matches("<g class=\"frame ").count(), 0);
}

#[test]
fn a_hostile_description_is_escaped_and_cut_in_its_box() {
    let mut s =
        ibnetdiscover::parse(&fat_tree(1, 1, 1, 1, Width::X4, Speed::Qdr).unwrap()).unwrap();
    let g = s.nodes()[0].guid;
    s.node_mut(g).unwrap().desc = "<script>alert(1)</script>//x".repeat(3);
    let p = view::picture(&s, None, &[], None, &Options::default());
    let html = render(&p, "rdmakit fabric", &Meta::default()).unwrap();
    assert!(!html.contains("<script>alert"), "unescaped");
    assert!(!html[..html.find("<script type").unwrap()].contains("//"));
    assert!(
        html.contains(">&lt;script&gt;alert(…</text>"),
        "the box shows 14 characters and …"
    );
}

#[test]
fn five_hundred_and_fifty_nodes_are_a_page_of_fifty_six_boxes() {
    // 4 spines, 26 leaves of 20 hosts: each leaf's hosts one box.
    let s = ibnetdiscover::parse(&fat_tree(4, 26, 20, 1, Width::X4, Speed::Qdr).unwrap()).unwrap();
    let p = view::picture(&s, None, &[], None, &Options::default());
    let html = render(&p, "rdmakit fabric", &Meta::default()).unwrap();
    assert_eq!(html.matches("<g class=\"node ").count(), 4 + 26 + 26);
    assert_eq!(html.matches("<g class=\"link ").count(), 104 + 26);
    assert!(html.contains(">20 hosts</text>"));
    eprintln!("550 nodes: {} bytes", html.len());
    assert!(html.len() < 400_000, "{} bytes", html.len());
    let w: f64 = html
        .split("<svg class=\"fabric\" width=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .and_then(|w| w.parse().ok())
        .unwrap();
    // 26 leaves a box wide each: the picture scrolls, the boxes keep their size.
    assert_eq!(w, 2.0 * MARGIN + 26.0 * (BOX_W + GAP) - GAP);
}
