//! The pairwise report (`rdmakit fleet pairwise`): the verdict, the screening
//! matrix as a heat map (RC WRITE bandwidth per directed pair, requester rows,
//! responder columns) with the faults outlined — a slow node's row and column, a
//! slow link's two cells — the latency matrix when it was measured, the nodes'
//! scores and the re-measurements. The pairwise report (schema
//! `rdmakit.pairwise/v1`) is the embedded data, as `--json` prints it.

use std::fmt::Write as _;

use rdmakit_fleet::pairwise::report::{Cell, Fault, Mode, PairwiseReport, Phase, Verdict};

use crate::html::{esc, num, Page};
use crate::plot::{self, HeatMap};
use crate::{Meta, ReportError};

fn fault_text(r: &PairwiseReport, f: &Fault) -> String {
    match f {
        Fault::Node { node } => match r.nodes.iter().find(|n| &n.name == node) {
            Some(n) => format!(
                "node {}: slow with {} of {} partners (score {} MB/s against the fabric's \
                 median {}, z {})",
                n.name,
                n.slow_partners,
                n.partners,
                n.median_mbs.map_or("-".into(), |m| num(m, 0)),
                num(r.matrix.node_median_mbs, 0),
                num(n.z, 1)
            ),
            None => format!("node {node}"),
        },
        Fault::Link { nodes } => {
            let cells: Vec<String> = screen(r)
                .filter(|c| {
                    (c.from == nodes[0] && c.to == nodes[1])
                        || (c.from == nodes[1] && c.to == nodes[0])
                })
                .map(|c| format!("{} → {} {} MB/s", c.from, c.to, num(c.mbs, 0)))
                .collect();
            format!(
                "link {} ↔ {}: slow together while both are fine with everyone else ({}; \
                 fabric median {} MB/s)",
                nodes[0],
                nodes[1],
                cells.join(", "),
                num(r.matrix.median_mbs, 0)
            )
        }
    }
}

fn screen(r: &PairwiseReport) -> impl Iterator<Item = &Cell> {
    r.cells.iter().filter(|c| c.phase == Phase::Screen)
}

/// `[row][column]` of the screening cells by node index; the last one wins.
fn grid<F: Fn(&Cell) -> Option<f64>>(r: &PairwiseReport, f: F) -> Vec<Vec<Option<f64>>> {
    let n = r.nodes.len();
    let idx = |name: &str| r.nodes.iter().position(|x| x.name == name);
    let mut g = vec![vec![None; n]; n];
    for c in screen(r) {
        if let (Some(a), Some(b)) = (idx(&c.from), idx(&c.to)) {
            g[a][b] = f(c);
        }
    }
    g
}

/// The page of a pairwise run.
///
/// # Errors
/// A plot that could not be drawn, or data that would not serialize.
pub fn render(r: &PairwiseReport, meta: &Meta) -> Result<String, ReportError> {
    let pairs = r.screen_pairs();
    let title = format!(
        "rdmakit fleet pairwise: {} nodes, {}",
        r.nodes.len(),
        r.mode.describe(),
    );
    let sizes: Vec<String> = r
        .settings
        .bw_sizes
        .iter()
        .map(|s| plot::size_label(*s as f64))
        .collect();
    let subtitle = format!(
        "{pairs} pairs in {} screening rounds, {} s; RC WRITE best of {} bytes, {} s each; \
         path MTU {}",
        r.rounds.iter().filter(|t| t.phase == Phase::Screen).count(),
        num(r.seconds, 1),
        sizes.join(", "),
        num(r.settings.bw_seconds, 1),
        r.settings.mtu
    );
    let mut page = Page::new(&title, &subtitle);
    page.push(&verdict(r));
    page.push(&matrices(r)?);
    page.push(&nodes(r));
    page.push(&confirmations(r));
    page.push(&failed(r));
    page.finish("pairwise", serde_json::to_value(r)?, meta)
}

