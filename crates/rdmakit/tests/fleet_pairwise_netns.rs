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
//! The benchmark of the same scenarios is crates/rdmakit/benches/pairwise.rs
//! (`scripts/bench-pairwise`).

mod common;
mod fabric;

use std::sync::Mutex;
use std::time::Instant;

use common::node_names;
use fabric::{Fabric, TOKEN};

/// One fabric at a time: they share the two CPUs.
static ONE: Mutex<()> = Mutex::new(());

use fabric::slow_mbit;

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

/// A pair that is slow and drops what its 16-packet queue cannot hold
/// (a congested link; this kernel has no netem): the soft NICs at
/// its ends count what the loss cost (retransmissions, ACK timeouts,
/// requests out of sequence), the JSON has each end's deltas, and the slow
/// link's verdict — as text and in the HTML page — cites them.
#[test]
fn a_lossy_pair_is_a_link_whose_verdict_cites_the_counters_that_moved() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::new(6);
    let (clean, _) = f.pairwise(QUICK);
    let rate = slow_mbit(Fabric::median(&clean));
    f.lossy_pair(0, 4, rate, 16);
    let (v, code) = f.pairwise(QUICK);
    f.clear();
    assert_eq!(Fabric::faults(&v), vec!["link n1-n5"], "{v:#}");
    assert_eq!(code, 1);
    // The soft NIC's transport counters, by mlx5's hw_counters names.
    const SOFT: [&str; 5] = [
        "retransmitted_packets",
        "local_ack_timeout_err",
        "out_of_sequence",
        "packet_seq_err",
        "duplicate_request",
    ];
    let pair: Vec<&serde_json::Value> = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["phase"] == "screen")
        .filter(|c| {
            (c["from"] == "n1" && c["to"] == "n5") || (c["from"] == "n5" && c["to"] == "n1")
        })
        .collect();
    assert_eq!(pair.len(), 2, "{v:#}");
    let moved: Vec<(String, String, u64)> = pair
        .iter()
        .flat_map(|c| {
            ["from", "to"].into_iter().flat_map(move |end| {
                let node = c[end].as_str().unwrap().to_string();
                c[format!("{end}_counters")]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(move |(n, d)| (node.clone(), n.clone(), d.as_u64().unwrap()))
            })
        })
        .collect();
    assert!(
        moved
            .iter()
            .any(|(_, n, d)| SOFT.contains(&n.as_str()) && *d > 0),
        "no soft NIC counter moved on the lossy pair: {pair:#?}"
    );
    eprintln!(
        "lossy pair cells: {}",
        serde_json::to_string_pretty(&pair).unwrap()
    );
    // The verdict, rendered again from the JSON, cites them.
    let run = f.dir().join("lossy.json");
    std::fs::write(&run, serde_json::to_vec(&v).unwrap()).unwrap();
    let html = f.dir().join("lossy.html");
    let out = std::process::Command::new(fabric::bin())
        .args(["fleet", "pairwise", "--from"])
        .arg(&run)
        .arg("--html")
        .arg(&html)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("verdict:\n{text}");
    let cited = |t: &str| {
        moved
            .iter()
            .any(|(node, n, _)| SOFT.contains(&n.as_str()) && t.contains(&format!("{node} {n} +")))
    };
    assert!(text.contains("link n1 <-> n5"), "{text}");
    assert!(cited(&text), "the verdict cites no counter: {text}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(cited(&page), "the page cites no counter");
    assert!(page.contains("Counters that moved"));
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
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let mut f = Fabric::new(6);
    // The by-hand agents are not part of this: the step starts its own.
    for i in 0..6 {
        f.kill_agent(i);
    }
    let srun = f.dir().join("srun");
    rdmakit_testkit::write_script(&srun, FAKE_SRUN);
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
    let names = node_names(&v);
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
