//! `rdmakit fleet report` and `rdmakit fleet baseline` end to end on inputs the
//! other subcommands produce from the real captures in fixtures/: `rdmakit collect`
//! bundles, `rdmakit doctor --json` files, capture directories. Exit codes, bad
//! input named, duplicates, --baseline and --expect.

mod common;

use common::*;
use std::path::Path;
use std::process::Output;

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn p(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// `rdmakit fleet report ARGS...`, which must exit `code`; its stdout and stderr.
fn report(args: &[&str], code: i32) -> (Output, String) {
    let o = rdmakit(&[&["fleet", "report"], args].concat());
    let text = out(&o);
    assert_eq!(o.status.code(), Some(code), "{text}");
    (o, text)
}

/// Two bundles (from `rdmakit collect`) and a doctor JSON (from `rdmakit doctor --json`).
fn small_fleet(dir: &Path) {
    std::fs::create_dir_all(dir.join("bundles")).unwrap();
    for (cap, name) in [("healthy", "n1"), ("healthy-busy", "n2")] {
        let o = rdmakit(&[
            "collect",
            "--from",
            &fixture(cap),
            "-o",
            &p(dir, &format!("bundles/{name}.json.gz")),
        ]);
        assert!(o.status.success(), "{}", out(&o));
    }
    let o = rdmakit(&["doctor", "--from", &fixture("healthy"), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    std::fs::write(dir.join("n3.json"), &o.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // The capture has no host name: the doctor names it after its input.
    assert_eq!(v["inventory"]["hostname"], "healthy");
    assert_eq!(v["inventory"]["hostname_source"], "input name");
}

#[test]
fn report_exit_codes_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_fleet(d);
    let (_, text) = report(&[&p(d, "bundles"), &p(d, "n3.json")], 0);
    assert!(text.contains("rdmakit fleet: 3 nodes (3 ok"), "{text}");

    let (o, _) = report(&["--json", &p(d, "bundles"), &p(d, "n3.json")], 0);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "rdmakit.fleet/v1");
    let names = node_names(&v);
    assert_eq!(names, ["healthy", "n1", "n2"]);

    // A garbage JSON line and a missing file: named, exit 2, the rest reported.
    std::fs::write(d.join("bad.jsonl"), "garbage\n").unwrap();
    let (_, text) = report(
        &[&p(d, "bundles"), &p(d, "bad.jsonl"), &p(d, "nope.json")],
        2,
    );
    assert!(text.contains("bad.jsonl:1: not JSON"), "{text}");
    assert!(text.contains("nope.json: cannot read"), "{text}");
    assert!(text.contains("2 nodes (2 ok"), "{text}");

    // The same node twice: the last read is used, the name reported once, exit 2.
    let (_, text) = report(&[&fixture("healthy"), &p(d, "n3.json")], 2);
    assert!(
        text.contains("duplicate node name: healthy appears in 2 inputs"),
        "{text}"
    );

    // A node that needs attention: exit 1 (the H100 host's saturated counters).
    let (_, text) = report(&[&fixture("gpud-h100")], 1);
    assert!(text.contains("RDK-H010"), "{text}");

    report(&[], 2);
}

/// `--html FILE`: the page beside the usual output, the report's JSON embedded (the
/// same as `--json` prints), nothing referenced outside the file.
#[test]
fn report_html_embeds_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_fleet(d);
    let html = p(d, "fleet.html");
    let (_, text) = report(&["--html", &html, &p(d, "bundles"), &p(d, "n3.json")], 0);
    assert!(text.contains("rdmakit fleet: 3 nodes (3 ok"), "{text}");
    assert!(text.contains("HTML report written to"), "{text}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    for bad in ["http://", "https://", "//"] {
        assert!(!page.contains(bad), "{bad}");
    }
    assert!(page.contains("data-plot=\"fleet-c1-rate-gbps\""));
    let v = rdmakit_report::embedded_json(&page).unwrap();
    assert_eq!(v["kind"], "fleet");
    let (o, _) = report(&["--json", &p(d, "bundles"), &p(d, "n3.json")], 0);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["data"], json);
}

#[test]
fn baseline_and_expect() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_fleet(d);
    let o = rdmakit(&[
        "fleet",
        "baseline",
        &p(d, "bundles"),
        "-o",
        &p(d, "expected.json"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let exp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("expected.json")).unwrap()).unwrap();
    assert_eq!(exp["schema"], "rdmakit.fleet-expect/v1");
    assert_eq!(exp["cohorts"][0]["values"]["kernel"], "6.1.0-57-amd64");
    report(&["--expect", &p(d, "expected.json"), &p(d, "n3.json")], 0);

    // The first sweep's report is the second's baseline: a node gone is missing.
    let (o, _) = report(&["--json", &p(d, "bundles"), &p(d, "n3.json")], 0);
    std::fs::write(d.join("sweep0.json"), &o.stdout).unwrap();
    std::fs::remove_file(d.join("bundles/n2.json.gz")).unwrap();
    let (_, text) = report(
        &[
            "--baseline",
            &p(d, "sweep0.json"),
            &p(d, "bundles"),
            &p(d, "n3.json"),
        ],
        1,
    );
    assert!(text.contains("MISSING n2"), "{text}");
    assert!(text.contains("absent from this report"), "{text}");

    // A fleet report is not a node report.
    let (_, text) = report(&[&p(d, "sweep0.json"), &p(d, "n3.json")], 2);
    assert!(text.contains("pass it with --baseline"), "{text}");
    // An unreadable --baseline stops before anything is read.
    let (_, text) = report(&["--baseline", &p(d, "none.json"), &p(d, "n3.json")], 2);
    assert!(text.contains("--baseline"), "{text}");
}
