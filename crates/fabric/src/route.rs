//! Unicast routes through the subnet: each switch's linear forwarding table
//! (LFT) read over LID-routed SMPs ([`read_lfts`]), and the hops a packet
//! from one LID to another takes through them ([`route`]), the way
//! ibtracert follows them.
//!
//! Reading: one batch of SwitchInfo Gets (LinearFDBTop, the highest LID a
//! switch routes) to every switch's port 0 LID, then one batch of
//! LinearForwardingTable Gets, block `b` (LIDs `64b..64b+63`) as the
//! attribute modifier, for blocks 0 to LinearFDBTop/64 of each switch. The
//! count is bounded: at most [`MAX_BLOCKS`] blocks (the unicast LID space,
//! 49152 LIDs) a switch, whatever LinearFDBTop claims.
//!
//! Following: from the source port to the switch its cable reaches, then
//! at every switch the LFT's egress port for the destination LID and the
//! cable out of it, until a CA port owning the LID is reached (or a switch
//! whose LFT says port 0: the LID is its own). A LID with no entry (port
//! 255, or past LinearFDBTop), a port with no cable, a switch met twice and
//! more than [`MAX_ROUTE_HOPS`] switches are [`RouteError`]s that name the
//! switch where the route broke.
//!
//! The LFTs travel in `rdmakit fabric discover --json --routes` as
//! [`Lfts`] beside the subnet; [`FabricFile`] reads such a file (and one
//! without routes).
//!
//! ```
//! use rdmakit_fabric::route;
//! use rdmakit_fabric::{fat_tree, ibnetdiscover};
//! use rdmakit_types::{Speed, Width};
//!
//! // Two hosts on one switch; LIDs as a test assigns them.
//! let net = fat_tree(1, 1, 2, 1, Width::X4, Speed::Qdr).unwrap();
//! let mut s = ibnetdiscover::parse(&net).unwrap();
//! route::fake::assign_lids(&mut s);
//! let lfts = route::fake::shortest_lfts(&s);
//! let a = route::resolve(&s, "host-01 HCA-1").unwrap();
//! let b = route::resolve(&s, "host-02 HCA-1").unwrap();
//! let r = route::route(&s, &lfts, a, b).unwrap();
//! assert_eq!(r.hops.len(), 1);
//! assert_eq!(r.hops[0].desc, "leaf1");
//! ```

pub mod fake;
pub mod live;
mod render;

use std::collections::BTreeMap;

use rdmakit_umad::MadError;
use rdmakit_wire::mad::smp::{attr, lft, switch_info};
use rdmakit_wire::mad::Attribute;
use serde::{Deserialize, Serialize};

use crate::counters::Counters;
use crate::names;
use crate::topology::{NodeKind, PortRef, Subnet};

pub use render::{compact, text};

/// The most LFT blocks read from one switch: the unicast LIDs (1 to
/// 0xbfff), 64 a block.
pub const MAX_BLOCKS: u32 = 49152 / 64;
/// The most switches a route may cross before it is called too long.
pub const MAX_ROUTE_HOPS: usize = 64;
/// The most bytes [`FabricFile::from_json`] reads.
pub const MAX_FILE_BYTES: usize = 256 << 20;

/// One LID-routed SMP Get: to the port at `lid`, an attribute and its
/// modifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LidGet {
    /// The destination LID (a switch's port 0 LID).
    pub lid: u16,
    /// The attribute ID (`rdmakit_wire::mad::smp::attr`).
    pub attr_id: u16,
    /// The attribute modifier (the block of an LFT Get).
    pub attr_mod: u32,
}

/// Where LID-routed SMPs go. `get_lid_many` returns each reply's 64 bytes
/// of SMP data, one result per request in the order asked; an
/// implementation keeps as many in flight as it can.
pub trait LidSmp {
    /// The replies' SMP data, in order.
    fn get_lid_many(&mut self, requests: &[LidGet]) -> Vec<Result<[u8; 64], MadError>>;
}

