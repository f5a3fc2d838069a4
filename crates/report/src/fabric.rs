//! The fabric page (`rdmakit fabric discover --html`, `fabric check
//! --html`): the subnet as tiers of boxes — spines on top, leaves below,
//! hosts at the bottom — with a line for each cable coloured by its health,
//! the faulty ones framed and numbered, and listed beside the picture with
//! their evidence. Hovering a line shows both ends (description, GUID,
//! port, width, speed, state) and their error counters; hovering a box, the
//! node. No script: hovers are SVG `<title>`s.
//!
//! Everything drawn comes from [`rdmakit_fabric::view::Picture`] (tiers,
//! host groups, each link's health and evidence), which is the embedded
//! data; this module only places boxes and draws. A switch's hosts stand
//! in a grid of two columns under it. The picture shrinks to fit its frame
//! down to 70 % and then scrolls sideways rather than shrink to unreadable;
//! hosts are already collapsed per switch in the picture, so 500 nodes are
//! a few dozen boxes a tier.

use std::collections::HashMap;
use std::fmt::Write as _;

use rdmakit_fabric::view::{Health, LinkEnd, LinkView, Picture};

use crate::html::{esc, Page};
use crate::{Meta, ReportError};

/// A box's size and the gaps around it, in SVG units (pixels at 100 %).
const BOX_W: f64 = 112.0;
const BOX_H: f64 = 30.0;
const GAP: f64 = 16.0;
const ROW: f64 = 150.0;
const MARGIN: f64 = 24.0;
/// Characters of a label shown in a box (its hover has the whole).
const LABEL_CHARS: usize = 15;
/// The smallest scale the picture shrinks to fit its frame; past it, the
/// frame scrolls.
const MIN_SCALE: f64 = 0.7;
/// Boxes a row in the grid of hosts under a switch.
const HOST_COLUMNS: usize = 2;

/// The page of `picture`.
///
/// # Errors
/// [`ReportError::Json`] when the picture cannot be embedded.
pub fn render(picture: &Picture, title: &str, meta: &Meta) -> Result<String, ReportError> {
    // The worst first.
    let mut faulty: Vec<&LinkView> = picture
        .links
        .iter()
        .filter(|l| l.health != Health::Ok)
        .collect();
    faulty.sort_by_key(|l| (std::cmp::Reverse(l.health), l.id));
    let c = &picture.counts;
    let sub = format!(
        "{} nodes ({} switches, {} CAs), {} cables; {} faulty link{}",
        c.nodes,
        c.switches,
        c.cas,
        c.cables,
        faulty.len(),
        if faulty.len() == 1 { "" } else { "s" }
    );
    let mut page = Page::new(title, &sub);
    page.push("<section>\n<h2>Fabric</h2>\n");
    page.push(&legend(picture));
    page.push("<div class=\"fabric-view\">\n<div class=\"fabric-wrap\">\n");
    page.push(&svg(picture, &faulty));
    page.push("</div>\n");
    page.push(&fault_list(&faulty));
    page.push("</div>\n</section>\n");
    if !picture.other_findings.is_empty() {
        page.push("<section>\n<h2>Findings on no link</h2>\n<ul class=\"reasons\">\n");
        for f in &picture.other_findings {
            page.push(&format!("<li>{}</li>\n", esc(f)));
        }
        page.push("</ul>\n</section>\n");
    }
    page.finish("fabric", serde_json::to_value(picture)?, meta)
}

fn colour(h: Health) -> &'static str {
    match h {
        Health::Ok => "#9aa5b1",
        Health::Degraded => "#e69500",
        Health::Errors => "#d7301f",
        Health::Down => "#6a1b9a",
    }
}

fn health_name(h: Health) -> &'static str {
    match h {
        Health::Ok => "ok",
        Health::Degraded => "degraded",
        Health::Errors => "errors",
        Health::Down => "down",
    }
}

fn legend(p: &Picture) -> String {
    let mut s = String::from("<p class=\"note legend\">");
    for (h, what) in [
        (Health::Ok, "healthy"),
        (Health::Degraded, "narrower or slower than both ends allow"),
        (Health::Errors, "error counters over their thresholds"),
        (Health::Down, "down, or an expected cable missing (dashed)"),
    ] {
        let _ = write!(
            s,
            "<span class=\"swatch\" style=\"background:{}\"></span>{} ",
            colour(h),
            esc(what)
        );
    }
    let _ = writeln!(
        s,
        "· the hosts of a switch with more than {} are one box; a thicker line is several \
         cables; hover a line or a box for its ports and counters.</p>",
        p.collapse_over
    );
    s
}

