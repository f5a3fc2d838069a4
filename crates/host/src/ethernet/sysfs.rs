//! The Ethernet layer's facts that are files: ECN/DCQCN (MLNX_OFED's sysfs
//! tree and upstream mlx5's debugfs `cc_params/`), rdma_cm's default ToS in
//! configfs, MLNX_OFED's per-port `tc/N/traffic_class` and `qos/` files,
//! VLAN egress maps and the netdevs a bond or VLAN runs over.
//!
//! Reading never changes the host: configfs `rdma_cm/DEV` exists only after
//! someone creates it, and a missing one is "not configured", never created.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::collect::Cx;
use crate::model::Attr;
use crate::parse::ParseError;

/// Where a port's ECN / DCQCN settings live, as found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EcnLayout {
    /// MLNX_OFED/DOCA: `/sys/class/net/IF/ecn/{roce_np,roce_rp}/` with a
    /// per-priority `enable/P`; `params` when the attributes are under
    /// `params/` (as NVIDIA's documentation shows) rather than directly.
    OfedSysfs { params: bool },
    /// Upstream mlx5: debugfs `mlx5/BDF/cc_params/` (no per-priority enable:
    /// that is firmware's ROCE_CC_PRIO_MASK, read with mlxconfig).
    Debugfs { dir: String },
    /// Neither exists for this netdev (not mlx5, or debugfs not mounted).
    NotFound,
}

/// ECN / DCQCN as this host exposes it for one netdev.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ecn {
    pub layout: EcnLayout,
    /// Notification point (receiver: sends CNPs) enable, per priority.
    pub np_enable: BTreeMap<u8, Attr<bool>>,
    /// Reaction point (sender: slows on CNPs) enable, per priority.
    pub rp_enable: BTreeMap<u8, Attr<bool>>,
    /// NP parameters by their MLNX_OFED names (`cnp_dscp`, `cnp_802p_prio`,
    /// `min_time_between_cnps`); upstream's `np_cnp_dscp`, `np_cnp_prio`,
    /// `np_min_time_between_cnps` are stored under the same names.
    pub np: BTreeMap<String, Attr<u64>>,
    /// RP parameters by their MLNX_OFED names (`rpg_ai_rate`, `dce_tcp_g`, ...).
    pub rp: BTreeMap<String, Attr<u64>>,
}

/// NP parameters: (MLNX_OFED sysfs name, upstream debugfs name).
pub const NP_PARAMS: &[(&str, &str)] = &[
    ("cnp_dscp", "np_cnp_dscp"),
    ("cnp_802p_prio", "np_cnp_prio"),
    ("min_time_between_cnps", "np_min_time_between_cnps"),
];

/// RP parameters: (MLNX_OFED sysfs name, upstream debugfs name).
pub const RP_PARAMS: &[(&str, &str)] = &[
    ("clamp_tgt_rate", "rp_clamp_tgt_rate"),
    ("clamp_tgt_rate_after_time_inc", "rp_clamp_tgt_rate_ati"),
    ("rpg_time_reset", "rp_time_reset"),
    ("rpg_byte_reset", "rp_byte_reset"),
    ("rpg_threshold", "rp_threshold"),
    ("rpg_max_rate", "rp_max_rate"),
    ("rpg_ai_rate", "rp_ai_rate"),
    ("rpg_hai_rate", "rp_hai_rate"),
    ("rpg_gd", "rp_gd"),
    ("rpg_min_dec_fac", "rp_min_dec_fac"),
    ("rpg_min_rate", "rp_min_rate"),
    ("rate_to_set_on_first_cnp", "rp_rate_to_set_on_first_cnp"),
    ("dce_tcp_g", "rp_dce_tcp_g"),
    ("dce_tcp_rtt", "rp_dce_tcp_rtt"),
    (
        "rate_reduce_monitor_period",
        "rp_rate_reduce_monitor_period",
    ),
    ("initial_alpha_value", "rp_initial_alpha_value"),
];

impl Ecn {
    /// Whether ECN is enabled on priority `p` at the NP (`np`) or RP side:
    /// None when this host does not say (no per-priority enable exposed).
    pub fn enabled(&self, np: bool, p: u8) -> Option<&Attr<bool>> {
        let m = if np { &self.np_enable } else { &self.rp_enable };
        m.get(&p).filter(|a| a.get().is_some())
    }

    /// An NP parameter's value, by its MLNX_OFED name.
    pub fn np_param(&self, name: &str) -> Option<u64> {
        self.np.get(name).and_then(|a| a.get().copied())
    }
}

/// A VLAN netdev: its id, the netdev beneath and its egress map
/// (`/proc/net/vlan/IF`: skb priority → 802.1p PCP).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Vlan {
    pub name: String,
    pub config: Attr<VlanConfig>,
}

/// What `/proc/net/vlan/IF` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VlanConfig {
    pub vid: Option<u16>,
    pub device: Option<String>,
    /// skb priority → PCP ("EGRESS priority mappings: 0:3 3:3").
    pub egress: BTreeMap<u32, u8>,
}

