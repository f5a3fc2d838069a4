//! The device topology: PCIe root port → bridges → HCA → ports → netdevs, each
//! PCIe link with its speed and width against its capability, and what the
//! doctor concludes about the path and the ports.

use serde::Serialize;

use super::{findings_about, verdicts, CheckStatus};
use crate::finding::Finding;
use crate::report::Report;
use rdmakit_host::model::{Device, DeviceKind, HostFacts, PcieLink, Port};

/// The JSON schema of [`TopologyView`].
pub const SCHEMA: &str = "rdmakit.topology/v1";

const CHECKS: [&str; 4] = ["pcie.link", "port.state", "port.rate", "roce.mtu"];

/// Every RDMA device's place on the host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopologyView {
    pub schema: &'static str,
    pub source: String,
    /// The doctor's checks of links and ports.
    pub verdicts: Vec<CheckStatus>,
    pub devices: Vec<DeviceTopology>,
}

/// One device: its PCIe path, its ports and their netdevs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceTopology {
    pub device: String,
    pub kind: DeviceKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The PCI root complex (`pci0000:00`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_complex: Option<String>,
    /// The PCIe path from the root port down to the device itself (last).
    pub path: Vec<PcieNode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<i32>,
    pub ports: Vec<PortNode>,
    /// What the path cannot show (a software device bound to a netdev).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The doctor's findings about this device's links and ports.
    pub findings: Vec<Finding>,
}

/// One PCI function on the path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PcieNode {
    pub bdf: String,
    /// `root port`, `bridge` or `device`.
    pub role: &'static str,
    /// The sysfs directory.
    pub path: String,
    /// The function's own link status as read (current_link_* against max_link_*).
    pub status: LinkState,
    /// The link to the function above it on the path (none for the root port, which
    /// hangs off the root complex): trained speed and width as this function reads
    /// them, capability = the lesser of both ends' maxima.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uplink: Option<LinkState>,
}

/// A PCIe link: what it trained to and what it can do.
///
/// `max_*` is the link's capability: for [`PcieNode::status`] the function's own
/// maximum, for [`PcieNode::uplink`] the lesser of both ends' maxima.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkState {
    /// current_link_speed as read (`8.0 GT/s PCIe`).
    pub speed: String,
    pub width: String,
    pub max_speed: String,
    pub max_width: String,
    /// GT/s per lane and lanes, now and at most, when readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lanes: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_gts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_lanes: Option<u8>,
    /// Slower or narrower than it can be (`None` when unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub below_capability: Option<bool>,
}

/// A port of the device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortNode {
    pub num: u32,
    /// `4: ACTIVE`.
    pub state: String,
    /// `5: LinkUp`.
    pub phys_state: String,
    /// `100 Gb/sec (4X EDR)`.
    pub rate: String,
    pub link_layer: String,
    /// The port is ACTIVE with its physical link up.
    pub up: bool,
    pub netdevs: Vec<NetdevNode>,
}

/// A netdev behind a port.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetdevNode {
    pub name: String,
    pub operstate: String,
    pub mtu: String,
    /// Mb/s as the netdev reports it (`-1` unknown).
    pub speed: String,
}

impl TopologyView {
    /// The view of `facts`, with the conclusions of `report` (built from the same facts).
    pub fn build(facts: &HostFacts, report: &Report) -> TopologyView {
        TopologyView {
            schema: SCHEMA,
            source: report.source.clone(),
            verdicts: verdicts(report, &CHECKS),
            devices: facts
                .devices
                .iter()
                .map(|d| device(facts, report, d))
                .collect(),
        }
    }
}

fn link_state(l: &PcieLink) -> LinkState {
    let gts = l.current_speed.get().and_then(|s| s.gts);
    let lanes = l.current_width.get().copied().filter(|w| *w > 0);
    let max_gts = l.max_speed.get().and_then(|s| s.gts);
    let max_lanes = l.max_width.get().copied().filter(|w| *w > 0);
    let below = match (gts, lanes, max_gts, max_lanes) {
        (Some(g), Some(w), Some(mg), Some(mw)) => Some(g < mg - 0.01 || w < mw),
        _ => None,
    };
    LinkState {
        speed: l.current_speed.shown(),
        width: l.current_width.shown(),
        max_speed: l.max_speed.shown(),
        max_width: l.max_width.shown(),
        gts,
        lanes,
        max_gts,
        max_lanes,
        below_capability: below,
    }
}

