//! Discovery: the subnet as directed-route SMPs find it, breadth first from
//! the local port, the way ibnetdiscover walks it.
//!
//! The walk goes level by level. A level is a list of *probes*, each a
//! directed route (the egress port at every hop) and the port it leaves by:
//! 1. one batch of NodeInfo Gets, one per probe, so the MAD layer keeps its
//!    window full;
//! 2. each answer names a node by its GUID. A GUID seen before is the same
//!    node reached by another path: only the cable is recorded, from the
//!    probe's port to the port the SMP came in by (NodeInfo's
//!    LocalPortNum). A new GUID is added to the [`Subnet`];
//! 3. one batch for every new node: NodeDescription, SwitchInfo (switches),
//!    and PortInfo of every port of a switch (port 0 gives its LID) or of
//!    the port a CA was entered by (a CA answers only for that port);
//! 4. the next level's probes: every port of a new switch that is not Down,
//!    whose peer is not known yet, other than the one it was entered by. A
//!    CA forwards nothing, so only the local CA's own port is walked.
//!
//! Down ports are recorded with their state and not walked. A probe that
//! gets no answer is recorded as [`Unread`] with the route and the error,
//! and the walk goes on with the rest. The work is bounded by
//! [`Options`]: at most 63 hops (what a directed route holds), a number of
//! nodes and a budget of MADs; past a bound the walk stops and says so in
//! [`Discovery::stopped`].
//!
//! Everything here is pure: the MADs go through the [`Smp`] trait, which the
//! live port implements ([`crate::live`]) and a test implements with a fake
//! fabric ([`fake::FakeFabric`]).

pub mod fake;
pub mod render;

use rdmakit_umad::MadError;
use rdmakit_wire::mad::smp::{attr, node_description, node_info, port_info, switch_info};
use rdmakit_wire::mad::Attribute;
use serde::Serialize;

use crate::names;
use crate::topology::{LinkSpeeds, LinkWidths, Node, NodeKind, Origin, Port, PortRef, Subnet};

/// The most hops a directed route holds.
pub const MAX_HOPS: usize = 63;
/// The default bound on nodes ([`Options::max_nodes`]).
pub const MAX_NODES: usize = 100_000;
/// The default budget of MADs ([`Options::mad_budget`]): about 40 a node at
/// the node bound, more than a 36-port switch fabric needs.
pub const MAD_BUDGET: u64 = 4_000_000;

/// One directed-route SMP Get: an attribute, its modifier (a port number for
/// PortInfo) and the route, the egress port at each hop from the local
/// node (`[]` is the local node itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmpGet {
    /// The attribute ID (`rdmakit_wire::mad::smp::attr`).
    pub attr_id: u16,
    /// The attribute modifier.
    pub attr_mod: u32,
    /// The egress ports, at most [`MAX_HOPS`].
    pub path: Vec<u8>,
}

/// Where discovery's SMPs go. `get_many` sends every request and returns
/// the 64 bytes of SMP data of each reply, in the order asked; an
/// implementation keeps as many in flight as it can.
pub trait Smp {
    /// The replies' SMP data, one result per request, in order.
    fn get_many(&mut self, requests: &[SmpGet]) -> Vec<Result<[u8; 64], MadError>>;
}

/// The bounds of a discovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The longest route walked (at most [`MAX_HOPS`]).
    pub max_hops: usize,
    /// The most nodes recorded.
    pub max_nodes: usize,
    /// The most SMPs sent (retries are the MAD layer's and not counted).
    pub mad_budget: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_hops: MAX_HOPS,
            max_nodes: MAX_NODES,
            mad_budget: MAD_BUDGET,
        }
    }
}

/// What a discovery found: the subnet, what could not be read, and whether
/// a bound stopped it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Discovery {
    /// The subnet (schema `rdmakit.fabric/v1`).
    pub subnet: Subnet,
    /// What got no answer, in the order met.
    pub unread: Vec<Unread>,
    /// SMPs sent.
    pub mads: u64,
    /// Why the walk stopped before its end (a bound), if it did.
    pub stopped: Option<String>,
}

/// Something discovery asked and got no answer to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unread {
    /// The directed route, the egress port at each hop.
    pub path: Vec<u8>,
    /// The port the route left by (its node is known); None for the local
    /// node.
    pub from: Option<PortRef>,
    /// The node asked about, when known (None when NodeInfo itself failed).
    #[serde(with = "names::opt_guid")]
    pub node: Option<u64>,
    /// The attribute (`NodeInfo`, `PortInfo 3`, ...), or `route` when the
    /// route was not sent (beyond the hop bound).
    pub what: String,
    /// Why, with the layer to look at.
    pub error: String,
}

impl Discovery {
    /// True when everything asked was answered and no bound was hit.
    pub fn complete(&self) -> bool {
        self.unread.is_empty() && self.stopped.is_none()
    }
}

