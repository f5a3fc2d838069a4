//! The fabric as a picture, before any drawing: which box each node goes
//! in, on which tier, which links join the boxes, and how healthy each link
//! is with the evidence — the data `rdmakit_report::fabric` draws.
//!
//! **Tiers.** From the graph alone: channel adapters (hosts) are tier 0; a
//! switch's tier is its distance in cables from the nearest CA (a breadth
//! first walk from every CA at once), so in a fat tree leaves are tier 1
//! and spines tier 2; a switch no CA reaches goes one tier above the rest.
//! The picture puts the highest tier on top. Within a tier, switches keep
//! the subnet's order; hosts follow the position of their switch, then the
//! port they are cabled to.
//!
//! **Hosts in boxes.** A switch with more than [`Options::collapse_over`] CAs
//! cabled to it shows them as one box ("32 hosts") joined by one line;
//! when the bottom tier would still hold more than
//! [`Options::max_host_boxes`] boxes, every switch's CAs are collapsed. A
//! collapsed host link that is not healthy keeps its own line to the box,
//! so no fault is hidden; the line's hover names the host.
//!
//! **Health** ([`health_of`], the one place that decides): from the
//! check's findings ([`crate::check::run`]) on either end of a link — a
//! finding's evidence names the ports it read (`leaf1 (0x…) port 3 …`) —
//! and from the link state itself: Down (a port Down, or an expected cable
//! that is missing, RDK-F003 and the cabling diff), Errors (counter
//! findings RDK-F004 … F007), Degraded (width or speed below what both ends
//! allow, RDK-F001, F002; a cable off the expected topology, F017, F018),
//! else Ok. Findings on no link (the SM, LIDs) are listed apart.
//!
//! Pure: no I/O, no clock; the same input gives the same picture.

use std::collections::{BTreeMap, HashMap, VecDeque};

use rdmakit_doctor::codes::Code;
use rdmakit_doctor::finding::Finding;
use rdmakit_types::PortState;
use serde::Serialize;

use crate::counters::Counters;
use crate::expected::{compare, CablingDiff, End, Expected, NodeKey};
use crate::topology::{Node, NodeKind, Port, PortRef, Subnet};

/// The JSON schema of a [`Picture`].
pub const SCHEMA: &str = "rdmakit.fabric.picture/v1";

/// How the picture groups hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// A switch with more CAs than this shows them as one box.
    pub collapse_over: usize,
    /// When the bottom tier would hold more boxes than this, every switch's
    /// CAs are one box.
    pub max_host_boxes: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            collapse_over: 8,
            max_host_boxes: 96,
        }
    }
}

/// A link's health, worst last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Nothing wrong known.
    Ok,
    /// Narrower or slower than both ends allow.
    Degraded,
    /// Error counters over their thresholds.
    Errors,
    /// Down, or an expected cable missing.
    Down,
}

/// The picture: tiers of boxes (top first), links between them, faults.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Picture {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Box ids by tier, the top tier first.
    pub tiers: Vec<Vec<usize>>,
    /// The boxes, by id.
    pub boxes: Vec<NodeBox>,
    /// Every link drawn, by id.
    pub links: Vec<LinkView>,
    /// Findings that name no link (the SM, identity), as `CODE subject: message`.
    pub other_findings: Vec<String>,
    /// Nodes, switches, CAs and cables in the subnet.
    pub counts: Counts,
    /// The collapse rule used.
    pub collapse_over: usize,
}

/// What the subnet holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Nodes.
    pub nodes: usize,
    /// Switches.
    pub switches: usize,
    /// Channel adapters.
    pub cas: usize,
    /// Cables found.
    pub cables: usize,
}

/// One box: a node, or a switch's hosts collapsed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeBox {
    /// Its id (index in [`Picture::boxes`]).
    pub id: usize,
    /// What it says: the description, or `16 hosts`.
    pub label: String,
    /// `switch`, `ca`, `router` or `hosts`.
    pub kind: &'static str,
    /// The node's GUID (none for a host group).
    pub guid: Option<String>,
    /// Its tier (0: hosts).
    pub tier: usize,
    /// The CAs a host group holds (1 for a node).
    pub hosts: usize,
    /// The worst health of its links.
    pub health: Health,
}

/// One end of a link as its hover shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkEnd {
    /// The box it is drawn from.
    pub box_id: usize,
    /// The node's description.
    pub desc: String,
    /// The node's GUID.
    pub guid: String,
    /// The port number.
    pub port: u8,
    /// Active width (`4X`), or `-`.
    pub width: String,
    /// Active speed (`QDR`), or `-`.
    pub speed: String,
    /// PortState (`Active`, `Down`), or `-`.
    pub state: String,
    /// Error counters that are not 0, by perfquery's names.
    pub errors: BTreeMap<String, u64>,
}

