//! The subnet as data: [`Subnet`] holds [`Node`]s, each with its [`Port`]s;
//! a port names the port at the other end of its cable ([`PortRef`]).
//!
//! The model has the fields that SMP answers carry, so discovery fills it
//! from them one by one: NodeInfo gives a node's GUID, kind, system image
//! GUID, vendor and device ids and port count ([`Node::new`]); NodeDescription
//! its `desc`; each PortInfo a port's LID, LMC, states, widths and speeds
//! ([`Port::new`], [`LinkWidths::from_port_info`],
//! [`LinkSpeeds::from_port_info`]); the directed route that reached a
//! neighbour its `remote`. Nodes keep the order they were added in, so a
//! subnet read from a file is written back in the file's order.
//!
//! Cables are recorded at both ends: a port's `remote` names the peer port,
//! whose own `remote` names it back. [`Subnet::links`] yields each cable once.
//!
//! Filling it from SMP answers (the raw codes of wire's NodeInfo and
//! PortInfo views):
//!
//! ```
//! use rdmakit_fabric::{LinkSpeeds, LinkWidths, Node, NodeKind, Port, PortRef, Subnet};
//! use rdmakit_types::{Speed, Width};
//!
//! let mut subnet = Subnet::new();
//! // NodeInfo: NodeType 1, NumPorts 1, NodeGUID; then NodeDescription.
//! let kind = NodeKind::from_code(1).unwrap();
//! let host = subnet.add_node(Node::new(0x0002_c903_00a1_b2c0, kind, 1)).unwrap();
//! host.desc = "host-01 HCA-1".into();
//! // PortInfo of port 1: LID 4, Active, LinkUp, 4X, EDR (ext active 2).
//! let mut p = Port::new(1, 0x0002_c903_00a1_b2c1);
//! p.lid = 4;
//! p.state = Port::state_from_code(4);
//! p.phys_state = Some(5);
//! p.width = LinkWidths::from_port_info(2, 2, 0x1f);
//! p.speed = LinkSpeeds::from_port_info((0, 2), (7, 3), (7, 7));
//! host.set_port(p);
//! // A switch found behind it (NodeType 2) on its port 3.
//! let sw = subnet.add_node(Node::new(0x0002_c903_00ff_0000, NodeKind::Switch, 36)).unwrap();
//! sw.set_port(Port::new(3, 0x0002_c903_00ff_0000));
//! let h = PortRef { guid: 0x0002_c903_00a1_b2c0, port: 1 };
//! let s = PortRef { guid: 0x0002_c903_00ff_0000, port: 3 };
//! subnet.connect(h, s).unwrap();
//! assert_eq!(subnet.links().count(), 1);
//! let port = subnet.port(h).unwrap();
//! assert_eq!((port.width.active, port.speed.active), (Some(Width::X4), Some(Speed::Edr)));
//! assert_eq!(subnet.by_lid(4).map(|(n, _)| n.desc.as_str()), Some("host-01 HCA-1"));
//! ```

use std::collections::HashMap;

use rdmakit_types::{PortState, Speed, Width};
use serde::{Deserialize, Serialize};

use crate::names;

/// The JSON schema name of a serialized [`Subnet`].
pub const SCHEMA: &str = "rdmakit.fabric/v1";

/// An InfiniBand subnet: its nodes, in the order they were added, with an
/// index by node GUID.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(try_from = "SubnetJson", into = "SubnetJson")]
pub struct Subnet {
    nodes: Vec<Node>,
    origin: Option<Origin>,
    by_guid: HashMap<u64, usize>,
}

/// Where a discovery started: the node and port whose MADs found the rest.
/// ibnetdiscover prints it as `# Initiated from node N port P`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The node's GUID.
    #[serde(with = "names::guid")]
    pub node_guid: u64,
    /// The port's GUID (NodeInfo's PortGUID of the port the MADs left by).
    #[serde(with = "names::guid")]
    pub port_guid: u64,
}

/// What a node is (NodeInfo's NodeType).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeKind {
    /// A channel adapter (NodeType 1): a host's HCA.
    Ca,
    /// A switch (NodeType 2).
    Switch,
    /// A router (NodeType 3).
    Router,
}

impl NodeKind {
    /// The kind of a NodeInfo NodeType code (1, 2, 3); None for any other.
    pub fn from_code(code: u8) -> Option<NodeKind> {
        match code {
            1 => Some(NodeKind::Ca),
            2 => Some(NodeKind::Switch),
            3 => Some(NodeKind::Router),
            _ => None,
        }
    }
}

