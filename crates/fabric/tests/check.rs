//! The fabric check on the real topology of fixtures/fabric (unmodified
//! ibnetdiscover against ibsim's 2-spine, 4-leaf, 16-host fat tree; see its
//! SOURCE), on the real faults captured there, and on edited copies — each
//! edit named in its test — with counters built here: every fault gives
//! exactly its code, and the message names the node, the port and the
//! values.

mod common;

use common::{codes, run, snapshot};
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::finding::Finding;
use rdmakit_fabric::check::sm::SmReply;
use rdmakit_fabric::check::{
    self, Config, CounterSnapshot, Facts, GuidConflict, SmAnswer, SmFacts, SmInfo, SmState,
};
use rdmakit_fabric::ibnetdiscover;
use rdmakit_fabric::{Expected, Node, PortRef, Subnet};
use rdmakit_testkit::fixture_bytes;
use rdmakit_types::PortState;

fn text(name: &str) -> String {
    String::from_utf8(fixture_bytes(&format!("fabric/{name}"))).expect("UTF-8 fixture")
}

fn parse(t: &str) -> Subnet {
    ibnetdiscover::parse(t).unwrap_or_else(|e| panic!("{e}"))
}

fn real() -> Subnet {
    parse(&text("ibnetdiscover.txt"))
}

fn expected() -> Expected {
    Expected::parse(&text("fat-tree-2x4x4.net")).expect("the generated net file")
}

fn node<'a>(s: &'a Subnet, desc: &str) -> &'a Node {
    s.nodes()
        .iter()
        .find(|n| n.desc == desc)
        .unwrap_or_else(|| panic!("no node {desc:?}"))
}

/// Findings at warning or above.
fn loud(f: &[Finding]) -> Vec<&Finding> {
    f.iter()
        .filter(|f| f.severity >= Severity::Warning)
        .collect()
}

/// Replaces `from` by `to` on the lines that contain `on` (each must match).
fn edit(t: &str, on: &[&str], from: &str, to: &str) -> String {
    let mut hits = 0;
    let out: Vec<String> = t
        .lines()
        .map(|l| {
            if on.iter().any(|o| l.contains(o)) && l.contains(from) {
                hits += 1;
                l.replacen(from, to, 1)
            } else {
                l.to_string()
            }
        })
        .collect();
    assert_eq!(hits, on.len(), "edit {from:?} -> {to:?} on {on:?}");
    out.join("\n") + "\n"
}

#[test]
fn the_real_fabric_is_clean_with_and_without_its_expected_cabling() {
    let s = real();
    assert!(run(&Facts::new(&s)).is_empty());
    let e = expected();
    assert!(run(&Facts::new(&s).expected(&e)).is_empty());
    let list = Expected::parse(&text("fat-tree-2x4x4.cables")).unwrap();
    assert!(run(&Facts::new(&s).expected(&list)).is_empty());
    let zeros = zero_counters(&s, Some(1000.0));
    let f = run(&Facts::new(&s)
        .counters(&zeros)
        .baseline(&zeros)
        .expected(&e));
    assert!(loud(&f).is_empty(), "{f:#?}");
}

