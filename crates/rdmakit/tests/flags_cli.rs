//! Every flag a subcommand offers does what its help says there: each is run at
//! least once against the real binary (real captures from fixtures/, the soft
//! NIC, loopback agents, a fake Slurm), and the run shows its effect — or the
//! flag is run in another test file, named here and checked to be there. The
//! coverage test reads each subcommand's `--help`, so a flag added without a
//! run fails it. `--color` and `--help` are global and tested in cli.rs.

mod common;

use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;

/// One run of a subcommand: its arguments and environment, the statuses it
/// may end with, texts its output must hold and must not.
struct Use {
    sub: &'static str,
    args: Vec<String>,
    env: Vec<(String, String)>,
    codes: &'static [i32],
    says: Vec<String>,
    not: Vec<String>,
}

fn used(sub: &'static str, args: &[&str], codes: &'static [i32], says: &[&str]) -> Use {
    Use {
        sub,
        args: args.iter().map(|s| s.to_string()).collect(),
        env: Vec::new(),
        codes,
        says: says.iter().map(|s| s.to_string()).collect(),
        not: Vec::new(),
    }
}

impl Use {
    fn env(mut self, k: &str, v: &str) -> Use {
        self.env.push((k.into(), v.into()));
        self
    }

    fn not(mut self, t: &str) -> Use {
        self.not.push(t.into());
        self
    }

    fn check(&self) -> Result<(), String> {
        let mut c = bin();
        // Wide enough that no prose wraps: what a flag does, not the width.
        c.args(&self.args)
            .stdin(Stdio::null())
            .env("COLUMNS", "400");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        let code_ok = o.status.code().is_some_and(|c| self.codes.contains(&c));
        let missing: Vec<&String> = self.says.iter().filter(|s| !all.contains(*s)).collect();
        let present: Vec<&String> = self.not.iter().filter(|s| all.contains(*s)).collect();
        if code_ok && missing.is_empty() && present.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{:?}: exit {:?} (want {:?}), missing {missing:?}, unwanted {present:?}:\n{all}",
                self.args,
                o.status.code(),
                self.codes
            ))
        }
    }
}

