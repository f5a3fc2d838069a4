//! The shipped unit for the exporter (debian/rdmakit-metrics.service) is valid
//! and runs the exporter with least privilege: `systemd-analyze verify` says
//! nothing, `systemd-analyze security` rates its exposure at most
//! [`MAX_EXPOSURE`], and the settings that make it so are there. Fails, never
//! skips, when systemd-analyze is missing (package systemd).

use std::path::Path;
use std::process::Command;

const UNIT: &str = include_str!("../debian/rdmakit-metrics.service");

/// `systemd-analyze security`'s overall exposure, in its tenths (0-100).
const MAX_EXPOSURE: u32 = 30;

fn analyze() -> Command {
    let p = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("systemd-analyze is missing: apt-get install systemd");
    Command::new(p)
}

/// The unit with its ExecStart pointed at the binary under test (verify wants
/// the program to exist).
fn unit_file(dir: &Path) -> std::path::PathBuf {
    let f = dir.join("rdmakit-metrics.service");
    let text = UNIT.replace("/usr/bin/rdmakit", env!("CARGO_BIN_EXE_rdmakit"));
    assert_ne!(text, UNIT, "ExecStart no longer runs /usr/bin/rdmakit");
    std::fs::write(&f, text).unwrap();
    f
}

#[test]
fn the_exporter_unit_verifies_and_keeps_no_privilege() {
    let d = tempfile::tempdir().unwrap();
    let f = unit_file(d.path());
    let out = analyze()
        .args(["verify", "--man=no"])
        .arg(&f)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "verify: {said}"
    );

    let out = analyze()
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(format!("--threshold={MAX_EXPOSURE}"))
        .arg(&f)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exposure over {MAX_EXPOSURE}/100:\n{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let level = report
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no overall exposure in:\n{report}"));
    eprintln!("{level}");

    // What least privilege means here, setting by setting.
    let settings: Vec<&str> = UNIT.lines().map(str::trim).collect();
    for want in [
        "DynamicUser=yes",
        "CapabilityBoundingSet=",
        "AmbientCapabilities=",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
        "SystemCallFilter=@system-service",
    ] {
        assert!(settings.contains(&want), "{want} is missing from the unit");
    }
    assert!(
        !settings.iter().any(|l| l.starts_with("User=root")),
        "the exporter needs no root"
    );
}
