//! Writes a large test fleet for scripts/bench-fleet, built from the real captures
//! in fixtures/: the doctor runs once per kind of node (rxe idle and busy from the
//! Soft-RoCE VM, mlx4-only and hfi1 + mlx4 hosts from the real-nics-procfs tree, and
//! faulty variants of them: a port down, other firmware, a slow link, an HCA gone,
//! error counters), then every node gets its own host name and traffic counters.
//!
//! Usage: `fleet_gen OUT_DIR N [BUNDLES]` writes
//! - `OUT_DIR/sweep.jsonl`: N doctor reports, one per line (as a sweep prints them),
//! - `OUT_DIR/sweep-tenth.jsonl`: the first N/10 of them,
//! - `OUT_DIR/reports/NAME.json`: the same N, one `rdmakit doctor --json` file each,
//! - `OUT_DIR/bundles/NAME.json.gz`: the first BUNDLES nodes as `rdmakit collect`
//!   bundles (default 0),
//! - `OUT_DIR/one.json`: one report.
//!
//! About 1 node in 50 carries a fault.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use rdmakit_doctor::checks::Config;
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;
use rdmakit_testkit::bundle::{import, keep_devices, set_line};
use serde_json::Value;

/// One kind of node: its bundle (without a host name) and its doctor report.
struct Template {
    bundle: Bundle,
    report: Value,
}

fn template(bundle: Bundle) -> Template {
    let facts = collect(&bundle, &bundle.header.options.clone());
    let r = Report::build(&facts, &Config::default(), "rdmakit fleet_gen", "fleet_gen");
    Template {
        report: serde_json::to_value(&r).expect("a report serializes"),
        bundle,
    }
}

fn templates() -> Vec<Template> {
    let rxe = || import("healthy");
    let real = || import("real-nics-procfs");
    let mut down = rxe();
    set_line(
        &mut down,
        "/sys/class/infiniband/rxe0/ports/1/state",
        "1: DOWN",
    );
    set_line(
        &mut down,
        "/sys/class/infiniband/rxe0/ports/1/phys_state",
        "3: Disabled",
    );
    let mut errs = rxe();
    set_line(
        &mut errs,
        "/sys/class/infiniband/rxe0/ports/1/hw_counters/retry_exceeded_err",
        "5000",
    );
    let mut fw = keep_devices(real(), &["mlx4_0"]);
    set_line(&mut fw, "/sys/class/infiniband/mlx4_0/fw_ver", "2.30.8000");
    let mut slow = keep_devices(real(), &["mlx4_0"]);
    set_line(
        &mut slow,
        "/sys/class/infiniband/mlx4_0/ports/2/rate",
        "20 Gb/sec (4X DDR)",
    );
    vec![
        template(rxe()),
        template(import("healthy-busy")),
        template(keep_devices(real(), &["mlx4_0"])),
        template(keep_devices(real(), &["hfi1_0", "mlx4_0"])),
        // faulty kinds
        template(down),
        template(errs),
        template(fw),
        template(slow),
        template(keep_devices(real(), &["hfi1_0"])),
    ]
}

/// Which template node `i` uses: 60 % rxe (a fifth of them busy), 25 % mlx4,
/// 15 % hfi1 + mlx4; every 50th node a faulty variant.
fn kind(i: usize) -> usize {
    if i % 50 == 7 {
        return 4 + (i / 50) % 5;
    }
    match i % 20 {
        0..=8 => 0,
        9..=11 => 1,
        12..=16 => 2,
        _ => 3,
    }
}

/// Node `i`'s report: the template's, with its own name and traffic counters.
fn node_report(t: &Template, name: &str, i: usize) -> Value {
    let mut v = t.report.clone();
    v["inventory"]["hostname"] = Value::from(name);
    v["inventory"]["hostname_source"] = Value::from("/proc/sys/kernel/hostname");
    v["source"] = Value::from(format!("live host {name}"));
    if let Some(devs) = v["inventory"]["devices"].as_array_mut() {
        for d in devs {
            let Some(ports) = d["ports"].as_array_mut() else {
                continue;
            };
            for p in ports {
                for c in [
                    "port_rcv_data",
                    "port_xmit_data",
                    "port_rcv_packets",
                    "port_xmit_packets",
                ] {
                    if let Some(x) = p["counters"][c].as_u64() {
                        p["counters"][c] = Value::from(x + (i as u64 * 7919) % 100_000);
                    }
                }
            }
        }
    }
    v
}

fn write(path: &Path, bytes: &[u8]) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(out), Some(n)) = (
        args.get(1),
        args.get(2).and_then(|s| s.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: fleet_gen OUT_DIR N [BUNDLES]");
        std::process::exit(2);
    };
    let bundles: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(0);
    let out = PathBuf::from(out);
    let ts = templates();
    let mut sweep = std::io::BufWriter::new(
        std::fs::File::create(out.join("sweep.jsonl"))
            .or_else(|_| {
                std::fs::create_dir_all(&out)?;
                std::fs::File::create(out.join("sweep.jsonl"))
            })
            .expect("sweep.jsonl"),
    );
    let mut tenth = Vec::new();
    for i in 0..n {
        let name = format!("node{:04}", i + 1);
        let t = &ts[kind(i)];
        let v = node_report(t, &name, i);
        let line = serde_json::to_string(&v).expect("serializes");
        writeln!(sweep, "{line}").expect("write sweep.jsonl");
        if i < n / 10 {
            tenth.extend_from_slice(line.as_bytes());
            tenth.push(b'\n');
        }
        let pretty = serde_json::to_string_pretty(&v).expect("serializes");
        write(&out.join(format!("reports/{name}.json")), pretty.as_bytes());
        if i == 0 {
            write(&out.join("one.json"), pretty.as_bytes());
        }
        if i < bundles {
            let mut b = Bundle::new(t.bundle.header.clone(), Default::default());
            for (op, key) in t.bundle.keys() {
                if let Some(a) = t.bundle.get(op, &key) {
                    b.set(op, &key, a.clone());
                }
            }
            b.write_file("/proc/sys/kernel/hostname", format!("{name}\n").as_bytes());
            let p = out.join(format!("bundles/{name}.json.gz"));
            write(&p, b"");
            b.write(p.to_str().expect("UTF-8 path"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    sweep.flush().expect("write sweep.jsonl");
    write(&out.join("sweep-tenth.jsonl"), &tenth);
    eprintln!(
        "fleet_gen: {n} nodes ({} with a fault) in {}, {bundles} as bundles",
        (0..n).filter(|i| kind(*i) >= 4).count(),
        out.display()
    );
}
