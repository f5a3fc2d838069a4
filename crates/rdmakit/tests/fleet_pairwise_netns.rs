//! The pairwise matrix on a real (namespaced) fabric: six network
//! namespaces on a bridge, one `rdmakit fleet agent` each, faults injected
//! with tc. A clean fabric reports nothing; a slow node is that node; a slow
//! pair is that link. The agents as a Slurm job step, through a stand-in
//! srun that starts each task in its node's namespace (and UTS namespace,
//! so each has its own hostname) as slurmd would.
//!
//! Needs root (this machine and CI run the tests as root); fails, never
//! skips, when the namespaces cannot be made.
//!
//! `bench_pairwise` (ignored; `scripts/bench-pairwise` runs it in release)
//! repeats each scenario and reports how often it was classified right and
//! the time per round.

mod fabric;

use std::sync::Mutex;
use std::time::Instant;

use fabric::{Fabric, TOKEN};

/// One fabric at a time: they share the two CPUs.
static ONE: Mutex<()> = Mutex::new(());

/// The slow rate for injected faults: an eighth of the clean matrix's
/// median (in Mbit/s), so the fault is far outside the noise of a loaded
/// 2-core machine however fast the build is.
fn slow_mbit(clean_median_mbs: f64) -> u32 {
    ((clean_median_mbs * 8.388_608 / 8.0) as u32).max(2)
}

/// Test-speed settings: fewer, smaller sizes and a shallower queue (a debug
/// build's soft NIC is slow, and a shaped pair drains what is in flight at
/// the shaped rate after each size).
const QUICK: &[&str] = &[
    "--sizes",
    "16384,65536",
    "--seconds",
    "0.25",
    "--lat-seconds",
    "0.1",
    "--tx-depth",
    "8",
];

#[test]
fn clean_then_slow_node_then_slow_pair_on_six_namespaces() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(6);
    let t = Instant::now();
    let (clean, code) = f.pairwise(QUICK);
    assert_eq!(
        Fabric::faults(&clean),
        Vec::<String>::new(),
        "clean fabric: {clean:#}"
    );
    assert_eq!(code, 0);
    assert_eq!(clean["schema"], "rdmakit.pairwise/v1");
    assert_eq!(clean["nodes"].as_array().unwrap().len(), 6);
    // 15 pairs × 2 directions, all measured.
    let screen: Vec<_> = clean["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["phase"] == "screen")
        .collect();
    assert_eq!(screen.len(), 30);
    assert!(screen
        .iter()
        .all(|c| c["error"].is_null() && c["mbs"].as_f64().unwrap() > 0.0));
    assert_eq!(
        clean["rounds"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["phase"] == "screen")
            .count(),
        5
    );
    let rate = slow_mbit(Fabric::median(&clean));

    f.slow_node(2, rate);
    let (v, code) = f.pairwise(QUICK);
    f.clear();
    assert_eq!(
        Fabric::faults(&v),
        vec!["node n3"],
        "slow node at {rate} Mbit/s: {v:#}"
    );
    assert_eq!(code, 1);

    f.slow_pair(0, 4, rate);
    let (v, code) = f.pairwise(QUICK);
    f.clear();
    assert_eq!(
        Fabric::faults(&v),
        vec!["link n1-n5"],
        "slow pair at {rate} Mbit/s: {v:#}"
    );
    assert_eq!(code, 1);
    eprintln!(
        "three 6-node matrices in {:.0} s",
        t.elapsed().as_secs_f64()
    );
}

#[test]
fn quick_ring_with_a_reference_finds_the_slow_node() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(6);
    let (clean, _) = f.pairwise(QUICK);
    let rate = slow_mbit(Fabric::median(&clean));
    f.slow_node(3, rate);
    let mut args = QUICK.to_vec();
    args.extend(["--quick", "--reference", "n1"]);
    let (v, code) = f.pairwise(&args);
    f.clear();
    assert_eq!(Fabric::faults(&v), vec!["node n4"], "{v:#}");
    assert_eq!(code, 1);
    assert_eq!(v["mode"], "quick");
    // A ring of 6: 2 rounds, 6 pairs; the confirmation used the reference.
    let screen_rounds = v["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["phase"] == "screen")
        .count();
    assert_eq!(screen_rounds, 2);
    let conf = &v["confirmations"][0];
    assert_eq!(conf["verdict"], "confirmed", "{v:#}");
    assert!(
        conf["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["from"] == "n1" || c["to"] == "n1"),
        "{conf:#}"
    );
}

/// Every screening cell measured, none failed.
fn no_failed_cell(v: &serde_json::Value) -> bool {
    v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["phase"] == "screen")
        .all(|c| c["error"].is_null() && c["mbs"].as_f64().unwrap() > 0.0)
}