fn verdict(r: &PairwiseReport) -> String {
    let mut s = String::from("<section id=\"verdict\">\n<h2>Verdict</h2>\n");
    for u in &r.unreachable {
        let _ = writeln!(
            s,
            "<p><span class=\"badge error\">unreachable</span><code>{}</code>: {}</p>",
            esc(&u.agent),
            esc(&u.error)
        );
    }
    if let Some(why) = &r.inconclusive {
        let _ = writeln!(
            s,
            "<p><span class=\"badge error\">no verdict</span>{}</p>",
            esc(why)
        );
    } else if r.faults.is_empty() {
        let _ = writeln!(
            s,
            "<p><span class=\"badge pass\">no fault</span>{}</p>",
            if r.unreachable.is_empty() {
                "Every pair is in line with the fabric."
            } else {
                "No fault among the agents that answered; some did not (above)."
            }
        );
    } else {
        s.push_str("<ul class=\"reasons\">\n");
        for f in &r.faults {
            let _ = writeln!(
                s,
                "<li><span class=\"badge error\">{}</span>{}</li>",
                match f {
                    Fault::Node { .. } => "slow node",
                    Fault::Link { .. } => "slow link",
                },
                esc(&fault_text(r, f))
            );
        }
        s.push_str("</ul>\n");
    }
    s.push_str("</section>\n");
    s
}

fn matrices(r: &PairwiseReport) -> Result<String, ReportError> {
    let mut s = String::from("<section id=\"matrix\">\n<h2>Matrix</h2>\n");
    if r.nodes.is_empty() {
        s.push_str("<p class=\"note\">No agent answered: no matrix.</p>\n</section>\n");
        return Ok(s);
    }
    let idx = |name: &str| r.nodes.iter().position(|x| x.name == name);
    let mut outline_cells = Vec::new();
    let mut outline_lines = Vec::new();
    for f in &r.faults {
        match f {
            Fault::Node { node } => outline_lines.extend(idx(node)),
            Fault::Link { nodes } => {
                if let (Some(a), Some(b)) = (idx(&nodes[0]), idx(&nodes[1])) {
                    outline_cells.push((a, b));
                    outline_cells.push((b, a));
                }
            }
        }
    }
    let labels: Vec<String> = r.nodes.iter().map(|n| n.name.clone()).collect();
    let bw = plot::heat_map(&HeatMap {
        id: "pairwise-bandwidth",
        title: "RC WRITE bandwidth, MB/s",
        labels: labels.clone(),
        values: grid(r, |c| Some(c.mbs)),
        unit: "MB/s",
        digits: 0,
        low_is_bad: true,
        log: false,
        outline_cells: outline_cells.clone(),
        outline_lines: outline_lines.clone(),
    })?;
    let m = &r.matrix;
    let _ = writeln!(
        s,
        "<div class=\"plots\"><figure>{bw}<figcaption>Best average over the sizes, MB/s \
         (2^20 bytes); the row writes to the column; · not measured{}. Framed in a thick dark \
         line: the faults. Node scores: median {} MB/s, MAD {}; pairs below {} MB/s are slow; a cell \
         below {} of its nodes' scores is low.</figcaption></figure>",
        if r.mode == Mode::Quick {
            " (a ring measures neighbours only)"
        } else {
            ""
        },
        num(m.node_median_mbs, 0),
        num(m.node_mad_mbs, 0),
        num(m.slow_below_mbs, 0),
        num(m.link_below_residual, 2)
    );
    if screen(r).any(|c| c.lat.is_some()) {
        let lat = plot::heat_map(&HeatMap {
            id: "pairwise-latency",
            title: "RC SEND latency, usec (median)",
            labels,
            values: grid(r, |c| c.lat.map(|l| l.t_typical_us)),
            unit: "usec",
            // Tens of milliseconds on a loaded soft NIC, microseconds on hardware.
            digits: if screen(r).any(|c| c.lat.is_some_and(|l| l.t_typical_us >= 1000.0)) {
                0
            } else {
                1
            },
            low_is_bad: false,
            log: true,
            outline_cells,
            outline_lines,
        })?;
        let _ = writeln!(
            s,
            "<figure>{lat}<figcaption>{}-byte messages, the median half round trip; the row \
             sends; colors on a log scale.</figcaption></figure>",
            r.settings.lat_size
        );
    }
    s.push_str("</div>\n</section>\n");
    Ok(s)
}

