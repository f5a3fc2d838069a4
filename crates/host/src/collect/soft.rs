//! The soft NIC's devices, from [`Probe::SoftCounters`]: each device that
//! published device-wide counters becomes a software [`Device`] with one port
//! (1) holding them, the two packet counters under `counters` and the rest
//! under `hw_counters`, as on a real device. Nothing else of it is known
//! here (no sysfs), so every other attribute is absent; attribute paths are
//! `soft_counters:DEVICE/ports/1/...`, after the probe's bundle key.

use std::collections::BTreeMap;

use super::Cx;
use crate::model::{Attr, Device, DeviceKind, Port, Raw};
use crate::parse::soft::{self, SoftCounters};
use crate::parse::sysfs::Counter;
use crate::source::Probe;

/// The soft devices the source has counters of; none when it has no answer
/// (a host where nobody used the soft NIC, an older bundle, a `--root`
/// tree). An answer that does not parse is unrecognized, and gives none.
pub(super) fn devices(cx: &Cx) -> Vec<Device> {
    let Ok(bytes) = cx.src.probe(&Probe::SoftCounters) else {
        return Vec::new();
    };
    let key = Probe::SoftCounters.key();
    match soft::counters(&String::from_utf8_lossy(&bytes)) {
        Ok(v) => v.into_iter().map(|d| device(&key, d)).collect(),
        Err(e) => {
            cx.unrecognized.borrow_mut().push((key, e));
            Vec::new()
        }
    }
}

fn device(key: &str, d: SoftCounters) -> Device {
    let path = format!("{key}:{}", d.name);
    let port_path = format!("{path}/ports/1");
    let mut counters = BTreeMap::new();
    let mut hw_counters = BTreeMap::new();
    for (n, v) in d.counters {
        let (dir, map) = match soft::PORT_COUNTERS.contains(&n.as_str()) {
            true => ("counters", &mut counters),
            false => ("hw_counters", &mut hw_counters),
        };
        let a = Attr {
            path: format!("{port_path}/{dir}/{n}"),
            raw: Raw::Text(v.to_string()),
            value: Some(Counter::Value(v)),
        };
        map.insert(n, a);
    }
    let absent = |what: &str| format!("{path}/{what}");
    Device {
        name: d.name,
        real_path: path.clone(),
        kind: DeviceKind::Software,
        driver: None,
        provider: Some("soft".into()),
        node_type: Attr::absent(&absent("node_type")),
        node_guid: Attr::absent(&absent("node_guid")),
        sys_image_guid: Attr::absent(&absent("sys_image_guid")),
        fw_ver: Attr::absent(&absent("fw_ver")),
        hw_rev: Attr::absent(&absent("hw_rev")),
        hca_type: Attr::absent(&absent("hca_type")),
        board_id: Attr::absent(&absent("board_id")),
        node_desc: Attr::absent(&absent("node_desc")),
        parent: Attr::absent(&absent("parent")),
        pci: None,
        ports: vec![Port {
            num: 1,
            state: Attr::absent(&format!("{port_path}/state")),
            phys_state: Attr::absent(&format!("{port_path}/phys_state")),
            rate: Attr::absent(&format!("{port_path}/rate")),
            link_layer: Attr::absent(&format!("{port_path}/link_layer")),
            lid: Attr::absent(&format!("{port_path}/lid")),
            sm_lid: Attr::absent(&format!("{port_path}/sm_lid")),
            cap_mask: Attr::absent(&format!("{port_path}/cap_mask")),
            path: port_path,
            gids: Vec::new(),
            gid_slots: 0,
            counters,
            hw_counters,
        }],
        hw_counters: BTreeMap::new(),
        path,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::bundle::Bundle;
    use crate::collect::{collect, CollectOptions};
    use crate::source::{LiveSource, Recorder};

    /// What the CLI's registry reader answers is recorded in the bundle, and
    /// the bundle's replay gives the same soft device; a source that was
    /// given no reader has none.
    #[test]
    fn the_registrys_answer_is_recorded_and_replayed() {
        let tree = tempfile::tempdir().unwrap();
        let opts = CollectOptions::default();
        let live = LiveSource::new(tree.path()).with_soft_counters(Arc::new(|| {
            Some("soft0 np_cnp_sent 7\nsoft0 port_rcv_packets 700\n".into())
        }));
        let rec = Recorder::new(&live);
        let facts = collect(&rec, &opts);
        assert_eq!(facts.soft_devices.len(), 1);
        let b = Bundle::new(Bundle::header_now("test", opts.clone()), rec.into_records());
        let again = collect(&b, &opts);
        let p = &again.soft_devices[0].ports[0];
        assert_eq!(p.hw_counters["np_cnp_sent"].text(), Some("7"));
        assert_eq!(p.counters["port_rcv_packets"].text(), Some("700"));
        // Nobody counted on a soft device: nothing, as without a reader.
        let none = LiveSource::new(tree.path()).with_soft_counters(Arc::new(|| None));
        assert!(collect(&none, &opts).soft_devices.is_empty());
        assert!(collect(&LiveSource::new(tree.path()), &opts)
            .soft_devices
            .is_empty());
    }
}
