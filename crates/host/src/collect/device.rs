//! RDMA devices: /sys/class/infiniband/<dev>, its ports, GIDs, counters and the PCI
//! function (and bridges) behind it.

use std::collections::BTreeMap;

use super::Cx;
use crate::model::{Attr, Device, DeviceKind, Gid, Pci, PcieHop, PcieLink, Port, ResourceFile};
use crate::parse::sysfs;
use crate::source::{canonicalize, resolve_link, Entry, Errno, Probe};

const CLASS: &str = "/sys/class/infiniband";

pub(super) fn devices(cx: &Cx, listing: &Result<Vec<Entry>, Errno>) -> Vec<Device> {
    let Ok(entries) = listing else {
        return Vec::new();
    };
    entries.iter().map(|e| device(cx, &e.name)).collect()
}

/// True for "0000:3b:00.0" (domain:bus:device.function).
pub(crate) fn is_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// The libibverbs provider for a kernel driver name, or for a device name prefix.
pub(crate) fn provider_for(driver: Option<&str>, name: &str) -> Option<String> {
    const BY_DRIVER: &[(&str, &str)] = &[
        ("mlx5_core", "mlx5"),
        ("mlx4_core", "mlx4"),
        ("bnxt_en", "bnxt_re"),
        ("ice", "irdma"),
        ("i40e", "irdma"),
        ("irdma", "irdma"),
        ("cxgb4", "cxgb4"),
        ("qede", "qedr"),
        ("qed", "qedr"),
        ("hns3", "hns"),
        ("hns_roce_hw_v2", "hns"),
        ("efa", "efa"),
        ("hfi1", "hfi1verbs"),
        ("ib_qib", "ipathverbs"),
        ("vmw_pvrdma", "vmw_pvrdma"),
        ("erdma", "erdma"),
        ("mana", "mana"),
        ("be2net", "ocrdma"),
        ("ocrdma", "ocrdma"),
        ("ib_mthca", "mthca"),
        ("ionic", "ionic"),
        ("rdma_rxe", "rxe"),
        ("siw", "siw"),
    ];
    const BY_NAME: &[(&str, &str)] = &[
        ("mlx5_", "mlx5"),
        ("mlx4_", "mlx4"),
        ("rxe", "rxe"),
        ("siw", "siw"),
        ("bnxt_re", "bnxt_re"),
        ("irdma", "irdma"),
        ("efa_", "efa"),
        ("hfi1_", "hfi1verbs"),
        ("qib", "ipathverbs"),
        ("erdma_", "erdma"),
        ("hns_", "hns"),
        ("qedr", "qedr"),
        ("cxgb4_", "cxgb4"),
        ("ocrdma", "ocrdma"),
        ("vmw_pvrdma", "vmw_pvrdma"),
        ("mana_", "mana"),
        ("mthca", "mthca"),
        ("ionic_", "ionic"),
    ];
    if let Some(d) = driver {
        if let Some((_, p)) = BY_DRIVER.iter().find(|(k, _)| *k == d) {
            return Some(p.to_string());
        }
    }
    BY_NAME
        .iter()
        .find(|(k, _)| name.starts_with(k))
        .map(|(_, p)| p.to_string())
}

