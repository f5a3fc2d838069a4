//! tests/data/mlx5-pci.json.gz: the PCI device the doctor's IRQ and topology
//! views are shown on. This machine and the VM captures have no PCI RDMA device,
//! so the bundle is derived: the real Soft-RoCE capture fixtures/healthy plus the
//! real mlx5_0 sysfs tree of fixtures/real-nics-procfs placed as a PCI function
//! behind a bridge, with MSI-X vectors and their affinity synthesized by the
//! test builder the doctor's tests use too (rdmakit_testkit::bundle::pci_host). This test keeps
//! the file equal to what the builder makes; `RDMAKIT_UPDATE_FIXTURES=1` rewrites it.

use rdmakit_host::bundle::Bundle;
use rdmakit_testkit::bundle::{pci_host, PciSpec};

/// 8 CPUs, NUMA node 0 = CPUs 0-3, eight completion vectors pinned to CPUs 0-7
/// (four of them on the other node: RDK-I005), the HCA's link trained to x8 of
/// x16 (RDK-H004).
pub fn spec() -> PciSpec {
    PciSpec {
        cpus: 8,
        vectors: 8,
        numa_node: 0,
        local_cpulist: "0-3".into(),
        affinity: |i, _| i.to_string(),
        link: ("8.0 GT/s PCIe", "8", "8.0 GT/s PCIe", "16"),
        ..PciSpec::default()
    }
}

#[test]
fn mlx5_pci_bundle_is_what_the_builder_makes() {
    let mut built = pci_host(&spec());
    built.header.tool =
        "derived by crates/testkit/src/bundle.rs pci_host (see crates/report/tests/data/SOURCE)"
            .into();
    built.header.created_unix = 0;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/mlx5-pci.json.gz");
    if std::env::var_os("RDMAKIT_UPDATE_FIXTURES").is_some() {
        built.write(path).expect("writes");
    }
    let kept = Bundle::read(path).expect("tests/data/mlx5-pci.json.gz reads");
    assert_eq!(
        kept.keys(),
        built.keys(),
        "rerun with RDMAKIT_UPDATE_FIXTURES=1"
    );
    for (op, p) in built.keys() {
        assert_eq!(kept.get(op, &p), built.get(op, &p), "{op:?} {p}");
    }
}
