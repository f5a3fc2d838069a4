//! The test fleet: 22 nodes built from the real captures in fixtures/ (rxe
//! from the Soft-RoCE VM, hfi1 and mlx4 hosts from real-nics-procfs), each
//! with its own host name, faults injected by editing the files a real fault
//! changes, written as the inputs `rdmakit fleet report` reads ([`faulty_fleet`]);
//! the doctor's report of a node as JSON. Shared by the fleet's, the report's
//! and rdmakit's tests (feature `fleet`).

use std::path::Path;

use rdmakit_doctor::checks::Config;
use rdmakit_doctor::report::Report;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::collect;

use crate::bundle::{port_down, real_nics, rxe, set_line};
use crate::{fixture, fixtures_dir};

/// The doctor's report of a node (default configuration).
pub fn report(b: &Bundle) -> Report {
    let facts = collect(b, &b.header.options.clone());
    Report::build(&facts, &Config::default(), "rdmakit test", "test bundle")
}

/// The doctor's JSON of a node, on one line (as a sweep prints it).
pub fn json_line(b: &Bundle) -> String {
    serde_json::to_string(&report(b)).unwrap()
}

/// The doctor's JSON of a node, as `rdmakit doctor --json` prints it.
pub fn json_pretty(b: &Bundle) -> String {
    rdmakit_doctor::render::json(&report(b))
}

/// Writes a file, making its directory.
pub fn write(path: &Path, content: &[u8]) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(path, content).unwrap();
}

/// The test fleet: 13 rxe nodes (a directory of bundles, plus the healthy capture
/// directory itself), 4 hfi1 + mlx4 nodes (JSON lines, with a garbage line), 5
/// mlx4-only nodes (doctor JSON files), and a corrupt bundle. Faults:
/// - node03: rxe0 port 1 down;
/// - node07: rxe0 retry_exceeded_err at 5000 where its peers have 0;
/// - hpc03: mlx4_0 gone;
/// - mlx4-02: firmware 2.30.8000 where its peers run 2.31.5050;
/// - mlx4-04: port 2 at 20 Gb/sec (4X DDR) where its peers run 40.
///
/// Returns the inputs to give `fleet report`.
pub fn faulty_fleet(dir: &Path) -> Vec<String> {
    let bundles = dir.join("bundles");
    std::fs::create_dir_all(&bundles).unwrap();
    for i in 1..=12 {
        let host = format!("node{i:02}");
        let mut b = rxe(&host, i > 8);
        match i {
            3 => port_down(&mut b, "rxe0", 1),
            7 => set_line(
                &mut b,
                "/sys/class/infiniband/rxe0/ports/1/hw_counters/retry_exceeded_err",
                "5000",
            ),
            _ => {}
        }
        b.write(bundles.join(format!("{host}.json.gz")).to_str().unwrap())
            .unwrap();
    }
    write(&bundles.join("README"), b"not an input\n");

    let mut lines = String::new();
    for i in 1..=4 {
        let host = format!("hpc{i:02}");
        let devs: &[&str] = if i == 3 {
            &["hfi1_0"]
        } else {
            &["hfi1_0", "mlx4_0"]
        };
        lines.push_str(&json_line(&real_nics(&host, devs)));
        lines.push('\n');
        if i == 2 {
            lines.push_str("{\"schema\":\"rdmakit.doctor/v1\",\"findings\":[{\"code\"\n");
        }
    }
    write(&dir.join("hpc.jsonl"), lines.as_bytes());

    for i in 1..=5 {
        let host = format!("mlx4-{i:02}");
        let mut b = real_nics(&host, &["mlx4_0"]);
        match i {
            2 => set_line(&mut b, "/sys/class/infiniband/mlx4_0/fw_ver", "2.30.8000"),
            4 => set_line(
                &mut b,
                "/sys/class/infiniband/mlx4_0/ports/2/rate",
                "20 Gb/sec (4X DDR)",
            ),
            _ => {}
        }
        write(
            &dir.join(format!("mlx4/{host}.json")),
            json_pretty(&b).as_bytes(),
        );
    }

    write(&dir.join("broken.json.gz"), b"\x1f\x8b\x08\x00 truncated");

    vec![
        bundles.display().to_string(),
        fixture("healthy").display().to_string(),
        dir.join("hpc.jsonl").display().to_string(),
        dir.join("mlx4").display().to_string(),
        dir.join("broken.json.gz").display().to_string(),
    ]
}

/// Replaces machine-specific paths in output with placeholders.
pub fn scrub(text: &str, dir: &Path) -> String {
    text.replace(&dir.display().to_string(), "$TMP")
        .replace(&fixtures_dir().display().to_string(), "$FIXTURES")
}