/// Flags run in other test files: (subcommand, flag, file, test function).
/// The coverage test checks that the function is there and runs the flag.
const ELSEWHERE: &[(&str, &str, &str, &str)] = &[
    (
        "fleet report",
        "--fabric",
        "fabric_fleet_ibsim.rs",
        "fleet_report_and_pairwise_name_switch_ports_routes_and_moved_counters",
    ),
    (
        "fleet report",
        "--fabric-counters",
        "fabric_fleet_ibsim.rs",
        "fleet_report_and_pairwise_name_switch_ports_routes_and_moved_counters",
    ),
    (
        "fleet pairwise",
        "--fabric",
        "fabric_fleet_ibsim.rs",
        "fleet_report_and_pairwise_name_switch_ports_routes_and_moved_counters",
    ),
    (
        "fleet pairwise",
        "--fabric-counters",
        "fabric_fleet_ibsim.rs",
        "fleet_report_and_pairwise_name_switch_ports_routes_and_moved_counters",
    ),
    (
        "fabric discover",
        "--routes",
        "fabric_route_ibsim.rs",
        "route_names_what_it_cannot_find_and_where_the_local_port_is",
    ),
    (
        "fabric route",
        "--json",
        "fabric_route_ibsim.rs",
        "route_names_what_it_cannot_find_and_where_the_local_port_is",
    ),
    (
        "fabric route",
        "--ca",
        "fabric_route_ibsim.rs",
        "route_names_what_it_cannot_find_and_where_the_local_port_is",
    ),
    (
        "fabric route",
        "--port",
        "fabric_route_ibsim.rs",
        "route_names_what_it_cannot_find_and_where_the_local_port_is",
    ),
    (
        "explain",
        "--raw",
        "doctor_surface.rs",
        "explain_renders_pages_for_a_terminal_and_keeps_the_markdown_on_request",
    ),
    (
        "doctor",
        "--slurm-health-check",
        "slurm_cli.rs",
        "health_check_drains_on_an_error_and_resumes_only_its_own_drain",
    ),
    (
        "doctor",
        "--dry-run",
        "slurm_cli.rs",
        "health_check_drains_on_an_error_and_resumes_only_its_own_drain",
    ),
    (
        "doctor",
        "--health-timeout",
        "slurm_cli.rs",
        "health_check_gives_up_on_an_scontrol_that_hangs",
    ),
    ("doctor", "--npd", "npd.rs", ""),
    ("metrics", "--listen", "metrics_http.rs", ""),
    (
        "fabric discover",
        "--html",
        "report_browser.rs",
        "fabric_page_of_a_live_tree_frames_its_faults",
    ),
    (
        "fabric check",
        "--html",
        "report_browser.rs",
        "fabric_page_of_a_live_tree_frames_its_faults",
    ),
    (
        "metrics",
        "--fabric",
        "fabric_metrics_ibsim.rs",
        "fabric_metrics_of_a_fat_tree_show_a_set_counter_where_it_was_set",
    ),
    (
        "metrics",
        "--ca",
        "fabric_metrics_ibsim.rs",
        "fabric_metrics_of_a_fat_tree_show_a_set_counter_where_it_was_set",
    ),
    (
        "metrics",
        "--port",
        "fabric_metrics_ibsim.rs",
        "fabric_metrics_of_a_fat_tree_show_a_set_counter_where_it_was_set",
    ),
    ("fleet agent", "--user", "fleet_agent_attacks.rs", ""),
    (
        "perf",
        "-p",
        "perf_cli.rs",
        "write_bw_validates_and_reports_json",
    ),
    (
        "perf",
        "-s",
        "perf_cli.rs",
        "write_bw_validates_and_reports_json",
    ),
    (
        "perf",
        "-n",
        "perf_cli.rs",
        "write_bw_validates_and_reports_json",
    ),
    ("perf", "--json", "perf_cli.rs", "pair"),
    ("perf", "--validate", "perf_cli.rs", "pair"),
    ("perf", "-a", "perf_cli.rs", "sweep_with_small_max"),
    ("perf", "-D", "perf_cli.rs", ""),
    ("perf", "-t", "perf_cli.rs", ""),
    ("perf", "-m", "perf_cli.rs", ""),
    ("perf", "-c", "perf_cli.rs", "send_over_ud"),
    (
        "perf",
        "-e",
        "perf_cli.rs",
        "use_event_on_both_sides_counts_the_same",
    ),
    (
        "fabric discover",
        "--json",
        "fabric_ibsim.rs",
        "an_unlinked_port_is_down_and_a_dropping_port_hides_what_is_behind_it",
    ),
    (
        "fabric discover",
        "--topology",
        "fabric_ibsim.rs",
        "discover_agrees_with_ibnetdiscover_on_a_fat_tree",
    ),
    (
        "fabric discover",
        "--ca",
        "fabric_ibsim.rs",
        "discover_agrees_with_ibnetdiscover_on_a_fat_tree",
    ),
    (
        "fabric discover",
        "--port",
        "fabric_ibsim.rs",
        "discover_agrees_with_ibnetdiscover_on_a_fat_tree",
    ),
    (
        "fabric counters",
        "--json",
        "fabric_ibsim.rs",
        "counters_agree_with_perfquery_and_reset_clears_them",
    ),
    (
        "fabric counters",
        "--all",
        "fabric_ibsim.rs",
        "counters_agree_with_perfquery_and_reset_clears_them",
    ),
    (
        "fabric counters",
        "--reset",
        "fabric_ibsim.rs",
        "counters_agree_with_perfquery_and_reset_clears_them",
    ),
    (
        "fabric counters",
        "--ca",
        "fabric_ibsim.rs",
        "counters_agree_with_perfquery_and_reset_clears_them",
    ),
    (
        "fabric counters",
        "--port",
        "fabric_ibsim.rs",
        "counters_agree_with_perfquery_and_reset_clears_them",
    ),
    (
        "fabric check",
        "--json",
        "fabric_check_ibsim.rs",
        "check_judges_a_live_fabric_since_its_saved_counters_and_against_its_cabling",
    ),
    (
        "fabric check",
        "--verbose",
        "fabric_check_ibsim.rs",
        "check_judges_a_live_fabric_since_its_saved_counters_and_against_its_cabling",
    ),
    (
        "fabric check",
        "--baseline",
        "fabric_check_ibsim.rs",
        "check_judges_a_live_fabric_since_its_saved_counters_and_against_its_cabling",
    ),
    (
        "fabric check",
        "--expected",
        "fabric_check_ibsim.rs",
        "check_judges_a_live_fabric_since_its_saved_counters_and_against_its_cabling",
    ),
    (
        "fabric check",
        "--fail-on",
        "fabric_check_ibsim.rs",
        "check_judges_a_live_fabric_since_its_saved_counters_and_against_its_cabling",
    ),
    (
        "fabric check",
        "--save",
        "fabric_check_ibsim.rs",
        "check_judges_a_live_fabric_since_its_saved_counters_and_against_its_cabling",
    ),
    (
        "fabric check",
        "--ca",
        "fabric_check_ibsim.rs",
        "check_judges_a_live_fabric_since_its_saved_counters_and_against_its_cabling",
    ),
    (
        "fabric check",
        "--port",
        "fabric_check_ibsim.rs",
        "check_judges_a_live_fabric_since_its_saved_counters_and_against_its_cabling",
    ),
    (
        "fabric check",
        "--severity",
        "fabric_check_ibsim.rs",
        "check_judges_a_live_fabric_since_its_saved_counters_and_against_its_cabling",
    ),
    (
        "fabric check",
        "--thresholds",
        "fabric_check_ibsim.rs",
        "check_judges_a_live_fabric_since_its_saved_counters_and_against_its_cabling",
    ),
];

