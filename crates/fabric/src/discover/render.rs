//! A discovery for a reader: the counts, then each node's links as a table,
//! then what could not be read. (`--json` is the [`Discovery`] itself;
//! `--topology` is [`crate::ibnetdiscover::write`].)

use std::fmt::Write as _;

use comfy_table::{presets, ContentArrangement, Table};

use super::Discovery;
use crate::topology::{Node, NodeKind, Port};

/// The summary: `N switches, M CAs, L links` (and routers, Down ports),
/// one table row per port with a cable (node, port, LID, width, speed,
/// state, peer and its port), then every unread route and why the walk
/// stopped, if it did.
pub fn summary(d: &Discovery) -> String {
    let s = &d.subnet;
    let count = |k: NodeKind| s.nodes().iter().filter(|n| n.kind == k).count();
    let down = s
        .nodes()
        .iter()
        .flat_map(|n| &n.ports)
        .filter(|p| p.remote.is_none())
        .count();
    let mut out = String::new();
    let _ = write!(
        out,
        "{} switches, {} CAs, ",
        count(NodeKind::Switch),
        count(NodeKind::Ca)
    );
    if count(NodeKind::Router) > 0 {
        let _ = write!(out, "{} routers, ", count(NodeKind::Router));
    }
    let _ = writeln!(
        out,
        "{} links; {down} ports without a peer; {} SMPs",
        s.links().count(),
        d.mads
    );
    let mut t = Table::new();
    t.load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header([
            "Node",
            "Type",
            "GUID",
            "Port",
            "LID",
            "Link",
            "State",
            "Peer",
            "Peer port",
        ]);
    for n in s.nodes() {
        for p in n.ports.iter().filter(|p| p.remote.is_some()) {
            t.add_row(row(d, n, p));
        }
    }
    if s.links().next().is_some() {
        let _ = writeln!(out, "{}", trimmed(&t));
    }
    for u in &d.unread {
        let path: Vec<String> = u.path.iter().map(u8::to_string).collect();
        let _ = writeln!(
            out,
            "unreachable: {} by route [{}]: {}",
            u.what,
            path.join(","),
            u.error
        );
    }
    if let Some(why) = &d.stopped {
        let _ = writeln!(out, "incomplete: {why}");
    }
    out
}

fn row(d: &Discovery, n: &Node, p: &Port) -> Vec<String> {
    let kind = match n.kind {
        NodeKind::Ca => "CA",
        NodeKind::Switch => "Switch",
        NodeKind::Router => "Router",
    };
    let link = format!(
        "{} {}",
        p.width.active.map_or("?", |w| w.name()),
        p.speed.active.map_or("?", |s| s.name())
    );
    let state = match (p.state, p.phys_state) {
        (Some(s), _) => format!("{s:?}"),
        (None, _) => "?".into(),
    };
    let (peer, peer_port) = match p.remote {
        Some(r) => (
            d.subnet
                .node(r.guid)
                .map_or_else(|| format!("{:#018x}", r.guid), |m| m.desc.clone()),
            r.port.to_string(),
        ),
        None => (String::new(), String::new()),
    };
    vec![
        n.desc.clone(),
        kind.into(),
        format!("{:#018x}", n.guid),
        p.num.to_string(),
        n.lid_of(p).to_string(),
        link,
        state,
        peer,
        peer_port,
    ]
}

/// The table's lines without the padding comfy-table leaves at their ends.
fn trimmed(t: &Table) -> String {
    let lines: Vec<String> = t.lines().map(|l| l.trim_end().to_string()).collect();
    lines.join("\n")
}
