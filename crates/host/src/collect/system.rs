//! Host-wide facts: kernel, modules, uverbs/MAD classes, device nodes, netdevs, IRQ
//! affinity, memlock limits, rdma-core, the kernel log.

use std::collections::{BTreeMap, BTreeSet};

use super::Cx;
use crate::bounded::{self, Cap};
use crate::model::{
    Attr, DevNode, DevNodes, Device, Hostname, Kernel, KernelConfig, KernelLog, LibFile, MadClass,
    Memlock, Modules, Netdev, RdmaCore, UverbsClass, UverbsDev,
};
use crate::parse::proc::{Identity, Interrupts, KernelRelease, Limit};
use crate::parse::{kmsg, pkg, proc, sysfs, ParseError};
use crate::source::{Errno, Probe, MAX_READ};

/// Library directories searched for libibverbs.so.1, in libibverbs' own order of
/// likelihood on Debian/Ubuntu, then RHEL/SUSE.
pub(crate) const LIB_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/powerpc64le-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
];

/// Packages whose versions matter to RDMA.
const RDMA_PACKAGES: &[&str] = &[
    "rdma-core",
    "libibverbs1",
    "libibverbs",
    "ibverbs-providers",
    "ibverbs-utils",
    "libibverbs-utils",
    "librdmacm1",
    "librdmacm",
    "rdmacm-utils",
    "infiniband-diags",
    "perftest",
    "libibumad3",
    "libibverbs-dev",
    "mlnx-ofed-kernel-utils",
    "mlnx-ofed-kernel-dkms",
];

fn probe_answer(cx: &Cx, p: &Probe) -> Option<Result<Vec<u8>, Errno>> {
    match cx.src.probe(p) {
        // ENOENT: the source has no such probe (a captured tree, an old bundle).
        Err(e) if e == Errno::ENOENT => None,
        r => Some(r),
    }
}

/// The kernel's facts, without the NETLINK_RDMA probe ([`netlink_probe`] asks it once
/// the modules are known).
pub(super) fn kernel(cx: &Cx) -> Kernel {
    let release = cx.attr("/proc/sys/kernel/osrelease", proc::kernel_release);
    let ib_class = cx.src.read_dir("/sys/class/infiniband");
    Kernel {
        config: kernel_config(cx, release.get()),
        release,
        netlink_rdma: None,
        ib_class,
    }
}

/// socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA): Ok, or the errno.
pub(super) fn netlink_probe(cx: &Cx) -> Option<Result<(), Errno>> {
    probe_answer(cx, &Probe::NetlinkRdma).map(|r| r.map(|_| ()))
}

fn kernel_config(cx: &Cx, release: Option<&KernelRelease>) -> Option<KernelConfig> {
    let keep = |all: BTreeMap<String, String>| -> BTreeMap<String, String> {
        all.into_iter()
            .filter(|(k, _)| {
                k.contains("INFINIBAND") || k.contains("RDMA") || k == "CONFIG_MODULES"
            })
            .collect()
    };
    if let Ok(gz) = cx.src.read("/proc/config.gz") {
        // From a bundle or a tree, it may be anything: inflated at most as far as
        // a live source reads a file (a kernel's config is about 250 KB).
        let cap = Cap::new(MAX_READ as u64, "kernel configs");
        if let Ok(text) = bounded::gunzip("/proc/config.gz", &gz, cap) {
            return Some(KernelConfig {
                path: "/proc/config.gz".into(),
                options: keep(proc::kernel_config(&text)),
            });
        }
    }
    let path = format!("/boot/config-{}", release?.raw);
    let text = cx.src.read(&path).ok()?;
    Some(KernelConfig {
        path,
        options: keep(proc::kernel_config(&text)),
    })
}

pub(super) fn modules(cx: &Cx, release: Option<&KernelRelease>) -> Modules {
    let proc_modules = cx.attr_bytes("/proc/modules", |b| Ok(proc::modules(b)));
    let sys_module = cx
        .names("/sys/module")
        .into_iter()
        .map(|n| (n, true))
        .collect();
    let builtin = release
        .and_then(|r| {
            cx.src
                .read(&format!("/lib/modules/{}/modules.builtin", r.raw))
                .ok()
        })
        .map(|b| {
            String::from_utf8_lossy(&b)
                .lines()
                .filter_map(|l| l.rsplit('/').next())
                .map(|f| f.trim_end_matches(".ko").replace('-', "_"))
                .collect()
        })
        .unwrap_or_default();
    let core_files = match release {
        Some(r) => cx.src.read_dir(&format!(
            "/lib/modules/{}/kernel/drivers/infiniband/core",
            r.raw
        )),
        None => Err(Errno::ENOENT),
    };
    Modules {
        proc_modules,
        sys_module,
        builtin,
        core_files,
    }
}

