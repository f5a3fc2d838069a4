//! Properties of the fabric check: on any mix of facts — generated fat
//! trees with ports' widths, speeds, states and LIDs scrambled, cables cut,
//! counters anywhere from 0 to all ones with or without a baseline, any SM
//! answers, an expected cabling of another tree — it never panics, and every
//! finding is a fabric finding with evidence, a remedy and a next command.

use proptest::prelude::*;
use rdmakit_doctor::codes::Layer;
use rdmakit_fabric::check::sm::SmReply;
use rdmakit_fabric::check::{
    self, Config, CounterSnapshot, Facts, SmAnswer, SmFacts, SmInfo, SmState,
};
use rdmakit_fabric::counters::{Counters, PortCounters, SCHEMA};
use rdmakit_fabric::{fat_tree, ibnetdiscover, Expected, LinkSpeeds, LinkWidths, PortRef};
use rdmakit_types::{Speed, Width};
use rdmakit_wire::mad::pma::port_counters::COUNTERS;

/// One port's scramble: width codes (active, enabled, supported), speed
/// codes, state, physical state, LID, whether its cable is cut.
type PortPlan = ((u8, u8, u8), (u8, u8, u8), u8, u8, u16, bool);

fn port_plan() -> impl Strategy<Value = PortPlan> {
    (
        (any::<u8>(), any::<u8>(), any::<u8>()),
        (0u8..8, 0u8..8, 0u8..8),
        0u8..6,
        0u8..9,
        prop_oneof![Just(0u16), 1u16..40],
        prop::bool::weighted(0.1),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn any_facts_give_fabric_findings_with_evidence_and_never_panic(
        tree in (1u32..3, 1u32..4, 1u32..4),
        other in (1u32..3, 1u32..4, 1u32..4),
        plans in prop::collection::vec(port_plan(), 0..40),
        values in prop::collection::vec((any::<usize>(), 0usize..18, prop_oneof![Just(0u64), 0u64..300, Just(u64::MAX)]), 0..40),
        base in prop::bool::ANY,
        sms in prop::collection::vec((0u16..30, any::<u64>(), any::<u32>(), 0u8..16, 0u8..6, prop::bool::ANY), 0..4),
    ) {
        let net = fat_tree(tree.0, tree.1, tree.2, 1, Width::X4, Speed::Qdr).unwrap();
        let mut s = ibnetdiscover::parse(&net).unwrap();
        let refs: Vec<PortRef> = s
            .nodes()
            .iter()
            .flat_map(|n| n.ports.iter().map(move |p| PortRef { guid: n.guid, port: p.num }))
            .collect();
        for (i, (w, sp, st, phys, lid, cut)) in plans.into_iter().enumerate() {
            let r = refs[i % refs.len()];
            let n = s.node_mut(r.guid).unwrap();
            let p = n.port_mut(r.port).unwrap();
            p.width = LinkWidths::from_port_info(w.0, w.1, w.2);
            p.speed = LinkSpeeds::from_port_info((sp.0, 0), (sp.1, sp.2), (7, 1));
            p.state = rdmakit_fabric::Port::state_from_code(st);
            p.phys_state = Some(phys);
            p.lid = lid;
            if cut {
                p.remote = None;
            }
        }
        let ports: Vec<PortCounters> = s
            .nodes()
            .iter()
            .flat_map(|n| {
                n.ports.iter().map(move |p| PortCounters {
                    node_guid: n.guid,
                    node_desc: n.desc.clone(),
                    kind: n.kind,
                    port: p.num,
                    lid: n.lid_of(p),
                    counters: COUNTERS.iter().map(|c| (c.name.to_string(), 0)).collect(),
                    extended: None,
                    saturated: Vec::new(),
                })
            })
            .collect();
        let mut now = CounterSnapshot::new(
            Counters { schema: SCHEMA.into(), reset: false, mads: 0, ports, unread: Vec::new() },
            Some(2000.0),
        );
        let before = CounterSnapshot::new(now.counters.clone(), Some(1000.0));
        for (i, c, v) in values {
            let n = now.counters.ports.len();
            let p = &mut now.counters.ports[i % n];
            let c = COUNTERS[c];
            p.counters.insert(c.name.to_string(), v.min(c.max()));
        }
        let sm = SmFacts {
            answers: sms
                .iter()
                .map(|&(lid, guid, act, prio, state, ok)| SmAnswer {
                    lid,
                    reply: if ok {
                        SmReply::Info(SmInfo { guid, act_count: act, priority: prio, state: SmState::from_code(state) })
                    } else {
                        SmReply::Failed("timeout".into())
                    },
                })
                .collect(),
            later: Vec::new(),
            port_sm_lids: refs.iter().enumerate().map(|(i, r)| (*r, (i % 3) as u16)).collect(),
        };
        let expected = Expected::parse(&fat_tree(other.0, other.1, other.2, 1, Width::X4, Speed::Qdr).unwrap()).unwrap();
        let mut facts = Facts::new(&s).counters(&now).sm(&sm).expected(&expected);
        if base {
            facts = facts.baseline(&before);
        }
        for f in check::run(&facts, &Config::default()) {
            prop_assert!(f.code.is_fabric(), "{f:?}");
            prop_assert_eq!(f.layer, Layer::Fabric);
            prop_assert!(!f.evidence.is_empty(), "{f:?}");
            prop_assert!(!f.remedy.is_empty(), "{f:?}");
            prop_assert!(!f.next.is_empty(), "{f:?}");
            prop_assert!(f.message.starts_with(&f.subject), "{f:?}");
        }
    }
}
