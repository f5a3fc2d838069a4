//! The fault catalogue, replayed: every failure in scripts/vm/catalogue.json was
//! produced on the real kernel in the VM tier (Debian 12's 6.1 with rdma_rxe, rdma-core
//! 44; plans `doctor` and `faults`), recorded with `rdmakit collect`, and kept in
//! tests/data/vm/. Each bundle must give, on every `cargo test`, the findings
//! (code, severity, layer, subject, evidence, message, remedy) and exit status the
//! catalogue lists: the same assertions the VM tier makes on the live report
//! (scripts/vm/guest/catalogue.py; this file implements the same rules in Rust).
//! Refresh the bundles with scripts/vm/refresh-fixtures after `scripts/vm/run`.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use common::report;
use rdmakit_host::bundle::Bundle;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/vm")
}

fn catalogue() -> Vec<Value> {
    let p = repo().join("scripts/vm/catalogue.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    v["faults"].as_array().expect("faults[]").clone()
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_string()
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The scenario's variables (NAME.vars, KEY=VALUE lines), empty when it has none.
fn vars(name: &str) -> BTreeMap<String, String> {
    let p = data().join(format!("{name}.vars"));
    let Ok(t) = std::fs::read_to_string(&p) else {
        return BTreeMap::new();
    };
    t.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Replaces every {VAR}; an unknown one is an error.
fn subst(s: &str, vars: &BTreeMap<String, String>, errors: &mut Vec<String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(j)
                if !after[..j].is_empty()
                    && after[..j]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                let k = &after[..j];
                match vars.get(k) {
                    Some(v) => out.push_str(v),
                    None => {
                        errors.push(format!(
                            "catalogue uses {{{k}}} but the scenario recorded no such variable"
                        ));
                        out.push_str(&rest[i..i + j + 2]);
                    }
                }
                rest = &after[j + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn severity_rank(s: &str) -> u8 {
    match s {
        "info" => 0,
        "warning" => 1,
        _ => 2,
    }
}

/// Why finding `f` does not satisfy `want` (empty when it does).
fn problems(
    want: &Value,
    f: &Value,
    vars: &BTreeMap<String, String>,
    errors: &mut Vec<String>,
) -> Vec<String> {
    let mut why = Vec::new();
    for key in ["severity", "layer", "subject"] {
        if let Some(w) = want[key].as_str() {
            let w = subst(w, vars, errors);
            if f[key].as_str() != Some(w.as_str()) {
                why.push(format!("{key} {} != {w:?}", f[key]));
            }
        }
    }
    let evidence = f["evidence"].as_array().cloned().unwrap_or_default();
    for ev in want["evidence"].as_array().into_iter().flatten() {
        let path = subst(&text(ev, "path"), vars, errors);
        let (val, exact) = match ev["value"].as_str() {
            Some(v) => (subst(v, vars, errors), true),
            None => (subst(&text(ev, "value_has"), vars, errors), false),
        };
        let ok =
            evidence.iter().any(|e| {
                e["path"].as_str() == Some(path.as_str())
                    && e["value"].as_str().is_some_and(|v| {
                        if exact {
                            v == val
                        } else {
                            v.contains(&val)
                        }
                    })
            });
        if !ok {
            why.push(format!(
                "no evidence {path} {} {val:?} (has: {})",
                if exact { "=" } else { "containing" },
                serde_json::to_string(&evidence).unwrap_or_default()
            ));
        }
    }
    for key in ["message", "remedy"] {
        for part in strings(want, key) {
            let p = subst(&part, vars, errors);
            if !f[key].as_str().unwrap_or_default().contains(&p) {
                why.push(format!("{key} lacks {p:?}: {}", f[key]));
            }
        }
    }
    why
}

/// Every failed assertion of `fault` on the JSON report `r`.
fn check(fault: &Value, r: &Value, vars: &BTreeMap<String, String>) -> Vec<String> {
    let mut errors = Vec::new();
    let findings = r["findings"].as_array().cloned().unwrap_or_default();
    let exit = u64::from(findings.iter().any(|f| f["severity"] == "error"));
    if Some(exit) != fault["exit"].as_u64() {
        errors.push(format!(
            "the findings give exit {exit}, the catalogue says {}",
            fault["exit"]
        ));
    }
    let mut expected = Vec::new();
    for want in fault["findings"].as_array().into_iter().flatten() {
        let code = text(want, "code");
        expected.push(code.clone());
        let same: Vec<&Value> = findings.iter().filter(|f| f["code"] == *code).collect();
        if let Some(n) = want["count"].as_u64() {
            if same.len() as u64 != n {
                errors.push(format!("{} {code} findings, expected {n}", same.len()));
            }
        }
        if same.is_empty() {
            errors.push(format!("no {code} finding"));
            continue;
        }
        let why: Vec<Vec<String>> = same
            .iter()
            .map(|f| problems(want, f, vars, &mut errors))
            .collect();
        if why.iter().all(|w| !w.is_empty()) {
            errors.push(format!("no {code} finding matches the catalogue:"));
            for (f, w) in same.iter().zip(&why) {
                errors.push(format!("  {code} {}: {}", f["subject"], w.join("; ")));
            }
        }
    }
    let mut allowed = expected;
    allowed.extend(strings(fault, "allow"));
    if let Some(q) = fault["quiet_at"].as_str() {
        for f in &findings {
            let code = text(f, "code");
            if severity_rank(&text(f, "severity")) >= severity_rank(q) && !allowed.contains(&code) {
                errors.push(format!(
                    "unexpected {} {code} {}: {}",
                    f["severity"], f["subject"], f["message"]
                ));
            }
        }
    }
    for code in strings(fault, "absent") {
        if findings.iter().any(|f| f["code"] == *code) {
            errors.push(format!("{code} must not be reported here"));
        }
    }
    if let Some(st) = fault["status"].as_object() {
        for (id, want) in st {
            let got = r["checks"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["id"] == *id)
                .map(|c| c["status"].clone());
            if got.as_ref() != Some(want) {
                errors.push(format!("check {id} is {got:?}, the catalogue says {want}"));
            }
        }
    }
    errors
}

fn bundle_name(fault: &Value) -> String {
    fault["bundle"].as_str().map_or_else(
        || format!("{}.json.gz", text(fault, "name")),
        str::to_string,
    )
}

/// Every catalogued fault, replayed from its bundle, gives the catalogue's answer.
#[test]
fn every_catalogued_fault_replays_to_its_findings_and_exit_status() {
    let faults = catalogue();
    assert!(
        faults.len() >= 20,
        "the catalogue lost faults: {}",
        faults.len()
    );
    let mut failed = Vec::new();
    for fault in &faults {
        let name = text(fault, "name");
        let path = data().join(bundle_name(fault));
        let b = Bundle::read(path.to_str().expect("utf-8 path"))
            .unwrap_or_else(|e| panic!("{name}: bundle {}: {e}", path.display()));
        let r = report(&b);
        let json: Value =
            serde_json::from_str(&rdmakit_doctor::render::json(&r)).expect("report JSON");
        let errors = check(fault, &json, &vars(&name));
        if !errors.is_empty() {
            failed.push(format!("{name}:\n    {}", errors.join("\n    ")));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The rules themselves fail when they should (a catalogue that cannot fail proves
/// nothing): the healthy bundle does not pass as the no-device fault, and a wrong
/// severity, evidence value or unknown variable is reported.
#[test]
fn the_catalogue_rules_catch_a_wrong_answer() {
    let faults = catalogue();
    let by = |n: &str| {
        faults
            .iter()
            .find(|f| f["name"] == n)
            .unwrap_or_else(|| panic!("no fault {n}"))
            .clone()
    };
    let healthy = report(&Bundle::read(data().join("healthy.json.gz").to_str().unwrap()).unwrap());
    let healthy: Value = serde_json::from_str(&rdmakit_doctor::render::json(&healthy)).unwrap();
    let errs = check(&by("no_device"), &healthy, &BTreeMap::new());
    assert!(
        errs.iter().any(|e| e.contains("no RDK-H001 finding")),
        "{errs:?}"
    );
    assert!(errs.iter().any(|e| e.contains("exit 0")), "{errs:?}");

    let mut wrong = by("healthy");
    wrong["findings"][0]["severity"] = "warning".into();
    wrong["findings"][1]["evidence"] =
        serde_json::json!([{"path": "/sys/class/net/eth0/mtu", "value": "9000"}]);
    let errs = check(&wrong, &healthy, &BTreeMap::new());
    assert!(errs.iter().any(|e| e.contains("severity")), "{errs:?}");
    assert!(
        errs.iter()
            .any(|e| e.contains("no evidence /sys/class/net/eth0/mtu")),
        "{errs:?}"
    );

    let mut unknown = by("healthy");
    unknown["findings"][0]["subject"] = "{nope}".into();
    let errs = check(&unknown, &healthy, &BTreeMap::new());
    assert!(errs.iter().any(|e| e.contains("{nope}")), "{errs:?}");
}

/// Every bundle kept is catalogued, and every real fault has its row in
/// docs/fault-catalogue.md naming its bundle.
#[test]
fn bundles_catalogue_and_docs_agree() {
    let faults = catalogue();
    let doc = std::fs::read_to_string(repo().join("docs/fault-catalogue.md"))
        .expect("docs/fault-catalogue.md");
    let mut names = Vec::new();
    for f in &faults {
        let b = bundle_name(f);
        let row = doc
            .lines()
            .find(|l| l.starts_with('|') && l.contains(&format!("`{b}`")))
            .unwrap_or_else(|| panic!("docs/fault-catalogue.md has no row naming `{b}`"));
        for want in f["findings"].as_array().into_iter().flatten() {
            let code = text(want, "code");
            assert!(
                row.contains(&code),
                "the row of `{b}` does not name {code}: {row}"
            );
        }
        let exit = format!("| {} |", f["exit"]);
        assert!(
            row.contains(&exit),
            "the row of `{b}` does not say exit {}",
            f["exit"]
        );
        for key in ["plan", "how", "produced"] {
            assert!(!text(f, key).is_empty(), "{}: no {key}", text(f, "name"));
        }
        let produced = text(f, "produced");
        assert!(
            produced == "real" || produced.starts_with("simulated: "),
            "{}: produced is 'real' or 'simulated: WHY', not {produced:?}",
            text(f, "name")
        );
        names.push(b);
    }
    for e in std::fs::read_dir(data()).expect("tests/data/vm") {
        let n = e.expect("entry").file_name().to_string_lossy().into_owned();
        if n.ends_with(".json.gz") {
            assert!(
                names.contains(&n),
                "{n} is kept but not in scripts/vm/catalogue.json"
            );
        }
    }
}
