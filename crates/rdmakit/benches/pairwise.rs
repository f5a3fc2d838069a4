//! The pairwise matrix's benchmark (`scripts/bench-pairwise`; not part of
//! `cargo test`): six network namespaces on a bridge, one `rdmakit fleet
//! agent` each, faults injected with tc, as crates/rdmakit/tests/
//! fleet_pairwise_netns.rs builds them. Needs root.

#[path = "../tests/fabric/mod.rs"]
mod fabric;

use fabric::{slow_mbit, Fabric};

/// Repeats clean / slow node / slow pair on 6 namespaces with the default
/// settings and prints how often each was classified right and the time per
/// round, against two baselines measured in the same run: the planned
/// measuring time of a round (what the tests themselves last) and a round
/// of one pair alone (a 2-node matrix). `scripts/bench-pairwise` runs it
/// (release build); RDMAKIT_BENCH_RUNS sets the repeats (default 5),
/// RDMAKIT_BENCH_SAVE=DIR keeps every report.
fn main() {
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
