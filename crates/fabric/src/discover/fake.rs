//! A fake fabric that answers directed-route SMPs from a [`Subnet`], for
//! tests of [`super::discover`] (and of anything built on it) without a MAD
//! layer.
//!
//! A subnet read from ibsim's net format ([`crate::ibnetdiscover::parse`])
//! holds the cables and the enabled widths and speeds; the fake answers as
//! ibsim would: a cabled port is Active and LinkUp at its widest enabled
//! width and fastest enabled speed, any other port of a switch is Down and
//! Polling. Routes are followed hop by hop from the start port: a CA
//! forwards nothing, a port without a cable drops the SMP, and a node made
//! silent ([`FakeFabric::silence`]) neither answers nor forwards. What is
//! dropped comes back as [`MadError::Timeout`], as umad reports it.

use std::collections::HashSet;

use rdmakit_umad::MadError;
use rdmakit_wire::mad::smp::{attr, node_description, node_info, port_info, switch_info};
use rdmakit_wire::mad::Attribute;

use super::{Smp, SmpGet};
use crate::topology::{Node, NodeKind, Port, PortRef, Subnet};

/// The timeout a dropped SMP is reported with.
const DROPPED: MadError = MadError::Timeout {
    attempts: 4,
    timeout_ms: 200,
};

/// A fabric answering SMPs from a subnet; see the module's documentation.
#[derive(Clone, Debug)]
pub struct FakeFabric {
    subnet: Subnet,
    start: PortRef,
    silent: HashSet<u64>,
    /// The size of each `get_many` batch, in order.
    pub batches: Vec<usize>,
}

impl FakeFabric {
    /// A fabric of `subnet` seen from port `start` (port 0 of a switch: the
    /// switch's management port).
    pub fn new(subnet: Subnet, start: PortRef) -> FakeFabric {
        FakeFabric {
            subnet,
            start,
            silent: HashSet::new(),
            batches: Vec::new(),
        }
    }

    /// Makes the node with this GUID drop every SMP (it neither answers nor
    /// forwards), as a node behind `Error "X"[p] 100` does in ibsim.
    pub fn silence(&mut self, guid: u64) {
        self.silent.insert(guid);
    }

    /// The node and entry port a route leads to, or why it is dropped.
    fn follow(&self, path: &[u8]) -> Result<(&Node, u8), MadError> {
        let mut node = self.subnet.node(self.start.guid).ok_or(DROPPED)?;
        let mut entry = self.start.port;
        for (hop, &out) in path.iter().enumerate() {
            let forwards = node.kind == NodeKind::Switch || (hop == 0 && out == entry);
            if self.silent.contains(&node.guid) || !forwards {
                return Err(DROPPED);
            }
            let peer = node.port(out).and_then(|p| p.remote).ok_or(DROPPED)?;
            node = self.subnet.node(peer.guid).ok_or(DROPPED)?;
            node.port(peer.port).ok_or(DROPPED)?;
            entry = peer.port;
        }
        if self.silent.contains(&node.guid) {
            return Err(DROPPED);
        }
        Ok((node, entry))
    }

    fn answer(&self, g: &SmpGet) -> Result<[u8; 64], MadError> {
        let (node, entry) = self.follow(&g.path)?;
        let mut data = [0u8; 64];
        let written = match g.attr_id {
            attr::NODE_INFO => node_info_of(node, entry).to_data(&mut data),
            attr::NODE_DESCRIPTION => {
                node_description::Repr::from_text(&node.desc).to_data(&mut data)
            }
            attr::SWITCH_INFO if node.kind == NodeKind::Switch => switch_info::Repr {
                enhanced_port0: node.port0.is_some_and(|p| p.enhanced),
                ..switch_info::Repr::default()
            }
            .to_data(&mut data),
            attr::PORT_INFO => {
                let num = match node.kind {
                    NodeKind::Switch => u8::try_from(g.attr_mod).map_err(|_| BAD_MOD)?,
                    _ => entry,
                };
                if num > node.num_ports {
                    return Err(BAD_MOD);
                }
                port_info_of(node, num).to_data(&mut data)
            }
            _ => return Err(MadError::Status(0x000c)),
        };
        written.map_err(|_| MadError::Invalid("attribute does not fit"))?;
        Ok(data)
    }
}

