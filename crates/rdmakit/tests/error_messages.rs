//! What rdmakit prints when it cannot do what was asked: one message that says
//! what failed, on what, the errno by its name and what to do — never Rust's
//! "(os error N)", never `Debug` text, never the same cause twice. Each case is
//! the exact text the real binary prints.

mod common;

use common::*;

/// (arguments, the exact stderr, the exit status).
fn cases(dir: &std::path::Path) -> Vec<(Vec<String>, String, i32)> {
    let healthy = fixture("healthy");
    let vm = format!(
        "{}/../doctor/tests/data/vm/healthy.json.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let missing_dir = dir.join("no/such/dir/b.json").display().to_string();
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    vec![
        (
            s(&["doctor", "--from", "/nonexistent"]),
            "rdmakit: error: --from /nonexistent: ENOENT (No such file or directory): name a \
             bundle written by `rdmakit collect -o FILE`, or a capture directory\n"
                .into(),
            2,
        ),
        (
            s(&["dev", "--root", "/nonexistent"]),
            "rdmakit: error: --root /nonexistent: ENOENT (No such file or directory): name the \
             directory a host's /sys and /proc were copied to, or replay a bundle with --from\n"
                .into(),
            2,
        ),
        (
            s(&["doctor", "--from", &healthy, "--baseline", "/nonexistent"]),
            "rdmakit: error: --baseline /nonexistent: ENOENT (No such file or directory): name \
             a bundle written by `rdmakit collect -o FILE`, or a capture directory\n"
                .into(),
            2,
        ),
        (
            s(&["doctor", "--from", &healthy, "--kernel-log", "/nonexistent"]),
            "rdmakit: error: --kernel-log /nonexistent: ENOENT (No such file or directory): \
             name a file or a pipe of kernel messages (journalctl -k > k.log; --kernel-log \
             <(dmesg))\n"
                .into(),
            2,
        ),
        (
            s(&["metrics", "--kernel-log", "/nonexistent"]),
            "rdmakit: error: --kernel-log /nonexistent: ENOENT (No such file or directory): \
             name a file or a pipe of kernel messages (journalctl -k > k.log; --kernel-log \
             <(dmesg))\n"
                .into(),
            2,
        ),
        (
            s(&["doctor", "--no-probe", "--pid", "4194304"]),
            "rdmakit: error: --pid 4194304: no process 4194304 on the live host (ESRCH): name a \
             running process (pgrep -f APP)\n"
                .into(),
            2,
        ),
        (
            s(&["collect", "--from", &vm, "--pid", "436", "-o", "/dev/null"]),
            format!(
                "rdmakit: error: --pid 436: bundle {vm} (rdmakit 0.1.0, live host) did not \
                 record process 436 (it was collected without --pid): collect again with \
                 `rdmakit collect --pid 436`, or leave --pid out\n"
            ),
            2,
        ),
        (
            s(&["collect", "--from", &healthy, "-o", &missing_dir]),
            format!(
                "rdmakit: error: -o {missing_dir}: cannot write the bundle: ENOENT (No such file \
                 or directory): its directory does not exist\n"
            ),
            2,
        ),
        (
            s(&["metrics", "--from", &healthy, "--listen", "192.0.2.1:9879"]),
            "rdmakit: error: --listen 192.0.2.1:9879: cannot bind: EADDRNOTAVAIL (Cannot assign \
             requested address): not an address of this host\n"
                .into(),
            2,
        ),
        (
            s(&[
                "shim",
                "install",
                dir.to_str().unwrap(),
                "--from",
                "/nonexistent",
            ]),
            "rdmakit: error: --from /nonexistent: ENOENT (No such file or directory): name the \
             built drop-in library (target/release/libibverbs.so after `cargo build --release \
             --workspace`)\n"
                .into(),
            2,
        ),
        (
            s(&["--provider", "soft", "link"]),
            "rdmakit: error: --provider chooses how devinfo, perf, verbs-test and fleet agent \
             open a device; `rdmakit link` opens none: leave --provider out\n"
                .into(),
            2,
        ),
        (
            s(&["fleet", "pairwise", "--agents", "127.0.0.1:1", "-N", "4"]),
            "rdmakit fleet pairwise: error: -N/--nodes applies with --slurm (agents started as \
             a job step); agents named with --agents were started by you: leave -N/--nodes out\n"
                .into(),
            2,
        ),
    ]
}

#[test]
fn each_failure_is_one_message_with_the_errno_name_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    for (args, want, code) in cases(dir.path()) {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = rdmakit(&a);
        assert_eq!(text(&o.stderr), want, "{args:?}");
        assert_eq!(o.status.code(), Some(code), "{args:?}");
    }
}

/// `perf` against a port nothing listens on: the errno by name, and what to check.
#[test]
fn perf_without_a_server_names_econnrefused() {
    let port = free_port().to_string();
    let o = rdmakit(&["perf", "write-bw", "127.0.0.1", "-p", &port, "-n", "10"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        format!(
            "rdmakit perf: error: no rdmakit perf server at 127.0.0.1:{port} (ECONNREFUSED): \
             start one with `rdmakit perf write-bw` on that host, or check -p\n"
        )
    );
}

/// A bad input among a fleet's reports: named with the errno, the rest reported.
#[test]
fn fleet_report_names_an_unreadable_input_by_its_errno() {
    let o = rdmakit(&["fleet", "report", "/nonexistent", &fixture("healthy")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stdout)
            .contains("  /nonexistent: cannot read: ENOENT (No such file or directory)\n"),
        "{}",
        text(&o.stdout)
    );
}

/// No error anywhere in these runs says it in Rust's words.
#[test]
fn no_failure_shows_rust_text() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs: Vec<Vec<String>> = cases(dir.path()).into_iter().map(|c| c.0).collect();
    for a in [
        &["pcap", "/nonexistent"][..],
        &["irq", "--from", "/etc/hostname"],
        &["fleet", "baseline", "/nonexistent", "-o", "/dev/null"],
        &["fleet", "pairwise", "--from", "/nonexistent"],
        &["soft", "status", "-d", "a/b"],
        &["man", "--dir", "/proc/rdmakit"],
        &["verbs-test", "--filter", "zzz"],
        &["devinfo", "-d", "mlx5_9"],
    ] {
        runs.push(a.iter().map(|s| s.to_string()).collect());
    }
    for args in runs {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = rdmakit_env(&a, &[("RDMAKIT_PROVIDER", "soft")]);
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        for rust in ["(os error", "Some(", "None", "Error {", "Os {"] {
            assert!(!all.contains(rust), "{args:?} says {rust:?}: {all}");
        }
        // One message: no line of stderr says the same thing twice.
        for l in text(&o.stderr).lines() {
            let parts: Vec<&str> = l.split(": ").collect();
            for (i, p) in parts.iter().enumerate() {
                assert!(
                    p.len() < 12 || !parts[i + 1..].contains(p),
                    "{args:?} repeats {p:?}: {l}"
                );
            }
        }
    }
}
