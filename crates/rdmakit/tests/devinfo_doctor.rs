//! `rdmakit doctor` and the soft NIC: `--device soft0` checks it alone (exit
//! 0 on a machine without kernel RDMA); plain `doctor` on a host without RDMA
//! devices adds its probe results; `--no-probe` leaves them out.

use std::process::Command;

fn rdmakit(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rdmakit"))
        .args(args)
        .env_remove("RDMAKIT_SOFT_NAME")
        .env_remove("RDMAKIT_SOFT_ADDR")
        .env("NO_COLOR", "1")
        .output()
        .expect("run rdmakit")
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = rdmakit(args);
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn device_soft0_runs_the_checklist_on_the_soft_nic_and_passes() {
    let out = rdmakit(&["doctor", "--device", "soft0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("rdmakit soft NIC (userspace), not a host device"));
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
            "rdmakit soft NIC (userspace), not a host device"
        );
    } else {
        assert!(v.get("probes").is_none());
    }
    let v = json(&["doctor", "--json", "--no-probe"]);
    assert!(v.get("probes").is_none());
}
