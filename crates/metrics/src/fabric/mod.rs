//! The whole InfiniBand fabric as metric families: every port's PMA counters
//! and link state, read from one local port (`rdmakit metrics --fabric`).
//!
//! One exposition is one discovery ([`rdmakit_fabric::discover`]) and one
//! read of every port's counters ([`rdmakit_fabric::counters`]). When the
//! exporter serves, the discovery is kept for the process and redone at most
//! every [`Options::rediscover`] (bounded to [`MAX_REDISCOVER`]); the
//! counters are read at every scrape. [`FabricExporter::scrape`] takes
//! `&mut self`, so two scrapes never walk the subnet at once: the server
//! holds the exporter behind one lock and shares collections
//! ([`crate::http::Coalesce`]).
//!
//! The counters keep node_exporter's infiniband collector's names (the
//! [`crate::expo::PORT_COUNTERS`] table), under `rdmakit_fabric_` instead of
//! `node_infiniband_`, since they are not this node's. Each port's series
//! carry the labels `node_guid`, `node_desc`, `node_type`, `port` and `lid`:
//!
//! | metric | from |
//! |---|---|
//! | `rdmakit_fabric_<node_exporter name>{…}` | PortCounters, or PortCountersExtended where read (64 bits); PortXmitData and PortRcvData count 4-byte words and are multiplied by 4 |
//! | `rdmakit_fabric_port_qp1_dropped_total{…}` | PortCounters' QP1Dropped (node_exporter has no name for it) |
//! | `rdmakit_fabric_port_state{…}` | PortInfo PortState (1 down … 4 active), every port discovery read |
//! | `rdmakit_fabric_port_physical_state{…}` | PortInfo PortPhysicalState (5 link up) |
//! | `rdmakit_fabric_port_link_width_lanes{…}`, `…_supported_lanes` | LinkWidthActive, the widest LinkWidthSupported |
//! | `rdmakit_fabric_port_link_speed_gbps{…}`, `…_supported_gbps` | per-lane signalling rate of LinkSpeed(Ext)Active, the fastest supported |
//! | `rdmakit_fabric_nodes{type}` | nodes discovered by kind (ca, switch, router; every kind present) |
//! | `rdmakit_fabric_discovery_seconds` | how long the discovery in use took |
//! | `rdmakit_fabric_discovery_age_seconds` | how old it is |
//! | `rdmakit_fabric_unreachable_nodes` | nodes that did not answer: each NodeInfo unanswered in discovery (a silent node behind two routes counts twice: which node did not answer is unknown), and each node none of whose counters could be read |
//! | `rdmakit_fabric_discovery_incomplete` | 1 when discovery stopped at a bound |
//! | `rdmakit_fabric_collect_duration_seconds` | how long this exposition took |
//!
//! Node descriptions come from the fabric: each is cut to [`MAX_DESC`]
//! characters, control characters become spaces, and the encoder escapes
//! the rest ([`crate::text::encode`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdmakit_fabric::counters::{self, Counters, Pma, PortCounters};
use rdmakit_fabric::discover::{self, Discovery, Smp};
use rdmakit_fabric::live::Live;
use rdmakit_fabric::topology::{Node, NodeKind, Port, Subnet};
use rdmakit_types::PortState;

use crate::expo::PORT_COUNTERS;
use crate::text::{encode, Family, Kind, Value};

/// The longest node description put in a label, in characters.
pub const MAX_DESC: usize = 64;
/// The default interval between discoveries while serving.
pub const REDISCOVER: Duration = Duration::from_secs(300);
/// The longest interval between discoveries that may be asked for.
pub const MAX_REDISCOVER: Duration = Duration::from_secs(3600);

/// A PMA counter (perfquery's name) and the node_exporter metric it becomes.
struct Mapped {
    pma: &'static str,
    /// node_exporter's name after `node_infiniband_`.
    metric: &'static str,
}

const fn m(pma: &'static str, metric: &'static str) -> Mapped {
    Mapped { pma, metric }
}

