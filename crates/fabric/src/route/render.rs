//! A route as text: ibtracert's shape ([`text`]) and one line ([`compact`]).

use std::fmt::Write as _;

use super::{End, Route};
use crate::topology::NodeKind;

fn kind(k: NodeKind) -> &'static str {
    match k {
        NodeKind::Ca => "ca",
        NodeKind::Switch => "switch",
        NodeKind::Router => "router",
    }
}

fn end(e: &End) -> String {
    format!(
        "{} {{{:#018x}}} portnum {} lid {} \"{}\"",
        kind(e.kind),
        e.port_guid,
        e.port,
        e.lid,
        e.desc
    )
}

/// The route as ibtracert prints it: `From ...`, one `[out] -> ...` line a
/// hop, `To ...`.
pub fn text(r: &Route) -> String {
    let mut s = format!("From {}\n", end(&r.src));
    let mut prev_out = match r.src.kind {
        NodeKind::Switch => None,
        _ => Some(r.src.port),
    };
    for h in &r.hops {
        if let Some(out) = prev_out {
            let _ = writeln!(
                s,
                "[{out}] -> switch port {{{:#018x}}}[{}] lid {} \"{}\"",
                h.guid, h.in_port, h.lid, h.desc
            );
        }
        prev_out = Some(h.out_port);
    }
    if r.dst.kind != NodeKind::Switch {
        if let Some(out) = prev_out {
            let _ = writeln!(
                s,
                "[{out}] -> {} port {{{:#018x}}}[{}] lid {} \"{}\"",
                kind(r.dst.kind),
                r.dst.port_guid,
                r.dst.port,
                r.dst.lid,
                r.dst.desc
            );
        }
    }
    let _ = writeln!(s, "To {}", end(&r.dst));
    s
}

/// The switches on one line, each with its in and out port:
/// `leaf1[1→5] → spine1[1→3] → leaf2[5→1]`.
pub fn compact(r: &Route) -> String {
    let hops: Vec<String> = r
        .hops
        .iter()
        .map(|h| format!("{}[{}→{}]", h.desc, h.in_port, h.out_port))
        .collect();
    match hops.is_empty() {
        true => "direct".to_string(),
        false => hops.join(" → "),
    }
}
