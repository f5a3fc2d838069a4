//! The human rendering of a [`PairwiseReport`]: the bandwidth and latency
//! matrices (low cells marked and, on a terminal, colored), the verdict
//! with its evidence, and what to run next. ANSI styles are embedded; the
//! caller's writer (anstream) strips them where colors are off.

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};

use super::logtext::escape;
use super::report::{Cause, Cell, Diagnosis, Fault, Outcome, PairwiseReport, Phase};

const RED: Style = AnsiColor::Red.on_default().bold();
const YELLOW: Style = AnsiColor::Yellow.on_default();
const GREEN: Style = AnsiColor::Green.on_default().bold();
const DIM: Style = Style::new().dimmed();
const BOLD: Style = Style::new().bold();

fn paint(s: Style, text: &str) -> String {
    format!("{s}{text}{s:#}")
}

/// What `fleet pairwise` prints of a run: its JSON (schema
/// rdmakit.pairwise/v1, pretty-printed) or [`human`].
pub fn output(r: &PairwiseReport, as_json: bool) -> String {
    match as_json {
        true => serde_json::to_string_pretty(r).unwrap_or_default() + "\n",
        false => human(r),
    }
}

/// The whole report as text.
pub fn human(r: &PairwiseReport) -> String {
    let mut o = String::new();
    let screen: Vec<&Cell> = r
        .cells
        .iter()
        .filter(|c| c.phase == Phase::Screen)
        .collect();
    let screen_rounds = r.rounds.iter().filter(|t| t.phase == Phase::Screen).count();
    let pairs = r.screen_pairs();
    let _ = writeln!(
        o,
        "{} {} nodes, {} ({} rounds, {} pairs), {:.1} s",
        paint(BOLD, "rdmakit fleet pairwise:"),
        r.nodes.len(),
        r.mode.describe(),
        screen_rounds,
        pairs,
        r.seconds
    );
    for u in &r.unreachable {
        let _ = writeln!(
            o,
            "{} {}: {}",
            paint(RED, "unreachable"),
            escape(&u.agent),
            escape(&u.error)
        );
    }
    let sizes: Vec<String> = r.settings.bw_sizes.iter().map(|s| s.to_string()).collect();
    let _ = writeln!(
        o,
        "\nRC WRITE bandwidth, MB/s (best of {} bytes; the row writes to the column)",
        sizes.join(", ")
    );
    matrix(&mut o, r, &screen, |c| {
        if c.error.is_some() && c.bw.is_empty() {
            ("fail".into(), Some(RED))
        } else {
            (format!("{:.0}", c.mbs), c.low.then_some(RED))
        }
    });
    if screen.iter().any(|c| c.lat.is_some()) {
        let _ = writeln!(
            o,
            "\nRC SEND latency, usec ({}-byte messages, median half round trip; the row sends)",
            r.settings.lat_size
        );
        matrix(&mut o, r, &screen, |c| match &c.lat {
            Some(l) => (format!("{:.1}", l.t_typical_us), None),
            None => ("-".into(), None),
        });
    }
    let m = &r.matrix;
    let _ = writeln!(
        o,
        "\n{}",
        paint(
            DIM,
            &format!(
                "node scores: median {:.0} MB/s, MAD {:.0}; pairs below {:.0} MB/s are slow; \
                 a cell below {:.2} of its nodes' scores is low (residuals: median {:.2}, MAD {:.2})",
                m.node_median_mbs,
                m.node_mad_mbs,
                m.slow_below_mbs,
                m.link_below_residual,
                m.residual_median,
                m.residual_mad
            )
        )
    );
    let failed: Vec<&Cell> = r.cells.iter().filter(|c| c.error.is_some()).collect();
    if !failed.is_empty() {
        let _ = writeln!(o, "\nFailed tests:");
        for c in failed {
            let _ = writeln!(
                o,
                "  {} -> {}: {}",
                escape(&c.from),
                escape(&c.to),
                escape(c.error.as_deref().unwrap_or(""))
            );
        }
    }
    if !r.confirmations.is_empty() {
        let _ = writeln!(o, "\nSuspects re-measured against healthy pairs:");
        for c in &r.confirmations {
            let v = match c.verdict {
                Outcome::Confirmed => paint(RED, "confirmed"),
                Outcome::Dismissed => paint(GREEN, "dismissed (noise)"),
                Outcome::Unconfirmed => paint(YELLOW, "not re-measured"),
            };
            let _ = writeln!(o, "  {}: {v}", c.suspect);
            for k in &c.checks {
                let _ = writeln!(
                    o,
                    "    pass {}: {} {} {}: {:.0} MB/s vs {:.0} MB/s on healthy pairs ({:.2})",
                    k.pass,
                    k.from,
                    if k.either_way { "<->" } else { "->" },
                    k.to,
                    k.mbs,
                    k.control_mbs,
                    k.ratio
                );
            }
        }
    }
    let _ = writeln!(o);
    if let Some(why) = &r.inconclusive {
        let _ = writeln!(o, "{}", paint(RED, &format!("No verdict: {why}")));
        let _ = writeln!(
            o,
            "\nNext:\n  the tests themselves fail: run one pair by hand (rdmakit perf write-bw \
             between two nodes), check -m against the links (a path MTU needs the interface \
             MTU plus 96 bytes: -m 1024 on 1500-byte links), rdmakit doctor on the nodes"
        );
        return o;
    }
    if r.faults.is_empty() {
        if r.unreachable.is_empty() {
            let _ = writeln!(
                o,
                "{}",
                paint(GREEN, "No fault: every pair is in line with the fabric.")
            );
        } else {
            let _ = writeln!(
                o,
                "{}",
                paint(
                    YELLOW,
                    "No fault among the agents that answered; some did not (above)."
                )
            );
        }
        return o;
    }
    let _ = writeln!(
        o,
        "{}",
        paint(RED, &format!("{} fault(s):", r.faults.len()))
    );
    for f in &r.faults {
        let _ = writeln!(o, "  {}", evidence(r, f));
        if let Some(d) = r.cause(f) {
            let _ = writeln!(o, "    {}", cause_line(&d));
        }
        for c in r.cited(f) {
            let _ = writeln!(o, "    {}", c.replace('→', "->"));
        }
        for line in r.routed(f) {
            let _ = writeln!(o, "    {}", line.replace('→', "->"));
        }
    }
    let _ = writeln!(o, "\nNext:");
    for f in &r.faults {
        if let Some(d) = r.cause(f) {
            let _ = writeln!(o, "  {}", cause_next(f, d.cause));
            continue;
        }
        match f {
            Fault::Node { node } => {
                let _ = writeln!(
                    o,
                    "  on {node}: rdmakit doctor (port rate and width, PCIe link, error counters), \
                     then the link partner's switch port"
                );
            }
            Fault::Link { nodes } => {
                let _ = writeln!(
                    o,
                    "  between {} and {}: the cable and switch ports on that path \
                     (rdmakit stat on both: symbol errors, link downed); re-test with \
                     --reference NODE",
                    nodes[0], nodes[1]
                );
            }
        }
    }
    o
}

