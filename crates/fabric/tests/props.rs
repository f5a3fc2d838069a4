//! Properties: the parsers never panic on any text, a generated subnet
//! survives write then parse, and generated fat trees expect exactly what
//! they contain.

use proptest::prelude::*;
use rdmakit_fabric::ibnetdiscover::{self, WriteOptions};
use rdmakit_fabric::{compare, fat_tree, Expected, Node, NodeKind, Origin, Port, PortRef, Subnet};
use rdmakit_types::{Speed, Width};

/// How many cut texts were accepted: the property above must see some.
static ACCEPTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

const WIDTHS: [Width; 5] = [Width::X1, Width::X2, Width::X4, Width::X8, Width::X12];
const SPEEDS: [Speed; 8] = [
    Speed::Sdr,
    Speed::Ddr,
    Speed::Qdr,
    Speed::Fdr10,
    Speed::Fdr,
    Speed::Edr,
    Speed::Hdr,
    Speed::Ndr,
];

/// A node plan: kind, port count, description, LID, LMC, vendor, device,
/// system GUID, enhanced port 0.
type NodePlan = (u8, u8, String, u16, u8, u32, u16, Option<u64>, bool);

fn node_plan() -> impl Strategy<Value = NodePlan> {
    (
        0u8..3,
        1u8..=12,
        "[ -!#-~]{0,24}", // printable, no '"'
        any::<u16>(),
        0u8..8,
        0u32..0x100_0000,
        any::<u16>(),
        proptest::option::of(1u64..),
        any::<bool>(),
    )
}