/// Walks the subnet through `smp` from the local port.
///
/// The local node itself not answering is an [`Unread`] like any other: the
/// subnet is then empty.
pub fn discover(smp: &mut dyn Smp, opts: &Options) -> Discovery {
    let mut w = Walk {
        smp,
        opts: Options {
            max_hops: opts.max_hops.min(MAX_HOPS),
            ..*opts
        },
        out: Discovery {
            subnet: Subnet::new(),
            unread: Vec::new(),
            mads: 0,
            stopped: None,
        },
    };
    let mut probes = vec![Probe {
        path: Vec::new(),
        from: None,
    }];
    while !probes.is_empty() && w.out.stopped.is_none() {
        probes = w.level(probes);
    }
    w.out
}

/// A route to try and the known port it leaves by.
struct Probe {
    path: Vec<u8>,
    from: Option<PortRef>,
}

/// A node reached on this level, new or not.
struct Reached {
    guid: u64,
    path: Vec<u8>,
    /// The port the SMP came in by (0: a switch's port 0, the local switch).
    entry: u8,
    from: Option<PortRef>,
    new: bool,
    /// A CA port met for the first time: its PortInfo is to be read.
    new_port: bool,
}

/// What the second batch asked, per request.
enum Ask {
    Desc(u64),
    Switch(u64),
    Port(u64, u8),
}

struct Walk<'a> {
    smp: &'a mut dyn Smp,
    opts: Options,
    out: Discovery,
}

