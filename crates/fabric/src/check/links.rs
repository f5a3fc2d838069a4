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
use rdmakit_wire::mad::smp::port_info;

use super::cabling::{end_name, present};
use super::group::Draft;
use super::{at, explain, node_name, Facts};
use crate::expected::{End, NodeKey};
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
    for dim in [WIDTH, SPEED] {
        let norm = norms(&ends, &dim);
        for &(na, pa, nb, pb) in &ends {
            out.extend(judge(&dim, (na, pa), (nb, pb), &norm));
        }
    }
    if let Some(e) = facts.expected {
        out.extend(down_but_expected(s, e));
    }
    out
}

/// Width or speed: how to read a port's values and how to say them. Values
/// are compared by their key (lanes, the speed's code).
struct Dim {
    code: Code,
    /// `width`, `speed`.
    what: &'static str,
    /// The PortInfo fields' prefix: `LinkWidth`, `LinkSpeed`.
    field: &'static str,
    active: fn(&Port) -> Option<u32>,
    enabled: fn(&Port) -> Vec<u32>,
    supported: fn(&Port) -> Vec<u32>,
    name: fn(u32) -> &'static str,
    remedy: &'static str,
}

fn lanes(w: &Width) -> u32 {
    u32::from(w.lanes())
}

fn width_name(k: u32) -> &'static str {
    u8::try_from(k)
        .ok()
        .and_then(Width::from_lanes)
        .map_or("?", Width::name)
}

fn speed_name(k: u32) -> &'static str {
    Speed::from_code(k).map_or("?", Speed::name)
}

const WIDTH: Dim = Dim {
    code: Code::F001,
    what: "width",
    field: "LinkWidth",
    active: |p| p.width.active.as_ref().map(lanes),
    enabled: |p| p.width.enabled.iter().map(lanes).collect(),
    supported: |p| p.width.supported.iter().map(lanes).collect(),
    name: width_name,
    remedy: "Lanes are missing: reseat the cable at both ends, then replace the cable or the \
             transceiver; a port's enabled widths are set with ibportstate LID PORT width",
};

const SPEED: Dim = Dim {
    code: Code::F002,
    what: "speed",
    field: "LinkSpeed",
    active: |p| p.speed.active.map(Speed::code),
    enabled: |p| p.speed.enabled.iter().map(|s| s.code()).collect(),
    supported: |p| p.speed.supported.iter().map(|s| s.code()).collect(),
    name: speed_name,
    remedy: "The link trained slower than its ends allow: check the cable's rating for the \
             speed, reseat it, then replace cable or transceiver; a port's enabled speeds are \
             set with ibportstate LID PORT speed (espeed for FDR and faster)",
};

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

/// What links of one class run at: the most common active value, how many
/// links run at it and how many had one.
#[derive(Clone, Copy, Debug)]
struct Norm {
    value: u32,
    count: usize,
    total: usize,
}

fn norms(ends: &[(&Node, &Port, &Node, &Port)], dim: &Dim) -> HashMap<(bool, bool), Norm> {
    let mut counts: HashMap<(bool, bool), HashMap<u32, usize>> = HashMap::new();
    for (na, pa, nb, pb) in ends {
        if let (Some(a), Some(b)) = ((dim.active)(pa), (dim.active)(pb)) {
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
            let (value, count) = m.into_iter().max_by_key(|(v, n)| (*n, *v))?;
            Some((
                k,
                Norm {
                    value,
                    count,
                    total,
                },
            ))
        })
        .collect()
}

/// The largest value in every known (non-empty) list; None when no list is
/// known or they share nothing.
fn best(lists: &[Vec<u32>]) -> Option<u32> {
    let known: Vec<&Vec<u32>> = lists.iter().filter(|l| !l.is_empty()).collect();
    let first = known.first()?;
    first
        .iter()
        .copied()
        .filter(|v| known.iter().all(|l| l.contains(v)))
        .max()
}

fn list(v: &[u32], name: fn(u32) -> &'static str) -> String {
    if v.is_empty() {
        "unknown".to_string()
    } else {
        v.iter().map(|x| name(*x)).collect::<Vec<_>>().join(", ")
    }
}

