//! Host identity and inventory: the facts a fleet compares across nodes.
//!
//! [`Inventory::build`] is a pure function of [`HostFacts`]: the host name, kernel,
//! rdma-core version, memlock limit, and per device its driver, firmware, board,
//! GUID, PCIe link and ports (state, rate, width, link layer, MTU, netdev, and the
//! raw error counters). It is part of the doctor's JSON (`inventory`, schema
//! `rdmakit.doctor/v1`, docs/json-schema.md) and reads back with serde, so
//! `rdmakit fleet` consumes the same data whether it ran the doctor itself or read
//! a node's `rdmakit doctor --json`.
//!
//! Every field a source may lack is an `Option`; what the inventory cannot know and
//! why is said in `notes` (e.g. the active MTU of an InfiniBand port, which neither
//! sysfs nor RDMA netlink expose).

use std::collections::BTreeMap;

use rdmakit_host::model::{DeviceKind, HostFacts, Port};
use rdmakit_host::parse::proc::Limit;
use rdmakit_host::parse::sysfs::{Counter, PcieSpeed};
use serde::{Deserialize, Serialize};

use crate::rules::hardware::roce_active_mtu;
use crate::rules::{netdev, port_netdev};

/// `hostname_source` when the name came from the input's file or directory name.
pub const INPUT_NAME: &str = "input name";

/// One host's identity and RDMA inventory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Inventory {
    /// The host's name; `null` when the source holds none (a capture of /sys alone).
    pub hostname: Option<String>,
    /// Where `hostname` was read: `/proc/sys/kernel/hostname`, `/etc/hostname`, or
    /// `input name` (the bundle's or capture directory's name, see
    /// [`Inventory::name_from_input`]).
    pub hostname_source: Option<String>,
    /// Kernel release (/proc/sys/kernel/osrelease).
    pub kernel: Option<String>,
    /// rdma-core's version: the package version (`44.0-2`) when a package database
    /// names it, else the release in libibverbs' file name (`44`).
    pub rdma_core: Option<String>,
    /// Where `rdma_core` was read.
    pub rdma_core_source: Option<String>,
    /// RLIMIT_MEMLOCK soft limit that applies (bytes, or `unlimited`).
    pub memlock: Option<String>,
    pub devices: Vec<InventoryDevice>,
    /// The Ethernet links beneath RoCE ports: their module and settings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<InventoryLink>,
    /// What the inventory could not tell, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One RDMA device.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InventoryDevice {
    /// `mlx5_0`.
    pub name: String,
    /// `pci`, `software` or `unknown`.
    pub kind: String,
    /// The kernel driver (`mlx5_core`, `rdma_rxe`).
    pub driver: Option<String>,
    pub fw_ver: Option<String>,
    pub board_id: Option<String>,
    pub hca_type: Option<String>,
    /// `0a7f:bc12:45ef:d23b`, as sysfs prints it.
    pub node_guid: Option<String>,
    /// The PCIe link of the device's PCI function (`null` for software devices).
    pub pcie: Option<InventoryPcie>,
    pub ports: Vec<InventoryPort>,
    /// Device-level hw_counters (raw values).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub hw_counters: BTreeMap<String, u64>,
}

/// A PCIe link, current and maximum.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InventoryPcie {
    /// `0000:3b:00.0`.
    pub bdf: String,
    /// As sysfs prints it: `16.0 GT/s PCIe`.
    pub current_speed: Option<String>,
    /// GT/s per lane.
    pub current_gts: Option<f64>,
    pub current_width: Option<u8>,
    pub max_speed: Option<String>,
    pub max_gts: Option<f64>,
    pub max_width: Option<u8>,
}

