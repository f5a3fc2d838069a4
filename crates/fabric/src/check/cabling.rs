//! The cabling against the operator's expected topology: every
//! [`CablingDiff`] as a finding — a cable missing (RDK-F016), one not
//! expected (RDK-F017), a port cabled elsewhere or two cables swapped
//! (RDK-F018, a swap said once).
//!
//! A node of the expected topology that is not in the fabric at all is said
//! once, with the nodes that hang only off it: a leaf switch that is gone
//! takes its hosts with it, and its six missing cables are one finding
//! ("leaf3 is not in the fabric, nor are the 4 nodes reached only through
//! it"), not six. A missing cable whose port is known to be down is left to
//! RDK-F003, which says more (the port's physical state).

use std::collections::{BTreeMap, BTreeSet};

use rdmakit_doctor::codes::Code;
use rdmakit_doctor::finding::{Evidence, Finding};

use super::group::Draft;
use super::links::{find, is_down};
use super::{explain, node_name};
use crate::expected::{compare, CablingDiff, End, Expected, NodeKey};
use crate::topology::Subnet;

/// The drafts for every difference between `e` and `s`.
pub(crate) fn check(e: &Expected, s: &Subnet) -> Vec<Draft> {
    let diffs = compare(e, s);
    let mut out = Vec::new();
    let mut missing: Vec<(End, End)> = Vec::new();
    for d in diffs {
        match d {
            CablingDiff::Missing { a, b } => missing.push((a, b)),
            CablingDiff::Extra { a, b } => out.push(extra(s, &a, &b)),
            CablingDiff::Miswired { expected, found } => {
                out.push(miswired(s, &expected, &found));
            }
            CablingDiff::Swapped { first, second } => out.push(swapped(s, &first, &second)),
        }
    }
    out.extend(missing_cables(e, s, missing));
    out
}

/// `leaf1 port 3` (a node named by GUID: its description when it is in the
/// subnet).
pub(crate) fn end_name(s: &Subnet, e: &End) -> String {
    match &e.node {
        NodeKey::Desc(d) => format!("{d} port {}", e.port),
        NodeKey::Guid(g) => match s.node(*g) {
            Some(n) => format!("{} port {}", node_name(n), e.port),
            None => format!("{g:#018x} port {}", e.port),
        },
    }
}

fn key_name(k: &NodeKey) -> String {
    match k {
        NodeKey::Desc(d) => d.clone(),
        NodeKey::Guid(g) => format!("{g:#018x}"),
    }
}

/// True when some node of the subnet is the one `k` names.
pub(crate) fn present(s: &Subnet, k: &NodeKey) -> bool {
    match k {
        NodeKey::Guid(g) => s.node(*g).is_some(),
        NodeKey::Desc(d) => s.nodes_by_desc(d).next().is_some(),
    }
}

/// `ibportstate LID PORT` for an end in the subnet.
fn portstate(s: &Subnet, e: &End) -> Option<String> {
    let n = find(s, &e.node)?;
    let lid = n
        .port0
        .map_or_else(|| n.port(e.port).map_or(0, |p| p.lid), |p0| p0.lid);
    (lid != 0).then(|| format!("ibportstate {lid} {}", e.port))
}

/// The node's GUID and name, for grouping, when it is in the subnet.
fn node_of(s: &Subnet, e: &End) -> Option<(u64, String)> {
    find(s, &e.node).map(|n| (n.guid, node_name(n)))
}

fn extra(s: &Subnet, a: &End, b: &End) -> Draft {
    let subject = end_name(s, a);
    let f = Finding::new(
        Code::F017,
        subject.clone(),
        format!(
            "{subject}: a cable to {} that the expected topology does not name",
            end_name(s, b)
        ),
    )
    .evidence(Evidence::new("found cable", format!("{a} - {b}")))
    .remedy(
        "Either the expected topology lacks this cable (add it) or the cable should not be \
         there (remove it): a cable list names every cable",
    )
    .next("iblinkinfo")
    .next("ibnetdiscover")
    .next(explain(Code::F017));
    match node_of(s, a) {
        Some(node) => Draft::port(
            f,
            node,
            a.port,
            "cables the expected topology does not name",
            end_name(s, b),
        ),
        None => Draft::alone(f),
    }
}

