//! Links: a width (RDK-F001) or speed (RDK-F002) below what both ends
//! support and enable, and a port that is down where the expected topology
//! has a cable (RDK-F003).
//!
//! A link can run at the widest width (fastest speed) that both ends
//! support and enable: the largest value in all four lists (PortInfo's
//! LinkWidthSupported and LinkWidthEnabled at each end). A list that is not
//! known (empty in the model) does not limit. When nothing is known of
//! either end but the active value — ibnetdiscover prints only that — the
//! link is compared with the fabric's other links between nodes of the same
//! kinds (switch–switch, switch–CA): when at least [`MIN_PEERS`] of them
//! are known and the most common width (speed) is above this link's, the
//! link is reported, and the message says what it was compared with.
//!
//! A port whose physical state is Sleep, Polling or Disabled, or whose state
//! is Down, is reported only when the expected topology has a cable on it:
//! without one, a switch's Down ports are simply unused.

use std::collections::HashMap;

use rdmakit_doctor::codes::Code;
use rdmakit_doctor::finding::{Evidence, Finding};
use rdmakit_types::{PortState, Speed, Width};

use super::group::Draft;
use super::{at, explain, node_name, Facts};
use crate::expected::NodeKey;
use crate::topology::{Link, Node, NodeKind, Port, Subnet};

/// The fewest other links of the same kinds a link with unknown
/// capabilities is compared with.
pub const MIN_PEERS: usize = 4;

/// PortPhysicalState codes that mean no link: Sleep, Polling, Disabled.
const NO_LINK: [(u8, &str); 3] = [(1, "Sleep"), (2, "Polling"), (3, "Disabled")];

/// The drafts for every link and, with an expected topology, every port
/// expected to be cabled.
pub(crate) fn check(facts: &Facts) -> Vec<Draft> {
    let s = facts.subnet;
    let ends: Vec<(&Node, &Port, &Node, &Port)> = s.links().filter_map(|l| ends(s, l)).collect();
    let mut out = Vec::new();
    let norm_w = norms(
        &ends,
        |p| p.width.active.map(|w| w.lanes() as u32),
        |p| p.width.enabled.is_empty() && p.width.supported.is_empty(),
    );
    let norm_s = norms(
        &ends,
        |p| p.speed.active.map(Speed::code),
        |p| p.speed.enabled.is_empty() && p.speed.supported.is_empty(),
    );
    for &(na, pa, nb, pb) in &ends {
        out.extend(width(na, pa, nb, pb, &norm_w));
        out.extend(speed(na, pa, nb, pb, &norm_s));
    }
    if let Some(e) = facts.expected {
        out.extend(down_but_expected(s, e));
    }
    out
}

/// Both ends of a link, the switch end first (so a leaf's links are its
/// findings), when both are in the subnet.
fn ends(s: &Subnet, l: Link) -> Option<(&Node, &Port, &Node, &Port)> {
    let na = s.node(l.a.guid)?;
    let nb = s.node(l.b.guid)?;
    let (pa, pb) = (na.port(l.a.port)?, nb.port(l.b.port)?);
    if na.kind != NodeKind::Switch && nb.kind == NodeKind::Switch {
        Some((nb, pb, na, pa))
    } else {
        Some((na, pa, nb, pb))
    }
}

/// Which kinds of node a link joins, in a fixed order.
fn class(a: &Node, b: &Node) -> (bool, bool) {
    let (x, y) = (a.kind == NodeKind::Switch, b.kind == NodeKind::Switch);
    (x.max(y), x.min(y))
}

/// The most common active value (and how many links had one) per class,
/// over the links of which nothing else is known.
fn norms(
    ends: &[(&Node, &Port, &Node, &Port)],
    value: impl Fn(&Port) -> Option<u32>,
    unknown: impl Fn(&Port) -> bool,
) -> HashMap<(bool, bool), (u32, usize, usize)> {
    let mut counts: HashMap<(bool, bool), HashMap<u32, usize>> = HashMap::new();
    for (na, pa, nb, pb) in ends {
        if !(unknown(pa) && unknown(pb)) {
            continue;
        }
        if let (Some(a), Some(b)) = (value(pa), value(pb)) {
            *counts
                .entry(class(na, nb))
                .or_default()
                .entry(a.min(b))
                .or_default() += 1;
        }
    }
    counts
        .into_iter()
        .filter_map(|(k, m)| {
            let total: usize = m.values().sum();
            let (v, n) = m.into_iter().max_by_key(|(v, n)| (*n, *v))?;
            Some((k, (v, n, total)))
        })
        .collect()
}