/// One line of the picture: a cable, or a host group's healthy cables.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkView {
    /// Its id (index in [`Picture::links`]).
    pub id: usize,
    /// One end (the upper tier's).
    pub a: LinkEnd,
    /// The other.
    pub b: LinkEnd,
    /// The cables this line stands for (more than 1 for a host group).
    pub cables: usize,
    /// Its health.
    pub health: Health,
    /// Why, one line a finding: `RDK-F005 leaf1 port 3: …`.
    pub why: Vec<String>,
    /// The findings' evidence on its ends: (where, value).
    pub evidence: Vec<(String, String)>,
}

/// Builds the picture of `subnet`, with the error counters of `counters`
/// on each end, the health from `findings`, and the cables `expected`
/// names that are missing drawn as Down links.
pub fn picture(
    subnet: &Subnet,
    counters: Option<&Counters>,
    findings: &[Finding],
    expected: Option<&Expected>,
    opts: &Options,
) -> Picture {
    let tier_of = tiers(subnet);
    let top = tier_of.values().copied().max().unwrap_or(0);
    // Switches' positions, for ordering hosts under them.
    let mut boxes: Vec<NodeBox> = Vec::new();
    let mut box_of: HashMap<u64, usize> = HashMap::new();
    let mut by_tier: Vec<Vec<usize>> = vec![Vec::new(); top + 1];
    for n in subnet.nodes().iter().filter(|n| n.kind != NodeKind::Ca) {
        let t = tier_of.get(&n.guid).copied().unwrap_or(top);
        let id = boxes.len();
        boxes.push(node_box(id, n, t));
        box_of.insert(n.guid, id);
        by_tier[t].push(id);
    }
    // Hosts: under the first switch they are cabled to.
    let mut under: BTreeMap<(usize, u8), Vec<&Node>> = BTreeMap::new();
    let mut loose: Vec<&Node> = Vec::new();
    for n in subnet.nodes().iter().filter(|n| n.kind == NodeKind::Ca) {
        let att = n.ports.iter().find_map(|p| {
            let r = p.remote?;
            let sw = subnet.node(r.guid).filter(|m| m.kind != NodeKind::Ca)?;
            Some((box_of[&sw.guid], r.port))
        });
        match att {
            Some(k) => under.entry(k).or_default().push(n),
            None => loose.push(n),
        }
    }
    let mut per_switch: BTreeMap<usize, Vec<&Node>> = BTreeMap::new();
    for ((sw, _), ns) in &under {
        per_switch
            .entry(*sw)
            .or_default()
            .extend(ns.iter().copied());
    }
    let individual: usize = per_switch
        .values()
        .map(|v| {
            if v.len() > opts.collapse_over {
                1
            } else {
                v.len()
            }
        })
        .sum::<usize>()
        + loose.len();
    let collapse_all = individual > opts.max_host_boxes;
    // Switches in picture order, so host groups follow them.
    let mut order: Vec<usize> = per_switch.keys().copied().collect();
    order.sort_by_key(|b| {
        let t = boxes[*b].tier;
        (t, by_tier[t].iter().position(|x| x == b))
    });
    let mut group_of: HashMap<u64, usize> = HashMap::new();
    for sw in order {
        let hosts = &per_switch[&sw];
        if collapse_all || hosts.len() > opts.collapse_over {
            let id = boxes.len();
            boxes.push(NodeBox {
                id,
                label: format!("{} hosts", hosts.len()),
                kind: "hosts",
                guid: None,
                tier: 0,
                hosts: hosts.len(),
                health: Health::Ok,
            });
            by_tier[0].push(id);
            for h in hosts {
                box_of.insert(h.guid, id);
                group_of.insert(h.guid, id);
            }
        } else {
            for h in hosts {
                let id = boxes.len();
                boxes.push(node_box(id, h, 0));
                box_of.insert(h.guid, id);
                by_tier[0].push(id);
            }
        }
    }
    for h in loose {
        let id = boxes.len();
        boxes.push(node_box(id, h, 0));
        box_of.insert(h.guid, id);
        by_tier[0].push(id);
    }

    let on_port = findings_by_port(findings);
    let mut links: Vec<LinkView> = Vec::new();
    // Healthy cables into one host group, merged per (switch, group).
    let mut merged: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    let mut add = |links: &mut Vec<LinkView>, mut l: LinkView| {
        let into_group =
            group_of.contains_key(&guid_of(&l.b)) || group_of.contains_key(&guid_of(&l.a));
        if into_group && l.health == Health::Ok {
            let key = (l.a.box_id, l.b.box_id);
            if let Some(&i) = merged.get(&key) {
                links[i].cables += 1;
                return;
            }
            merged.insert(key, links.len());
            l.b.desc = boxes[l.b.box_id].label.clone();
            l.b.guid = "-".into();
        }
        l.id = links.len();
        links.push(l);
    };
    for cable in subnet.links() {
        let (Some(na), Some(nb)) = (subnet.node(cable.a.guid), subnet.node(cable.b.guid)) else {
            continue;
        };
        let (Some(pa), Some(pb)) = (na.port(cable.a.port), nb.port(cable.b.port)) else {
            continue;
        };
        let (Some(&ba), Some(&bb)) = (box_of.get(&na.guid), box_of.get(&nb.guid)) else {
            continue;
        };
        let ea = end(ba, na, pa, counters);
        let eb = end(bb, nb, pb, counters);
        // The upper tier's end first.
        let (ea, eb) = match boxes[ba].tier >= boxes[bb].tier {
            true => (ea, eb),
            false => (eb, ea),
        };
        let found = on_ends(&on_port, [cable.a, cable.b]);
        let down = [pa, pb].iter().any(|p| p.state == Some(PortState::Down));
        let l = view(ea, eb, health_of(&found, down), &found, [cable.a, cable.b]);
        add(&mut links, l);
    }
    // Expected cables that are not there.
    if let Some(e) = expected {
        for d in compare(e, subnet) {
            let CablingDiff::Missing { a, b } = d else {
                continue;
            };
            let (Some((na, pa)), Some((nb, pb))) = (locate(subnet, &a), locate(subnet, &b)) else {
                continue;
            };
            let (Some(&ba), Some(&bb)) = (box_of.get(&na.guid), box_of.get(&nb.guid)) else {
                continue;
            };
            let (ea, eb) = (end(ba, na, pa, counters), end(bb, nb, pb, counters));
            let (ea, eb) = match boxes[ba].tier >= boxes[bb].tier {
                true => (ea, eb),
                false => (eb, ea),
            };
            let refs = [
                PortRef {
                    guid: na.guid,
                    port: pa.num,
                },
                PortRef {
                    guid: nb.guid,
                    port: pb.num,
                },
            ];
            let found = on_ends(&on_port, refs);
            let mut l = view(ea, eb, Health::Down, &found, refs);
            l.why
                .insert(0, format!("expected cable {a} - {b} is not there"));
            add(&mut links, l);
        }
    }
    for l in &links {
        for b in [l.a.box_id, l.b.box_id] {
            boxes[b].health = boxes[b].health.max(l.health);
        }
    }
    let linked: Vec<&Finding> = on_port.values().flatten().copied().collect();
    let other_findings = findings
        .iter()
        .filter(|f| !linked.iter().any(|g| std::ptr::eq(*g, *f)))
        .map(line)
        .collect();
    by_tier.reverse();
    let count = |k: NodeKind| subnet.nodes().iter().filter(|n| n.kind == k).count();
    Picture {
        schema: SCHEMA,
        tiers: by_tier,
        boxes,
        links,
        other_findings,
        counts: Counts {
            nodes: subnet.nodes().len(),
            switches: count(NodeKind::Switch),
            cas: count(NodeKind::Ca),
            cables: subnet.links().count(),
        },
        collapse_over: opts.collapse_over,
    }
}