/// A link below what its ends allow, or (when its ends enable less than
/// they support) below what the fabric's links like it run at.
fn judge(
    dim: &Dim,
    (na, pa): (&Node, &Port),
    (nb, pb): (&Node, &Port),
    norms: &HashMap<(bool, bool), Norm>,
) -> Option<Draft> {
    let active = match ((dim.active)(pa), (dim.active)(pb)) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return None,
    };
    let name = dim.name;
    let (ea, sa, eb, sb) = (
        (dim.enabled)(pa),
        (dim.supported)(pa),
        (dim.enabled)(pb),
        (dim.supported)(pb),
    );
    let allowed = best(&[ea.clone(), sa.clone(), eb.clone(), sb.clone()]);
    let supported = best(&[sa.clone(), sb.clone()]);
    let norm = norms
        .get(&class(na, nb))
        .filter(|n| n.total >= MIN_PEERS && n.value > active);
    let like_it = |n: &Norm| {
        format!(
            "{} of the fabric's {} links like it run at {}",
            n.count,
            n.total,
            name(n.value)
        )
    };
    // Each arm's value is above `active`: the link could run at it.
    let why = match (allowed, norm) {
        (Some(b), _) if b > active => format!("both ends support and enable {}", name(b)),
        // Enabled below supported, and below the fabric's other links.
        (Some(b), Some(n)) if supported.is_some_and(|s| s >= n.value) => format!(
            "both ends support {} but enable only up to {}; {}",
            name(n.value),
            name(b),
            like_it(n)
        ),
        (None, Some(n)) if [&ea, &sa, &eb, &sb].iter().all(|l| l.is_empty()) => format!(
            "{}; the ends' enabled and supported {}s were not read",
            like_it(n),
            dim.what
        ),
        _ => return None,
    };
    let message = format!(
        "{}: the link to {} runs at {}; {why}",
        subject(na, pa),
        link_end(nb, pb),
        name(active)
    );
    let mut f = Finding::new(dim.code, subject(na, pa), message);
    for (n, p) in [(na, pa), (nb, pb)] {
        f = f.evidence(Evidence::new(
            format!(
                "{} {} active / enabled / supported",
                at(n, p.num),
                dim.field
            ),
            format!(
                "{} / {} / {}",
                (dim.active)(p).map_or("unknown", name),
                list(&(dim.enabled)(p), name),
                list(&(dim.supported)(p), name)
            ),
        ));
    }
    f = f
        .remedy(dim.remedy)
        .next(format!("ibportstate {} {}", na.lid_of(pa), pa.num))
        .next("iblinkinfo")
        .next(explain(dim.code))
        .brief(format!(
            "{} - {} at {}",
            subject(na, pa),
            link_end(nb, pb),
            name(active)
        ));
    Some(Draft::port(
        f,
        (na.guid, node_name(na)),
        pa.num,
        format!("links run at {}; {why}", name(active)),
        link_end(nb, pb),
    ))
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
        // A cable to a node that is not in the fabric at all is that
        // node's RDK-F016, which names the port state too.
        if !present(s, &c.a.node) || !present(s, &c.b.node) {
            continue;
        }
        let end = |x: &End| find(s, &x.node).and_then(|n| Some((n, n.port(x.port)?)));
        let down: Vec<(&Node, &Port, &End)> = [(&c.a, &c.b), (&c.b, &c.a)]
            .into_iter()
            .filter_map(|(x, _)| end(x).map(|(n, p)| (n, p, x)))
            .filter(|(_, p, _)| is_down(p))
            .collect();
        // Said at the switch's end when both are down.
        let Some(&(n, p, here)) = down
            .iter()
            .find(|(n, _, _)| n.kind == NodeKind::Switch)
            .or(down.first())
        else {
            continue;
        };
        let there = if here == &c.a { &c.b } else { &c.a };
        let other = down.iter().find(|(_, _, x)| *x == there);
        let also = match other {
            Some((_, q, _)) => format!(", {} there too", state_words(q)),
            None => String::new(),
        };
        let there_name = end_name(s, there);
        let message = format!(
            "{}: {}, but the expected topology has a cable to {there_name}{also}",
            subject(n, p),
            state_words(p)
        );
        let mut f = Finding::new(Code::F003, subject(n, p), message);
        for (m, q, _) in &down {
            f = f.evidence(Evidence::new(
                format!("{} PortState / PortPhysicalState", at(m, q.num)),
                format!(
                    "{} / {}",
                    q.state.map_or("unknown".into(), |s| format!("{s:?}")),
                    q.phys_state.map_or("unknown".into(), phys_name)
                ),
            ));
        }
        f = f
            .evidence(Evidence::new(
                "expected cable",
                format!("{} - {}", c.a, c.b),
            ))
            .remedy(
                "Check that the cable is plugged in at both ends and the peer is powered; \
                 Disabled means someone disabled the port (ibportstate LID PORT enable); \
                 Polling means no signal from the other end: reseat or replace the cable",
            );
        for (m, q, _) in &down {
            let lid = m.lid_of(q);
            if lid != 0 {
                f = f.next(format!("ibportstate {lid} {}", q.num));
            }
        }
        f = f.next("iblinkinfo").next(explain(Code::F003));
        out.push(Draft::port(
            f,
            (n.guid, node_name(n)),
            p.num,
            format!(
                "{}, but the expected topology has cables there",
                state_words(p)
            ),
            there_name,
        ));
    }
    out
}

/// `physical state Polling`, or `state Down`.
fn state_words(p: &Port) -> String {
    match p
        .phys_state
        .and_then(|c| NO_LINK.iter().find(|(k, _)| *k == c))
    {
        Some((_, name)) => format!("physical state {name}"),
        None => "state Down".to_string(),
    }
}

/// True when the port is known to have no link: physical state Sleep,
/// Polling or Disabled, or state Down without a physical LinkUp.
pub(crate) fn is_down(p: &Port) -> bool {
    let phys = p
        .phys_state
        .is_some_and(|c| NO_LINK.iter().any(|(k, _)| *k == c));
    phys || (p.state == Some(PortState::Down) && p.phys_state != Some(5))
}

/// A PortPhysicalState's name as smpquery prints it, or its code where it
/// names no state (0 is NoChange, a value only a Set carries).
pub(crate) fn phys_name(code: u8) -> String {
    match code {
        1..=7 => port_info::phys_state_name(code).to_string(),
        _ => format!("code {code}"),
    }
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