/// The link between `parent` and `child` as `child` reads it, against the lesser of
/// both ends' maxima.
fn uplink(parent: &PcieLink, child: &PcieLink) -> LinkState {
    let mut l = link_state(child);
    let pg = parent.max_speed.get().and_then(|s| s.gts);
    let pw = parent.max_width.get().copied().filter(|w| *w > 0);
    if let (Some(a), Some(b)) = (pg, l.max_gts) {
        if a < b {
            l.max_gts = Some(a);
            l.max_speed = parent.max_speed.shown();
        }
    }
    if let (Some(a), Some(b)) = (pw, l.max_lanes) {
        if a < b {
            l.max_lanes = Some(a);
            l.max_width = parent.max_width.shown();
        }
    }
    l.below_capability = match (l.gts, l.lanes, l.max_gts, l.max_lanes) {
        (Some(g), Some(w), Some(mg), Some(mw)) => Some(g < mg - 0.01 || w < mw),
        _ => None,
    };
    l
}

fn device(facts: &HostFacts, report: &Report, d: &Device) -> DeviceTopology {
    let findings = findings_about(report, &CHECKS, &d.name);
    let mut path = Vec::new();
    let mut root_complex = None;
    let mut numa_node = None;
    let mut note = None;
    if let Some(p) = &d.pci {
        // Upstream is nearest first: the farthest bridge is the root port.
        let mut above: Option<&PcieLink> = None;
        let hops = p
            .upstream
            .iter()
            .rev()
            .map(|h| (h.bdf.as_str(), h.path.as_str(), &h.link))
            .chain(std::iter::once((p.bdf.as_str(), p.path.as_str(), &p.link)));
        let last = p.upstream.len();
        for (i, (bdf, dir, link)) in hops.enumerate() {
            path.push(PcieNode {
                bdf: bdf.to_string(),
                role: match i {
                    _ if i == last => "device",
                    0 => "root port",
                    _ => "bridge",
                },
                path: dir.to_string(),
                status: link_state(link),
                uplink: above.map(|a| uplink(a, link)),
            });
            above = Some(link);
        }
        root_complex = p
            .path
            .strip_prefix("/sys/devices/")
            .and_then(|r| r.split('/').next())
            .filter(|c| c.starts_with("pci"))
            .map(str::to_string);
        numa_node = p.numa_node.get().copied();
    } else {
        note = Some(match d.kind {
            DeviceKind::Software => match d.parent.text() {
                Some(parent) => format!("a software device on netdev {parent}: no PCIe path"),
                None => "a software device: no PCIe path".to_string(),
            },
            _ => "no PCI device link in the source".to_string(),
        });
    }
    let single_port = d.ports.len() == 1;
    let ports = d
        .ports
        .iter()
        .map(|port| port_node(facts, d, port, single_port))
        .collect();
    DeviceTopology {
        device: d.name.clone(),
        kind: d.kind,
        driver: d.driver.clone(),
        root_complex,
        path,
        numa_node,
        ports,
        note,
        findings,
    }
}

/// The netdevs of a port: the ones its GIDs are bound to; for a device with one
/// port and no GID netdev, the PCI function's netdevs or the software device's parent.
fn port_node(facts: &HostFacts, d: &Device, port: &Port, single_port: bool) -> PortNode {
    let mut names: Vec<String> = Vec::new();
    for g in &port.gids {
        if let Some(n) = g.ndev.text() {
            if !n.is_empty() && !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        }
    }
    if names.is_empty() && single_port {
        if let Some(p) = &d.pci {
            names.extend(p.netdevs.iter().cloned());
        } else if let Some(parent) = d.parent.text() {
            names.push(parent.to_string());
        }
    }
    let netdevs = names
        .into_iter()
        .map(|name| match facts.netdevs.iter().find(|n| n.name == name) {
            Some(n) => NetdevNode {
                name,
                operstate: n.operstate.shown(),
                mtu: n.mtu.shown(),
                speed: n.speed.shown(),
            },
            None => NetdevNode {
                name,
                operstate: "?".into(),
                mtu: "?".into(),
                speed: "?".into(),
            },
        })
        .collect();
    // As the doctor's port rule judges it (RDK-H002).
    let up = port.state.get().is_some_and(|s| s.is_active())
        && port
            .phys_state
            .get()
            .is_none_or(|ps| ps.is_link_up() || ps.name.eq_ignore_ascii_case("active"));
    PortNode {
        num: port.num,
        state: port.state.shown(),
        phys_state: port.phys_state.shown(),
        rate: port.rate.shown(),
        link_layer: port.link_layer.shown(),
        up,
        netdevs,
    }
}