#[test]
fn edited_one_link_at_1x_is_found_with_both_ends_and_the_width() {
    // EDITED: the leaf1 port 3 - host-03 cable's comment says 1xQDR at both
    // ends instead of 4xQDR.
    let t = edit(
        &text("ibnetdiscover.txt"),
        &[
            "[3]\t\"H-0000000000100004\"[1](100005)",
            "# lid 8 lmc 0 \"leaf1\" lid 2",
        ],
        "4xQDR",
        "1xQDR",
    );
    let s = parse(&t);
    let f = run(&Facts::new(&s).expected(&expected()));
    assert_eq!(codes(&f), [Code::F001], "{f:#?}");
    let m = &f[0].message;
    assert!(
        m.starts_with("leaf1 port 3: the link to host-03 HCA-1 port 1 runs at 1X; 15 of the"),
        "{m}"
    );
    assert!(m.contains("links like it run at 4X"), "{m}");
    assert!(f[0].evidence[0]
        .path
        .contains("leaf1 (0x0000000000200000) port 3"));
    assert_eq!(f[0].evidence[0].value, "1X / unknown / unknown");
    assert!(
        f[0].next.contains(&"ibportstate 2 3".to_string()),
        "{:?}",
        f[0].next
    );

    // EDITED model: the same link with what PortInfo would say (both ends
    // support 1X, 4X and 12X and enable 1X and 4X) names all three values.
    let mut s = real();
    let leaf1 = node(&s, "leaf1").guid;
    let host3 = node(&s, "host-03 HCA-1").guid;
    for (g, p) in [(leaf1, 3), (host3, 1)] {
        let port = s.node_mut(g).unwrap().port_mut(p).unwrap();
        port.width = rdmakit_fabric::LinkWidths::from_port_info(1, 3, 11);
    }
    let f = run(&Facts::new(&s));
    assert_eq!(codes(&f), [Code::F001], "{f:#?}");
    assert_eq!(
        f[0].message,
        "leaf1 port 3: the link to host-03 HCA-1 port 1 runs at 1X; both ends support and \
         enable 4X"
    );
    assert_eq!(f[0].evidence[0].value, "1X / 1X, 4X / 1X, 4X, 12X");
    assert!(f[0].evidence[1]
        .path
        .starts_with("host-03 HCA-1 (0x0000000000100004) port 1"));

    // EDITED model: both ends enable only 1X (ibsim's w=1) though they
    // support 4X, which the fabric's other links of the kind run at.
    for (g, p) in [(leaf1, 3), (host3, 1)] {
        let port = s.node_mut(g).unwrap().port_mut(p).unwrap();
        port.width = rdmakit_fabric::LinkWidths::from_port_info(1, 1, 11);
    }
    let f = run(&Facts::new(&s));
    assert_eq!(codes(&f), [Code::F001], "{f:#?}");
    assert_eq!(
        f[0].message,
        "leaf1 port 3: the link to host-03 HCA-1 port 1 runs at 1X; both ends support 4X but \
         enable only up to 1X; 15 of the fabric's 16 links like it run at 4X"
    );
}

#[test]
fn edited_one_link_at_sdr_is_found() {
    // EDITED: the spine1 - leaf2 cable at 4xSDR on both ends.
    let t = edit(
        &text("ibnetdiscover.txt"),
        &[
            "[5]\t\"S-0000000000200004\"[2]",
            "[2]\t\"S-0000000000200001\"[5]",
        ],
        "4xQDR",
        "4xSDR",
    );
    let f = run(&Facts::new(&parse(&t)));
    assert_eq!(codes(&f), [Code::F002], "{f:#?}");
    assert!(f[0].message.contains("runs at SDR"), "{}", f[0].message);
    assert!(f[0].message.contains("run at QDR"), "{}", f[0].message);
}

#[test]
fn edited_port_down_where_a_cable_is_expected_is_f003_not_a_missing_cable() {
    // EDITED model: the leaf4 - spine2 cable gone, leaf4 port 6 Polling.
    let mut s = real();
    let leaf4 = node(&s, "leaf4").guid;
    let spine2 = node(&s, "spine2").guid;
    {
        let p = s.node_mut(leaf4).unwrap().port_mut(6).unwrap();
        p.remote = None;
        p.state = Some(PortState::Down);
        p.phys_state = Some(2);
    }
    s.node_mut(spine2).unwrap().port_mut(4).unwrap().remote = None;
    let e = expected();
    let f = run(&Facts::new(&s).expected(&e));
    assert_eq!(codes(&f), [Code::F003], "{f:#?}");
    assert_eq!(
        f[0].message,
        "leaf4 port 6: physical state Polling, but the expected topology has a cable to spine2 \
         port 4"
    );
    assert_eq!(f[0].evidence[0].value, "Down / Polling");
    // Without an expected topology a Down port is nothing.
    assert!(run(&Facts::new(&s)).is_empty());
    // Both ends down: one finding, at the switch's end, naming both.
    {
        let p = s.node_mut(spine2).unwrap().port_mut(4).unwrap();
        p.state = Some(PortState::Down);
        p.phys_state = Some(3);
    }
    let f = run(&Facts::new(&s).expected(&e));
    assert_eq!(codes(&f), [Code::F003], "{f:#?}");
    assert_eq!(
        f[0].message,
        "leaf4 port 6: physical state Polling, but the expected topology has a cable to spine2 \
         port 4, physical state Disabled there too"
    );
    assert_eq!(f[0].evidence.len(), 3);
}