fn device(cx: &Cx, name: &str) -> Device {
    let path = format!("{CLASS}/{name}");
    let real_path = canonicalize(cx.src, &path).unwrap_or_else(|_| path.clone());
    let a = |attr: &str| format!("{path}/{attr}");

    let software = real_path.starts_with("/sys/devices/virtual/")
        || name.starts_with("rxe")
        || name.starts_with("siw");
    let pci = if software {
        None
    } else {
        cx.src
            .read_link(&a("device"))
            .ok()
            .map(|t| resolve_link(&format!("{real_path}/device"), &t))
            .and_then(|dev| canonicalize(cx.src, &dev).ok())
            .and_then(|dev| pci_dir(&dev))
            .map(|dir| pci(cx, &dir))
    };
    let kind = if software {
        DeviceKind::Software
    } else if pci.is_some() {
        DeviceKind::Pci
    } else {
        DeviceKind::Unknown
    };
    let driver = match (&pci, kind) {
        (Some(p), _) => p.driver.clone(),
        (None, DeviceKind::Software) if name.starts_with("siw") => Some("siw".into()),
        (None, DeviceKind::Software) => Some("rdma_rxe".into()),
        _ => None,
    };
    let provider = provider_for(driver.as_deref(), name);

    let mut ports = Vec::new();
    let mut nums: Vec<u32> = cx
        .names(&a("ports"))
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    nums.sort_unstable();
    for n in nums {
        ports.push(port(cx, &format!("{path}/ports/{n}"), n));
    }

    Device {
        name: name.to_string(),
        node_type: cx.attr(&a("node_type"), sysfs::node_type),
        node_guid: cx.attr(&a("node_guid"), sysfs::guid),
        sys_image_guid: cx.attr(&a("sys_image_guid"), sysfs::guid),
        fw_ver: cx.string(&a("fw_ver")),
        hw_rev: cx.string(&a("hw_rev")),
        hca_type: cx.string(&a("hca_type")),
        board_id: cx.string(&a("board_id")),
        node_desc: cx.string(&a("node_desc")),
        parent: cx.string(&a("parent")),
        hw_counters: counters(cx, &a("hw_counters")),
        path,
        real_path,
        kind,
        driver,
        provider,
        pci,
        ports,
    }
}

/// The nearest directory at or above `dev` whose name is a PCI address (the device
/// link of irdma and of mlx5 sub-functions points at an auxiliary device below it).
fn pci_dir(dev: &str) -> Option<String> {
    let mut p = dev.to_string();
    loop {
        let base = p.rsplit('/').next().unwrap_or_default();
        if is_bdf(base) {
            return Some(p);
        }
        let cut = p.rfind('/')?;
        if cut == 0 {
            return None;
        }
        p.truncate(cut);
    }
}

fn pcie_link(cx: &Cx, dir: &str) -> PcieLink {
    PcieLink {
        current_speed: cx.attr(&format!("{dir}/current_link_speed"), sysfs::pcie_speed),
        current_width: cx.attr(&format!("{dir}/current_link_width"), sysfs::pcie_width),
        max_speed: cx.attr(&format!("{dir}/max_link_speed"), sysfs::pcie_speed),
        max_width: cx.attr(&format!("{dir}/max_link_width"), sysfs::pcie_width),
    }
}

fn pci(cx: &Cx, dir: &str) -> Pci {
    let bdf = dir.rsplit('/').next().unwrap_or_default().to_string();
    let f = |attr: &str| format!("{dir}/{attr}");
    let upstream = dir
        .split('/')
        .scan(String::new(), |acc, comp| {
            if !comp.is_empty() {
                acc.push('/');
                acc.push_str(comp);
            }
            Some((acc.clone(), comp.to_string()))
        })
        .filter(|(p, comp)| is_bdf(comp) && p != dir)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .map(|(p, comp)| PcieHop {
            link: pcie_link(cx, &p),
            bdf: comp,
            path: p,
        })
        .collect();
    let msi_irqs = cx.src.read_dir(&f("msi_irqs")).map(|ents| {
        let mut v: Vec<u32> = ents.iter().filter_map(|e| e.name.parse().ok()).collect();
        v.sort_unstable();
        v
    });
    let resources = cx
        .names(dir)
        .into_iter()
        .filter(|n| n.starts_with("resource") && n[8..].chars().all(|c| c.is_ascii_digit()))
        .filter(|n| n.len() > 8)
        .map(|n| {
            let path = f(&n);
            ResourceFile {
                meta: cx.src.stat(&path),
                access_rw: Some(cx.src.probe(&Probe::AccessRw(path.clone())).map(|_| ())),
                path,
            }
        })
        .collect();
    let mut netdevs = cx.names(&f("net"));
    netdevs.sort();
    Pci {
        driver: cx.link_basename(&f("driver")),
        numa_node: cx.attr(&f("numa_node"), sysfs::numa_node),
        local_cpulist: cx.attr(&f("local_cpulist"), sysfs::cpulist),
        link: pcie_link(cx, dir),
        upstream,
        msi_irqs,
        irq: cx.attr(&f("irq"), sysfs::u32_value),
        resources,
        netdevs,
        path: dir.to_string(),
        bdf,
    }
}

