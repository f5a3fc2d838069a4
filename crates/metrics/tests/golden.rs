//! The exposition of the real captures: golden files (insta), and the values checked
//! against the files they came from.

use std::path::PathBuf;
use std::time::Duration;

use rdmakit_doctor::checks::Config;
use rdmakit_doctor::report::Report;
use rdmakit_host::capture::import_capture;
use rdmakit_host::collect::collect;
use rdmakit_host::model::HostFacts;
use rdmakit_metrics::{render, Options};

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures"))
}

fn facts(name: &str) -> HostFacts {
    let b = import_capture(&fixtures().join(name)).expect("fixture imports");
    collect(&b, &b.header.options.clone())
}

fn expose(name: &str, opts: &Options) -> String {
    let f = facts(name);
    let r = Report::build(&f, &Config::default(), "rdmakit test", name);
    render(&f, &r, Duration::from_millis(1500), opts)
}

/// The value of the one sample of `metric` whose label text contains every `want`.
fn value(text: &str, metric: &str, want: &[&str]) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, v) = line.rsplit_once(' ')?;
        let name = series.split('{').next()?;
        if name == metric && want.iter().all(|w| series.contains(w)) {
            assert!(found.is_none(), "two samples match {metric} {want:?}");
            found = Some(v.parse().ok()?);
        }
    }
    found
}

fn sysfs(fixture: &str, rel: &str) -> String {
    std::fs::read_to_string(
        fixtures()
            .join(fixture)
            .join("root/sys/class/infiniband")
            .join(rel),
    )
    .unwrap_or_else(|e| panic!("{rel}: {e}"))
    .trim()
    .to_string()
}

#[test]
fn golden_healthy() {
    insta::assert_snapshot!("healthy", expose("healthy", &Options::default()));
}

#[test]
fn golden_real_nics() {
    insta::assert_snapshot!(
        "real_nics_procfs",
        expose("real-nics-procfs", &Options::default())
    );
}

#[test]
fn data_counters_are_words_times_four() {
    let t = expose("real-nics-procfs", &Options::default());
    for (dev, port) in [
        ("mlx4_0", "1"),
        ("mlx4_0", "2"),
        ("mlx5_0", "1"),
        ("hfi1_0", "1"),
    ] {
        let labels = [
            &format!("device=\"{dev}\"")[..],
            &format!("port=\"{port}\"")[..],
        ];
        for (file, metric) in [
            (
                "port_rcv_data",
                "node_infiniband_port_data_received_bytes_total",
            ),
            (
                "port_xmit_data",
                "node_infiniband_port_data_transmitted_bytes_total",
            ),
        ] {
            let raw = sysfs(
                "real-nics-procfs",
                &format!("{dev}/ports/{port}/counters/{file}"),
            );
            match raw.parse::<u64>() {
                Ok(words) => assert_eq!(
                    value(&t, metric, &labels),
                    Some(words as f64 * 4.0),
                    "{dev}/{port}/{file}"
                ),
                // "N/A (no PMA)": no series, and the unavailable marker instead.
                Err(_) => {
                    assert_eq!(value(&t, metric, &labels), None, "{dev}/{port}/{file}");
                    let c = format!("counter=\"counters/{file}\"");
                    let mut l = labels.to_vec();
                    l.push(&c);
                    assert_eq!(
                        value(&t, "rdmakit_infiniband_counters_unavailable", &l),
                        Some(1.0)
                    );
                }
            }
        }
        let packets = sysfs(
            "real-nics-procfs",
            &format!("{dev}/ports/{port}/counters/port_rcv_packets"),
        );
        if let Ok(p) = packets.parse::<u64>() {
            assert_eq!(
                value(&t, "node_infiniband_port_packets_received_total", &labels),
                Some(p as f64)
            );
        }
    }
}

#[test]
fn states_rates_info_and_hw_counters() {
    let t = expose("real-nics-procfs", &Options::default());
    let l = ["device=\"mlx4_0\"", "port=\"1\""];
    let state: f64 = sysfs("real-nics-procfs", "mlx4_0/ports/1/state")
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(value(&t, "node_infiniband_state_id", &l), Some(state));
    let rate = sysfs("real-nics-procfs", "mlx4_0/ports/1/rate");
    let gbps: f64 = rate.split(' ').next().unwrap().parse().unwrap();
    assert_eq!(
        value(&t, "node_infiniband_rate_bytes_per_second", &l),
        Some(gbps * 125_000_000.0)
    );
    let fw = sysfs("real-nics-procfs", "mlx5_0/fw_ver");
    assert_eq!(
        value(
            &t,
            "node_infiniband_info",
            &["device=\"mlx5_0\"", &format!("firmware_version=\"{fw}\"")]
        ),
        Some(1.0)
    );
    // mlx5 hw_counters: every numeric file is a series with its value.
    let dir =
        fixtures().join("real-nics-procfs/root/sys/class/infiniband/mlx5_0/ports/1/hw_counters");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let raw = std::fs::read_to_string(e.path()).unwrap();
        let Ok(v) = raw.trim().parse::<u64>() else {
            continue;
        };
        if name == "lifespan" {
            assert_eq!(
                value(
                    &t,
                    "rdmakit_infiniband_hw_counters_lifespan_seconds",
                    &["device=\"mlx5_0\"", "port=\"1\""]
                ),
                Some(v as f64 / 1000.0)
            );
            continue;
        }
        let c = format!("counter=\"{name}\"");
        assert_eq!(
            value(
                &t,
                "rdmakit_infiniband_hw_counters_total",
                &["device=\"mlx5_0\"", "port=\"1\"", &c]
            ),
            Some(v as f64),
            "{name}"
        );
        n += 1;
    }
    assert!(n > 10, "only {n} mlx5 hw_counters");
}