/// Where each box is (its top-left corner), and the picture's size.
///
/// The bottom tier's boxes stand in a small grid under the switch they are
/// cabled to (up to [`HOST_COLUMNS`] a row), and that switch's slot in its
/// row is as wide as its grid, so a leaf's hosts sit under it rather than
/// in one long row. Other rows are spread evenly and centred.
fn place(p: &Picture) -> (HashMap<usize, (f64, f64)>, f64, f64) {
    let step = BOX_W + GAP;
    let rows = p.tiers.len();
    let mut at = HashMap::new();
    // The bottom row's boxes by the box above they hang from.
    let bottom: &[usize] = p.tiers.last().map_or(&[], Vec::as_slice);
    let above: &[usize] = match rows {
        0 | 1 => &[],
        n => &p.tiers[n - 2],
    };
    let mut hang: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut loose: Vec<usize> = Vec::new();
    for &b in bottom {
        let parent = p.links.iter().find_map(|l| match (l.a.box_id, l.b.box_id) {
            (x, y) if y == b && above.contains(&x) => Some(x),
            (x, y) if x == b && above.contains(&y) => Some(y),
            _ => None,
        });
        match parent {
            Some(x) => hang.entry(x).or_default().push(b),
            None => loose.push(b),
        }
    }
    let cols = |n: usize| n.clamp(1, HOST_COLUMNS);
    let grid_rows = |n: usize| n.div_ceil(cols(n)).max(1);
    // Slots of the row above the bottom: as wide as the grid under each.
    let slot = |x: usize| hang.get(&x).map_or(1, |v| cols(v.len())) as f64 * step;
    let pair_width: f64 = above.iter().map(|x| slot(*x)).sum::<f64>() + loose.len() as f64 * step;
    let widest = p
        .tiers
        .iter()
        .take(rows.saturating_sub(2))
        .map(|t| t.len() as f64 * step)
        .fold(pair_width, f64::max);
    let width = (2.0 * MARGIN + widest - GAP).max(320.0);
    let y_of = |row: usize| MARGIN + row as f64 * ROW;
    // Rows above those two: evenly, centred.
    for (row, tier) in p.tiers.iter().enumerate().take(rows.saturating_sub(2)) {
        let x0 = (width - (tier.len() as f64 * step - GAP)) / 2.0;
        for (i, b) in tier.iter().enumerate() {
            at.insert(*b, (x0 + i as f64 * step, y_of(row)));
        }
    }
    let mut deepest = 1;
    if rows >= 2 {
        let mut x = (width - (pair_width - GAP)) / 2.0;
        for &parent in above {
            let w = slot(parent);
            at.insert(parent, (x + (w - step) / 2.0, y_of(rows - 2)));
            if let Some(kids) = hang.get(&parent) {
                let c = cols(kids.len());
                deepest = deepest.max(grid_rows(kids.len()));
                for (i, k) in kids.iter().enumerate() {
                    let gx = x + (i % c) as f64 * step;
                    let gy = y_of(rows - 1) + (i / c) as f64 * (BOX_H + GAP);
                    at.insert(*k, (gx, gy));
                }
            }
            x += w;
        }
        for (i, b) in loose.iter().enumerate() {
            at.insert(*b, (x + i as f64 * step, y_of(rows - 1)));
        }
    } else {
        let x0 = (width - (bottom.len() as f64 * step - GAP)) / 2.0;
        for (i, b) in bottom.iter().enumerate() {
            at.insert(*b, (x0 + i as f64 * step, y_of(0)));
        }
    }
    let height =
        2.0 * MARGIN + (rows.max(1) - 1) as f64 * ROW + deepest as f64 * (BOX_H + GAP) - GAP;
    (at, width, height)
}

