//! Forwarding tables for tests without a subnet manager: LIDs given in
//! node order ([`assign_lids`]), min-hop tables computed from the cables
//! ([`shortest_lfts`]), and a fake [`LidSmp`] that answers SwitchInfo and
//! LFT blocks from tables ([`FakeLfts`]).

use std::collections::VecDeque;

use rdmakit_umad::MadError;
use rdmakit_wire::mad::smp::{attr, lft, switch_info};
use rdmakit_wire::mad::Attribute;

use super::{Lfts, LidGet, LidSmp, SwitchLft};
use crate::topology::{NodeKind, Subnet};

/// Gives every switch's port 0 and every cabled CA port a LID, 1 up, in
/// node order.
pub fn assign_lids(s: &mut Subnet) {
    let guids: Vec<u64> = s.nodes().iter().map(|n| n.guid).collect();
    let mut next = 1u16;
    for g in guids {
        let Some(n) = s.node_mut(g) else { continue };
        if let Some(p0) = n.port0.as_mut() {
            p0.lid = next;
            next += 1;
            continue;
        }
        for p in n.ports.iter_mut().filter(|p| p.remote.is_some()) {
            p.lid = next;
            next += 1;
        }
    }
}

/// Min-hop tables: at every switch, the egress port of each LID is the
/// lowest-numbered port on a shortest path (port 0 for its own LID).
pub fn shortest_lfts(s: &Subnet) -> Lfts {
    let lids: Vec<(u16, u64, u8)> = s
        .nodes()
        .iter()
        .flat_map(|n| match n.port0 {
            Some(p0) => vec![(p0.lid, n.guid, 0)],
            None => n
                .ports
                .iter()
                .filter(|p| p.lid != 0)
                .map(|p| (p.lid, n.guid, p.num))
                .collect(),
        })
        .collect();
    let top = lids.iter().map(|l| l.0).max().unwrap_or(0);
    let mut out = Lfts::default();
    for sw in s.nodes().iter().filter(|n| n.kind == NodeKind::Switch) {
        let mut ports = vec![lft::NO_ROUTE; usize::from(top) + 1];
        for &(lid, guid, _) in &lids {
            ports[usize::from(lid)] = match guid == sw.guid {
                true => 0,
                false => first_port_towards(s, sw.guid, guid).unwrap_or(lft::NO_ROUTE),
            };
        }
        out.switches.push(SwitchLft {
            guid: sw.guid,
            lid: sw.port0.map_or(0, |p| p.lid),
            linear_fdb_top: top,
            ports,
        });
    }
    out
}

/// The lowest port of `from` that starts a shortest path to node `to`,
/// through switches only.
fn first_port_towards(s: &Subnet, from: u64, to: u64) -> Option<u8> {
    // Breadth first from `to` backwards: distances to `to`.
    let mut dist = std::collections::HashMap::new();
    dist.insert(to, 0usize);
    let mut q = VecDeque::from([to]);
    while let Some(g) = q.pop_front() {
        let d = dist[&g];
        let Some(n) = s.node(g) else { continue };
        if n.kind != NodeKind::Switch && g != to {
            continue;
        }
        for p in &n.ports {
            if let Some(r) = p.remote {
                if let std::collections::hash_map::Entry::Vacant(e) = dist.entry(r.guid) {
                    e.insert(d + 1);
                    q.push_back(r.guid);
                }
            }
        }
    }
    let here = *dist.get(&from)?;
    let n = s.node(from)?;
    n.ports
        .iter()
        .filter_map(|p| Some((p.num, p.remote?)))
        .find(|(_, r)| dist.get(&r.guid).is_some_and(|&d| d + 1 == here))
        .map(|(num, _)| num)
}

/// A fabric that answers LID-routed SwitchInfo and LFT Gets from tables;
/// a LID with no table times out.
#[derive(Clone, Debug)]
pub struct FakeLfts {
    /// The tables answered from.
    pub lfts: Lfts,
    /// The size of each batch, in order.
    pub batches: Vec<usize>,
}

impl FakeLfts {
    /// Answers from `lfts`.
    pub fn new(lfts: Lfts) -> FakeLfts {
        FakeLfts {
            lfts,
            batches: Vec::new(),
        }
    }

    fn answer(&self, g: &LidGet) -> Result<[u8; 64], MadError> {
        let sw = self
            .lfts
            .switches
            .iter()
            .find(|s| s.lid == g.lid)
            .ok_or(MadError::Timeout {
                attempts: 4,
                timeout_ms: 200,
            })?;
        let mut data = [0u8; 64];
        let written = match g.attr_id {
            attr::SWITCH_INFO => switch_info::Repr {
                linear_fdb_top: sw.linear_fdb_top,
                ..switch_info::Repr::default()
            }
            .to_data(&mut data),
            attr::LINEAR_FORWARDING_TABLE => {
                let mut ports = [lft::NO_ROUTE; 64];
                let base = g.attr_mod as usize * 64;
                for (i, p) in ports.iter_mut().enumerate() {
                    if let Some(&v) = sw.ports.get(base + i) {
                        *p = v;
                    }
                }
                lft::Repr { ports }.to_data(&mut data)
            }
            _ => return Err(MadError::Status(0x000c)),
        };
        written.map_err(|_| MadError::Invalid("attribute does not fit"))?;
        Ok(data)
    }
}

impl LidSmp for FakeLfts {
    fn get_lid_many(&mut self, requests: &[LidGet]) -> Vec<Result<[u8; 64], MadError>> {
        self.batches.push(requests.len());
        requests.iter().map(|g| self.answer(g)).collect()
    }
}