#[test]
fn the_real_unplugged_cable_is_one_missing_cable() {
    let s = parse(&text("fault-unplugged.ibnetdiscover.txt"));
    let f = run(&Facts::new(&s).expected(&expected()));
    assert_eq!(codes(&f), [Code::F016], "{f:#?}");
    assert_eq!(
        f[0].message,
        "leaf4 port 6: the expected cable to spine2 port 4 is not there"
    );
    assert!(
        f[0].next.contains(&"ibportstate 6 6".to_string()),
        "{:?}",
        f[0].next
    );
}

#[test]
fn the_real_swap_is_one_finding() {
    let s = parse(&text("fault-swapped.ibnetdiscover.txt"));
    let f = run(&Facts::new(&s).expected(&expected()));
    assert_eq!(codes(&f), [Code::F018], "{f:#?}");
    assert_eq!(f[0].subject, "leaf1 port 3 and leaf1 port 4");
    let m = &f[0].message;
    assert!(m.contains("two cables are swapped"), "{m}");
    for part in [
        "leaf1 port 3",
        "leaf1 port 4",
        "host-03 HCA-1 port 1",
        "host-04 HCA-1 port 1",
    ] {
        assert!(m.contains(part), "{part}: {m}");
    }
}

#[test]
fn the_real_extra_cable_is_one_finding() {
    let s = parse(&text("extra-cable.ibnetdiscover.txt"));
    let f = run(&Facts::new(&s).expected(&expected()));
    assert_eq!(codes(&f), [Code::F017], "{f:#?}");
    assert!(f[0].message.contains("leaf1 port 7") || f[0].message.contains("leaf2 port 7"));
}

#[test]
fn edited_leaf_gone_with_its_hosts_is_said_once() {
    // EDITED: leaf3's record, its four hosts' records and the spines'
    // cables to it removed.
    let t = text("ibnetdiscover.txt");
    let gone = [
        "\"S-0000000000200002\"",
        "\"H-0000000000100010\"",
        "\"H-0000000000100012\"",
        "\"H-0000000000100014\"",
        "\"H-0000000000100016\"",
    ];
    let kept: Vec<&str> = t
        .split("\n\n")
        .filter(|rec| {
            !rec.lines().any(|l| {
                (l.starts_with("Switch") || l.starts_with("Ca"))
                    && gone.iter().any(|g| l.contains(g))
            })
        })
        .collect();
    let t: String = kept
        .join("\n\n")
        .lines()
        .filter(|l| !(l.starts_with('[') && l.contains("\"S-0000000000200002\"")))
        .collect::<Vec<_>>()
        .join("\n");
    let s = parse(&t);
    assert_eq!(s.nodes().len(), 17);
    let f = run(&Facts::new(&s).expected(&expected()));
    assert_eq!(codes(&f), [Code::F016], "{f:#?}");
    assert_eq!(
        f[0].message,
        "leaf3: not in the fabric, nor are the 4 nodes reached only through it (host-09 \
         HCA-1, host-10 HCA-1, host-11 HCA-1, host-12 HCA-1): 6 expected cables are missing"
    );
    assert_eq!(f[0].evidence.len(), 6);
}

#[test]
fn edited_duplicate_port_guid_and_a_node_guid_met_twice() {
    // EDITED: host-02's port GUID 0x100003 replaced by host-01's 0x100001.
    let t = text("ibnetdiscover.txt").replace("(100003)", "(100001)");
    let s = parse(&t);
    let f = run(&Facts::new(&s));
    assert_eq!(codes(&f), [Code::F013], "{f:#?}");
    assert_eq!(
        f[0].message,
        "GUID 0x0000000000100001: 2 ports have this port GUID: host-01 HCA-1 port 1, host-02 \
         HCA-1 port 1"
    );
    // A node GUID discovery met on two nodes: the model refuses the second.
    let mut s = real();
    let mut again = node(&s, "host-05 HCA-1").clone();
    again.desc = "host-99 HCA-1".into();
    let err = s.add_node(again).unwrap_err();
    let c = vec![GuidConflict::from_model_error(&err).unwrap()];
    let f = run(&Facts::new(&s).conflicts(&c));
    assert_eq!(codes(&f), [Code::F013], "{f:#?}");
    assert!(
        f[0].message
            .contains("\"host-05 HCA-1\" and \"host-99 HCA-1\""),
        "{}",
        f[0].message
    );
}