/// The forwarding tables of a subnet's switches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lfts {
    /// One table a switch, in the subnet's node order.
    pub switches: Vec<SwitchLft>,
    /// What could not be read.
    #[serde(default)]
    pub unread: Vec<LftUnread>,
    /// SMPs sent.
    #[serde(default)]
    pub mads: u64,
}

/// One switch's linear forwarding table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchLft {
    /// The switch's node GUID.
    #[serde(with = "names::guid")]
    pub guid: u64,
    /// Its port 0 LID, which the SMPs went to.
    pub lid: u16,
    /// SwitchInfo's LinearFDBTop.
    pub linear_fdb_top: u16,
    /// The egress port of LID `i` at index `i` (255: none), for LIDs 0 to
    /// LinearFDBTop (fewer when blocks were not read or bounded).
    pub ports: Vec<u8>,
}

/// A switch whose SwitchInfo or LFT block did not answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LftUnread {
    /// The switch's GUID.
    #[serde(with = "names::guid")]
    pub guid: u64,
    /// Its description.
    pub desc: String,
    /// The LID asked.
    pub lid: u16,
    /// `SwitchInfo` or `LinearForwardingTable block N`.
    pub what: String,
    /// Why, with the layer.
    pub error: String,
}

impl SwitchLft {
    /// The egress port for `lid`; None when the table has no entry.
    pub fn port_of(&self, lid: u16) -> Option<u8> {
        if lid > self.linear_fdb_top {
            return None;
        }
        self.ports
            .get(usize::from(lid))
            .copied()
            .filter(|&p| p != lft::NO_ROUTE)
    }
}

impl Lfts {
    /// The table of the switch with this GUID.
    pub fn switch(&self, guid: u64) -> Option<&SwitchLft> {
        self.switches.iter().find(|s| s.guid == guid)
    }

    /// True when every switch's table was read whole.
    pub fn complete(&self) -> bool {
        self.unread.is_empty()
    }
}

/// Reads every switch's LinearFDBTop and LFT blocks through `smp`; see the
/// module's documentation. A switch with no LID (no SM yet) is skipped and
/// named in `unread`.
pub fn read_lfts(smp: &mut dyn LidSmp, subnet: &Subnet) -> Lfts {
    let mut out = Lfts::default();
    let switches: Vec<(u64, String, u16)> = subnet
        .nodes()
        .iter()
        .filter(|n| n.kind == NodeKind::Switch)
        .map(|n| (n.guid, n.desc.clone(), n.port0.map_or(0, |p| p.lid)))
        .collect();
    let mut asked = Vec::new();
    let mut gets = Vec::new();
    for (guid, desc, lid) in &switches {
        if *lid == 0 {
            out.unread.push(LftUnread {
                guid: *guid,
                desc: desc.clone(),
                lid: 0,
                what: "SwitchInfo".into(),
                error: "the switch has no LID: no subnet manager has swept it (fabric layer)"
                    .into(),
            });
            continue;
        }
        asked.push((*guid, desc.clone(), *lid));
        gets.push(LidGet {
            lid: *lid,
            attr_id: attr::SWITCH_INFO,
            attr_mod: 0,
        });
    }
    let replies = send(smp, &gets, &mut out.mads);
    // The tables, then one batch of every block of every switch.
    let mut blocks = Vec::new();
    let mut gets = Vec::new();
    for ((guid, desc, lid), reply) in asked.into_iter().zip(replies) {
        let si = reply.and_then(|d| {
            switch_info::Repr::from_data(&d)
                .map_err(|_| MadError::Invalid("the SwitchInfo does not parse"))
        });
        let top = match si {
            Ok(si) => si.linear_fdb_top,
            Err(e) => {
                out.unread.push(LftUnread {
                    guid,
                    desc,
                    lid,
                    what: "SwitchInfo".into(),
                    error: e.to_string(),
                });
                continue;
            }
        };
        let n = (u32::from(top) / u32::from(lft::LIDS_PER_BLOCK) + 1).min(MAX_BLOCKS);
        for b in 0..n {
            blocks.push((out.switches.len(), b));
            gets.push(LidGet {
                lid,
                attr_id: attr::LINEAR_FORWARDING_TABLE,
                attr_mod: b,
            });
        }
        let len = (usize::from(top) + 1).min(MAX_BLOCKS as usize * 64);
        out.switches.push(SwitchLft {
            guid,
            lid,
            linear_fdb_top: top,
            ports: vec![lft::NO_ROUTE; len],
        });
    }
    let replies = send(smp, &gets, &mut out.mads);
    for ((i, b), reply) in blocks.into_iter().zip(replies) {
        let sw = &mut out.switches[i];
        let block = reply.and_then(|d| {
            lft::Repr::from_data(&d).map_err(|_| MadError::Invalid("the LFT block does not parse"))
        });
        match block {
            Ok(block) => {
                let base = b as usize * 64;
                for (k, p) in block.ports.iter().enumerate() {
                    if let Some(slot) = sw.ports.get_mut(base + k) {
                        *slot = *p;
                    }
                }
            }
            Err(e) => out.unread.push(LftUnread {
                guid: sw.guid,
                desc: subnet
                    .node(sw.guid)
                    .map(|n| n.desc.clone())
                    .unwrap_or_default(),
                lid: sw.lid,
                what: format!("LinearForwardingTable block {b}"),
                error: e.to_string(),
            }),
        }
    }
    out
}

