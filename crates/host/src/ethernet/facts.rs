//! What the Ethernet layer beneath each RoCE port looks like: the port's
//! class-of-service inputs (rdma_cm's default ToS, the driver's traffic
//! class, a VLAN's egress map) and, for every physical netdev beneath it, the
//! link's QoS, ECN, counters and optics.

use serde::Serialize;

use super::sysfs::{self, DefaultTos, Ecn, OfedQos, Vlan};
use crate::collect::Cx;
use crate::model::{Attr, Device, Netdev};
use crate::parse::sysfs::LinkLayer;

/// The Ethernet layer of every RoCE port.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ethernet {
    /// One per RoCE port (link layer Ethernet), in device order.
    pub ports: Vec<RocePort>,
    /// Every physical netdev beneath a RoCE port, once.
    pub links: Vec<EthLink>,
}

/// One RoCE port's class-of-service inputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RocePort {
    pub device: String,
    pub port: u32,
    /// The netdev the GID table names (a VLAN or bond, or the NIC's own).
    pub netdev: Option<String>,
    /// The physical netdevs beneath it (itself when it has none).
    pub links: Vec<String>,
    /// The VLAN netdev between, if the GIDs are on one.
    pub vlan: Option<Vlan>,
    /// rdma_cm's default ToS for the port's connections.
    pub default_tos: DefaultTos,
    /// MLNX_OFED's forced traffic class for every QP of the port.
    pub traffic_class: Attr<u8>,
}

/// One physical netdev beneath a RoCE port.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EthLink {
    pub name: String,
    pub driver: Option<String>,
    /// The PCI function (for debugfs), if any.
    pub bdf: Option<String>,
    pub ecn: Ecn,
    pub ofed_qos: OfedQos,
}

impl Ethernet {
    /// The link facts for a netdev name.
    pub fn link(&self, name: &str) -> Option<&EthLink> {
        self.links.iter().find(|l| l.name == name)
    }
}

/// Reads the Ethernet layer of every RoCE port of `devices`.
pub(crate) fn collect(cx: &Cx, devices: &[Device], netdevs: &[Netdev]) -> Ethernet {
    let mut out = Ethernet::default();
    for d in devices {
        for p in &d.ports {
            if p.link_layer.known() != Some(&LinkLayer::Ethernet) {
                continue;
            }
            let netdev = p
                .gids
                .iter()
                .find_map(|g| g.ndev.get().filter(|s| super::valid_ifname(s)))
                .cloned()
                .or_else(|| d.parent.get().filter(|s| super::valid_ifname(s)).cloned())
                .or_else(|| d.pci.as_ref().and_then(|p| p.netdevs.first().cloned()));
            let links = netdev
                .as_deref()
                .map(|n| sysfs::lower_netdevs(cx, n))
                .unwrap_or_default();
            let vlan = netdev.as_deref().and_then(|n| sysfs::vlan(cx, n));
            for l in &links {
                if out.link(l).is_none() {
                    out.links.push(link(cx, l, netdevs));
                }
            }
            out.ports.push(RocePort {
                device: d.name.clone(),
                port: p.num,
                netdev,
                links,
                vlan,
                default_tos: sysfs::default_tos(cx, &d.name, p.num),
                traffic_class: sysfs::port_traffic_class(cx, &d.name, p.num),
            });
        }
    }
    out
}

fn link(cx: &Cx, name: &str, netdevs: &[Netdev]) -> EthLink {
    let bdf = cx
        .link_basename(&format!("/sys/class/net/{name}/device"))
        .filter(|b| b.len() == 12 && b.as_bytes()[4] == b':');
    EthLink {
        driver: netdevs
            .iter()
            .find(|n| n.name == name)
            .and_then(|n| n.driver.clone()),
        ecn: sysfs::ecn(cx, name, bdf.as_deref()),
        ofed_qos: sysfs::ofed_qos(cx, name),
        bdf,
        name: name.to_string(),
    }
}
