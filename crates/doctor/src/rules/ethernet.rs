//! Hardware layer, the Ethernet beneath RoCE: the class-of-service chain
//! (RDK-N001, RDK-N006), ECN on the chain's priority (RDK-N002, RDK-N003), the
//! CNPs' own priority (RDK-N004) and global pause beside PFC (RDK-N005).
//!
//! Counters and optics are [`super::ethernet_counters`].

use rdmakit_host::ethernet::parse::dcb::{Dcb, Selector, Trust, Tsa};
use rdmakit_host::ethernet::{EthLink, RocePort};
use rdmakit_host::model::{Attr, HostFacts};

use super::hardware::no_devices;
use crate::checks::{Ctx, Outcome};
use crate::codes::Code;
use crate::finding::{Evidence, Finding};
use crate::qos::{self, priorities, trust_name, Chain, Inputs, Step};

/// Why no RoCE port could be judged, or None when some can.
pub(crate) fn no_roce(cx: &Ctx) -> Option<Outcome> {
    if let Some(o) = no_devices(cx) {
        return Some(o);
    }
    let e = &cx.facts.ethernet;
    if e.ports.is_empty() {
        return Some(Outcome::NotApplicable("no RoCE port".into()));
    }
    None
}

/// Whether a probe's errno means the driver has no such operation (EOPNOTSUPP,
/// EINVAL) or the netdev is gone (ENODEV): "not applicable".
pub(crate) fn unsupported<T>(a: &Attr<T>) -> bool {
    matches!(a.errno(), Some(e) if e.0 == 95 || e.0 == 22 || e.0 == 19)
}

/// How a probe's answer stands, for a check's reason: "not collected"
/// (a source without it), "not supported by the driver (EOPNOTSUPP)",
/// "failed (EIO)", or "not understood".
pub(crate) fn answer_state<T>(a: &Attr<T>) -> String {
    match a.errno() {
        Some(e) if e.0 == 2 => "not collected".into(),
        Some(e) if unsupported(a) => format!("not supported by the driver ({e})"),
        Some(e) => format!("failed ({e})"),
        None if a.get().is_none() => "not understood".into(),
        None => "read".into(),
    }
}

/// The DCB facts of a link when the driver answered them; the reason otherwise.
fn dcb_of(l: &EthLink) -> Result<&Dcb, String> {
    match (l.dcb.get(), l.dcb.errno()) {
        (Some(d), _) => Ok(d),
        (None, Some(e)) if e.0 == 95 || e.0 == 22 || e.0 == 19 => {
            Err(format!("{}: no DCB support ({e}): not applicable", l.name))
        }
        (None, Some(e)) if e.0 == 2 => Err(format!("{}: DCB not collected", l.name)),
        (None, Some(e)) => Err(format!("{}: DCB could not be read ({e})", l.name)),
        (None, None) => Err(format!("{}: DCB output not understood", l.name)),
    }
}

/// The trust mode, and where it was read: MLNX_OFED's `qos/trust`, the
/// `mlnx_qos` output, else the APP table (DSCP iff it has a DSCP entry).
fn trust_of(l: &EthLink, dcb: &Dcb) -> Step<Trust> {
    match l.ofed_qos.trust.text().map(str::trim) {
        Some("dscp") => return Step::new(Trust::Dscp, l.ofed_qos.trust.path.clone(), "dscp"),
        Some("pcp") => return Step::new(Trust::Pcp, l.ofed_qos.trust.path.clone(), "pcp"),
        _ => {}
    }
    if let Some(t) = dcb.trust {
        return Step::new(t, l.dcb.path.clone(), trust_name(t));
    }
    let dscp = dcb.app.iter().any(|a| a.selector == Selector::Dscp);
    if dscp {
        Step::new(
            Trust::Dscp,
            l.dcb.path.clone(),
            "the APP table has DSCP entries: trust dscp",
        )
    } else {
        Step::new(
            Trust::Pcp,
            l.dcb.path.clone(),
            "the APP table has no DSCP entry: trust pcp",
        )
    }
}

/// The PFC-enabled priorities as a bitmap, when the DCB facts say.
fn pfc_bits(dcb: &Dcb) -> Option<u8> {
    let pfc = dcb.pfc.as_ref()?;
    Some(
        pfc.enabled
            .iter()
            .enumerate()
            .filter(|(_, e)| **e == Some(true))
            .fold(0u8, |b, (p, _)| b | (1 << p)),
    )
}