fn send(smp: &mut dyn LidSmp, gets: &[LidGet], mads: &mut u64) -> Vec<Result<[u8; 64], MadError>> {
    if gets.is_empty() {
        return Vec::new();
    }
    *mads += gets.len() as u64;
    let mut r = smp.get_lid_many(gets);
    r.resize_with(gets.len(), || {
        Err(MadError::Invalid("no reply returned for this request"))
    });
    r
}

/// A route from one port to another: the ends and the switches between.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// Where it starts.
    pub src: End,
    /// Where it ends.
    pub dst: End,
    /// The switches crossed, in order.
    pub hops: Vec<Hop>,
}

/// One end of a route: a CA port, or a switch's port 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct End {
    /// The node's GUID.
    #[serde(with = "names::guid")]
    pub guid: u64,
    /// Its description.
    pub desc: String,
    /// What it is.
    pub kind: NodeKind,
    /// The port (0: a switch itself).
    pub port: u8,
    /// The port's GUID (a switch's: port 0's), which ibtracert prints.
    #[serde(with = "names::guid")]
    pub port_guid: u64,
    /// The LID.
    pub lid: u16,
}

/// One switch a route crosses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hop {
    /// The switch's GUID.
    #[serde(with = "names::guid")]
    pub guid: u64,
    /// Its description.
    pub desc: String,
    /// Its LID.
    pub lid: u16,
    /// The port the packet comes in by (0: it starts here).
    pub in_port: u8,
    /// The port it leaves by (0: it ends here).
    pub out_port: u8,
}

/// A cable between two switches that a route crosses, in its direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct IslHop {
    /// The port the packet leaves by.
    pub from: PortRef,
    /// The port it enters by.
    pub to: PortRef,
}