fn svg(p: &Picture, faulty: &[&LinkView]) -> String {
    let (at, width, height) = place(p);
    let pos = |b: usize| at.get(&b).copied().unwrap_or((0.0, 0.0));
    // Anchors: each box's links spread along its bottom (to a lower box) or
    // top (to an upper one), ordered by the other end's x.
    let mut sides: HashMap<(usize, bool), Vec<(f64, usize)>> = HashMap::new();
    for l in &p.links {
        let (a, b) = (l.a.box_id, l.b.box_id);
        let (ya, yb) = (pos(a).1, pos(b).1);
        sides
            .entry((a, ya <= yb))
            .or_default()
            .push((pos(b).0, l.id));
        sides
            .entry((b, yb < ya))
            .or_default()
            .push((pos(a).0, l.id));
    }
    let mut anchor: HashMap<(usize, usize), f64> = HashMap::new();
    for ((b, _), v) in sides.iter_mut() {
        v.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        let m = v.len() as f64;
        for (k, (_, id)) in v.iter().enumerate() {
            let x = pos(*b).0 + (k as f64 + 1.0) / (m + 1.0) * BOX_W;
            anchor.insert((*b, *id), x);
        }
    }
    let ends = |l: &LinkView| {
        let (a, b) = (l.a.box_id, l.b.box_id);
        let (pa, pb) = (pos(a), pos(b));
        let xa = anchor
            .get(&(a, l.id))
            .copied()
            .unwrap_or(pa.0 + BOX_W / 2.0);
        let xb = anchor
            .get(&(b, l.id))
            .copied()
            .unwrap_or(pb.0 + BOX_W / 2.0);
        let (ya, yb) = match pa.1 < pb.1 {
            true => (pa.1 + BOX_H, pb.1),
            false if pa.1 > pb.1 => (pa.1, pb.1 + BOX_H),
            false => (pa.1 + BOX_H, pb.1 + BOX_H),
        };
        (xa, ya, xb, yb)
    };

    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg class=\"fabric\" width=\"{w:.0}\" \
         height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" style=\"width:100%;max-width:{w:.0}px;\
         min-width:{m:.0}px\" role=\"img\" aria-label=\"the fabric's switches, hosts and \
         cables\">",
        w = width,
        h = height,
        m = width * MIN_SCALE,
    );
    s.push_str("<g class=\"links\">\n");
    // Healthy links first, so faults are drawn over them.
    let mut order: Vec<&LinkView> = p.links.iter().collect();
    order.sort_by_key(|l| (l.health, l.id));
    for l in order {
        let (xa, ya, xb, yb) = ends(l);
        let d = if (ya - yb).abs() < 1.0 {
            format!(
                "M{xa:.1} {ya:.1} Q{:.1} {:.1} {xb:.1} {yb:.1}",
                (xa + xb) / 2.0,
                ya + 40.0
            )
        } else {
            format!("M{xa:.1} {ya:.1} L{xb:.1} {yb:.1}")
        };
        let widthpx = 1.5 + (l.cables as f64).log2().min(4.0);
        let dash = match l.health {
            Health::Down => " stroke-dasharray=\"6 4\"",
            _ => "",
        };
        let heavy = match l.health {
            Health::Ok => 0.0,
            _ => 1.5,
        };
        let _ = writeln!(
            s,
            "<g class=\"link health-{h}\" id=\"link-{id}\" data-health=\"{h}\"><title>{t}</title>\
             <path d=\"{d}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"{sw:.1}\"{dash}/>\
             <path d=\"{d}\" fill=\"none\" stroke=\"transparent\" stroke-width=\"10\"/></g>",
            h = health_name(l.health),
            id = l.id,
            t = esc(&hover(l)),
            c = colour(l.health),
            sw = widthpx + heavy,
        );
    }
    s.push_str("</g>\n<g class=\"boxes\">\n");
    for b in &p.boxes {
        let (x, y) = pos(b.id);
        let (fill, stroke) = match b.kind {
            "switch" | "router" => ("#e8eef7", "#4a6fa5"),
            "hosts" => ("#f1f5e9", "#6b8e23"),
            _ => ("#fafafa", "#7a7a7a"),
        };
        let ring = match b.health {
            Health::Ok => stroke,
            h => colour(h),
        };
        let label: String = if b.label.chars().count() > LABEL_CHARS {
            let mut t: String = b.label.chars().take(LABEL_CHARS - 1).collect();
            t.push('…');
            t
        } else {
            b.label.clone()
        };
        let title = match &b.guid {
            Some(g) => format!("{} ({}) {g}, tier {}", b.label, b.kind, b.tier),
            None => format!("{}: CAs collapsed under one switch", b.label),
        };
        let _ = writeln!(
            s,
            "<g class=\"node kind-{k} health-{h}\" id=\"box-{id}\"><title>{t}</title>\
             <rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{BOX_W}\" height=\"{BOX_H}\" rx=\"4\" \
             fill=\"{fill}\" stroke=\"{ring}\" stroke-width=\"1.5\"/>\
             <text x=\"{tx:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\" font-size=\"11\" \
             fill=\"#1f2328\">{l}</text></g>",
            k = b.kind,
            h = health_name(b.health),
            id = b.id,
            t = esc(&title),
            tx = x + BOX_W / 2.0,
            ty = y + BOX_H / 2.0 + 4.0,
            l = esc(&label),
        );
    }
    s.push_str("</g>\n<g class=\"frames\">\n");
    for (n, l) in faulty.iter().enumerate() {
        let (xa, ya, xb, yb) = ends(l);
        let (x0, x1) = (xa.min(xb) - 8.0, xa.max(xb) + 8.0);
        let (y0, y1) = (ya.min(yb) - 4.0, ya.max(yb) + 4.0);
        let (mx, my) = ((xa + xb) / 2.0, (ya + yb) / 2.0);
        let _ = writeln!(
            s,
            "<g class=\"frame health-{h}\" id=\"frame-{id}\" data-link=\"{id}\" data-fault=\"{k}\">\
             <title>{t}</title>\
             <rect x=\"{x0:.1}\" y=\"{y0:.1}\" width=\"{fw:.1}\" height=\"{fh:.1}\" rx=\"6\" \
             fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"/>\
             <circle cx=\"{mx:.1}\" cy=\"{my:.1}\" r=\"9\" fill=\"{c}\"/>\
             <text x=\"{mx:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\" font-size=\"11\" \
             fill=\"#fff\" font-weight=\"bold\">{k}</text></g>",
            h = health_name(l.health),
            id = l.id,
            k = n + 1,
            t = esc(&hover(l)),
            fw = x1 - x0,
            fh = y1 - y0,
            c = colour(l.health),
            ty = my + 4.0,
        );
    }
    s.push_str("</g>\n</svg>\n");
    s
}