/// perfquery's names → node_exporter's, for every counter that has one.
const MAPPED: &[Mapped] = &[
    m(
        "ExcessiveBufferOverrunErrors",
        "excessive_buffer_overrun_errors_total",
    ),
    m("LinkDownedCounter", "link_downed_total"),
    m("LinkErrorRecoveryCounter", "link_error_recovery_total"),
    m(
        "LocalLinkIntegrityErrors",
        "local_link_integrity_errors_total",
    ),
    m("PortMulticastRcvPkts", "multicast_packets_received_total"),
    m(
        "PortMulticastXmitPkts",
        "multicast_packets_transmitted_total",
    ),
    m(
        "PortRcvConstraintErrors",
        "port_constraint_errors_received_total",
    ),
    m(
        "PortXmitConstraintErrors",
        "port_constraint_errors_transmitted_total",
    ),
    m("PortRcvData", "port_data_received_bytes_total"),
    m("PortXmitData", "port_data_transmitted_bytes_total"),
    m("PortXmitDiscards", "port_discards_transmitted_total"),
    m("PortRcvErrors", "port_errors_received_total"),
    m("PortRcvPkts", "port_packets_received_total"),
    m("PortXmitPkts", "port_packets_transmitted_total"),
    m(
        "PortRcvRemotePhysicalErrors",
        "port_receive_remote_physical_errors_total",
    ),
    m(
        "PortRcvSwitchRelayErrors",
        "port_receive_switch_relay_errors_total",
    ),
    m("PortXmitWait", "port_transmit_wait_total"),
    m("SymbolErrorCounter", "symbol_error_total"),
    m("PortUnicastRcvPkts", "unicast_packets_received_total"),
    m("PortUnicastXmitPkts", "unicast_packets_transmitted_total"),
    m("VL15Dropped", "vl15_dropped_total"),
];

/// How the exporter discovers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Keep a discovery this long before walking the subnet again (at most
    /// [`MAX_REDISCOVER`]); `Duration::ZERO`: every scrape discovers.
    pub rediscover: Duration,
    /// The bounds of one discovery.
    pub discover: discover::Options,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            rediscover: REDISCOVER,
            discover: discover::Options::default(),
        }
    }
}

/// What MADs go through: discovery's SMPs and the counters' PMA requests.
pub trait Mads: Smp + Pma {}
impl<T: Smp + Pma> Mads for T {}

/// The exporter of a fabric: a port to send MADs from and the discovery in
/// use.
pub struct FabricExporter<M: Mads> {
    mads: M,
    opts: Options,
    cached: Option<Cached>,
    discoveries: u64,
}

struct Cached {
    at: Instant,
    took: Duration,
    found: Discovery,
}

impl FabricExporter<Live> {
    /// Opens the local port `ca` / `port` (the first Active one by default).
    ///
    /// # Errors
    /// As [`Live::open`]: the error names the verb, the errno and the layer.
    pub fn open(
        ca: Option<&str>,
        port: Option<u8>,
        opts: Options,
    ) -> Result<FabricExporter<Live>, rdmakit_umad::Error> {
        Ok(FabricExporter::new(Live::open(ca, port)?, opts))
    }
}

impl<M: Mads> FabricExporter<M> {
    /// An exporter over `mads` (a live port, or a fake in tests).
    pub fn new(mads: M, opts: Options) -> FabricExporter<M> {
        FabricExporter {
            mads,
            opts: Options {
                rediscover: opts.rediscover.min(MAX_REDISCOVER),
                ..opts
            },
            cached: None,
            discoveries: 0,
        }
    }

    /// Discoveries made so far.
    pub fn discoveries(&self) -> u64 {
        self.discoveries
    }

    /// One exposition: the subnet (discovered again when the one kept is
    /// older than [`Options::rediscover`]) and every port's counters now.
    pub fn scrape(&mut self) -> String {
        let t = Instant::now();
        let stale = self
            .cached
            .as_ref()
            .is_none_or(|c| c.at.elapsed() >= self.opts.rediscover);
        if stale {
            let started = Instant::now();
            let found = discover::discover(&mut self.mads, &self.opts.discover);
            self.discoveries += 1;
            self.cached = Some(Cached {
                at: Instant::now(),
                took: started.elapsed(),
                found,
            });
        }
        let Some(c) = self.cached.as_ref() else {
            return String::new(); // set just above
        };
        let targets = counters::targets(&c.found.subnet);
        let read = counters::read(&mut self.mads, &targets, &counters::Options::default());
        let view = View {
            found: &c.found,
            counters: &read,
            discovery: c.took,
            age: c.at.elapsed(),
        };
        let mut fams = families(&view);
        let mut d = Family::new(
            "rdmakit_fabric_collect_duration_seconds",
            Kind::Gauge,
            "Seconds spent on this exposition: the discovery when one was made, and the counters read.",
        );
        d.push(vec![], t.elapsed().as_secs_f64());
        fams.push(d);
        encode(&fams)
    }
}

