//! The fabric check against a live simulated fabric: ibsim on the
//! generated fat tree with unmodified opensm, read with unmodified
//! `ibnetdiscover`, `perfquery` and `sminfo` under the umad2sim preload
//! (testkit's `ibsim::Fabric`), faults injected with ibsim's console or its
//! topology file. Required: fails, never skips, when ibsim, opensm or
//! infiniband-diags is missing.

mod common;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use common::{codes, run, snapshot};
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_fabric::check::{CounterSnapshot, Facts, SmAnswer, SmFacts};
use rdmakit_fabric::{fat_tree, ibnetdiscover, Expected, Subnet};
use rdmakit_testkit::ibsim::Fabric;
use rdmakit_types::{Speed, Width};

fn generated() -> String {
    fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).expect("the 2x4x4 fat tree")
}

fn stdout(fabric: &mut Fabric, tool: &str, args: &[&str]) -> String {
    let out = fabric.tool(tool, args);
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        fabric.logs()
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn discover(fabric: &mut Fabric) -> Subnet {
    let text = stdout(fabric, "ibnetdiscover", &[]);
    ibnetdiscover::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// perfquery's `Name:.....value` lines, the counters only.
fn perfquery_counters(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let value = rest.trim_start_matches('.').trim().parse().ok()?;
            (!name.starts_with('#') && name != "PortSelect").then(|| (name.to_string(), value))
        })
        .collect()
}

/// Every cabled port's PortCounters, read with `perfquery LID PORT`.
fn read_counters(fabric: &mut Fabric, s: &Subnet) -> CounterSnapshot {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs_f64();
    snapshot(s, Some(now), |n, p| {
        let lid = n.lid_of(p);
        let text = stdout(fabric, "perfquery", &[&lid.to_string(), &p.num.to_string()]);
        let counters = perfquery_counters(&text);
        assert!(
            counters.contains_key("SymbolErrorCounter"),
            "perfquery {lid} {}: {text}",
            p.num
        );
        counters
    })
}

fn sminfo(fabric: &mut Fabric) -> SmAnswer {
    let out = fabric.tool("sminfo", &[]);
    SmAnswer::from_sminfo(
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn injected_symbol_errors_and_link_drops_on_leaf1_port_3_are_found() {
    let mut fabric = Fabric::start(&generated());
    let s = discover(&mut fabric);
    assert_eq!(s.nodes().len(), 22);
    let expected = Expected::parse(&generated()).unwrap();
    let before = read_counters(&mut fabric, &s);
    let sm = SmFacts {
        answers: vec![sminfo(&mut fabric)],
        ..SmFacts::default()
    };
    let clean = run(&Facts::new(&s).counters(&before).sm(&sm).expected(&expected));
    assert!(clean.is_empty(), "{clean:#?}");

    for field in ["SymbolErrorCounter=100", "LinkDownedCounter=3"] {
        let reply = fabric.console(&format!("PerformanceSet \"leaf1\"[3] PortCounters.{field}"));
        assert!(reply.contains("has been set"), "{reply}");
    }
    let after = read_counters(&mut fabric, &s);

    // Totals: 100 symbol errors are above the threshold 10; 3 link drops
    // are not above 10.
    let f = run(&Facts::new(&s).counters(&after).expected(&expected));
    assert_eq!(codes(&f), [Code::F005], "{f:#?}");
    assert_eq!(
        f[0].message,
        "leaf1 port 3: physical link errors above the thresholds: SymbolErrorCounter \
         (SymbolErrorCounter 100 > 10)"
    );
    assert_eq!(
        f[0].evidence[0].path,
        "leaf1 (0x0000000000200000) port 3 PortCounters.SymbolErrorCounter"
    );
    assert_eq!(
        f[0].evidence[1].value,
        "host-03 HCA-1 (0x0000000000100004) port 1"
    );

    // Since the first read: both, the three drops a flapping link.
    let f = run(&Facts::new(&s)
        .counters(&after)
        .baseline(&before)
        .expected(&expected));
    assert_eq!(codes(&f), [Code::F004, Code::F005], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Error);
    for x in &f {
        assert_eq!(x.subject, "leaf1 port 3");
        assert!(x.message.contains("since the baseline"), "{}", x.message);
    }
    assert!(
        f[0].message.contains("LinkDownedCounter +3"),
        "{}",
        f[0].message
    );
    assert!(
        f[1].message.contains("SymbolErrorCounter +100"),
        "{}",
        f[1].message
    );
}

#[test]
fn a_cable_at_w_1_in_the_topology_file_is_the_1x_link() {
    // host-03's cable with LinkWidthEnabled 1X (w=1) at both ends.
    let net = generated()
        .replace(
            "[3]\t\"host-03 HCA-1\"[1]\tw=2",
            "[3]\t\"host-03 HCA-1\"[1]\tw=1",
        )
        .replace("[1]\t\"leaf1\"[3]\tw=2", "[1]\t\"leaf1\"[3]\tw=1");
    assert_ne!(net, generated(), "the edit applies");
    let mut fabric = Fabric::start(&net);
    let s = discover(&mut fabric);
    let f = run(&Facts::new(&s).expected(&Expected::parse(&generated()).unwrap()));
    assert_eq!(codes(&f), [Code::F001], "{f:#?}");
    assert!(
        f[0].message
            .starts_with("leaf1 port 3: the link to host-03 HCA-1 port 1 runs at 1X;"),
        "{}",
        f[0].message
    );
}

#[test]
fn a_swapped_pair_of_cables_is_one_finding() {
    // host-03 and host-04 exchange their ports on leaf1.
    let net = generated()
        .replace("[3]\t\"host-03 HCA-1\"[1]", "[3]\t\"host-0X HCA-1\"[1]")
        .replace("[4]\t\"host-04 HCA-1\"[1]", "[4]\t\"host-03 HCA-1\"[1]")
        .replace("[3]\t\"host-0X HCA-1\"[1]", "[3]\t\"host-04 HCA-1\"[1]")
        .replace(
            "\"host-03 HCA-1\"\n[1]\t\"leaf1\"[3]",
            "\"host-03 HCA-1\"\n[1]\t\"leaf1\"[4]",
        )
        .replace(
            "\"host-04 HCA-1\"\n[1]\t\"leaf1\"[4]",
            "\"host-04 HCA-1\"\n[1]\t\"leaf1\"[3]",
        );
    assert_eq!(net.matches("\"leaf1\"[4]").count(), 1);
    let mut fabric = Fabric::start(&net);
    let s = discover(&mut fabric);
    let f = run(&Facts::new(&s).expected(&Expected::parse(&generated()).unwrap()));
    assert_eq!(codes(&f), [Code::F018], "{f:#?}");
    assert!(
        f[0].message.contains("two cables are swapped"),
        "{}",
        f[0].message
    );
}

#[test]
fn a_stopped_subnet_manager_is_no_master() {
    let mut fabric = Fabric::start(&generated());
    let s = discover(&mut fabric);
    let up = SmFacts {
        answers: vec![sminfo(&mut fabric)],
        ..SmFacts::default()
    };
    assert!(run(&Facts::new(&s).sm(&up)).is_empty(), "{up:?}");
    fabric.stop_sm();
    let down = SmFacts {
        answers: vec![sminfo(&mut fabric)],
        ..SmFacts::default()
    };
    let f = run(&Facts::new(&s).sm(&down));
    assert_eq!(codes(&f), [Code::F008], "{f:#?}\n{down:?}");
    assert!(
        f[0].message.contains("sminfo: iberror: failed"),
        "{}",
        f[0].message
    );
}