pub(super) fn uverbs(cx: &Cx) -> UverbsClass {
    let base = "/sys/class/infiniband_verbs";
    let listing = cx.src.read_dir(base);
    let devs = listing
        .as_ref()
        .map(|ents| {
            ents.iter()
                .filter(|e| e.name.starts_with("uverbs"))
                .map(|e| {
                    let p = format!("{base}/{}", e.name);
                    UverbsDev {
                        ibdev: cx.string(&format!("{p}/ibdev")),
                        abi_version: cx.attr(&format!("{p}/abi_version"), sysfs::u32_value),
                        dev: cx.string(&format!("{p}/dev")),
                        name: e.name.clone(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    UverbsClass {
        abi_version: cx.attr(&format!("{base}/abi_version"), sysfs::u32_value),
        listing,
        devs,
    }
}

pub(super) fn mad(cx: &Cx) -> MadClass {
    let base = "/sys/class/infiniband_mad";
    MadClass {
        listing: cx.src.read_dir(base),
        abi_version: cx.attr(&format!("{base}/abi_version"), sysfs::u32_value),
    }
}

pub(super) fn dev_nodes(cx: &Cx) -> DevNodes {
    dev_nodes_at(cx, "", true)
}

/// `{root}/dev/infiniband` and its nodes; `access` also asks access(2) for the
/// collecting process.
pub(super) fn dev_nodes_at(cx: &Cx, root: &str, access: bool) -> DevNodes {
    let base = format!("{root}/dev/infiniband");
    let listing = cx.src.read_dir(&base);
    let nodes = listing
        .as_ref()
        .map(|ents| {
            ents.iter()
                .map(|e| {
                    let path = format!("{base}/{}", e.name);
                    DevNode {
                        meta: cx.src.stat(&path),
                        access_rw: if access {
                            probe_answer(cx, &Probe::AccessRw(path.clone())).map(|r| r.map(|_| ()))
                        } else {
                            None
                        },
                        path,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    DevNodes {
        path: base,
        listing,
        nodes,
    }
}

pub(super) fn netdevs(cx: &Cx) -> Vec<Netdev> {
    cx.names("/sys/class/net")
        .into_iter()
        .map(|name| {
            let p = format!("/sys/class/net/{name}");
            Netdev {
                mtu: cx.attr(&format!("{p}/mtu"), sysfs::u32_value),
                operstate: cx.string(&format!("{p}/operstate")),
                speed: speed_attr(cx, &format!("{p}/speed")),
                carrier_down_count: cx.attr(&format!("{p}/carrier_down_count"), sysfs::u64_value),
                driver: cx.link_basename(&format!("{p}/device/driver")),
                path: p,
                name,
            }
        })
        .collect()
}

/// A netdev's speed; "-1" (unknown, as virtio-net reports) is a value, not garbage.
fn speed_attr(cx: &Cx, path: &str) -> Attr<i64> {
    cx.attr(path, sysfs::i64_value)
}

/// The smp_affinity_list of every IRQ that belongs to a PCI RDMA device.
pub(super) fn irq_affinity(
    cx: &Cx,
    devices: &[Device],
    ints: Option<&Interrupts>,
) -> BTreeMap<u32, Attr<sysfs::CpuSet>> {
    let mut irqs = BTreeSet::new();
    for d in devices {
        if let Some(ints) = ints {
            irqs.extend(d.irq_lines(ints).iter().filter_map(|l| l.number));
        }
        if let Some(Ok(v)) = d.pci.as_ref().map(|p| &p.msi_irqs) {
            irqs.extend(v.iter().copied());
        }
    }
    irqs.into_iter()
        .map(|n| {
            (
                n,
                cx.attr(
                    &format!("/proc/irq/{n}/smp_affinity_list"),
                    proc::affinity_list,
                ),
            )
        })
        .collect()
}

fn memlock_of(text: &[u8]) -> Result<(Limit, Limit), ParseError> {
    let l = proc::limits(text)?;
    match (l.memlock_soft, l.memlock_hard) {
        (Some(s), Some(h)) => Ok((s, h)),
        _ => Err(ParseError {
            what: "Max locked memory",
            value: String::from_utf8_lossy(text).chars().take(80).collect(),
        }),
    }
}

/// CAP_IPC_LOCK is capability 14.
const CAP_IPC_LOCK: u32 = 14;

/// From /proc/<pid>/status: true when the effective uid is 0 or CapEff holds
/// CAP_IPC_LOCK (either lets the process pin memory beyond RLIMIT_MEMLOCK).
fn ipc_lock_of(text: &[u8]) -> Result<bool, ParseError> {
    let text = String::from_utf8_lossy(text);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().collect::<Vec<_>>())
    };
    let bad = || ParseError::new("/proc/<pid>/status Uid/CapEff", &text);
    let euid: u32 = field("Uid:")
        .and_then(|v| v.get(1).and_then(|s| s.parse().ok()))
        .ok_or_else(bad)?;
    let cap_eff = field("CapEff:")
        .and_then(|v| v.first().and_then(|s| u64::from_str_radix(s, 16).ok()))
        .ok_or_else(bad)?;
    Ok(euid == 0 || cap_eff & (1 << CAP_IPC_LOCK) != 0)
}

pub(super) fn memlock(cx: &Cx, pid: Option<u32>) -> Memlock {
    let probe = probe_answer(cx, &Probe::RlimitMemlock).map(|r| {
        r.and_then(|b| proc::rlimit_probe(&String::from_utf8_lossy(&b)).map_err(|_| Errno::EINVAL))
    });
    Memlock {
        probe,
        self_limits: cx.attr_bytes("/proc/self/limits", memlock_of),
        pid: pid.map(|p| (p, cx.attr_bytes(&format!("/proc/{p}/limits"), memlock_of))),
        pid_ipc_lock: pid.map(|p| cx.attr_bytes(&format!("/proc/{p}/status"), ipc_lock_of)),
    }
}

pub(super) fn identity(cx: &Cx) -> Option<Identity> {
    let b = probe_answer(cx, &Probe::Identity)?.ok()?;
    proc::identity(&String::from_utf8_lossy(&b)).ok()
}

pub(super) fn hostname(cx: &Cx) -> Hostname {
    const KERNEL: &str = "/proc/sys/kernel/hostname";
    // "(none)" is the kernel's own value before anything set a name (an initramfs, a
    // fresh VM): the host has no name, which is not an unrecognized value.
    let kernel = match cx.src.read(KERNEL) {
        Ok(b) if super::strip_value(&b).trim() == "(none)" => crate::model::Attr {
            path: KERNEL.to_string(),
            raw: crate::model::Raw::Text("(none)".to_string()),
            value: None,
        },
        _ => cx.attr(KERNEL, proc::hostname),
    };
    Hostname {
        kernel,
        etc: cx.attr("/etc/hostname", proc::hostname),
    }
}

pub(super) fn rdma_core(cx: &Cx) -> RdmaCore {
    let packages = cx.attr_bytes("/var/lib/dpkg/status", |b| {
        Ok(pkg::dpkg_status(b)
            .into_iter()
            .filter(|p| RDMA_PACKAGES.contains(&p.name.as_str()))
            .collect())
    });
    let mut libibverbs = None;
    let mut provider_libs = Vec::new();
    let mut seen_provider_dirs = BTreeSet::new();
    for dir in LIB_DIRS {
        let so = format!("{dir}/libibverbs.so.1");
        if libibverbs.is_none() {
            let real_name = match cx.src.read_link(&so) {
                Ok(t) => Some(t.rsplit('/').next().unwrap_or_default().to_string()),
                Err(_) => cx.src.stat(&so).ok().map(|_| "libibverbs.so.1".to_string()),
            };
            if let Some(real_name) = real_name {
                libibverbs = Some(LibFile {
                    rdma_core: pkg::libibverbs_soname_version(&real_name).map(|(_, v)| v),
                    path: so,
                    real_name,
                });
            }
        }
        let pdir = format!("{dir}/libibverbs");
        if let Ok(ents) = cx.src.read_dir(&pdir) {
            if seen_provider_dirs.insert(pdir.clone()) {
                for e in ents {
                    if let Some((prov, abi)) = pkg::provider_lib_name(&e.name) {
                        provider_libs.push((format!("{pdir}/{}", e.name), prov, abi));
                    }
                }
            }
        }
    }
    let driver_files = cx.src.read_dir("/etc/libibverbs.d").map(|ents| {
        ents.iter()
            .filter(|e| e.name.ends_with(".driver"))
            .map(|e| {
                let path = format!("/etc/libibverbs.d/{}", e.name);
                let provs = cx
                    .src
                    .read(&path)
                    .ok()
                    .and_then(|b| sysfs::driver_file(&b).ok())
                    .unwrap_or_default();
                (path, provs)
            })
            .collect()
    });
    RdmaCore {
        packages,
        libibverbs,
        lib_dirs: LIB_DIRS.iter().map(|s| s.to_string()).collect(),
        driver_files,
        provider_libs,
    }
}

pub(super) fn kernel_log(cx: &Cx, file: Option<&str>) -> KernelLog {
    match file {
        Some(f) => KernelLog {
            source: f.to_string(),
            records: cx.src.read(f).map(|b| kmsg::kmsg(&b)),
        },
        None => KernelLog {
            source: "/dev/kmsg".into(),
            records: cx.src.probe(&Probe::Kmsg).map(|b| kmsg::kmsg(&b)),
        },
    }
}