/// The ToS a connection on `p` gets when its application sets none.
fn tos_of(p: &RocePort) -> Step<u8> {
    if let Some(tc) = p.traffic_class.get() {
        return Step::new(*tc, p.traffic_class.path.clone(), tc.to_string());
    }
    let t = &p.default_tos;
    if t.configured() {
        return Step::new(t.value(), t.attr.path.clone(), t.value().to_string());
    }
    let why = if t.configfs {
        "<absent>: not configured, rdma_cm's default 0"
    } else {
        "<absent>: configfs rdma_cm not present, rdma_cm's default 0"
    };
    Step::new(0, t.attr.path.clone(), why)
}

/// The chain of port `p` through link `l`.
fn chain(p: &RocePort, l: &EthLink, dcb: &Dcb) -> Option<Chain> {
    let vlan_egress = p.vlan.as_ref().map(|v| {
        let map = v.config.get().map(|c| c.egress.clone()).unwrap_or_default();
        Step::new(map, v.config.path.clone(), v.config.shown())
    });
    let bits = pfc_bits(dcb);
    qos::resolve(&Inputs {
        tos: Some(tos_of(p)),
        trust: Some(trust_of(l, dcb)),
        dscp_map: dcb
            .app
            .iter()
            .filter(|a| a.selector == Selector::Dscp && a.protocol < 64)
            .map(|a| (a.protocol as u8, a.priority))
            .collect(),
        dscp_map_source: l.dcb.path.clone(),
        vlan_egress,
        pfc: bits.map(|b| Step::new(b, l.dcb.path.clone(), format!("PFC on {}", priorities(b)))),
    })
}

fn chain_evidence(c: &Chain) -> Vec<Evidence> {
    let mut v = vec![Evidence::new(c.tos.source.clone(), c.tos.shown.clone())];
    if let Some(t) = &c.trust {
        v.push(Evidence::new(t.source.clone(), t.shown.clone()));
    }
    if let Some(p) = &c.priority {
        v.push(Evidence::new(p.source.clone(), p.shown.clone()));
    }
    if let Some(p) = &c.pfc {
        v.push(Evidence::new(p.source.clone(), p.shown.clone()));
    }
    v
}

/// Every (port, link, DCB) the chain can be judged on, and why others cannot.
fn judged<'a>(cx: &Ctx<'a>) -> (Vec<(&'a RocePort, &'a EthLink, &'a Dcb)>, Vec<String>) {
    judged_in(cx.facts)
}

fn judged_in(f: &HostFacts) -> (Vec<(&RocePort, &EthLink, &Dcb)>, Vec<String>) {
    let e = &f.ethernet;
    let mut ok = Vec::new();
    let mut why = Vec::new();
    for p in &e.ports {
        if p.links.is_empty() {
            why.push(format!("{} port {}: no netdev", p.device, p.port));
        }
        for name in &p.links {
            let Some(l) = e.link(name) else { continue };
            match dcb_of(l) {
                Ok(d) => ok.push((p, l, d)),
                Err(w) => why.push(w),
            }
        }
    }
    (ok, why)
}

/// One RoCE port's class of service through one link, as the fleet compares
/// it across nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortQos {
    pub device: String,
    pub port: u32,
    pub link: String,
    pub tos: u8,
    pub trust: &'static str,
    pub priority: Option<u8>,
    /// PFC-enabled priorities ("3", "3,4", "none").
    pub pfc: Option<String>,
    /// ECN at the notification and reaction points on `priority` ("on"/"off"),
    /// where the host has a per-priority switch.
    pub ecn_np: Option<&'static str>,
    pub ecn_rp: Option<&'static str>,
}

/// The class of service of every RoCE port whose DCB facts were read.
pub fn port_qos(f: &HostFacts) -> Vec<PortQos> {
    let (ok, _) = judged_in(f);
    ok.into_iter()
        .filter_map(|(p, l, dcb)| {
            let c = chain(p, l, dcb)?;
            let priority = c.priority.as_ref().map(|s| s.value);
            let ecn = |np: bool| {
                let prio = priority?;
                let a = l.ecn.enabled(np, prio)?;
                Some(if a.get() == Some(&true) { "on" } else { "off" })
            };
            Some(PortQos {
                device: p.device.clone(),
                port: p.port,
                link: l.name.clone(),
                tos: c.tos.value,
                trust: trust_name(c.trust.as_ref()?.value),
                priority,
                pfc: c.pfc_list(),
                ecn_np: ecn(true),
                ecn_rp: ecn(false),
            })
        })
        .collect()
}

