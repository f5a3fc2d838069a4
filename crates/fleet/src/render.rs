//! Rendering a [`FleetReport`]: a short human summary (ANSI-styled; the caller's
//! writer strips styles for NO_COLOR and non-terminals) with the nodes that need
//! attention first, each with its reasons; and JSON (schema `rdmakit.fleet/v1`).

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};

use crate::node::Severity;
use crate::report::{FleetReport, ReasonKind, Status};

const BOLD: Style = Style::new().bold();
const DIM: Style = Style::new().dimmed();

/// How much to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanOptions {
    /// Every reason of every node, every cohort's members, every change.
    pub verbose: bool,
    /// Reasons shown per node when not verbose.
    pub reasons_per_node: usize,
}

impl Default for HumanOptions {
    fn default() -> Self {
        HumanOptions {
            verbose: false,
            reasons_per_node: 5,
        }
    }
}

fn status_style(s: Status) -> Style {
    match s {
        Status::Error => AnsiColor::Red.on_default().bold(),
        Status::Missing => AnsiColor::Magenta.on_default().bold(),
        Status::Warning => AnsiColor::Yellow.on_default().bold(),
        Status::Ok => AnsiColor::Green.on_default(),
    }
}

fn status_label(s: Status) -> &'static str {
    match s {
        Status::Error => "ERROR  ",
        Status::Missing => "MISSING",
        Status::Warning => "WARN   ",
        Status::Ok => "ok     ",
    }
}