fn nodes(r: &PairwiseReport) -> String {
    let mut s = String::from(
        "<section id=\"nodes\">\n<h2>Nodes</h2>\n<table>\n<tr><th>node</th><th>agent</th>\
         <th>device</th><th class=\"num\">port rate [MB/s]</th><th class=\"num\">MTU</th>\
         <th class=\"num\">score [MB/s]</th><th class=\"num\">z</th>\
         <th class=\"num\">slow partners</th><th>version</th></tr>\n",
    );
    for n in &r.nodes {
        let faulty = r
            .faults
            .iter()
            .any(|f| matches!(f, Fault::Node { node } if node == &n.name));
        let _ = writeln!(
            s,
            "<tr class=\"row-{}\"><td><b>{}</b></td><td><code>{}</code></td><td>{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num{}\">{}</td><td class=\"num\">{} of {}</td><td>{}</td></tr>",
            if faulty { "fail" } else { "pass" },
            esc(&n.name),
            esc(&n.addr),
            esc(&n.device),
            n.port_rate_mbs.map_or("-".into(), |p| num(p, 0)),
            n.mtu.map_or("-".into(), |m| m.to_string()),
            n.median_mbs.map_or("-".into(), |m| num(m, 0)),
            if n.significant { " warning" } else { "" },
            num(n.z, 2),
            n.slow_partners,
            n.partners,
            esc(&n.version)
        );
    }
    s.push_str("</table>\n</section>\n");
    s
}

fn confirmations(r: &PairwiseReport) -> String {
    if r.confirmations.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<section id=\"confirmations\">\n<h2>Suspects re-measured against healthy pairs</h2>\n\
         <table>\n<tr><th>suspect</th><th>verdict</th><th class=\"num\">pass</th>\
         <th>cell</th><th class=\"num\">MB/s</th><th class=\"num\">healthy pairs [MB/s]</th>\
         <th class=\"num\">ratio</th></tr>\n",
    );
    for c in &r.confirmations {
        let (class, word) = match c.verdict {
            Verdict::Confirmed => ("error", "confirmed"),
            Verdict::Dismissed => ("pass", "dismissed (noise)"),
            Verdict::Unconfirmed => ("warning", "not re-measured"),
        };
        let head = format!(
            "<td rowspan=\"{}\">{}</td><td rowspan=\"{}\"><span class=\"badge {class}\">{word}\
             </span></td>",
            c.checks.len().max(1),
            esc(&c.suspect.to_string()),
            c.checks.len().max(1)
        );
        if c.checks.is_empty() {
            let _ = writeln!(s, "<tr>{head}<td colspan=\"5\">-</td></tr>");
        }
        for (i, k) in c.checks.iter().enumerate() {
            let _ = writeln!(
                s,
                "<tr>{}<td class=\"num\">{}</td><td>{} {} {}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                if i == 0 { head.as_str() } else { "" },
                k.pass,
                esc(&k.from),
                if k.either_way { "↔" } else { "→" },
                esc(&k.to),
                num(k.mbs, 0),
                num(k.control_mbs, 0),
                num(k.ratio, 2)
            );
        }
    }
    s.push_str("</table>\n</section>\n");
    s
}

fn failed(r: &PairwiseReport) -> String {
    let failed: Vec<&Cell> = r.cells.iter().filter(|c| c.error.is_some()).collect();
    if failed.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<section id=\"failed\">\n<h2>Failed tests</h2>\n<table>\n<tr><th>cell</th>\
         <th>phase</th><th>error</th></tr>\n",
    );
    for c in failed {
        let _ = writeln!(
            s,
            "<tr class=\"row-fail\"><td>{} → {}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.from),
            esc(&c.to),
            match c.phase {
                Phase::Screen => "screening",
                Phase::Suspect => "suspect",
                Phase::Control => "control",
            },
            esc(c.error.as_deref().unwrap_or(""))
        );
    }
    s.push_str("</table>\n</section>\n");
    s
}
