//! The rdmakit binary end to end: exit codes, collect → replay identity, explain,
//! bad arguments.

mod common;

use common::*;
use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

/// The live host: whatever it has, doctor answers 0 or 1, never 2, and says
/// something about the kernel layer when there is no RDMA.
#[test]
fn live_doctor_exits_0_or_1() {
    let o = rdmakit(&["doctor", "--json"]);
    let code = o.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "{code:?} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    if !std::path::Path::new("/sys/class/infiniband").exists() {
        let codes: Vec<&str> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap())
            .collect();
        assert!(
            codes.iter().any(|c| *c == "RDK-K001" || *c == "RDK-K002"),
            "{codes:?}"
        );
        assert_eq!(code, Some(1));
    }
}

/// Collecting the live host and replaying the bundle gives the same report.
#[test]
fn live_collect_replays_identically() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("live.json.gz");
    let b = bundle.to_str().unwrap();
    // A soft NIC registry of its own: the soft NIC's published counters are
    // host facts, and a test running beside this one (the live doctor's
    // active probe above) publishes some between the collect and the live
    // doctor.
    let registry = tempfile::tempdir().unwrap();
    let env = [(
        "RDMAKIT_SOFT_REGISTRY_DIR",
        registry.path().to_str().unwrap(),
    )];
    let o = rdmakit_env(&["collect", "-o", b], &env);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Active probes (the soft NIC on a host without RDMA devices) are not host
    // facts and do not replay: compare the facts' report.
    let live = json(&rdmakit_env(&["doctor", "--json", "--no-probe"], &env));
    let replay_out = rdmakit(&["doctor", "--json", "--from", b]);
    assert!(
        !String::from_utf8_lossy(&replay_out.stderr).contains("no answer"),
        "replay missed answers"
    );
    let mut replay = json(&replay_out);
    let mut live = live;
    live["source"] = serde_json::Value::Null;
    replay["source"] = serde_json::Value::Null;
    assert_eq!(live, replay);
}

#[test]
fn capture_directory_converts_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("healthy.json");
    let b = bundle.to_str().unwrap();
    let cap = fixtures().join("healthy");
    let cap = cap.to_str().unwrap();
    assert!(rdmakit(&["collect", "--from", cap, "-o", b])
        .status
        .success());
    let a = rdmakit(&["doctor", "--json", "--from", cap]);
    let c = rdmakit(&["doctor", "--json", "--from", b]);
    assert_eq!(a.status.code(), Some(0));
    let (mut a, mut c) = (json(&a), json(&c));
    a["source"] = serde_json::Value::Null;
    c["source"] = serde_json::Value::Null;
    assert_eq!(a, c);
}

