use std::collections::BTreeMap;

use rdmakit_fabric::counters::{PmaRequest, PortCounters, Unread, SCHEMA};
use rdmakit_fabric::discover::fake::FakeFabric;
use rdmakit_fabric::discover::SmpGet;
use rdmakit_fabric::topology::PortRef;
use rdmakit_fabric::{fat_tree, ibnetdiscover};
use rdmakit_types::{Speed, Width};
use rdmakit_umad::MadError;

use super::*;
use crate::text::valid_metric_name;

/// One leaf, two hosts, one host cabled at 1X of its 4X: ibsim's net format
/// (`w=` 1 is 1X), found by discovery over the fake fabric.
const NET: &str = "\
Hca\t1 \"host-01 HCA-1\"
[1]\t\"leaf1\"[1]\tw=2 s=4

Hca\t1 \"host-02 HCA-1\"
[1]\t\"leaf1\"[2]\tw=1 s=4

Switch\t4 \"leaf1\"
[1]\t\"host-01 HCA-1\"[1]\tw=2 s=4
[2]\t\"host-02 HCA-1\"[1]\tw=1 s=4
";

fn found() -> Discovery {
    let want = ibnetdiscover::parse(NET).expect("the test net");
    let start = PortRef {
        guid: want.nodes()[0].guid,
        port: 1,
    };
    let mut fab = FakeFabric::new(want, start);
    let mut d = discover::discover(&mut fab, &discover::Options::default());
    assert!(d.complete(), "{:?}", d.unread);
    // The SM's LIDs, which the fake does not hand out.
    for (i, g) in d
        .subnet
        .nodes()
        .iter()
        .map(|n| n.guid)
        .collect::<Vec<_>>()
        .into_iter()
        .enumerate()
    {
        let n = d.subnet.node_mut(g).unwrap();
        let lid = i as u16 + 1;
        match n.port0.as_mut() {
            Some(p0) => p0.lid = lid,
            None => n.ports.iter_mut().for_each(|p| p.lid = lid),
        }
    }
    // A description with what the text format must escape, as a node may
    // report it.
    let g = d.subnet.nodes_by_desc("host-02 HCA-1").next().unwrap().guid;
    d.subnet.node_mut(g).unwrap().desc = "evil\"desc\\ with\nnewline".into();
    d
}