#[test]
fn healthy_has_netlink_resources_and_doctor_status() {
    let t = expose("healthy", &Options::default());
    assert_eq!(value(&t, "rdmakit_rdma_netlink_available", &[]), Some(1.0));
    assert!(value(
        &t,
        "rdmakit_rdma_resources",
        &["device=\"rxe0\"", "kind=\"pd\""]
    )
    .is_some());
    assert_eq!(
        value(
            &t,
            "rdmakit_doctor_check_status",
            &["check=\"device.present\"", "status=\"pass\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&t, "rdmakit_collect_duration_seconds", &[]),
        Some(1.5)
    );
}

#[test]
fn node_compat_off_leaves_out_node_names() {
    let t = expose("real-nics-procfs", &Options { node_compat: false });
    assert!(!t.contains("node_infiniband_"));
    assert!(t.contains("rdmakit_infiniband_hw_counters_total"));
}

/// Every family once, HELP then TYPE then its samples, no duplicate series, valid
/// names, and the output is identical from one run to the next.
#[test]
fn well_formed_and_stable() {
    for name in ["healthy", "healthy-busy", "real-nics-procfs"] {
        let t = expose(name, &Options::default());
        assert_eq!(t, expose(name, &Options::default()), "{name}: not stable");
        let mut families = std::collections::BTreeSet::new();
        let mut series = std::collections::BTreeSet::new();
        let mut current = String::new();
        for line in t.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let fam = rest.split(' ').next().unwrap().to_string();
                assert!(families.insert(fam.clone()), "{name}: {fam} twice");
                current = fam;
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (fam, kind) = rest.split_once(' ').unwrap();
                assert_eq!(fam, current);
                assert!(kind == "counter" || kind == "gauge");
                assert_eq!(kind == "counter", fam.ends_with("_total"), "{fam}");
            } else {
                let (s, v) = line.rsplit_once(' ').unwrap();
                assert_eq!(s.split('{').next().unwrap(), current, "{line}");
                assert!(v.parse::<f64>().is_ok(), "{line}");
                assert!(series.insert(s.to_string()), "{name}: duplicate {s}");
                assert!(rdmakit_metrics::text::valid_metric_name(&current));
            }
        }
    }
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &t);
        } else if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// "N/A (no PMA)" in counters/ and hw_counters/: the series is left out, the
/// unavailable marker is 1, nothing else changes.
#[test]
fn no_pma_counters_are_left_out_and_marked() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixtures().join("real-nics-procfs"), tmp.path());
    let port = tmp.path().join("root/sys/class/infiniband/mlx5_0/ports/1");
    std::fs::write(port.join("counters/port_xmit_data"), "N/A (no PMA)\n").unwrap();
    std::fs::write(port.join("hw_counters/out_of_buffer"), "N/A (no PMA)\n").unwrap();
    let b = import_capture(tmp.path()).unwrap();
    let f = collect(&b, &b.header.options.clone());
    let r = Report::build(&f, &Config::default(), "rdmakit test", "tmp");
    let t = render(&f, &r, Duration::ZERO, &Options::default());
    let l = ["device=\"mlx5_0\"", "port=\"1\""];
    assert_eq!(
        value(&t, "node_infiniband_port_data_transmitted_bytes_total", &l),
        None
    );
    assert!(value(&t, "node_infiniband_port_data_received_bytes_total", &l).is_some());
    for c in ["counters/port_xmit_data", "hw_counters/out_of_buffer"] {
        let c = format!("counter=\"{c}\"");
        assert_eq!(
            value(
                &t,
                "rdmakit_infiniband_counters_unavailable",
                &[l[0], l[1], &c]
            ),
            Some(1.0)
        );
    }
    assert_eq!(
        value(
            &t,
            "rdmakit_infiniband_hw_counters_total",
            &[l[0], l[1], "counter=\"out_of_buffer\""]
        ),
        None
    );
    assert!(t.contains("# TYPE rdmakit_infiniband_counters_unavailable gauge\n"));
}