#[test]
fn fail_on_controls_the_exit_status() {
    let cap = fixtures().join("healthy");
    let cap = cap.to_str().unwrap();
    // The healthy capture has only info findings (GID index, MTU 1024).
    assert_eq!(rdmakit(&["doctor", "--from", cap]).status.code(), Some(0));
    assert_eq!(
        rdmakit(&["doctor", "--from", cap, "--fail-on", "info"])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        rdmakit(&["doctor", "--from", cap, "--severity", "RDK-H008=error"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn human_report_has_the_verification_checklist_and_no_color_when_asked() {
    let cap = fixtures().join("healthy");
    let o = rdmakit(&["doctor", "--from", cap.to_str().unwrap()]);
    let s = stdout(&o);
    for row in [
        "Kernel modules loaded",
        "Device visible",
        "Memory registration",
        "IRQ allocation",
        "Verification checklist",
        "Pass criterion",
    ] {
        assert!(s.contains(row), "{row} missing:\n{s}");
    }
    assert!(!s.contains('\u{1b}'), "NO_COLOR output has escapes");
    let forced = rdmakit(&[
        "--color",
        "always",
        "doctor",
        "--from",
        cap.to_str().unwrap(),
    ]);
    assert!(stdout(&forced).contains('\u{1b}'));
}

#[test]
fn list_checks_names_every_code() {
    let s = stdout(&rdmakit(&["doctor", "--list-checks"]));
    for code in [
        "RDK-K001", "RDK-K003", "RDK-H002", "RDK-I004", "RDK-L002", "RDK-A001",
    ] {
        assert!(s.contains(code), "{code}");
    }
}

#[test]
fn explain_answers_every_errno_rdma_verbs_commonly_fail_with() {
    for q in [
        "ENOSYS",
        "ENOSPC",
        "EINVAL",
        "ENOMEM",
        "EPERM",
        "EACCES",
        "28",
        "ibv_create_qp:ENOSYS",
        "ibv_create_qp:ENOSPC",
        "ibv_create_qp:EINVAL",
        "ibv_reg_mr:ENOMEM",
        "ibv_reg_mr:EPERM",
        "ibv_open_device:EACCES",
        "ibv_modify_qp:EINVAL",
        "ibv_post_send:ENOMEM",
        "12",
        "wc:12",
        "RETRY_EXC_ERR",
        "RDK-K003",
        "ib-umad-missing",
    ] {
        let o = rdmakit(&["explain", q]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{q}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v = json(&rdmakit(&["explain", "--json", q]));
        assert!(
            !v["causes"].as_array().unwrap().is_empty(),
            "{q}: no causes"
        );
        assert!(
            !v["checks"].as_array().unwrap().is_empty(),
            "{q}: no checks"
        );
    }
    let v = json(&rdmakit(&["explain", "--json", "ibv_create_qp:ENOSPC"]));
    assert_eq!(v["layer"], "hardware");
}

#[test]
fn bad_input_is_exit_2_with_a_clear_message() {
    for (args, needle) in [
        (
            vec!["doctor", "--from", "/nonexistent/bundle.json"],
            "/nonexistent/bundle.json",
        ),
        (vec!["doctor", "--fail-on", "sometimes"], "--fail-on"),
        (
            vec!["doctor", "--severity", "RDK-Z999=error"],
            "unknown code",
        ),
        (vec!["doctor", "--memlock-min", "lots"], "not a size"),
        (
            vec!["doctor", "--root", "/nonexistent"],
            "--root /nonexistent: ENOENT",
        ),
        (vec!["explain", "EWHATEVER"], "EWHATEVER"),
        (vec!["pcap", "/nonexistent.pcap"], "/nonexistent.pcap"),
    ] {
        let o = rdmakit(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // A file that is not a bundle.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("garbage.json");
    std::fs::write(&p, b"{\"hello\": 1}").unwrap();
    let o = rdmakit(&["doctor", "--from", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not an rdmakit bundle"));
}

#[test]
fn pcap_decodes_the_real_captures() {
    let dir = fixtures().join("pcap");
    for name in [
        "rc_pingpong-s64",
        "rc_pingpong-s5000-mtu1024",
        "write_bw-s8192",
    ] {
        let p = dir.join(format!("{name}.pcap"));
        let o = rdmakit(&["pcap", "--json", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{name}");
        let v = json(&o);
        assert_eq!(v["icrc_invalid"], 0, "{name}");
        assert!(v["icrc_valid"].as_u64().unwrap() > 0, "{name}");
    }
}

/// Output into a pipe nobody reads any more ends rdmakit by SIGPIPE, as any
/// Unix tool, without a panic message: the pipe's read end is closed before
/// the process starts, so its first write fails.
#[test]
fn a_closed_stdout_ends_rdmakit_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two descriptors of `fds`.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just created and are owned here.
    let (r, w) = unsafe {
        use std::os::fd::{FromRawFd, OwnedFd};
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    };
    drop(r);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rdmakit"))
        .args(["explain", "ENOSPC"])
        .stdout(std::process::Stdio::from(w))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {err}",
        o.status
    );
}