fn miswired(s: &Subnet, expected: &(End, End), found: &(End, End)) -> Draft {
    let subject = end_name(s, &expected.0);
    let mut f = Finding::new(
        Code::F018,
        subject.clone(),
        format!(
            "{subject}: cabled to {}, expected {}",
            end_name(s, &found.1),
            end_name(s, &expected.1)
        ),
    )
    .evidence(Evidence::new(
        "expected cable",
        format!("{} - {}", expected.0, expected.1),
    ))
    .evidence(Evidence::new(
        "found cable",
        format!("{} - {}", found.0, found.1),
    ))
    .remedy(
        "Move the cable to the expected port (or correct the expected topology); routes \
         computed for the intended cabling do not hold for this one",
    )
    .next("iblinkinfo");
    if let Some(c) = portstate(s, &expected.0) {
        f = f.next(c);
    }
    Draft::alone(f.next(explain(Code::F018)))
}

fn swapped(s: &Subnet, first: &(End, End), second: &(End, End)) -> Draft {
    // Said from the side where the two ports are on one node (the switch
    // whose cables to exchange): x-y and z-w found as x-w and z-y is y-x
    // and w-z found as y-z and w-x.
    if first.0.node != second.0.node && first.1.node == second.1.node {
        let flipped = (
            (first.1.clone(), first.0.clone()),
            (second.1.clone(), second.0.clone()),
        );
        return swapped(s, &flipped.0, &flipped.1);
    }
    let (x, y) = (end_name(s, &first.0), end_name(s, &first.1));
    let (z, w) = (end_name(s, &second.0), end_name(s, &second.1));
    let subject = format!("{x} and {z}");
    let f = Finding::new(
        Code::F018,
        subject.clone(),
        format!(
            "{subject}: two cables are swapped: {x} goes to {w} and {z} to {y}; expected {x} - \
             {y} and {z} - {w}"
        ),
    )
    .evidence(Evidence::new(
        "expected cables",
        format!("{} - {}; {} - {}", first.0, first.1, second.0, second.1),
    ))
    .evidence(Evidence::new(
        "found cables",
        format!("{} - {}; {} - {}", first.0, second.1, second.0, first.1),
    ))
    .remedy(format!(
        "Exchange the two cables at {x} and {z} (or correct the expected topology)"
    ))
    .next("iblinkinfo")
    .next("ibnetdiscover")
    .next(explain(Code::F018))
    .brief(format!("cables swapped at {x} and {z}"));
    Draft::alone(f)
}

/// Missing cables: those of nodes that are not there at all, a finding per
/// group of such nodes; the rest one each (merged per node), but for ports
/// known to be down (RDK-F003's).
fn missing_cables(e: &Expected, s: &Subnet, missing: Vec<(End, End)>) -> Vec<Draft> {
    let absent: BTreeSet<NodeKey> = missing
        .iter()
        .flat_map(|(a, b)| [&a.node, &b.node])
        .filter(|k| !present(s, k))
        .cloned()
        .collect();
    // Groups of absent nodes joined by missing cables (union-find by index).
    let keys: Vec<&NodeKey> = absent.iter().collect();
    let index: BTreeMap<&NodeKey, usize> = keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
    let mut parent: Vec<usize> = (0..keys.len()).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    for (a, b) in &missing {
        if let (Some(&i), Some(&j)) = (index.get(&a.node), index.get(&b.node)) {
            let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
            parent[ri] = rj;
        }
    }
    let degree = |k: &NodeKey| {
        e.cables()
            .filter(|c| &c.a.node == k || &c.b.node == k)
            .count()
    };
    type Group<'a> = (Vec<&'a NodeKey>, Vec<&'a (End, End)>);
    let mut groups: BTreeMap<usize, Group> = BTreeMap::new();
    let mut out = Vec::new();
    for m in &missing {
        let (a, b) = m;
        let owner = index.get(&a.node).or_else(|| index.get(&b.node));
        if let Some(&i) = owner {
            let r = root(&mut parent, i);
            groups.entry(r).or_default().1.push(m);
            continue;
        }
        let down = [a, b].iter().any(|end| {
            find(s, &end.node)
                .and_then(|n| n.port(end.port))
                .is_some_and(is_down)
        });
        if !down {
            out.push(one_missing(s, a, b));
        }
    }
    for (i, k) in keys.iter().enumerate() {
        let r = root(&mut parent, i);
        groups.entry(r).or_default().0.push(k);
    }
    for (nodes, cables) in groups.into_values() {
        if cables.is_empty() {
            continue;
        }
        out.push(absent_nodes(s, nodes, &cables, degree));
    }
    out
}