/// A subnet of `plans`, with cables between free ports chosen by `picks`.
fn build(plans: Vec<NodePlan>, picks: Vec<(usize, usize, usize, usize, usize)>) -> Subnet {
    let mut s = Subnet::new();
    let mut nodes: Vec<Node> = Vec::new();
    for (i, (k, nports, desc, lid, lmc, vendor, device, sys, enh)) in plans.into_iter().enumerate()
    {
        let kind = [NodeKind::Ca, NodeKind::Switch, NodeKind::Router][usize::from(k)];
        // GUIDs far apart, so a CA's port GUIDs never meet another node's.
        let guid = 0x0002_c903_0000_0000 + ((i as u64) << 12);
        let mut n = Node::new(guid, kind, nports);
        n.desc = desc.trim().to_string();
        n.vendor_id = vendor;
        n.device_id = device;
        n.system_guid = sys;
        if let Some(p0) = n.port0.as_mut() {
            p0.lid = lid;
            p0.lmc = lmc;
            p0.enhanced = enh;
            p0.guid = guid + 0x800;
        }
        nodes.push(n);
    }
    let count = nodes.len();
    for (a, pa, b, pb, rate) in picks {
        let (a, b) = (a % count, b % count);
        let pa = (pa % usize::from(nodes[a].num_ports)) as u8 + 1;
        let pb = (pb % usize::from(nodes[b].num_ports)) as u8 + 1;
        if (a, pa) == (b, pb) || nodes[a].port(pa).is_some() || nodes[b].port(pb).is_some() {
            continue;
        }
        let (ga, gb) = (nodes[a].guid, nodes[b].guid);
        for (i, num, peer, peer_port) in [(a, pa, gb, pb), (b, pb, ga, pa)] {
            let n = &mut nodes[i];
            let guid = n.port0.map_or(n.guid + u64::from(num), |p0| p0.guid);
            let mut p = Port::new(num, guid);
            if n.port0.is_none() {
                p.lid = (rate as u16).wrapping_mul(7).wrapping_add(u16::from(num));
                p.lmc = (rate % 3) as u8;
            }
            p.width.active = Some(WIDTHS[rate % WIDTHS.len()]);
            p.speed.active = (rate % 9 != 0).then_some(SPEEDS[rate % SPEEDS.len()]);
            p.remote = Some(PortRef {
                guid: peer,
                port: peer_port,
            });
            n.set_port(p);
        }
    }
    // The writer groups switches, then CAs, then routers: build in that
    // order so the parse gives the same order back.
    for kind in [NodeKind::Switch, NodeKind::Ca, NodeKind::Router] {
        for n in nodes.iter().filter(|n| n.kind == kind) {
            s.add_node(n.clone()).unwrap();
        }
    }
    s.set_origin(Some(Origin {
        node_guid: 0x0002_c903_0000_0000,
        port_guid: 0x0002_c903_0000_0001,
    }));
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_parsers_never_panic_on_any_text(t in "\\PC{0,400}") {
        let _ = ibnetdiscover::parse(&t);
        let _ = Expected::parse(&t);
        let _ = Expected::parse_cable_list(&t);
    }

    #[test]
    fn the_parsers_never_panic_on_near_misses(
        lines in proptest::collection::vec(
            prop_oneof![
                Just("Switch 4 \"S1\"".to_string()),
                Just("Hca 2 \"H1\"".to_string()),
                Just("caguid=0x10".to_string()),
                Just("switchguid=0x20(21)".to_string()),
                Just("Ca 1 \"H2\" # \"host two\"".to_string()),
                Just(String::new()),
                "\\[[1-4]\\]\t\"(S1|H1|H2)\"\\[[1-2]\\]( w=2 s=4)?",
                "\\[[1-4]\\]\t\"(S1|H1|H2)\"\\[[1-4]\\]\t\t# \"[a-z ]{0,8}\" lid [0-9]{1,2} (4x|12x)(QDR|EDR|\\?\\?\\?)",
                "\\[[1-2]\\]\\(10000[0-9]\\) \t\"(S1|H1)\"\\[[1-4]\\]\t\t# lid [0-9] lmc 0 \"[a-z]{0,5}\" lid 2 4xQDR",
                "\\[[0-9]{1,4}\\]\\(?[0-9a-f]{0,17}\\)? ?\"[SH1-]{1,3}\"(\\[[0-9]{0,4}\\])? ?[#a-z0-9 =\"x]{0,30}",
                "\"[a-z]{0,3}\"\\[[0-9]{0,4}\\] +(0x[0-9a-f]{0,18}|\"[a-z]{0,3}\")\\[[0-9]{0,3}\\]",
                "[a-zA-Z]{1,10}[=+ ][0-9a-fx()]{0,20}",
                "\\PC{0,40}",
            ],
            0..24,
        )
    ) {
        let t = lines.join("\n");
        let _ = ibnetdiscover::parse(&t);
        let _ = Expected::parse(&t);
    }

    #[test]
    fn what_is_accepted_after_lines_are_cut_reads_back_the_same(
        plans in proptest::collection::vec(node_plan(), 1..8),
        picks in proptest::collection::vec((0usize..64, 0usize..64, 0usize..64, 0usize..64, 0usize..64), 0..16),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..4),
    ) {
        let text = ibnetdiscover::write(&build(plans, picks), &WriteOptions::default());
        let mut lines: Vec<&str> = text.lines().collect();
        for c in &cuts {
            if !lines.is_empty() {
                lines.remove(c.index(lines.len()));
            }
        }
        let t = lines.join("\n");
        if let Ok(s) = ibnetdiscover::parse(&t) {
            ACCEPTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let w = ibnetdiscover::write(&s, &WriteOptions::default());
            let back = ibnetdiscover::parse(&w)
                .map_err(|e| TestCaseError::fail(format!("{e}\n{t}\n--\n{w}")))?;
            prop_assert_eq!(&back, &s, "{}", w);
        }
    }

    #[test]
    fn a_generated_subnet_survives_write_then_parse(
        plans in proptest::collection::vec(node_plan(), 1..12),
        picks in proptest::collection::vec((0usize..64, 0usize..64, 0usize..64, 0usize..64, 0usize..64), 0..24),
    ) {
        let s = build(plans, picks);
        let text = ibnetdiscover::write(&s, &WriteOptions::default());
        let back = ibnetdiscover::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&back, &s, "{}", text);
        prop_assert_eq!(ibnetdiscover::write(&back, &WriteOptions::default()), text);
        let exp = Expected::from_subnet(&s);
        prop_assert!(compare(&exp, &back).is_empty());
    }

    #[test]
    fn a_fat_tree_expects_what_it_holds(
        spines in 1u32..5, leaves in 1u32..7, hosts in 1u32..9, uplinks in 1u32..3,
    ) {
        let net = fat_tree(spines, leaves, hosts, uplinks, Width::X4, Speed::Edr).unwrap();
        let s = ibnetdiscover::parse(&net).unwrap();
        prop_assert_eq!(s.nodes().len() as u32, spines + leaves + leaves * hosts);
        prop_assert_eq!(s.links().count() as u32, leaves * hosts + spines * leaves * uplinks);
        prop_assert!(compare(&Expected::from_subnet(&s), &s).is_empty());
        prop_assert_eq!(fat_tree(spines, leaves, hosts, uplinks, Width::X4, Speed::Edr).unwrap(), net);
    }
}

#[test]
fn cut_texts_are_accepted_often_enough_to_test_the_writer() {
    // proptest runs the property in this binary too; run it here to be sure
    // of the count whatever the test order.
    what_is_accepted_after_lines_are_cut_reads_back_the_same();
    let n = ACCEPTED.load(std::sync::atomic::Ordering::Relaxed);
    assert!(n >= 50, "only {n} cut texts were accepted");
}