fn unjudged(why: Vec<String>) -> Outcome {
    if why.is_empty() {
        return Outcome::NotApplicable("no RoCE link with DCB facts".into());
    }
    let all_na = why.iter().all(|w| w.ends_with("not applicable"));
    let text = why.join("; ");
    if all_na {
        Outcome::NotApplicable(text)
    } else {
        Outcome::NotChecked(text)
    }
}

/// RDK-N001 and RDK-N006: the traffic's priority is PFC-enabled wherever
/// PFC is in use.
pub fn lossless_chain(cx: &Ctx) -> Outcome {
    if let Some(o) = no_roce(cx) {
        return o;
    }
    let (ok, why) = judged(cx);
    if ok.is_empty() {
        return unjudged(why);
    }
    let mut out = Vec::new();
    for (p, l, dcb) in ok {
        let Some(c) = chain(p, l, dcb) else { continue };
        let (Some(bits), Some(prio)) = (c.pfc.as_ref().map(|s| s.value), &c.priority) else {
            continue;
        };
        if bits == 0 || c.lossless() != Some(false) {
            continue;
        }
        let subject = format!("{} port {}", p.device, p.port);
        let untagged_pcp =
            c.trust.as_ref().map(|t| t.value) == Some(Trust::Pcp) && p.vlan.is_none();
        let vlan_dscp = c.trust.as_ref().map(|t| t.value) == Some(Trust::Dscp)
            && p.vlan.as_ref().is_some_and(|v| {
                v.config.get().is_some_and(|cfg| {
                    let pcp = cfg
                        .egress
                        .get(&qos::rt_tos2priority(c.tos.value))
                        .copied()
                        .unwrap_or(0);
                    bits & (1 << pcp) != 0
                })
            });
        let mut f = if untagged_pcp || vlan_dscp {
            let how = if untagged_pcp {
                format!(
                    "trust is pcp but RoCE traffic on {} is untagged: it lands on priority {}, \
                     and PFC is enabled on priority {}",
                    p.netdev.as_deref().unwrap_or(&l.name),
                    prio.value,
                    priorities(bits)
                )
            } else {
                format!(
                    "trust is dscp but the class is set only in the VLAN tag: {} lands on \
                     priority {}, and PFC is enabled on priority {}",
                    c.describe(),
                    prio.value,
                    priorities(bits)
                )
            };
            Finding::new(Code::N006, subject.clone(), format!("{subject}: {how}")).remedy(format!(
                "Classify by the marking the traffic carries. Untagged (layer-3) RoCE: \
                     trust DSCP on hosts and switches (mlnx_qos -i {0} --trust dscp, or \
                     dcb app add dev {0} dscp-prio 26:3). VLAN designs: keep pcp and map the \
                     skb priority to the PFC priority in the VLAN's egress-qos-map.",
                l.name
            ))
        } else {
            Finding::new(
                Code::N001,
                subject.clone(),
                format!(
                    "{subject}: RoCE traffic with {}, but PFC is enabled only on priority {} \
                     (on {})",
                    c.describe(),
                    priorities(bits),
                    l.name
                ),
            )
            .remedy(format!(
                "Make the ToS a connection gets land on the PFC priority: set rdma_cm's \
                 default (mkdir -p /sys/kernel/config/rdma_cm/{0}; echo 106 > \
                 /sys/kernel/config/rdma_cm/{0}/ports/{1}/default_roce_tos for DSCP 26) or the \
                 application's class (NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS), map that DSCP to the \
                 PFC priority (dcb app add dev {2} dscp-prio 26:3), or enable PFC on priority \
                 {3}. Applications that set their own ToS are not covered by this check.",
                p.device, p.port, l.name, prio.value
            ))
        }
        .brief(format!(
            "{} {}: RoCE on prio {}, PFC on {}",
            p.device,
            p.port,
            prio.value,
            priorities(bits)
        ))
        .next(format!(
            "dcb app show dev {0}; dcb pfc show dev {0}",
            l.name
        ))
        .next(format!("mlnx_qos -i {}", l.name))
        .next(format!(
            "ethtool -S {} | grep -E 'prio[0-9]_(pause|packets)'",
            l.name
        ));
        f.evidence.extend(chain_evidence(&c));
        out.push(f);
    }
    Outcome::Findings(out)
}

