//! The real captures of fixtures/fabric (ibsim + opensm + unmodified
//! infiniband-diags on the generated 2-spine, 4-leaf, 16-host fat tree; see
//! its SOURCE): parsed, written back line for line, and compared with the
//! generated net file and the cable list.

use rdmakit_fabric::expected::{End, NodeKey};
use rdmakit_fabric::ibnetdiscover::{self, WriteOptions};
use rdmakit_fabric::{compare, fat_tree, CablingDiff, Expected, NodeKind, PortRef, Subnet};
use rdmakit_testkit::fixture_bytes;
use rdmakit_types::{Speed, Width};

fn text(name: &str) -> String {
    String::from_utf8(fixture_bytes(&format!("fabric/{name}"))).expect("UTF-8 fixture")
}

fn found(name: &str) -> Subnet {
    ibnetdiscover::parse(&text(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn guid_of(s: &Subnet, desc: &str) -> u64 {
    let mut it = s.nodes_by_desc(desc);
    let n = it.next().unwrap_or_else(|| panic!("no node {desc:?}"));
    assert!(it.next().is_none(), "two nodes {desc:?}");
    n.guid
}

fn d(desc: &str, port: u8) -> End {
    End {
        node: NodeKey::Desc(desc.into()),
        port,
    }
}

#[test]
fn ibnetdiscover_of_the_fat_tree_has_22_nodes_their_links_lids_and_widths() {
    let s = found("ibnetdiscover.txt");
    let count = |k| s.nodes().iter().filter(|n| n.kind == k).count();
    assert_eq!(
        (
            s.nodes().len(),
            count(NodeKind::Switch),
            count(NodeKind::Ca)
        ),
        (22, 6, 16)
    );
    let origin = s.origin().expect("Initiated from line");
    assert_eq!((origin.node_guid, origin.port_guid), (0x100000, 0x100001));
    // 16 host cables and 2 x 4 leaf-spine cables, each once.
    let links: Vec<_> = s.links().collect();
    assert_eq!(links.len(), 24);
    // Every port of every link is 4X QDR, as the net file's w=2 s=4 asks.
    for n in s.nodes() {
        for p in &n.ports {
            assert_eq!(
                (p.width.active, p.speed.active),
                (Some(Width::X4), Some(Speed::Qdr))
            );
        }
    }
    // The placement of the generator: host-07 on leaf2 port 3, leaf3's
    // uplink to spine2 on its port 6 and spine2's port 3.
    let leaf2 = guid_of(&s, "leaf2");
    let host7 = s.node(guid_of(&s, "host-07 HCA-1")).unwrap();
    assert_eq!(
        host7.ports[0].remote,
        Some(PortRef {
            guid: leaf2,
            port: 3
        })
    );
    let leaf3 = s.node(guid_of(&s, "leaf3")).unwrap();
    assert_eq!(
        leaf3.port(6).and_then(|p| p.remote),
        Some(PortRef {
            guid: guid_of(&s, "spine2"),
            port: 3
        })
    );
    // LIDs opensm gave: host-01 1, leaf1 2, host-16 22, by LID both ways.
    assert_eq!(host7.ports[0].lid, 13);
    let (n, p) = s.by_lid(22).unwrap();
    assert_eq!(
        (n.desc.as_str(), p.map(|p| p.guid)),
        ("host-16 HCA-1", Some(0x10001f))
    );
    let (n, p) = s.by_lid(2).unwrap();
    assert_eq!((n.desc.as_str(), p.is_none()), ("leaf1", true));
    assert_eq!(
        n.port0.map(|p| (p.guid, p.lmc, p.enhanced)),
        Some((0x200000, 0, false))
    );
}

/// `ibnetdiscover -p` is another tool's view of the same fabric: each of its
/// lines gives a port's LID, number, GUID, width and speed and its peer's.
#[test]
fn every_port_of_ibnetdiscover_p_is_in_the_model() {
    let s = found("ibnetdiscover.txt");
    let p_text = text("ibnetdiscover-p.txt");
    let mut lines = 0;
    for l in p_text.lines().filter(|l| !l.trim().is_empty()) {
        // CA    22  1 0x000000000010001f 4x QDR - SW     6  4 0x0000000000200003 ( ...
        let f: Vec<&str> = l.split_whitespace().collect();
        let num = |i: usize| f[i].parse::<u64>().unwrap();
        let hex = |i: usize| u64::from_str_radix(&f[i][2..], 16).unwrap();
        let (lid, port, guid) = (num(1), num(2) as u8, hex(3));
        let (peer_lid, peer_port, peer_guid) = (num(8), num(9) as u8, hex(10));
        let node = s
            .nodes()
            .iter()
            .find(|n| n.port(port).is_some_and(|p| p.guid == guid))
            .unwrap_or_else(|| panic!("no port {port} with GUID {guid:#x}: {l}"));
        let p = node.port(port).unwrap();
        assert_eq!(u64::from(node.lid_of(p)), lid, "{l}");
        assert_eq!(p.width.active.map(Width::name), Some("4X"), "{l}");
        assert_eq!(f[5], p.speed.active.unwrap().name(), "{l}");
        let r = p.remote.unwrap();
        let peer = s.node(r.guid).unwrap();
        let q = peer.port(r.port).unwrap();
        assert_eq!(
            (r.port, q.guid, u64::from(peer.lid_of(q))),
            (peer_port, peer_guid, peer_lid),
            "{l}"
        );
        lines += 1;
    }
    // ibnetdiscover -p lists each end of each cable.
    assert_eq!(lines, 2 * s.links().count());
    // iblinkinfo shows the same links up: 48 port lines at 4X 10.0 Gbps.
    let linkinfo = text("iblinkinfo.txt");
    assert_eq!(
        linkinfo
            .matches("==( 4X          10.0 Gbps Active/  LinkUp)==>")
            .count(),
        48
    );
}

fn generated_on(t: &str) -> Option<String> {
    t.lines()
        .find_map(|l| l.strip_prefix("# Topology file: generated on "))
        .map(str::to_string)
}

#[test]
fn the_writer_prints_each_capture_exactly_as_ibnetdiscover_did() {
    for name in [
        "ibnetdiscover.txt",
        "fault-unplugged.ibnetdiscover.txt",
        "fault-swapped.ibnetdiscover.txt",
        "extra-cable.ibnetdiscover.txt",
    ] {
        let t = text(name);
        let s = ibnetdiscover::parse(&t).unwrap();
        let opts = WriteOptions {
            generated_on: generated_on(&t),
        };
        assert!(opts.generated_on.is_some(), "{name}");
        let w = ibnetdiscover::write(&s, &opts);
        for (i, (a, b)) in t.lines().zip(w.lines()).enumerate() {
            assert_eq!(a, b, "{name} line {}", i + 1);
        }
        assert_eq!(w, t, "{name}: the texts differ past the shorter one");
        assert_eq!(ibnetdiscover::parse(&w).unwrap(), s, "{name}");
    }
}

#[test]
fn the_parsed_capture_survives_json() {
    let s = found("ibnetdiscover.txt");
    let j = serde_json::to_string_pretty(&s).unwrap();
    assert!(j.contains("\"schema\": \"rdmakit.fabric/v1\""));
    let back: Subnet = serde_json::from_str(&j).unwrap();
    assert_eq!(back, s);
    // A snapshot of one switch and one host, so a change to the schema shows.
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    let nodes = v["nodes"].as_array().unwrap();
    let leaf4 = nodes.iter().find(|n| n["desc"] == "leaf4").unwrap();
    let host16 = nodes.iter().find(|n| n["desc"] == "host-16 HCA-1").unwrap();
    insta::assert_json_snapshot!("leaf4_and_host16", [leaf4, host16]);
}

#[test]
fn the_generator_made_the_net_file_of_the_capture() {
    let net = fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).unwrap();
    assert_eq!(net, text("fat-tree-2x4x4.net"));
}

#[test]
fn the_generated_net_file_and_the_cable_list_expect_what_was_found() {
    let s = found("ibnetdiscover.txt");
    let exp = Expected::parse(&text("fat-tree-2x4x4.net")).unwrap();
    assert_eq!(exp.cables().count(), 24);
    assert_eq!(compare(&exp, &s), []);
    let list = Expected::parse(&text("fat-tree-2x4x4.cables")).unwrap();
    assert_eq!(list, exp);
    assert_eq!(compare(&list, &s), []);
    // ibnetdiscover's own output as the statement: the same cables.
    assert_eq!(Expected::parse(&text("ibnetdiscover.txt")).unwrap(), exp);
}

#[test]
fn an_unplugged_cable_is_missing() {
    let exp = Expected::parse(&text("fat-tree-2x4x4.net")).unwrap();
    let diffs = compare(&exp, &found("fault-unplugged.ibnetdiscover.txt"));
    assert_eq!(
        diffs,
        [CablingDiff::Missing {
            a: d("leaf4", 6),
            b: d("spine2", 4)
        }]
    );
    assert_eq!(
        diffs[0].to_string(),
        "missing cable \"leaf4\"[6] - \"spine2\"[4]"
    );
}

#[test]
fn an_extra_cable_is_extra() {
    let exp = Expected::parse(&text("fat-tree-2x4x4.net")).unwrap();
    let diffs = compare(&exp, &found("extra-cable.ibnetdiscover.txt"));
    assert_eq!(
        diffs,
        [CablingDiff::Extra {
            a: d("leaf1", 7),
            b: d("leaf2", 7)
        }]
    );
}

#[test]
fn two_swapped_host_cables_are_one_swap() {
    let exp = Expected::parse(&text("fat-tree-2x4x4.cables")).unwrap();
    let diffs = compare(&exp, &found("fault-swapped.ibnetdiscover.txt"));
    assert_eq!(
        diffs,
        [CablingDiff::Swapped {
            first: (d("host-03 HCA-1", 1), d("leaf1", 3)),
            second: (d("host-04 HCA-1", 1), d("leaf1", 4)),
        }]
    );
    assert_eq!(
        diffs[0].to_string(),
        "cables swapped: \"host-03 HCA-1\"[1] goes to \"leaf1\"[4] and \"host-04 HCA-1\"[1] to \
         \"leaf1\"[3]; expected \"host-03 HCA-1\"[1] - \"leaf1\"[3] and \"host-04 HCA-1\"[1] - \"leaf1\"[4]"
    );
}

#[test]
fn guids_in_a_cable_list_match_by_guid() {
    // host-05 (GUID 0x100008, as ibsim numbers it) named by GUID, and on
    // the wrong port.
    let list = "0x100008[1] \"leaf2\"[2]\n\"host-06 HCA-1\"[1] \"leaf2\"[1]\n";
    let exp = Expected::parse(list).unwrap();
    let mut s = found("ibnetdiscover.txt");
    // Keep only leaf2's two first cables.
    let keep = |g: u64, p: u8| (g == 0x100008 || g == 0x10000a) && p == 1;
    let leaf2 = guid_of(&s, "leaf2");
    let hosts: Vec<u64> = s.nodes().iter().map(|n| n.guid).collect();
    for g in hosts {
        let n = s.node_mut(g).unwrap();
        for p in &mut n.ports {
            let k = keep(g, p.num) || (g == leaf2 && (p.num == 1 || p.num == 2));
            if !k {
                p.remote = None;
            }
        }
    }
    let diffs = compare(&exp, &s);
    assert_eq!(
        diffs,
        [CablingDiff::Swapped {
            first: (d("host-06 HCA-1", 1), d("leaf2", 1)),
            second: (
                End {
                    node: NodeKey::Guid(0x100008),
                    port: 1
                },
                d("leaf2", 2)
            ),
        }]
    );
}