impl Walk<'_> {
    /// One level: NodeInfo for every probe, the new nodes' attributes, the
    /// links; returns the next level's probes.
    fn level(&mut self, probes: Vec<Probe>) -> Vec<Probe> {
        let gets: Vec<SmpGet> = probes
            .iter()
            .map(|p| get(attr::NODE_INFO, 0, &p.path))
            .collect();
        let Some(replies) = self.send(&gets) else {
            return Vec::new();
        };
        let mut reached = Vec::new();
        for (probe, reply) in probes.into_iter().zip(replies) {
            let ni = match reply.and_then(|d| parse::<node_info::Repr>(&d)) {
                Ok(ni) => ni,
                Err(e) => {
                    self.unread(&probe.path, probe.from, None, "NodeInfo", &e);
                    continue;
                }
            };
            if let Some(r) = self.reach(probe, &ni) {
                reached.push(r);
            }
            if self.out.stopped.is_some() {
                break;
            }
        }

        // The second batch: what each new node (or a CA's newly met port) is.
        let mut asks = Vec::new();
        let mut gets = Vec::new();
        for r in &reached {
            let Some(node) = self.out.subnet.node(r.guid) else {
                continue;
            };
            let mut ask = |a: Ask, attr_id: u16, attr_mod: u32| {
                asks.push(a);
                gets.push(get(attr_id, attr_mod, &r.path));
            };
            if r.new {
                ask(Ask::Desc(r.guid), attr::NODE_DESCRIPTION, 0);
            }
            match node.kind {
                NodeKind::Switch if r.new => {
                    ask(Ask::Switch(r.guid), attr::SWITCH_INFO, 0);
                    for p in 0..=node.num_ports {
                        ask(Ask::Port(r.guid, p), attr::PORT_INFO, u32::from(p));
                    }
                }
                NodeKind::Switch => {}
                // A CA answers for the port it was entered by.
                _ if r.new_port => ask(
                    Ask::Port(r.guid, r.entry),
                    attr::PORT_INFO,
                    u32::from(r.entry),
                ),
                _ => {}
            }
        }
        if let Some(replies) = self.send(&gets) {
            let mut port0_caps = Vec::new();
            let mut fills = Vec::new();
            for ((a, reply), req) in asks.into_iter().zip(replies).zip(&gets) {
                self.answer(a, reply, req, &mut port0_caps, &mut fills);
            }
            self.fill_ports(fills, &port0_caps);
        }

        // The cables, now that the ports are there.
        for r in &reached {
            if let Some(from) = r.from {
                self.link(
                    from,
                    PortRef {
                        guid: r.guid,
                        port: r.entry,
                    },
                );
            }
        }

        // The next level.
        let mut next = Vec::new();
        for r in reached.iter().filter(|r| r.new) {
            self.walk_from(r, &mut next);
        }
        next
    }

    /// Records the node a probe reached; None when the answer makes no sense.
    fn reach(&mut self, probe: Probe, ni: &node_info::Repr) -> Option<Reached> {
        let Some(kind) = NodeKind::from_code(ni.node_type) else {
            let e = format!("NodeInfo gives node type {} (fabric layer)", ni.node_type);
            self.unread_text(&probe.path, probe.from, Some(ni.node_guid), "NodeInfo", e);
            return None;
        };
        let entry = ni.local_port_num;
        let known = self.out.subnet.node(ni.node_guid).is_some();
        if !known {
            if self.out.subnet.nodes().len() >= self.opts.max_nodes {
                self.out.stopped = Some(format!(
                    "stopped at {} nodes (the bound); the rest of the subnet was not walked",
                    self.opts.max_nodes
                ));
                return None;
            }
            let mut node = Node::new(ni.node_guid, kind, ni.num_ports);
            node.system_guid = (ni.system_image_guid != 0).then_some(ni.system_image_guid);
            node.vendor_id = ni.vendor_id;
            node.device_id = ni.device_id;
            if let Some(p0) = node.port0.as_mut() {
                p0.guid = ni.port_guid;
            }
            if probe.path.is_empty() {
                self.out.subnet.set_origin(Some(Origin {
                    node_guid: ni.node_guid,
                    port_guid: ni.port_guid,
                }));
            }
            // The GUID is new (checked above), so this cannot fail.
            let _ = self.out.subnet.add_node(node);
        }
        // A CA's port GUID comes from the NodeInfo read through it.
        let mut new_port = false;
        if kind != NodeKind::Switch {
            if let Some(n) = self.out.subnet.node_mut(ni.node_guid) {
                if n.port(entry).is_none() && entry != 0 {
                    n.set_port(Port::new(entry, ni.port_guid));
                    new_port = true;
                }
            }
        }
        Some(Reached {
            guid: ni.node_guid,
            path: probe.path,
            entry,
            from: probe.from,
            new: !known,
            new_port,
        })
    }

    /// Takes one answer of the second batch.
    fn answer(
        &mut self,
        a: Ask,
        reply: Result<[u8; 64], MadError>,
        req: &SmpGet,
        port0_caps: &mut Vec<(u64, u32)>,
        fills: &mut Vec<(u64, u8, port_info::Repr)>,
    ) {
        let (guid, what) = match a {
            Ask::Desc(g) => (g, "NodeDescription".to_string()),
            Ask::Switch(g) => (g, "SwitchInfo".to_string()),
            Ask::Port(g, p) => (g, format!("PortInfo {p}")),
        };
        let data = match reply {
            Ok(d) => d,
            Err(e) => {
                let from = None;
                self.unread(&req.path, from, Some(guid), &what, &e);
                return;
            }
        };
        let Some(node) = self.out.subnet.node_mut(guid) else {
            return;
        };
        match a {
            Ask::Desc(_) => {
                if let Ok(nd) = node_description::Repr::from_data(&data) {
                    node.desc = nd.text().into_owned();
                }
            }
            Ask::Switch(_) => {
                if let (Ok(si), Some(p0)) =
                    (switch_info::Repr::from_data(&data), node.port0.as_mut())
                {
                    p0.enhanced = si.enhanced_port0;
                }
            }
            Ask::Port(_, p) => {
                let Ok(pi) = port_info::Repr::from_data(&data) else {
                    return;
                };
                match (p, node.port0.as_mut()) {
                    (0, Some(p0)) => {
                        p0.lid = pi.lid;
                        p0.lmc = pi.lmc;
                        port0_caps.push((guid, pi.capability_mask));
                    }
                    _ => fills.push((guid, p, pi)),
                }
            }
        }
    }

    /// Sets the ports read. Extended speeds count only where the port (a
    /// switch: its port 0) says they are supported.
    fn fill_ports(&mut self, fills: Vec<(u64, u8, port_info::Repr)>, port0_caps: &[(u64, u32)]) {
        for (guid, num, pi) in fills {
            let Some(node) = self.out.subnet.node_mut(guid) else {
                continue;
            };
            let switch = node.kind == NodeKind::Switch;
            let cap = match switch {
                true => port0_caps
                    .iter()
                    .find(|(g, _)| *g == guid)
                    .map_or(0, |c| c.1),
                false => pi.capability_mask,
            };
            let ext = cap & port_info::CAP_IS_EXTENDED_SPEEDS_SUPPORTED != 0;
            let guid_of_port = match (switch, node.port(num)) {
                (true, _) => node.port0.map_or(guid, |p0| p0.guid),
                (false, Some(p)) => p.guid,
                (false, None) => guid.wrapping_add(u64::from(num)),
            };
            let remote = node.port(num).and_then(|p| p.remote);
            let mut port = port_from_info(num, guid_of_port, &pi, ext, switch);
            port.remote = remote;
            node.set_port(port);
        }
    }

    /// Records the cable between two ports, at both ends.
    fn link(&mut self, a: PortRef, b: PortRef) {
        for (here, there) in [(a, b), (b, a)] {
            let Some(node) = self.out.subnet.node_mut(here.guid) else {
                continue;
            };
            if node.port(here.port).is_none() && here.port != 0 {
                let g = node.port0.map_or(here.guid, |p0| p0.guid);
                node.set_port(Port::new(here.port, g));
            }
            if let Some(p) = node.port_mut(here.port) {
                p.remote = Some(there);
            }
        }
    }

    /// Adds the probes out of a new node's ports to `next`.
    fn walk_from(&mut self, r: &Reached, next: &mut Vec<Probe>) {
        let Some(node) = self.out.subnet.node(r.guid) else {
            return;
        };
        let local = r.path.is_empty();
        let ports: Vec<u8> = match node.kind {
            NodeKind::Switch => node
                .ports
                .iter()
                .filter(|p| local || p.num != r.entry)
                .filter(|p| p.remote.is_none() && is_up(p))
                .map(|p| p.num)
                .collect(),
            // A CA or router forwards nothing; the local one's own port leads
            // out.
            _ if local => node
                .port(r.entry)
                .filter(|p| p.remote.is_none() && is_up(p))
                .map(|p| p.num)
                .into_iter()
                .collect(),
            _ => Vec::new(),
        };
        for p in ports {
            let from = PortRef {
                guid: r.guid,
                port: p,
            };
            if r.path.len() >= self.opts.max_hops {
                let e = format!(
                    "not walked: the route would take {} hops, more than {} (application layer)",
                    r.path.len() + 1,
                    self.opts.max_hops
                );
                self.unread_text(&r.path, Some(from), None, "route", e);
                continue;
            }
            let mut path = r.path.clone();
            path.push(p);
            next.push(Probe {
                path,
                from: Some(from),
            });
        }
    }

    /// Sends a batch within the budget; None (and `stopped`) when it would
    /// pass it.
    fn send(&mut self, gets: &[SmpGet]) -> Option<Vec<Result<[u8; 64], MadError>>> {
        if gets.is_empty() {
            return Some(Vec::new());
        }
        let n = gets.len() as u64;
        if self.out.mads.saturating_add(n) > self.opts.mad_budget {
            self.out.stopped = Some(format!(
                "stopped after {} SMPs: the next {n} would pass the budget of {}",
                self.out.mads, self.opts.mad_budget
            ));
            return None;
        }
        self.out.mads += n;
        let mut replies = self.smp.get_many(gets);
        // An implementation that answers short leaves the rest unanswered.
        replies.resize_with(gets.len(), || {
            Err(MadError::Invalid("no reply returned for this request"))
        });
        Some(replies)
    }

    fn unread(
        &mut self,
        path: &[u8],
        from: Option<PortRef>,
        node: Option<u64>,
        what: &str,
        e: &MadError,
    ) {
        self.unread_text(path, from, node, what, e.to_string());
    }

    fn unread_text(
        &mut self,
        path: &[u8],
        from: Option<PortRef>,
        node: Option<u64>,
        what: &str,
        error: String,
    ) {
        self.out.unread.push(Unread {
            path: path.to_vec(),
            from,
            node,
            what: what.to_string(),
            error,
        });
    }
}