/// RDK-N002 and RDK-N003: ECN on the chain's priority, where the host has a
/// per-priority switch (MLNX_OFED's sysfs).
pub fn ecn(cx: &Ctx) -> Outcome {
    if let Some(o) = no_roce(cx) {
        return o;
    }
    let (ok, why) = judged(cx);
    let mut out = Vec::new();
    let mut judged_any = false;
    let mut notes = why;
    for (p, l, dcb) in ok {
        let Some(c) = chain(p, l, dcb) else { continue };
        let Some(prio) = c.priority.as_ref().map(|s| s.value) else {
            continue;
        };
        let (np, rp) = (l.ecn.enabled(true, prio), l.ecn.enabled(false, prio));
        let (Some(np), Some(rp)) = (np, rp) else {
            notes.push(format!(
                "{}: no per-priority ECN switch in sysfs ({}): firmware's ROCE_CC_PRIO_MASK \
                 decides (mlxconfig)",
                l.name,
                match &l.ecn.layout {
                    rdmakit_host::ethernet::sysfs::EcnLayout::Debugfs { dir } => dir.as_str(),
                    _ => "no ecn/ directory",
                }
            ));
            continue;
        };
        judged_any = true;
        let on = |a: &Attr<bool>| a.get() == Some(&true);
        let subject = format!("{} port {}", p.device, p.port);
        let f = match (on(np), on(rp)) {
            (true, true) => continue,
            (false, false) => Finding::new(
                Code::N002,
                subject.clone(),
                format!(
                    "{subject}: ECN is disabled on priority {prio}, where RoCE traffic with ToS \
                     {} (DSCP {}) lands (on {})",
                    c.tos.value, c.dscp, l.name
                ),
            )
            .brief(format!("{} {}: ECN off on prio {prio}", p.device, p.port)),
            (np_on, _) => Finding::new(
                Code::N003,
                subject.clone(),
                format!(
                    "{subject}: ECN on priority {prio} is enabled at the {} but not at the {} \
                     (on {})",
                    if np_on { "notification point" } else { "reaction point" },
                    if np_on { "reaction point" } else { "notification point" },
                    l.name
                ),
            ),
        }
        .attr(np)
        .attr(rp)
        .evidence(Evidence::new(c.tos.source.clone(), c.tos.shown.clone()))
        .remedy(format!(
            "Enable both ends of DCQCN on priority {prio}: echo 1 > {}; echo 1 > {} (on every \
             host; these do not persist across reboots or driver reloads).",
            np.path, rp.path
        ))
        .next(format!(
            "grep . /sys/class/net/{0}/ecn/roce_np/enable/* /sys/class/net/{0}/ecn/roce_rp/enable/*",
            l.name
        ))
        .next(format!(
            "rdma statistic show link {}/{} | grep -E 'cnp|ecn'",
            p.device, p.port
        ));
        out.push(f);
    }
    if !judged_any && out.is_empty() {
        return unjudged(notes);
    }
    Outcome::Findings(out)
}

/// Links with their DCB facts, and why other links cannot be judged.
type Links<'a> = (Vec<(&'a EthLink, &'a Dcb)>, Vec<String>);

/// Every link beneath a RoCE port once, with its DCB facts, and why others
/// cannot be judged; or why the host has no RoCE port.
fn each_link<'a>(cx: &Ctx<'a>) -> Result<Links<'a>, Outcome> {
    if let Some(o) = no_roce(cx) {
        return Err(o);
    }
    let (ok, why) = judged(cx);
    let mut seen = std::collections::BTreeSet::new();
    let links = ok
        .into_iter()
        .filter(|(_, l, _)| seen.insert(l.name.as_str()))
        .map(|(_, l, d)| (l, d))
        .collect();
    Ok((links, why))
}