fn one_missing(s: &Subnet, a: &End, b: &End) -> Draft {
    let subject = end_name(s, a);
    let mut f = Finding::new(
        Code::F016,
        subject.clone(),
        format!(
            "{subject}: the expected cable to {} is not there",
            end_name(s, b)
        ),
    )
    .evidence(Evidence::new("expected cable", format!("{a} - {b}")));
    for end in [a, b] {
        let state = match find(s, &end.node).and_then(|n| n.port(end.port)) {
            Some(p) => match p.remote {
                Some(r) => format!("cabled to {:#018x} port {}", r.guid, r.port),
                None => "no cable found".to_string(),
            },
            None => "no link found (the port is not in the discovered topology)".to_string(),
        };
        f = f.evidence(Evidence::new(end_name(s, end), state));
    }
    f = f
        .remedy(
            "Plug the cable in (or replace it) at both ends; if it is there, the port may be \
             disabled (ibportstate LID PORT enable) or its peer powered off",
        )
        .next("iblinkinfo");
    if let Some(c) = portstate(s, a).or_else(|| portstate(s, b)) {
        f = f.next(c);
    }
    let f = f.next(explain(Code::F016));
    match node_of(s, a) {
        Some(node) => Draft::port(
            f,
            node,
            a.port,
            "expected cables are not there",
            end_name(s, b),
        ),
        None => Draft::alone(f),
    }
}

/// One finding for nodes that are not in the fabric and their cables.
fn absent_nodes(
    s: &Subnet,
    mut nodes: Vec<&NodeKey>,
    cables: &[&(End, End)],
    degree: impl Fn(&NodeKey) -> usize,
) -> Draft {
    nodes.sort_by_key(|k| (std::cmp::Reverse(degree(k)), (*k).clone()));
    let first = key_name(nodes[0]);
    let others: Vec<String> = nodes[1..].iter().map(|k| key_name(k)).collect();
    let behind = match others.len() {
        0 => String::new(),
        n => {
            let listed: Vec<&str> = others.iter().take(4).map(String::as_str).collect();
            let more = n.saturating_sub(4);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!(
                ", nor {} reached only through it ({}{more})",
                if n == 1 {
                    "is the node".to_string()
                } else {
                    format!("are the {n} nodes")
                },
                listed.join(", ")
            )
        }
    };
    let n = cables.len();
    let message = format!(
        "{first}: not in the fabric{behind}: {n} expected cable{} missing",
        if n == 1 { " is" } else { "s are" }
    );
    let mut f = Finding::new(Code::F016, first.clone(), message)
        .brief(format!("{first} is not in the fabric"));
    for (a, b) in cables {
        f = f.evidence(Evidence::new("expected cable", format!("{a} - {b}")));
        for end in [a, b] {
            let Some(n) = find(s, &end.node) else {
                continue;
            };
            if let Some(p) = n.port(end.port).filter(|p| is_down(p)) {
                f = f.evidence(Evidence::new(
                    format!("{} PortState / PortPhysicalState", super::at(n, p.num)),
                    format!(
                        "{} / {}",
                        p.state.map_or("unknown".into(), |s| format!("{s:?}")),
                        p.phys_state
                            .map_or("unknown".into(), super::links::phys_name)
                    ),
                ));
            }
        }
    }
    let mut f = f
        .remedy(
            "The node is unreachable: check its power and the cables to the rest of the fabric \
             (an unplugged or failed uplink hides everything behind it); if it was removed on \
             purpose, take it out of the expected topology",
        )
        .next("ibnetdiscover")
        .next("iblinkinfo");
    // The port on the fabric's side of the first cable that reaches it.
    if let Some(c) = cables.iter().find_map(|(a, b)| {
        portstate(s, a)
            .filter(|_| present(s, &a.node))
            .or_else(|| portstate(s, b).filter(|_| present(s, &b.node)))
    }) {
        f = f.next(c);
    }
    Draft::alone(f.next(explain(Code::F016)))
}
