//! RDK-K011: when two sources of host facts disagree, the report says which and what
//! it means instead of "n/a". Each case is an edit of the real healthy capture that
//! no single running kernel can show; the real captures and the VM's bundles must
//! stay free of it (the check runs there and passes).

mod common;

use std::path::PathBuf;

use common::*;
use rdmakit_doctor::checks::Status;
use rdmakit_doctor::codes::Code;
use rdmakit_doctor::finding::Finding;
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::source::Kind;

fn k011(r: &Report) -> Vec<&Finding> {
    r.findings.iter().filter(|f| f.code == Code::K011).collect()
}

fn status(r: &Report, id: &str) -> Status {
    r.checks.iter().find(|c| c.id == id).unwrap().status.clone()
}

#[test]
fn real_captures_agree_with_themselves() {
    for name in ["healthy", "healthy-busy"] {
        let r = report(&import(name));
        assert!(k011(&r).is_empty(), "{name}\n{}", summary(&r));
        assert_eq!(status(&r, "kernel.consistency"), Status::Pass, "{name}");
    }
    for name in [
        "healthy",
        "ib_umad_missing",
        "port_down",
        "orphaned_by_fork",
    ] {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/vm")
            .join(format!("{name}.json.gz"));
        let b = Bundle::read(p.to_str().unwrap()).unwrap();
        let r = report(&b);
        assert!(k011(&r).is_empty(), "vm {name}\n{}", summary(&r));
        assert_eq!(status(&r, "kernel.consistency"), Status::Pass, "vm {name}");
    }
    // A tree of /sys/class/infiniband alone has nothing to compare.
    let r = report(&import("real-nics-procfs"));
    assert!(matches!(
        status(&r, "kernel.consistency"),
        Status::NotChecked(_)
    ));
}

/// The example: ib_core in /proc/modules, no /sys/class/infiniband. Before,
/// "device.present" answered "n/a (ib_core not loaded)".
#[test]
fn ib_core_loaded_without_its_class() {
    let mut b = import("healthy");
    remove(&mut b, "/sys/class/infiniband");
    let r = report(&b);
    let f = k011(&r);
    let host = f
        .iter()
        .find(|f| f.subject == "host")
        .unwrap_or_else(|| panic!("{}", summary(&r)));
    assert!(
        host.message
            .starts_with("ib_core is loaded but /sys/class/infiniband does not exist"),
        "{}",
        host.message
    );
    assert!(host
        .evidence
        .iter()
        .any(|e| e.path == "/proc/modules" && e.value == "ib_core: loaded"));
    assert!(host
        .evidence
        .iter()
        .any(|e| e.path == "/sys/class/infiniband" && e.value == "<absent>"));
    // netlink (rdma dev) still lists rxe0: the second disagreement, about the device.
    assert!(f.iter().any(|f| f.subject == "rxe0"), "{}", summary(&r));
    match status(&r, "device.present") {
        Status::NotChecked(w) => assert!(w.contains("RDK-K011"), "{w}"),
        s => panic!("device.present {s:?}"),
    }
}

#[test]
fn ib_uverbs_not_loaded_but_its_class_has_devices() {
    let mut b = import("healthy");
    edit(&mut b, "/proc/modules", |m| {
        m.lines()
            .filter(|l| !l.starts_with("ib_uverbs "))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    remove(&mut b, "/sys/module/ib_uverbs");
    let r = report(&b);
    assert!(
        k011(&r).iter().any(|f| f
            .message
            .starts_with("ib_uverbs is not loaded but /sys/class/infiniband_verbs has 1 device")),
        "{}",
        summary(&r)
    );
    match status(&r, "kernel.uverbs") {
        Status::NotChecked(w) => assert!(w.contains("RDK-K011"), "{w}"),
        s => panic!("kernel.uverbs {s:?}"),
    }
}

#[test]
fn kernel_config_of_another_kernel() {
    let mut b = import("healthy");
    set(
        &mut b,
        "/boot/config-6.1.0-57-amd64",
        "CONFIG_MODULES=y\n# CONFIG_INFINIBAND is not set\n",
    );
    let r = report(&b);
    let f = k011(&r);
    assert_eq!(f.len(), 1, "{}", summary(&r));
    assert!(
        f[0].message
            .starts_with("/boot/config-6.1.0-57-amd64 says CONFIG_INFINIBAND is not set"),
        "{}",
        f[0].message
    );
}

/// A uverbs device of an ib device sysfs does not have, while `rdma system` says the
/// netns mode is shared (in exclusive mode that is normal: the other namespace's
/// device keeps its uverbs entry).
#[test]
fn uverbs_device_without_its_ib_device_in_shared_mode() {
    let mut b = import("healthy");
    set(
        &mut b,
        "/sys/class/infiniband_verbs/uverbs1/ibdev",
        "mlx5_3\n",
    );
    set(
        &mut b,
        "/sys/class/infiniband_verbs/uverbs1/abi_version",
        "1\n",
    );
    add_entry(
        &mut b,
        "/sys/class/infiniband_verbs",
        "uverbs1",
        Kind::Symlink,
    );
    let r = report(&b);
    let f = k011(&r);
    assert_eq!(f.len(), 1, "{}", summary(&r));
    assert_eq!(f[0].subject, "uverbs1");
    assert!(
        f[0].message.contains(
            "belongs to mlx5_3, which is not in /sys/class/infiniband (netns mode shared)"
        ),
        "{}",
        f[0].message
    );
}