/// "a, b, c and 4 more".
fn list(names: &[String], max: usize) -> String {
    if names.len() <= max {
        return names.join(", ");
    }
    format!("{} and {} more", names[..max].join(", "), names.len() - max)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The human summary.
pub fn human(r: &FleetReport, o: HumanOptions) -> String {
    let mut out = String::new();
    let s = &r.summary;
    let _ = writeln!(
        out,
        "{BOLD}rdmakit fleet{BOLD:#}: {} ({} ok, {} warning, {} error, {} missing) in {}",
        plural(s.nodes, "node", "nodes"),
        s.ok,
        s.warning,
        s.error,
        s.missing,
        plural(s.cohorts, "cohort", "cohorts"),
    );
    if let Some(b) = &r.baseline {
        let _ = writeln!(out, "{DIM}compared with the previous sweep {b}{DIM:#}");
    }
    if let Some(e) = &r.expect {
        let _ = writeln!(
            out,
            "{DIM}checked against the expected inventory {e}{DIM:#}"
        );
    }

    let mut attention: Vec<_> = r.nodes.iter().filter(|n| n.status != Status::Ok).collect();
    attention.sort_by(|a, b| {
        a.status
            .rank()
            .cmp(&b.status.rank())
            .then_with(|| crate::report::natural_cmp(&a.name, &b.name))
    });
    if !attention.is_empty() {
        let _ = writeln!(out, "\n{BOLD}Needs attention{BOLD:#}");
        let width = attention.iter().map(|n| n.name.len()).max().unwrap_or(0);
        for n in &attention {
            let st = status_style(n.status);
            let shown = if o.verbose {
                n.reasons.len()
            } else {
                n.reasons.len().min(o.reasons_per_node)
            };
            for (i, reason) in n.reasons[..shown].iter().enumerate() {
                let head = if i == 0 {
                    format!("{st}{}{st:#} {:width$}", status_label(n.status), n.name)
                } else {
                    format!("{} {:width$}", " ".repeat(7), "")
                };
                let what = match (&reason.code, reason.kind) {
                    (Some(c), _) => format!("{BOLD}{c}{BOLD:#}"),
                    (None, k) => format!("{DIM}{}{DIM:#}", k.word()),
                };
                let subject = match (&reason.subject, reason.kind) {
                    (Some(s), ReasonKind::Finding) => format!("{s}: "),
                    _ => String::new(),
                };
                let _ = writeln!(out, "{head}  {what} {subject}{}", reason.message);
            }
            if shown < n.reasons.len() {
                let _ = writeln!(
                    out,
                    "{} {:width$}  {DIM}(+{} more: --verbose){DIM:#}",
                    " ".repeat(7),
                    "",
                    n.reasons.len() - shown
                );
            }
            for a in &n.fabric {
                let _ = writeln!(
                    out,
                    "{} {:width$}  {DIM}fabric{DIM:#} {}",
                    " ".repeat(7),
                    "",
                    a.describe(&n.name)
                );
            }
        }
    }

    if !r.findings.is_empty() {
        let _ = writeln!(out, "\n{BOLD}Findings by code{BOLD:#}");
        for g in &r.findings {
            let st = match g.severity {
                Severity::Error => status_style(Status::Error),
                _ => status_style(Status::Warning),
            };
            let _ = writeln!(
                out,
                "  {BOLD}{}{BOLD:#} {st}{}{st:#} on {}: {}",
                g.code,
                g.severity,
                plural(g.nodes.len(), "node", "nodes"),
                list(&g.nodes, if o.verbose { usize::MAX } else { 8 })
            );
            let _ = writeln!(out, "    {DIM}e.g. {}{DIM:#}", g.example);
        }
    }

    if !r.cohorts.is_empty() {
        let _ = writeln!(
            out,
            "\n{BOLD}Cohorts{BOLD:#} (nodes compared only within one)"
        );
        for c in &r.cohorts {
            let _ = writeln!(
                out,
                "  {} {}: {}",
                c.id,
                c.label,
                plural(c.nodes.len(), "node", "nodes")
            );
            if o.verbose {
                let _ = writeln!(out, "     {}", c.nodes.join(", "));
            }
        }
    }

    if !r.drift.is_empty() {
        let _ = writeln!(out, "\n{BOLD}Drift{BOLD:#}");
        for d in &r.drift {
            let head = match &d.majority {
                Some(m) => format!(
                    "majority {} ({} of {})",
                    crate::drift::shown(m),
                    d.majority_nodes,
                    d.nodes
                ),
                None => format!("no majority among {}", d.nodes),
            };
            let others = d
                .minority
                .iter()
                .map(|v| format!("{} on {}", crate::drift::shown(&v.value), list(&v.nodes, 6)))
                .collect::<Vec<_>>()
                .join("; ");
            let _ = writeln!(out, "  {} {}: {head}; {others}", d.cohort, d.field);
        }
    }

    if !r.outliers.is_empty() {
        let _ = writeln!(out, "\n{BOLD}Outliers{BOLD:#}");
        for x in &r.outliers {
            let _ = writeln!(out, "  {} {}: {}", x.cohort, x.node, x.message);
        }
    }

    let listed: Vec<_> = r
        .changes
        .iter()
        .filter(|c| o.verbose || c.severity > Severity::Info)
        .collect();
    if !listed.is_empty() {
        let _ = writeln!(out, "\n{BOLD}Changes since the baseline{BOLD:#}");
        for c in listed {
            let _ = writeln!(out, "  {}: {}", c.node, c.message);
        }
    }

    if !r.errors.is_empty() || !r.duplicates.is_empty() {
        let _ = writeln!(
            out,
            "\n{BOLD}Bad input{BOLD:#} (the rest is reported above)"
        );
        for e in &r.errors {
            let _ = writeln!(out, "  {}: {}", e.input, e.message);
        }
        for d in &r.duplicates {
            let _ = writeln!(out, "  duplicate node name: {}", d.message());
        }
    }
    let skipped: Vec<&String> = r.inputs.iter().flat_map(|i| i.skipped.iter()).collect();
    if !skipped.is_empty() {
        let _ = writeln!(
            out,
            "\n{DIM}Not inputs (skipped): {}{DIM:#}",
            skipped
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !r.notes.is_empty() && (o.verbose || r.notes.len() <= 3) {
        let _ = writeln!(out);
        for n in &r.notes {
            let _ = writeln!(out, "{DIM}note: {n}{DIM:#}");
        }
    } else if !r.notes.is_empty() {
        let _ = writeln!(out, "\n{DIM}{} notes (--verbose){DIM:#}", r.notes.len());
    }

    let verdict = match s.exit_code {
        0 => "every node is ok".to_string(),
        1 => format!(
            "{} need{} attention",
            plural(attention.len(), "node", "nodes"),
            if attention.len() == 1 { "s" } else { "" }
        ),
        _ => format!(
            "bad input ({}); {} need{} attention",
            plural(s.bad_inputs + r.duplicates.len(), "problem", "problems"),
            plural(attention.len(), "node", "nodes"),
            if attention.len() == 1 { "s" } else { "" }
        ),
    };
    let _ = writeln!(
        out,
        "\n{BOLD}Summary{BOLD:#}: {verdict} (exit {})",
        s.exit_code
    );
    if let Some(n) = attention.first() {
        let _ = writeln!(
            out,
            "Next: rdmakit doctor on {} (or rdmakit doctor --from its bundle)",
            n.name
        );
    }
    out
}

/// What `fleet report` and `fleet sweep` print: with `as_json` the report's
/// JSON (`json` when the caller rendered it already), else the human summary
/// (`verbose`: every reason, member and change) followed by the line `tail`.
pub fn output(
    r: &FleetReport,
    as_json: bool,
    json: Option<&str>,
    verbose: bool,
    tail: Option<&str>,
) -> String {
    if as_json {
        return json.map_or_else(|| self::json(r), str::to_string) + "\n";
    }
    let o = HumanOptions {
        verbose,
        ..HumanOptions::default()
    };
    let mut out = human(r, o);
    if let Some(t) = tail {
        out.push_str(t);
        out.push('\n');
    }
    out
}

/// The JSON report.
pub fn json(r: &FleetReport) -> String {
    // Plain data with string keys: serialization cannot fail.
    serde_json::to_string_pretty(r).unwrap_or_default()
}
