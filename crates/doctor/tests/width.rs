//! The doctor's human report fits the terminal: every real capture (fixtures/ and
//! the VM tier's bundles), plain and `--verbose`, grouped findings included, at 80
//! and 120 columns, has no line over the width — except a line that only a path
//! or URL too long for any line makes longer.

mod common;

use std::path::PathBuf;

use common::*;
use rdmakit_doctor::render::{self, HumanOptions};
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;

fn reports() -> Vec<(String, Report)> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("root").is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        out.push((name.clone(), report(&import(&name))));
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
        out.push((
            f.file_name().unwrap().to_string_lossy().into_owned(),
            report(&b),
        ));
    }
    assert!(out.len() >= 30, "only {} captures", out.len());
    out
}

/// A line over `width` is fine only when a path or URL in it is what makes it
/// long: without that one word it would fit.
fn over(text: &str, width: usize) -> Vec<String> {
    text.lines()
        .filter(|l| {
            let n = l.chars().count();
            if n <= width {
                return false;
            }
            let path = l
                .split(' ')
                .filter(|w| w.contains('/'))
                .map(|w| w.chars().count())
                .max()
                .unwrap_or(0);
            n - path > width
        })
        .map(|l| format!("{} cols: {l}", l.chars().count()))
        .collect()
}

#[test]
fn doctor_report_of_every_capture_fits_80_and_120_columns() {
    let mut rendered = 0;
    for (name, r) in reports() {
        for width in [80u16, 120] {
            for verbose in [false, true] {
                let text = render::human(&r, HumanOptions { verbose, width });
                let text = anstream::adapter::strip_str(&text).to_string();
                let bad = over(&text, usize::from(width));
                assert!(
                    bad.is_empty(),
                    "{name} at {width} columns (verbose {verbose}):\n{}\n\n{text}",
                    bad.join("\n")
                );
                rendered += 1;
            }
        }
    }
    assert!(rendered >= 120);
}

/// Grouped findings (eight ports alike, forty placeholder values on eight HCAs)
/// fit as well: the subjects and the evidence paths wrap.
#[test]
fn grouped_findings_fit_80_columns() {
    let mut b = import("gpud-h100");
    for h in ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5"] {
        for a in ["counters/port_xmit_wait", "hw_counters/rx_dct_connect"] {
            set(
                &mut b,
                &format!("/sys/class/infiniband/{h}/ports/1/{a}"),
                "unsupported\n",
            );
        }
    }
    let r = report(&b);
    assert!(!rdmakit_doctor::group::groups(&r.findings).is_empty());
    for verbose in [false, true] {
        let text = render::human(&r, HumanOptions { verbose, width: 80 });
        let text = anstream::adapter::strip_str(&text).to_string();
        let bad = over(&text, 80);
        assert!(bad.is_empty(), "{}\n\n{text}", bad.join("\n"));
        // The eight ports' counters and the eight placeholder values: two groups.
        assert_eq!(text.matches("(8 alike)").count(), 2, "{text}");
    }
}