/// Where a route broke.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// No port of the subnet owns the LID.
    #[error("LID {0} is not in the subnet (fabric layer)")]
    UnknownLid(u16),
    /// The source port has no cable.
    #[error("the source {desc:?} port {port} has no cable (fabric layer)")]
    NotCabled {
        /// The source's description.
        desc: String,
        /// Its port.
        port: u8,
    },
    /// The LFT of a switch on the way was not read.
    #[error("switch {desc:?} ({guid:#018x}) has no forwarding table read (fabric layer)")]
    NoTable {
        /// The switch.
        guid: u64,
        /// Its description.
        desc: String,
    },
    /// A switch has no route to the LID (port 255, or past LinearFDBTop).
    #[error("switch {desc:?} ({guid:#018x}) has no route to LID {dlid}: a hole in its forwarding table (fabric layer)")]
    Hole {
        /// The switch.
        guid: u64,
        /// Its description.
        desc: String,
        /// The destination LID.
        dlid: u16,
    },
    /// The egress port leads nowhere the subnet knows.
    #[error("switch {desc:?} ({guid:#018x}) forwards LID {dlid} to port {port}, which has no cable (fabric layer)")]
    DeadEnd {
        /// The switch.
        guid: u64,
        /// Its description.
        desc: String,
        /// The port.
        port: u8,
        /// The destination LID.
        dlid: u16,
    },
    /// The route reaches a CA that does not own the LID.
    #[error("switch {desc:?} port {port} delivers LID {dlid} to {reached:?}, which does not own it (fabric layer)")]
    Misdelivered {
        /// The last switch's description.
        desc: String,
        /// Its egress port.
        port: u8,
        /// The destination LID.
        dlid: u16,
        /// The node reached.
        reached: String,
    },
    /// A switch is met twice.
    #[error("the route to LID {dlid} loops: switch {desc:?} ({guid:#018x}) is met again after {hops} hops (fabric layer)")]
    Loop {
        /// The switch met twice.
        guid: u64,
        /// Its description.
        desc: String,
        /// The hops so far.
        hops: usize,
        /// The destination LID.
        dlid: u16,
    },
    /// More than [`MAX_ROUTE_HOPS`] switches.
    #[error("the route to LID {dlid} crosses more than {MAX_ROUTE_HOPS} switches; it was stopped at {desc:?} (fabric layer)")]
    TooLong {
        /// The switch where it stopped.
        desc: String,
        /// The destination LID.
        dlid: u16,
    },
    /// A name given matches no node, or several.
    #[error("{0}")]
    Name(String),
}

/// The route from the port at `slid` to the port at `dlid`; see the
/// module's documentation.
///
/// # Errors
/// [`RouteError`], naming the switch where the route broke.
pub fn route(subnet: &Subnet, lfts: &Lfts, slid: u16, dlid: u16) -> Result<Route, RouteError> {
    let src = end_of(subnet, slid)?;
    let dst = end_of(subnet, dlid)?;
    let mut hops: Vec<Hop> = Vec::new();
    // The first switch and the port the packet enters it by.
    let (mut at, mut in_port) = match src.kind {
        NodeKind::Switch => (src.guid, 0u8),
        _ => {
            let peer = subnet
                .port(PortRef {
                    guid: src.guid,
                    port: src.port,
                })
                .and_then(|p| p.remote)
                .ok_or_else(|| RouteError::NotCabled {
                    desc: src.desc.clone(),
                    port: src.port,
                })?;
            if src.guid == dst.guid && src.port == dst.port {
                return Ok(Route { src, dst, hops });
            }
            (peer.guid, peer.port)
        }
    };
    loop {
        let node = subnet.node(at).ok_or(RouteError::UnknownLid(dlid))?;
        if node.kind != NodeKind::Switch {
            let owns = node.port(in_port).is_some_and(|p| {
                p.lid != 0
                    && dlid >= p.lid
                    && u32::from(dlid) < u32::from(p.lid) + (1u32 << p.lmc.min(7))
            });
            let last = hops.last();
            if !owns {
                return Err(RouteError::Misdelivered {
                    desc: last.map(|h| h.desc.clone()).unwrap_or_default(),
                    port: last.map_or(0, |h| h.out_port),
                    dlid,
                    reached: node.desc.clone(),
                });
            }
            return Ok(Route { src, dst, hops });
        }
        if hops.iter().any(|h| h.guid == at) {
            return Err(RouteError::Loop {
                guid: at,
                desc: node.desc.clone(),
                hops: hops.len(),
                dlid,
            });
        }
        if hops.len() >= MAX_ROUTE_HOPS {
            return Err(RouteError::TooLong {
                desc: node.desc.clone(),
                dlid,
            });
        }
        let table = lfts.switch(at).ok_or_else(|| RouteError::NoTable {
            guid: at,
            desc: node.desc.clone(),
        })?;
        let out = table.port_of(dlid).ok_or_else(|| RouteError::Hole {
            guid: at,
            desc: node.desc.clone(),
            dlid,
        })?;
        hops.push(Hop {
            guid: at,
            desc: node.desc.clone(),
            lid: node.port0.map_or(0, |p| p.lid),
            in_port,
            out_port: out,
        });
        if out == 0 {
            if dst.guid == at {
                return Ok(Route { src, dst, hops });
            }
            return Err(RouteError::Misdelivered {
                desc: node.desc.clone(),
                port: 0,
                dlid,
                reached: node.desc.clone(),
            });
        }
        let peer = node
            .port(out)
            .and_then(|p| p.remote)
            .ok_or_else(|| RouteError::DeadEnd {
                guid: at,
                desc: node.desc.clone(),
                port: out,
                dlid,
            })?;
        at = peer.guid;
        in_port = peer.port;
    }
}

