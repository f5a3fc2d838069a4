//! The node-problem-detector line of every finding of every real capture (the
//! captures in fixtures/ and the VM tier's bundles): within NPD's 80 bytes, led by
//! the code and the device and port, shortened by whole clauses and words.

mod common;

use common::*;
use rdmakit_doctor::finding::Finding;
use rdmakit_doctor::health::Verdict;
use rdmakit_doctor::npd::{self, MAX_MESSAGE};
use rdmakit_doctor::oneline::{finding_line, Unit, MORE};

/// The words of a line, without the punctuation around them.
fn words(s: &str) -> Vec<String> {
    s.split(' ')
        .map(|w| w.trim_matches(|c: char| ",;:()".contains(c)).to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// `line` leads with the code, then the subject when it names a device; fits
/// `max`; and each of its words is a whole word of the unshortened line.
pub fn assert_good_line(line: &str, lead: &str, f: &Finding, max: usize, unit: Unit) {
    let whole = finding_line(lead, f, "(+12 more)", usize::MAX, unit);
    assert!(unit.len(line) <= max, "over {max}: {line}");
    assert!(!line.contains('\n'), "{line:?}");
    let head = format!("{lead}{}", f.code.as_str());
    assert!(line.starts_with(&head), "{line}");
    if f.subject != "host" {
        assert!(
            line.starts_with(&format!("{head} {}", f.subject)),
            "does not name {}: {line}",
            f.subject
        );
    }
    let mut all = words(&whole);
    if let Some(b) = &f.brief {
        all.extend(words(b));
    }
    for w in words(line.trim_end_matches(" (+12 more)").trim_end_matches(MORE)) {
        assert!(all.contains(&w), "{w:?} is cut: {line}\nfrom {whole}");
    }
}

#[test]
fn npd_lines_of_every_finding_of_every_capture_lead_with_code_and_port() {
    let mut seen = 0;
    for (name, b) in every_capture() {
        for f in &report(&b).findings {
            for more in [0, 12] {
                let line = npd::problem_line(f, more);
                if std::env::var_os("RDMAKIT_SHOW_LINES").is_some() {
                    eprintln!("{name}: {line}");
                }
                assert_good_line(&line, "", f, MAX_MESSAGE, Unit::Bytes);
                seen += 1;
            }
        }
    }
    assert!(seen > 100, "only {seen} lines checked");
}

/// The ConnectX-3 port whose symbol_error and link_downed are pegged: the line
/// names mlx4_0 port 1 and both counters, in 80 bytes.
#[test]
fn saturated_connectx3_npd_line_names_the_port_and_both_counters() {
    let r = report(&import("mlx4-saturated-edit"));
    let v = Verdict::of(&r.findings, Some(rdmakit_doctor::codes::Severity::Error));
    assert_eq!(
        npd::line(&v, &r),
        "RDK-H010 mlx4_0 port 1: symbol_error 65535 saturated, link_downed 255 saturated"
    );
    assert_eq!(v.exit_code(), 1);
}
