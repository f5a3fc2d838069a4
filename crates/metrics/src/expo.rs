//! Host facts and the doctor's report as metric families.
//!
//! node_exporter-compatible (same names, labels, units) for what its infiniband
//! collector exports:
//!
//! | metric | from |
//! |---|---|
//! | `node_infiniband_info{device,board_id,firmware_version,hca_type}` 1 | `<dev>/{board_id,fw_ver,hca_type}` |
//! | `node_infiniband_state_id{device,port}` | `ports/<n>/state` ("4: ACTIVE" → 4) |
//! | `node_infiniband_physical_state_id{device,port}` | `ports/<n>/phys_state` |
//! | `node_infiniband_rate_bytes_per_second{device,port}` | `ports/<n>/rate`, Gb/s × 125 000 000 |
//! | `node_infiniband_<name>_total{device,port}` | `ports/<n>/counters/*` and `counters_ext/*` ([`PORT_COUNTERS`]); `port_rcv_data`, `port_xmit_data` and their `_64` forms count 4-byte words and are multiplied by 4 |
//!
//! rdmakit's own, under `rdmakit_`:
//!
//! | metric | from |
//! |---|---|
//! | `rdmakit_infiniband_hw_counters_total{device,port,counter}` | `ports/<n>/hw_counters/*`, and `<dev>/hw_counters/*` with `port=""`; the soft NIC's published counters as its port 1 (`HostFacts::soft_devices`) |
//! | `rdmakit_infiniband_hw_counters_lifespan_seconds{device,port}` | `hw_counters/lifespan` (ms; a period, not a counter) |
//! | `rdmakit_roce_ecn_marked_packets_total{device,port}` | `hw_counters/np_ecn_marked_roce_packets`: RoCEv2 packets received CE-marked |
//! | `rdmakit_roce_cnp_sent_total{device,port}` | `hw_counters/np_cnp_sent`: CNPs the notification point sent |
//! | `rdmakit_roce_cnp_handled_total{device,port}` | `hw_counters/rp_cnp_handled`: CNPs that cut a sender's rate |
//! | `rdmakit_roce_cnp_ignored_total{device,port}` | `hw_counters/rp_cnp_ignored`: CNPs received and ignored |
//! | `rdmakit_infiniband_port_counters_total{device,port,counter}` | files in `counters/` that node_exporter does not name |
//! | `rdmakit_infiniband_counters_unavailable{device,port,counter}` 1 | a counter that reads "N/A (no PMA)", fails to read or is not a number; its series is left out |
//! | `rdmakit_rdma_netlink_available` | whether NETLINK_RDMA answered |
//! | `rdmakit_rdma_resources{device,kind}` | netlink resource summary (`rdma resource`) |
//! | `rdmakit_rdma_resources_by_owner_state{device,kind,state}` | tracked objects by their owner's liveness (alive, zombie, dead, kernel, unknown) |
//! | `rdmakit_doctor_findings{code,severity,layer}` | findings of the doctor, counted |
//! | `rdmakit_doctor_findings_by_severity{severity}` | same, by severity (always all three) |
//! | `rdmakit_doctor_check_status{check,layer,status}` | 1 for the check's status, 0 for the three others |
//! | `rdmakit_collect_duration_seconds` | how long reading the facts and running the doctor took |
//!
//! Names containing `_counter_` are avoided on purpose: `promtool check metrics`
//! rejects names that contain a metric type.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdmakit_doctor::checks::{Config, Status};
use rdmakit_doctor::report::Report;
use rdmakit_host::collect::{collect, CollectOptions};
use rdmakit_host::model::{Attr, HostFacts};
use rdmakit_host::netlink::{Liveness, ResKind};
use rdmakit_host::parse::sysfs::Counter;
use rdmakit_host::source::Source;

use crate::text::{encode, Family, Kind, Value};

/// What to include.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Write the `node_infiniband_*` families. Turn off when node_exporter's own
    /// infiniband collector runs beside the textfile (the same series twice make its
    /// scrape fail).
    pub node_compat: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { node_compat: true }
    }
}