/// fixtures/roce-mlx5-qos (the real mlx5_0 tree with mlx5's congestion
/// counters) copied, its counters set to known values: each congestion family
/// has the port's value, with HELP; a garbage value leaves its series out and
/// is counted as unavailable.
#[test]
fn congestion_counters_have_their_own_families() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("roce");
    let ok = std::process::Command::new("cp")
        .arg("-r")
        .arg(fixtures().join("roce-mlx5-qos"))
        .arg(&root)
        .status()
        .unwrap();
    assert!(ok.success());
    let hw = root.join("root/sys/class/infiniband/mlx5_0/ports/1/hw_counters");
    for (file, v) in [
        ("np_ecn_marked_roce_packets", "75000\n"),
        ("np_cnp_sent", "60000\n"),
        ("rp_cnp_handled", "3000\n"),
        ("rp_cnp_ignored", "not a number\n"),
    ] {
        std::fs::write(hw.join(file), v).unwrap();
    }
    let b = import_capture(&root).expect("the copy imports");
    let f = collect(&b, &b.header.options.clone());
    let r = Report::build(&f, &Config::default(), "rdmakit test", "roce");
    let t = render(&f, &r, Duration::from_millis(1), &Options::default());
    let port = ["device=\"mlx5_0\"", "port=\"1\""];
    for (metric, want) in [
        ("rdmakit_roce_ecn_marked_packets_total", 75000.0),
        ("rdmakit_roce_cnp_sent_total", 60000.0),
        ("rdmakit_roce_cnp_handled_total", 3000.0),
    ] {
        assert_eq!(value(&t, metric, &port), Some(want), "{metric}");
        assert!(
            t.contains(&format!("# HELP {metric} "))
                && t.contains(&format!("# TYPE {metric} counter")),
            "{metric}"
        );
    }
    assert_eq!(value(&t, "rdmakit_roce_cnp_ignored_total", &port), None);
    assert!(!t.contains("# HELP rdmakit_roce_cnp_ignored_total"));
    assert_eq!(
        value(
            &t,
            "rdmakit_infiniband_counters_unavailable",
            &["counter=\"hw_counters/rp_cnp_ignored\""]
        ),
        Some(1.0)
    );
    // The generic family keeps them too.
    assert_eq!(
        value(
            &t,
            "rdmakit_infiniband_hw_counters_total",
            &["counter=\"np_cnp_sent\""]
        ),
        Some(60000.0)
    );
}

/// The soft NIC's device-wide counters (the `soft_counters` probe's answer,
/// as `rdmakit collect` records it) land in the families a real device's
/// counters are in (beside a ConnectX capture's), as its port 1, each
/// family once: live and from a bundle alike.
#[test]
fn soft_counters_join_a_real_devices_families() {
    use rdmakit_host::source::{Answer, Op};
    let name = "real-nics-procfs";
    let mut b = import_capture(&fixtures().join(name)).expect("fixture imports");
    let text = "soft0 port_xmit_packets 10\nsoft0 port_rcv_packets 12\n\
                soft0 np_cnp_sent 3\nsoft0 retransmitted_packets 5\n";
    b.set(
        Op::Probe,
        "soft_counters",
        Answer::Data(text.as_bytes().to_vec()),
    );
    let f = collect(&b, &b.header.options.clone());
    assert_eq!(f.soft_devices.len(), 1);
    let r = Report::build(&f, &Config::default(), "rdmakit test", name);
    let t = render(&f, &r, Duration::ZERO, &Options::default());
    let dp = ["device=\"soft0\"", "port=\"1\""];
    let v = |m: &str, extra: &[&str]| value(&t, m, &[&dp[..], extra].concat());
    assert_eq!(
        v("node_infiniband_port_packets_transmitted_total", &[]),
        Some(10.0)
    );
    assert_eq!(
        v("node_infiniband_port_packets_received_total", &[]),
        Some(12.0)
    );
    let hw = "rdmakit_infiniband_hw_counters_total";
    assert_eq!(v(hw, &["counter=\"np_cnp_sent\""]), Some(3.0));
    assert_eq!(v(hw, &["counter=\"retransmitted_packets\""]), Some(5.0));
    assert_eq!(v(hw, &["counter=\"port_xmit_packets\""]), None);
    assert_eq!(v("rdmakit_roce_cnp_sent_total", &[]), Some(3.0));
    // A soft device is no kernel device: no info, state or rate series.
    assert_eq!(v("node_infiniband_state_id", &[]), None);
    assert!(!t.contains("node_infiniband_info{board_id=\"\",device=\"soft0\""));
    let types: Vec<&str> = t.lines().filter(|l| l.starts_with("# TYPE ")).collect();
    let unique: std::collections::BTreeSet<&&str> = types.iter().collect();
    assert_eq!(types.len(), unique.len());
    // The real devices' counter series are what they were without soft0.
    let plain = expose(name, &Options::default());
    let counters = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| {
                l.contains("_total{") && !l.contains("soft0") && !l.starts_with("rdmakit_doctor")
            })
            .map(str::to_string)
            .collect()
    };
    assert_eq!(counters(&t), counters(&plain));
}
