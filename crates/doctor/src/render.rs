//! Rendering a [`Report`]: a human report (ANSI-styled; the caller's writer strips
//! styles for NO_COLOR and non-terminals) and JSON.

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use comfy_table::{presets, Cell, Color, ContentArrangement, Table};

use crate::checks::{Status, CHECKS};
use crate::codes::Severity;
use crate::finding::Finding;
use crate::report::Report;

const BOLD: Style = Style::new().bold();
const DIM: Style = Style::new().dimmed();

fn sev_style(s: Severity) -> Style {
    match s {
        Severity::Error => AnsiColor::Red.on_default().bold(),
        Severity::Warning => AnsiColor::Yellow.on_default().bold(),
        Severity::Info => AnsiColor::Cyan.on_default(),
    }
}

fn sev_label(s: Severity) -> &'static str {
    match s {
        Severity::Error => "ERROR",
        Severity::Warning => "WARN ",
        Severity::Info => "INFO ",
    }
}

fn result_color(r: &str) -> Color {
    match r {
        "pass" => Color::Green,
        "fail" => Color::Red,
        _ => Color::DarkGrey,
    }
}

/// How much of each finding to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanOptions {
    /// Every evidence line and every check's status.
    pub verbose: bool,
    /// Table width in columns.
    pub width: u16,
}

impl Default for HumanOptions {
    fn default() -> HumanOptions {
        HumanOptions {
            verbose: false,
            width: 110,
        }
    }
}

fn finding(out: &mut String, f: &Finding, verbose: bool) {
    let s = sev_style(f.severity);
    let _ = writeln!(
        out,
        "{s}{}{s:#} {BOLD}{}{BOLD:#} [{}] {}: {}",
        sev_label(f.severity),
        f.code.as_str(),
        f.layer.as_str(),
        f.subject,
        f.message
    );
    let shown = if verbose {
        f.evidence.len()
    } else {
        f.evidence.len().min(3)
    };
    for e in &f.evidence[..shown] {
        let _ = writeln!(out, "      {DIM}evidence{DIM:#} {} = {}", e.path, e.value);
    }
    if shown < f.evidence.len() {
        let _ = writeln!(
            out,
            "      {DIM}evidence{DIM:#} ... {} more (--verbose)",
            f.evidence.len() - shown
        );
    }
    if let Some(o) = f.omission {
        let _ = writeln!(out, "      {DIM}omission{DIM:#} {o}");
    }
    if !f.remedy.is_empty() {
        let _ = writeln!(out, "      {DIM}fix{DIM:#}      {}", f.remedy);
    }
    for n in f.next.iter().take(if verbose { usize::MAX } else { 2 }) {
        let _ = writeln!(out, "      {DIM}next{DIM:#}     {n}");
    }
}

/// The "Active probes" section of one device.
fn probes(out: &mut String, p: &crate::probes::ProbeReport, verbose: bool) {
    use crate::probes::ProbeKind;
    let _ = writeln!(
        out,
        "{BOLD}Active probes{BOLD:#}: {} ({}){}",
        p.device,
        p.label,
        if p.ports.is_empty() {
            String::new()
        } else {
            format!(", port {}", p.ports.join("; "))
        }
    );
    let line = |out: &mut String, r: &crate::probes::ProbeResult| {
        let (word, style) = match (r.passed, r.skipped) {
            (_, true) => ("skip", DIM),
            (true, false) => ("pass", AnsiColor::Green.on_default()),
            (false, false) => ("FAIL", AnsiColor::Red.on_default().bold()),
        };
        let _ = writeln!(
            out,
            "  {style}{word}{style:#} {:<30} {:>9} {}",
            r.name,
            format!("{:.1} ms", r.duration_us as f64 / 1000.0),
            r.detail
        );
    };
    let mr: Vec<_> = p.of(ProbeKind::MemoryRegistration).collect();
    let mr_quiet = !verbose && mr.iter().all(|r| r.passed);
    if mr_quiet && !mr.is_empty() {
        let ran = mr.iter().filter(|r| !r.skipped).count();
        let skipped: Vec<&str> = mr
            .iter()
            .filter(|r| r.skipped)
            .map(|r| r.name.trim_start_matches("mr.reg "))
            .collect();
        let us: u64 = mr.iter().map(|r| r.duration_us).sum();
        let _ = writeln!(
            out,
            "  {}pass{:#} {:<30} {:>9} {ran} sizes registered, written, read back, deregistered{}",
            AnsiColor::Green.on_default(),
            AnsiColor::Green.on_default(),
            format!(
                "mr.reg {}..{}",
                mr.first()
                    .map_or("", |r| r.name.trim_start_matches("mr.reg ")),
                mr.last()
                    .map_or("", |r| r.name.trim_start_matches("mr.reg "))
            ),
            format!("{:.1} ms", us as f64 / 1000.0),
            if skipped.is_empty() {
                String::new()
            } else {
                format!("; skipped above RLIMIT_MEMLOCK: {}", skipped.join(", "))
            }
        );
    }
    for r in &p.results {
        if mr_quiet && r.kind == ProbeKind::MemoryRegistration {
            continue;
        }
        line(out, r);
    }
    out.push('\n');
}

