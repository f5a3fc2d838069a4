//! The pairwise report (`rdmakit fleet pairwise`): the verdict, the screening
//! matrix as a heat map (RC WRITE bandwidth per directed pair, requester rows,
//! responder columns) with the faults outlined — a slow node's row and column, a
//! slow link's two cells — the latency matrix when it was measured, the nodes'
//! scores and the re-measurements. The pairwise report (schema
//! `rdmakit.pairwise/v1`) is the embedded data, as `--json` prints it.
//!
//! The bandwidth colours follow the run's own judgement, not the spread of its
//! figures: green from halfway between the slow threshold and the fabric's
//! median node score up, amber to yellow between the threshold and there, red
//! below the threshold (`--relative` × the median node score, and under the port
//! floor when the port rate is known: `matrix.slow_below_mbs`) and for a cell the
//! run judged low for its two nodes. So a healthy fabric is green however its
//! figures spread, and a slow node's or link's cells are red. Latency is not
//! judged: its cells go from light to dark blue with their ratio to the median.

use std::fmt::Write as _;

use plotters::style::RGBColor;
use rdmakit_fleet::pairwise::report::{Cell, Fault, Mode, Outcome, PairwiseReport, Phase};
use rdmakit_fleet::stats::median;

use crate::html::{esc, num, Page};
use crate::plot::{self, HeatCell, HeatMap, Swatch, INK};
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
fn grid<T, F: Fn(&Cell) -> Option<T>>(r: &PairwiseReport, f: F) -> Vec<Vec<Option<T>>> {
    let n = r.nodes.len();
    let idx = |name: &str| r.nodes.iter().position(|x| x.name == name);
    let mut g: Vec<Vec<Option<T>>> = (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    for c in screen(r) {
        if let (Some(a), Some(b)) = (idx(&c.from), idx(&c.to)) {
            g[a][b] = f(c);
        }
    }
    g
}

const GREEN: RGBColor = RGBColor(102, 189, 99);
const YELLOW: RGBColor = RGBColor(254, 224, 139);
const AMBER: RGBColor = RGBColor(247, 148, 52);
const RED: RGBColor = RGBColor(215, 48, 39);
const UNJUDGED: RGBColor = RGBColor(205, 214, 226);
const PALE_BLUE: RGBColor = RGBColor(222, 235, 247);
const DARK_BLUE: RGBColor = RGBColor(8, 69, 148);
const WHITE: RGBColor = RGBColor(255, 255, 255);

/// `a` to `b` at `f` in 0..=1.
fn mix(a: RGBColor, b: RGBColor, f: f64) -> RGBColor {
    let f = if f.is_finite() {
        f.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let m = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * f).round() as u8;
    RGBColor(m(a.0, b.0), m(a.1, b.1), m(a.2, b.2))
}

/// The levels the bandwidth colours follow, all from the run's judgement: the
/// fabric's reference (the median node score), the slow threshold under it, and
/// halfway between them, where green begins.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Levels {
    pub median: f64,
    pub slow: f64,
    pub green: f64,
}

impl Levels {
    /// None when the run has no reference level (no verdict: most tests failed).
    pub(crate) fn of(r: &PairwiseReport) -> Option<Levels> {
        let (m, t) = (r.matrix.node_median_mbs, r.matrix.slow_below_mbs);
        (r.inconclusive.is_none() && m.is_finite() && t.is_finite() && m > 0.0 && t < m).then(
            || Levels {
                median: m,
                slow: t.max(0.0),
                green: (m + t.max(0.0)) / 2.0,
            },
        )
    }

    /// A cell's colour and what it means (`data-band`, the tooltip's words).
    pub(crate) fn judge(&self, mbs: f64, low: bool) -> (RGBColor, &'static str, &'static str) {
        if mbs.is_nan() || mbs < self.slow {
            (RED, "slow", "slow: below the slow threshold")
        } else if low {
            (RED, "slow", "low for its two nodes: a link suspect")
        } else if mbs < self.green {
            let f = (mbs - self.slow) / (self.green - self.slow);
            let fill = if f < 0.5 {
                mix(AMBER, YELLOW, f * 2.0)
            } else {
                mix(YELLOW, GREEN, (f - 0.5) * 2.0)
            };
            (
                fill,
                "low",
                "low: above the slow threshold, below the fabric",
            )
        } else {
            (GREEN, "ok", "in line with the fabric")
        }
    }
}

/// What decides the slow threshold: `--relative` × the median node score, or the
/// port floor where it is lower.
fn threshold_words(r: &PairwiseReport, l: &Levels) -> String {
    let t = &r.settings.thresholds;
    match t.port_rate_mbs {
        Some(p) if t.port_floor * p < t.relative * l.median => format!(
            "{} % of the port rate {} MB/s",
            num(t.port_floor * 100.0, 0),
            num(p, 0)
        ),
        _ => format!("{} × the median node score", num(t.relative, 2)),
    }
}