/// One port.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InventoryPort {
    pub num: u32,
    /// `ACTIVE`, `DOWN`, `INIT`, ...
    pub state: Option<String>,
    /// `LinkUp`, `Disabled`, `Polling`, ...
    pub phys_state: Option<String>,
    /// As sysfs prints it: `100 Gb/sec (4X EDR)`.
    pub rate: Option<String>,
    pub rate_gbps: Option<f64>,
    /// `4X`.
    pub width: Option<String>,
    /// `InfiniBand` or `Ethernet`.
    pub link_layer: Option<String>,
    /// An InfiniBand port's GUID (GID 0's interface id), `0a7f:bc12:45ef:d23c`
    /// as sysfs prints GUIDs: what names the port in the fabric
    /// (`rdmakit fabric discover`). None on RoCE and where GID 0 was not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_guid: Option<String>,
    /// Active MTU in bytes (RoCE: derived from the netdev's MTU as the kernel does).
    pub active_mtu: Option<u32>,
    /// Maximum MTU in bytes; only `ibv_query_port` reports it.
    pub max_mtu: Option<u32>,
    /// Where `active_mtu` / `max_mtu` came from, or why they are unknown.
    pub mtu_source: Option<String>,
    /// The netdev the port runs over (RoCE) or its IPoIB interface.
    pub netdev: Option<String>,
    pub netdev_mtu: Option<u32>,
    /// ports/N/counters (and counters_ext): raw values, data counters in 4-byte words.
    pub counters: BTreeMap<String, u64>,
    /// ports/N/hw_counters: raw values.
    pub hw_counters: BTreeMap<String, u64>,
    /// Counter files without a number (`counters/port_rcv_data: N/A (no PMA)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub counters_unavailable: Vec<String>,
    /// The class of service of a RoCE port's traffic (docs/roce-qos.md), where
    /// its DCB facts were read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<InventoryQos>,
}

/// A RoCE port's class of service: the ToS a connection gets when the
/// application sets none, the trust mode, the priority it lands on, the
/// PFC-enabled priorities and ECN on that priority.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InventoryQos {
    /// The physical netdev these were read on.
    pub link: String,
    pub tos: u8,
    /// `dscp` or `pcp`.
    pub trust: String,
    pub priority: Option<u8>,
    /// `3`, `3,4`, `none`.
    pub pfc: Option<String>,
    /// `on`/`off` at the notification point, where sysfs has a per-priority switch.
    pub ecn_np: Option<String>,
    /// The same at the reaction point.
    pub ecn_rp: Option<String>,
}

/// A physical netdev beneath a RoCE port.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InventoryLink {
    pub name: String,
    pub driver: Option<String>,
    /// The plug-in module: vendor and part number.
    pub module_vendor: Option<String>,
    pub module_part: Option<String>,
    /// Active FEC encoding(s), as ethtool prints them.
    pub fec: Option<String>,
    /// Global pause: `rx on, tx off`.
    pub global_pause: Option<String>,
    /// The `ethtool -S` counters that mean trouble (pause time, discards,
    /// buffer drops, CRC and FEC errors), raw values, the driver's names.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, u64>,
}

/// Whether an `ethtool -S` counter is one the inventory keeps: pause time and
/// storms, discards, drops, buffer exhaustion, CRC, symbol and FEC errors.
pub fn is_link_trouble_counter(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "pause_duration",
        "pause_storm",
        "discard",
        "drop",
        "out_of_buffer",
        "crc",
        "symbol_err",
        "uncorrectable",
        "link_down",
    ]
    .iter()
    .any(|w| n.contains(w))
}

impl InventoryPort {
    /// The port is ACTIVE (or ACTIVE_DEFER).
    pub fn is_active(&self) -> bool {
        matches!(self.state.as_deref(), Some("ACTIVE" | "ACTIVE_DEFER"))
    }
}

