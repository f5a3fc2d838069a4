//! Host identity and inventory (`inventory` in the doctor's JSON) from the real
//! captures in fixtures/, and through a recorded bundle.

mod common;

use common::*;
use rdmakit_doctor::inventory::{Inventory, INPUT_NAME};
use rdmakit_doctor::render;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;
use rdmakit_host::source::Recorder;

fn inventory(b: &Bundle) -> Inventory {
    report(b)
        .inventory
        .expect("Report::build fills the inventory")
}

#[test]
fn healthy_rxe_capture_inventory() {
    let inv = inventory(&import("healthy"));
    // The capture holds no host name: the fleet names it after its input.
    assert_eq!(inv.hostname, None);
    assert!(inv.notes.iter().any(|n| n.starts_with("hostname:")));
    assert_eq!(inv.kernel.as_deref(), Some("6.1.0-57-amd64"));
    assert_eq!(inv.rdma_core.as_deref(), Some("44.0-2"));
    assert_eq!(inv.memlock.as_deref(), Some("8388608"));
    assert_eq!(inv.devices.len(), 1);
    let d = &inv.devices[0];
    assert_eq!(d.name, "rxe0");
    assert_eq!(d.kind, "software");
    assert_eq!(d.driver.as_deref(), Some("rdma_rxe"));
    assert_eq!(d.fw_ver.as_deref(), Some(""));
    assert_eq!(d.node_guid.as_deref(), Some("5054:00ff:fe12:3456"));
    assert!(d.pcie.is_none());
    let p = &d.ports[0];
    assert_eq!(p.state.as_deref(), Some("ACTIVE"));
    assert_eq!(p.phys_state.as_deref(), Some("LinkUp"));
    assert_eq!(p.rate_gbps, Some(2.5));
    assert_eq!(p.width.as_deref(), Some("1X"));
    assert_eq!(p.link_layer.as_deref(), Some("Ethernet"));
    assert_eq!(p.netdev.as_deref(), Some("eth0"));
    assert_eq!(p.netdev_mtu, Some(1500));
    // ibv_devinfo in the same capture (cmd/ibv_devinfo.out) says active_mtu 1024.
    assert_eq!(p.active_mtu, Some(1024));
    assert_eq!(p.max_mtu, None);
    assert!(p
        .mtu_source
        .as_deref()
        .unwrap()
        .contains("/sys/class/net/eth0/mtu"));
    assert_eq!(p.hw_counters.get("retry_exceeded_err"), Some(&0));
    assert_eq!(p.hw_counters.len(), 16);
}

#[test]
fn busy_capture_carries_raw_counter_values() {
    let inv = inventory(&import("healthy-busy"));
    let p = &inv.devices[0].ports[0];
    assert_eq!(p.hw_counters.get("completer_retry_err"), Some(&86));
    assert_eq!(p.hw_counters.get("duplicate_request"), Some(&2596));
}

#[test]
fn real_nics_inventory_keeps_three_devices_and_their_counters() {
    let inv = inventory(&import("real-nics-procfs"));
    let names: Vec<&str> = inv.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["hfi1_0", "mlx4_0", "mlx5_0"]);
    let mlx4 = &inv.devices[1];
    assert_eq!(mlx4.fw_ver.as_deref(), Some("2.31.5050"));
    assert_eq!(mlx4.hca_type.as_deref(), Some("MT4099"));
    assert_eq!(mlx4.board_id.as_deref(), Some("SM_1141000001000"));
    assert_eq!(mlx4.ports.len(), 2);
    assert_eq!(mlx4.ports[1].rate_gbps, Some(40.0));
    assert_eq!(mlx4.ports[1].width.as_deref(), Some("4X"));
    assert_eq!(mlx4.ports[1].counters.get("port_xmit_wait"), Some(&3846));
    let mlx5 = &inv.devices[2];
    assert_eq!(mlx5.node_guid.as_deref(), Some("0a7f:bc12:45ef:d23b"));
    assert_eq!(mlx5.ports[0].hw_counters.get("req_cqe_error"), Some(&3481));
    // An InfiniBand port's MTU is nowhere in sysfs: unknown, and said so.
    assert_eq!(mlx5.ports[0].active_mtu, None);
    assert!(inv
        .notes
        .iter()
        .any(|n| n.starts_with("active_mtu: unknown on 4")));
    assert_eq!(inv.kernel, None);
    assert_eq!(inv.rdma_core, None);
}

