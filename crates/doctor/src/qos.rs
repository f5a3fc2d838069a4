//! The class-of-service chain of a RoCE port: which priority its traffic lands
//! on, and whether that priority is lossless (PFC) and congestion-controlled
//! (ECN), each step with the value that decided it and where it was read.
//!
//! ToS → DSCP (ToS >> 2) → trust → priority → PFC / ECN, as the kernel and
//! mlx5 do it (docs/roce-qos.md): rdma_cm gives a connection its default ToS
//! (configfs) unless the application sets one; mlx5 puts ToS >> 2 in the
//! packet's DSCP; with trust dscp the receiving port maps DSCP to a priority
//! through the DCB APP table (firmware's default: DSCP >> 3); with trust pcp
//! the priority is the VLAN tag's PCP (the VLAN egress map of the skb
//! priority rt_tos2priority gives), and 0 for untagged traffic.
//!
//! Pure: the rules in [`crate::rules::ethernet`] build the inputs from host
//! facts and judge the chain.

use std::collections::BTreeMap;

use serde::Serialize;

/// How a port classifies received traffic (the host crate's, read from DCB).
pub use rdmakit_host::ethernet::parse::dcb::Trust;

/// "pcp" or "dscp".
pub fn trust_name(t: Trust) -> &'static str {
    match t {
        Trust::Pcp => "pcp",
        Trust::Dscp => "dscp",
    }
}

/// One step's value and its evidence (the file or command it came from, and
/// what was there).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step<T> {
    pub value: T,
    pub source: String,
    pub shown: String,
}

impl<T> Step<T> {
    pub fn new(value: T, source: impl Into<String>, shown: impl Into<String>) -> Step<T> {
        Step {
            value,
            source: source.into(),
            shown: shown.into(),
        }
    }
}

/// What the chain is built from, for one port.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The ToS a connection gets when the application sets none.
    pub tos: Option<Step<u8>>,
    /// The trust mode, where something says it.
    pub trust: Option<Step<Trust>>,
    /// The APP table's DSCP → priority entries (a DSCP may have several).
    pub dscp_map: Vec<(u8, u8)>,
    /// Where the APP table was read.
    pub dscp_map_source: String,
    /// The VLAN netdev's egress map (skb priority → PCP), when the GIDs are on
    /// a VLAN; None for untagged traffic.
    pub vlan_egress: Option<Step<BTreeMap<u32, u8>>>,
    /// The PFC-enabled priorities (bit P = priority P), where readable.
    pub pfc: Option<Step<u8>>,
}

/// The chain, resolved as far as the inputs allow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chain {
    pub tos: Step<u8>,
    pub dscp: u8,
    pub trust: Option<Step<Trust>>,
    /// The priority the traffic lands on, and how it was derived.
    pub priority: Option<Step<u8>>,
    /// Whether that priority is PFC-enabled, with the enabled set.
    pub pfc: Option<Step<u8>>,
}

impl Chain {
    /// The PFC-enabled priorities, as "3" or "3,4" ("none" for none).
    pub fn pfc_list(&self) -> Option<String> {
        self.pfc.as_ref().map(|p| priorities(p.value))
    }

    /// Whether the traffic's priority is PFC-enabled (None: unknown).
    pub fn lossless(&self) -> Option<bool> {
        Some(self.pfc.as_ref()?.value & (1 << self.priority.as_ref()?.value) != 0)
    }

    /// "ToS 0 (DSCP 0) → trust dscp → priority 0": every step, for messages.
    pub fn describe(&self) -> String {
        let mut s = format!("ToS {} (DSCP {})", self.tos.value, self.dscp);
        if let Some(t) = &self.trust {
            s.push_str(&format!(" → trust {}", trust_name(t.value)));
        }
        if let Some(p) = &self.priority {
            s.push_str(&format!(" → priority {}", p.value));
        }
        s
    }
}

/// A bitmap of priorities as "3,4", or "none".
pub fn priorities(bits: u8) -> String {
    let v: Vec<String> = (0..8)
        .filter(|p| bits & (1 << p) != 0)
        .map(|p: u8| p.to_string())
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(",")
    }
}

/// The Linux skb priority of a ToS (`rt_tos2priority`: `ip_tos2prio[IPTOS_TOS(tos) >> 1]`,
/// include/net/route.h and net/ipv4/route.c).
pub fn rt_tos2priority(tos: u8) -> u32 {
    const IP_TOS2PRIO: [u32; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];
    IP_TOS2PRIO[usize::from((tos & 0x1e) >> 1)]
}

