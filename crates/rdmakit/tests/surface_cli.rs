//! What a user installs and types besides the doctor: `rdmakit irq` (replaying the
//! PCI bundle of crates/report/tests/data), completions and man pages generated
//! from the CLI, and `--html` on a replay.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_rdmakit");

fn pci_bundle() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../report/tests/data/mlx5-pci.json.gz"
    )
    .to_string()
}

#[test]
fn irq_replays_a_bundle_and_exits_1_on_remote_vectors() {
    let out = Command::new(BIN)
        .args(["irq", "--color", "never", "--from", &pci_bundle()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("mlx5_0 (0000:3b:00.0): NUMA node 0, local CPUs 0-3"),
        "{text}"
    );
    assert_eq!(text.matches("REMOTE").count(), 4, "{text}");
    assert!(text.contains("RDK-I005"), "{text}");
    assert!(
        text.contains("a software device: no interrupts of its own"),
        "{text}"
    );
    let json = Command::new(BIN)
        .args(["irq", "--json", "--from", &pci_bundle()])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(v["schema"], "rdmakit.irq/v1");
    assert_eq!(
        v["devices"][0]["vectors_per_cpu"],
        serde_json::json!([2, 1, 1, 1, 1, 1, 1, 1])
    );
}

#[test]
fn irq_on_a_software_device_is_not_a_failure() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/healthy");
    let out = Command::new(BIN)
        .args(["irq", "--from", root])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn completions_and_man_pages_come_from_the_cli() {
    for (shell, marker) in [
        ("bash", "_rdmakit()"),
        ("zsh", "#compdef rdmakit"),
        ("fish", "complete -c rdmakit"),
    ] {
        let out = Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(marker),
            "{shell}: {text:.200}"
        );
        assert!(
            // fish spells long options `-l html`, bash and zsh `--html`.
            text.contains("doctor") && text.contains("html"),
            "{shell}: no doctor/html completion"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["man", "--dir", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let page = std::fs::read_to_string(dir.path().join("rdmakit-doctor.1")).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH RDMAKIT-DOCTOR"),
        "{page:.300}"
    );
    assert!(page.contains("html"));
    for sub in [
        "rdmakit.1",
        "rdmakit-irq.1",
        "rdmakit-soft-status.1",
        "rdmakit-shim-install.1",
    ] {
        assert!(dir.path().join(sub).is_file(), "{sub}");
    }
}

#[test]
fn doctor_html_on_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let out = Command::new(BIN)
        .args([
            "doctor",
            "--from",
            &pci_bundle(),
            "--html",
            html.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "warnings only: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let v = rdmakit_report::embedded_json(&page).unwrap();
    assert_eq!(v["kind"], "doctor");
    assert!(v["generated"].as_str().unwrap().ends_with("UTC"));
    assert!(v["data"]["doctor"]["findings"].as_array().unwrap().len() >= 2);
    assert!(page.contains("data-plot=\"irq-0\""));
}
