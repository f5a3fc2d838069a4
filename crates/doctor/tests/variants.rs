//! Fault variants derived from the real captures by EDITING them: each must fire
//! exactly its code, and no other rule may misfire.
//!
//! Only states the VM tier's real kernel cannot produce stay here, each named
//! `edited_*` with the reason: hardware (PCIe, MSI-X, IRQ placement, InfiniBand
//! link layer, firmware health, DMA errors of a PCI driver) and versions that cannot
//! be installed offline. Every fault that Debian 12's kernel with rxe and rdma-core 44
//! can really be put in is in the fault catalogue instead (scripts/vm/catalogue.json,
//! replayed from real bundles by vm_catalogue.rs): modules, devices, ports, GIDs,
//! MTU, providers, /dev nodes, memlock, namespaces, leaked QPs. The remaining tests
//! here exercise options (`--netdev`, `--expect-rate`, `--severity`) and garbage.

mod common;

use common::*;
use rdmakit_doctor::checks::Config;
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_host::source::{Answer, Op};

const PORT: &str = "/sys/class/infiniband/rxe0/ports/1";

fn healthy() -> rdmakit_host::bundle::Bundle {
    import("healthy")
}

/// Edit: an InfiniBand port waiting for a subnet manager; rxe is RoCE only, the VM
/// has no InfiniBand link layer.
#[test]
fn edited_ib_port_init_means_no_subnet_manager() {
    let base = report(&healthy());
    let mut b = healthy();
    set(&mut b, &format!("{PORT}/state"), "2: INIT\n");
    set(&mut b, &format!("{PORT}/link_layer"), "InfiniBand\n");
    set(&mut b, &format!("{PORT}/sm_lid"), "0x0\n");
    let r = report(&b);
    // The port is no longer RoCE, so the RoCE notes go away with it.
    let codes = all_codes(&r);
    assert!(codes.contains(&Code::H002), "{}", summary(&r));
    assert!(!codes.contains(&Code::H007) && !codes.contains(&Code::H008));
    let f = r.findings.iter().find(|f| f.code == Code::H002).unwrap();
    assert!(f.remedy.contains("subnet manager"), "{}", f.remedy);
    let _ = base;
}

/// Edit: the global uverbs ABI file says 7 and the capture holds no RDMA netlink
/// answers, the view an rdma-core older than 26 has (it reads that file); no kernel
/// reports anything but 6 and no older rdma-core is installable offline. The real
/// stack's answer to the same file (rdma-core 44 ignores it) is the catalogue's
/// abi_file_bind_mount.
#[test]
fn edited_uverbs_abi_mismatch_without_netlink_discovery() {
    let base = report(&healthy());
    let mut b = healthy();
    set(&mut b, "/sys/class/infiniband_verbs/abi_version", "7\n");
    let r = report(&b);
    assert_adds(&base, &r, &[Code::K005]);
}

/// Edit: a device registered without a uverbs device; rxe always registers one.
#[test]
fn edited_uverbs_device_missing() {
    let base = report(&healthy());
    let mut b = healthy();
    remove(&mut b, "/sys/class/infiniband_verbs/uverbs0");
    let r = report(&b);
    // The node /dev/infiniband/uverbs0 and netlink's chardev answer (uverbs0) stay:
    // two sources contradict the edited sysfs.
    assert_adds(&base, &r, &[Code::K006, Code::K011]);
    assert_eq!(
        r.findings.iter().filter(|f| f.code == Code::K011).count(),
        2,
        "{}",
        summary(&r)
    );
}

/// Edit: a PCI driver's DMA mapping error in the kernel log; rxe does no DMA.
#[test]
fn edited_dmesg_dma_mapping_error() {
    let base = report(&healthy());
    let mut b = healthy();
    let Some(Answer::Data(mut log)) = b.get(Op::Probe, "kmsg").cloned() else {
        panic!()
    };
    log.extend_from_slice(
        b"[   40.123456] rdma_rxe: rxe0: DMA mapping error while registering MR\n",
    );
    b.set(Op::Probe, "kmsg", Answer::Data(log));
    let r = report(&b);
    assert_adds(&base, &r, &[Code::K007]);
    assert!(r
        .findings
        .iter()
        .any(|f| f.code == Code::K007 && f.evidence.iter().any(|e| e.value.contains("40.123456"))));
}

