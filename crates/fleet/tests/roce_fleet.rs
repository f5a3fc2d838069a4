//! The Ethernet layer beneath RoCE across a fleet: five copies of the RoCE host
//! of fixtures/roce-mlx5-qos (real outputs put together, see its SOURCE), one
//! of them with PFC moved to priority 4 (the edited real `mlnx_qos` output of
//! fixtures/ethernet/mlnx-qos-pfc-prio4-edit): the fleet report names exactly
//! that node, with the PFC field as drift; and a fleet where one node's
//! Ethernet pause time is far above its cohort's names that node as an
//! outlier.

use std::path::PathBuf;

use rdmakit_fleet::input::{self, LoadOptions};
use rdmakit_fleet::report::{FleetReport, Options, ReasonKind, Status};
use rdmakit_testkit::bundle::{import, set_hostname, set_probe};

/// Five RoCE nodes, node 4 edited by `edit`, reported as a fleet.
fn fleet(name: &str, edit: impl Fn(&mut rdmakit_host::bundle::Bundle)) -> FleetReport {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut inputs = Vec::new();
    for i in 1..=5 {
        let host = format!("roce{i:02}");
        let mut b = import("roce-mlx5-qos");
        set_hostname(&mut b, &host);
        if i == 4 {
            edit(&mut b);
        }
        let p = dir.join(format!("{host}.json.gz"));
        b.write(p.to_str().unwrap()).unwrap();
        inputs.push(p.to_string_lossy().into_owned());
    }
    FleetReport::from_loaded(
        input::load(&inputs, &LoadOptions::default()),
        &Options::default(),
    )
}

/// The one node flagged, which must be roce04.
fn only_flagged(r: &FleetReport) -> &rdmakit_fleet::report::FleetNode {
    let flagged: Vec<&str> = r
        .nodes
        .iter()
        .filter(|n| n.status != Status::Ok)
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(flagged, ["roce04"], "{:#?}", r.nodes);
    r.nodes.iter().find(|n| n.name == "roce04").unwrap()
}

fn fixture(rel: &str) -> String {
    std::fs::read_to_string(rdmakit_testkit::fixtures_dir().join(rel)).unwrap()
}

#[test]
fn one_node_with_pfc_on_another_priority_is_drift() {
    let prio4 = fixture("ethernet/mlnx-qos-pfc-prio4-edit/mlnx_qos.txt");
    let r = fleet("roce_fleet_pfc", |b| set_probe(b, "dcb:eth0", &prio4));
    let n = only_flagged(&r);
    let pfc = n
        .reasons
        .iter()
        .find(|x| x.subject.as_deref() == Some("pfc[mlx5_0/1]"))
        .unwrap_or_else(|| panic!("{:#?}", n.reasons));
    assert_eq!(pfc.kind, ReasonKind::Drift);
    assert!(
        pfc.message.contains("pfc[mlx5_0/1] is 4; cohort"),
        "{}",
        pfc.message
    );
    assert!(pfc.message.contains("has 3 on 4 of 5"), "{}", pfc.message);
}

#[test]
fn one_node_paused_far_longer_than_its_cohort_is_an_outlier() {
    // tx_global_pause_duration is 5,961,284,324 µs in the real output; node 4
    // reads ten times that.
    let stats = fixture("roce-mlx5-qos/ethtool/eth0/stats.txt").replace(
        "tx_global_pause_duration: 5961284324",
        "tx_global_pause_duration: 59612843240",
    );
    let r = fleet("roce_fleet_pause", |b| {
        set_probe(b, "ethtool-stats:eth0", &stats)
    });
    let n = only_flagged(&r);
    let o = n
        .reasons
        .iter()
        .find(|x| x.kind == ReasonKind::Outlier)
        .unwrap_or_else(|| panic!("{:#?}", n.reasons));
    assert!(
        o.message
            .contains("link eth0 tx_global_pause_duration = 59612843240"),
        "{}",
        o.message
    );
}