/// A node: a switch, a channel adapter or a router.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// NodeInfo's NodeGUID.
    #[serde(with = "names::guid")]
    pub guid: u64,
    /// NodeInfo's NodeType.
    pub kind: NodeKind,
    /// NodeDescription, as the node reports it (ibnetdiscover prints it in
    /// quotes after `#`).
    pub desc: String,
    /// NodeInfo's SystemImageGUID; None when the node reports 0.
    #[serde(with = "names::opt_guid")]
    pub system_guid: Option<u64>,
    /// NodeInfo's VendorID (24 bits).
    pub vendor_id: u32,
    /// NodeInfo's DeviceID.
    pub device_id: u16,
    /// NodeInfo's NumPorts: the external ports, numbered 1 to this.
    pub num_ports: u8,
    /// A switch's management port 0; None for a CA or router.
    pub port0: Option<Port0>,
    /// The external ports known, by number (only the connected ones when read
    /// from ibnetdiscover's output).
    pub ports: Vec<Port>,
}

/// A switch's port 0: its one port GUID and its one LID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port0 {
    /// NodeInfo's PortGUID, read through port 0.
    #[serde(with = "names::guid")]
    pub guid: u64,
    /// PortInfo's LID of port 0.
    pub lid: u16,
    /// PortInfo's LMC of port 0.
    pub lmc: u8,
    /// SwitchInfo's EnhancedPort0 bit (ibnetdiscover: `enhanced port 0`,
    /// else `base port 0`).
    pub enhanced: bool,
}

/// One external port of a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port {
    /// Its number, 1 to the node's `num_ports`.
    pub num: u8,
    /// Its port GUID (a switch's ports share port 0's GUID).
    #[serde(with = "names::guid")]
    pub guid: u64,
    /// Its base LID (0 on a switch's external ports: a switch is addressed
    /// through port 0).
    pub lid: u16,
    /// Its LMC.
    pub lmc: u8,
    /// PortInfo's PortState; None when not known (ibnetdiscover does not
    /// print it).
    #[serde(with = "names::port_state")]
    pub state: Option<PortState>,
    /// PortInfo's PortPhysicalState code (5 LinkUp); None when not known.
    pub phys_state: Option<u8>,
    /// Its link widths.
    pub width: LinkWidths,
    /// Its link speeds.
    pub speed: LinkSpeeds,
    /// The port at the other end of its cable; None when nothing is there.
    pub remote: Option<PortRef>,
}

/// A port's link widths: the one it runs at and the ones it may run at.
/// Empty lists are unknown (ibnetdiscover prints only the active one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkWidths {
    /// LinkWidthActive; None when unknown.
    #[serde(with = "names::opt_width")]
    pub active: Option<Width>,
    /// LinkWidthEnabled, narrowest first.
    #[serde(with = "names::widths")]
    pub enabled: Vec<Width>,
    /// LinkWidthSupported, narrowest first.
    #[serde(with = "names::widths")]
    pub supported: Vec<Width>,
}

/// A port's link speeds, extended speeds included: the one it runs at and
/// the ones it may run at. Empty lists are unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkSpeeds {
    /// LinkSpeedActive, or LinkSpeedExtActive when that is set; None when
    /// unknown.
    #[serde(with = "names::opt_speed")]
    pub active: Option<Speed>,
    /// LinkSpeedEnabled and LinkSpeedExtEnabled, slowest first.
    #[serde(with = "names::speeds")]
    pub enabled: Vec<Speed>,
    /// LinkSpeedSupported and LinkSpeedExtSupported, slowest first.
    #[serde(with = "names::speeds")]
    pub supported: Vec<Speed>,
}

/// A port named by its node's GUID and its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PortRef {
    /// The node's GUID.
    #[serde(with = "names::guid")]
    pub guid: u64,
    /// The port's number.
    pub port: u8,
}

/// One cable: the two ports it joins, the lower [`PortRef`] first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Link {
    /// One end.
    pub a: PortRef,
    /// The other end.
    pub b: PortRef,
}

/// A node could not be added.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// Another node already has this GUID.
    #[error("two nodes have GUID {guid:#018x}: {first:?} and {second:?}")]
    DuplicateGuid {
        /// The GUID.
        guid: u64,
        /// The description of the node already there.
        first: String,
        /// The description of the node added.
        second: String,
    },
    /// A port named is not in the subnet.
    #[error("port {} of node {:#018x} is not in the subnet", .0.port, .0.guid)]
    NoPort(PortRef),
    /// A JSON subnet names another schema.
    #[error("schema {found:?} is not {SCHEMA:?}")]
    Schema {
        /// The schema read.
        found: String,
    },
}