/// The real dmesg of fixtures/healthy with one DMA mapping error added (as
/// crates/doctor/tests/variants.rs edits it): RDK-K007 when it is read.
fn kernel_log(dir: &Path) -> String {
    let mut log = std::fs::read(fixture("healthy/_dmesg.txt")).unwrap();
    log.extend_from_slice(
        b"[   40.123456] rdma_rxe: rxe0: DMA mapping error while registering MR\n",
    );
    let p = dir.join("k.log");
    std::fs::write(&p, log).unwrap();
    p.display().to_string()
}

/// fixtures/roce-mlx5-qos as a baseline and, 10 s later, with 60,000 CNPs
/// sent against 1,000,000 packets received (6 %): the bundles' paths.
fn cnp_storm_pair(dir: &Path) -> (String, String) {
    use rdmakit_testkit::bundle::{import, set_line};
    let port = "/sys/class/infiniband/mlx5_0/ports/1";
    let mut before = import("roce-mlx5-qos");
    before.header.created_unix = 1_765_000_000;
    let mut after = import("roce-mlx5-qos");
    after.header.created_unix = 1_765_000_010;
    set_line(
        &mut after,
        &format!("{port}/hw_counters/np_cnp_sent"),
        "60000",
    );
    set_line(
        &mut after,
        &format!("{port}/counters/port_rcv_packets"),
        "542889824",
    );
    let b = dir.join("cnp-before.json.gz").display().to_string();
    let a = dir.join("cnp-after.json.gz").display().to_string();
    before.write(&b).unwrap();
    after.write(&a).unwrap();
    (b, a)
}

