//! The findings and active-probes sections of the human report, wrapped to the
//! report's width ([`super::text`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};

use super::text::{cols, wrap, wrap_command};
use super::{BOLD, DIM};
use crate::codes::{Code, Layer, Severity};
use crate::finding::{Evidence, Finding};
use crate::group::FindingGroup;
use crate::probes::{ProbeKind, ProbeReport, ProbeResult};

/// Where the text of a detail line starts: "      evidence ".
const DETAIL: usize = 15;

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

/// "      label    text", the text wrapped under itself.
fn detail(out: &mut String, label: &str, text: &str, width: usize) {
    let lead = format!("      {DIM}{label:<8}{DIM:#} ");
    wrap(out, &lead, DETAIL, DETAIL, text, width);
}

/// "evidence PATH = VALUE"; when that does not fit, the path alone and then
/// "= VALUE" wrapped under it.
fn evidence(out: &mut String, e: &Evidence, width: usize) {
    let whole = format!("{} = {}", e.path, e.value);
    if DETAIL + cols(&whole) <= width {
        return detail(out, "evidence", &whole, width);
    }
    detail(out, "evidence", &e.path, width);
    wrap(
        out,
        &" ".repeat(DETAIL),
        DETAIL,
        DETAIL + 2,
        &format!("= {}", e.value),
        width,
    );
}

fn next(out: &mut String, cmd: &str, width: usize) {
    let lead = format!("      {DIM}next{DIM:#}     ");
    wrap_command(out, &lead, DETAIL, DETAIL + 2, cmd, width);
}

/// "SEVERITY CODE [layer] subject: message", the first line of a finding or a
/// group (all an info finding shows without --verbose).
fn head_line(
    out: &mut String,
    sev: Severity,
    code: Code,
    layer: Layer,
    subject: &str,
    message: &str,
    width: usize,
) {
    let s = sev_style(sev);
    let lead = format!(
        "{s}{}{s:#} {BOLD}{}{BOLD:#} [{}] ",
        sev_label(sev),
        code.as_str(),
        layer.as_str(),
    );
    let lead_cols = cols(sev_label(sev)) + 1 + cols(code.as_str()) + 4 + cols(layer.as_str());
    // A message that already starts with its subject ("leaf1 port 3: ...")
    // is not given it twice.
    let said = match message.strip_prefix(subject) {
        Some(rest) if !subject.is_empty() && rest.starts_with(':') => message.to_string(),
        _ => format!("{subject}: {message}"),
    };
    wrap(out, &lead, lead_cols, 6, &said, width);
}

fn finding(out: &mut String, f: &Finding, verbose: bool, width: usize) {
    head_line(
        out, f.severity, f.code, f.layer, &f.subject, &f.message, width,
    );
    let shown = if verbose {
        f.evidence.len()
    } else {
        f.evidence.len().min(3)
    };
    for e in &f.evidence[..shown] {
        evidence(out, e, width);
    }
    if shown < f.evidence.len() {
        let more = format!("... {} more (--verbose)", f.evidence.len() - shown);
        detail(out, "evidence", &more, width);
    }
    if let Some(o) = f.omission {
        detail(out, "hint", o, width);
    }
    if !f.remedy.is_empty() {
        detail(out, "fix", &f.remedy, width);
    }
    for n in f.next.iter().take(if verbose { usize::MAX } else { 2 }) {
        next(out, n, width);
    }
}

/// A group of findings with one cause: printed once, with every subject, the
/// members' evidence and the fix.
fn group(out: &mut String, g: &FindingGroup, all: &[Finding], verbose: bool, width: usize) {
    let members: Vec<&Finding> = g.findings.iter().map(|i| &all[*i]).collect();
    let subject = format!("{} ({} alike)", g.subjects_inline(), g.subjects.len());
    head_line(
        out, g.severity, g.code, g.layer, &subject, &g.message, width,
    );
    if g.severity == Severity::Info && !verbose {
        return;
    }
    if g.subjects.len() > 3 {
        detail(out, "subjects", &g.subjects.join(", "), width);
    }
    let mut seen: Vec<&Evidence> = Vec::new();
    for f in &members {
        for e in &f.evidence {
            if !seen.contains(&e) {
                seen.push(e);
            }
        }
    }
    let shown = if verbose {
        seen.len()
    } else {
        seen.len().min(3)
    };
    for e in &seen[..shown] {
        evidence(out, e, width);
    }
    if shown < seen.len() {
        let more = format!("... {} more (--verbose)", seen.len() - shown);
        detail(out, "evidence", &more, width);
    }
    if let Some(o) = members[0].omission {
        detail(out, "hint", o, width);
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
        detail(out, "fix", &format!("{}{whose}", f.remedy), width);
    }
    let mut cmds: Vec<&String> = Vec::new();
    for f in &members {
        for n in &f.next {
            if !cmds.contains(&n) {
                cmds.push(n);
            }
        }
    }
    let take = if verbose { cmds.len() } else { 2 };
    for n in cmds.iter().take(take) {
        next(out, n, width);
    }
}