impl Subnet {
    /// An empty subnet.
    pub fn new() -> Subnet {
        Subnet::default()
    }

    /// Adds a node at the end and returns it for filling in.
    ///
    /// # Errors
    /// [`ModelError::DuplicateGuid`] when a node with its GUID is already
    /// there (the subnet is unchanged).
    pub fn add_node(&mut self, node: Node) -> Result<&mut Node, ModelError> {
        if let Some(&i) = self.by_guid.get(&node.guid) {
            return Err(ModelError::DuplicateGuid {
                guid: node.guid,
                first: self.nodes[i].desc.clone(),
                second: node.desc,
            });
        }
        let i = self.nodes.len();
        self.by_guid.insert(node.guid, i);
        self.nodes.push(node);
        Ok(&mut self.nodes[i])
    }

    /// The nodes, in the order they were added.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Where the discovery started, when known.
    pub fn origin(&self) -> Option<Origin> {
        self.origin
    }

    /// Records where the discovery started.
    pub fn set_origin(&mut self, origin: Option<Origin>) {
        self.origin = origin;
    }

    /// The node with this GUID.
    pub fn node(&self, guid: u64) -> Option<&Node> {
        self.by_guid.get(&guid).map(|&i| &self.nodes[i])
    }

    /// The node with this GUID, to fill in. (Its GUID must not change: the
    /// index would lose it.)
    pub fn node_mut(&mut self, guid: u64) -> Option<&mut Node> {
        self.by_guid.get(&guid).map(|&i| &mut self.nodes[i])
    }

    /// The nodes with this description, in order (descriptions need not be
    /// unique: HCAs fresh from the factory share one).
    pub fn nodes_by_desc<'a>(&'a self, desc: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes.iter().filter(move |n| n.desc == desc)
    }

    /// The node and port that own this LID: a switch by its port 0's LID
    /// (port 0 is returned as None), a CA or router port by its base LID and
    /// LMC range.
    pub fn by_lid(&self, lid: u16) -> Option<(&Node, Option<&Port>)> {
        if lid == 0 {
            return None;
        }
        self.nodes.iter().find_map(|n| match n.port0 {
            Some(p0) => lid_in(lid, p0.lid, p0.lmc).then_some((n, None)),
            None => n
                .ports
                .iter()
                .find(|p| lid_in(lid, p.lid, p.lmc))
                .map(|p| (n, Some(p))),
        })
    }

    /// The port a [`PortRef`] names, if its node and port are known.
    pub fn port(&self, r: PortRef) -> Option<&Port> {
        self.node(r.guid)?.port(r.port)
    }

    /// Records a cable at both ends: `a`'s `remote` becomes `b` and `b`'s
    /// becomes `a` (a cable found from one end, by a directed route, is
    /// recorded with this once both ports are in).
    ///
    /// # Errors
    /// [`ModelError::NoPort`] when either port is not in the subnet (nothing
    /// is changed).
    pub fn connect(&mut self, a: PortRef, b: PortRef) -> Result<(), ModelError> {
        for r in [a, b] {
            if self.port(r).is_none() {
                return Err(ModelError::NoPort(r));
            }
        }
        for (here, there) in [(a, b), (b, a)] {
            if let Some(p) = self.node_mut(here.guid).and_then(|n| n.port_mut(here.port)) {
                p.remote = Some(there);
            }
        }
        Ok(())
    }

    /// Each cable once, in node order: a port's cable is yielded at the
    /// first of its two ends met (and once only when the peer is not in the
    /// subnet or does not name it back).
    pub fn links(&self) -> impl Iterator<Item = Link> + '_ {
        self.nodes.iter().flat_map(move |n| {
            n.ports.iter().filter_map(move |p| {
                let here = PortRef {
                    guid: n.guid,
                    port: p.num,
                };
                let there = p.remote?;
                let back = self.port(there).and_then(|q| q.remote);
                if back == Some(here) && self.comes_before(there, here) {
                    return None; // yielded at the other end
                }
                Some(Link::new(here, there))
            })
        })
    }

    /// True when `a` is met before `b` walking nodes then ports in order.
    fn comes_before(&self, a: PortRef, b: PortRef) -> bool {
        let ia = self.by_guid.get(&a.guid);
        let ib = self.by_guid.get(&b.guid);
        (ia, a.port) < (ib, b.port)
    }
}

fn lid_in(lid: u16, base: u16, lmc: u8) -> bool {
    let span = 1u32 << lmc.min(7);
    base != 0 && u32::from(lid) >= u32::from(base) && u32::from(lid) < u32::from(base) + span
}