#[test]
fn edited_lid_0_and_a_duplicate_lid() {
    // EDITED: host-05's LID 11 printed as 0 at both ends of its cable.
    let t = edit(
        &text("ibnetdiscover.txt"),
        &["# \"host-05 HCA-1\" lid 11", "# lid 11 lmc 0 \"leaf2\""],
        "lid 11",
        "lid 0",
    );
    let f = run(&Facts::new(&parse(&t)));
    assert_eq!(codes(&f), [Code::F014], "{f:#?}");
    assert_eq!(
        f[0].message,
        "host-05 HCA-1 port 1: the port is up (cabled, state not read) but has LID 0"
    );
    // EDITED: host-06's LID 12 printed as 11, host-05's.
    let t = edit(
        &text("ibnetdiscover.txt"),
        &["# \"host-06 HCA-1\" lid 12", "# lid 12 lmc 0 \"leaf2\""],
        "lid 12",
        "lid 11",
    );
    let f = run(&Facts::new(&parse(&t)));
    assert_eq!(codes(&f), [Code::F015], "{f:#?}");
    assert_eq!(
        f[0].message,
        "LID 11: 2 ports answer at this LID: host-05 HCA-1 port 1, host-06 HCA-1 port 1"
    );
}

// ----------------------------------------------------------------- counters

/// Every cabled port of the subnet with all PortCounters at 0.
fn zero_counters(s: &Subnet, at: Option<f64>) -> CounterSnapshot {
    snapshot(s, at, |_, _| {
        rdmakit_wire::mad::pma::port_counters::COUNTERS
            .iter()
            .map(|c| (c.name.to_string(), 0))
            .collect()
    })
}

fn set(c: &mut CounterSnapshot, s: &Subnet, desc: &str, port: u8, counter: &str, v: u64) {
    let g = node(s, desc).guid;
    let p = c
        .counters
        .ports
        .iter_mut()
        .find(|p| p.node_guid == g && p.port == port)
        .unwrap_or_else(|| panic!("{desc} port {port}"));
    *p.counters.get_mut(counter).expect("a PortCounters name") = v;
}

#[test]
fn a_symbol_error_burst_on_one_port_is_f005_with_the_value() {
    let s = real();
    let mut c = zero_counters(&s, None);
    set(&mut c, &s, "leaf2", 5, "SymbolErrorCounter", 250);
    let f = run(&Facts::new(&s).counters(&c));
    assert_eq!(codes(&f), [Code::F005], "{f:#?}");
    assert_eq!(
        f[0].message,
        "leaf2 port 5: physical link errors above the thresholds: SymbolErrorCounter \
         (SymbolErrorCounter 250 > 10)"
    );
    assert_eq!(
        f[0].evidence[0].path,
        "leaf2 (0x0000000000200001) port 5 PortCounters.SymbolErrorCounter"
    );
    assert_eq!(f[0].evidence[0].value, "250");
    assert_eq!(f[0].evidence[1].value, "spine1 (0x0000000000200004) port 2");
    assert_eq!(f[0].next[0], "perfquery -x 3 5");
    // At the threshold nothing is said.
    set(&mut c, &s, "leaf2", 5, "SymbolErrorCounter", 10);
    assert!(run(&Facts::new(&s).counters(&c)).is_empty());
}

#[test]
fn a_saturated_8_bit_counter_is_said_as_such() {
    let s = real();
    let mut c = zero_counters(&s, None);
    set(&mut c, &s, "leaf3", 1, "LinkDownedCounter", 255);
    let f = run(&Facts::new(&s).counters(&c));
    assert_eq!(codes(&f), [Code::F007], "{f:#?}");
    assert_eq!(
        f[0].message,
        "leaf3 port 1: LinkDownedCounter stopped counting: reset it with perfquery -R after \
         reading (LinkDownedCounter 255, all ones for 8 bits)"
    );
    assert!(
        f[0].next.contains(&"perfquery -R 4 1".to_string()),
        "{:?}",
        f[0].next
    );
}