/// A sysfs counter file and the node_exporter metric it becomes.
pub struct PortCounter {
    /// Directory under `ports/<n>/`: "counters" or "counters_ext".
    pub dir: &'static str,
    /// File name.
    pub file: &'static str,
    /// node_exporter's name after `node_infiniband_`.
    pub metric: &'static str,
    /// Multiply by this (4 for the data counters, which count 4-byte words).
    pub scale: u64,
    pub help: &'static str,
}

const fn pc(
    dir: &'static str,
    file: &'static str,
    metric: &'static str,
    scale: u64,
    help: &'static str,
) -> PortCounter {
    PortCounter {
        dir,
        file,
        metric,
        scale,
        help,
    }
}

/// The port counters node_exporter names, sorted by metric name.
pub const PORT_COUNTERS: &[PortCounter] = &[
    pc("counters", "excessive_buffer_overrun_errors", "excessive_buffer_overrun_errors_total", 1, "Times the receive buffer of the port overran (ports/<n>/counters/excessive_buffer_overrun_errors)."),
    pc("counters_ext", "port_rcv_data_64", "legacy_data_received_bytes_total", 4, "Bytes received, from counters_ext (kernels before 4.5); the file counts 4-byte words."),
    pc("counters_ext", "port_xmit_data_64", "legacy_data_transmitted_bytes_total", 4, "Bytes transmitted, from counters_ext (kernels before 4.5); the file counts 4-byte words."),
    pc("counters_ext", "port_multicast_rcv_packets", "legacy_multicast_packets_received_total", 1, "Multicast packets received, from counters_ext (kernels before 4.5)."),
    pc("counters_ext", "port_multicast_xmit_packets", "legacy_multicast_packets_transmitted_total", 1, "Multicast packets transmitted, from counters_ext (kernels before 4.5)."),
    pc("counters_ext", "port_rcv_packets_64", "legacy_packets_received_total", 1, "Packets received, from counters_ext (kernels before 4.5)."),
    pc("counters_ext", "port_xmit_packets_64", "legacy_packets_transmitted_total", 1, "Packets transmitted, from counters_ext (kernels before 4.5)."),
    pc("counters_ext", "port_unicast_rcv_packets", "legacy_unicast_packets_received_total", 1, "Unicast packets received, from counters_ext (kernels before 4.5)."),
    pc("counters_ext", "port_unicast_xmit_packets", "legacy_unicast_packets_transmitted_total", 1, "Unicast packets transmitted, from counters_ext (kernels before 4.5)."),
    pc("counters", "link_downed", "link_downed_total", 1, "Times the link failed to recover from an error and went down."),
    pc("counters", "link_error_recovery", "link_error_recovery_total", 1, "Times the link recovered from an error."),
    pc("counters", "local_link_integrity_errors", "local_link_integrity_errors_total", 1, "Local physical errors beyond the threshold."),
    pc("counters", "multicast_rcv_packets", "multicast_packets_received_total", 1, "Multicast packets received (including errors)."),
    pc("counters", "multicast_xmit_packets", "multicast_packets_transmitted_total", 1, "Multicast packets transmitted (including errors)."),
    pc("counters", "port_rcv_constraint_errors", "port_constraint_errors_received_total", 1, "Packets received that were discarded for constraint reasons."),
    pc("counters", "port_xmit_constraint_errors", "port_constraint_errors_transmitted_total", 1, "Packets not transmitted for constraint reasons."),
    pc("counters", "port_rcv_data", "port_data_received_bytes_total", 4, "Bytes received on the port (the file counts 4-byte words; multiplied by 4)."),
    pc("counters", "port_xmit_data", "port_data_transmitted_bytes_total", 4, "Bytes transmitted on the port (the file counts 4-byte words; multiplied by 4)."),
    pc("counters", "port_rcv_discards", "port_discards_received_total", 1, "Inbound packets discarded because the port was down or congested."),
    pc("counters", "port_xmit_discards", "port_discards_transmitted_total", 1, "Outbound packets discarded because the port was down or congested."),
    pc("counters", "port_rcv_errors", "port_errors_received_total", 1, "Packets with an error received on the port."),
    pc("counters", "port_rcv_packets", "port_packets_received_total", 1, "Packets received on all VLs (including errors)."),
    pc("counters", "port_xmit_packets", "port_packets_transmitted_total", 1, "Packets transmitted on all VLs (including errors)."),
    pc("counters", "port_rcv_remote_physical_errors", "port_receive_remote_physical_errors_total", 1, "Packets received marked with the EBP (end of bad packet) delimiter."),
    pc("counters", "port_rcv_switch_relay_errors", "port_receive_switch_relay_errors_total", 1, "Packets the switch could not forward."),
    pc("counters", "port_xmit_wait", "port_transmit_wait_total", 1, "Ticks during which the port had data to send but sent none."),
    pc("counters", "symbol_error", "symbol_error_total", 1, "Minor link errors detected on one or more physical lanes."),
    pc("counters", "unicast_rcv_packets", "unicast_packets_received_total", 1, "Unicast packets received (including errors)."),
    pc("counters", "unicast_xmit_packets", "unicast_packets_transmitted_total", 1, "Unicast packets transmitted (including errors)."),
    pc("counters", "VL15_dropped", "vl15_dropped_total", 1, "Incoming VL15 (subnet management) packets dropped for lack of resources."),
];

