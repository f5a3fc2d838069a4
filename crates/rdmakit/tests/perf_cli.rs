//! `rdmakit perf`: server and client as two processes on this machine (each
//! soft NIC binds its own 127.x address), one free TCP port per test.

mod common;

use common::*;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rdmakit");

fn server(test: &str, port: u16, extra: &[&str]) -> std::process::Child {
    Command::new(BIN)
        .args(["perf", test, "-p", &port.to_string()])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn client(test: &str, port: u16, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args(["perf", test, "127.0.0.1", "-p", &port.to_string()])
        .args(extra)
        .output()
        .unwrap()
}

/// Waits for a server at most 30 s (it waits for a client forever when the
/// client failed before connecting), then kills it.
fn finish(mut s: std::process::Child) -> Output {
    let t = Instant::now();
    while s.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = s.kill();
    s.wait_with_output().unwrap()
}

/// Runs server and client; both must succeed. Returns the client's JSON.
fn pair(test: &str, extra: &[&str]) -> serde_json::Value {
    let port = free_port();
    let s = server(test, port, &[]);
    let mut args = vec!["--json", "--validate"];
    args.extend_from_slice(extra);
    let c = client(test, port, &args);
    let so = finish(s);
    let out = String::from_utf8_lossy(&c.stdout);
    assert!(
        c.status.success(),
        "{test} client failed: {out}\n{}",
        String::from_utf8_lossy(&c.stderr)
    );
    assert!(
        so.status.success(),
        "{test} server failed: {}",
        String::from_utf8_lossy(&so.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["validated"], true, "{v}");
    assert_eq!(v["header"]["test"], test);
    assert!(v["control"]["create_qp"].as_f64().unwrap() > 0.0);
    v
}

#[test]
fn write_bw_validates_and_reports_json() {
    let v = pair("write-bw", &["-n", "50", "-s", "65536"]);
    let r = &v["results"][0];
    assert_eq!(r["MsgSize"], 65536);
    assert_eq!(r["n_iterations"], 50);
    assert!(r["BW_average"].as_f64().unwrap() > 0.0);
    assert!(r["BW_peak"].as_f64().unwrap() >= r["BW_average"].as_f64().unwrap());
    // Two processes of this host on the default transport: each 64 KiB
    // message one cross-memory copy, its packets through a same-host ring.
    let c = &v["qp_counters"];
    assert!(c["same_host"].as_u64().unwrap() > 0, "{c}");
    assert_eq!(c["ring"], true, "{c}");
}

#[test]
fn read_bw_validates() {
    pair("read-bw", &["-n", "40", "-s", "10000"]);
}

#[test]
fn send_bw_validates() {
    pair("send-bw", &["-n", "60", "-s", "3000", "-t", "16"]);
}

#[test]
fn send_over_ud() {
    let v = pair(
        "send-bw",
        &["-c", "UD", "-n", "50", "-s", "1024", "-t", "8"],
    );
    assert_eq!(v["header"]["connection"], "UD");
    let v = pair("send-lat", &["-c", "UD", "-n", "50", "-s", "512"]);
    assert_eq!(v["results"][0]["MsgSize"], 512);
}

#[test]
fn atomic_bw_counter_matches() {
    let v = pair("atomic-bw", &["-n", "100"]);
    assert_eq!(v["results"][0]["MsgSize"], 8);
}

#[test]
fn send_lat_reports_percentiles() {
    let v = pair("send-lat", &["-n", "100", "-s", "64"]);
    let r = &v["results"][0];
    let (min, typ, max) = (
        r["t_min"].as_f64().unwrap(),
        r["t_typical"].as_f64().unwrap(),
        r["t_max"].as_f64().unwrap(),
    );
    assert!(min > 0.0 && min <= typ && typ <= max, "{r}");
    assert!(r["percentile_99_9"].as_f64().unwrap() <= max);
}

#[test]
fn write_and_read_lat_validate() {
    pair("write-lat", &["-n", "50", "-s", "300"]);
    pair("read-lat", &["-n", "50", "-s", "300"]);
}

#[test]
fn sweep_with_small_max() {
    let v = pair("write-bw", &["-a", "-s", "64", "-n", "20"]);
    let sizes: Vec<u64> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["MsgSize"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, vec![2, 4, 8, 16, 32, 64]);
}

#[test]
fn human_output_is_perftest_shaped() {
    let port = free_port();
    let s = server("send-bw", port, &[]);
    let c = client("send-bw", port, &["-n", "20", "-s", "1024"]);
    finish(s);
    let out = String::from_utf8_lossy(&c.stdout);
    assert!(c.status.success(), "{out}");
    for want in [
        "Send BW Test",
        "Connection type : RC",
        "Link type       : Ethernet",
        " local address: LID 0000 QPN 0x",
        " remote address: LID 0000 QPN 0x",
        "#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]",
        "create_qp",
        // 1 KiB SENDs between two processes of this host: packets in a
        // same-host ring, no cross-memory copy (one packet each).
        " Data path : rings",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    // perftest's GID lines: 16 bytes in decimal, two digits at least
    // (` GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:01`).
    let gids: Vec<&str> = out.lines().filter(|l| l.starts_with(" GID: ")).collect();
    assert_eq!(gids.len(), 2, "{out}");
    for g in gids {
        let bytes: Vec<&str> = g[" GID: ".len()..].split(':').collect();
        assert_eq!(bytes.len(), 16, "{g}");
        for b in &bytes {
            assert!(b.len() >= 2 && b.len() <= 3, "{g}");
            assert!(b.parse::<u8>().is_ok(), "not decimal: {g}");
        }
        assert_eq!(bytes[10..12], ["255", "255"], "{g}");
    }
}

#[test]
fn bad_arguments_exit_2() {
    for args in [
        vec!["perf", "no-such-test"],
        vec!["perf", "write-bw", "-s", "0"],
        vec!["perf", "write-bw", "-s", "99999999"],
        vec!["perf", "write-bw", "-n", "0"],
        vec!["perf", "write-bw", "-n", "5", "-D", "1"],
        vec!["perf", "write-bw", "-m", "1000"],
        vec!["perf", "atomic-bw", "-s", "16"],
        vec!["perf", "write-bw", "-D", "-3"],
        vec!["perf", "write-bw", "-c", "UD"],
        vec!["perf", "send-bw", "-c", "UD", "-s", "8192"],
        vec!["perf", "send-bw", "-c", "XY"],
    ] {
        let o = Command::new(BIN).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(!o.stderr.is_empty(), "{args:?}");
    }
}

#[test]
fn server_killed_mid_run_gives_retry_exc_err() {
    let port = free_port();
    let mut s = server("write-bw", port, &[]);
    let t0 = Instant::now();
    let c = Command::new(BIN)
        .args(["perf", "write-bw", "127.0.0.1", "-p", &port.to_string()])
        .args(["-D", "30", "-s", "4096", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    s.kill().unwrap();
    s.wait().unwrap();
    let o = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("RETRY_EXC_ERR"), "{err}");
    assert!(
        err.trim_end()
            .ends_with("; `rdmakit explain wc:RETRY_EXC_ERR` lists its causes"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON even on failure");
    assert!(v["error"].as_str().unwrap().contains("RETRY_EXC_ERR"));
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
}

#[test]
fn client_with_no_server_fails_cleanly() {
    let port = free_port();
    let o = Command::new(BIN)
        .args(["perf", "send-lat", "127.0.0.1", "-p", &port.to_string()])
        .args(["--connect-timeout", "0.3", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "exchange");
}

/// `rdmakit perf TEST ARGS`: (exit code, stdout, stderr).
fn perf(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(BIN)
        .arg("perf")
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_client_without_a_server_says_so_with_the_errno_and_the_fix() {
    let port = free_port().to_string();
    let client = [
        "write-bw",
        "127.0.0.1",
        "-p",
        &port,
        "--connect-timeout",
        "0.3",
    ];
    let (code, out, err) = perf(&client);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(out, "");
    assert_eq!(
        err,
        format!(
            "rdmakit perf: error: no rdmakit perf server at 127.0.0.1:{port} (ECONNREFUSED): \
             start one with `rdmakit perf write-bw` on that host, or check -p\n"
        )
    );
    let (code, out, _) = perf(&[&client[..], &["--json"]].concat());
    assert_eq!(code, Some(1));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&v["kind"], &v["errno"], &v["test"]),
        (
            &serde_json::json!("exchange"),
            &serde_json::json!("ECONNREFUSED"),
            &serde_json::json!("write-bw")
        )
    );
}

#[test]
fn a_server_on_a_port_in_use_says_who_to_ask_and_does_not_claim_to_wait() {
    let held = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let (code, out, err) = perf(&["send-lat", "-p", &port]);
    assert_eq!(code, Some(1), "{err}");
    assert!(!out.contains("Waiting for client"), "{out}");
    assert_eq!(
        err,
        format!(
            "rdmakit perf: error: cannot listen on TCP port {port} (EADDRINUSE): another \
             process holds it (`ss -ltnp 'sport = :{port}'`); stop it, or choose another port \
             with -p on both sides\n"
        )
    );
}

#[test]
fn an_unknown_device_fails_before_any_connect_or_wait() {
    for args in [
        vec!["write-bw", "-d", "nosuchdev"],
        vec!["write-bw", "127.0.0.1", "-d", "nosuchdev", "-p", "1"],
    ] {
        let t = Instant::now();
        let (code, out, err) = perf(&args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(!out.contains("Waiting for client"), "{out}");
        assert!(t.elapsed() < Duration::from_secs(5), "{args:?}");
        assert!(
            err.starts_with(
                "rdmakit perf: error: ibv_open_device failed with ENODEV (19) (library layer): \
                 no device named \"nosuchdev\""
            ),
            "{err}"
        );
        assert!(
            err.ends_with("; `rdmakit explain ibv_open_device:ENODEV` lists its causes\n"),
            "{err}"
        );
        assert!(!err.contains("os error") && !err.contains('['), "{err}");
    }
}

#[test]
fn a_peer_that_speaks_something_else_is_named_as_such() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let peer = std::thread::spawn(move || {
        use std::io::{BufRead as _, Write as _};
        let (s, _) = l.accept().unwrap();
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        (&s).write_all(b"HELLO\n").unwrap();
        std::thread::sleep(Duration::from_millis(300));
    });
    let (code, _, err) = perf(&["write-bw", "127.0.0.1", "-p", &port]);
    peer.join().unwrap();
    assert_eq!(code, Some(1));
    assert_eq!(
        err,
        "rdmakit perf: error: the peer does not speak rdmakit perf's exchange (it sent \
         \"HELLO\" where QP was due): run `rdmakit perf` of the same version on both hosts \
         (perftest's ib_* tools speak their own)\n"
    );
}

#[test]
fn an_unresolvable_host_is_a_resolver_error_not_a_connect_error() {
    let (code, _, err) = perf(&[
        "write-bw",
        "no-such-host.invalid",
        "--connect-timeout",
        "0.3",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("rdmakit perf: error: cannot resolve no-such-host.invalid ("),
        "{err}"
    );
    assert!(
        err.ends_with(
            "): check the name (`getent hosts no-such-host.invalid`) or give its IP address\n"
        ),
        "{err}"
    );
}

/// On a terminal the run shows a labeled bar: the test, the message size,
/// and the percentage; stdout stays perftest's report.
#[test]
fn the_progress_bar_says_what_runs() {
    let port = free_port();
    let s = server("write-bw", port, &[]);
    let mut c = Command::new(BIN);
    c.args(["perf", "write-bw", "127.0.0.1", "-p", &port.to_string()])
        .args(["-D", "2", "-s", "4096"])
        .env("NO_COLOR", "1");
    let (code, out, shown) = on_a_pty(c);
    finish(s);
    assert_eq!(code, Some(0), "{out}\n{shown}");
    assert!(
        shown.contains("write-bw 4096 B ["),
        "no label on the terminal: {shown:?}"
    );
    assert!(shown.contains('%'), "{shown:?}");
    assert!(!out.contains("write-bw 4096 B ["), "{out}");
}

/// `-e` on both sides: write-bw, send-bw and send-lat complete, validate
/// and count the iterations the busy-polling runs count; each side's
/// header says it sleeps on CQ events.
#[test]
fn use_event_on_both_sides_counts_the_same() {
    for (test, args) in [
        ("write-bw", &["-n", "400", "-s", "8192"][..]),
        ("send-bw", &["-n", "400", "-s", "3000", "-t", "16"]),
        ("send-lat", &["-n", "300", "-s", "64"]),
    ] {
        let polled = pair(test, args);
        let port = free_port();
        let s = server(test, port, &["-e"]);
        let c = client(
            test,
            port,
            &[args, &["--json", "--validate", "-e"]].concat(),
        );
        let so = finish(s);
        let out = String::from_utf8_lossy(&c.stdout);
        let sout = String::from_utf8_lossy(&so.stdout);
        assert!(
            c.status.success(),
            "{test} -e: {out}{}",
            String::from_utf8_lossy(&c.stderr)
        );
        assert!(
            so.status.success(),
            "{test} -e server: {}",
            String::from_utf8_lossy(&so.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
        assert_eq!(v["validated"], true, "{v}");
        assert_eq!(v["header"]["use_event"], true, "{v}");
        assert_eq!(polled["header"]["use_event"], false, "{polled}");
        assert_eq!(
            v["results"][0]["n_iterations"], polled["results"][0]["n_iterations"],
            "{test}"
        );
        assert!(
            sout.contains(" CQ events       : ON"),
            "{test} server: {sout}"
        );
    }
    let (code, _, err) = perf(&["write-lat", "127.0.0.1", "-e", "-p", "1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("write-lat sees each echo in memory"), "{err}");
}

/// CPU seconds (user + system, all threads) `pid` has used so far.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesized command name: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ticks as f64 / hz as f64
}

/// A write-bw client whose server stops answering (SIGSTOP for 1.5 s,
/// then SIGCONT: its RC retries carry the run on): the CPU time the client
/// uses while it waits, over the wall time. Returns that ratio.
fn cpu_while_the_server_is_stopped(event: bool) -> f64 {
    let port = free_port();
    let mut s = server("write-bw", port, &[]);
    // The server prints its header once the QPs are connected.
    let (tx, connected) = std::sync::mpsc::channel();
    let sout = s.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead as _;
        for l in std::io::BufReader::new(sout).lines().map_while(Result::ok) {
            if l.starts_with(" remote address:") {
                let _ = tx.send(());
            }
        }
    });
    let mut args = vec!["perf", "write-bw", "127.0.0.1", "-p"];
    let p = port.to_string();
    args.extend([p.as_str(), "-D", "4", "-s", "65536", "--json"]);
    if event {
        args.push("-e");
    }
    let c = Command::new(BIN)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    connected
        .recv_timeout(Duration::from_secs(20))
        .expect("the server connects its QP");
    std::thread::sleep(Duration::from_millis(300));
    let spid = s.id() as libc::pid_t;
    // SAFETY: signals to the server this test started, still running
    // (finish() reaps it only below).
    assert_eq!(unsafe { libc::kill(spid, libc::SIGSTOP) }, 0);
    std::thread::sleep(Duration::from_millis(200));
    let (t0, c0) = (Instant::now(), cpu_secs(c.id()));
    std::thread::sleep(Duration::from_millis(1300));
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_secs(c.id()) - c0);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(spid, libc::SIGCONT) }, 0);
    let o = c.wait_with_output().unwrap();
    let so = finish(s);
    reader.join().unwrap();
    let mode = if event { "-e" } else { "busy polling" };
    assert!(
        o.status.success(),
        "{mode}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        so.status.success(),
        "{}",
        String::from_utf8_lossy(&so.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["results"][0]["n_iterations"].as_u64().unwrap() > 0, "{v}");
    cpu / wall
}

/// `-e` frees the core a waiting client spins on: with its server stopped,
/// the busy-polling client burns CPU close to its wall time, the sleeping
/// one a small fraction of it. (On the 2-core VM: busy polling 0.85-1.0 of
/// a core alone, 0.43-0.56 beside the other tests of this file; -e
/// 0.000-0.008.)
#[test]
fn use_event_client_does_not_spin_while_its_server_is_stopped() {
    let polled = cpu_while_the_server_is_stopped(false);
    let slept = cpu_while_the_server_is_stopped(true);
    eprintln!("CPU over wall while waiting: busy polling {polled:.3}, -e {slept:.3}");
    assert!(
        slept < 0.1,
        "-e client used {slept:.3} of a core while waiting"
    );
    assert!(
        polled > 0.2 && polled > 4.0 * slept,
        "busy polling {polled:.3} vs -e {slept:.3}: the measure does not see spinning"
    );
}