#[test]
fn growth_since_a_baseline_is_judged_with_rates() {
    let s = real();
    let mut before = zero_counters(&s, Some(1_000.0));
    set(&mut before, &s, "leaf1", 3, "SymbolErrorCounter", 5_000);
    set(&mut before, &s, "leaf1", 4, "SymbolErrorCounter", 900);
    let mut now = before.clone();
    now.taken_at = Some(1_050.0);
    set(&mut now, &s, "leaf1", 3, "SymbolErrorCounter", 5_100);
    set(&mut now, &s, "leaf1", 3, "LinkDownedCounter", 3);
    // Large but old: no growth, nothing said.
    set(&mut now, &s, "leaf1", 4, "SymbolErrorCounter", 905);
    let f = run(&Facts::new(&s).counters(&now).baseline(&before));
    assert_eq!(codes(&f), [Code::F004, Code::F005], "{f:#?}");
    assert_eq!(
        f[0].severity,
        Severity::Error,
        "three drops: a flapping link"
    );
    assert_eq!(
        f[0].message,
        "leaf1 port 3: the link went down since the baseline 50 s earlier: \
         LinkDownedCounter (LinkDownedCounter +3, 0.060/s > 0)"
    );
    assert_eq!(
        f[1].message,
        "leaf1 port 3: physical link errors grew past the thresholds since the baseline 50 \
         s earlier: SymbolErrorCounter (SymbolErrorCounter +100, 2.00/s > 10)"
    );
    assert_eq!(f[1].evidence[0].value, "5100 (baseline 5000, +100, 2.00/s)");
    // Without the baseline the totals are judged: both ports, said once
    // for leaf1; 3 link drops in all are below the threshold 10.
    let f = run(&Facts::new(&s).counters(&now));
    assert_eq!(codes(&f), [Code::F005], "{f:#?}");
    assert_eq!(
        f[0].message,
        "leaf1: physical link errors above the thresholds: SymbolErrorCounter on 2 ports: 3 \
         (SymbolErrorCounter 5100 > 10), 4 (SymbolErrorCounter 905 > 10)"
    );
}

#[test]
fn one_counter_on_every_port_of_a_switch_is_one_finding() {
    let s = real();
    let mut c = zero_counters(&s, None);
    for p in 1..=6 {
        set(
            &mut c,
            &s,
            "leaf1",
            p,
            "PortXmitDiscards",
            200 + u64::from(p),
        );
    }
    let f = run(&Facts::new(&s).counters(&c));
    assert_eq!(codes(&f), [Code::F006], "{f:#?}");
    assert_eq!(f[0].subject, "leaf1");
    assert!(
        f[0].message.starts_with(
            "leaf1: discarded or held packets above the thresholds: PortXmitDiscards on 6 \
             ports: 1 (PortXmitDiscards 201 > 100), 2 (PortXmitDiscards 202 > 100)"
        ),
        "{}",
        f[0].message
    );
    assert_eq!(f[0].evidence.len(), 12, "each port's value and peer");
}

// ----------------------------------------------------------- subnet manager

fn info(guid: u64, act: u32, prio: u8, state: SmState) -> SmReply {
    SmReply::Info(SmInfo {
        guid,
        act_count: act,
        priority: prio,
        state,
    })
}