impl Inventory {
    /// The inventory of the host the facts describe.
    pub fn build(facts: &HostFacts) -> Inventory {
        let mut notes = Vec::new();
        let (hostname, hostname_source) = match facts.node.hostname.best() {
            Some((n, p)) => (Some(n.to_string()), Some(p.to_string())),
            None => (None, None),
        };
        let (rdma_core, rdma_core_source) = rdma_core(facts);
        let memlock = facts.memlock.effective().map(|(l, _)| match l {
            Limit::Unlimited => "unlimited".to_string(),
            Limit::Bytes(b) => b.to_string(),
        });
        let mut mtu_unknown = 0usize;
        let mut any_port = false;
        let devices = facts
            .devices
            .iter()
            .map(|d| InventoryDevice {
                name: d.name.clone(),
                kind: match d.kind {
                    DeviceKind::Pci => "pci",
                    DeviceKind::Software => "software",
                    DeviceKind::Unknown => "unknown",
                }
                .to_string(),
                driver: d.driver.clone(),
                fw_ver: d.fw_ver.text().map(str::to_string),
                board_id: d.board_id.text().map(str::to_string),
                hca_type: d.hca_type.text().map(str::to_string),
                node_guid: d.node_guid.text().map(str::to_string),
                pcie: d.pci.as_ref().map(|p| InventoryPcie {
                    bdf: p.bdf.clone(),
                    current_speed: p.link.current_speed.text().map(str::to_string),
                    current_gts: p.link.current_speed.get().and_then(gts),
                    current_width: p.link.current_width.get().copied(),
                    max_speed: p.link.max_speed.text().map(str::to_string),
                    max_gts: p.link.max_speed.get().and_then(gts),
                    max_width: p.link.max_width.get().copied(),
                }),
                ports: d
                    .ports
                    .iter()
                    .map(|p| {
                        let port = port(facts, d, p);
                        any_port = true;
                        mtu_unknown += usize::from(port.active_mtu.is_none());
                        port
                    })
                    .collect(),
                hw_counters: values(&d.hw_counters).0,
            })
            .collect();
        if any_port {
            notes.push(MAX_MTU_UNKNOWN.to_string());
        }
        if mtu_unknown > 0 {
            notes.push(format!(
                "active_mtu: unknown on {mtu_unknown} port(s): InfiniBand ports' MTU is not in \
                 sysfs or RDMA netlink (ibv_query_port has it); a RoCE port's is derived from \
                 its netdev MTU when that is readable"
            ));
        }
        if hostname.is_none() {
            notes.push(
                "hostname: neither /proc/sys/kernel/hostname nor /etc/hostname was in the source"
                    .to_string(),
            );
        }
        let mut devices: Vec<InventoryDevice> = devices;
        for q in crate::rules::ethernet::port_qos(facts) {
            let port = devices
                .iter_mut()
                .filter(|d| d.name == q.device)
                .flat_map(|d| d.ports.iter_mut())
                .find(|p| p.num == q.port);
            if let Some(p) = port {
                if p.qos.is_none() {
                    p.qos = Some(InventoryQos {
                        link: q.link,
                        tos: q.tos,
                        trust: q.trust.to_string(),
                        priority: q.priority,
                        pfc: q.pfc,
                        ecn_np: q.ecn_np.map(str::to_string),
                        ecn_rp: q.ecn_rp.map(str::to_string),
                    });
                }
            }
        }
        let on_off = |b: Option<bool>| match b {
            Some(true) => "on",
            Some(false) => "off",
            None => "n/a",
        };
        let links = facts
            .ethernet
            .links
            .iter()
            .map(|l| InventoryLink {
                name: l.name.clone(),
                driver: l.driver.clone(),
                module_vendor: l.module.get().map(|m| m.vendor.clone()),
                module_part: l.module.get().map(|m| m.part_number.clone()),
                fec: l
                    .fec
                    .get()
                    .map(|f| f.active.join(" "))
                    .filter(|s| !s.is_empty()),
                global_pause: l
                    .pause
                    .get()
                    .map(|p| format!("rx {}, tx {}", on_off(p.rx), on_off(p.tx))),
                counters: l
                    .stats
                    .get()
                    .map(|v| {
                        v.iter()
                            .filter(|(n, _)| is_link_trouble_counter(n))
                            .take(256)
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect();
        Inventory {
            hostname,
            hostname_source,
            kernel: facts.kernel.release.text().map(str::to_string),
            rdma_core,
            rdma_core_source,
            memlock,
            devices,
            links,
            notes,
        }
    }

    /// Names a host that had no name of its own after its input: the file or
    /// directory name without `.json`, `.json.gz`, `.jsonl` (`node17.json.gz` →
    /// `node17`; a capture tree `node17/root` → `node17`); `hostname_source` becomes
    /// `input name`. A name already read from the host is kept.
    pub fn name_from_input(&mut self, input: &str) {
        if self.hostname.is_some() {
            return;
        }
        // A capture's tree is DIR/root: the capture is named DIR.
        let trimmed = input.trim_end_matches('/');
        let trimmed = match trimmed.strip_suffix("/root") {
            Some(dir) if !dir.is_empty() => dir,
            _ => trimmed,
        };
        let base = trimmed.rsplit('/').next().unwrap_or(trimmed);
        let mut name = base;
        for ext in [".gz", ".json", ".jsonl", ".ndjson"] {
            name = name.strip_suffix(ext).unwrap_or(name);
        }
        if name.is_empty() {
            return;
        }
        self.hostname = Some(name.to_string());
        self.hostname_source = Some(INPUT_NAME.to_string());
        self.notes.retain(|n| !n.starts_with("hostname:"));
    }

    /// Every port of every device, with its device.
    pub fn ports(&self) -> impl Iterator<Item = (&InventoryDevice, &InventoryPort)> {
        self.devices
            .iter()
            .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
    }
}

const MAX_MTU_UNKNOWN: &str =
    "max_mtu: not in sysfs or RDMA netlink (ibv_query_port reports it); left null";

fn gts(s: &PcieSpeed) -> Option<f64> {
    s.gts
}

/// Raw counter values, and the files that had none.
fn values(
    map: &BTreeMap<String, rdmakit_host::model::Attr<Counter>>,
) -> (BTreeMap<String, u64>, Vec<String>) {
    let mut ok = BTreeMap::new();
    let mut missing = Vec::new();
    for (name, a) in map {
        match a.get() {
            Some(Counter::Value(v)) => {
                ok.insert(name.clone(), *v);
            }
            _ => {
                let dir = a.path.rsplit('/').nth(1).unwrap_or("counters").to_string();
                missing.push(format!("{dir}/{name}: {}", a.shown()));
            }
        }
    }
    (ok, missing)
}

fn port(facts: &HostFacts, d: &rdmakit_host::model::Device, p: &Port) -> InventoryPort {
    let nd_name = port_netdev(d, p);
    let nd = nd_name.as_deref().and_then(|n| netdev(facts, n));
    let netdev_mtu = nd.and_then(|n| n.mtu.get().copied());
    let roce = p.is_roce();
    let (active_mtu, mtu_source) = match (roce, nd, netdev_mtu) {
        (true, Some(n), Some(m)) if roce_active_mtu(m) > 0 => (
            Some(roce_active_mtu(m)),
            format!(
                "active_mtu derived from {} = {m} (largest IB MTU <= netdev MTU - 96 bytes of \
                 RoCE headers); max_mtu needs ibv_query_port",
                n.mtu.path
            ),
        ),
        (true, _, _) => (
            None,
            "unknown: the RoCE port's netdev MTU was not readable; ibv_query_port reports it"
                .to_string(),
        ),
        (false, _, _) => (
            None,
            "unknown: not in sysfs or RDMA netlink for InfiniBand ports; ibv_query_port \
             reports it"
                .to_string(),
        ),
    };
    // Data counters are kept as read (4-byte words); nothing is scaled here.
    let (counters_map, mut unavailable) = values(&p.counters);
    let (hw, hw_missing) = values(&p.hw_counters);
    unavailable.extend(hw_missing);
    InventoryPort {
        num: p.num,
        state: p.state.get().map(|s| s.name.clone()),
        phys_state: p.phys_state.get().map(|s| s.name.clone()),
        rate: p.rate.text().map(str::to_string),
        rate_gbps: p.rate.get().map(|r| r.gbps),
        width: p.rate.get().and_then(|r| r.width).map(|w| format!("{w}X")),
        link_layer: p.link_layer_name(),
        port_guid: port_guid(p),
        active_mtu,
        max_mtu: None,
        mtu_source: Some(mtu_source),
        netdev: nd_name,
        netdev_mtu,
        counters: counters_map,
        hw_counters: hw,
        counters_unavailable: unavailable,
        qos: None,
    }
}

/// An InfiniBand port's GUID: the interface id (low 8 bytes) of GID 0, as
/// sysfs prints GUIDs. None unless the link layer is InfiniBand (RoCE's GID 0
/// comes from the MAC) and when
/// GID 0 was not read or is all zero.
fn port_guid(p: &Port) -> Option<String> {
    if p.link_layer_name().as_deref() != Some("InfiniBand") {
        return None;
    }
    let g = p.gids.iter().find(|g| g.index == 0)?.gid.octets();
    let id = &g[8..];
    if id.iter().all(|&b| b == 0) {
        return None;
    }
    Some(
        id.chunks(2)
            .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
            .collect::<Vec<_>>()
            .join(":"),
    )
}

/// rdma-core's version and where it was read.
fn rdma_core(facts: &HostFacts) -> (Option<String>, Option<String>) {
    let rc = &facts.rdma_core;
    if let Some(pkgs) = rc.packages.get() {
        for name in ["rdma-core", "libibverbs1", "libibverbs"] {
            if let Some(p) = pkgs
                .iter()
                .find(|p| p.name == name && p.installed() && !p.version.is_empty())
            {
                return (
                    Some(p.version.clone()),
                    Some(format!("{} (package {})", rc.packages.path, p.name)),
                );
            }
        }
    }
    match &rc.libibverbs {
        Some(lib) => match lib.rdma_core {
            Some(v) => (
                Some(v.to_string()),
                Some(format!("{} -> {}", lib.path, lib.real_name)),
            ),
            None => (None, None),
        },
        None => (None, None),
    }
}
