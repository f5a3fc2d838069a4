//! Fault variants derived from the real captures: each must fire exactly its code,
//! and no other rule may misfire.

mod common;

use common::*;
use rdmakit_doctor::checks::Config;
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_host::source::{Answer, Kind, Meta, Op};

const PORT: &str = "/sys/class/infiniband/rxe0/ports/1";

fn healthy() -> rdmakit_host::bundle::Bundle {
    import("healthy")
}

#[test]
fn port_down_netdev_down() {
    let base = report(&healthy());
    let mut b = healthy();
    set(&mut b, &format!("{PORT}/state"), "1: DOWN\n");
    set(&mut b, &format!("{PORT}/phys_state"), "3: Disabled\n");
    set(&mut b, "/sys/class/net/eth0/operstate", "down\n");
    let r = report(&b);
    assert_adds(&base, &r, &[Code::H002]);
    let f = r.findings.iter().find(|f| f.code == Code::H002).unwrap();
    assert!(
        f.message.contains("DOWN") && f.message.contains("Disabled"),
        "{}",
        f.message
    );
    assert!(f.remedy.contains("ip link set dev eth0 up"), "{}", f.remedy);
    assert!(f
        .evidence
        .iter()
        .any(|e| e.path.ends_with("operstate") && e.value == "down"));
    assert_eq!(r.checklist[1].result, "fail");
}

