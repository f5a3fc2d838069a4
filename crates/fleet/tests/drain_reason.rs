//! The Slurm drain reason of every finding of every real capture (fixtures/ and
//! the VM tier's bundles): within 160 characters, `rdmakit: CODE device port ...`,
//! shortened by whole clauses and words, so `sinfo -R` tells which HCA and port.

use std::path::PathBuf;

use rdmakit_doctor::checks::Config;
use rdmakit_doctor::codes::Severity;
use rdmakit_doctor::finding::Finding;
use rdmakit_doctor::health::Verdict;
use rdmakit_doctor::oneline::{finding_line, Unit, MORE};
use rdmakit_doctor::report::Report;
use rdmakit_fleet::slurm::health::{drain_reason, reason, MAX_REASON};
use rdmakit_host::bundle::Bundle;
use rdmakit_host::capture::import_capture;
use rdmakit_host::collect::collect;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Every real capture, as reports: fixtures/*/ with a root/, and the doctor's
/// VM bundles.
fn reports() -> Vec<(String, Report)> {
    let mut bundles: Vec<(String, Bundle)> = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(repo().join("fixtures"))
        .expect("fixtures/ is part of the repository")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("root").is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        bundles.push((d.display().to_string(), import_capture(&d).unwrap()));
    }
    let vm = repo().join("crates/doctor/tests/data/vm");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&vm)
        .expect("the VM bundles are part of the repository")
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    files.sort();
    for f in files {
        let p = f.to_str().unwrap();
        bundles.push((p.to_string(), Bundle::read(p).unwrap()));
    }
    assert!(bundles.len() >= 30, "only {} captures", bundles.len());
    bundles
        .into_iter()
        .map(|(name, b)| {
            let facts = collect(&b, &b.header.options.clone());
            let r = Report::build(&facts, &Config::default(), "rdmakit test", "test");
            (name, r)
        })
        .collect()
}

fn words(s: &str) -> Vec<String> {
    s.split(' ')
        .map(|w| w.trim_matches(|c: char| ",;:()".contains(c)).to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Without the " (+...)" groups at its end.
fn body(reason: &str) -> &str {
    let mut b = reason;
    while b.ends_with(')') {
        match b.rfind(" (+") {
            Some(i) => b = &b[..i],
            None => break,
        }
    }
    b
}

fn assert_good_reason(reason: &str, f: &Finding) {
    assert!(reason.chars().count() <= MAX_REASON, "over: {reason}");
    assert!(!reason.contains('\n'), "{reason:?}");
    let head = format!("rdmakit: {}", f.code.as_str());
    assert!(reason.starts_with(&head), "{reason}");
    if f.subject != "host" {
        assert!(
            reason.starts_with(&format!("{head} {}", f.subject)),
            "does not name {}: {reason}",
            f.subject
        );
    }
    let mut all = words(&finding_line("rdmakit: ", f, "", usize::MAX, Unit::Chars));
    if let Some(b) = &f.brief {
        all.extend(words(b));
    }
    for w in words(body(reason).trim_end_matches(MORE)) {
        assert!(all.contains(&w), "{w:?} is cut: {reason}\nfrom {all:?}");
    }
}

#[test]
fn drain_reasons_of_every_finding_of_every_capture_name_code_device_and_port() {
    let mut seen = 0;
    for (name, r) in reports() {
        for f in &r.findings {
            assert_good_reason(&drain_reason(&[f]), f);
            // With others behind it: the first finding still leads, whole words.
            let others: Vec<&Finding> = std::iter::once(f)
                .chain(r.findings.iter().filter(|o| o.code != f.code))
                .chain(std::iter::repeat_n(f, 3))
                .collect();
            let with = drain_reason(&others);
            assert!(with.contains("(+3 more)"), "{name}: {with}");
            assert_good_reason(&with, f);
            seen += 1;
        }
    }
    assert!(seen > 50, "only {seen} findings");
}

/// The ConnectX-3 capture with pegged symbol_error and link_downed: `sinfo -R`
/// shows the HCA, the port and both counters.
#[test]
fn saturated_connectx3_drain_reason_names_the_port() {
    let d = repo().join("fixtures/mlx4-saturated-edit");
    let b = import_capture(&d).unwrap();
    let facts = collect(&b, &b.header.options.clone());
    let r = Report::build(&facts, &Config::default(), "rdmakit test", "test");
    assert_eq!(
        reason(&Verdict::of(&r.findings, Some(Severity::Error))).as_deref(),
        Some(
            "rdmakit: RDK-H010 mlx4_0 port 1: symbol_error 65535 saturated, \
             link_downed 255 saturated"
        )
    );
}