impl PartialEq for Subnet {
    fn eq(&self, other: &Subnet) -> bool {
        self.nodes == other.nodes && self.origin == other.origin
    }
}

impl Eq for Subnet {}

impl Node {
    /// A node as NodeInfo describes it, with no description and no ports
    /// yet; a switch gets a port 0 with the NodeInfo PortGUID, LID 0.
    pub fn new(guid: u64, kind: NodeKind, num_ports: u8) -> Node {
        Node {
            guid,
            kind,
            desc: String::new(),
            system_guid: None,
            vendor_id: 0,
            device_id: 0,
            num_ports,
            port0: (kind == NodeKind::Switch).then_some(Port0 {
                guid,
                lid: 0,
                lmc: 0,
                enhanced: false,
            }),
            ports: Vec::new(),
        }
    }

    /// The port with this number.
    pub fn port(&self, num: u8) -> Option<&Port> {
        self.ports.iter().find(|p| p.num == num)
    }

    /// The port with this number, to fill in.
    pub fn port_mut(&mut self, num: u8) -> Option<&mut Port> {
        self.ports.iter_mut().find(|p| p.num == num)
    }

    /// Puts a port in its place by number, replacing one with its number.
    pub fn set_port(&mut self, port: Port) {
        match self.ports.binary_search_by_key(&port.num, |p| p.num) {
            Ok(i) => self.ports[i] = port,
            Err(i) => self.ports.insert(i, port),
        }
    }

    /// The LID that addresses this node through `port`: a switch's port 0
    /// LID, else the port's own.
    pub fn lid_of(&self, port: &Port) -> u16 {
        self.port0.map_or(port.lid, |p0| p0.lid)
    }
}

impl Port {
    /// A port with its number and GUID; nothing else known yet.
    pub fn new(num: u8, guid: u64) -> Port {
        Port {
            num,
            guid,
            lid: 0,
            lmc: 0,
            state: None,
            phys_state: None,
            width: LinkWidths::default(),
            speed: LinkSpeeds::default(),
            remote: None,
        }
    }

    /// PortInfo's PortState code (1 Down ... 4 Active) as a state; None for
    /// 0 (no change) and any other code.
    pub fn state_from_code(code: u8) -> Option<PortState> {
        match code {
            1 => Some(PortState::Down),
            2 => Some(PortState::Init),
            3 => Some(PortState::Armed),
            4 => Some(PortState::Active),
            _ => None,
        }
    }
}

impl LinkWidths {
    /// From PortInfo's LinkWidthActive, LinkWidthEnabled and
    /// LinkWidthSupported.
    pub fn from_port_info(active: u8, enabled: u8, supported: u8) -> LinkWidths {
        LinkWidths {
            active: Width::from_code(active),
            enabled: Width::in_mask(enabled),
            supported: Width::in_mask(supported),
        }
    }
}

impl LinkSpeeds {
    /// From PortInfo's (base, extended) pairs of LinkSpeedActive,
    /// LinkSpeedEnabled and LinkSpeedSupported.
    pub fn from_port_info(active: (u8, u8), enabled: (u8, u8), supported: (u8, u8)) -> LinkSpeeds {
        LinkSpeeds {
            active: Speed::from_port_info(active.0, active.1),
            enabled: Speed::in_port_info_masks(enabled.0, enabled.1),
            supported: Speed::in_port_info_masks(supported.0, supported.1),
        }
    }
}

impl Link {
    /// The cable between two ports, the lower one first.
    pub fn new(x: PortRef, y: PortRef) -> Link {
        let (a, b) = if x <= y { (x, y) } else { (y, x) };
        Link { a, b }
    }
}

/// The JSON form: the schema name, the origin and the nodes.
#[derive(Serialize, Deserialize)]
struct SubnetJson {
    schema: String,
    origin: Option<Origin>,
    nodes: Vec<Node>,
}

impl TryFrom<SubnetJson> for Subnet {
    type Error = ModelError;

    fn try_from(j: SubnetJson) -> Result<Subnet, ModelError> {
        if j.schema != SCHEMA {
            return Err(ModelError::Schema { found: j.schema });
        }
        let mut s = Subnet::new();
        s.set_origin(j.origin);
        for n in j.nodes {
            s.add_node(n)?;
        }
        Ok(s)
    }
}