/// Edit: a firmware health event (mlx5) and a NIC driver's link down/up lines;
/// virtio_net prints none of them when the link is set down.
#[test]
fn edited_dmesg_health_and_flaps() {
    let base = report(&healthy());
    let mut b = healthy();
    let Some(Answer::Data(mut log)) = b.get(Op::Probe, "kmsg").cloned() else {
        panic!()
    };
    for i in 0..4 {
        log.extend_from_slice(
            format!(
                "[  {}.000000] virtio_net virtio0 eth0: Link is Down\n",
                50 + i * 2
            )
            .as_bytes(),
        );
        log.extend_from_slice(
            format!(
                "[  {}.500000] virtio_net virtio0 eth0: Link is Up\n",
                50 + i * 2
            )
            .as_bytes(),
        );
    }
    log.extend_from_slice(b"[   60.000000] mlx5_core 0000:3b:00.0: device's health compromised - reached miss count\n");
    b.set(Op::Probe, "kmsg", Answer::Data(log));
    let r = report(&b);
    assert_adds(&base, &r, &[Code::K008, Code::K009]);
    let flap = r.findings.iter().find(|f| f.code == Code::K009).unwrap();
    assert_eq!(flap.subject, "eth0");
}

/// Edit: RoCE v1-only GIDs; rxe adds RoCE v2 GIDs only.
#[test]
fn edited_roce_without_v2_gids() {
    let base = report(&healthy());
    let mut b = healthy();
    for i in 0..3 {
        set(
            &mut b,
            &format!("{PORT}/gid_attrs/types/{i}"),
            "IB/RoCE v1\n",
        );
    }
    let r = report(&b);
    // H007 (which index to use) goes away: there is none.
    let codes = all_codes(&r);
    assert!(
        codes.contains(&Code::H005) && !codes.contains(&Code::H007),
        "{}",
        summary(&r)
    );
    let _ = base;
}

#[test]
fn netdev_restriction_for_the_gid() {
    let r = report_with(
        &healthy(),
        &Config {
            netdev: Some("eth1".into()),
            ..Config::default()
        },
    );
    assert!(all_codes(&r).contains(&Code::H006));
}

#[test]
fn expected_rate_not_met() {
    let base = report(&healthy());
    let r = report_with(
        &healthy(),
        &Config {
            expect_rate_gbps: Some(100.0),
            ..Config::default()
        },
    );
    assert_adds(&base, &r, &[Code::H003]);
}

/// Edit: rdma-core 17 on the 6.1 kernel; the guest can install only bookworm's
/// rdma-core 44 offline (the nearest reachable releases are < 3 years from 6.1).
#[test]
fn edited_rdma_core_far_from_kernel() {
    let base = report(&healthy());
    let mut b = healthy();
    edit(&mut b, "/var/lib/dpkg/status", |s| {
        s.replace("Version: 44.0-2", "Version: 17.1-1")
    });
    let r = report(&b);
    assert_adds(&base, &r, &[Code::L003]);
}

