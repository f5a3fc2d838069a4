//! Test support: the doctor's reports of test hosts, and what they found. The
//! hosts themselves — real captures from fixtures/ as bundles, edits that derive
//! fault variants from them, a synthetic PCI device built on the real mlx5_0
//! tree — are `rdmakit_testkit::bundle`'s, re-exported here.
#![allow(dead_code, unused_imports)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use rdmakit_doctor::checks::Config;
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::finding::Finding;
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;
pub use rdmakit_testkit::bundle::*;
pub use rdmakit_testkit::fixtures_dir;

/// Every real capture: fixtures/*/ with a root/, and tests/data/vm/*.json.gz (the
/// VM tier's bundles), each with its name.
pub fn every_capture() -> Vec<(String, Bundle)> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("root").is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        out.push((name.clone(), import(&name)));
    }
    let vm = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/vm");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&vm)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    files.sort();
    for f in files {
        let b = Bundle::read(f.to_str().unwrap()).unwrap();
        out.push((f.file_name().unwrap().to_string_lossy().into_owned(), b));
    }
    assert!(out.len() >= 30, "only {} captures found", out.len());
    out
}

pub fn report_with(b: &Bundle, cfg: &Config) -> Report {
    let facts = collect(b, &b.header.options.clone());
    Report::build(&facts, cfg, "rdmakit test", "test bundle")
}

pub fn report(b: &Bundle) -> Report {
    report_with(b, &Config::default())
}

/// Codes found at or above a severity.
pub fn codes_at(r: &Report, s: Severity) -> BTreeSet<Code> {
    r.findings
        .iter()
        .filter(|f| f.severity >= s)
        .map(|f| f.code)
        .collect()
}

pub fn all_codes(r: &Report) -> BTreeSet<Code> {
    r.findings.iter().map(|f| f.code).collect()
}

/// Asserts that `variant` has exactly the findings of `base` plus `added` (by code),
/// and that every added code fired.
pub fn assert_adds(base: &Report, variant: &Report, added: &[Code]) {
    let b = all_codes(base);
    let v = all_codes(variant);
    let new: BTreeSet<Code> = v.difference(&b).copied().collect();
    let want: BTreeSet<Code> = added.iter().copied().collect();
    assert_eq!(new, want, "new codes\n{}", summary(variant));
    let gone: BTreeSet<Code> = b.difference(&v).copied().collect();
    assert!(
        gone.is_empty(),
        "codes vanished: {gone:?}\n{}",
        summary(variant)
    );
}

/// A compact, stable text of a report for snapshots: checklist, check statuses,
/// findings with evidence.
pub fn summary(r: &Report) -> String {
    let mut s = String::new();
    for row in &r.checklist {
        s += &format!("row {:<34} {:<12} {:?}\n", row.check, row.result, row.codes);
    }
    for c in &r.checks {
        s += &format!("check {:<22} {}", c.id, c.status.word());
        if let rdmakit_doctor::checks::Status::NotApplicable(w)
        | rdmakit_doctor::checks::Status::NotChecked(w) = &c.status
        {
            s += &format!(" ({w})");
        }
        s.push('\n');
    }
    for f in &r.findings {
        s += &format!(
            "{} {} [{}] {}: {}\n",
            f.severity.as_str(),
            f.code.as_str(),
            f.layer.as_str(),
            f.subject,
            f.message
        );
        for e in &f.evidence {
            s += &format!("    {} = {}\n", e.path, e.value);
        }
    }
    s
}

/// One finding as the rule tests' snapshots show it: `SEVERITY CODE
/// SUBJECT: MESSAGE`, then its evidence, a `path = value` line each.
pub fn finding_text(f: &Finding) -> String {
    let mut s = format!(
        "{} {} {}: {}\n",
        f.severity.as_str(),
        f.code.as_str(),
        f.subject,
        f.message
    );
    for e in &f.evidence {
        s += &format!("    {} = {}\n", e.path, e.value);
    }
    s
}
