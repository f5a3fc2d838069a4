//! `rdmakit doctor --from BUNDLE` over a 16-device bundle built from the real
//! captures: 8 Soft-RoCE devices cloned from the healthy rxe0 (each with its full
//! 1024-entry GID table), 8 PCI-less IB/OPA devices cloned from the procfs mlx4_0,
//! mlx5_0 and hfi1_0 trees. The bundle is recorded the way `rdmakit collect` records
//! a live host, then written to target/bench16.json.gz (scripts/bench-doctor measures
//! the binary's wall time and peak RSS on it).
//!
//! Baseline in the same process: parsing the bundle's JSON into a generic
//! `serde_json::Value` (what any consumer of the file must at least do).

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Read;

use criterion::{criterion_group, criterion_main, Criterion};
use rdmakit_doctor::checks::Config;
use rdmakit_doctor::render::{self, HumanOptions};
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;
use rdmakit_host::source::{Kind, Op, Recorder};

fn sixteen_devices() -> Bundle {
    let mut b = common::import("healthy");
    let nics = common::import("real-nics-procfs");
    let rxe = "/sys/devices/virtual/infiniband/rxe0";
    let keys = b.keys();
    for i in 1..8 {
        let dst = format!("/sys/devices/virtual/infiniband/rxe{i}");
        for (op, path) in &keys {
            if let Some(rest) = path.strip_prefix(rxe) {
                let ans = b.get(*op, path).cloned().expect("key exists");
                b.set(*op, &format!("{dst}{rest}"), ans);
            }
        }
        common::add_entry(
            &mut b,
            "/sys/devices/virtual/infiniband",
            &format!("rxe{i}"),
            Kind::Dir,
        );
        common::link(
            &mut b,
            &format!("/sys/class/infiniband/rxe{i}"),
            &format!("../../devices/virtual/infiniband/rxe{i}"),
        );
        common::set(
            &mut b,
            &format!("/sys/class/infiniband_verbs/uverbs{i}/ibdev"),
            &format!("rxe{i}\n"),
        );
        common::add_entry(
            &mut b,
            "/sys/class/infiniband_verbs",
            &format!("uverbs{i}"),
            Kind::Dir,
        );
    }
    let models = ["mlx4_0", "mlx5_0", "hfi1_0"];
    for i in 0..8 {
        let model = models[i % 3];
        let name = format!("{}_{}", &model[..model.len() - 2], 10 + i);
        let src = format!("/sys/class/infiniband/{model}");
        for (op, path) in nics.keys() {
            if let Some(rest) = path.strip_prefix(&src) {
                let ans = nics.get(op, &path).cloned().expect("key exists");
                b.set(op, &format!("/sys/class/infiniband/{name}{rest}"), ans);
            }
        }
        common::add_entry(&mut b, "/sys/class/infiniband", &name, Kind::Dir);
        common::set(
            &mut b,
            &format!("/sys/class/infiniband_verbs/uverbs{}/ibdev", 8 + i),
            &format!("{name}\n"),
        );
        common::add_entry(
            &mut b,
            "/sys/class/infiniband_verbs",
            &format!("uverbs{}", 8 + i),
            Kind::Dir,
        );
    }
    // Record it the way `rdmakit collect` records a live host.
    let rec = Recorder::new(&b);
    let facts = collect(&rec, &b.header.options.clone());
    assert_eq!(facts.devices.len(), 16);
    Bundle::new(b.header.clone(), rec.into_records())
}

fn doctor(bytes: &[u8]) -> String {
    let bundle = Bundle::from_bytes("bench16", bytes).expect("bundle parses");
    let facts = collect(&bundle, &bundle.header.options.clone());
    let report = Report::build(&facts, &Config::default(), "bench", "bench16");
    render::human(&report, HumanOptions::default())
}

fn bench(c: &mut Criterion) {
    let bundle = sixteen_devices();
    let target =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench16.json.gz");
    bundle
        .write(target.to_str().expect("utf-8 path"))
        .expect("bundle written");
    let gz = std::fs::read(&target).expect("bundle read back");
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut json)
        .expect("gunzip");
    eprintln!(
        "bench16: {} answers, {} KiB gzip, {} KiB JSON, {} read questions",
        bundle.len(),
        gz.len() / 1024,
        json.len() / 1024,
        bundle
            .keys()
            .iter()
            .filter(|(op, _)| *op == Op::Read)
            .count()
    );
    let mut g = c.benchmark_group("doctor16");
    g.bench_function("baseline: parse bundle JSON to serde_json::Value", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(&json).expect("json"))
    });
    g.bench_function(
        "doctor --from bundle.json (parse, collect, rules, render)",
        |b| b.iter(|| doctor(&json)),
    );
    g.bench_function("doctor --from bundle.json.gz (+ gunzip)", |b| {
        b.iter(|| doctor(&gz))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