/// What one exposition shows: a discovery and the counters read after it.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// The discovery.
    pub found: &'a Discovery,
    /// The counters.
    pub counters: &'a Counters,
    /// How long the discovery took.
    pub discovery: Duration,
    /// How long ago it ended.
    pub age: Duration,
}

/// The exposition of `view` (without the collection time): pure, for
/// snapshots.
pub fn render(view: &View) -> String {
    encode(&families(view))
}

/// The families of `view`, in a fixed order; within each, ports in the
/// subnet's order.
pub fn families(view: &View) -> Vec<Family> {
    let subnet = &view.found.subnet;
    let mut out = port_families(subnet);
    out.extend(counter_families(subnet, view.counters));
    out.extend(fabric_families(view));
    out
}

/// A port's labels: node GUID, description (bounded), type, port, LID.
fn labels(
    guid: u64,
    desc: &str,
    kind: NodeKind,
    port: u8,
    lid: u16,
) -> Vec<(&'static str, String)> {
    vec![
        ("node_guid", format!("{guid:#018x}")),
        ("node_desc", bounded(desc)),
        ("node_type", kind_name(kind).to_string()),
        ("port", port.to_string()),
        ("lid", lid.to_string()),
    ]
}

fn port_labels(n: &Node, p: &Port) -> Vec<(&'static str, String)> {
    labels(n.guid, &n.desc, n.kind, p.num, n.lid_of(p))
}

/// A description as a label value: at most [`MAX_DESC`] characters, control
/// characters as spaces.
pub fn bounded(desc: &str) -> String {
    desc.chars()
        .take(MAX_DESC)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn kind_name(k: NodeKind) -> &'static str {
    match k {
        NodeKind::Ca => "ca",
        NodeKind::Switch => "switch",
        NodeKind::Router => "router",
    }
}

fn port_families(subnet: &Subnet) -> Vec<Family> {
    let mut state = Family::new(
        "rdmakit_fabric_port_state",
        Kind::Gauge,
        "PortInfo PortState of each port of the fabric (1: down, 2: init, 3: armed, 4: active).",
    );
    let mut phys = Family::new(
        "rdmakit_fabric_port_physical_state",
        Kind::Gauge,
        "PortInfo PortPhysicalState (1: sleep, 2: polling, 3: disabled, 4: training, 5: link up, 6: link error recovery, 7: phy test).",
    );
    let mut width = Family::new(
        "rdmakit_fabric_port_link_width_lanes",
        Kind::Gauge,
        "Lanes of the link's active width (LinkWidthActive: 4 for 4X).",
    );
    let mut width_sup = Family::new(
        "rdmakit_fabric_port_link_width_supported_lanes",
        Kind::Gauge,
        "Lanes of the widest width the port supports (LinkWidthSupported); below it the link runs degraded.",
    );
    let mut speed = Family::new(
        "rdmakit_fabric_port_link_speed_gbps",
        Kind::Gauge,
        "Per-lane signalling rate of the link's active speed in Gb/s (LinkSpeedActive or LinkSpeedExtActive: 10 for QDR).",
    );
    let mut speed_sup = Family::new(
        "rdmakit_fabric_port_link_speed_supported_gbps",
        Kind::Gauge,
        "Per-lane signalling rate of the fastest speed the port supports in Gb/s; below it the link runs degraded.",
    );
    for n in subnet.nodes() {
        for p in &n.ports {
            let l = || port_labels(n, p);
            if let Some(s) = p.state {
                state.push(l(), s as u64);
            }
            if let Some(s) = p.phys_state {
                phys.push(l(), u64::from(s));
            }
            // A Down port's active width and speed mean nothing.
            let up = p.state != Some(PortState::Down);
            if let Some(w) = p.width.active.filter(|_| up) {
                width.push(l(), u64::from(w.lanes()));
            }
            if let Some(w) = p.width.supported.iter().map(|w| w.lanes()).max() {
                width_sup.push(l(), u64::from(w));
            }
            if let Some(s) = p.speed.active.filter(|_| up) {
                speed.push(l(), s.signaling_gbps());
            }
            let fastest = p.speed.supported.iter().map(|s| s.signaling_gbps());
            if let Some(s) = fastest.fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))))
            {
                speed_sup.push(l(), s);
            }
        }
    }
    vec![state, phys, width, width_sup, speed, speed_sup]
}