/// The directory a counter file sits in ("counters", "counters_ext", "hw_counters").
fn dir_of(path: &str) -> &str {
    let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
    parent.rsplit_once('/').map_or(parent, |(_, d)| d)
}

/// Reads the facts through `src`, runs the doctor and renders everything, timing it.
pub fn scrape(src: &dyn Source, copts: &CollectOptions, label: &str, opts: &Options) -> String {
    let t = Instant::now();
    let facts = collect(src, copts);
    let tool = format!("rdmakit {}", env!("CARGO_PKG_VERSION"));
    let report = Report::build(&facts, &Config::default(), &tool, label);
    render(&facts, &report, t.elapsed(), opts)
}

/// The exposition of `facts` and `report`; `took` is reported as
/// `rdmakit_collect_duration_seconds`.
pub fn render(facts: &HostFacts, report: &Report, took: Duration, opts: &Options) -> String {
    let mut fams = Vec::new();
    if opts.node_compat {
        fams.extend(node_families(facts));
    }
    fams.extend(hw_families(facts));
    fams.extend(congestion_families(facts));
    fams.extend(resource_families(facts));
    fams.extend(doctor_families(report));
    let mut d = Family::new(
        "rdmakit_collect_duration_seconds",
        Kind::Gauge,
        "Seconds spent reading the host facts and running the doctor for this exposition.",
    );
    d.push(vec![], took.as_secs_f64());
    fams.push(d);
    encode(&fams)
}

fn text_of(a: &Attr<String>) -> String {
    a.text().unwrap_or_default().to_string()
}

fn dp(device: &str, port: u32) -> Vec<(&'static str, String)> {
    vec![("device", device.to_string()), ("port", port.to_string())]
}

/// Devices in name order and their ports in number order.
fn sorted_ports(
    facts: &HostFacts,
) -> Vec<(
    &rdmakit_host::model::Device,
    Vec<&rdmakit_host::model::Port>,
)> {
    let mut devs: Vec<_> = facts.devices.iter().collect();
    devs.sort_by(|a, b| a.name.cmp(&b.name));
    devs.into_iter()
        .map(|d| {
            let mut ports: Vec<_> = d.ports.iter().collect();
            ports.sort_by_key(|p| p.num);
            (d, ports)
        })
        .collect()
}

/// The ports whose counters are exposed: the kernel's devices', then the
/// soft NIC's (`HostFacts::soft_devices`: a software device whose port 1
/// holds the device-wide counters its registry publishes, with nothing
/// else known of it), each sorted by name.
fn counter_ports(
    facts: &HostFacts,
) -> Vec<(
    &rdmakit_host::model::Device,
    Vec<&rdmakit_host::model::Port>,
)> {
    let mut soft: Vec<_> = facts.soft_devices.iter().collect();
    soft.sort_by(|a, b| a.name.cmp(&b.name));
    let soft = soft.into_iter().map(|d| (d, d.ports.iter().collect()));
    sorted_ports(facts).into_iter().chain(soft).collect()
}