/// The bandwidth map's cells and legend.
fn bandwidth_cells(r: &PairwiseReport) -> (Vec<Vec<Option<HeatCell>>>, Vec<String>, Vec<Swatch>) {
    let levels = Levels::of(r);
    let cells = grid(r, |c| {
        let (fill, band, words) = match &levels {
            Some(l) => l.judge(c.mbs, c.low),
            None => (
                UNJUDGED,
                "unjudged",
                "not judged: the run has no reference level",
            ),
        };
        Some(HeatCell {
            fill,
            ink: INK,
            text: num(c.mbs, 0),
            title: {
                let moved = c.moved();
                let mut t = format!("{} → {}: {} MB/s, {words}", c.from, c.to, num(c.mbs, 0));
                if !moved.is_empty() {
                    t.push_str("; ");
                    t.push_str(&moved.join(", "));
                }
                if let Some(n) = r.route_of(&c.from, &c.to) {
                    t.push('\n');
                    t.push_str(&n.line());
                }
                t
            },
            band,
        })
    });
    let Some(l) = levels else {
        return (
            cells,
            vec![
                "MB/s; no reference level (most tests failed):".into(),
                "not coloured by verdict".into(),
            ],
            vec![Swatch {
                colors: vec![UNJUDGED],
                text: "measured".into(),
            }],
        );
    };
    let (m, t, g) = (num(l.median, 0), num(l.slow, 0), num(l.green, 0));
    let title = vec![
        format!("MB/s; fabric median node score {m}"),
        format!("slow below {t} ({})", threshold_words(r, &l)),
    ];
    let mut legend = vec![
        Swatch {
            colors: vec![GREEN],
            text: format!("≥ {g}: in line with the fabric"),
        },
        Swatch {
            colors: vec![
                AMBER,
                mix(AMBER, YELLOW, 0.5),
                YELLOW,
                mix(YELLOW, GREEN, 0.5),
            ],
            text: format!("{t} to {g}: low, not slow"),
        },
        Swatch {
            colors: vec![RED],
            text: format!("< {t}: slow, or low for its two nodes"),
        },
    ];
    if !r.faults.is_empty() {
        legend.push(Swatch {
            colors: vec![],
            text: "framed: a fault the run reports".into(),
        });
    }
    (cells, title, legend)
}