/// Parses `/proc/net/vlan/IF`.
///
/// # Errors
/// Text with neither a `VID:` nor a `Device:` line.
pub fn vlan_config(s: &str) -> Result<VlanConfig, ParseError> {
    let mut c = VlanConfig {
        vid: None,
        device: None,
        egress: BTreeMap::new(),
    };
    for line in s.lines() {
        let l = line.trim();
        if let Some(i) = l.find("VID:") {
            c.vid = l[i + 4..]
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok());
        } else if let Some(d) = l.strip_prefix("Device:") {
            c.device = Some(d.trim().to_string()).filter(|d| !d.is_empty());
        } else if let Some(m) = l.strip_prefix("EGRESS priority mappings:") {
            for pair in m.split_whitespace() {
                if let Some((a, b)) = pair.split_once(':') {
                    if let (Ok(a), Ok(b)) = (a.parse(), b.parse::<u8>()) {
                        c.egress.insert(a, b & 7);
                    }
                }
            }
        }
    }
    if c.vid.is_none() && c.device.is_none() {
        return Err(ParseError::new("VLAN config", s));
    }
    Ok(c)
}

/// rdma_cm's default ToS for a port (configfs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DefaultTos {
    /// `/sys/kernel/config/rdma_cm/DEV/ports/N/default_roce_tos`.
    pub attr: Attr<u8>,
    /// Whether `/sys/kernel/config/rdma_cm` exists (configfs mounted and
    /// rdma_cm loaded): without it no ToS can have been set this way.
    pub configfs: bool,
}

/// The ToS rdma_cm gives this port's connections when the application sets
/// none: the configured value, else 0 (the kernel's default).
impl DefaultTos {
    pub fn value(&self) -> u8 {
        self.attr.get().copied().unwrap_or(0)
    }

    /// Whether someone configured it (the file exists and reads a number).
    pub fn configured(&self) -> bool {
        self.attr.get().is_some()
    }
}

/// Parses a ToS (0-255) as configfs prints it.
fn tos(s: &str) -> Result<u8, ParseError> {
    s.trim()
        .parse()
        .map_err(|_| ParseError::new("ToS (0-255)", s))
}

/// Parses MLNX_OFED's `tc/N/traffic_class`: a number, or text ending in one
/// ("Global tclass=106").
pub fn traffic_class(s: &str) -> Result<u8, ParseError> {
    let t = s.trim();
    let digits: String = t
        .rsplit(|c: char| !c.is_ascii_digit())
        .find(|w| !w.is_empty())
        .unwrap_or_default()
        .to_string();
    digits
        .parse()
        .map_err(|_| ParseError::new("traffic class (0-255)", s))
}

fn flag(s: &str) -> Result<bool, ParseError> {
    match s.trim() {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err(ParseError::new("ECN enable (0 or 1)", s)),
    }
}

fn number(s: &str) -> Result<u64, ParseError> {
    crate::parse::sysfs::u64_value(s)
}

/// ECN / DCQCN for netdev `ifname` (PCI function `bdf`, for debugfs).
pub(crate) fn ecn(cx: &Cx, ifname: &str, bdf: Option<&str>) -> Ecn {
    let base = format!("/sys/class/net/{ifname}/ecn");
    if cx.listed(&base) {
        let params = cx.listed(&format!("{base}/roce_np/params"));
        let dir = |side: &str| {
            if params {
                format!("{base}/{side}/params")
            } else {
                format!("{base}/{side}")
            }
        };
        let enable = |side: &str| {
            let there = cx.names(&format!("{base}/{side}/enable"));
            (0u8..8)
                .filter(|p| there.iter().any(|t| *t == p.to_string()))
                .map(|p| (p, cx.attr(&format!("{base}/{side}/enable/{p}"), flag)))
                .collect::<BTreeMap<_, _>>()
        };
        let params_of = |side: &str, names: &[(&str, &str)]| {
            let d = dir(side);
            let there = cx.names(&d);
            names
                .iter()
                .filter(|(n, _)| there.iter().any(|t| t == n))
                .map(|(n, _)| (n.to_string(), cx.attr(&format!("{d}/{n}"), number)))
                .collect()
        };
        return Ecn {
            layout: EcnLayout::OfedSysfs { params },
            np_enable: enable("roce_np"),
            rp_enable: enable("roce_rp"),
            np: params_of("roce_np", NP_PARAMS),
            rp: params_of("roce_rp", RP_PARAMS),
        };
    }
    if let Some(bdf) = bdf {
        let dir = format!("/sys/kernel/debug/mlx5/{bdf}/cc_params");
        if cx.listed(&dir) {
            let there = cx.names(&dir);
            let params_of = |names: &[(&str, &str)]| {
                names
                    .iter()
                    .filter(|(_, up)| there.iter().any(|t| t == up))
                    .map(|(n, up)| (n.to_string(), cx.attr(&format!("{dir}/{up}"), number)))
                    .collect()
            };
            return Ecn {
                np: params_of(NP_PARAMS),
                rp: params_of(RP_PARAMS),
                layout: EcnLayout::Debugfs { dir },
                np_enable: BTreeMap::new(),
                rp_enable: BTreeMap::new(),
            };
        }
    }
    Ecn {
        layout: EcnLayout::NotFound,
        np_enable: BTreeMap::new(),
        rp_enable: BTreeMap::new(),
        np: BTreeMap::new(),
        rp: BTreeMap::new(),
    }
}