fn uses(dir: &Path) -> Vec<Use> {
    let healthy = fixture("healthy");
    let h = healthy.as_str();
    let busy = fixture("healthy-busy");
    let mlx4 = fixture("mlx4-saturated-edit");
    let data = |f: &str| format!("{}/../{f}", env!("CARGO_MANIFEST_DIR"));
    let vm = data("doctor/tests/data/vm/healthy.json.gz");
    let memlock = data("doctor/tests/data/vm/memlock_pid.json.gz");
    let slow_node = data("report/tests/data/6ns-slow-node-n3-9.json");
    let out = |name: &str| dir.join(name).display().to_string();
    let tree = out("tree");
    std::fs::create_dir_all(&tree).unwrap();
    let klog = kernel_log(dir);
    let (cnp_before, cnp_after) = cnp_storm_pair(dir);
    let registry = out("registry");
    std::fs::create_dir_all(&registry).unwrap();
    let lib = out("libibverbs.so");
    // What `shim install` checks of a library: shim_cli.rs installs the real one.
    std::fs::write(&lib, b"\x7fELF IBVERBS_1.1 rdmakit libibverbs").unwrap();
    let pcap = fixture("pcap/rc_pingpong-s64.pcap");
    let reg = |u: Use| u.env("RDMAKIT_SOFT_REGISTRY_DIR", &registry);
    let soft = |u: Use| u.env("RDMAKIT_PROVIDER", "soft");
    vec![
        // doctor
        used(
            "doctor",
            &["doctor", "--from", h, "--json"],
            &[0],
            &["\"schema\": \"rdmakit.doctor/v1\""],
        ),
        used(
            "doctor",
            &["doctor", "--from", h, "--verbose"],
            &[0],
            &["log.dma"],
        ),
        used(
            "doctor",
            &["doctor", "--from", &mlx4, "--fail-on", "never"],
            &[0],
            &["RDK-H010"],
        ),
        used("doctor", &["doctor", "--list-checks"], &[0], &["RDK-K001"]),
        used(
            "doctor",
            &[
                "doctor",
                "--from",
                h,
                "--expect-rate",
                "100",
                "--netdev",
                "eth9",
            ],
            &[0],
            &["100 Gb/s was expected", "GID on eth9"],
        ),
        used(
            "doctor",
            &["doctor", "--from", h, "--memlock-min", "1T"],
            &[2],
            &["--memlock-min"],
        ),
        // A 6 % CNP storm: reported at the default 1 %, not at 10 %; the
        // threshold is validated.
        used(
            "doctor",
            &["doctor", "--from", &cnp_after, "--baseline", &cnp_before],
            &[0],
            &["WARN  RDK-N014", "6.0 % of the 1,000,000 packets"],
        ),
        used(
            "doctor",
            &[
                "doctor",
                "--from",
                &cnp_after,
                "--baseline",
                &cnp_before,
                "--cnp-storm-pct",
                "10",
            ],
            &[0],
            &["RDK-N009"],
        )
        .not("RDK-N014"),
        used(
            "doctor",
            &["doctor", "--from", h, "--cnp-storm-pct", "0"],
            &[2],
            &["--cnp-storm-pct 0: must be a percent above 0"],
        ),
        used(
            "doctor",
            &[
                "doctor",
                "--from",
                &vm,
                "--usage-warn",
                "0.00001",
                "--usage-error",
                "90",
            ],
            &[0],
            &["WARN  RDK-R002"],
        ),
        used(
            "doctor",
            &["doctor", "--from", &mlx4, "--severity", "RDK-H010=info"],
            &[0],
            &["RDK-H010"],
        )
        .not("ERROR RDK-H010"),
        // The health checks must stay fast: module EEPROMs are never read there.
        used(
            "doctor",
            &["doctor", "--npd", "--optics"],
            &[2],
            &["--optics"],
        ),
        used(
            "doctor",
            &["doctor", "--device", "soft0", "--no-probe"],
            &[2],
            &["drop --no-probe"],
        ),
        used(
            "doctor",
            &["doctor", "--device", "soft0", "--probe"],
            &[0],
            &["Active probes"],
        ),
        used(
            "doctor",
            &[
                "doctor",
                "--from",
                h,
                "--npd",
                "--npd-state",
                &out("npd.json"),
                "--npd-deadline",
                "30",
            ],
            &[0],
            &["ok:"],
        ),
        used(
            "doctor",
            &["doctor", "--from", h, "--html", &out("d.html")],
            &[0],
            &["HTML report written"],
        ),
        used(
            "doctor",
            &["doctor", "--from", h, "--baseline", h],
            &[0],
            &["growth since the baseline"],
        ),
        used(
            "doctor",
            &["doctor", "--from", h, "--frame", "--frame-bundle"],
            &[0],
            &["rdmakit-frame 1 begin report"],
        ),
        used(
            "doctor",
            &["doctor", "--root", &tree, "--no-probe"],
            &[0],
            &["tree at"],
        ),
        used(
            "doctor",
            &["doctor", "--from", &memlock, "--pid", "436"],
            &[1],
            &["ERROR RDK-A001 [application] pid 436"],
        ),
        used(
            "doctor",
            &["doctor", "--from", &vm, "--pid", "436"],
            &[2],
            &["did not record process 436"],
        ),
        used(
            "doctor",
            &["doctor", "--from", h, "--kernel-log", &klog],
            &[1],
            &["RDK-K007", "40.123456"],
        ),
        used(
            "doctor",
            &["doctor", "--from", h, "--kernel-log", "/nonexistent"],
            &[2],
            &["--kernel-log /nonexistent: ENOENT"],
        ),
        // explain, collect, pcap
        used(
            "explain",
            &["explain", "--json", "ENOSPC"],
            &[0],
            &["\"kind\": \"errno\""],
        ),
        used(
            "collect",
            &["collect", "--root", &tree, "--output", &out("t.json")],
            &[0],
            &["wrote"],
        ),
        used(
            "collect",
            &[
                "collect",
                "--from",
                &memlock,
                "--pid",
                "436",
                "-o",
                &out("p.json"),
            ],
            &[0],
            &["wrote"],
        ),
        used(
            "collect",
            &["collect", "--from", h, "--pid", "436", "-o", &out("x.json")],
            &[2],
            &["did not record process 436"],
        ),
        used(
            "collect",
            &[
                "collect",
                "--from",
                h,
                "--kernel-log",
                &klog,
                "-o",
                &out("k.json"),
            ],
            &[0],
            &["wrote"],
        ),
        used(
            "doctor",
            &["doctor", "--from", &out("k.json")],
            &[1],
            &["RDK-K007"],
        ),
        used(
            "collect",
            &["collect", "--from", h, "--redact", "-o", &out("r.json")],
            &[0],
            &["redacted"],
        ),
        used(
            "pcap",
            &["pcap", "--json", &pcap],
            &[0],
            &["\"format\": \"pcap\""],
        ),
        // the RDMA netlink views
        used(
            "dev",
            &["dev", "--json", "--from", h],
            &[0],
            &["\"ifname\": \"rxe0\""],
        ),
        used(
            "dev",
            &["dev", "--root", &tree],
            &[3],
            &["holds no RDMA netlink answers"],
        ),
        used(
            "link",
            &["link", "--json", "--from", h],
            &[0],
            &["\"state\": \"ACTIVE\""],
        ),
        used(
            "link",
            &["link", "--root", &tree],
            &[3],
            &["holds no RDMA netlink answers"],
        ),
        used(
            "stat",
            &["stat", "--json", "--from", h],
            &[0],
            &["\"ifname\": \"rxe0\""],
        ),
        used(
            "stat",
            &["stat", "--root", &tree],
            &[3],
            &["holds no RDMA netlink answers"],
        ),
        used(
            "res",
            &["res", "qp", "--pid", "342", "--json", "--from", &busy],
            &[0],
            &["\"pid\": 342"],
        )
        .not("\"pid\": 343"),
        used(
            "res",
            &["res", "cq", "--pid", "343", "--from", &busy],
            &[0],
            &["cqn 3", "pid 343"],
        )
        .not("pid 342"),
        used(
            "res",
            &["res", "--root", &tree],
            &[3],
            &["holds no RDMA netlink answers"],
        ),
        // devinfo
        soft(used(
            "devinfo",
            &["devinfo", "-d", "soft0", "-i", "1", "-v", "--json"],
            &[0],
            &["\"max_qp\"", "\"gids\""],
        )),
        used(
            "devinfo",
            &[
                "devinfo",
                "--from",
                h,
                "--ib-dev",
                "rxe0",
                "--ib-port",
                "1",
                "--verbose",
            ],
            &[3],
            &[
                "\tGID[  1]:\t\t::ffff:10.0.2.15, RoCE v2",
                "max_mtu, active_mtu, port_lmc",
            ],
        ),
        used(
            "devinfo",
            &["devinfo", "--root", &tree],
            &[0],
            &["No IB devices found"],
        ),
        // metrics
        used(
            "metrics",
            &["metrics", "--from", h, "--no-node-compat"],
            &[0],
            &["rdmakit_"],
        )
        .not("node_infiniband_"),
        used(
            "metrics",
            &["metrics", "--from", h, "-o", &out("m.prom")],
            &[0],
            &[],
        ),
        used(
            "metrics",
            &["metrics", "--root", &tree],
            &[0],
            &["rdmakit_"],
        ),
        used(
            "metrics",
            &["metrics", "--from", &memlock, "--pid", "436"],
            &[0],
            &["code=\"RDK-A001\""],
        ),
        used(
            "metrics",
            &["metrics", "--from", h, "--kernel-log", &klog],
            &[0],
            &["code=\"RDK-K007\""],
        ),
        // soft, shim
        reg(used(
            "soft status",
            &["soft", "status", "-d", "rdkt-flags", "--json"],
            &[0],
            &["\"name\": \"rdkt-flags\""],
        )),
        reg(used(
            "soft leaky",
            &["soft", "leaky", "on", "--device", "rdkt-flags"],
            &[0],
            &["leaky"],
        )),
        reg(used(
            "soft status",
            &["soft", "status", "--device", "rdkt-flags", "--json"],
            &[0],
            &["\"leaky\": true"],
        )),
        reg(used(
            "soft leaky",
            &["soft", "leaky", "off", "-d", "rdkt-flags"],
            &[0],
            &[],
        )),
        reg(used(
            "soft reclaim",
            &[
                "soft",
                "reclaim",
                "--device",
                "rdkt-flags",
                "--dry-run",
                "--json",
            ],
            &[0],
            &["\"dry_run\": true"],
        )),
        used(
            "shim install",
            &["shim", "install", &out("lib"), "--from", &lib, "--json"],
            &[0],
            &["\"ld_library_path\""],
        ),
        // fleet report, baseline
        used(
            "fleet baseline",
            &["fleet", "baseline", h, "--output", &out("expected.json")],
            &[0],
            &["expected value"],
        ),
        used(
            "fleet report",
            &["fleet", "report", "--json", h],
            &[0],
            &["\"schema\": \"rdmakit.fleet/v1\""],
        ),
        used(
            "fleet report",
            &[
                "fleet",
                "report",
                &mlx4,
                h,
                "--verbose",
                "--html",
                &out("f.html"),
                "--baseline",
                h,
                "--expect",
                &out("expected.json"),
            ],
            &[1],
            &["HTML report written"],
        ),
        // fleet pairwise: a saved run
        used(
            "fleet pairwise",
            &[
                "fleet",
                "pairwise",
                "--from",
                &slow_node,
                "--json",
                "--html",
                &out("p.html"),
            ],
            &[1],
            &["\"schema\": \"rdmakit.pairwise/v1\""],
        ),
        // verbs-test, irq, man
        soft(used(
            "verbs-test",
            &[
                "verbs-test",
                "--ib-dev",
                "soft0",
                "--filter",
                "query",
                "--timeout",
                "5",
                "--json",
            ],
            &[0],
            &["\"passed\":true"],
        )),
        used(
            "irq",
            &["irq", "--json", "--from", h],
            &[0],
            &["\"schema\": \"rdmakit.irq/v1\""],
        ),
        used("irq", &["irq", "--root", &tree], &[0], &[]),
        used("man", &["man", "--dir", &out("man")], &[0], &["man pages"]),
    ]
}