/// The latency map's cells and legend: light to dark blue with the ratio to the
/// median (log scale, darkest at 1000 ×); rdmakit does not judge latency.
fn latency_cells(r: &PairwiseReport) -> (Vec<Vec<Option<HeatCell>>>, Vec<String>, Vec<Swatch>) {
    let lats: Vec<f64> = screen(r)
        .filter_map(|c| c.lat.map(|l| l.t_typical_us))
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let med = median(&lats).unwrap_or(1.0);
    // Tens of milliseconds on a loaded soft NIC, microseconds on hardware.
    let digits = if lats.iter().any(|v| *v >= 1000.0) {
        0
    } else {
        1
    };
    let shade = |f: f64| {
        (
            mix(PALE_BLUE, DARK_BLUE, f),
            if f > 0.5 { WHITE } else { INK },
        )
    };
    let cells = grid(r, |c| {
        let l = c.lat?;
        let v = l.t_typical_us;
        let f = if v > 0.0 && med > 0.0 {
            (v / med).log10() / 3.0
        } else {
            0.0
        };
        let (fill, ink) = shade(f.clamp(0.0, 1.0));
        Some(HeatCell {
            fill,
            ink,
            text: num(v, digits),
            title: format!(
                "{} → {}: {} usec, {} × the median",
                c.from,
                c.to,
                num(v, 1),
                num(v / med, 1)
            ),
            band: "latency",
        })
    });
    let legend = [
        (0.0, "≤ the median"),
        (1.0 / 3.0, "10 × the median"),
        (2.0 / 3.0, "100 ×"),
        (1.0, "≥ 1000 ×"),
    ]
    .into_iter()
    .map(|(f, text)| Swatch {
        colors: vec![shade(f).0],
        text: text.into(),
    })
    .collect();
    let title = vec![
        format!("usec; median {}; not judged:", num(med, 1)),
        "darker is slower (log scale)".into(),
    ];
    (cells, title, legend)
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
    page.push(&counters(r));
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
            if let Some(d) = r.cause(f) {
                let _ = writeln!(
                    s,
                    "<br><span class=\"badge warning\">{}</span>{}",
                    esc(d.cause.describe()),
                    esc(&d.evidence.join(", "))
                );
            }
            for c in r.cited(f) {
                let _ = writeln!(s, "<br><span class=\"note\">{}</span>", esc(&c));
            }
            for c in r.routed(f) {
                let _ = writeln!(s, "<br><span class=\"note\">{}</span>", esc(&c));
            }
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
    let (cells, legend_title, legend) = bandwidth_cells(r);
    let bw = plot::heat_map(&HeatMap {
        id: "pairwise-bandwidth",
        title: "RC WRITE bandwidth, MB/s",
        labels: labels.clone(),
        cells,
        legend_title,
        legend,
        outline_cells: outline_cells.clone(),
        outline_lines: outline_lines.clone(),
    })?;
    let m = &r.matrix;
    let _ = writeln!(
        s,
        "<div class=\"plots\"><figure>{bw}<figcaption>Best average over the sizes, MB/s \
         (2^20 bytes); the row writes to the column; · not measured{}. Colours follow the \
         run's judgement, not the spread of its figures: red below the slow threshold ({} \
         MB/s) or low for its two nodes, amber to yellow up to halfway to the median node \
         score ({} MB/s), green from there up. Framed in a thick dark line: the faults. Node \
         scores: MAD {} MB/s; a cell below {} of its nodes' scores is low.</figcaption></figure>",
        if r.mode == Mode::Quick {
            " (a ring measures neighbours only)"
        } else {
            ""
        },
        num(m.slow_below_mbs, 0),
        num(m.node_median_mbs, 0),
        num(m.node_mad_mbs, 0),
        num(m.link_below_residual, 2)
    );
    if screen(r).any(|c| c.lat.is_some()) {
        let (cells, legend_title, legend) = latency_cells(r);
        let lat = plot::heat_map(&HeatMap {
            id: "pairwise-latency",
            title: "RC SEND latency, usec (median)",
            labels,
            cells,
            legend_title,
            legend,
            outline_cells,
            outline_lines,
        })?;
        let _ = writeln!(
            s,
            "<figure>{lat}<figcaption>{}-byte messages, the median half round trip; the row \
             sends. rdmakit does not judge latency: the colour is the ratio to the matrix's \
             median on a log scale.</figcaption></figure>",
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
            Outcome::Confirmed => ("error", "confirmed"),
            Outcome::Dismissed => ("pass", "dismissed (noise)"),
            Outcome::Unconfirmed => ("warning", "not re-measured"),
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

/// The screening cells whose ends' counters moved during their tests:
/// each end's, largest first.
fn counters(r: &PairwiseReport) -> String {
    let mut moved: Vec<&Cell> = screen(r)
        .filter(|c| !c.from_counters.is_empty() || !c.to_counters.is_empty())
        .collect();
    if moved.is_empty() {
        return String::new();
    }
    moved.sort_by(|a, b| a.mbs.total_cmp(&b.mbs));
    let mut s = String::from(
        "<section id=\"counters\">\n<h2>Counters that moved</h2>\n<p class=\"note\">What each \
         end's device counters moved during the cell's tests (pauses, discards, CNPs, \
         sequence errors, retransmissions), slowest cell first.</p>\n<table>\n<tr><th>cell</th>\
         <th class=\"num\">MB/s</th><th>requester</th><th>responder</th></tr>\n",
    );
    let end = |d: &rdmakit_fleet::pairwise::report::Deltas| {
        d.top(usize::MAX)
            .into_iter()
            .map(|(n, x)| {
                format!(
                    "<code>{}</code> {}",
                    esc(n),
                    esc(&rdmakit_fleet::pairwise::deltas::show(n, x))
                )
            })
            .collect::<Vec<_>>()
            .join("<br>")
    };
    for c in moved {
        let _ = writeln!(
            s,
            "<tr class=\"row-{}\"><td>{} → {}</td><td class=\"num\">{}</td><td>{}</td>\
             <td>{}</td></tr>",
            if c.low { "fail" } else { "pass" },
            esc(&c.from),
            esc(&c.to),
            num(c.mbs, 0),
            end(&c.from_counters),
            end(&c.to_counters)
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The levels of the healthy recorded run (tests/data): median node score
    /// 342.6 MB/s, slow below 205.6 (0.6 × it).
    fn levels() -> Levels {
        Levels {
            median: 342.6,
            slow: 205.6,
            green: (342.6 + 205.6) / 2.0,
        }
    }

    fn is_amber_or_red(c: RGBColor) -> bool {
        c.0 > 200 && c.1 < 160 && c.2 < 80
    }

    #[test]
    fn at_the_slow_threshold_amber_below_it_red() {
        let l = levels();
        let (at, band, _) = l.judge(l.slow, false);
        assert_eq!((at, band), (AMBER, "low"));
        assert!(is_amber_or_red(at), "{at:?}");
        let (below, band, _) = l.judge(l.slow - 0.1, false);
        assert_eq!((below, band), (RED, "slow"));
        assert_eq!(l.judge(0.0, false).1, "slow");
        assert_eq!(l.judge(f64::NAN, false).1, "slow");
    }

    #[test]
    fn green_from_halfway_to_the_median_and_above_it() {
        let l = levels();
        for v in [l.green, l.median * 0.9, l.median, l.median * 3.0] {
            assert_eq!(l.judge(v, false), (GREEN, "ok", "in line with the fabric"));
        }
        // Between threshold and green: amber through yellow, never red or green.
        for k in 1..10 {
            let v = l.slow + (l.green - l.slow) * f64::from(k) / 10.0;
            let (c, band, _) = l.judge(v, false);
            assert_eq!(band, "low");
            assert!(c != GREEN && c != RED, "{v}: {c:?}");
        }
    }

    #[test]
    fn a_cell_low_for_its_nodes_is_red_above_the_threshold() {
        let l = levels();
        assert_eq!(l.judge(l.median, true).0, RED);
    }
}
