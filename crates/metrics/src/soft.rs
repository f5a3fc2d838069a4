//! The soft NIC's device-wide counters ([`rdmakit_soft::registry::counters`])
//! under the families a real device's counters are in, as its port 1: the
//! packets in node_exporter's `node_infiniband_port_packets_*_total` (when
//! those are written), every transport counter in
//! `rdmakit_infiniband_hw_counters_total{counter}`, and the congestion loop's
//! in their own families ([`crate::expo::CONGESTION`]). Read on the live host
//! only (the registry is this host's), every user's summed.

use rdmakit_soft::registry::counters::{self, DeviceCounters, PORT_COUNTERS as SOFT_PORT};

use crate::expo::{CONGESTION, PORT_COUNTERS};
use crate::text::Family;

/// The counters of soft devices `names`, and of any other soft device a
/// user counted on; a device whose registry cannot be read is left out.
pub fn read(names: &[String]) -> Vec<DeviceCounters> {
    let mut all: std::collections::BTreeSet<String> = names.iter().cloned().collect();
    if !names.is_empty() {
        all.extend(rdmakit_soft::registry::device_names());
    }
    all.into_iter()
        .filter_map(|n| counters::read(&n).ok())
        .filter(|c| names.contains(&c.name) || c.total.any())
        .collect()
}

/// Adds `soft`'s series to the families in `fams` that a real device's
/// counters of the same names are in.
pub fn push(fams: &mut [Family], soft: &[DeviceCounters]) {
    for d in soft {
        let dp = || vec![("device", d.name.clone()), ("port", "1".to_string())];
        for (name, v) in d.total.named() {
            if SOFT_PORT.contains(&name) {
                let Some(c) = PORT_COUNTERS
                    .iter()
                    .find(|c| c.dir == "counters" && c.file == name)
                else {
                    continue;
                };
                let metric = format!("node_infiniband_{}", c.metric);
                if let Some(f) = fams.iter_mut().find(|f| f.name == metric) {
                    f.push(dp(), v);
                }
                continue;
            }
            if let Some(f) = fams
                .iter_mut()
                .find(|f| f.name == "rdmakit_infiniband_hw_counters_total")
            {
                let mut l = dp();
                l.push(("counter", name.to_string()));
                f.push(l, v);
            }
            if let Some((metric, _, _)) = CONGESTION.iter().find(|(_, file, _)| *file == name) {
                if let Some(f) = fams.iter_mut().find(|f| f.name == *metric) {
                    f.push(dp(), v);
                }
            }
        }
    }
}