/// On 1500-byte links (Ethernet's default; the Slurm test bed's) a 4096
/// path MTU loses every full packet. The agents report the path MTU their
/// link carries and each test uses the smaller: a clean matrix, not one of
/// RETRY_EXC_ERR (which read as a clean fabric before `inconclusive`).
#[test]
fn links_of_1500_bytes_lower_the_path_mtu_instead_of_failing() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(3);
    for i in 0..3 {
        f.set_mtu(i, 1500);
    }
    let (v, code) = f.pairwise(QUICK);
    assert!(no_failed_cell(&v), "{v:#}");
    assert_eq!(Fabric::faults(&v), Vec::<String>::new(), "{v:#}");
    assert!(v["inconclusive"].is_null(), "{v:#}");
    assert_eq!(code, 0);
    assert_eq!(v["settings"]["mtu"], 4096);
    let mtus: Vec<_> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["mtu"].as_u64())
        .collect();
    assert_eq!(mtus, vec![Some(1024); 3]);

    // Mixed: n1 back on a jumbo link (4096); its pairs with the others
    // still run at their 1024.
    f.set_mtu(0, 9000);
    let (v, _) = f.pairwise(QUICK);
    assert!(no_failed_cell(&v), "{v:#}");
    assert_eq!(v["nodes"][0]["mtu"], 4096, "{v:#}");
    assert_eq!(v["nodes"][1]["mtu"], 1024, "{v:#}");
}

/// A stand-in for srun: starts one task per namespace (in its own UTS
/// namespace, hostname nI, as a slurmd in the test bed would), with the
/// environment srun gives tasks; forwards SIGTERM; records its argv and
/// whether the token came through the environment.
const FAKE_SRUN: &str = r#"#!/bin/bash
set -u
echo "$@" > "$FAKE_DIR/argv"
[ -n "${RDMAKIT_FLEET_TOKEN:-}" ] && echo yes > "$FAKE_DIR/token_in_env"
args=()
for a in "$@"; do
  case "$a" in
    --ntasks-per-node=*|--unbuffered|--job-name=*|--nodes=*|--partition=*|--nodelist=*) ;;
    *) args+=("$a") ;;
  esac
done
pids=()
r=0
for ns in $FAKE_NAMESPACES; do
  SLURM_PROCID=$r SLURM_NTASKS=$(echo $FAKE_NAMESPACES | wc -w) \
  SLURM_LAUNCH_NODE_IPADDR=$FAKE_LAUNCH_IP \
    ip netns exec "$ns" unshare --uts /bin/sh -c 'hostname "$0"; exec "$@"' "n$((r+1))" "${args[@]}" &
  pids+=($!)
  r=$((r+1))
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM INT
st=0
for p in "${pids[@]}"; do wait "$p" || st=$?; done
echo "$st" > "$FAKE_DIR/exit"
exit "$st"
"#;

#[test]
fn slurm_step_starts_agents_coordinates_and_stops_them() {
    use std::os::unix::fs::PermissionsExt;
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let mut f = Fabric::new(6);
    // The by-hand agents are not part of this: the step starts its own.
    for i in 0..6 {
        f.kill_agent(i);
    }
    let srun = f.dir().join("srun");
    std::fs::write(&srun, FAKE_SRUN).unwrap();
    std::fs::set_permissions(&srun, std::fs::Permissions::from_mode(0o755)).unwrap();
    let namespaces: Vec<String> = (0..6).map(|i| f.ns(i)).collect();
    let launch_ip = f.ip(0).to_string().rsplit_once('.').unwrap().0.to_string() + ".1";
    let out = std::process::Command::new(fabric::bin())
        .args([
            "fleet",
            "pairwise",
            "--slurm",
            "-N",
            "6",
            "--json",
            "--agent-port",
            "18517",
        ])
        .args(["--srun", srun.to_str().unwrap()])
        .args(QUICK)
        .env_remove("RDMAKIT_FLEET_TOKEN")
        .env("FAKE_DIR", f.dir())
        .env("FAKE_NAMESPACES", namespaces.join(" "))
        .env("FAKE_LAUNCH_IP", &launch_ip)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {err}"));
    assert_eq!(out.status.code(), Some(0), "{err}\n{v:#}");
    assert_eq!(Fabric::faults(&v), Vec::<String>::new(), "{v:#}");
    let names: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["n1", "n2", "n3", "n4", "n5", "n6"]);
    // Each agent was reached at its namespace's address.
    assert_eq!(v["nodes"][2]["addr"], format!("{}:18517", f.ip(2)));
    // One srun, the token in its environment and not on its command line.
    let argv = std::fs::read_to_string(f.dir().join("argv")).unwrap();
    assert!(argv.starts_with("--ntasks-per-node=1 "), "{argv}");
    assert!(
        argv.contains("fleet agent --listen 0.0.0.0:18517 --once"),
        "{argv}"
    );
    assert!(
        !argv.contains(TOKEN) && !argv.to_lowercase().contains("token"),
        "{argv}"
    );
    assert!(
        f.dir().join("token_in_env").exists(),
        "no token in the step's environment"
    );
    // The step ended by itself (the agents exited when told), and no
    // process is left in any namespace.
    assert_eq!(
        std::fs::read_to_string(f.dir().join("exit"))
            .unwrap()
            .trim(),
        "0",
        "{err}"
    );
    for ns in &namespaces {
        let pids = std::process::Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .unwrap();
        assert!(
            pids.stdout.is_empty(),
            "left running in {ns}: {}",
            String::from_utf8_lossy(&pids.stdout)
        );
    }
}