/// The findings section: groups once, info findings one line each unless verbose.
pub(super) fn all(out: &mut String, findings: &[Finding], verbose: bool, width: usize) {
    let groups = crate::group::groups(findings);
    let mut first_of: BTreeMap<usize, &FindingGroup> = BTreeMap::new();
    let mut member = vec![false; findings.len()];
    for g in &groups {
        first_of.insert(g.findings[0], g);
        for i in &g.findings {
            member[*i] = true;
        }
    }
    let mut shortened = false;
    for (i, f) in findings.iter().enumerate() {
        if let Some(g) = first_of.get(&i) {
            group(out, g, findings, verbose, width);
            shortened |= g.severity == Severity::Info && !verbose;
        } else if member[i] {
            continue;
        } else if f.severity == Severity::Info && !verbose {
            head_line(
                out, f.severity, f.code, f.layer, &f.subject, &f.message, width,
            );
            shortened = true;
        } else {
            finding(out, f, verbose, width);
        }
    }
    if shortened {
        let note = "(info: one line each; --verbose or rdmakit explain CODE for more)";
        let mut s = String::new();
        wrap(&mut s, "      ", 6, 7, note, width);
        let _ = write!(out, "{DIM}{}{DIM:#}", s.trim_end_matches('\n'));
        out.push('\n');
    }
}

/// The "Active probes" section of one device.
pub(super) fn probes(out: &mut String, p: &ProbeReport, verbose: bool, width: usize) {
    let title = format!(
        "{} ({}){}",
        p.device,
        p.label,
        if p.ports.is_empty() {
            String::new()
        } else {
            format!(", port {}", p.ports.join("; "))
        }
    );
    wrap(
        out,
        &format!("{BOLD}Active probes{BOLD:#}: "),
        15,
        2,
        &title,
        width,
    );
    // "  pass NAME DURATION detail", the detail wrapped under itself when
    // there is room for it, else under the name.
    let name_w = p
        .results
        .iter()
        .map(|r| cols(&r.name))
        .max()
        .unwrap_or(0)
        .max(20);
    let line = |out: &mut String, word: &str, style: Style, name: &str, us: u64, d: &str| {
        let lead = format!(
            "  {style}{word}{style:#} {name:<name_w$} {:>9} ",
            format!("{:.1} ms", us as f64 / 1000.0)
        );
        let lead_cols = 2 + cols(word) + 1 + name_w + 1 + 9 + 1;
        let indent = if width >= lead_cols + 30 {
            lead_cols
        } else {
            7
        };
        wrap(out, &lead, lead_cols, indent, d, width);
    };
    let one = |out: &mut String, r: &ProbeResult| {
        let (word, style) = match (r.passed, r.skipped) {
            (_, true) => ("skip", DIM),
            (true, false) => ("pass", AnsiColor::Green.on_default()),
            (false, false) => ("FAIL", AnsiColor::Red.on_default().bold()),
        };
        line(out, word, style, &r.name, r.duration_us, &r.detail);
    };
    let mr: Vec<&ProbeResult> = p.of(ProbeKind::MemoryRegistration).collect();
    let mr_quiet = !verbose && mr.iter().all(|r| r.passed);
    if mr_quiet && !mr.is_empty() {
        let ran = mr.iter().filter(|r| !r.skipped).count();
        let skipped: Vec<&str> = mr
            .iter()
            .filter(|r| r.skipped)
            .map(|r| r.name.trim_start_matches("mr.reg "))
            .collect();
        let us: u64 = mr.iter().map(|r| r.duration_us).sum();
        let size = |r: Option<&&ProbeResult>| {
            r.map_or(String::new(), |r| {
                r.name.trim_start_matches("mr.reg ").to_string()
            })
        };
        let name = format!("mr.reg {}..{}", size(mr.first()), size(mr.last()));
        let d = format!(
            "{ran} sizes registered, written, read back, deregistered{}",
            if skipped.is_empty() {
                String::new()
            } else {
                format!("; skipped above RLIMIT_MEMLOCK: {}", skipped.join(", "))
            }
        );
        line(out, "pass", AnsiColor::Green.on_default(), &name, us, &d);
    }
    for r in &p.results {
        if mr_quiet && r.kind == ProbeKind::MemoryRegistration {
            continue;
        }
        one(out, r);
    }
    out.push('\n');
}