/// `leaf1 port 3`, or the host group.
fn end_name(e: &LinkEnd) -> String {
    match e.port {
        0 => e.desc.clone(),
        p => format!("{} port {p}", e.desc),
    }
}

fn end_line(e: &LinkEnd) -> String {
    let mut s = format!(
        "{} ({}) {} {} {}",
        end_name(e),
        e.guid,
        e.width,
        e.speed,
        e.state
    );
    if !e.errors.is_empty() {
        let errs: Vec<String> = e.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = write!(s, "\n    errors: {}", errs.join(", "));
    }
    s
}

/// What hovering a line shows: both ends, their counters, why.
fn hover(l: &LinkView) -> String {
    let mut s = String::new();
    if l.cables > 1 {
        let _ = writeln!(s, "{} cables from {} to {}", l.cables, l.a.desc, l.b.desc);
    }
    let _ = write!(s, "{}\n  ⇄ {}", end_line(&l.a), end_line(&l.b));
    let _ = write!(s, "\nhealth: {}", health_name(l.health));
    for w in &l.why {
        let _ = write!(s, "\n{w}");
    }
    s
}

fn fault_list(faulty: &[&LinkView]) -> String {
    let mut s = String::from("<aside class=\"faults\">\n<h3>Faulty links</h3>\n");
    if faulty.is_empty() {
        s.push_str("<p class=\"note\">None: every link is up at the width and speed both ends allow, with no error counter over its threshold.</p>\n");
    } else {
        s.push_str("<ol class=\"fault-list\">\n");
    }
    for (n, l) in faulty.iter().enumerate() {
        let badge = match l.health {
            Health::Degraded => "warning",
            _ => "error",
        };
        let _ = write!(
            s,
            "<li class=\"fault finding sev-{badge}\" id=\"fault-{k}\" data-link=\"{id}\">\
             <div class=\"msg\"><span class=\"badge {badge}\">{h}</span>{a} ⇄ {b}</div>\
             <div class=\"meta mono\">{ga} · {gb}</div>",
            k = n + 1,
            id = l.id,
            h = health_name(l.health),
            a = esc(&end_name(&l.a)),
            b = esc(&end_name(&l.b)),
            ga = esc(&format!("{} {} {}", l.a.guid, l.a.width, l.a.speed)),
            gb = esc(&format!("{} {} {}", l.b.guid, l.b.width, l.b.speed)),
        );
        if !l.why.is_empty() {
            s.push_str("<ul class=\"reasons\">");
            for w in &l.why {
                let _ = write!(s, "<li>{}</li>", esc(w));
            }
            s.push_str("</ul>");
        }
        if !l.evidence.is_empty() {
            s.push_str("<table class=\"kv\">");
            for (k, v) in &l.evidence {
                let _ = write!(
                    s,
                    "<tr><td>{}</td><td class=\"mono\">{}</td></tr>",
                    esc(k),
                    esc(v)
                );
            }
            s.push_str("</table>");
        }
        s.push_str("</li>\n");
    }
    if !faulty.is_empty() {
        s.push_str("</ol>\n");
    }
    s.push_str("</aside>\n");
    s
}

#[cfg(test)]
mod tests;