/// rdma_cm's default ToS of `dev` port `port`, read only where it exists.
pub(crate) fn default_tos(cx: &Cx, dev: &str, port: u32) -> DefaultTos {
    let configfs = cx.listed("/sys/kernel/config/rdma_cm");
    let path = format!("/sys/kernel/config/rdma_cm/{dev}/ports/{port}/default_roce_tos");
    DefaultTos {
        attr: if configfs && cx.listed(&path) {
            cx.attr(&path, tos)
        } else {
            Attr::absent(&path)
        },
        configfs,
    }
}

/// MLNX_OFED's per-port traffic class (`/sys/class/infiniband/DEV/tc/N/traffic_class`).
pub(crate) fn port_traffic_class(cx: &Cx, dev: &str, port: u32) -> Attr<u8> {
    let path = format!("/sys/class/infiniband/{dev}/tc/{port}/traffic_class");
    if cx.listed(&path) {
        cx.attr(&path, traffic_class)
    } else {
        Attr::absent(&path)
    }
}

/// The netdevs `ifname` runs over, down to ones with no lower device: a VLAN's
/// real device, a bond's slaves (`lower_*` links, else `bonding/slaves`).
/// Itself when it has none. At most 16, 4 levels deep.
pub(crate) fn lower_netdevs(cx: &Cx, ifname: &str) -> Vec<String> {
    fn walk(cx: &Cx, name: &str, depth: usize, out: &mut Vec<String>) {
        if out.len() >= 16 {
            return;
        }
        let p = format!("/sys/class/net/{name}");
        let mut lower: Vec<String> = cx
            .names(&p)
            .into_iter()
            .filter_map(|n| n.strip_prefix("lower_").map(str::to_string))
            .filter(|n| super::valid_ifname(n))
            .collect();
        if lower.is_empty() && cx.names(&p).iter().any(|n| n == "bonding") {
            if let Ok(b) = cx.src.read(&format!("{p}/bonding/slaves")) {
                lower = String::from_utf8_lossy(&b)
                    .split_whitespace()
                    .filter(|n| super::valid_ifname(n))
                    .map(str::to_string)
                    .collect();
            }
        }
        if lower.is_empty() || depth >= 4 {
            if !out.iter().any(|o| o == name) {
                out.push(name.to_string());
            }
            return;
        }
        for l in lower {
            walk(cx, &l, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    walk(cx, ifname, 0, &mut out);
    out
}

/// The VLAN facts of `ifname`, when it is a VLAN (`/proc/net/vlan/IF` exists).
pub(crate) fn vlan(cx: &Cx, ifname: &str) -> Option<Vlan> {
    let path = format!("/proc/net/vlan/{ifname}");
    cx.listed(&path).then(|| Vlan {
        name: ifname.to_string(),
        config: cx.attr(&path, vlan_config),
    })
}

/// MLNX_OFED's older `qos/` files: trust ("pcp"/"dscp") and the DSCP →
/// priority map, where the driver has them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OfedQos {
    pub trust: Attr<String>,
}

pub(crate) fn ofed_qos(cx: &Cx, ifname: &str) -> OfedQos {
    let path = format!("/sys/class/net/{ifname}/qos/trust");
    OfedQos {
        trust: if cx.listed(&path) {
            cx.string(&path)
        } else {
            Attr::absent(&path)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_config_reads_the_egress_map() {
        let s = "eth0.100  VID: 100\t REORDER_HDR: 1  dev->priv_flags: 1021\n\
                 \t total frames received            0\n\
                 Device: eth0\n\
                 INGRESS priority mappings: 0:0  1:0  2:0  3:0  4:0  5:0  6:0 7:0\n\
                 \x20EGRESS priority mappings: 0:3 3:3 \n";
        let c = vlan_config(s).unwrap();
        assert_eq!(c.vid, Some(100));
        assert_eq!(c.device.as_deref(), Some("eth0"));
        assert_eq!(c.egress, BTreeMap::from([(0, 3), (3, 3)]));
        assert!(vlan_config("garbage").is_err());
    }

    #[test]
    fn traffic_class_takes_the_number_at_the_end() {
        assert_eq!(traffic_class("106\n").unwrap(), 106);
        assert_eq!(traffic_class("Global tclass=106").unwrap(), 106);
        assert!(traffic_class("none").is_err());
        assert!(traffic_class("300").is_err());
    }
}
