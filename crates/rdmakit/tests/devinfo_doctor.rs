//! `rdmakit doctor` and the soft NIC: `--device soft0` checks it alone (exit
//! 0 on a machine without kernel RDMA); plain `doctor` on a host without RDMA
//! devices adds its probe results; `--no-probe` leaves them out.

mod common;

use common::*;
use std::process::Command;

fn json(args: &[&str]) -> serde_json::Value {
    let out = rdmakit(args);
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn device_soft0_runs_the_checklist_on_the_soft_nic_and_passes() {
    let out = rdmakit(&["doctor", "--device", "soft0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("rdmakit soft NIC in userspace, not a host device"));
    assert!(text.contains("Active probes"));
    let v = json(&["doctor", "--device", "soft0", "--json"]);
    assert_eq!(v["schema"], "rdmakit.doctor/v1");
    let results = v["probes"][0]["results"].as_array().unwrap();
    assert!(results.iter().all(|r| r["passed"] == true), "{results:#?}");
    assert_eq!(v["checklist"][2]["result"], "pass");
}

#[test]
fn device_that_is_not_the_soft_nic_is_refused() {
    let out = rdmakit(&["doctor", "--device", "nosuch0"]);
    assert_eq!(out.status.code(), Some(2));
    let out = rdmakit(&["doctor", "--device", "soft0", "--no-probe"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn plain_doctor_adds_soft_nic_probes_only_without_host_devices() {
    let v = json(&["doctor", "--json"]);
    let host_devices = v["devices"].as_array().map_or(0, Vec::len);
    if host_devices == 0 {
        assert_eq!(v["probes"][0]["device"], "soft0");
        assert_eq!(
            v["probes"][0]["label"],
            "rdmakit soft NIC in userspace, not a host device"
        );
    } else {
        assert!(v.get("probes").is_none());
    }
    let v = json(&["doctor", "--json", "--no-probe"]);
    assert!(v.get("probes").is_none());
}

#[test]
fn memlock_limit_of_the_process_skips_large_registrations() {
    // Root's CAP_IPC_LOCK ignores RLIMIT_MEMLOCK (and so does the doctor): run
    // as nobody when we are root.
    let sh = format!(
        "ulimit -l 1024 && exec {} doctor --device soft0 --json",
        env!("CARGO_BIN_EXE_rdmakit")
    );
    let mut cmd = if rdmakit_testkit::is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "sh",
            "-c",
        ]);
        c
    } else {
        let mut c = Command::new("sh");
        c.arg("-c");
        c
    };
    let out = cmd
        .arg(&sh)
        .env_remove("RDMAKIT_SOFT_NAME")
        .env_remove("RDMAKIT_SOFT_ADDR")
        .output();
    let out = match out {
        Ok(o) if !o.stdout.is_empty() => o,
        other => {
            eprintln!("skipping: cannot run with ulimit -l 1024 here: {other:?}");
            return;
        }
    };
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["probes"][0]["memlock_limit"], 1 << 20);
    let results = v["probes"][0]["results"].as_array().unwrap();
    let skipped: Vec<&str> = results
        .iter()
        .filter(|r| r["skipped"] == true)
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(skipped.len(), 6, "{skipped:?}"); // 2 MiB … 64 MiB
    assert_eq!(skipped[0], "mr.reg 2 MiB");
    assert!(results
        .iter()
        .filter(|r| r["skipped"] == true)
        .all(|r| r["detail"]
            .as_str()
            .unwrap()
            .contains("RLIMIT_MEMLOCK (1 MiB)")));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn probe_on_a_replayed_host_with_devices_says_it_did_not_run() {
    let fx = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures"))
        .join("healthy");
    assert!(fx.is_dir(), "{} is part of the repository", fx.display());
    let v = json(&[
        "doctor",
        "--json",
        "--probe",
        "--from",
        fx.to_str().unwrap(),
    ]);
    assert!(v.get("probes").is_none());
    let notes = v["notes"].as_array().expect("notes");
    assert!(
        notes[0].as_str().unwrap().contains("need the live host"),
        "{notes:?}"
    );
    let v = json(&["doctor", "--json", "--from", fx.to_str().unwrap()]);
    assert!(v.get("notes").is_none() && v.get("probes").is_none());
}