fn node_families(facts: &HostFacts) -> Vec<Family> {
    let mut info = Family::new(
        "node_infiniband_info",
        Kind::Gauge,
        "Non-numeric data from /sys/class/infiniband/<device>, value is always 1.",
    );
    let mut state = Family::new(
        "node_infiniband_state_id",
        Kind::Gauge,
        "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, 4: active, 5: act defer)",
    );
    let mut phys = Family::new(
        "node_infiniband_physical_state_id",
        Kind::Gauge,
        "Physical state of the InfiniBand port (0: no change, 1: sleep, 2: polling, 3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)",
    );
    let mut rate = Family::new(
        "node_infiniband_rate_bytes_per_second",
        Kind::Gauge,
        "Maximum signal transfer rate",
    );
    let mut counters: Vec<Family> = PORT_COUNTERS
        .iter()
        .map(|c| {
            Family::new(
                format!("node_infiniband_{}", c.metric),
                Kind::Counter,
                c.help,
            )
        })
        .collect();
    for (d, ports) in sorted_ports(facts) {
        info.push(
            vec![
                ("board_id", text_of(&d.board_id)),
                ("device", d.name.clone()),
                ("firmware_version", text_of(&d.fw_ver)),
                ("hca_type", text_of(&d.hca_type)),
            ],
            1u64,
        );
        for p in ports {
            if let Some(s) = p.state.get() {
                state.push(dp(&d.name, p.num), u64::from(s.code));
            }
            if let Some(s) = p.phys_state.get() {
                phys.push(dp(&d.name, p.num), u64::from(s.code));
            }
            if let Some(r) = p.rate.get() {
                // Gb/s → bytes/s, as node_exporter computes it (1 Gb/s = 125 000 000 B/s).
                rate.push(dp(&d.name, p.num), (r.gbps * 125_000_000.0).round() as u64);
            }
        }
    }
    for (d, ports) in counter_ports(facts) {
        for p in ports {
            for (i, c) in PORT_COUNTERS.iter().enumerate() {
                let Some(a) = p.counters.get(c.file) else {
                    continue;
                };
                if dir_of(&a.path) != c.dir {
                    continue;
                }
                if let Some(v) = a.get().and_then(Counter::value) {
                    counters[i].push(
                        dp(&d.name, p.num),
                        Value::Int(u128::from(v) * u128::from(c.scale)),
                    );
                }
            }
        }
    }
    let mut out = vec![info, state, phys, rate];
    out.extend(counters);
    out
}

/// The congestion loop's `hw_counters` (mlx5's names; docs/roce-qos.md),
/// each as its own family: metric name, counter file, HELP.
pub const CONGESTION: [(&str, &str, &str); 4] = [
    (
        "rdmakit_roce_ecn_marked_packets_total",
        "np_ecn_marked_roce_packets",
        "RoCEv2 packets received with ECN Congestion Experienced (CE) marked: the notification point's input (ports/<port>/hw_counters/np_ecn_marked_roce_packets).",
    ),
    (
        "rdmakit_roce_cnp_sent_total",
        "np_cnp_sent",
        "Congestion notification packets (CNPs) the notification point sent for CE-marked packets received (ports/<port>/hw_counters/np_cnp_sent).",
    ),
    (
        "rdmakit_roce_cnp_handled_total",
        "rp_cnp_handled",
        "CNPs the reaction point handled by cutting a sender's rate (DCQCN) (ports/<port>/hw_counters/rp_cnp_handled).",
    ),
    (
        "rdmakit_roce_cnp_ignored_total",
        "rp_cnp_ignored",
        "CNPs received and ignored: the reaction point is off for that priority (ports/<port>/hw_counters/rp_cnp_ignored).",
    ),
];

