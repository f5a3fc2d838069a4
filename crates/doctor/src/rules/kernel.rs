//! Kernel layer: RDMA support, core modules, vendor RDMA drivers, uverbs.

use super::{config_infiniband, kernel_lacks_rdma, listing};
use crate::checks::{Ctx, Outcome};
use crate::codes::{Code, Severity};
use crate::finding::{Evidence, Finding};
use rdmakit_host::model::{HostFacts, ModuleState};
use rdmakit_host::source::Errno;

/// The uverbs ABI versions libibverbs (rdma-core) accepts in
/// /sys/class/infiniband_verbs/abi_version (IB_USER_VERBS_MIN_ABI_VERSION ..
/// IB_USER_VERBS_MAX_ABI_VERSION in libibverbs/kern-abi.h, checked by init.c; the
/// kernel has reported 6 since 2.6.x).
pub const UVERBS_ABI_MIN: u32 = 3;
pub const UVERBS_ABI_MAX: u32 = 6;

fn kernel_name(f: &HostFacts) -> String {
    f.kernel
        .release
        .text()
        .map_or("the running kernel".to_string(), |r| format!("kernel {r}"))
}

pub fn rdma_support(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    if !f.covers("sys") {
        return Outcome::NotChecked("the source holds no /sys".into());
    }
    if !kernel_lacks_rdma(f) {
        return Outcome::pass();
    }
    let mut fd = Finding::new(
        Code::K001,
        "host",
        format!("{} has no RDMA support", kernel_name(f)),
    )
    .evidence(Evidence::new("/sys/class/infiniband", "<absent>"));
    if let Some(Err(e)) = &f.kernel.netlink_rdma {
        fd = fd.evidence(Evidence::new(
            "socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA)",
            e.name(),
        ));
    }
    let mut modules_unsupported = false;
    if let Some(c) = &f.kernel.config {
        let show = |k: &str| match c.options.get(k).map(String::as_str) {
            None | Some("n") => "not set".to_string(),
            Some(v) => format!("={v}"),
        };
        fd = fd.evidence(Evidence::new(
            format!("{}: CONFIG_INFINIBAND", c.path),
            show("CONFIG_INFINIBAND"),
        ));
        if c.options.get("CONFIG_MODULES").is_none_or(|v| v == "n") {
            modules_unsupported = true;
            fd = fd.evidence(Evidence::new(
                format!("{}: CONFIG_MODULES", c.path),
                "not set",
            ));
        }
    }
    fd = fd.evidence(Evidence::of(&f.kernel.release));
    let remedy = if config_infiniband(f).is_some() {
        let also = if modules_unsupported {
            " This kernel cannot load modules either, so nothing can be added at run time."
        } else {
            ""
        };
        format!(
            "The kernel was built without CONFIG_INFINIBAND.{also} Boot a kernel built with \
             CONFIG_INFINIBAND=m (every distribution kernel is: Debian linux-image-amd64, \
             Ubuntu linux-generic, RHEL kernel), then load ib_core, ib_uverbs, rdma_ucm and \
             ib_umad. Without RDMA hardware, Soft-RoCE (rdma_rxe) on such a kernel, or \
             rdmakit's built-in software NIC, gives you a device to test against."
        )
    } else {
        "The kernel refuses NETLINK_RDMA and ib_core is not loaded: load it (modprobe ib_core); \
         if modprobe says the module is not found, boot a kernel built with \
         CONFIG_INFINIBAND=m."
            .to_string()
    };
    Outcome::Findings(vec![fd
        .remedy(remedy)
        .next("grep -E 'CONFIG_(INFINIBAND|MODULES)=' /boot/config-$(uname -r)")
        .next("modprobe ib_core && ls /sys/class/infiniband")])
}

