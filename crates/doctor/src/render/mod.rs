//! Rendering a [`Report`]: a human report (ANSI-styled; the caller's writer strips
//! styles for NO_COLOR and non-terminals) and JSON.
//!
//! The human report fits the width it is given ([`HumanOptions::width`]: the
//! terminal's, or 80 columns when stdout is not a terminal): prose wraps with a
//! hanging indent, commands continue with ` \`, the checklist table shrinks its
//! columns; only a single path or URL longer than a line may exceed it.

mod findings;
pub mod text;

use std::fmt::Write as _;

use anstyle::Style;
use comfy_table::{presets, Cell, Color, ColumnConstraint, ContentArrangement, Table, Width};

use crate::checks::{Status, CHECKS};
use crate::inventory::InventoryDevice;
use crate::report::{DeviceSummary, Report};
use rdmakit_host::model::DeviceKind;
use text::{cols, wrap};

const BOLD: Style = Style::new().bold();
const DIM: Style = Style::new().dimmed();

/// The width used when none is known (stdout is not a terminal).
pub const DEFAULT_WIDTH: u16 = 80;

/// The narrowest report rendered: below it lines would hold a word or two.
const MIN_WIDTH: u16 = 40;

/// The width to render in: `COLUMNS` when it holds a positive number, else
/// the terminal's width when output goes to a terminal, else
/// [`DEFAULT_WIDTH`].
pub fn width_from(columns: Option<&str>, terminal: Option<u16>) -> u16 {
    columns
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w > 0)
        .or(terminal.filter(|w| *w > 0))
        .unwrap_or(DEFAULT_WIDTH)
}

fn result_color(r: &str) -> Color {
    match r {
        "pass" => Color::Green,
        "fail" => Color::Red,
        _ => Color::DarkGrey,
    }
}

/// How much of each finding to show, and in how many columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanOptions {
    /// Every evidence line, every hint and every check's status.
    pub verbose: bool,
    /// The width in columns (at least 40 is used).
    pub width: u16,
}

impl Default for HumanOptions {
    fn default() -> HumanOptions {
        HumanOptions {
            verbose: false,
            width: DEFAULT_WIDTH,
        }
    }
}

/// What a device is, in the words the source supports: its kind and driver
/// when known, the HCA type and firmware of a hardware device, and "driver
/// unknown" only when the driver is.
fn device_description(d: &DeviceSummary, inv: Option<&InventoryDevice>) -> String {
    let mut parts: Vec<String> = Vec::new();
    match d.kind {
        DeviceKind::Pci => parts.push("PCI".into()),
        DeviceKind::Software => parts.push("software".into()),
        DeviceKind::Unknown => {}
    }
    if let Some(drv) = &d.driver {
        parts.push(drv.clone());
    }
    if d.kind != DeviceKind::Software {
        if let Some(i) = inv {
            parts.extend(i.hca_type.clone());
            parts.extend(i.fw_ver.as_ref().map(|f| format!("firmware {f}")));
        }
        if d.driver.is_none() {
            parts.push("driver unknown".into());
        }
    }
    parts.join(", ")
}

/// What `rdmakit doctor` prints of a report: [`json`] with `--json`, else
/// [`human`].
pub fn output(r: &Report, as_json: bool, opts: HumanOptions) -> String {
    match as_json {
        true => json(r) + "\n",
        false => human(r, opts),
    }
}

/// A list of findings as the human report prints them (groups once, info
/// findings one line each unless verbose), for commands that report
/// findings without a host report (`rdmakit fabric check`).
pub fn findings(list: &[crate::finding::Finding], opts: HumanOptions) -> String {
    let mut out = String::new();
    findings::all(
        &mut out,
        list,
        opts.verbose,
        usize::from(opts.width.max(MIN_WIDTH)),
    );
    out
}