/// A port is walked unless PortInfo says it is Down (or was not read).
fn is_up(p: &Port) -> bool {
    p.state.is_some_and(|s| s != rdmakit_types::PortState::Down)
}

fn get(attr_id: u16, attr_mod: u32, path: &[u8]) -> SmpGet {
    SmpGet {
        attr_id,
        attr_mod,
        path: path.to_vec(),
    }
}

/// An attribute from a reply's SMP data; a short one is a malformed reply.
fn parse<A: Attribute>(data: &[u8; 64]) -> Result<A, MadError> {
    A::from_data(data).map_err(|_| MadError::Invalid("the reply's attribute does not parse"))
}

/// The model's port from a PortInfo. A switch's external ports have no LID
/// of their own (the model keeps 0 there).
pub(crate) fn port_from_info(
    num: u8,
    guid: u64,
    pi: &port_info::Repr,
    ext_speeds: bool,
    switch: bool,
) -> Port {
    let ext = |v: u8| if ext_speeds { v } else { 0 };
    let mut p = Port::new(num, guid);
    if !switch || num == 0 {
        p.lid = pi.lid;
        p.lmc = pi.lmc;
    }
    p.state = Port::state_from_code(pi.port_state);
    p.phys_state = Some(pi.port_phys_state);
    p.width = LinkWidths::from_port_info(
        pi.link_width_active,
        pi.link_width_enabled,
        pi.link_width_supported,
    );
    p.speed = LinkSpeeds::from_port_info(
        (pi.link_speed_active, ext(pi.link_speed_ext_active)),
        (pi.link_speed_enabled, ext(pi.link_speed_ext_enabled)),
        (pi.link_speed_supported, ext(pi.link_speed_ext_supported)),
    );
    p
}

#[cfg(test)]
mod tests;