/// The host name is read through the Source like every other fact, so a bundle
/// recorded from a host carries it and its replay gives the same name.
#[test]
fn hostname_is_recorded_and_replayed() {
    let mut captured = import("healthy");
    captured.write_file("/proc/sys/kernel/hostname", b"gpu-node17\n");
    captured.write_file("/etc/hostname", b"ignored-when-the-kernel-has-one\n");
    let rec = Recorder::new(&captured);
    let facts = collect(&rec, &captured.header.options.clone());
    let bundle = Bundle::new(captured.header.clone(), rec.into_records());
    let reread = Bundle::from_bytes("mem", &bundle.to_json()).unwrap();
    for b in [&captured, &reread] {
        let inv = inventory(b);
        assert_eq!(inv.hostname.as_deref(), Some("gpu-node17"));
        assert_eq!(
            inv.hostname_source.as_deref(),
            Some("/proc/sys/kernel/hostname")
        );
    }
    assert_eq!(
        facts.node.hostname.best().map(|(n, _)| n),
        Some("gpu-node17")
    );

    // /etc/hostname when the kernel's is absent; garbage is not a name.
    let mut etc_only = import("healthy");
    etc_only.write_file("/etc/hostname", b"# comment\nnode02\n");
    assert_eq!(inventory(&etc_only).hostname.as_deref(), Some("node02"));
    let mut garbage = import("healthy");
    garbage.write_file("/proc/sys/kernel/hostname", b"not a host name\n");
    assert_eq!(inventory(&garbage).hostname, None);
}

#[test]
fn name_from_input_strips_extensions_and_root() {
    let mut inv = Inventory::default();
    inv.name_from_input("/sweeps/0412/node17.json.gz");
    assert_eq!(inv.hostname.as_deref(), Some("node17"));
    assert_eq!(inv.hostname_source.as_deref(), Some(INPUT_NAME));
    let mut inv = Inventory::default();
    inv.name_from_input("fixtures/healthy/root/");
    assert_eq!(inv.hostname.as_deref(), Some("healthy"));
    // A name read from the host wins.
    let mut inv = Inventory {
        hostname: Some("real".into()),
        ..Inventory::default()
    };
    inv.name_from_input("other.json");
    assert_eq!(inv.hostname.as_deref(), Some("real"));
}

/// The JSON reads back into the same inventory (what `rdmakit fleet` relies on).
#[test]
fn inventory_round_trips_through_the_doctor_json() {
    for name in ["healthy", "healthy-busy", "real-nics-procfs"] {
        let r = report(&import(name));
        let v: serde_json::Value = serde_json::from_str(&render::json(&r)).unwrap();
        assert_eq!(v["schema"], "rdmakit.doctor/v1");
        let back: Inventory = serde_json::from_value(v["inventory"].clone()).unwrap();
        assert_eq!(Some(back), r.inventory, "{name}");
    }
}

/// The mlx4 capture's InfiniBand port 1 with a GID table written in: the
/// inventory names the port by GID 0's interface id, as the fabric does;
/// a RoCE port (rxe) gets none.
#[test]
fn an_infiniband_port_is_named_by_gid_0s_interface_id() {
    use rdmakit_host::source::Kind;
    let mut b = real_nics("ib-host", &["mlx4_0"]);
    let ports = "/sys/class/infiniband/mlx4_0/ports/1";
    set_line(&mut b, &format!("{ports}/link_layer"), "InfiniBand");
    add_entry(&mut b, &format!("{ports}/gids"), "0", Kind::File);
    set_line(
        &mut b,
        &format!("{ports}/gids/0"),
        "fe80:0000:0000:0000:0002:c903:0010:9c82",
    );
    let inv = inventory(&b);
    let p = &inv.devices[0].ports[0];
    assert_eq!(p.num, 1);
    assert_eq!(p.port_guid.as_deref(), Some("0002:c903:0010:9c82"));
    let rxe = inventory(&import("healthy"));
    assert_eq!(rxe.devices[0].ports[0].port_guid, None);
    let text = serde_json::to_string(&inv).unwrap();
    assert!(
        text.contains(r#""port_guid":"0002:c903:0010:9c82""#),
        "{text}"
    );
}