/// The human report.
pub fn human(r: &Report, opts: HumanOptions) -> String {
    let width = usize::from(opts.width.max(MIN_WIDTH));
    let mut out = String::new();
    let head = format!(
        "{}, kernel {}",
        r.source,
        r.kernel.as_deref().unwrap_or("unknown")
    );
    wrap(
        &mut out,
        &format!("{BOLD}rdmakit doctor{BOLD:#}: "),
        16,
        2,
        &head,
        width,
    );
    if r.devices.is_empty() {
        let _ = writeln!(out, "RDMA devices: none");
    } else {
        let _ = writeln!(out, "RDMA devices:");
        for d in &r.devices {
            let inv = r
                .inventory
                .as_ref()
                .and_then(|i| i.devices.iter().find(|x| x.name == d.name));
            let name = format!("{} ({})", d.name, device_description(d, inv));
            let ports = if d.ports.is_empty() {
                "no ports".to_string()
            } else {
                d.ports.join("; ")
            };
            // One line when it fits; else the device, then a line per port.
            if 2 + cols(&name) + 2 + cols(&ports) <= width || d.ports.is_empty() {
                wrap(&mut out, "  ", 2, 4, &format!("{name}: {ports}"), width);
            } else {
                wrap(&mut out, "  ", 2, 4, &format!("{name}:"), width);
                for p in &d.ports {
                    wrap(&mut out, "    port ", 9, 6, p, width);
                }
            }
        }
    }
    out.push('\n');

    checklist(&mut out, r, opts.verbose, width);

    if r.findings.is_empty() {
        let _ = writeln!(out, "{BOLD}Findings{BOLD:#}: none");
    } else {
        let _ = writeln!(out, "{BOLD}Findings{BOLD:#}");
        findings::all(&mut out, &r.findings, opts.verbose, width);
    }
    out.push('\n');

    for p in &r.probes {
        findings::probes(&mut out, p, opts.verbose, width);
    }
    for n in &r.notes {
        wrap(&mut out, &format!("{DIM}note{DIM:#} "), 5, 5, n, width);
    }

    checks(&mut out, r, opts.verbose, width);
    let _ = writeln!(
        out,
        "{BOLD}Summary{BOLD:#}: {} error{}, {} warning{}, {} info",
        r.counts.error,
        if r.counts.error == 1 { "" } else { "s" },
        r.counts.warning,
        if r.counts.warning == 1 { "" } else { "s" },
        r.counts.info
    );
    if let Some(f) = r
        .findings
        .first()
        .filter(|f| f.severity == crate::codes::Severity::Error)
    {
        let _ = writeln!(
            out,
            "Start with {}: rdmakit explain {}",
            f.code.as_str(),
            f.code.as_str()
        );
    }
    out
}

/// The verification checklist: a table of the four rows (check, result with the
/// failing checks and codes, pass criterion), then the hints of what is commonly
/// left out at each step — for the rows that failed, or every row with
/// `verbose`. A hint is advice, not a result of this run.
fn checklist(out: &mut String, r: &Report, verbose: bool, width: usize) {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .enforce_styling()
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(u16::try_from(width).unwrap_or(u16::MAX))
        .set_header(vec!["Check", "Result", "Pass criterion"]);
    for row in &r.checklist {
        let mut result = row.result.to_string();
        if !row.failed_checks.is_empty() {
            result.push_str(&format!(": {}", row.failed_checks.join(", ")));
        }
        for c in &row.codes {
            result.push('\n');
            result.push_str(c.as_str());
        }
        t.add_row(vec![
            Cell::new(row.check),
            Cell::new(result).fg(result_color(row.result)),
            Cell::new(row.criterion),
        ]);
    }
    // The check's name in at most 21 columns ("Kernel modules loaded", with its
    // padding 23); the
    // result column holds a failing check's id whole; the criterion takes the rest.
    if let Some(c) = t.column_mut(0) {
        c.set_constraint(ColumnConstraint::UpperBoundary(Width::Fixed(23)));
    }
    let id_cols = r
        .checklist
        .iter()
        .flat_map(|row| row.failed_checks.iter())
        .map(|id| cols(id) + 1)
        .max();
    if let (Some(w), Some(c)) = (id_cols, t.column_mut(1)) {
        let w = u16::try_from(w).unwrap_or(u16::MAX);
        c.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(w)));
    }
    let _ = writeln!(out, "{BOLD}Verification checklist{BOLD:#}");
    let _ = writeln!(out, "{t}");
    for row in &r.checklist {
        if verbose || row.result == "fail" {
            let lead = format!("{DIM}hint{DIM:#} {}: ", row.check);
            let lead_cols = 7 + cols(row.check);
            wrap(out, &lead, lead_cols, 5, row.omission, width);
        }
    }
    out.push('\n');
}

/// The count of checks by status, and with `verbose` each check: its status,
/// id and title, the codes that failed it, or why it did not apply or run.
fn checks(out: &mut String, r: &Report, verbose: bool, width: usize) {
    let count = |w: &str| r.checks.iter().filter(|c| c.status.word() == w).count();
    let _ = writeln!(
        out,
        "{BOLD}Checks{BOLD:#}: {} pass, {} fail, {} not applicable, {} not checked{}",
        count("pass"),
        count("fail"),
        count("n/a"),
        count("not checked"),
        if verbose {
            ""
        } else {
            " (--verbose lists them)"
        }
    );
    if !verbose {
        return;
    }
    for c in &r.checks {
        let why = match &c.status {
            Status::NotApplicable(w) | Status::NotChecked(w) => format!(": {w}"),
            Status::Fail => {
                let mut codes: Vec<&str> = c
                    .findings
                    .iter()
                    .filter(|f| f.severity >= crate::codes::Severity::Warning)
                    .map(|f| f.code.as_str())
                    .collect();
                codes.dedup();
                format!(": {}", codes.join(", "))
            }
            Status::Pass => String::new(),
        };
        let lead = format!("  {:<12} {:<22} ", c.status.word(), c.id);
        let indent = if width >= 80 { 38 } else { 4 };
        wrap(
            out,
            &lead,
            cols(&lead),
            indent,
            &format!("{}{why}", c.title),
            width,
        );
    }
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

/// `rdmakit doctor --list-checks`, in `width` columns.
pub fn list_checks(width: u16) -> String {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width.max(MIN_WIDTH))
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