#[test]
fn every_flag_does_what_its_help_says() {
    let dir = tempfile::tempdir().unwrap();
    let failures: Vec<String> = uses(dir.path())
        .iter()
        .filter_map(|u| u.check().err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// perf's flags perf_cli.rs does not run: -d, -x, -I, -Q, -r, --report_gbits,
/// --html, on a send-bw pair over the soft NIC.
#[test]
fn perf_device_gid_inline_moderation_rx_depth_gbits_html() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let server = bin()
        .args(["perf", "send-bw", "-p", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let html = dir.path().join("perf.html");
    let o = rdmakit(&[
        "perf",
        "send-bw",
        "127.0.0.1",
        "-p",
        &port,
        "--ib-dev",
        "soft0",
        "--gid-index",
        "0",
        "-s",
        "4096",
        "-n",
        "200",
        "--inline_size",
        "64",
        "--cq-mod",
        "8",
        "--rx-depth",
        "64",
        "--report_gbits",
        "--html",
        html.to_str().unwrap(),
    ]);
    let (sc, _, serr) = finish(server, Duration::from_secs(30));
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert_eq!(sc, Some(0), "{serr}");
    for says in [
        "Device         : soft0",
        "GID index       : 0",
        "Max inline data : 64[B]",
        "CQ Moderation   : 8",
        "RX depth        : 64",
        "BW average[Gb/sec]",
    ] {
        assert!(out.contains(says), "{says:?} in {out}");
    }
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
}

/// `monitor --json`: one JSON object per event; without RDMA netlink it says
/// why and exits 3 at once.
#[test]
fn monitor_json_runs() {
    let c = bin()
        .args(["monitor", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, _, err) = finish(c, Duration::from_secs(2));
    assert!(code.is_none() || code == Some(3), "{code:?}: {err}");
}

/// The long and short forms of every flag of `rdmakit SUB --help`, but the
/// global ones.
fn flags_of(sub: &str) -> Vec<(String, Option<String>)> {
    let mut args: Vec<&str> = sub.split(' ').collect();
    args.push("--help");
    let help = text(&rdmakit(&args).stdout);
    let mut out = Vec::new();
    for l in help.lines() {
        let t = l.trim_start();
        if !t.starts_with('-') {
            continue;
        }
        let (short, rest) = match t.strip_prefix('-').and_then(|r| r.chars().next()) {
            Some(c) if c != '-' => (Some(format!("-{c}")), t.get(4..).unwrap_or("")),
            _ => (None, t),
        };
        let Some(long) = rest.strip_prefix("--") else {
            continue;
        };
        let name: String = long
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        let long = format!("--{name}");
        if ["--help", "--color", "--version"].contains(&long.as_str()) {
            continue;
        }
        out.push((long, short));
    }
    out
}

/// The body of `fn name` in `file` (up to the next `fn ` at column 0), or
/// the whole file when `name` is empty.
fn body(file: &str, name: &str) -> String {
    let src = std::fs::read_to_string(format!("{}/tests/{file}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    if name.is_empty() {
        return src;
    }
    let at = src
        .find(&format!("fn {name}("))
        .unwrap_or_else(|| panic!("{file} has no fn {name}"));
    let rest = &src[at + 3..];
    let end = rest.find("\nfn ").unwrap_or(rest.len());
    rest[..end].to_string()
}

#[test]
fn every_offered_flag_is_run_somewhere() {
    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man");
    assert!(rdmakit(&["man", "--dir", man.to_str().unwrap()])
        .status
        .success());
    let table = uses(dir.path());
    // The other tests of this file and of flags_fleet_cli.rs, one function
    // body each.
    let here = body("flags_cli.rs", "") + &body("flags_fleet_cli.rs", "");
    let fns: Vec<&str> = here.split("\nfn ").collect();
    let mut missing = Vec::new();
    let subs: BTreeSet<String> = std::fs::read_dir(&man)
        .unwrap()
        .filter_map(|e| {
            let f = e.unwrap().file_name().to_string_lossy().into_owned();
            let s = f.strip_suffix(".1")?.strip_prefix("rdmakit-")?.to_string();
            Some(s.replace('-', " ").replace("verbs test", "verbs-test"))
        })
        .collect();
    for sub in &subs {
        if subs.iter().any(|o| o.starts_with(&format!("{sub} "))) {
            continue; // a group
        }
        for (long, short) in flags_of(sub) {
            let forms: Vec<&str> = std::iter::once(long.as_str())
                .chain(short.as_deref())
                .collect();
            let in_table = table
                .iter()
                .any(|u| u.sub == sub && u.args.iter().any(|a| forms.contains(&a.as_str())));
            let quoted = |src: &str| forms.iter().any(|f| src.contains(&format!("\"{f}\"")));
            let word = format!("\"{}\"", sub.split(' ').next_back().unwrap_or(sub));
            let in_a_test_here = fns.iter().any(|f| f.contains(&word) && quoted(f));
            let elsewhere = ELSEWHERE
                .iter()
                .filter(|(s, f, _, _)| s == sub && forms.contains(f))
                .any(|(_, f, file, test)| body(file, test).contains(&format!("\"{f}\"")));
            if !(in_table || in_a_test_here || elsewhere) {
                missing.push(format!("rdmakit {sub} {long}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags no test runs:\n{}",
        missing.join("\n")
    );
}

/// Only the commands that open a device take --provider; the others refuse it.
#[test]
fn provider_is_refused_where_no_device_is_opened() {
    for args in [
        &["--provider", "soft", "dev"][..],
        &["--provider", "soft", "fleet", "report", "x"],
    ] {
        let o = rdmakit(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = text(&o.stderr);
        assert!(err.contains("opens none: leave --provider out"), "{err}");
    }
    let h = fixture("healthy");
    let o = rdmakit(&["--provider", "soft", "devinfo", "--from", &h]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("`rdmakit devinfo --from/--root` opens none"),
        "{}",
        text(&o.stderr)
    );
    let o = rdmakit(&["--provider", "soft", "devinfo", "-d", "soft0"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let mut s = String::new();
    let _ = std::io::Cursor::new(o.stdout).read_to_string(&mut s);
    assert!(s.starts_with("hca_id:\tsoft0"), "{s}");
}