/// The end a LID names.
fn end_of(subnet: &Subnet, lid: u16) -> Result<End, RouteError> {
    let (node, port) = subnet.by_lid(lid).ok_or(RouteError::UnknownLid(lid))?;
    Ok(End {
        guid: node.guid,
        desc: node.desc.clone(),
        kind: node.kind,
        port: port.map_or(0, |p| p.num),
        port_guid: match (node.port0, port) {
            (Some(p0), _) => p0.guid,
            (None, Some(p)) => p.guid,
            (None, None) => node.guid,
        },
        lid,
    })
}

impl Route {
    /// Every port the route crosses: the source CA port, each switch's in
    /// and out ports (port 0 left out), the destination CA port.
    pub fn ports(&self) -> Vec<PortRef> {
        let mut v = Vec::new();
        let mut push = |guid: u64, port: u8| {
            let r = PortRef { guid, port };
            if port != 0 && !v.contains(&r) {
                v.push(r);
            }
        };
        if self.src.kind != NodeKind::Switch {
            push(self.src.guid, self.src.port);
        }
        for h in &self.hops {
            push(h.guid, h.in_port);
            push(h.guid, h.out_port);
        }
        if self.dst.kind != NodeKind::Switch {
            push(self.dst.guid, self.dst.port);
        }
        v
    }

    /// The cables between two switches that the route crosses, in order.
    pub fn isls(&self) -> Vec<IslHop> {
        self.hops
            .windows(2)
            .map(|w| IslHop {
                from: PortRef {
                    guid: w[0].guid,
                    port: w[0].out_port,
                },
                to: PortRef {
                    guid: w[1].guid,
                    port: w[1].in_port,
                },
            })
            .collect()
    }
}

/// The LID a name gives: a number (a LID, as ibtracert reads one), a GUID
/// (`0x...`: a node's, whose first port with a LID is taken, or a port's),
/// or a node description that exactly one node has.
///
/// # Errors
/// [`RouteError::Name`] when nothing, or more than one node, matches.
pub fn resolve(subnet: &Subnet, name: &str) -> Result<u16, RouteError> {
    let name = name.trim();
    if let Ok(lid) = name.parse::<u16>() {
        return match subnet.by_lid(lid) {
            Some(_) => Ok(lid),
            None => Err(RouteError::UnknownLid(lid)),
        };
    }
    let hex = name
        .strip_prefix("0x")
        .or_else(|| name.strip_prefix("0X"))
        .and_then(|h| u64::from_str_radix(h, 16).ok());
    let candidates: Vec<_> = match hex {
        Some(g) => subnet
            .nodes()
            .iter()
            .filter(|n| {
                n.guid == g
                    || n.port0.is_some_and(|p| p.guid == g)
                    || n.ports.iter().any(|p| p.guid == g)
            })
            .collect(),
        None => subnet.nodes_by_desc(name).collect(),
    };
    let node = match candidates.as_slice() {
        [n] => *n,
        [] => return Err(RouteError::Name(format!("no node is named {name:?}"))),
        many => {
            return Err(RouteError::Name(format!(
                "{} nodes are named {name:?}: give a LID or a GUID",
                many.len()
            )))
        }
    };
    // A switch by its port 0; a CA by the port the GUID names, else its
    // first port with a LID.
    let lid = match node.port0 {
        Some(p0) => p0.lid,
        None => node
            .ports
            .iter()
            .filter(|p| p.lid != 0)
            .find(|p| hex.map_or(true, |g| g == node.guid || g == p.guid))
            .map_or(0, |p| p.lid),
    };
    if lid == 0 {
        return Err(RouteError::Name(format!("{name:?} has no LID")));
    }
    Ok(lid)
}