/// The priority DSCP `dscp` lands on with trust dscp: the APP table's entry
/// (the last one listed when several name it: the hardware holds one
/// priority per DSCP and mlx5 writes each entry as it is added), else
/// firmware's default DSCP >> 3.
pub fn dscp_priority(map: &[(u8, u8)], dscp: u8) -> (u8, bool) {
    match map
        .iter()
        .filter(|(d, _)| *d == dscp)
        .map(|(_, p)| *p)
        .next_back()
    {
        Some(p) => (p & 7, true),
        None => (dscp >> 3, false),
    }
}

/// Resolves the chain from `i`; None without a ToS.
pub fn resolve(i: &Inputs) -> Option<Chain> {
    let tos = i.tos.clone()?;
    let dscp = tos.value >> 2;
    let priority = i.trust.as_ref().map(|t| match t.value {
        Trust::Dscp => {
            let (p, mapped) = dscp_priority(&i.dscp_map, dscp);
            if mapped {
                Step::new(p, i.dscp_map_source.clone(), format!("DSCP {dscp} → {p}"))
            } else {
                Step::new(
                    p,
                    i.dscp_map_source.clone(),
                    format!("no entry for DSCP {dscp}: firmware default {dscp} >> 3 = {p}"),
                )
            }
        }
        Trust::Pcp => match &i.vlan_egress {
            Some(v) => {
                let skb = rt_tos2priority(tos.value);
                let pcp = v.value.get(&skb).copied().unwrap_or(0);
                Step::new(
                    pcp,
                    v.source.clone(),
                    format!("ToS {} → skb priority {skb} → egress PCP {pcp}", tos.value),
                )
            }
            None => Step::new(0, "untagged", "no VLAN tag: PCP 0".to_string()),
        },
    });
    Some(Chain {
        tos,
        dscp,
        trust: i.trust.clone(),
        priority,
        pfc: i.pfc.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(tos: u8, trust: Trust, pfc: u8) -> Inputs {
        Inputs {
            tos: Some(Step::new(tos, "configfs", tos.to_string())),
            trust: Some(Step::new(trust, "dcb", trust_name(trust))),
            dscp_map: (0..64).map(|d| (d, d >> 3)).collect(),
            dscp_map_source: "dcb app".into(),
            vlan_egress: None,
            pfc: Some(Step::new(pfc, "dcb pfc", priorities(pfc))),
        }
    }

    #[test]
    fn tos_106_lands_on_priority_3_with_trust_dscp() {
        let c = resolve(&inputs(106, Trust::Dscp, 0b1000)).unwrap();
        assert_eq!(c.dscp, 26);
        assert_eq!(c.priority.as_ref().unwrap().value, 3);
        assert_eq!(c.lossless(), Some(true));
        assert_eq!(c.describe(), "ToS 106 (DSCP 26) → trust dscp → priority 3");
    }

    #[test]
    fn default_tos_lands_on_priority_0() {
        let c = resolve(&inputs(0, Trust::Dscp, 0b1000)).unwrap();
        assert_eq!(c.pfc_list().as_deref(), Some("3"));
        assert_eq!(c.lossless(), Some(false));
        assert_eq!(c.priority.unwrap().value, 0);
    }

    #[test]
    fn trust_pcp_untagged_is_priority_0_and_a_vlan_map_decides_otherwise() {
        let mut i = inputs(106, Trust::Pcp, 0b1000);
        assert_eq!(resolve(&i).unwrap().priority.unwrap().value, 0);
        // ToS 106: IPTOS_TOS = 106 & 0x1e = 10, >> 1 = 5 → skb priority 2.
        assert_eq!(rt_tos2priority(106), 2);
        i.vlan_egress = Some(Step::new(BTreeMap::from([(2, 3)]), "/proc/net/vlan/x", ""));
        assert_eq!(resolve(&i).unwrap().priority.unwrap().value, 3);
    }

    #[test]
    fn an_unmapped_dscp_uses_the_firmware_default() {
        assert_eq!(dscp_priority(&[(24, 3)], 26), (3, false));
        assert_eq!(dscp_priority(&[(26, 5)], 26), (5, true));
        assert_eq!(dscp_priority(&[(26, 3), (26, 2)], 26), (2, true));
    }
}