pub fn modules(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    if kernel_lacks_rdma(f) {
        return Outcome::NotApplicable("the kernel has no RDMA support (RDK-K001)".into());
    }
    let state = |m| f.modules.state(m);
    if state("ib_core") == ModuleState::Unknown {
        return Outcome::NotChecked(
            "neither /proc/modules nor /sys/module is in the source".into(),
        );
    }
    let evidence_path = if f.modules.proc_modules.get().is_some() {
        f.modules.proc_modules.path.clone()
    } else {
        "/sys/module".to_string()
    };
    let mut out = Vec::new();
    let missing: Vec<&str> = ["ib_core", "ib_uverbs", "rdma_ucm"]
        .into_iter()
        .filter(|m| state(m) == ModuleState::Absent)
        .collect();
    if !missing.is_empty() {
        let sev = if missing.iter().any(|m| *m != "rdma_ucm") {
            Severity::Error
        } else {
            Severity::Warning
        };
        let why = if missing == ["rdma_ucm"] {
            "librdmacm (rdma_cm connection setup, perftest -R, rping, NFS/RDMA and iSER tools) cannot work"
        } else {
            "user space cannot open any RDMA device (ibv_get_device_list returns nothing or ENOSYS)"
        };
        let mut fd = Finding::new(
            Code::K002,
            "host",
            format!("not loaded: {}; {why}", missing.join(", ")),
        )
        .severity(sev);
        for m in &missing {
            fd = fd.evidence(Evidence::new(
                evidence_path.clone(),
                format!("{m}: not listed"),
            ));
        }
        out.push(
            fd.remedy(format!(
                "Load them now and at boot: modprobe -a {}; add them to \
                 /etc/modules-load.d/rdma.conf (rdma-core's rdma-load-modules@ service does \
                 this for installed hardware).",
                missing.join(" ")
            ))
            .next(format!("modprobe -a {}", missing.join(" ")))
            .next("lsmod | grep -E '^(ib_|rdma_)'"),
        );
    }
    if state("ib_umad") == ModuleState::Absent && state("ib_core") != ModuleState::Absent {
        let ib_ports = f.devices.iter().flat_map(|d| d.ports.iter()).any(|p| {
            matches!(
                p.link_layer.known(),
                Some(rdmakit_host::parse::sysfs::LinkLayer::InfiniBand)
            )
        });
        let mut fd = Finding::new(
            Code::K003,
            "host",
            "ib_umad is not loaded: MAD tools (sminfo, ibnetdiscover, perfquery) and opensm cannot reach the fabric",
        )
        .evidence(Evidence::new(evidence_path, "ib_umad: not listed"))
        .evidence(Evidence::new(
            "/sys/class/infiniband_mad",
            match &f.mad.listing {
                Ok(v) if v.is_empty() => "empty".to_string(),
                Err(e) if *e == Errno::ENOENT => "<absent>".to_string(),
                r => listing(r),
            },
        ));
        if ib_ports {
            fd = fd.severity(Severity::Error).remedy(
                "An InfiniBand port needs a subnet manager, which talks MADs through ib_umad: \
                 modprobe ib_umad (and add it to /etc/modules-load.d/rdma.conf).",
            );
        } else {
            fd = fd.remedy("modprobe ib_umad, and add it to /etc/modules-load.d/rdma.conf.");
        }
        out.push(fd.next("modprobe ib_umad && ls /dev/infiniband/"));
    }
    Outcome::Findings(out)
}

/// Netdev/core driver → the RDMA driver that must accompany it, and whether RDMA is
/// the usual reason to have that NIC (error) or an optional extra (warning).
const VENDOR_PAIRS: &[(&str, &str, bool)] = &[
    ("mlx5_core", "mlx5_ib", true),
    ("mlx4_core", "mlx4_ib", true),
    ("bnxt_en", "bnxt_re", false),
    ("ice", "irdma", false),
    ("i40e", "irdma", false),
    ("cxgb4", "iw_cxgb4", false),
    ("qede", "qedr", false),
    ("hns3", "hns_roce_hw_v2", false),
    ("be2net", "ocrdma", false),
    ("mana", "mana_ib", false),
];

pub fn vendor_driver(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    if kernel_lacks_rdma(f) {
        return Outcome::NotApplicable("the kernel has no RDMA support (RDK-K001)".into());
    }
    if f.modules.state("ib_core") == ModuleState::Unknown {
        return Outcome::NotChecked(
            "neither /proc/modules nor /sys/module is in the source".into(),
        );
    }
    let mut out = Vec::new();
    for (net, rdma, primary) in VENDOR_PAIRS {
        let net_loaded = matches!(
            f.modules.state(net),
            ModuleState::Loaded | ModuleState::BuiltIn
        );
        let nics: Vec<&str> = f
            .netdevs
            .iter()
            .filter(|n| n.driver.as_deref() == Some(*net))
            .map(|n| n.name.as_str())
            .collect();
        let nic_present = net_loaded || !nics.is_empty();
        if !nic_present || f.modules.state(rdma) != ModuleState::Absent {
            continue;
        }
        let on = if nics.is_empty() {
            String::new()
        } else {
            format!(" (netdevs {})", nics.join(", "))
        };
        let mut fd = Finding::new(
            Code::K004,
            *net,
            format!("{net} is loaded{on} but {rdma} is not: those NICs have no RDMA device"),
        )
        .evidence(Evidence::new(
            f.modules.proc_modules.path.clone(),
            format!("{net}: loaded"),
        ))
        .evidence(Evidence::new(
            f.modules.proc_modules.path.clone(),
            format!("{rdma}: not listed"),
        ))
        .remedy(format!(
            "modprobe {rdma}; if it fails, the RDMA part of the driver package is missing \
             (distribution kernel modules, or the vendor's OFED/driver package matching \
             this kernel)."
        ))
        .next(format!("modprobe {rdma} && rdma link show"));
        if !primary {
            fd = fd.severity(Severity::Warning);
        }
        out.push(fd);
    }
    Outcome::Findings(out)
}

/// rdma-core 26 and later find devices through RDMA netlink (GET_CHARDEV gives each
/// uverbs device and its driver ABI) and set the global ABI to 6 without reading
/// /sys/class/infiniband_verbs/abi_version (libibverbs/ibdev_nl.c); only when the
/// netlink query fails do they fall back to sysfs and read it.
const RDMA_CORE_NETLINK_DISCOVERY: u32 = 26;