#[test]
fn ib_port_init_means_no_subnet_manager() {
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

#[test]
fn ib_umad_missing() {
    let base = report(&healthy());
    let mut b = healthy();
    edit(&mut b, "/proc/modules", |m| {
        m.lines()
            .filter(|l| !l.starts_with("ib_umad "))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    remove(&mut b, "/sys/module/ib_umad");
    remove(&mut b, "/sys/class/infiniband_mad");
    let r = report(&b);
    assert_adds(&base, &r, &[Code::K003]);
    let f = r.findings.iter().find(|f| f.code == Code::K003).unwrap();
    assert!(f.omission.is_some_and(|o| o.contains("ib_umad")));
    assert_eq!(r.checklist[0].result, "fail");
}

#[test]
fn core_modules_missing() {
    let base = report(&healthy());
    let mut b = healthy();
    edit(&mut b, "/proc/modules", |m| {
        m.lines()
            .filter(|l| !l.starts_with("rdma_ucm "))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    remove(&mut b, "/sys/module/rdma_ucm");
    let r = report(&b);
    assert_adds(&base, &r, &[Code::K002]);
    assert_eq!(
        r.findings
            .iter()
            .find(|f| f.code == Code::K002)
            .unwrap()
            .severity,
        Severity::Warning
    );
}

#[test]
fn no_provider_for_rxe() {
    let base = report(&healthy());
    let mut b = healthy();
    remove(&mut b, "/etc/libibverbs.d/rxe.driver");
    let r = report(&b);
    assert_adds(&base, &r, &[Code::L002]);
    assert!(r
        .findings
        .iter()
        .any(|f| f.code == Code::L002 && f.message.contains("IBV_SHOW_WARNINGS")));
}

#[test]
fn provider_library_missing() {
    let base = report(&healthy());
    let mut b = healthy();
    remove(
        &mut b,
        "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so",
    );
    let r = report(&b);
    assert_adds(&base, &r, &[Code::L002]);
}

#[test]
fn uverbs_abi_mismatch() {
    let base = report(&healthy());
    let mut b = healthy();
    set(&mut b, "/sys/class/infiniband_verbs/abi_version", "7\n");
    let r = report(&b);
    assert_adds(&base, &r, &[Code::K005]);
}

#[test]
fn uverbs_device_missing() {
    let base = report(&healthy());
    let mut b = healthy();
    remove(&mut b, "/sys/class/infiniband_verbs/uverbs0");
    let r = report(&b);
    assert_adds(&base, &r, &[Code::K006]);
}

#[test]
fn memlock_64k_non_root() {
    let base = report(&healthy());
    let mut b = healthy();
    edit(&mut b, "/proc/self/limits", |l| {
        l.replace(
            "Max locked memory         8388608              8388608",
            "Max locked memory         65536                65536",
        )
    });
    set_probe(
        &mut b,
        "identity",
        "uid=1000 euid=1000 gid=1000 egid=1000 groups=1000",
    );
    let r = report(&b);
    assert_adds(&base, &r, &[Code::A001]);
    let f = r.findings.iter().find(|f| f.code == Code::A001).unwrap();
    assert_eq!(f.severity, Severity::Error);
    assert!(f.message.contains("64 KiB"), "{}", f.message);
    assert_eq!(r.checklist[2].result, "fail");
}

#[test]
fn memlock_8m_non_root_is_a_warning() {
    let mut b = healthy();
    set_probe(
        &mut b,
        "identity",
        "uid=1000 euid=1000 gid=1000 egid=1000 groups=1000",
    );
    let r = report(&b);
    let f = r
        .findings
        .iter()
        .find(|f| f.code == Code::A001)
        .expect("A001");
    assert_eq!(f.severity, Severity::Warning);
}

#[test]
fn uverbs_node_not_accessible() {
    let base = report(&healthy());
    let mut b = healthy();
    set_probe(
        &mut b,
        "identity",
        "uid=1000 euid=1000 gid=1000 egid=1000 groups=1000",
    );
    edit(&mut b, "/proc/self/limits", |l| {
        l.replace(
            "8388608              8388608",
            "unlimited            unlimited",
        )
    });
    set_stat(
        &mut b,
        "/dev/infiniband/uverbs0",
        Meta {
            kind: Kind::Char,
            mode: 0o600,
            uid: 0,
            gid: 0,
            rdev: Some((231, 192)),
            size: 0,
        },
    );
    let r = report(&b);
    assert_adds(&base, &r, &[Code::A002]);
}

#[test]
fn dev_nodes_missing_in_a_container() {
    let base = report(&healthy());
    let mut b = healthy();
    remove(&mut b, "/dev/infiniband/uverbs0");
    let r = report(&b);
    assert_adds(&base, &r, &[Code::A004]);
}

#[test]
fn dmesg_dma_mapping_error() {
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

#[test]
fn dmesg_health_and_flaps() {
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

#[test]
fn kernel_log_unreadable_is_info_not_a_failure() {
    let base = report(&healthy());
    let mut b = healthy();
    b.set(
        Op::Probe,
        "kmsg",
        Answer::Err(rdmakit_host::source::Errno::EPERM),
    );
    let r = report(&b);
    assert_adds(&base, &r, &[Code::K010]);
    assert!(!r.fails(Severity::Warning));
}

#[test]
fn no_rdma_device_registered() {
    let base = report(&healthy());
    let mut b = healthy();
    remove(&mut b, "/sys/class/infiniband/rxe0");
    remove(&mut b, "/sys/class/infiniband_verbs/uverbs0");
    let r = report(&b);
    let codes = all_codes(&r);
    assert!(codes.contains(&Code::H001), "{}", summary(&r));
    assert!(codes.iter().all(|c| *c == Code::H001), "{}", summary(&r));
    let _ = base;
}

#[test]
fn roce_without_v2_gids() {
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
fn roce_without_ipv4_gid_recommends_the_global_ipv6_one() {
    let base = report(&healthy());
    let mut b = healthy();
    set(
        &mut b,
        &format!("{PORT}/gids/1"),
        "0000:0000:0000:0000:0000:0000:0000:0000\n",
    );
    let r = report(&b);
    assert_adds(&base, &r, &[Code::H006]);
    let rec = r.findings.iter().find(|f| f.code == Code::H007).unwrap();
    assert!(
        rec.message.starts_with("use GID index 2"),
        "{}",
        rec.message
    );
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

#[test]
fn rdma_core_far_from_kernel() {
    let base = report(&healthy());
    let mut b = healthy();
    edit(&mut b, "/var/lib/dpkg/status", |s| {
        s.replace("Version: 44.0-2", "Version: 17.1-1")
    });
    let r = report(&b);
    assert_adds(&base, &r, &[Code::L003]);
}

#[test]
fn libibverbs_missing() {
    let mut b = healthy();
    remove(&mut b, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1");
    edit(&mut b, "/var/lib/dpkg/status", |s| {
        s.split("\n\n")
            .filter(|st| !st.contains("Package: libibverbs1"))
            .collect::<Vec<_>>()
            .join("\n\n")
    });
    let r = report(&b);
    assert!(all_codes(&r).contains(&Code::L001), "{}", summary(&r));
    assert!(!all_codes(&r).contains(&Code::L002));
}

#[test]
fn kernel_without_rdma_like_this_build_machine() {
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
    assert_eq!(
        codes.into_iter().collect::<Vec<_>>(),
        vec![Code::K001],
        "{}",
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

#[test]
fn pci_device_healthy_baseline() {
    let r = report(&pci_host(&PciSpec::default()));
    let codes = codes_at(&r, Severity::Warning);
    assert!(codes.is_empty(), "{}", summary(&r));
    assert_eq!(r.checklist[3].result, "pass", "{}", summary(&r));
    insta::assert_snapshot!(summary(&r));
}

#[test]
fn all_irqs_on_cpu0() {
    let base = report(&pci_host(&PciSpec::default()));
    let r = report(&pci_host(&PciSpec {
        affinity: |_, _| "0".into(),
        ..PciSpec::default()
    }));
    assert_adds(&base, &r, &[Code::I004]);
    assert_eq!(r.checklist[3].result, "fail");
}

#[test]
fn fewer_vectors_than_cpus() {
    let base = report(&pci_host(&PciSpec::default()));
    let r = report(&pci_host(&PciSpec {
        vectors: 2,
        ..PciSpec::default()
    }));
    assert_adds(&base, &r, &[Code::I002]);
}

#[test]
fn legacy_intx() {
    let base = report(&pci_host(&PciSpec::default()));
    let r = report(&pci_host(&PciSpec {
        intx: true,
        ..PciSpec::default()
    }));
    // INTx only: no MSI-X vectors at all, and the INTx line itself.
    assert_adds(&base, &r, &[Code::I001, Code::I003]);
}

#[test]
fn irqs_on_remote_numa_node() {
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

#[test]
fn pcie_link_trained_down() {
    let base = report(&pci_host(&PciSpec::default()));
    let r = report(&pci_host(&PciSpec {
        link: ("8.0 GT/s PCIe", "8", "8.0 GT/s PCIe", "16"),
        ..PciSpec::default()
    }));
    assert_adds(&base, &r, &[Code::H004]);
}

#[test]
fn pcie_bridge_is_the_bottleneck() {
    let base = report(&pci_host(&PciSpec::default()));
    let r = report(&pci_host(&PciSpec {
        bridge: ("2.5 GT/s PCIe", "4"),
        ..PciSpec::default()
    }));
    assert_adds(&base, &r, &[Code::H004]);
    let f = r.findings.iter().find(|f| f.code == Code::H004).unwrap();
    assert!(f.message.contains("0000:00:02.0"), "{}", f.message);
}

#[test]
fn vendor_rdma_driver_missing() {
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

/// The seed's real case on the real busy capture: ibv_rc_pingpong (pid 342) gone,
/// one ib_write_bw (345) a zombie, the other (343) running.
#[test]
fn resources_held_by_dead_and_zombie_processes() {
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

/// `--pid`: the limit of that process counts, and so does its own privilege (a root
/// process or one with CAP_IPC_LOCK pins memory regardless) — found on live rxe in
/// the VM tier, where a root ibv_rc_pingpong was wrongly reported.
#[test]
fn memlock_of_another_process_honours_its_privilege() {
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