impl From<Subnet> for SubnetJson {
    fn from(s: Subnet) -> SubnetJson {
        SubnetJson {
            schema: SCHEMA.to_string(),
            origin: s.origin,
            nodes: s.nodes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca(guid: u64, desc: &str, lid: u16) -> Node {
        let mut n = Node::new(guid, NodeKind::Ca, 1);
        n.desc = desc.into();
        let mut p = Port::new(1, guid + 1);
        p.lid = lid;
        n.set_port(p);
        n
    }

    fn two_hosts_one_switch() -> Subnet {
        let mut s = Subnet::new();
        let mut sw = Node::new(0x20, NodeKind::Switch, 8);
        sw.desc = "S1".into();
        sw.port0.as_mut().unwrap().lid = 2;
        for (num, peer) in [(1, 0x10), (2, 0x30)] {
            let mut p = Port::new(num, 0x20);
            p.remote = Some(PortRef {
                guid: peer,
                port: 1,
            });
            sw.set_port(p);
        }
        s.add_node(sw).unwrap();
        for (g, d, lid, sw_port) in [(0x10, "H1", 1, 1), (0x30, "H2", 3, 2)] {
            let n = s.add_node(ca(g, d, lid)).unwrap();
            n.ports[0].remote = Some(PortRef {
                guid: 0x20,
                port: sw_port,
            });
        }
        s
    }

    #[test]
    fn links_yield_each_cable_once_and_lookups_find_nodes() {
        let s = two_hosts_one_switch();
        let links: Vec<Link> = s.links().collect();
        assert_eq!(links.len(), 2, "{links:?}");
        assert_eq!(
            links[0],
            Link::new(
                PortRef {
                    guid: 0x20,
                    port: 1
                },
                PortRef {
                    guid: 0x10,
                    port: 1
                }
            )
        );
        assert_eq!(s.nodes_by_desc("H2").count(), 1);
        assert_eq!(
            s.by_lid(2).map(|(n, p)| (n.guid, p.is_none())),
            Some((0x20, true))
        );
        assert_eq!(
            s.by_lid(3).map(|(n, p)| (n.guid, p.map(|p| p.num))),
            Some((0x30, Some(1)))
        );
        assert!(s.by_lid(4).is_none());
        assert!(s.by_lid(0).is_none());
    }

    #[test]
    fn connect_records_a_cable_at_both_ends() {
        let mut s = two_hosts_one_switch();
        let (h1, sw3) = (
            PortRef {
                guid: 0x10,
                port: 1,
            },
            PortRef {
                guid: 0x20,
                port: 3,
            },
        );
        assert_eq!(s.connect(h1, sw3), Err(ModelError::NoPort(sw3)));
        assert_eq!(
            s.port(h1).and_then(|p| p.remote),
            Some(PortRef {
                guid: 0x20,
                port: 1
            })
        );
        s.node_mut(0x20).unwrap().set_port(Port::new(3, 0x20));
        s.connect(h1, sw3).unwrap();
        assert_eq!(s.port(h1).and_then(|p| p.remote), Some(sw3));
        assert_eq!(s.port(sw3).and_then(|p| p.remote), Some(h1));
        // sw[1] still names h1, which no longer names it back: its cable is
        // yielded from that end alone.
        assert_eq!(s.links().count(), 3);
    }

    #[test]
    fn a_second_node_with_a_guid_is_refused() {
        let mut s = two_hosts_one_switch();
        let e = s.add_node(ca(0x10, "again", 9)).unwrap_err();
        assert!(e.to_string().contains("\"H1\" and \"again\""), "{e}");
        assert_eq!(s.nodes().len(), 3);
    }

    #[test]
    fn json_round_trip_names_the_schema_and_guids_in_hex() {
        let s = two_hosts_one_switch();
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            text.starts_with(r#"{"schema":"rdmakit.fabric/v1""#),
            "{text}"
        );
        assert!(text.contains(r#""guid":"0x0000000000000020""#), "{text}");
        let back: Subnet = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.node(0x30).map(|n| n.desc.as_str()), Some("H2"));
        let other = text.replace("fabric/v1", "fabric/v9");
        assert!(serde_json::from_str::<Subnet>(&other).is_err());
    }

    #[test]
    fn port_info_codes_fill_widths_and_speeds() {
        let w = LinkWidths::from_port_info(2, 3, 0x1f);
        assert_eq!(w.active, Some(Width::X4));
        assert_eq!(w.enabled, [Width::X1, Width::X4]);
        let s = LinkSpeeds::from_port_info((4, 2), (7, 3), (7, 7));
        assert_eq!(s.active, Some(Speed::Edr));
        assert_eq!(s.enabled.last(), Some(&Speed::Edr));
        assert_eq!(Port::state_from_code(4), Some(PortState::Active));
        assert_eq!(Port::state_from_code(0), None);
        assert_eq!(NodeKind::from_code(2), Some(NodeKind::Switch));
    }
}