/// A link's health from the findings on its ends and whether a port of it
/// is Down: the one function that decides (see the module's documentation).
pub fn health_of(findings: &[&Finding], down: bool) -> Health {
    let mut h = if down { Health::Down } else { Health::Ok };
    for f in findings {
        if let Some(by) = link_health(f.code) {
            h = h.max(by);
        }
    }
    h
}

/// What a finding of `code` says about the link it names; None for a code
/// that is not about a link (the SM, LIDs, GUIDs).
pub fn link_health(code: Code) -> Option<Health> {
    Some(match code {
        Code::F003 | Code::F016 => Health::Down,
        Code::F004 | Code::F005 | Code::F006 | Code::F007 => Health::Errors,
        Code::F001 | Code::F002 | Code::F017 | Code::F018 => Health::Degraded,
        _ => return None,
    })
}

/// Each node's tier: CAs 0, a switch its distance from the nearest CA.
pub fn tiers(subnet: &Subnet) -> HashMap<u64, usize> {
    let mut dist: HashMap<u64, usize> = HashMap::new();
    let mut queue = VecDeque::new();
    for n in subnet.nodes().iter().filter(|n| n.kind == NodeKind::Ca) {
        dist.insert(n.guid, 0);
        queue.push_back(n.guid);
    }
    while let Some(g) = queue.pop_front() {
        let d = dist[&g];
        let Some(n) = subnet.node(g) else { continue };
        for r in n.ports.iter().filter_map(|p| p.remote) {
            let Some(m) = subnet.node(r.guid) else {
                continue;
            };
            if m.kind != NodeKind::Ca && !dist.contains_key(&m.guid) {
                dist.insert(m.guid, d + 1);
                queue.push_back(m.guid);
            }
        }
    }
    let top = dist.values().copied().max().unwrap_or(0);
    for n in subnet.nodes() {
        dist.entry(n.guid).or_insert(top + 1);
    }
    dist
}