/// Repeats clean / slow node / slow pair on 6 namespaces with the default
/// settings and prints how often each was classified right and the time per
/// round, against two baselines measured in the same run: the planned
/// measuring time of a round (what the tests themselves last) and a round
/// of one pair alone (a 2-node matrix). `scripts/bench-pairwise` runs it
/// (release build); RDMAKIT_BENCH_RUNS sets the repeats (default 5),
/// RDMAKIT_BENCH_SAVE=DIR keeps every report.
#[test]
#[ignore = "benchmark: scripts/bench-pairwise"]
fn bench_pairwise() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let runs: usize = std::env::var("RDMAKIT_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let save = std::env::var_os("RDMAKIT_BENCH_SAVE").map(std::path::PathBuf::from);
    let f = Fabric::new(6);
    let (warm, _) = f.pairwise(&[]);
    let rate = slow_mbit(Fabric::median(&warm));
    eprintln!(
        "bench-pairwise: clean median {:.0} MB/s; faults shaped to {rate} Mbit/s",
        Fabric::median(&warm)
    );
    let med = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        s.get(s.len() / 2).copied().unwrap_or(0.0)
    };
    let rounds_of = |v: &serde_json::Value, screen: bool| -> Vec<f64> {
        v["rounds"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| (r["phase"] == "screen") == screen)
            .map(|r| r["seconds"].as_f64().unwrap())
            .collect()
    };
    // Baseline: one pair alone, same settings.
    let mut alone = Vec::new();
    for _ in 0..runs {
        let (v, _) = f.pairwise_on(&[0, 1], &[]);
        alone.extend(rounds_of(&v, true));
    }
    type Inject<'a> = Box<dyn Fn(&Fabric) + 'a>;
    let scenarios: Vec<(&str, Inject, Vec<String>)> = vec![
        ("clean", Box::new(|_| {}), vec![]),
        (
            "slow node n3",
            Box::new(move |f| f.slow_node(2, rate)),
            vec!["node n3".into()],
        ),
        (
            "slow pair n1-n5",
            Box::new(move |f| f.slow_pair(0, 4, rate)),
            vec!["link n1-n5".into()],
        ),
    ];
    let mut rows = Vec::new();
    for (name, inject, want) in &scenarios {
        let mut right = 0;
        let (mut totals, mut rounds, mut confirm) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..runs {
            inject(&f);
            let (v, _) = f.pairwise(&[]);
            f.clear();
            let got = Fabric::faults(&v);
            if &got == want {
                right += 1;
            } else {
                eprintln!("  {name} run {}: got {got:?}", k + 1);
            }
            if let Some(d) = &save {
                let file = d.join(format!("{}-{}.json", name.replace(' ', "-"), k + 1));
                std::fs::write(file, serde_json::to_string_pretty(&v).unwrap()).unwrap();
            }
            totals.push(v["seconds"].as_f64().unwrap());
            rounds.extend(rounds_of(&v, true));
            confirm.push(rounds_of(&v, false).iter().fold(0.0, |a, b| a + b));
        }
        rows.push((name.to_string(), right, totals, rounds, confirm));
    }
    // What one pair's tests last by plan: write-bw 3 sizes x 0.3 s and
    // send-lat 0.2 s, each way.
    let planned = 2.0 * (3.0 * 0.3 + 0.2);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\nbench-pairwise: 6 namespaced agents, default settings, {runs} runs per scenario \
         (load average {})",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "baselines: a pair's planned test time {planned:.1} s; one pair alone (2-node matrix): \
         round {:.2} s (median of {})",
        med(&alone),
        alone.len()
    );
    println!(
        "{:<16} {:>6} {:>20} {:>8} {:>14} {:>12} {:>10}",
        "scenario",
        "right",
        "6-node matrix s",
        "round s",
        "round/planned",
        "round/alone",
        "confirm s"
    );
    for (name, right, totals, rounds, confirm) in &rows {
        let max = totals.iter().copied().fold(0.0, f64::max);
        println!(
            "{name:<16} {:>6} {:>20} {:>8.2} {:>14.2} {:>12.2} {:>10.1}",
            format!("{right}/{runs}"),
            format!("{:.1} (max {:.1})", med(totals), max),
            med(rounds),
            med(rounds) / planned,
            med(rounds) / med(&alone),
            med(confirm)
        );
    }
}