/// A saved fabric: `rdmakit fabric discover --json` (with `--routes`, the
/// LFTs), as the fleet's views read it. Other fields are ignored.
#[derive(Clone, Debug, Deserialize)]
pub struct FabricFile {
    /// The subnet.
    pub subnet: Subnet,
    /// The forwarding tables, when discovered with `--routes`.
    #[serde(default)]
    pub lfts: Option<Lfts>,
}

/// A fabric file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Past [`MAX_FILE_BYTES`].
    #[error("{len} bytes, more than {MAX_FILE_BYTES}")]
    TooLarge {
        /// Its length.
        len: usize,
    },
    /// Not the JSON of `rdmakit fabric discover --json`.
    #[error("not a saved fabric (rdmakit fabric discover --json): {0}")]
    Json(#[from] serde_json::Error),
    /// Not `rdmakit fabric counters --json`.
    #[error("not saved counters (rdmakit fabric counters --json): schema {0:?}")]
    Schema(String),
}

impl FabricFile {
    /// Reads a saved discovery.
    ///
    /// # Errors
    /// [`FileError`]: too large, or not such JSON.
    pub fn from_json(text: &str) -> Result<FabricFile, FileError> {
        if text.len() > MAX_FILE_BYTES {
            return Err(FileError::TooLarge { len: text.len() });
        }
        Ok(serde_json::from_str(text)?)
    }

    /// The route between two LIDs.
    ///
    /// # Errors
    /// [`RouteError::NoTable`] naming the first switch when the file has
    /// no LFTs; else as [`route`].
    pub fn route(&self, slid: u16, dlid: u16) -> Result<Route, RouteError> {
        let empty = Lfts::default();
        route(
            &self.subnet,
            self.lfts.as_ref().unwrap_or(&empty),
            slid,
            dlid,
        )
    }
}

/// Reads saved counters: `rdmakit fabric counters --json`, or a snapshot
/// `rdmakit fabric check --save` wrote (the counters inside it).
///
/// # Errors
/// [`FileError`]: too large, not JSON of either kind, another schema.
pub fn counters_from_json(text: &str) -> Result<Counters, FileError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(FileError::TooLarge { len: text.len() });
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Plain(Counters),
        Saved { counters: Counters },
    }
    let c = match serde_json::from_str::<Either>(text)? {
        Either::Plain(c) | Either::Saved { counters: c } => c,
    };
    if c.schema != crate::counters::SCHEMA {
        return Err(FileError::Schema(c.schema));
    }
    Ok(c)
}

/// The error counters of a port that are not 0, by perfquery's names.
pub fn port_errors(c: &Counters, at: PortRef) -> BTreeMap<String, u64> {
    c.ports
        .iter()
        .filter(|p| p.node_guid == at.guid && p.port == at.port)
        .flat_map(|p| p.errors())
        .filter(|&(_, v)| v != 0)
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// The error counters of a port that grew from `before` to `after`, with
/// their growth. A counter that went down
/// (cleared) counts from 0.
pub fn port_moved(before: &Counters, after: &Counters, at: PortRef) -> BTreeMap<String, u64> {
    let find = |c: &'_ Counters| {
        c.ports
            .iter()
            .find(|p| p.node_guid == at.guid && p.port == at.port)
            .cloned()
    };
    let (Some(b), Some(a)) = (find(before), find(after)) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for (name, &now) in &a.counters {
        let was = b.counters.get(name).copied().unwrap_or(0);
        let grew = if now >= was { now - was } else { now };
        if grew != 0 && crate::counters::ERROR_COUNTERS.contains(&name.as_str()) {
            out.insert(name.clone(), grew);
        }
    }
    out
}

#[cfg(test)]
mod tests;