fn node_box(id: usize, n: &Node, tier: usize) -> NodeBox {
    NodeBox {
        id,
        label: if n.desc.trim().is_empty() {
            format!("{:#018x}", n.guid)
        } else {
            n.desc.clone()
        },
        kind: match n.kind {
            NodeKind::Ca => "ca",
            NodeKind::Switch => "switch",
            NodeKind::Router => "router",
        },
        guid: Some(format!("{:#018x}", n.guid)),
        tier,
        hosts: 1,
        health: Health::Ok,
    }
}

fn end(box_id: usize, n: &Node, p: &Port, counters: Option<&Counters>) -> LinkEnd {
    let errors = counters
        .and_then(|c| {
            c.ports
                .iter()
                .find(|q| q.node_guid == n.guid && q.port == p.num)
        })
        .map(|q| q.errors().map(|(k, v)| (k.to_string(), v)).collect())
        .unwrap_or_default();
    LinkEnd {
        box_id,
        desc: n.desc.clone(),
        guid: format!("{:#018x}", n.guid),
        port: p.num,
        width: p.width.active.map_or("-".into(), |w| w.name().into()),
        speed: p.speed.active.map_or("-".into(), |s| s.name().into()),
        state: p.state.map_or("-".into(), |s| format!("{s:?}")),
        errors,
    }
}

fn guid_of(e: &LinkEnd) -> u64 {
    u64::from_str_radix(e.guid.trim_start_matches("0x"), 16).unwrap_or(0)
}

fn view(
    a: LinkEnd,
    b: LinkEnd,
    health: Health,
    found: &[&Finding],
    refs: [PortRef; 2],
) -> LinkView {
    let marks: Vec<String> = refs
        .iter()
        .map(|r| format!("({:#018x}) port {}", r.guid, r.port))
        .collect();
    let evidence = found
        .iter()
        .flat_map(|f| &f.evidence)
        .filter(|e| marks.iter().any(|m| on_port_path(&e.path, m)))
        .map(|e| (e.path.clone(), e.value.clone()))
        .collect();
    LinkView {
        id: 0,
        a,
        b,
        cables: 1,
        health,
        why: found.iter().map(|f| line(f)).collect(),
        evidence,
    }
}

/// `leaf1 (0x…) port 3 PortCounters.X` names port 3, not port 30.
fn on_port_path(path: &str, mark: &str) -> bool {
    path.match_indices(mark).any(|(i, _)| {
        !path[i + mark.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

fn line(f: &Finding) -> String {
    format!("{} {}", f.code.as_str(), f.message)
}

/// The findings on either of two ports, each once.
fn on_ends<'a>(
    on_port: &BTreeMap<PortRef, Vec<&'a Finding>>,
    refs: [PortRef; 2],
) -> Vec<&'a Finding> {
    let mut found: Vec<&Finding> = Vec::new();
    for f in refs.iter().filter_map(|r| on_port.get(r)).flatten() {
        if !found.iter().any(|g| std::ptr::eq(*g, *f)) {
            found.push(f);
        }
    }
    found
}

/// The ports each link finding's evidence names: `(0x<16 hex>) port <n>`.
fn findings_by_port(findings: &[Finding]) -> BTreeMap<PortRef, Vec<&Finding>> {
    let mut out: BTreeMap<PortRef, Vec<&Finding>> = BTreeMap::new();
    for f in findings.iter().filter(|f| link_health(f.code).is_some()) {
        for e in &f.evidence {
            for r in ports_named(&e.path) {
                let v = out.entry(r).or_default();
                if !v.iter().any(|g| std::ptr::eq(*g, f)) {
                    v.push(f);
                }
            }
        }
    }
    out
}

fn ports_named(text: &str) -> Vec<PortRef> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("(0x") {
        let rest = &text[i + 3..];
        let Some(hex) = rest.get(..16) else { continue };
        let Ok(guid) = u64::from_str_radix(hex, 16) else {
            continue;
        };
        let Some(tail) = rest[16..].strip_prefix(") port ") else {
            continue;
        };
        let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(port) = digits.parse::<u8>() {
            out.push(PortRef { guid, port });
        }
    }
    out
}

/// The node and port an expected end names, when present.
fn locate<'a>(s: &'a Subnet, e: &End) -> Option<(&'a Node, &'a Port)> {
    let n = match &e.node {
        NodeKey::Guid(g) => s.node(*g)?,
        NodeKey::Desc(d) => s.nodes().iter().find(|n| &n.desc == d)?,
    };
    Some((n, n.port(e.port)?))
}

#[cfg(test)]
mod tests;
