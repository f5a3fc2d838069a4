//! Properties of the robust statistics and of the analysis: a uniform fleet flags
//! nothing, and the order in which node reports arrive changes nothing.

use proptest::prelude::*;
use rdmakit_doctor::inventory::{Inventory, InventoryDevice, InventoryPort};
use rdmakit_fleet::node::NodeReport;
use rdmakit_fleet::outlier::{high_counters, low_rates, modified_z, CohortThresholds};
use rdmakit_fleet::render;
use rdmakit_fleet::report::{analyze, Options, Status};
use rdmakit_fleet::stats::Spread;

/// A permutation of 0..n from random sort keys.
fn permutation(keys: &[u32]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    idx.sort_by_key(|&i| (keys[i], i));
    idx
}

fn inventory(host: &str, fw: &str, rate: f64, errors: u64, devices: usize) -> Inventory {
    Inventory {
        hostname: Some(host.to_string()),
        hostname_source: Some("/proc/sys/kernel/hostname".into()),
        kernel: Some("6.1.0-57-amd64".into()),
        rdma_core: Some("44.0-2".into()),
        rdma_core_source: None,
        memlock: Some("unlimited".into()),
        devices: (0..devices)
            .map(|d| InventoryDevice {
                name: format!("mlx5_{d}"),
                kind: "pci".into(),
                driver: Some("mlx5_core".into()),
                fw_ver: Some(fw.to_string()),
                board_id: Some("MT_0000000223".into()),
                hca_type: Some("MT4123".into()),
                ports: vec![InventoryPort {
                    num: 1,
                    state: Some("ACTIVE".into()),
                    phys_state: Some("LinkUp".into()),
                    rate: Some(format!("{rate} Gb/sec (4X HDR)")),
                    rate_gbps: Some(rate),
                    width: Some("4X".into()),
                    link_layer: Some("InfiniBand".into()),
                    counters: [("symbol_error".to_string(), errors)].into_iter().collect(),
                    ..InventoryPort::default()
                }],
                ..InventoryDevice::default()
            })
            .collect(),
        links: Vec::new(),
        notes: Vec::new(),
    }
}

fn node(inv: Inventory) -> NodeReport {
    let v = serde_json::json!({
        "schema": "rdmakit.doctor/v1",
        "findings": [],
        "inventory": inv,
    });
    NodeReport::from_doctor_value(v, "prop").unwrap()
}

proptest! {
    #[test]
    fn uniform_samples_flag_nothing(x in 0.0f64..1e12, n in 3usize..60) {
        let v = vec![x; n];
        prop_assert!(low_rates(&v, &CohortThresholds::default()).is_empty());
        prop_assert!(high_counters(&v, &CohortThresholds::default()).is_empty());
        prop_assert_eq!(modified_z(x, &Spread::of(&v), 1.0), 0.0);
    }

    /// Values within 1 % of each other are one value to the statistics.
    #[test]
    fn near_uniform_samples_flag_nothing(
        base in 1.0f64..1e9,
        jitter in proptest::collection::vec(-0.01f64..0.01, 3..60),
    ) {
        let v: Vec<f64> = jitter.iter().map(|j| base * (1.0 + j)).collect();
        prop_assert!(low_rates(&v, &CohortThresholds::default()).is_empty());
        prop_assert!(high_counters(&v, &CohortThresholds::default()).is_empty());
    }

    #[test]
    fn flags_do_not_depend_on_order(
        v in proptest::collection::vec(0u32..2000, 3..40),
        keys in proptest::collection::vec(any::<u32>(), 40),
    ) {
        let v: Vec<f64> = v.into_iter().map(f64::from).collect();
        let perm = permutation(&keys[..v.len()]);
        let shuffled: Vec<f64> = perm.iter().map(|&i| v[i]).collect();
        let t = CohortThresholds::default();
        for f in [high_counters, low_rates] {
            let mut a: Vec<(usize, u64)> = f(&v, &t).iter().map(|x| (x.index, x.z.to_bits())).collect();
            let mut b: Vec<(usize, u64)> = f(&shuffled, &t)
                .iter()
                .map(|x| (perm[x.index], x.z.to_bits()))
                .collect();
            a.sort_unstable();
            b.sort_unstable();
            prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn a_fleet_of_identical_nodes_flags_nothing(
        n in 1usize..40,
        fw in "[0-9]{2}\\.[0-9]{2}\\.[0-9]{4}",
        rate in prop_oneof![Just(100.0f64), Just(200.0), Just(400.0)],
        errors in 0u64..1_000_000,
        devices in 1usize..9,
    ) {
        let nodes = (0..n)
            .map(|i| node(inventory(&format!("n{i}"), &fw, rate, errors, devices)))
            .collect();
        let r = analyze(nodes, vec![], vec![], &Options::default());
        prop_assert!(r.nodes.iter().all(|n| n.status == Status::Ok));
        prop_assert!(r.drift.is_empty());
        prop_assert!(r.outliers.is_empty());
        prop_assert_eq!(r.cohorts.len(), 1);
        prop_assert_eq!(r.summary.exit_code, 0);
    }

    #[test]
    fn the_report_does_not_depend_on_arrival_order(
        specs in proptest::collection::vec(
            (0usize..3, prop_oneof![Just(100.0f64), Just(50.0)], prop_oneof![Just(0u64), Just(5000)], 1usize..3),
            1..25,
        ),
        keys in proptest::collection::vec(any::<u32>(), 25),
    ) {
        let fws = ["20.31.1014", "20.35.2000", "22.36.1010"];
        let nodes: Vec<NodeReport> = specs
            .iter()
            .enumerate()
            .map(|(i, (fw, rate, err, devs))| node(inventory(&format!("node{i}"), fws[*fw], *rate, *err, *devs)))
            .collect();
        let perm = permutation(&keys[..nodes.len()]);
        let shuffled: Vec<NodeReport> = perm.iter().map(|&i| nodes[i].clone()).collect();
        let a = render::json(&analyze(nodes, vec![], vec![], &Options::default()));
        let b = render::json(&analyze(shuffled, vec![], vec![], &Options::default()));
        prop_assert_eq!(a, b);
    }
}