/// The K005 finding when the global ABI file is out of range but the installed
/// rdma-core does not read it (it discovers devices through netlink, and the kernel
/// answered the chardev query): an odd file, not a broken stack. Found in the VM tier
/// (plan faults, abi_file_bind_mount): with "7" bind-mounted over the file,
/// Debian's rdma-core 44 still lists and opens rxe0.
fn abi_file_unused(f: &HostFacts, v: u32) -> Option<Finding> {
    let (ver, from) = f.rdma_core.version()?;
    if ver < RDMA_CORE_NETLINK_DISCOVERY {
        return None;
    }
    let answered: Vec<(&str, u64)> = f
        .netlink
        .devices
        .iter()
        .filter_map(|d| Some((d.name.as_str(), d.chardev.as_ref().ok()?.abi?)))
        .collect();
    if answered.is_empty() {
        return None;
    }
    let mut fd = Finding::new(
        Code::K005,
        "host",
        format!(
            "/sys/class/infiniband_verbs/abi_version says {v}, outside {UVERBS_ABI_MIN}..{UVERBS_ABI_MAX}, \
             but rdma-core {ver} does not read it: it finds devices through RDMA netlink \
             (GET_CHARDEV, since rdma-core {RDMA_CORE_NETLINK_DISCOVERY}), which answered for {}; \
             only an older rdma-core, or a tool reading the file, would refuse the devices",
            answered
                .iter()
                .map(|(d, _)| *d)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
    .severity(Severity::Info)
    .attr(&f.uverbs.abi_version)
    .evidence(Evidence::new(from, ver.to_string()));
    for (d, abi) in &answered {
        fd = fd.evidence(Evidence::new(
            format!("netlink RDMA_NLDEV_CMD_GET_CHARDEV {d} uverbs abi"),
            abi.to_string(),
        ));
    }
    Some(
        fd.remedy(
            "Every kernel since 2.6.x reports 6 here: find what changed the file (a bind \
             mount over sysfs, a container runtime's fake /sys, an out-of-tree ib_uverbs) \
             before an older rdma-core or a container image with one meets it.",
        )
        .next("findmnt /sys/class/infiniband_verbs/abi_version; cat /sys/class/infiniband_verbs/abi_version"),
    )
}

pub fn uverbs(cx: &Ctx) -> Outcome {
    let f = cx.facts;
    if kernel_lacks_rdma(f) {
        return Outcome::NotApplicable("the kernel has no RDMA support (RDK-K001)".into());
    }
    if f.devices.is_empty() {
        return Outcome::NotApplicable("no RDMA device".into());
    }
    if f.modules.state("ib_uverbs") == ModuleState::Absent {
        if !f.uverbs.devs.is_empty() {
            return Outcome::NotChecked(
                "ib_uverbs is not loaded, yet /sys/class/infiniband_verbs has devices: the \
                 sources disagree (RDK-K011)"
                    .into(),
            );
        }
        return Outcome::NotApplicable("ib_uverbs is not loaded (RDK-K002)".into());
    }
    if f.uverbs.listing.is_err() && f.modules.state("ib_uverbs") == ModuleState::Unknown {
        return Outcome::NotChecked("/sys/class/infiniband_verbs is not in the source".into());
    }
    let mut out = Vec::new();
    if let Some(v) = f.uverbs.abi_version.get() {
        if !(UVERBS_ABI_MIN..=UVERBS_ABI_MAX).contains(v) {
            if let Some(fd) = abi_file_unused(f, *v) {
                out.push(fd);
            } else {
                out.push(
                Finding::new(
                    Code::K005,
                    "host",
                    format!(
                        "kernel uverbs ABI {v} is outside what libibverbs accepts \
                         ({UVERBS_ABI_MIN}..{UVERBS_ABI_MAX}): libibverbs prints \"Fatal: kernel ABI \
                         version {v} doesn't match library version\" and finds no device"
                    ),
                )
                .attr(&f.uverbs.abi_version)
                .remedy(
                    "Use an rdma-core built for this kernel generation (distribution packages \
                     match their kernel), or a kernel whose ib_uverbs speaks ABI 6.",
                )
                .next("cat /sys/class/infiniband_verbs/abi_version; dpkg -l rdma-core libibverbs1"),
            );
            }
        }
    }
    for d in &f.devices {
        let has = f.uverbs.devs.iter().any(|u| u.ibdev.get() == Some(&d.name));
        if !has {
            let listing = listing(&f.uverbs.listing);
            out.push(
                Finding::new(
                    Code::K006,
                    d.name.clone(),
                    format!("{} has no uverbs device: user space cannot open it", d.name),
                )
                .evidence(Evidence::new("/sys/class/infiniband_verbs", listing))
                .remedy(
                    "The device registered without user-verbs support: reload ib_uverbs \
                     (modprobe -r ib_uverbs; modprobe ib_uverbs) and the device's driver; \
                     check dmesg for the driver's uverbs registration error.",
                )
                .next(format!(
                    "ls -l /sys/class/infiniband_verbs/; dmesg | grep -i {}",
                    d.name
                )),
            );
        }
    }
    Outcome::Findings(out)
}