/// [`CONGESTION`]'s families for every port that has the counters (a
/// counter without a number is in `rdmakit_infiniband_counters_unavailable`).
fn congestion_families(facts: &HostFacts) -> Vec<Family> {
    CONGESTION
        .iter()
        .map(|&(metric, file, help)| {
            let mut f = Family::new(metric, Kind::Counter, help);
            for (d, ports) in counter_ports(facts) {
                for p in ports {
                    if let Some(v) = p.hw_counters.get(file).and_then(|a| a.get()?.value()) {
                        f.push(
                            vec![("device", d.name.clone()), ("port", p.num.to_string())],
                            v,
                        );
                    }
                }
            }
            f
        })
        .collect()
}

fn hw_families(facts: &HostFacts) -> Vec<Family> {
    let mut hw = Family::new(
        "rdmakit_infiniband_hw_counters_total",
        Kind::Counter,
        "Driver hardware counters: /sys/class/infiniband/<device>/ports/<port>/hw_counters/<counter>, and <device>/hw_counters/<counter> with port=\"\".",
    );
    let mut lifespan = Family::new(
        "rdmakit_infiniband_hw_counters_lifespan_seconds",
        Kind::Gauge,
        "hw_counters/lifespan: how long the driver may serve cached hw_counters values.",
    );
    let mut other = Family::new(
        "rdmakit_infiniband_port_counters_total",
        Kind::Counter,
        "Files in ports/<port>/counters that node_exporter does not name, as read.",
    );
    let mut unavailable = Family::new(
        "rdmakit_infiniband_counters_unavailable",
        Kind::Gauge,
        "1 for each counter file without a number (\"N/A (no PMA)\", a failed read, garbage); its series is left out. counter is <dir>/<file>.",
    );
    let mut add_hw = |device: &str, port: String, map: &BTreeMap<String, Attr<Counter>>| {
        for (name, a) in map {
            match a.get().and_then(Counter::value) {
                Some(v) if name == "lifespan" => lifespan.push(
                    vec![("device", device.to_string()), ("port", port.clone())],
                    v as f64 / 1000.0,
                ),
                Some(v) => hw.push(
                    vec![
                        ("device", device.to_string()),
                        ("port", port.clone()),
                        ("counter", name.clone()),
                    ],
                    v,
                ),
                None => unavailable.push(
                    vec![
                        ("device", device.to_string()),
                        ("port", port.clone()),
                        ("counter", format!("hw_counters/{name}")),
                    ],
                    1u64,
                ),
            }
        }
    };
    for (d, ports) in counter_ports(facts) {
        add_hw(&d.name, String::new(), &d.hw_counters);
        for p in &ports {
            add_hw(&d.name, p.num.to_string(), &p.hw_counters);
        }
    }
    for (d, ports) in counter_ports(facts) {
        for p in ports {
            for (name, a) in &p.counters {
                let dir = dir_of(&a.path);
                match a.get().and_then(Counter::value) {
                    None => unavailable.push(
                        vec![
                            ("device", d.name.clone()),
                            ("port", p.num.to_string()),
                            ("counter", format!("{dir}/{name}")),
                        ],
                        1u64,
                    ),
                    Some(v) => {
                        let known = PORT_COUNTERS.iter().any(|c| c.file == name && c.dir == dir);
                        if !known {
                            other.push(
                                vec![
                                    ("device", d.name.clone()),
                                    ("port", p.num.to_string()),
                                    ("counter", format!("{dir}/{name}")),
                                ],
                                v,
                            );
                        }
                    }
                }
            }
        }
    }
    vec![hw, lifespan, other, unavailable]
}

