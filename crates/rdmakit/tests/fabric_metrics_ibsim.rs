//! `rdmakit metrics --fabric` against a simulated fabric: ibsim with
//! unmodified opensm, a fat tree of 2 spines, 4 leaves and 16 hosts
//! (`rdmakit_fabric::fat_tree`), the exporter under the umad2sim preload
//! (`rdmakit_testkit::ibsim`). Counter values are set with ibsim's
//! `PerformanceSet` and must come out in the right series; the exposition
//! must pass `promtool check metrics`; served over HTTP, two scrapes make
//! one discovery.
//!
//! Needs ibsim-utils, libumad2sim0, opensm and infiniband-diags (a missing
//! one fails the test naming the packages) and promtool (Debian package
//! `prometheus`: skipped with a message unless RDMAKIT_REQUIRE_PROMETHEUS is
//! set, then it fails, as in metrics_prometheus.rs).

mod common;
mod ibsim_common;
mod metrics_common;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _};
use std::net::SocketAddr;
use std::process::{Output, Stdio};
use std::time::Duration;

use ibsim_common::{text, tree};
use metrics_common::{get, parse_exposition, prometheus_tool, promtool_check};
use rdmakit_testkit::ibsim::Fabric;

/// How long one rdmakit run may take on the 22-node tree.
const LIMIT: Duration = Duration::from_secs(30);

type Series = BTreeMap<(String, BTreeMap<String, String>), f64>;

fn rdmakit(fab: &Fabric, args: &[&str]) -> Output {
    let o = ibsim_common::rdmakit(fab, args);
    assert!(
        o.status.success(),
        "rdmakit {args:?}: {:?}\nstdout:\n{}\nstderr:\n{}\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr),
        fab.logs()
    );
    o
}

