//! The rules, one module per layer. Each is a pure function of the facts.

pub mod application;
pub mod congestion;
pub mod consistency;
pub mod counters;
pub mod ethernet;
pub mod ethernet_counters;
pub mod hardware;
pub mod irq;
pub mod kernel;
pub mod kernel_log;
pub mod library;
pub mod namespaces;
pub mod optics;
pub mod resources;

use rdmakit_host::model::{Device, HostFacts, ModuleState, Netdev, Port};
use rdmakit_host::source::Errno;

/// True when the running kernel has no RDMA support at all: no
/// /sys/class/infiniband, and either the kernel config says CONFIG_INFINIBAND is
/// not set, or (config unknown) the kernel refuses NETLINK_RDMA and ib_core is
/// neither loaded nor built in.
/// A directory listing as evidence: its names, space-separated, or
/// `<read failed: errno>`.
pub fn listing(r: &Result<Vec<rdmakit_host::source::Entry>, Errno>) -> String {
    match r {
        Ok(v) => v
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        Err(e) => format!("<read failed: {e}>"),
    }
}

pub fn kernel_lacks_rdma(f: &HostFacts) -> bool {
    if f.kernel.ib_class.is_ok() || !f.covers("sys") {
        return false;
    }
    match config_infiniband(f) {
        Some(v) => v == "n",
        None => {
            f.kernel.netlink_rdma == Some(Err(Errno::EPROTONOSUPPORT))
                && !matches!(
                    f.modules.state("ib_core"),
                    ModuleState::Loaded | ModuleState::BuiltIn
                )
        }
    }
}

/// uverbs devices (name, ib device) whose ib device is not in /sys/class/infiniband:
/// the uverbs class is not namespaced, so in exclusive RDMA netns mode a device of
/// another namespace leaves them behind. Empty when /sys/class/infiniband could not
/// be listed.
pub fn hidden_devices(f: &HostFacts) -> Vec<(&str, &str)> {
    let Ok(class) = &f.kernel.ib_class else {
        return Vec::new();
    };
    f.uverbs
        .devs
        .iter()
        .filter_map(|u| {
            let ib = u.ibdev.get()?;
            (!class.iter().any(|e| &e.name == ib)).then_some((u.name.as_str(), ib.as_str()))
        })
        .collect()
}

/// True when devices are registered but every one belongs to another network
/// namespace (RDK-K012 explains; "no device" would mislead).
pub fn all_devices_hidden(f: &HostFacts) -> bool {
    f.devices.is_empty()
        && !hidden_devices(f).is_empty()
        && matches!(&f.netlink.sys, Ok(s) if s.netns_mode == Some(0))
}

/// CONFIG_INFINIBAND as the kernel config says ("y", "m", "n"), if a config was read.
pub fn config_infiniband(f: &HostFacts) -> Option<&str> {
    let c = f.kernel.config.as_ref()?;
    Some(
        c.options
            .get("CONFIG_INFINIBAND")
            .map_or("n", String::as_str),
    )
}

/// The netdev a RoCE port runs over: the GID table's netdevs, else the software
/// device's parent, else the PCI function's netdevs.
pub fn port_netdev(dev: &Device, port: &Port) -> Option<String> {
    if let Some(n) = port
        .gids
        .iter()
        .find_map(|g| g.ndev.get().filter(|s| !s.is_empty()))
    {
        return Some(n.clone());
    }
    if let Some(p) = dev.parent.get().filter(|s| !s.is_empty()) {
        return Some(p.clone());
    }
    dev.pci.as_ref().and_then(|p| p.netdevs.first().cloned())
}

/// The netdev facts for a name.
pub fn netdev<'a>(f: &'a HostFacts, name: &str) -> Option<&'a Netdev> {
    f.netdevs.iter().find(|n| n.name == name)
}

/// "rxe0 port 1".
pub fn port_subject(dev: &Device, port: &Port) -> String {
    format!("{} port {}", dev.name, port.num)
}

/// Since when a device's counters count: its driver's loading, or for the
/// soft NIC's published counters the first use of its registry (they
/// outlive the processes that counted them).
pub(crate) fn counted_since(dev: &Device) -> &'static str {
    match dev.provider.as_deref() {
        Some("soft") if dev.kind == rdmakit_host::model::DeviceKind::Software => {
            "since the soft NIC's registry began counting"
        }
        _ => "since the driver loaded",
    }
}

/// Formats a byte count the way ulimit users think: "64 KiB", "8 MiB", "2 GiB".
pub fn human_bytes(b: u64) -> String {
    const UNITS: &[(u64, &str)] = &[
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (size, unit) in UNITS {
        if b >= *size {
            let v = b as f64 / *size as f64;
            return if (v - v.round()).abs() < 0.05 {
                format!("{} {unit}", v.round() as u64)
            } else {
                format!("{v:.1} {unit}")
            };
        }
    }
    format!("{b} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_units() {
        assert_eq!(human_bytes(65536), "64 KiB");
        assert_eq!(human_bytes(8388608), "8 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(100), "100 bytes");
    }
}