fn counters(cx: &Cx, dir: &str) -> BTreeMap<String, Attr<sysfs::Counter>> {
    cx.names(dir)
        .into_iter()
        .map(|n| {
            let a = cx.attr(&format!("{dir}/{n}"), sysfs::counter);
            (n, a)
        })
        .collect()
}

fn port(cx: &Cx, path: &str, num: u32) -> Port {
    let a = |attr: &str| format!("{path}/{attr}");
    let slots: Vec<u32> = cx
        .names(&a("gids"))
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    let mut gid_slots = slots.clone();
    gid_slots.sort_unstable();
    let mut gids = Vec::new();
    for i in &gid_slots {
        let gpath = format!("{path}/gids/{i}");
        // Empty slots read as all-zero GIDs; their gid_attrs fail with EINVAL, so
        // they are neither parsed further nor kept.
        let Ok(bytes) = cx.src.read(&gpath) else {
            continue;
        };
        let text = super::strip_value(&bytes);
        let gid = match sysfs::gid(&text) {
            Ok(g) => g,
            Err(e) => {
                cx.unrecognized.borrow_mut().push((gpath, e));
                continue;
            }
        };
        if sysfs::gid_is_zero(&gid) {
            continue;
        }
        gids.push(Gid {
            index: *i,
            gid_type: cx.attr(&format!("{path}/gid_attrs/types/{i}"), sysfs::gid_type),
            ndev: cx.string(&format!("{path}/gid_attrs/ndevs/{i}")),
            path: gpath,
            gid,
        });
    }
    let mut counters_map = counters(cx, &a("counters"));
    for (k, v) in counters(cx, &a("counters_ext")) {
        counters_map.entry(k).or_insert(v);
    }
    Port {
        num,
        state: cx.attr(&a("state"), sysfs::port_state),
        phys_state: cx.attr(&a("phys_state"), sysfs::phys_state),
        rate: cx.attr(&a("rate"), sysfs::rate),
        link_layer: cx.attr(&a("link_layer"), sysfs::link_layer),
        lid: cx.attr(&a("lid"), sysfs::hex_u32),
        sm_lid: cx.attr(&a("sm_lid"), sysfs::hex_u32),
        cap_mask: cx.attr(&a("cap_mask"), sysfs::hex_u32),
        gid_slots: gid_slots.len(),
        gids,
        counters: counters_map,
        hw_counters: counters(cx, &a("hw_counters")),
        path: path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_shape() {
        assert!(is_bdf("0000:3b:00.0"));
        assert!(!is_bdf("pci0000:00"));
        assert!(!is_bdf("ice.roce.0"));
    }

    #[test]
    fn pci_dir_walks_up_from_auxiliary_devices() {
        assert_eq!(
            pci_dir("/sys/devices/pci0000:00/0000:00:02.0/0000:3b:00.0/ice.roce.0").as_deref(),
            Some("/sys/devices/pci0000:00/0000:00:02.0/0000:3b:00.0")
        );
        assert_eq!(pci_dir("/sys/devices/virtual/net/eth0"), None);
    }

    #[test]
    fn provider_by_driver_then_name() {
        assert_eq!(
            provider_for(Some("mlx5_core"), "rocep59s0f0").as_deref(),
            Some("mlx5")
        );
        assert_eq!(provider_for(None, "mlx4_0").as_deref(), Some("mlx4"));
        assert_eq!(provider_for(None, "weird0"), None);
    }
}