/// What an SMA answers for a port it does not have.
const BAD_MOD: MadError = MadError::Status(0x001c);

impl Smp for FakeFabric {
    fn get_many(&mut self, requests: &[SmpGet]) -> Vec<Result<[u8; 64], MadError>> {
        self.batches.push(requests.len());
        requests.iter().map(|g| self.answer(g)).collect()
    }
}

fn node_info_of(node: &Node, entry: u8) -> node_info::Repr {
    let port_guid = match (node.port0, node.port(entry)) {
        (Some(p0), _) => p0.guid,
        (None, Some(p)) => p.guid,
        (None, None) => node.guid.wrapping_add(u64::from(entry)),
    };
    node_info::Repr {
        base_version: 1,
        class_version: 1,
        node_type: match node.kind {
            NodeKind::Ca => node_info::NODE_TYPE_CA,
            NodeKind::Switch => node_info::NODE_TYPE_SWITCH,
            NodeKind::Router => node_info::NODE_TYPE_ROUTER,
        },
        num_ports: node.num_ports,
        system_image_guid: node.system_guid.unwrap_or(0),
        node_guid: node.guid,
        port_guid,
        device_id: node.device_id,
        local_port_num: entry,
        vendor_id: node.vendor_id,
        ..node_info::Repr::default()
    }
}

/// PortInfo as ibsim gives it: LinkUp at the widest and fastest enabled
/// when cabled, Down and Polling when not; port 0 of a switch is Active.
fn port_info_of(node: &Node, num: u8) -> port_info::Repr {
    let mut pi = port_info::Repr {
        link_width_enabled: 2,
        link_width_supported: 0x1f,
        link_width_active: 2,
        link_speed_supported: 7,
        link_speed_enabled: 7,
        link_speed_active: 4,
        port_state: 1,
        port_phys_state: 2,
        local_port_num: num,
        capability_mask: port_info::CAP_IS_EXTENDED_SPEEDS_SUPPORTED,
        ..port_info::Repr::default()
    };
    if let (0, Some(p0)) = (num, node.port0) {
        pi.lid = p0.lid;
        pi.lmc = p0.lmc;
        pi.port_state = 4;
        pi.port_phys_state = 5;
        return pi;
    }
    let Some(p) = node.port(num) else {
        return pi;
    };
    set_link(&mut pi, p);
    pi.lid = p.lid;
    pi.lmc = p.lmc;
    if p.remote.is_some() {
        pi.port_state = 4;
        pi.port_phys_state = 5;
    }
    pi
}

fn set_link(pi: &mut port_info::Repr, p: &Port) {
    let widths = &p.width.enabled;
    if !widths.is_empty() {
        pi.link_width_enabled = widths.iter().fold(0, |m, w| m | w.code());
    }
    if let Some(w) = p.width.active.or_else(|| widths.last().copied()) {
        pi.link_width_active = w.code();
    }
    let speeds = &p.speed.enabled;
    if !speeds.is_empty() {
        let (mut base, mut ext) = (0, 0);
        for s in speeds {
            if let Some((b, e)) = s.port_info_code() {
                match e {
                    0 => base |= b,
                    e => ext |= e,
                }
            }
        }
        pi.link_speed_enabled = base;
        pi.link_speed_ext_enabled = ext;
    }
    if let Some((b, e)) = p
        .speed
        .active
        .or_else(|| speeds.last().copied())
        .and_then(|s| s.port_info_code())
    {
        pi.link_speed_active = b;
        pi.link_speed_ext_active = e;
    }
}
