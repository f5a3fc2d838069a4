//! Rendering a [`Report`]: a human report (ANSI-styled; the caller's writer strips
//! styles for NO_COLOR and non-terminals) and JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use comfy_table::{presets, Cell, Color, ContentArrangement, Table};

use crate::checks::{Status, CHECKS};
use crate::codes::{Code, Layer, Severity};
use crate::finding::Finding;
use crate::group::FindingGroup;
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
    info_line(out, f);
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

/// A finding's first line: severity, code, layer, subject, message (all an
/// info finding shows without --verbose).
fn info_line(out: &mut String, f: &Finding) {
    head_line(out, f.severity, f.code, f.layer, &f.subject, &f.message);
}

/// "SEVERITY CODE [layer] subject: message", the first line of a finding or a group.
fn head_line(
    out: &mut String,
    sev: Severity,
    code: Code,
    layer: Layer,
    subject: &str,
    message: &str,
) {
    let s = sev_style(sev);
    let _ = writeln!(
        out,
        "{s}{}{s:#} {BOLD}{}{BOLD:#} [{}] {subject}: {message}",
        sev_label(sev),
        code.as_str(),
        layer.as_str(),
    );
}

/// "a, b, c" for up to three subjects, else "a, b and 6 more".
fn subjects_inline(subjects: &[String]) -> String {
    if subjects.len() <= 3 {
        subjects.join(", ")
    } else {
        format!(
            "{}, {} and {} more",
            subjects[0],
            subjects[1],
            subjects.len() - 2
        )
    }
}

/// A group of findings with one cause: printed once, with every subject, the
/// members' evidence and the fix.
fn group(out: &mut String, g: &FindingGroup, all: &[Finding], verbose: bool) {
    let members: Vec<&Finding> = g.findings.iter().map(|i| &all[*i]).collect();
    let subject = format!(
        "{} ({} alike)",
        subjects_inline(&g.subjects),
        g.subjects.len()
    );
    head_line(out, g.severity, g.code, g.layer, &subject, &g.message);
    if g.severity == Severity::Info && !verbose {
        return;
    }
    if g.subjects.len() > 3 {
        let _ = writeln!(out, "      {DIM}subjects{DIM:#} {}", g.subjects.join(", "));
    }
    let mut evidence = Vec::new();
    for f in &members {
        for e in &f.evidence {
            if !evidence.contains(&e) {
                evidence.push(e);
            }
        }
    }
    let shown = if verbose {
        evidence.len()
    } else {
        evidence.len().min(3)
    };
    for e in &evidence[..shown] {
        let _ = writeln!(out, "      {DIM}evidence{DIM:#} {} = {}", e.path, e.value);
    }
    if shown < evidence.len() {
        let _ = writeln!(
            out,
            "      {DIM}evidence{DIM:#} ... {} more (--verbose)",
            evidence.len() - shown
        );
    }
    if let Some(o) = members[0].omission {
        let _ = writeln!(out, "      {DIM}omission{DIM:#} {o}");
    }
    let mut remedies: Vec<&Finding> = Vec::new();
    for f in &members {
        if !f.remedy.is_empty() && !remedies.iter().any(|r| r.remedy == f.remedy) {
            remedies.push(f);
        }
    }
    for (i, f) in remedies.iter().enumerate() {
        if i > 0 && !verbose {
            break;
        }
        let whose = if remedies.len() > 1 {
            format!(" (for {})", f.subject)
        } else {
            String::new()
        };
        let _ = writeln!(out, "      {DIM}fix{DIM:#}      {}{whose}", f.remedy);
    }
    let mut next: Vec<&String> = Vec::new();
    for f in &members {
        for n in &f.next {
            if !next.contains(&n) {
                next.push(n);
            }
        }
    }
    let take = if verbose { next.len() } else { 2 };
    for n in next.iter().take(take) {
        let _ = writeln!(out, "      {DIM}next{DIM:#}     {n}");
    }
}

/// The findings section: groups once, info findings one line each unless verbose.
fn findings(out: &mut String, r: &Report, verbose: bool) {
    let groups = crate::group::groups(&r.findings);
    let mut first_of: BTreeMap<usize, &FindingGroup> = BTreeMap::new();
    let mut member = vec![false; r.findings.len()];
    for g in &groups {
        first_of.insert(g.findings[0], g);
        for i in &g.findings {
            member[*i] = true;
        }
    }
    let mut shortened = false;
    for (i, f) in r.findings.iter().enumerate() {
        if let Some(g) = first_of.get(&i) {
            group(out, g, &r.findings, verbose);
            shortened |= g.severity == Severity::Info && !verbose;
        } else if member[i] {
            continue;
        } else if f.severity == Severity::Info && !verbose {
            info_line(out, f);
            shortened = true;
        } else {
            finding(out, f, verbose);
        }
    }
    if shortened {
        let _ = writeln!(
            out,
            "      {DIM}(info: one line each; --verbose or rdmakit explain CODE for evidence and fixes){DIM:#}"
        );
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
        findings(&mut out, r, opts.verbose);
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

/// The JSON report (schema [`crate::report::SCHEMA`], documented in docs/json-schema.md):
/// the report's fields, and `groups[]` ([`crate::group::groups`]) beside `findings[]`.
pub fn json(r: &Report) -> String {
    // Plain data with string keys: serialization cannot fail.
    let mut v = serde_json::to_value(r).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "groups".into(),
            serde_json::to_value(crate::group::groups(&r.findings)).unwrap_or_default(),
        );
    }
    serde_json::to_string_pretty(&v).unwrap_or_default()
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