#[test]
fn subnet_manager_faults_each_give_their_code() {
    let s = real();
    let sm = |answers: Vec<SmAnswer>| SmFacts {
        answers,
        ..SmFacts::default()
    };
    let master = SmAnswer {
        lid: 1,
        reply: info(0x100001, 122, 0, SmState::Master),
    };
    // One master that sweeps: nothing.
    let mut ok = sm(vec![master.clone()]);
    ok.later = vec![SmAnswer {
        lid: 1,
        reply: info(0x100001, 130, 0, SmState::Master),
    }];
    assert!(run(&Facts::new(&s).sm(&ok)).is_empty());

    let none = sm(vec![SmAnswer::from_sminfo(
        "",
        "sminfo: iberror: failed: query",
    )]);
    let f = run(&Facts::new(&s).sm(&none));
    assert_eq!(codes(&f), [Code::F008], "{f:#?}");
    assert!(
        f[0].message.contains("iberror: failed: query"),
        "{}",
        f[0].message
    );

    let two = sm(vec![
        master.clone(),
        SmAnswer {
            lid: 5,
            reply: info(0x100003, 7, 0, SmState::Master),
        },
    ]);
    let f = run(&Facts::new(&s).sm(&two));
    assert_eq!(codes(&f), [Code::F009], "{f:#?}");
    assert!(
        f[0].message.contains("(host-02 HCA-1, LID 5)"),
        "{}",
        f[0].message
    );

    let inverted = sm(vec![
        master.clone(),
        SmAnswer {
            lid: 5,
            reply: info(0x100003, 7, 15, SmState::Standby),
        },
    ]);
    let f = run(&Facts::new(&s).sm(&inverted));
    assert_eq!(codes(&f), [Code::F010], "{f:#?}");
    assert!(
        f[0].message.contains("priority 0, below the STANDBY"),
        "{}",
        f[0].message
    );

    let mut stuck = sm(vec![master.clone()]);
    stuck.later = vec![master.clone()];
    let f = run(&Facts::new(&s).sm(&stuck));
    assert_eq!(codes(&f), [Code::F012], "{f:#?}");
    assert!(f[0].message.contains("stayed at 122"), "{}", f[0].message);

    let mut lids = sm(vec![master]);
    for n in s.nodes() {
        for p in &n.ports {
            let lid = if n.desc == "leaf3" { 5 } else { 1 };
            lids.port_sm_lids.push((
                PortRef {
                    guid: n.guid,
                    port: p.num,
                },
                lid,
            ));
        }
    }
    let f = run(&Facts::new(&s).sm(&lids));
    assert_eq!(codes(&f), [Code::F011], "{f:#?}");
    assert!(
        f[0].message
            .contains("42 ports say 1, 6 ports say 5 (leaf3 port 1"),
        "{}",
        f[0].message
    );
}

#[test]
fn severities_can_be_overridden() {
    let s = real();
    let mut c = zero_counters(&s, None);
    set(&mut c, &s, "leaf2", 5, "SymbolErrorCounter", 250);
    let mut cfg = Config::default();
    cfg.overrides.insert(Code::F005, Severity::Error);
    let f = check::run(&Facts::new(&s).counters(&c), &cfg);
    assert_eq!(f[0].severity, Severity::Error);
}

#[test]
fn thresholds_read_in_infiniband_diags_format_replace_the_defaults() {
    let s = real();
    let mut c = zero_counters(&s, None);
    set(&mut c, &s, "leaf2", 5, "SymbolErrorCounter", 250);
    set(&mut c, &s, "leaf2", 6, "LinkDownedCounter", 4);
    let mut cfg = Config::default();
    // Comment lines only, as infiniband-diags ships the file: no change.
    cfg.read_error_thresholds("# thresholds\n\n#SymbolErrorCounter=10\n")
        .unwrap();
    assert_eq!(cfg, Config::default());
    cfg.read_error_thresholds("SymbolErrorCounter=0x1f4\nLinkDownedCounter = 3\n")
        .unwrap();
    let f = check::run(&Facts::new(&s).counters(&c), &cfg);
    assert_eq!(codes(&f), [Code::F004], "{f:#?}");
    assert!(
        f[0].message.contains("LinkDownedCounter 4 > 3"),
        "{}",
        f[0].message
    );
    let t = &cfg.thresholds["LinkDownedCounter"];
    assert_eq!(
        (t.total, t.growth),
        (3, 0),
        "any growth of a link drop stays a finding"
    );
    for bad in [
        "NoSuchCounter=1",
        "SymbolErrorCounter=ten",
        "SymbolErrorCounter",
    ] {
        let e = cfg
            .read_error_thresholds(&format!("# x\n{bad}\n"))
            .unwrap_err();
        assert!(e.to_string().starts_with("line 2: "), "{e}");
    }
    assert_eq!(
        cfg.thresholds["SymbolErrorCounter"].total, 500,
        "unchanged by a bad file"
    );
}