/// Edit: the build machines' kernel has no RDMA at all; the VM boots Debian's,
/// which has it.
#[test]
fn edited_kernel_without_rdma_like_this_build_machine() {
    let mut b = healthy();
    for p in [
        "/sys/class/infiniband",
        "/sys/class/infiniband_verbs",
        "/sys/class/infiniband_mad",
        "/sys/module/ib_core",
    ] {
        remove(&mut b, p);
    }
    edit(&mut b, "/proc/modules", |m| {
        m.lines()
            .filter(|l| !(l.starts_with("ib_") || l.starts_with("rdma_") || l.starts_with("iw_")))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    b.set(
        Op::Probe,
        "netlink_rdma",
        Answer::Err(rdmakit_host::source::Errno::EPROTONOSUPPORT),
    );
    let r = report(&b);
    let codes = codes_at(&r, Severity::Warning);
    // The edit keeps the capture's netlink answers (rxe0) and /dev/infiniband: a kernel
    // that refuses NETLINK_RDMA cannot have answered them (K011).
    assert_eq!(
        codes.into_iter().collect::<Vec<_>>(),
        vec![Code::K001, Code::K011],
        "{}",
        summary(&r)
    );
    drop_netlink(&mut b);
    remove(&mut b, "/dev/infiniband");
    let r = report(&b);
    assert_eq!(
        codes_at(&r, Severity::Warning)
            .into_iter()
            .collect::<Vec<_>>(),
        vec![Code::K001],
        "a consistent kernel-without-RDMA host: K001 alone\n{}",
        summary(&r)
    );
    assert_eq!(r.checklist[3].result, "n/a");
}

#[test]
fn garbage_values_become_findings_not_panics() {
    let mut b = healthy();
    set(&mut b, &format!("{PORT}/state"), "garbage\n");
    set(&mut b, &format!("{PORT}/rate"), "fast (very)\n");
    set(
        &mut b,
        "/sys/class/infiniband_verbs/abi_version",
        "\u{0}\u{ff}\n",
    );
    set(&mut b, "/proc/interrupts", "not interrupts at all\n");
    set(&mut b, "/sys/devices/system/cpu/online", "0-");
    set(&mut b, "/proc/self/limits", "\n");
    let r = report(&b);
    let h009: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.code == Code::H009)
        .map(|f| f.subject.as_str())
        .collect();
    assert!(
        h009.iter().any(|s| s.ends_with("/state")),
        "{}",
        summary(&r)
    );
    assert!(h009.iter().any(|s| s.ends_with("/rate")), "{}", summary(&r));
    // An unreadable port state is "not checked", never "DOWN".
    assert!(!all_codes(&r).contains(&Code::H002));
}

/// Edit: a synthetic PCI device on the real mlx5_0 tree (no PCI RDMA NIC anywhere
/// here); the baseline for the hardware edits below.
#[test]
fn edited_pci_device_healthy_baseline() {
    let r = report(&pci_host(&PciSpec::default()));
    let codes = codes_at(&r, Severity::Warning);
    assert!(codes.is_empty(), "{}", summary(&r));
    assert_eq!(r.checklist[3].result, "pass", "{}", summary(&r));
    insta::assert_snapshot!(summary(&r));
}

/// Edit (hardware): IRQ placement.
#[test]
fn edited_all_irqs_on_cpu0() {
    let base = report(&pci_host(&PciSpec::default()));
    let r = report(&pci_host(&PciSpec {
        affinity: |_, _| "0".into(),
        ..PciSpec::default()
    }));
    assert_adds(&base, &r, &[Code::I004]);
    assert_eq!(r.checklist[3].result, "fail");
}

/// Edit (hardware): MSI-X vector count.
#[test]
fn edited_fewer_vectors_than_cpus() {
    let base = report(&pci_host(&PciSpec::default()));
    let r = report(&pci_host(&PciSpec {
        vectors: 2,
        ..PciSpec::default()
    }));
    assert_adds(&base, &r, &[Code::I002]);
}

/// Edit (hardware): legacy INTx.
#[test]
fn edited_legacy_intx() {
    let base = report(&pci_host(&PciSpec::default()));
    let r = report(&pci_host(&PciSpec {
        intx: true,
        ..PciSpec::default()
    }));
    // INTx only: no MSI-X vectors at all, and the INTx line itself.
    assert_adds(&base, &r, &[Code::I001, Code::I003]);
}

/// Edit (hardware): NUMA placement of IRQs.
#[test]
fn edited_irqs_on_remote_numa_node() {
    let base = report(&pci_host(&PciSpec {
        cpus: 8,
        vectors: 8,
        local_cpulist: "0-7".into(),
        ..PciSpec::default()
    }));
    let r = report(&pci_host(&PciSpec {
        cpus: 8,
        vectors: 8,
        numa_node: 1,
        local_cpulist: "4-7".into(),
        affinity: |i, _| (i % 4).to_string(),
        ..PciSpec::default()
    }));
    assert_adds(&base, &r, &[Code::I005]);
}

/// Edit (hardware): PCIe width.
#[test]
fn edited_pcie_link_trained_down() {
    let base = report(&pci_host(&PciSpec::default()));
    let r = report(&pci_host(&PciSpec {
        link: ("8.0 GT/s PCIe", "8", "8.0 GT/s PCIe", "16"),
        ..PciSpec::default()
    }));
    assert_adds(&base, &r, &[Code::H004]);
}

/// Edit (hardware): PCIe bridge speed.
#[test]
fn edited_pcie_bridge_is_the_bottleneck() {
    let base = report(&pci_host(&PciSpec::default()));
    let r = report(&pci_host(&PciSpec {
        bridge: ("2.5 GT/s PCIe", "4"),
        ..PciSpec::default()
    }));
    assert_adds(&base, &r, &[Code::H004]);
    let f = r.findings.iter().find(|f| f.code == Code::H004).unwrap();
    assert!(f.message.contains("0000:00:02.0"), "{}", f.message);
}

/// Edit: mlx5_core without mlx5_ib; no mlx5 NIC in the VM.
#[test]
fn edited_vendor_rdma_driver_missing() {
    let base = report(&pci_host(&PciSpec::default()));
    let mut b = pci_host(&PciSpec::default());
    edit(&mut b, "/proc/modules", |m| {
        m.lines()
            .filter(|l| !l.starts_with("mlx5_ib "))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    let r = report(&b);
    assert_adds(&base, &r, &[Code::K004]);
}

#[test]
fn severity_override() {
    let mut cfg = Config::default();
    cfg.overrides.insert(Code::H008, Severity::Error);
    let r = report_with(&healthy(), &cfg);
    assert!(r.fails(Severity::Error));
}

/// Edit: the leaked-resources case on the real busy capture: ibv_rc_pingpong (pid 342) gone,
/// one ib_write_bw (345) a zombie, the other (343) running. On Linux 6.1 a process's
/// files close before it turns zombie, so the kernel frees its objects at exit (the
/// catalogue's sigkill_holder); what outlives an owner on a real kernel is the
/// ownerless case (orphaned_by_fork, qp_leak_orphaned).
#[test]
fn edited_resources_held_by_dead_and_zombie_processes() {
    let mut b = import("healthy-busy");
    let base = report(&b);
    set(&mut b, "/proc/1/stat", "1 (init) S 0 1 1 0 -1\n");
    set(
        &mut b,
        "/proc/343/stat",
        "343 (ib_write_bw) S 1 343 1 0 -1\n",
    );
    set(&mut b, "/proc/343/comm", "ib_write_bw\n");
    set(
        &mut b,
        "/proc/345/stat",
        "345 (ib_write_bw) Z 1 345 1 0 -1\n",
    );
    set(&mut b, "/proc/345/comm", "ib_write_bw\n");
    let r = report(&b);
    assert_adds(&base, &r, &[Code::R001]);
    let mut subjects: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.code == Code::R001)
        .map(|f| f.subject.as_str())
        .collect();
    subjects.sort();
    assert_eq!(subjects, ["pid 342", "pid 345"], "{}", summary(&r));
    let zombie = r.findings.iter().find(|f| f.subject == "pid 345").unwrap();
    assert!(zombie.message.contains("zombie"), "{}", zombie.message);
}

/// Edit: `--pid`: the limit of that process counts, and so does its own privilege (a
/// root process or one with CAP_IPC_LOCK pins memory regardless) — found on live rxe
/// in the VM tier, where a root ibv_rc_pingpong was wrongly reported. The catalogue
/// has the real uid-1000 (memlock_pid) and root (sigkill_holder) cases; this keeps
/// the non-root CAP_IPC_LOCK branch.
#[test]
fn edited_memlock_of_another_process_honours_its_privilege() {
    let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         65536                65536                bytes     \n";
    let status = |uid: u32, capeff: &str| {
        format!(
            "Name:\tapp\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{uid}\t{uid}\t{uid}\t{uid}\nCapEff:\t{capeff}\n"
        )
    };
    let with = |st: String| {
        let mut b = healthy();
        b.header.options.pid = Some(4242);
        set(&mut b, "/proc/4242/limits", limits);
        set(&mut b, "/proc/4242/status", &st);
        report(&b)
    };
    let base = report(&healthy());
    let user = with(status(1000, "0000000000000000"));
    assert_adds(&base, &user, &[Code::A001]);
    let f = user.findings.iter().find(|f| f.code == Code::A001).unwrap();
    assert_eq!(f.subject, "pid 4242");
    assert!(f
        .evidence
        .iter()
        .any(|e| e.path == "/proc/4242/status" && e.value.contains("CAP_IPC_LOCK")));
    assert_adds(&base, &with(status(0, "000001ffffffffff")), &[]);
    // Non-root with CAP_IPC_LOCK (bit 14 = 0x4000).
    assert_adds(&base, &with(status(1000, "0000000000004000")), &[]);
}