fn resource_families(facts: &HostFacts) -> Vec<Family> {
    let nl = &facts.netlink;
    let mut up = Family::new(
        "rdmakit_rdma_netlink_available",
        Kind::Gauge,
        "1 when NETLINK_RDMA answered the device dump, 0 when it could not be asked or refused.",
    );
    up.push(vec![], u64::from(nl.devs.is_ok()));
    let mut res = Family::new(
        "rdmakit_rdma_resources",
        Kind::Gauge,
        "Tracked RDMA objects per device and kind, from the netlink resource summary (rdma resource).",
    );
    if let Ok(sums) = &nl.summary {
        let mut rows: BTreeMap<(String, String), u64> = BTreeMap::new();
        for s in sums {
            for (kind, n) in &s.entries {
                rows.insert((s.dev_name.clone(), kind.clone()), *n);
            }
        }
        for ((dev, kind), n) in rows {
            res.push(vec![("device", dev), ("kind", kind)], n);
        }
    }
    let mut owners = Family::new(
        "rdmakit_rdma_resources_by_owner_state",
        Kind::Gauge,
        "Tracked RDMA objects per device and kind by the state of their owner (alive, zombie, dead, kernel, unknown); dead or zombie owners hold leaked objects.",
    );
    let mut devs: Vec<_> = nl.devices.iter().collect();
    devs.sort_by(|a, b| a.name.cmp(&b.name));
    for d in devs {
        for kind in ResKind::ALL {
            let Some(Ok(list)) = d.resources.get(&kind) else {
                continue;
            };
            let mut by: BTreeMap<Liveness, u64> = BTreeMap::new();
            for r in list {
                *by.entry(nl.owner_of(&r.holder).0).or_default() += 1;
            }
            for (state, n) in by {
                owners.push(
                    vec![
                        ("device", d.name.clone()),
                        ("kind", kind.name().to_string()),
                        ("state", state.name().to_string()),
                    ],
                    n,
                );
            }
        }
    }
    vec![up, res, owners]
}

fn doctor_families(report: &Report) -> Vec<Family> {
    let mut findings = Family::new(
        "rdmakit_doctor_findings",
        Kind::Gauge,
        "Findings of rdmakit doctor by code, severity and layer (rdmakit explain CODE).",
    );
    let mut counts: BTreeMap<(&str, &str, &str), u64> = BTreeMap::new();
    for f in &report.findings {
        *counts
            .entry((f.code.as_str(), f.severity.as_str(), f.layer.as_str()))
            .or_default() += 1;
    }
    for ((code, sev, layer), n) in counts {
        findings.push(
            vec![
                ("code", code.to_string()),
                ("severity", sev.to_string()),
                ("layer", layer.to_string()),
            ],
            n,
        );
    }
    let mut by_sev = Family::new(
        "rdmakit_doctor_findings_by_severity",
        Kind::Gauge,
        "Findings of rdmakit doctor per severity (every severity present, 0 when none).",
    );
    for (sev, n) in [
        ("error", report.counts.error),
        ("warning", report.counts.warning),
        ("info", report.counts.info),
    ] {
        by_sev.push(vec![("severity", sev.to_string())], n);
    }
    let mut status = Family::new(
        "rdmakit_doctor_check_status",
        Kind::Gauge,
        "1 for the status of each doctor check (pass, fail, not_applicable, not_checked), 0 for the others.",
    );
    for c in &report.checks {
        let now = match c.status {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::NotApplicable(_) => "not_applicable",
            Status::NotChecked(_) => "not_checked",
        };
        for s in ["pass", "fail", "not_applicable", "not_checked"] {
            status.push(
                vec![
                    ("check", c.id.to_string()),
                    ("layer", c.layer.as_str().to_string()),
                    ("status", s.to_string()),
                ],
                u64::from(s == now),
            );
        }
    }
    vec![findings, by_sev, status]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_of_counter_paths() {
        assert_eq!(
            dir_of("/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data"),
            "counters"
        );
        assert_eq!(
            dir_of("/sys/class/infiniband/x/ports/1/counters_ext/port_rcv_data_64"),
            "counters_ext"
        );
        assert_eq!(dir_of("file"), "");
    }

    #[test]
    fn port_counter_table_is_sorted_and_named_well() {
        let names: Vec<&str> = PORT_COUNTERS.iter().map(|c| c.metric).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        for c in PORT_COUNTERS {
            assert!(c.metric.ends_with("_total"), "{}", c.metric);
            assert!(!c.metric.contains("_counter"), "{}", c.metric);
        }
    }
}
