//! What the Ethernet layer beneath each RoCE port looks like: the port's
//! class-of-service inputs (rdma_cm's default ToS, the driver's traffic
//! class, a VLAN's egress map) and, for every physical netdev beneath it, the
//! link's QoS, ECN, counters and optics.

use serde::Serialize;

use super::optics::Module;
use super::parse::dcb::Dcb;
use super::parse::ethtool::{Fec, Pause};
use super::parse::TextError;
use super::sysfs::{self, DefaultTos, Ecn, OfedQos, Vlan};
use super::EthQuery;
use crate::collect::Cx;
use crate::model::{Attr, Device, Netdev, Raw};
use crate::parse::sysfs::LinkLayer;
use crate::parse::ParseError;
use crate::source::Probe;

/// The Ethernet layer of every RoCE port.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ethernet {
    /// One per RoCE port (link layer Ethernet), in device order.
    pub ports: Vec<RocePort>,
    /// Every physical netdev beneath a RoCE port, once.
    pub links: Vec<EthLink>,
    /// Whether module EEPROMs were asked for ([`crate::collect::CollectOptions::optics`]):
    /// when not, every link's `module` is absent by choice, not by fault.
    pub optics: bool,
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
    /// `ethtool -S`: the driver's statistics, its names, in its order.
    pub stats: Attr<Vec<(String, u64)>>,
    /// `ethtool -a`.
    pub pause: Attr<Pause>,
    /// `ethtool --show-fec`.
    pub fec: Attr<Fec>,
    /// DCB (iproute2 `dcb`, or `mlnx_qos` output in a capture).
    pub dcb: Attr<Dcb>,
    /// The module EEPROM (`ethtool -m`), decoded.
    pub module: Attr<Module>,
}

impl EthLink {
    /// A statistic by the driver's name.
    pub fn stat(&self, name: &str) -> Option<u64> {
        self.stats
            .get()?
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}

impl Ethernet {
    /// The link facts for a netdev name.
    pub fn link(&self, name: &str) -> Option<&EthLink> {
        self.links.iter().find(|l| l.name == name)
    }
}

/// Reads the Ethernet layer of every RoCE port of `devices`.
/// Module EEPROMs only when `optics` (the one slow read: see
/// [`crate::collect::CollectOptions::optics`]).
pub(crate) fn collect(cx: &Cx, devices: &[Device], netdevs: &[Netdev], optics: bool) -> Ethernet {
    let mut out = Ethernet {
        optics,
        ..Ethernet::default()
    };
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
                    out.links.push(link(cx, l, netdevs, optics));
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

fn link(cx: &Cx, name: &str, netdevs: &[Netdev], optics: bool) -> EthLink {
    let bdf = cx
        .link_basename(&format!("/sys/class/net/{name}/device"))
        .filter(|b| b.len() == 12 && b.as_bytes()[4] == b':');
    let probe = |q: EthQuery| Probe::Ethernet(q);
    let n = name.to_string();
    EthLink {
        stats: probe_attr(cx, &probe(EthQuery::Stats(n.clone())), |b| {
            super::parse::ethtool::stats(&String::from_utf8_lossy(b)).map_err(text_error)
        }),
        pause: probe_attr(cx, &probe(EthQuery::Pause(n.clone())), |b| {
            super::parse::ethtool::pause(&String::from_utf8_lossy(b)).map_err(text_error)
        }),
        fec: probe_attr(cx, &probe(EthQuery::Fec(n.clone())), |b| {
            super::parse::ethtool::fec(&String::from_utf8_lossy(b)).map_err(text_error)
        }),
        dcb: probe_attr(cx, &probe(EthQuery::Dcb(n.clone())), |b| {
            let t = String::from_utf8_lossy(b);
            if t.contains("DCBX mode:") || t.contains("Priority trust state") {
                super::parse::dcb::mlnx_qos(&t)
            } else {
                super::parse::dcb::dcb(&t)
            }
            .map_err(text_error)
        }),
        module: match optics {
            true => probe_attr(cx, &probe(EthQuery::Module(n)), |b| {
                super::optics::parse_module(b)
                    .map_err(|e| ParseError::new("module EEPROM", &e.to_string()))
            }),
            false => Attr::absent(&EthQuery::Module(n).command()),
        },
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

/// A probe's answer as an attribute: its path is the command it stands for
/// ("ethtool -S eth0"), its raw text the answer's first line and size (the
/// values are in the parsed value).
fn probe_attr<T>(
    cx: &Cx,
    probe: &Probe,
    parse: impl Fn(&[u8]) -> Result<T, ParseError>,
) -> Attr<T> {
    let Probe::Ethernet(q) = probe else {
        return Attr::absent("");
    };
    let path = q.command();
    match cx.src.probe(probe) {
        Ok(bytes) => {
            let value = match parse(&bytes) {
                Ok(v) => Some(v),
                Err(e) => {
                    cx.unrecognized.borrow_mut().push((path.clone(), e));
                    None
                }
            };
            let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
            Attr {
                raw: Raw::Text(format!(
                    "{} bytes, first line: {}",
                    bytes.len(),
                    crate::collect::strip_value(&first[..first.len().min(120)])
                )),
                path,
                value,
            }
        }
        Err(e) => Attr {
            path,
            raw: Raw::Err(e),
            value: None,
        },
    }
}

fn text_error(e: TextError) -> ParseError {
    ParseError::new(
        e.command,
        &format!("line {}: {}: {}", e.line, e.reason, e.text),
    )
}
