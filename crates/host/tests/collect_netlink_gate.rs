//! Collection must not load ib_core. On Debian 12's 6.1 kernel (VM tier, fault
//! catalogue `ib_core_missing`), opening a NETLINK_RDMA socket while ib_core is not
//! loaded makes the kernel load it (request_module "net-pf-16-proto-20"): `rdma dev`
//! after `rmmod ib_core` brings it back. So when /proc/modules lacks ib_core and its
//! module file is installed, collect asks no netlink question at all; when the file
//! is not there (a kernel without RDMA, like the build machines'), asking loads
//! nothing and tells whether the kernel has RDMA.

use std::cell::RefCell;
use std::path::PathBuf;

use rdmakit_host::bundle::Bundle;
use rdmakit_host::capture::import_capture;
use rdmakit_host::collect::collect;
use rdmakit_host::netlink::NlError;
use rdmakit_host::source::{Answer, Entry, Errno, Kind, Meta, Op, Probe, Source};

/// A source that remembers every probe it was asked.
struct Watch<'a> {
    inner: &'a Bundle,
    probes: RefCell<Vec<Probe>>,
}

impl Source for Watch<'_> {
    fn read(&self, p: &str) -> Result<Vec<u8>, Errno> {
        self.inner.read(p)
    }
    fn read_dir(&self, p: &str) -> Result<Vec<Entry>, Errno> {
        self.inner.read_dir(p)
    }
    fn read_link(&self, p: &str) -> Result<String, Errno> {
        self.inner.read_link(p)
    }
    fn stat(&self, p: &str) -> Result<Meta, Errno> {
        self.inner.stat(p)
    }
    fn probe(&self, p: &Probe) -> Result<Vec<u8>, Errno> {
        self.probes.borrow_mut().push(p.clone());
        self.inner.probe(p)
    }
}

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

fn netlink_asked(w: &Watch) -> bool {
    w.probes
        .borrow()
        .iter()
        .any(|p| matches!(p, Probe::Netlink(_) | Probe::NetlinkRdma))
}

#[test]
fn ib_core_installed_but_unloaded_is_not_loaded_by_collecting() {
    let b = healthy_without_core_modules(true);
    let w = Watch {
        inner: &b,
        probes: RefCell::new(Vec::new()),
    };
    let f = collect(&w, &Default::default());
    assert!(!netlink_asked(&w), "asked {:?}", w.probes.borrow());
    assert_eq!(f.kernel.netlink_rdma, None);
    assert_eq!(f.netlink.devs, Err(NlError::NotAsked));
    assert!(f.modules.installed("ib_core") && !f.modules.installed("ib_umad"));
}

#[test]
fn without_the_module_file_netlink_is_asked() {
    let b = healthy_without_core_modules(false);
    let w = Watch {
        inner: &b,
        probes: RefCell::new(Vec::new()),
    };
    let _ = collect(&w, &Default::default());
    assert!(netlink_asked(&w));
    // With ib_core loaded, always.
    let d = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/healthy"
    ));
    let b = import_capture(&d).unwrap();
    let w = Watch {
        inner: &b,
        probes: RefCell::new(Vec::new()),
    };
    let _ = collect(&w, &Default::default());
    assert!(netlink_asked(&w));
}
