//! Helpers shared by the fabric check's tests (`mod common;`; a directory, so
//! cargo does not build it as a test of its own).

#![allow(dead_code)]

use std::collections::BTreeMap;

use rdmakit_doctor::codes::Code;
use rdmakit_doctor::finding::Finding;
use rdmakit_fabric::check::{self, Config, CounterSnapshot, Facts};
use rdmakit_fabric::counters::{Counters, PortCounters, SCHEMA};
use rdmakit_fabric::{Node, Port, Subnet};

/// The codes of the findings, in order.
pub fn codes(f: &[Finding]) -> Vec<Code> {
    f.iter().map(|f| f.code).collect()
}

/// The fabric check with the default thresholds and severities.
pub fn run(facts: &Facts) -> Vec<Finding> {
    check::run(facts, &Config::default())
}

/// A snapshot taken at `at` of every cabled port of `s`, its PortCounters
/// as `read` gives them.
pub fn snapshot(
    s: &Subnet,
    at: Option<f64>,
    mut read: impl FnMut(&Node, &Port) -> BTreeMap<String, u64>,
) -> CounterSnapshot {
    let mut ports = Vec::new();
    for n in s.nodes() {
        for p in n.ports.iter().filter(|p| p.remote.is_some()) {
            ports.push(PortCounters {
                node_guid: n.guid,
                node_desc: n.desc.clone(),
                kind: n.kind,
                port: p.num,
                lid: n.lid_of(p),
                counters: read(n, p),
                extended: None,
                saturated: Vec::new(),
            });
        }
    }
    let c = Counters {
        schema: SCHEMA.into(),
        reset: false,
        mads: 0,
        ports,
        unread: Vec::new(),
    };
    CounterSnapshot::new(c, at)
}