/// The largest value in every known list (None when no list is known or
/// they share nothing).
fn best<T: Copy + PartialEq>(lists: [&[T]; 4], key: impl Fn(T) -> u32) -> Option<T> {
    let known: Vec<&[T]> = lists.into_iter().filter(|l| !l.is_empty()).collect();
    let first = known.first()?;
    first
        .iter()
        .copied()
        .filter(|v| known.iter().all(|l| l.contains(v)))
        .max_by_key(|v| key(*v))
}

fn list<T: Copy>(v: &[T], name: impl Fn(T) -> &'static str) -> String {
    if v.is_empty() {
        "unknown".to_string()
    } else {
        v.iter().map(|x| name(*x)).collect::<Vec<_>>().join(", ")
    }
}

fn width(
    na: &Node,
    pa: &Port,
    nb: &Node,
    pb: &Port,
    norms: &HashMap<(bool, bool), (u32, usize, usize)>,
) -> Option<Draft> {
    let (wa, wb) = (&pa.width, &pb.width);
    let active = match (wa.active, wb.active) {
        (Some(a), Some(b)) => min_by(a, b, |w| w.lanes() as u32),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return None,
    };
    let lists = [
        wa.enabled.as_slice(),
        wa.supported.as_slice(),
        wb.enabled.as_slice(),
        wb.supported.as_slice(),
    ];
    let lanes = |w: Width| w.lanes() as u32;
    let (could, basis) = match best(lists, lanes) {
        Some(b) => (b, None),
        None if lists.iter().all(|l| l.is_empty()) => {
            let &(v, n, total) = norms.get(&class(na, nb))?;
            if total < MIN_PEERS {
                return None;
            }
            (Width::from_lanes(v as u8)?, Some((n, total)))
        }
        None => return None,
    };
    if lanes(active) >= lanes(could) {
        return None;
    }
    let ends = format!("{} - {}", link_end(na, pa), link_end(nb, pb));
    let why = match basis {
        None => format!("both ends support and enable {}", could.name()),
        Some((n, total)) => format!(
            "{n} of the fabric's {total} links like it run at {}; the ends' enabled and \
             supported widths were not read",
            could.name()
        ),
    };
    let message = format!(
        "{}: the link to {} runs at {}; {why}",
        subject(na, pa),
        link_end(nb, pb),
        active.name()
    );
    let mut f = Finding::new(Code::F001, subject(na, pa), message);
    for (n, p) in [(na, pa), (nb, pb)] {
        f = f.evidence(Evidence::new(
            format!("{} LinkWidth active / enabled / supported", at(n, p.num)),
            format!(
                "{} / {} / {}",
                p.width.active.map_or("unknown", Width::name),
                list(&p.width.enabled, Width::name),
                list(&p.width.supported, Width::name)
            ),
        ));
    }
    f = f
        .remedy(
            "Lanes are missing: reseat the cable at both ends, then replace the cable or the \
             transceiver; a port's enabled widths are set with ibportstate LID PORT width",
        )
        .next(format!("ibportstate {} {}", na.lid_of(pa), pa.num))
        .next("iblinkinfo")
        .next(format!("perfquery -x {} {}", na.lid_of(pa), pa.num))
        .next(explain(Code::F001))
        .brief(format!("{ends} at {}", active.name()));
    Some(Draft::port(
        f,
        (na.guid, node_name(na)),
        pa.num,
        format!("links run at {}; {why}", active.name()),
        link_end(nb, pb),
    ))
}

fn speed(
    na: &Node,
    pa: &Port,
    nb: &Node,
    pb: &Port,
    norms: &HashMap<(bool, bool), (u32, usize, usize)>,
) -> Option<Draft> {
    let (sa, sb) = (&pa.speed, &pb.speed);
    let active = match (sa.active, sb.active) {
        (Some(a), Some(b)) => min_by(a, b, Speed::code),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return None,
    };
    let lists = [
        sa.enabled.as_slice(),
        sa.supported.as_slice(),
        sb.enabled.as_slice(),
        sb.supported.as_slice(),
    ];
    let (could, basis) = match best(lists, Speed::code) {
        Some(b) => (b, None),
        None if lists.iter().all(|l| l.is_empty()) => {
            let &(v, n, total) = norms.get(&class(na, nb))?;
            if total < MIN_PEERS {
                return None;
            }
            (Speed::from_code(v)?, Some((n, total)))
        }
        None => return None,
    };
    if active.code() >= could.code() {
        return None;
    }
    let why = match basis {
        None => format!("both ends support and enable {}", could.name()),
        Some((n, total)) => format!(
            "{n} of the fabric's {total} links like it run at {}; the ends' enabled and \
             supported speeds were not read",
            could.name()
        ),
    };
    let message = format!(
        "{}: the link to {} runs at {}; {why}",
        subject(na, pa),
        link_end(nb, pb),
        active.name()
    );
    let mut f = Finding::new(Code::F002, subject(na, pa), message);
    for (n, p) in [(na, pa), (nb, pb)] {
        f = f.evidence(Evidence::new(
            format!("{} LinkSpeed active / enabled / supported", at(n, p.num)),
            format!(
                "{} / {} / {}",
                p.speed.active.map_or("unknown", Speed::name),
                list(&p.speed.enabled, Speed::name),
                list(&p.speed.supported, Speed::name)
            ),
        ));
    }
    f = f
        .remedy(
            "The link trained slower than both ends allow: check the cable's rating for the \
             speed, reseat it, then replace cable or transceiver; a port's enabled speeds \
             are set with ibportstate LID PORT speed (and espeed)",
        )
        .next(format!("ibportstate {} {}", na.lid_of(pa), pa.num))
        .next("iblinkinfo")
        .next(explain(Code::F002));
    Some(Draft::port(
        f,
        (na.guid, node_name(na)),
        pa.num,
        format!("links run at {}; {why}", active.name()),
        link_end(nb, pb),
    ))
}

