//! Collection must not load ib_core. On Debian 12's 6.1 kernel (VM tier, fault
//! catalogue `ib_core_missing`), opening a NETLINK_RDMA socket while ib_core is not
//! loaded makes the kernel load it (request_module "net-pf-16-proto-20"): `rdma dev`
//! after `rmmod ib_core` brings it back. So when /proc/modules lacks ib_core and its
//! module file is installed, collect asks no netlink question at all; when the file
//! is not there (a kernel without RDMA, like the build machines'), asking loads
//! nothing and tells whether the kernel has RDMA.

use std::path::PathBuf;

use rdmakit_host::bundle::Bundle;
use rdmakit_host::capture::import_capture;
use rdmakit_host::collect::collect;
use rdmakit_host::model::HostFacts;
use rdmakit_host::netlink::NlError;
use rdmakit_host::source::{Answer, Entry, Kind, Op, Recorder};

fn healthy_without_core_modules(ib_core_installed: bool) -> Bundle {
    let d = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/healthy"
    ));
    let mut b = import_capture(&d).expect("fixtures/healthy imports");
    let Some(Answer::Data(m)) = b.get(Op::Read, "/proc/modules").cloned() else {
        panic!("the capture has /proc/modules")
    };
    let kept: String = String::from_utf8_lossy(&m)
        .lines()
        .filter(|l| !(l.starts_with("ib_") || l.starts_with("rdma_")))
        .map(|l| format!("{l}\n"))
        .collect();
    b.set(Op::Read, "/proc/modules", Answer::Data(kept.into_bytes()));
    // rmmod removes /sys/module/<name> too (otherwise it reads as built in).
    let Some(Answer::Entries(sys)) = b.get(Op::Dir, "/sys/module").cloned() else {
        panic!("the capture lists /sys/module")
    };
    let sys = sys
        .into_iter()
        .filter(|e| !(e.name.starts_with("ib_") || e.name.starts_with("rdma_")))
        .collect();
    b.set(Op::Dir, "/sys/module", Answer::Entries(sys));
    if ib_core_installed {
        b.set(
            Op::Dir,
            "/lib/modules/6.1.0-57-amd64/kernel/drivers/infiniband/core",
            Answer::Entries(vec![
                Entry {
                    name: "ib_core.ko".into(),
                    kind: Kind::File,
                },
                Entry {
                    name: "ib_uverbs.ko".into(),
                    kind: Kind::File,
                },
            ]),
        );
    }
    b
}

/// Collects from `b` and says whether it asked a netlink question, and what
/// it probed.
fn collect_asks_netlink(b: &Bundle) -> (bool, HostFacts, Vec<String>) {
    let rec = Recorder::new(b);
    let f = collect(&rec, &Default::default());
    let probes = rec.keys(Op::Probe);
    let asked = probes
        .iter()
        .any(|k| k == "netlink_rdma" || k.starts_with("netlink:"));
    (asked, f, probes)
}

#[test]
fn ib_core_installed_but_unloaded_is_not_loaded_by_collecting() {
    let b = healthy_without_core_modules(true);
    let (asked, f, probes) = collect_asks_netlink(&b);
    assert!(!asked, "asked {probes:?}");
    assert_eq!(f.kernel.netlink_rdma, None);
    assert_eq!(f.netlink.devs, Err(NlError::NotAsked));
    assert!(f.modules.installed("ib_core") && !f.modules.installed("ib_umad"));
}

#[test]
fn without_the_module_file_netlink_is_asked() {
    let b = healthy_without_core_modules(false);
    assert!(collect_asks_netlink(&b).0);
    // With ib_core loaded, always.
    let d = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/healthy"
    ));
    let b = import_capture(&d).unwrap();
    assert!(collect_asks_netlink(&b).0);
}