fn counter_families(subnet: &Subnet, c: &Counters) -> Vec<Family> {
    // By node_exporter's name, sorted as PORT_COUNTERS is.
    let mut fams: BTreeMap<&'static str, (Family, &'static str)> = BTreeMap::new();
    for mp in MAPPED {
        let Some(pc) = PORT_COUNTERS.iter().find(|pc| pc.metric == mp.metric) else {
            continue; // the unit test proves every name is in the table
        };
        let help = match pc.scale {
            4 => format!(
                "{} The PMA counts 4-byte words ({}); multiplied by 4.",
                data_help(mp.pma),
                mp.pma
            ),
            _ => format!("{} (PMA {}).", pc.help.trim_end_matches('.'), mp.pma),
        };
        let f = Family::new(format!("rdmakit_fabric_{}", mp.metric), Kind::Counter, help);
        fams.insert(mp.metric, (f, mp.pma));
    }
    let mut qp1 = Family::new(
        "rdmakit_fabric_port_qp1_dropped_total",
        Kind::Counter,
        "MADs to QP1 (general services) the port dropped (PMA QP1Dropped).",
    );
    for p in &c.ports {
        let desc = subnet
            .node(p.node_guid)
            .map_or(p.node_desc.as_str(), |n| n.desc.as_str());
        let l = labels(p.node_guid, desc, p.kind, p.port, p.lid);
        for (metric, (f, pma)) in fams.iter_mut() {
            if let Some(v) = value(p, pma) {
                let scale = PORT_COUNTERS
                    .iter()
                    .find(|pc| pc.metric == *metric)
                    .map_or(1, |pc| pc.scale);
                f.push(l.clone(), Value::Int(u128::from(v) * u128::from(scale)));
            }
        }
        if let Some(v) = p.counters.get("QP1Dropped") {
            qp1.push(l.clone(), *v);
        }
    }
    let mut out: Vec<Family> = fams.into_values().map(|(f, _)| f).collect();
    out.push(qp1);
    out
}

fn data_help(pma: &str) -> &'static str {
    match pma {
        "PortRcvData" => "Bytes received on the port, all VLs.",
        _ => "Bytes transmitted on the port, all VLs.",
    }
}

/// The 64-bit value where PortCountersExtended has it, else PortCounters'.
fn value(p: &PortCounters, name: &str) -> Option<u64> {
    p.value(name)
}

fn fabric_families(view: &View) -> Vec<Family> {
    let subnet = &view.found.subnet;
    let mut nodes = Family::new(
        "rdmakit_fabric_nodes",
        Kind::Gauge,
        "Nodes the discovery found, by type (ca, switch, router).",
    );
    for kind in [NodeKind::Ca, NodeKind::Switch, NodeKind::Router] {
        let n = subnet.nodes().iter().filter(|n| n.kind == kind).count();
        nodes.push(vec![("type", kind_name(kind).to_string())], n);
    }
    let mut took = Family::new(
        "rdmakit_fabric_discovery_seconds",
        Kind::Gauge,
        "Seconds the discovery in use took to walk the subnet.",
    );
    took.push(vec![], view.discovery.as_secs_f64());
    let mut age = Family::new(
        "rdmakit_fabric_discovery_age_seconds",
        Kind::Gauge,
        "Seconds since the discovery in use ended (it is redone at the exporter's interval).",
    );
    age.push(vec![], view.age.as_secs_f64());
    let mut unreachable = Family::new(
        "rdmakit_fabric_unreachable_nodes",
        Kind::Gauge,
        "Nodes that did not answer: each route whose NodeInfo went unanswered in discovery, and each node none of whose counters could be read.",
    );
    unreachable.push(vec![], unreachable_nodes(view.found, view.counters));
    let mut incomplete = Family::new(
        "rdmakit_fabric_discovery_incomplete",
        Kind::Gauge,
        "1 when the discovery stopped at a bound (nodes, hops, MADs) before the end of the subnet.",
    );
    incomplete.push(vec![], u64::from(view.found.stopped.is_some()));
    vec![nodes, took, age, unreachable, incomplete]
}

/// Discovery's unanswered NodeInfos, plus the nodes with counters unread
/// and none read.
pub fn unreachable_nodes(found: &Discovery, c: &Counters) -> usize {
    let lost = found.unread.iter().filter(|u| u.what == "NodeInfo").count();
    let read: std::collections::BTreeSet<u64> = c.ports.iter().map(|p| p.node_guid).collect();
    let silent: std::collections::BTreeSet<u64> = c
        .unread
        .iter()
        .map(|u| u.node_guid)
        .filter(|g| !read.contains(g))
        .collect();
    lost + silent.len()
}

#[cfg(test)]
mod tests;