/// The human report.
pub fn human(r: &Report, opts: HumanOptions) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{BOLD}rdmakit doctor{BOLD:#}: {}, kernel {}",
        r.source,
        r.kernel.as_deref().unwrap_or("unknown")
    );
    if r.devices.is_empty() {
        let _ = writeln!(out, "RDMA devices: none");
    } else {
        let _ = writeln!(out, "RDMA devices:");
        for d in &r.devices {
            let kind = match d.kind {
                rdmakit_host::model::DeviceKind::Pci => "PCI",
                rdmakit_host::model::DeviceKind::Software => "software",
                rdmakit_host::model::DeviceKind::Unknown => "kind unknown",
            };
            let _ = writeln!(
                out,
                "  {} ({kind}, {}): {}",
                d.name,
                d.driver.as_deref().unwrap_or("driver unknown"),
                if d.ports.is_empty() {
                    "no ports".to_string()
                } else {
                    d.ports.join("; ")
                }
            );
        }
    }
    out.push('\n');

    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .enforce_styling()
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(opts.width)
        .set_header(vec!["Check", "Pass criterion", "Pass?", "Common omission"]);
    for row in &r.checklist {
        let result = if row.codes.is_empty() {
            row.result.to_string()
        } else {
            format!(
                "{}\n{}",
                row.result,
                row.codes
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        };
        t.add_row(vec![
            Cell::new(row.check),
            Cell::new(row.criterion),
            Cell::new(result).fg(result_color(row.result)),
            Cell::new(row.omission),
        ]);
    }
    let _ = writeln!(
        out,
        "{BOLD}Verification record{BOLD:#} (the seed's checklist)"
    );
    let _ = writeln!(out, "{t}");
    out.push('\n');

    if r.findings.is_empty() {
        let _ = writeln!(out, "{BOLD}Findings{BOLD:#}: none");
    } else {
        let _ = writeln!(out, "{BOLD}Findings{BOLD:#}");
        for f in &r.findings {
            finding(&mut out, f, opts.verbose);
        }
    }
    out.push('\n');

    for p in &r.probes {
        probes(&mut out, p, opts.verbose);
    }
    for n in &r.notes {
        let _ = writeln!(out, "{DIM}note{DIM:#} {n}");
    }

    let count = |w: &str| r.checks.iter().filter(|c| c.status.word() == w).count();
    let _ = writeln!(
        out,
        "{BOLD}Checks{BOLD:#}: {} pass, {} fail, {} not applicable, {} not checked{}",
        count("pass"),
        count("fail"),
        count("n/a"),
        count("not checked"),
        if opts.verbose {
            ""
        } else {
            " (--verbose lists them)"
        }
    );
    if opts.verbose {
        for c in &r.checks {
            let why = match &c.status {
                Status::NotApplicable(w) | Status::NotChecked(w) => format!(": {w}"),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "  {:<12} {:<22} {}{why}",
                c.status.word(),
                c.id,
                c.title
            );
        }
    }
    let _ = writeln!(
        out,
        "{BOLD}Summary{BOLD:#}: {} error{}, {} warning{}, {} info",
        r.counts.error,
        if r.counts.error == 1 { "" } else { "s" },
        r.counts.warning,
        if r.counts.warning == 1 { "" } else { "s" },
        r.counts.info
    );
    if let Some(f) = r.findings.first().filter(|f| f.severity == Severity::Error) {
        let _ = writeln!(
            out,
            "Start with {}: rdmakit explain {}",
            f.code.as_str(),
            f.code.as_str()
        );
    }
    out
}

/// The JSON report (schema [`crate::report::SCHEMA`], documented in docs/json-schema.md).
pub fn json(r: &Report) -> String {
    // Plain data with string keys: serialization cannot fail.
    serde_json::to_string_pretty(r).unwrap_or_default()
}

/// `rdmakit doctor --list-checks`.
pub fn list_checks() -> String {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .set_header(vec!["Check", "Layer", "Codes", "Verifies"]);
    for c in CHECKS {
        t.add_row(vec![
            c.id.to_string(),
            c.layer.as_str().to_string(),
            c.codes
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            c.title.to_string(),
        ]);
    }
    format!("{t}\n")
}