/// `congested: n5 np_cnp_sent +1,200, n1 rp_cnp_handled +1,180 (...)`.
fn cause_line(d: &Diagnosis) -> String {
    let what = match d.cause {
        Cause::Congested => {
            "switches on the path marked its packets and DCQCN slowed the sender: a busy path, \
             not a broken one"
        }
        Cause::LossyWithoutEcn => {
            "packets were lost and resent while no CNP or ECN mark was counted at either end: \
             the congestion loop never ran"
        }
    };
    let head = match d.cause {
        Cause::Congested => paint(YELLOW, d.cause.describe()),
        Cause::LossyWithoutEcn => paint(RED, d.cause.describe()),
    };
    format!("{head}: {} — {what}", d.evidence.join(", "))
}

/// The next step for a fault whose counters show its cause.
fn cause_next(f: &Fault, c: Cause) -> String {
    let on = match f {
        Fault::Node { node } => format!("on {node}"),
        Fault::Link { nodes } => format!("between {} and {}", nodes[0], nodes[1]),
    };
    match c {
        Cause::Congested => format!(
            "{on}: congestion, not a bad link — incast or other traffic sharing the path, an \
             oversubscribed uplink, switch ECN thresholds too low; rdmakit doctor --baseline on \
             both (RDK-N014) and the switch queues of the RoCE class"
        ),
        Cause::LossyWithoutEcn => format!(
            "{on}: loss without congestion control — ECN marking on the switch queue of the \
             RoCE class, the NP/RP enables on both ends (rdmakit doctor: RDK-N002, RDK-N003, \
             RDK-N015), a lossy traffic class (RDK-N001); then the cable and switch ports"
        ),
    }
}

fn evidence(r: &PairwiseReport, f: &Fault) -> String {
    match f {
        Fault::Node { node } => {
            let n = r.nodes.iter().find(|n| &n.name == node);
            match n {
                Some(n) => format!(
                    "{}: slow with {} of {} partners (score {:.0} MB/s, fabric median {:.0}, z {:.1})",
                    paint(RED, &format!("node {node}")),
                    n.slow_partners,
                    n.partners,
                    n.median_mbs.unwrap_or(0.0),
                    r.matrix.node_median_mbs,
                    n.z
                ),
                None => format!("node {node}"),
            }
        }
        Fault::Link { nodes } => {
            let cells: Vec<String> = r
                .cells
                .iter()
                .filter(|c| c.phase == Phase::Screen)
                .filter(|c| {
                    (c.from == nodes[0] && c.to == nodes[1])
                        || (c.from == nodes[1] && c.to == nodes[0])
                })
                .map(|c| format!("{} -> {} {:.0} MB/s", c.from, c.to, c.mbs))
                .collect();
            format!(
                "{}: {} while both are fine with the others",
                paint(RED, &format!("link {} <-> {}", nodes[0], nodes[1])),
                cells.join(", ")
            )
        }
    }
}

/// A node × node table of `screen` cells, `show` giving each cell's text
/// and style.
fn matrix(
    o: &mut String,
    r: &PairwiseReport,
    screen: &[&Cell],
    show: impl Fn(&Cell) -> (String, Option<Style>),
) {
    let names: Vec<&str> = r.nodes.iter().map(|n| n.name.as_str()).collect();
    let w = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(6);
    let _ = write!(o, "{:w$}", "");
    for n in &names {
        let _ = write!(o, " {n:>w$}");
    }
    let _ = writeln!(o);
    for a in &names {
        let _ = write!(o, "{a:w$}");
        for b in &names {
            let cell = screen.iter().find(|c| c.from == *a && c.to == *b);
            let (text, style) = match cell {
                _ if a == b => ("-".to_string(), Some(DIM)),
                None => ("".to_string(), None),
                Some(c) => show(c),
            };
            let padded = format!("{text:>w$}");
            let _ = write!(
                o,
                " {}",
                match style {
                    Some(s) => paint(s, &padded),
                    None => padded,
                }
            );
        }
        let _ = writeln!(o);
    }
}