fn min_by<T: Copy>(a: T, b: T, key: impl Fn(T) -> u32) -> T {
    if key(b) < key(a) {
        b
    } else {
        a
    }
}

/// `leaf1 port 3`.
fn subject(n: &Node, p: &Port) -> String {
    format!("{} port {}", node_name(n), p.num)
}

/// `host-03 HCA-1 port 1`.
fn link_end(n: &Node, p: &Port) -> String {
    subject(n, p)
}

/// The drafts for ports the expected topology cables whose link is down.
fn down_but_expected(s: &Subnet, e: &crate::expected::Expected) -> Vec<Draft> {
    let mut out = Vec::new();
    for c in e.cables() {
        for (here, there) in [(&c.a, &c.b), (&c.b, &c.a)] {
            let Some(n) = find(s, &here.node) else {
                continue;
            };
            let Some(p) = n.port(here.port) else {
                continue;
            };
            if !is_down(p) {
                continue;
            }
            let phys = p
                .phys_state
                .and_then(|c| NO_LINK.iter().find(|(k, _)| *k == c));
            let state = match (phys, p.state) {
                (Some((_, name)), _) => format!("physical state {name}"),
                _ => "state Down".to_string(),
            };
            let message = format!(
                "{}: {state}, but the expected topology has a cable to {there}",
                subject(n, p)
            );
            let f = Finding::new(Code::F003, subject(n, p), message)
                .evidence(Evidence::new(
                    format!("{} PortState / PortPhysicalState", at(n, p.num)),
                    format!(
                        "{} / {}",
                        p.state.map_or("unknown".into(), |s| format!("{s:?}")),
                        p.phys_state.map_or("unknown".into(), phys_name)
                    ),
                ))
                .evidence(Evidence::new("expected cable", format!("{here} - {there}")))
                .remedy(
                    "Check that the cable is plugged in at both ends and the peer is powered; \
                     Disabled means someone disabled the port (ibportstate LID PORT enable); \
                     Polling means no signal from the other end: reseat or replace the cable",
                )
                .next(format!("ibportstate {} {}", n.lid_of(p), p.num))
                .next("iblinkinfo")
                .next(explain(Code::F003));
            out.push(Draft::port(
                f,
                (n.guid, node_name(n)),
                p.num,
                format!("{state}, but the expected topology has cables there"),
                there.to_string(),
            ));
        }
    }
    out
}

/// True when the port is known to have no link: physical state Sleep,
/// Polling or Disabled, or state Down without a physical LinkUp.
pub(crate) fn is_down(p: &Port) -> bool {
    let phys = p
        .phys_state
        .is_some_and(|c| NO_LINK.iter().any(|(k, _)| *k == c));
    phys || (p.state == Some(PortState::Down) && p.phys_state != Some(5))
}

/// A PortPhysicalState's name.
pub(crate) fn phys_name(code: u8) -> String {
    let name = match code {
        1 => "Sleep",
        2 => "Polling",
        3 => "Disabled",
        4 => "PortConfigurationTraining",
        5 => "LinkUp",
        6 => "LinkErrorRecovery",
        7 => "PhyTest",
        _ => return format!("code {code}"),
    };
    name.to_string()
}

/// The node an expected end names: by GUID, or by a description only one
/// node has.
pub(crate) fn find<'a>(s: &'a Subnet, key: &NodeKey) -> Option<&'a Node> {
    match key {
        NodeKey::Guid(g) => s.node(*g),
        NodeKey::Desc(d) => {
            let mut it = s.nodes().iter().filter(|n| n.desc == *d);
            let n = it.next()?;
            it.next().is_none().then_some(n)
        }
    }
}
