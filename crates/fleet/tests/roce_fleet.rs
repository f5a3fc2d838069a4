//! The Ethernet layer beneath RoCE across a fleet: five copies of the RoCE host
//! of fixtures/roce-mlx5-qos (real outputs put together, see its SOURCE), one
//! of them with PFC moved to priority 4 (the edited real `mlnx_qos` output of
//! fixtures/ethernet/mlnx-qos-pfc-prio4-edit): the fleet report names exactly
//! that node, with the PFC field as drift.

use std::path::PathBuf;

use rdmakit_fleet::input::{self, LoadOptions};
use rdmakit_fleet::report::{FleetReport, Options, ReasonKind, Status};
use rdmakit_testkit::bundle::{import, set_hostname, set_probe};

#[test]
fn one_node_with_pfc_on_another_priority_is_drift() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("roce_fleet");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let prio4 = std::fs::read_to_string(
        rdmakit_testkit::fixtures_dir().join("ethernet/mlnx-qos-pfc-prio4-edit/mlnx_qos.txt"),
    )
    .unwrap();
    let mut inputs = Vec::new();
    for i in 1..=5 {
        let host = format!("roce{i:02}");
        let mut b = import("roce-mlx5-qos");
        set_hostname(&mut b, &host);
        if i == 4 {
            set_probe(&mut b, "dcb:eth0", &prio4);
        }
        let p = dir.join(format!("{host}.json.gz"));
        b.write(p.to_str().unwrap()).unwrap();
        inputs.push(p.to_string_lossy().into_owned());
    }
    let r = FleetReport::from_loaded(
        input::load(&inputs, &LoadOptions::default()),
        &Options::default(),
    );
    let flagged: Vec<&str> = r
        .nodes
        .iter()
        .filter(|n| n.status != Status::Ok)
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(flagged, ["roce04"], "{:#?}", r.nodes);
    let n = r.nodes.iter().find(|n| n.name == "roce04").unwrap();
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
