//! Bundles that `rdmakit collect` wrote inside the Soft-RoCE VM (scripts/vm, plan
//! `doctor`: Debian 12's 6.1 kernel with rdma_rxe, rdma-core 44, rxe0 on eth0), with
//! the fault each scenario created for real. Replaying them here checks the real-kernel
//! evidence on every `cargo test`, without a VM. Refresh them from
//! `target/vm/results/doctor/` after `scripts/vm/run` (see scripts/vm/README.md).

mod common;

use std::path::PathBuf;

use common::*;
use rdmakit_doctor::checks::Status;
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;

fn vm_bundle(name: &str) -> Bundle {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/vm")
        .join(format!("{name}.json.gz"));
    Bundle::read(p.to_str().unwrap()).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn status(r: &Report, id: &str) -> Status {
    r.checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id}"))
        .status
        .clone()
}

fn evidence(r: &Report, code: Code, path_end: &str) -> String {
    r.findings
        .iter()
        .filter(|f| f.code == code)
        .flat_map(|f| f.evidence.iter())
        .find(|e| e.path.ends_with(path_end))
        .unwrap_or_else(|| panic!("no {code:?} evidence {path_end}\n{}", summary(r)))
        .value
        .clone()
}

#[test]
fn vm_healthy_rxe() {
    let b = vm_bundle("healthy");
    let r = report(&b);
    assert!(
        codes_at(&r, Severity::Warning).is_empty(),
        "{}",
        summary(&r)
    );
    // the notes a live rxe on a 1500-byte virtio-net gets: GID index 1, MTU 1024
    assert_eq!(
        all_codes(&r),
        [Code::H007, Code::H008].into_iter().collect(),
        "{}",
        summary(&r)
    );
    for id in ["irq.vectors", "irq.affinity", "pcie.link"] {
        assert!(
            matches!(status(&r, id), Status::NotApplicable(_)),
            "{id}: {:?}",
            status(&r, id)
        );
    }
    for id in [
        "kernel.modules",
        "device.present",
        "port.state",
        "library.providers",
    ] {
        assert_eq!(status(&r, id), Status::Pass, "{id}\n{}", summary(&r));
    }
    assert_eq!(r.kernel.as_deref(), Some("6.1.0-57-amd64"));
}

#[test]
fn vm_ib_umad_unloaded() {
    let healthy = report(&vm_bundle("healthy"));
    let r = report(&vm_bundle("ib_umad_missing"));
    assert_adds(&healthy, &r, &[Code::K003]);
    assert_eq!(evidence(&r, Code::K003, "infiniband_mad"), "<absent>");
}

#[test]
fn vm_port_down() {
    let healthy = report(&vm_bundle("healthy"));
    let r = report(&vm_bundle("port_down"));
    assert_adds(&healthy, &r, &[Code::H002]);
    // what the kernel really reports for rxe when its netdev is set down
    assert_eq!(evidence(&r, Code::H002, "ports/1/state"), "1: DOWN");
    assert_eq!(
        evidence(&r, Code::H002, "ports/1/phys_state"),
        "3: Disabled"
    );
    assert_eq!(evidence(&r, Code::H002, "eth0/operstate"), "down");
    assert!(codes_at(&r, Severity::Error).contains(&Code::H002));
}

/// The seed's leaked-QP case on a real kernel (plan `doctor`, scenario
/// `orphaned_by_fork`): python3 (pid 269) created 4 RC QPs on rxe0 through
/// libibverbs, forked (pid 275 inherits the uverbs descriptor) and was killed with
/// SIGKILL. The kernel keeps the objects and stops naming an owner; doctor names the
/// process that keeps them alive, its descriptor, and the device's QP headroom.
#[test]
fn vm_objects_orphaned_by_a_killed_process_that_forked() {
    let healthy = report(&vm_bundle("healthy"));
    let b = vm_bundle("orphaned_by_fork");
    let r = report(&b);
    assert_adds(&healthy, &r, &[Code::R001]);
    let f = r.findings.iter().find(|f| f.code == Code::R001).unwrap();
    assert_eq!(f.subject, "rxe0");
    assert_eq!(f.severity, Severity::Error);
    assert!(
        f.message
            .starts_with("4 QPs, 1 CQ, 1 PD, 1 CTX on rxe0 have no owner")
            && f.message
                .contains("pid 275 (python3) still holds /dev/infiniband/uverbs0")
            && f.message.contains("5 of max_qp 1048560"),
        "{}",
        f.message
    );
    assert_eq!(
        evidence(&r, Code::R001, "/proc/275/fd/3"),
        "-> /dev/infiniband/uverbs0"
    );
    assert_eq!(
        evidence(&r, Code::R001, "RES_QP_GET rxe0"),
        "lqpn 19 without RES_PID or RES_KERN_NAME"
    );
    assert!(f.remedy.contains("Stop pid 275"), "{}", f.remedy);
    // Recorded with the device-limits probe; it predates the host name reads
    // (/proc/sys/kernel/hostname, /etc/hostname): those two are all it misses.
    assert_eq!(b.misses(), 2);
}

/// The bundles carry every answer the doctor asks for: nothing is missing on replay.
#[test]
fn vm_bundles_replay_completely() {
    for name in ["healthy", "ib_umad_missing", "port_down"] {
        let b = vm_bundle(name);
        let _ = report(&b);
        // These bundles predate the device-limits probe (ibv_query_device through
        // libibverbs, asked once per device: rxe0) and the host name reads
        // (/proc/sys/kernel/hostname, /etc/hostname); a replay reports the limits
        // check as "not checked", the host name as unknown, and nothing else may be
        // missing.
        assert_eq!(
            b.misses(),
            3,
            "{name}: replay asked something the bundle lacks"
        );
    }
}