/// RDK-N004: the CNPs' own marking lands on a lossless or strict priority.
pub fn cnp_priority(cx: &Ctx) -> Outcome {
    let (links, why) = match each_link(cx) {
        Ok(v) => v,
        Err(o) => return o,
    };
    let mut out = Vec::new();
    let mut judged_any = false;
    for (l, dcb) in links {
        let trust = trust_of(l, dcb);
        let (prio, how, src) = match trust.value {
            Trust::Dscp => {
                let Some(d) = l.ecn.np_param("cnp_dscp") else {
                    continue;
                };
                let d = (d & 63) as u8;
                let map: Vec<(u8, u8)> = dcb
                    .app
                    .iter()
                    .filter(|a| a.selector == Selector::Dscp && a.protocol < 64)
                    .map(|a| (a.protocol as u8, a.priority))
                    .collect();
                let (p, _) = qos::dscp_priority(&map, d);
                (
                    p,
                    format!("DSCP {d} → priority {p}"),
                    l.ecn.np.get("cnp_dscp"),
                )
            }
            Trust::Pcp => {
                let Some(p) = l.ecn.np_param("cnp_802p_prio") else {
                    continue;
                };
                let p = (p & 7) as u8;
                (p, format!("PCP {p}"), l.ecn.np.get("cnp_802p_prio"))
            }
        };
        let Some(bits) = pfc_bits(dcb) else { continue };
        if bits == 0 {
            // No lossless class in use: nothing for CNPs to be protected like.
            continue;
        }
        judged_any = true;
        let strict = dcb.ets.as_ref().is_some_and(|e| {
            e.prio_tc[usize::from(prio)]
                .and_then(|tc| e.tc_tsa.get(usize::from(tc)).cloned().flatten())
                == Some(Tsa::Strict)
        });
        if bits & (1 << prio) != 0 || strict {
            continue;
        }
        let mut f = Finding::new(
            Code::N004,
            l.name.clone(),
            format!(
                "{}: CNPs go out with {how}, which is neither PFC-enabled (PFC: {}) nor a strict \
                 ETS class",
                l.name,
                priorities(bits)
            ),
        )
        .remedy(format!(
            "Put CNPs on a protected class: map the CNP DSCP to the strict or lossless \
             priority on hosts and switches (dcb app add dev {0} dscp-prio 48:6 and a strict \
             ETS class for it), or mark CNPs like the data (echo 26 > \
             /sys/class/net/{0}/ecn/roce_np/cnp_dscp).",
            l.name
        ))
        .next(format!(
            "dcb ets show dev {0}; dcb app show dev {0}",
            l.name
        ));
        if let Some(a) = src {
            f = f.attr(a);
        }
        f.evidence
            .push(Evidence::new(trust.source.clone(), trust.shown.clone()));
        out.push(f);
    }
    if !judged_any && out.is_empty() {
        if why.is_empty() {
            return Outcome::NotApplicable(
                "no link with both a CNP marking in sysfs and PFC in use".into(),
            );
        }
        return unjudged(why);
    }
    Outcome::Findings(out)
}

/// RDK-N005: global pause off where PFC is on.
pub fn global_pause(cx: &Ctx) -> Outcome {
    let (links, why) = match each_link(cx) {
        Ok(v) => v,
        Err(o) => return o,
    };
    let mut out = Vec::new();
    let mut judged_any = false;
    for (l, dcb) in links {
        let (Some(bits), Some(pause)) = (pfc_bits(dcb), l.pause.get()) else {
            continue;
        };
        judged_any = true;
        let rx = pause.rx == Some(true);
        let tx = pause.tx == Some(true);
        if bits == 0 || !(rx || tx) {
            continue;
        }
        let on_off = |b: bool| if b { "on" } else { "off" };
        out.push(
            Finding::new(
                Code::N005,
                l.name.clone(),
                format!(
                    "{}: global pause is on (RX {}, TX {}) while PFC is enabled on priority {}",
                    l.name,
                    on_off(rx),
                    on_off(tx),
                    priorities(bits)
                ),
            )
            .evidence(Evidence::new(
                l.pause.path.clone(),
                format!("RX: {}, TX: {}", on_off(rx), on_off(tx)),
            ))
            .evidence(Evidence::new(
                l.dcb.path.clone(),
                format!("PFC on {}", priorities(bits)),
            ))
            .remedy(format!(
                "Turn global pause off where PFC is used: ethtool -A {} rx off tx off (and \
                 persist it in the network configuration).",
                l.name
            ))
            .next(format!("ethtool -a {}", l.name)),
        );
    }
    if !judged_any && out.is_empty() {
        return unjudged(why);
    }
    Outcome::Findings(out)
}