/// The series of `name` whose labels include every pair of `with`.
fn pick<'a>(
    s: &'a Series,
    name: &str,
    with: &[(&str, &str)],
) -> Vec<(&'a BTreeMap<String, String>, f64)> {
    s.iter()
        .filter(|((n, l), _)| {
            n == name
                && with
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|((_, l), v)| (l, *v))
        .collect()
}

#[test]
fn fabric_metrics_of_a_fat_tree_show_a_set_counter_where_it_was_set() {
    let mut fab = Fabric::start(&tree());
    for field in ["SymbolErrorCounter=100", "PortXmitWait=5000"] {
        let reply = fab.console(&format!("PerformanceSet \"leaf1\"[3] PortCounters.{field}"));
        assert!(reply.contains("has been set"), "{reply}");
    }
    let o = rdmakit(&fab, &["metrics", "--fabric"]);
    let out = text(&o.stdout);
    let s = parse_exposition(&out);

    assert_eq!(
        pick(&s, "rdmakit_fabric_nodes", &[("type", "ca")])[0].1,
        16.0
    );
    assert_eq!(
        pick(&s, "rdmakit_fabric_nodes", &[("type", "switch")])[0].1,
        6.0
    );
    assert_eq!(
        pick(&s, "rdmakit_fabric_unreachable_nodes", &[])[0].1,
        0.0,
        "{out}"
    );
    // 24 cables (16 to hosts, 8 between leaves and spines): 48 ports, each
    // Active at 4X QDR.
    let active = pick(&s, "rdmakit_fabric_port_state", &[])
        .into_iter()
        .filter(|(_, v)| *v == 4.0)
        .count();
    assert_eq!(active, 48, "{out}");
    let widths = pick(&s, "rdmakit_fabric_port_link_width_lanes", &[]);
    assert_eq!(widths.len(), 48, "a width for each port not Down");
    assert!(widths.iter().all(|(_, v)| *v == 4.0), "{widths:?}");
    let speeds = pick(&s, "rdmakit_fabric_port_link_speed_gbps", &[]);
    assert!(speeds.iter().all(|(_, v)| *v == 10.0), "{speeds:?}");

    // The value set, in leaf1 port 3's series and nowhere else.
    let sym = pick(&s, "rdmakit_fabric_symbol_error_total", &[]);
    assert_eq!(sym.len(), 48, "every Active port's counters were read");
    let set: Vec<_> = sym.iter().filter(|(_, v)| *v != 0.0).collect();
    assert_eq!(set.len(), 1, "{set:?}");
    let (labels, v) = set[0];
    assert_eq!(*v, 100.0);
    assert_eq!(labels["node_desc"], "leaf1");
    assert_eq!(labels["node_type"], "switch");
    assert_eq!(labels["port"], "3");
    assert!(labels["node_guid"].starts_with("0x"), "{labels:?}");
    let lid = labels["lid"].clone();
    let wait = pick(
        &s,
        "rdmakit_fabric_port_transmit_wait_total",
        &[("node_desc", "leaf1"), ("port", "3"), ("lid", &lid)],
    );
    assert_eq!(wait.len(), 1);
    assert_eq!(wait[0].1, 5000.0);
    // The MADs the exporter itself sent are data: every host port moved
    // some bytes, counted in bytes (a multiple of 4).
    let host1 = pick(
        &s,
        "rdmakit_fabric_port_data_transmitted_bytes_total",
        &[("node_desc", "host-01 HCA-1")],
    );
    assert_eq!(host1.len(), 1);
    assert!(host1[0].1 > 0.0 && host1[0].1 % 4.0 == 0.0, "{host1:?}");

    if let Some(p) = prometheus_tool("promtool") {
        let (ok, said) = promtool_check(&p, out.as_bytes());
        assert!(ok, "promtool check metrics:\n{said}");
    }

    // -o FILE with the port named: the same families, written whole.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fabric.prom");
    let f = file.to_str().unwrap();
    rdmakit(
        &fab,
        &[
            "metrics", "--fabric", "--ca", "ibsim0", "--port", "1", "-o", f,
        ],
    );
    let written = std::fs::read_to_string(&file).unwrap();
    let w = parse_exposition(&written);
    assert_eq!(
        pick(
            &w,
            "rdmakit_fabric_symbol_error_total",
            &[("node_desc", "leaf1"), ("port", "3")]
        )[0]
        .1,
        100.0
    );
    // A CA that is not there is refused, naming it.
    let child = fab
        .command(env!("CARGO_BIN_EXE_rdmakit"))
        .args(["metrics", "--fabric", "--ca", "mlx5_9"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = rdmakit_testkit::wait(child, LIMIT, "rdmakit metrics --fabric --ca mlx5_9");
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("mlx5_9"), "{}", text(&o.stderr));
}

#[test]
fn served_fabric_metrics_discover_once_for_two_scrapes() {
    let mut fab = Fabric::start(&tree());
    let mut child = fab
        .command(env!("CARGO_BIN_EXE_rdmakit"))
        .args(["metrics", "--fabric", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the exporter");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    // ibsim's client banner may come first.
    let addr: SocketAddr = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the exporter exited");
        if let Some(url) = line
            .trim()
            .strip_prefix("rdmakit: serving the fabric's metrics on http://")
        {
            break url.strip_suffix("/metrics").unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = err.read_to_string(&mut sink);
    });
    let first = get(addr, "/metrics");
    let reply = fab.console("PerformanceSet \"spine2\"[4] PortCounters.LinkDownedCounter=7");
    assert!(reply.contains("has been set"), "{reply}");
    let second = get(addr, "/metrics");
    let _ = child.kill();
    let _ = child.wait();
    fab.free_leaked_slots();
    assert_eq!((first.status, second.status), (200, 200));
    let (a, b) = (
        parse_exposition(&first.text()),
        parse_exposition(&second.text()),
    );
    let downed = |s: &Series| {
        pick(
            s,
            "rdmakit_fabric_link_downed_total",
            &[("node_desc", "spine2"), ("port", "4")],
        )[0]
        .1
    };
    assert_eq!(
        (downed(&a), downed(&b)),
        (0.0, 7.0),
        "counters are read at every scrape"
    );
    // The discovery is kept: the second scrape shows the first's duration
    // and a greater age.
    let took = |s: &Series| pick(s, "rdmakit_fabric_discovery_seconds", &[])[0].1;
    let age = |s: &Series| pick(s, "rdmakit_fabric_discovery_age_seconds", &[])[0].1;
    assert_eq!(took(&a), took(&b), "the second scrape discovered again");
    assert!(age(&b) > age(&a), "{} then {}", age(&a), age(&b));
}