fn port(n: &Node, port: u8, counters: &[(&str, u64)], ext: Option<&[(&str, u64)]>) -> PortCounters {
    let map = |kv: &[(&str, u64)]| -> BTreeMap<String, u64> {
        kv.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    PortCounters {
        node_guid: n.guid,
        node_desc: n.desc.clone(),
        kind: n.kind,
        port,
        lid: n.lid_of(n.port(port).unwrap()),
        counters: map(counters),
        extended: ext.map(map),
        saturated: Vec::new(),
    }
}

fn counters(d: &Discovery) -> Counters {
    let by = |desc: &str| d.subnet.nodes().iter().find(|n| n.desc == desc).unwrap();
    let (host, evil, leaf) = (
        by("host-01 HCA-1"),
        by("evil\"desc\\ with\nnewline"),
        by("leaf1"),
    );
    Counters {
        schema: SCHEMA.to_string(),
        reset: false,
        mads: 9,
        ports: vec![
            port(
                host,
                1,
                &[
                    ("PortXmitData", 1000),
                    ("PortRcvData", 10),
                    ("QP1Dropped", 2),
                ],
                Some(&[("PortXmitData", 1 << 40), ("PortUnicastXmitPkts", 5)]),
            ),
            port(
                leaf,
                2,
                &[
                    ("SymbolErrorCounter", 100),
                    ("LinkDownedCounter", 3),
                    ("PortXmitWait", 5000),
                    ("VL15Dropped", 0),
                ],
                None,
            ),
        ],
        unread: vec![Unread {
            node_guid: evil.guid,
            node_desc: evil.desc.clone(),
            port: 1,
            lid: 2,
            what: "PortCounters".into(),
            error: "timed out (fabric layer)".into(),
        }],
    }
}

#[test]
fn exposition_of_a_leaf_and_two_hosts() {
    let d = found();
    let c = counters(&d);
    let text = render(&View {
        found: &d,
        counters: &c,
        discovery: Duration::from_millis(1500),
        age: Duration::from_secs(2),
    });
    insta::assert_snapshot!(text);
}

#[test]
fn data_counters_are_bytes_and_extended_wins() {
    let d = found();
    let c = counters(&d);
    let text = render(&View {
        found: &d,
        counters: &c,
        discovery: Duration::ZERO,
        age: Duration::ZERO,
    });
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
            .to_string()
    };
    // PortXmitData from PortCountersExtended (2^40 words), times 4.
    assert!(line("rdmakit_fabric_port_data_transmitted_bytes_total{")
        .ends_with(&format!(" {}", (1u128 << 40) * 4)));
    // PortRcvData from PortCounters alone: 10 words.
    assert!(line("rdmakit_fabric_port_data_received_bytes_total{").ends_with(" 40"));
    assert!(line("rdmakit_fabric_symbol_error_total{").contains("node_type=\"switch\",port=\"2\""));
    assert!(
        text.contains(r#"node_desc="evil\"desc\\ with newline""#),
        "{text}"
    );
    assert!(
        text.contains("rdmakit_fabric_unreachable_nodes 1\n"),
        "{text}"
    );
    assert!(
        text.contains("rdmakit_fabric_port_link_width_lanes{node_guid"),
        "{text}"
    );
}

#[test]
fn every_mapped_counter_keeps_a_node_exporter_name() {
    for mp in MAPPED {
        let pc = PORT_COUNTERS.iter().find(|pc| pc.metric == mp.metric);
        assert!(pc.is_some(), "{} is not node_exporter's", mp.metric);
        assert_eq!(
            pc.unwrap().scale == 4,
            mp.pma.ends_with("Data"),
            "{}",
            mp.pma
        );
        assert!(valid_metric_name(&format!("rdmakit_fabric_{}", mp.metric)));
    }
    for name in rdmakit_fabric::counters::ERROR_COUNTERS {
        let known = MAPPED.iter().any(|m| m.pma == name) || name == "QP1Dropped";
        assert!(known, "{name} has no metric");
    }
}

#[test]
fn descriptions_are_bounded_and_lose_control_characters() {
    let long = "x".repeat(10_000);
    assert_eq!(bounded(&long).chars().count(), MAX_DESC);
    assert_eq!(bounded("a\nb\u{7}c"), "a b c");
    // Multi-byte characters are counted as characters, never split.
    assert_eq!(bounded(&"é".repeat(100)), "é".repeat(MAX_DESC));
}

/// The fake fabric for SMPs; every PMA request times out.
struct NoPma(FakeFabric);

impl Smp for NoPma {
    fn get_many(&mut self, requests: &[SmpGet]) -> Vec<Result<[u8; 64], MadError>> {
        self.0.get_many(requests)
    }
}

impl Pma for NoPma {
    fn send_many(&mut self, requests: &[PmaRequest]) -> Vec<Result<[u8; 192], MadError>> {
        requests
            .iter()
            .map(|_| {
                Err(MadError::Timeout {
                    attempts: 1,
                    timeout_ms: 1,
                })
            })
            .collect()
    }
}

fn tree_exporter(rediscover: Duration) -> FabricExporter<NoPma> {
    let want = ibnetdiscover::parse(&fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).unwrap()).unwrap();
    let start = PortRef {
        guid: want.nodes()[0].guid,
        port: 1,
    };
    let opts = Options {
        rediscover,
        ..Options::default()
    };
    FabricExporter::new(NoPma(FakeFabric::new(want, start)), opts)
}

#[test]
fn a_discovery_is_kept_between_scrapes_until_it_is_due() {
    let mut e = tree_exporter(Duration::from_secs(300));
    let first = e.scrape();
    let second = e.scrape();
    assert_eq!(
        e.discoveries(),
        1,
        "the second scrape walked the subnet again"
    );
    for text in [&first, &second] {
        assert!(
            text.contains("rdmakit_fabric_nodes{type=\"ca\"} 16\n"),
            "{text}"
        );
        assert!(
            text.contains("rdmakit_fabric_nodes{type=\"switch\"} 6\n"),
            "{text}"
        );
    }
    let mut every = tree_exporter(Duration::ZERO);
    every.scrape();
    every.scrape();
    assert_eq!(every.discoveries(), 2);
    // An interval past the bound is cut to it.
    let capped = tree_exporter(Duration::from_secs(1 << 40));
    assert_eq!(capped.opts.rediscover, MAX_REDISCOVER);
}
