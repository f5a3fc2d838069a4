//! The doctor's human report fits the terminal: every real capture (fixtures/ and
//! the VM tier's bundles), plain and `--verbose`, grouped findings included, at 80
//! and 120 columns, has no line over the width — except a line that only a path
//! or URL too long for any line makes longer.

mod common;

use common::*;
use rdmakit_doctor::render::{self, HumanOptions};
use rdmakit_testkit::lines_over;

#[test]
fn doctor_report_of_every_capture_fits_80_and_120_columns() {
    let mut rendered = 0;
    for (name, b) in every_capture() {
        let r = report(&b);
        for width in [80u16, 120] {
            for verbose in [false, true] {
                let text = render::human(&r, HumanOptions { verbose, width });
                let text = anstream::adapter::strip_str(&text).to_string();
                let bad = lines_over(&text, usize::from(width));
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
        let bad = lines_over(&text, 80);
        assert!(bad.is_empty(), "{}\n\n{text}", bad.join("\n"));
        // The eight ports' counters and the eight placeholder values: two groups.
        assert_eq!(text.matches("(8 alike)").count(), 2, "{text}");
    }
}
