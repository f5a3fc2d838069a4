//! `rdmakit doctor --frame` and `--slurm-health-check` end to end, without a Slurm:
//! the frame decodes to the `--json` report; the health check runs the scontrol it
//! finds on PATH (here a script that records its arguments and plays a node's
//! state), drains and resumes as it should, and exits 0 / 1 / 2.
//! scripts/cluster/run runs both on a real Slurm.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use rdmakit_fleet::slurm::frame::{self, Kind, Line};

/// Decodes every frame in `text`: (kind, node, payload).
fn frames(text: &str) -> Vec<(Kind, String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut open: Option<(Kind, String, u64, String, usize)> = None;
    for l in text.lines() {
        assert!(
            l.len() < 1024,
            "a line srun would split ({} bytes)",
            l.len()
        );
        match (frame::classify(l), open.as_mut()) {
            (Line::Begin { kind, node, bytes }, None) => {
                open = Some((kind, node.to_string(), bytes, String::new(), 0))
            }
            (Line::End { lines, .. }, Some(_)) => {
                let (k, n, bytes, body, got) = open.take().unwrap();
                out.push((k, n, frame::decode(&body, got, lines, bytes).unwrap()));
            }
            (Line::Other(b), Some(o)) => {
                o.3.push_str(b);
                o.4 += 1;
            }
            (other, _) => panic!("unexpected {other:?}"),
        }
    }
    assert!(open.is_none(), "unterminated frame");
    out
}

#[test]
fn frame_carries_the_json_report_and_the_bundle() {
    let cap = fixtures().join("healthy");
    let cap = cap.to_str().unwrap();
    let plain = rdmakit_env(&["doctor", "--from", cap, "--json"], &[]);
    let framed = rdmakit_env(
        &["doctor", "--from", cap, "--frame", "--frame-bundle"],
        &[("SLURMD_NODENAME", "n17")],
    );
    assert_eq!(framed.status.code(), plain.status.code());
    let fs = frames(&String::from_utf8_lossy(&framed.stdout));
    assert_eq!(fs.len(), 2);
    assert_eq!((fs[0].0, fs[0].1.as_str()), (Kind::Report, "n17"));
    let want: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    let got: serde_json::Value = serde_json::from_slice(&fs[0].2).unwrap();
    assert_eq!(got, want);
    // The bundle replays to the same findings.
    assert_eq!(fs[1].0, Kind::Bundle);
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path().join("n17.json");
    std::fs::write(&b, &fs[1].2).unwrap();
    let replay = rdmakit_env(&["doctor", "--from", b.to_str().unwrap(), "--json"], &[]);
    let replay: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(replay["findings"], want["findings"]);
    assert_eq!(replay["devices"], want["devices"]);
}

/// A fake scontrol: `show node` prints `state` (a `scontrol show node -o` line),
/// `update` appends its arguments to `calls`.
fn fake_scontrol(dir: &Path, state: &str) {
    std::fs::write(dir.join("state"), state).unwrap();
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\n  show) cat '{d}/state' ;;\n  update) echo \"$@\" >> '{d}/calls' ;;\n  *) exit 9 ;;\nesac\necho \"SLURM_CONF=$SLURM_CONF\" >> '{d}/env'\ngrep -E '^(Uid|Cap)' /proc/self/status >> '{d}/status'\n",
        d = dir.display()
    );
    rdmakit_testkit::write_script(&dir.join("scontrol"), &script);
}

/// fixtures/healthy with rxe0's port 1 down (files copied, symlinks kept flattened).
fn port_down_capture(into: &Path) -> PathBuf {
    let dst = into.join("port-down");
    let st = Command::new("cp")
        .arg("-r")
        .arg(fixtures().join("healthy"))
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    let port = dst.join("root/sys/devices/virtual/infiniband/rxe0/ports/1");
    std::fs::write(port.join("state"), "1: DOWN\n").unwrap();
    std::fs::write(port.join("phys_state"), "3: Disabled\n").unwrap();
    dst
}

fn health(dir: &Path, from: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let path = format!("{}:/usr/bin:/bin", dir.display());
    let conf = dir.join("slurm.conf");
    std::fs::write(&conf, "").unwrap();
    let mut args = vec![
        "doctor",
        "--from",
        from.to_str().unwrap(),
        "--slurm-health-check",
    ];
    args.extend(extra);
    let o = rdmakit_env(
        &args,
        &[
            ("PATH", &path),
            ("SLURMD_NODENAME", "n3"),
            ("SLURM_CONF", conf.to_str().unwrap()),
        ],
    );
    let calls = std::fs::read_to_string(dir.join("calls")).unwrap_or_default();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        calls,
    )
}

#[test]
fn health_check_drains_on_an_error_and_resumes_only_its_own_drain() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sick = port_down_capture(d);
    let healthy = fixtures().join("healthy");

    fake_scontrol(d, "NodeName=n3 Arch=x86_64 State=IDLE Partitions=all\n");
    let (code, out, calls) = health(d, &sick, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        calls,
        "update NodeName=n3 State=DRAIN Reason=rdmakit: RDK-H002 rxe0 port 1 is DOWN \
         (physical state Disabled)\n"
    );
    assert!(
        out.starts_with("rdmakit health check n3: drained: rdmakit: RDK-H002"),
        "{out}"
    );
    let env = std::fs::read_to_string(d.join("env")).unwrap();
    assert!(env.contains(&format!("SLURM_CONF={}", d.join("slurm.conf").display())));

    // Healthy again, drained by rdmakit, idle: resumed.
    std::fs::remove_file(d.join("calls")).unwrap();
    fake_scontrol(
        d,
        "NodeName=n3 State=IDLE+DRAIN Reason=rdmakit: RDK-H002 rxe0 port 1 is DOWN \
         [root@2026-12-04T16:30:36]\n",
    );
    let (code, out, calls) = health(d, &healthy, &[]);
    assert_eq!(
        (code, calls.as_str()),
        (Some(0), "update NodeName=n3 State=RESUME\n"),
        "{out}"
    );

    // An administrator's drain: left alone, healthy or not; --dry-run changes nothing.
    std::fs::remove_file(d.join("calls")).unwrap();
    fake_scontrol(
        d,
        "NodeName=n3 State=IDLE+DRAIN Reason=bad PSU [alice@2026-12-04T10:00:00]\n",
    );
    let (code, out, calls) = health(d, &healthy, &[]);
    assert_eq!((code, calls.as_str()), (Some(0), ""), "{out}");
    assert!(out.contains("not rdmakit's drain, left alone"), "{out}");
    let (code, out, calls) = health(d, &sick, &[]);
    assert_eq!((code, calls.as_str()), (Some(1), ""), "{out}");
    fake_scontrol(d, "NodeName=n3 State=IDLE\n");
    let (code, out, calls) = health(d, &sick, &["--dry-run"]);
    assert_eq!((code, calls.as_str()), (Some(1), ""), "{out}");
    assert!(
        out.contains("would drain (IDLE): rdmakit: RDK-H002"),
        "{out}"
    );
}

/// The ConnectX-3 capture with pegged symbol_error and link_downed: the drain
/// reason `sinfo -R` shows names the HCA, the port and both counters, whole words.
#[test]
fn drain_reason_names_the_hca_port_and_counters_of_a_saturated_connectx3() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fake_scontrol(d, "NodeName=n3 Arch=x86_64 State=IDLE Partitions=all\n");
    let mlx4 = fixtures().join("mlx4-saturated-edit");
    let (code, out, calls) = health(d, &mlx4, &["--dry-run"]);
    assert_eq!((code, calls.as_str()), (Some(1), ""), "{out}");
    assert_eq!(
        out,
        "rdmakit health check n3: would drain (IDLE): rdmakit: RDK-H010 mlx4_0 port 1: \
         symbol_error 65535 saturated, link_downed 255 saturated\n"
    );
}

/// An unhealthy node that an administrator set DOWN, FAIL or
/// in maintenance (state lines as Slurm 22.05.8 prints them) keeps its state and
/// reason: no `scontrol update` at all, exit 1 (unhealthy), and the line says why.
#[test]
fn health_check_never_drains_over_an_administrators_down_fail_or_maint() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sick = port_down_capture(d);
    for (state, says) in [
        (
            "NodeName=n3 State=DOWN Reason=admin: psu swap [root@2026-12-07T10:45:35]",
            "held by root (\"admin: psu swap\", DOWN)",
        ),
        (
            "NodeName=n3 State=IDLE+FAIL Reason=admin: bad dimm [root@2026-12-07T10:45:35]",
            "held by root (\"admin: bad dimm\", IDLE+FAIL)",
        ),
        (
            "NodeName=n3 State=IDLE+MAINTENANCE+RESERVED",
            "IDLE+MAINTENANCE+RESERVED (MAINTENANCE), a state rdmakit does not override",
        ),
        (
            "NodeName=n3 State=IDLE+DRAIN",
            "drained without a reason (IDLE+DRAIN)",
        ),
    ] {
        let _ = std::fs::remove_file(d.join("calls"));
        fake_scontrol(d, &format!("{state}\n"));
        let (code, out, calls) = health(d, &sick, &[]);
        assert_eq!((code, calls.as_str()), (Some(1), ""), "{state}: {out}");
        assert!(
            out.starts_with(&format!(
                "rdmakit health check n3: unhealthy, but {says}: left alone"
            )),
            "{state}: {out}"
        );
    }
}

/// Least privilege: scontrol runs as uid 0 (Slurm authorizes the update by uid)
/// but with no capability, not even in its bounding set.
#[test]
fn health_check_runs_scontrol_without_capabilities() {
    if !rdmakit_testkit::is_root() {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_ROOT").is_none(),
            "needs root; RDMAKIT_REQUIRE_ROOT is set"
        );
        eprintln!("SKIP: not root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sick = port_down_capture(d);
    fake_scontrol(d, "NodeName=n3 State=IDLE\n");
    let (code, out, calls) = health(d, &sick, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        calls.starts_with("update NodeName=n3 State=DRAIN"),
        "{calls}"
    );
    let status = std::fs::read_to_string(d.join("status")).unwrap();
    // Two runs of scontrol (show, update), each with five Cap lines of zero.
    let caps: Vec<&str> = status.lines().filter(|l| l.starts_with("Cap")).collect();
    assert_eq!(caps.len(), 10, "{status}");
    for l in caps {
        assert!(l.ends_with("0000000000000000"), "{l}\n{status}");
    }
    assert!(status.contains("Uid:\t0\t0\t0\t0"), "{status}");
}

/// An scontrol that others could replace (a world-writable directory first on
/// PATH) is not run as root: exit 2, nothing changed.
#[test]
fn health_check_refuses_an_scontrol_others_can_replace() {
    use std::os::unix::fs::PermissionsExt as _;
    if !rdmakit_testkit::is_root() {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_ROOT").is_none(),
            "needs root; RDMAKIT_REQUIRE_ROOT is set"
        );
        eprintln!("SKIP: not root: the check applies to root only");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sick = port_down_capture(d);
    fake_scontrol(d, "NodeName=n3 State=IDLE\n");
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let (code, out, calls) = health(d, &sick, &[]);
    assert_eq!((code, calls.as_str()), (Some(2), ""), "{out}");
    assert!(
        out.contains("refusing to run") && out.contains("writable by group or others (mode 1777)"),
        "{out}"
    );
    assert!(
        out.contains("unhealthy, not drained: rdmakit: RDK-H002"),
        "{out}"
    );
}

/// An scontrol that never answers is killed after 10 s: exit 2, saying so, well
/// inside Slurm's 60 s.
#[test]
fn health_check_gives_up_on_an_scontrol_that_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    rdmakit_testkit::write_script(&d.join("scontrol"), "#!/bin/sh\nexec sleep 600\n");
    let sick = port_down_capture(d);
    let t = std::time::Instant::now();
    let (code, out, _) = health(d, &sick, &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        t.elapsed()
    );
    assert!(
        out.contains("scontrol show node -o n3: no answer within 10.0 s (killed)"),
        "{out}"
    );
}

#[test]
fn health_check_exits_2_when_slurm_cannot_be_asked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // scontrol that fails like a node whose controller is unreachable.
    rdmakit_testkit::write_script(
        &d.join("scontrol"),
        "#!/bin/sh\necho 'slurm_load_node error: Unable to contact slurm controller' >&2\nexit 1\n",
    );
    let sick = port_down_capture(d);
    let (code, out, _) = health(d, &sick, &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("Unable to contact slurm controller"), "{out}");
    assert!(
        out.contains("unhealthy, not drained: rdmakit: RDK-H002"),
        "{out}"
    );
}

#[test]
fn sweep_without_slurm_exits_2_naming_the_command_and_the_errno() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("sweep");
    let empty = dir.path().join("bin");
    std::fs::create_dir(&empty).unwrap();
    let o = rdmakit_env(
        &["fleet", "sweep", "-o", out_dir.to_str().unwrap()],
        &[("PATH", empty.to_str().unwrap())],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("sinfo"), "{err}");
    assert!(err.contains("cannot run it"), "{err}");
    assert_eq!(err.matches("ENOENT").count(), 1, "{err}");
    assert!(!err.contains("os error"), "{err}");
    assert!(!out_dir.exists(), "no evidence directory without a sweep");
}

/// Runs rdmakit with its stderr on a pseudo-terminal: (exit status, stdout, what
/// the terminal showed).
fn on_a_terminal(args: &[&str], env: &[(&str, String)]) -> (Option<i32>, String, String) {
    let mut c = bin();
    c.args(args).envs(env.iter().map(|(k, v)| (k, v)));
    on_a_pty(c)
}

/// `fleet sweep` shows its progress bar on a terminal's stderr and nowhere else:
/// not on a pipe, never on stdout; `--html` writes the sweep's fleet report as a page.
#[test]
fn sweep_progress_only_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fake_slurm(d, 1);
    let path = format!(
        "{}:{}",
        d.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cap = fixtures().join("healthy");
    let args = |out: &str| -> Vec<String> {
        [
            "fleet",
            "sweep",
            "-w",
            "n1,n2",
            "--timeout",
            "60",
            "-o",
            &d.join(out).display().to_string(),
            "--",
            "--from",
            cap.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let a = args("tty");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (code, stdout, shown) = on_a_terminal(&a, &[("PATH", path.clone())]);
    assert_eq!(code, Some(0), "{stdout}\n{shown}");
    assert!(stdout.contains("Sweep: 2 of 2 nodes reported"), "{stdout}");
    assert!(
        shown.contains("/2 nodes reported"),
        "no progress bar: {shown:?}"
    );
    assert!(!stdout.contains("/2 nodes reported"), "{stdout}");
    // A pipe: the same sweep, no bar; and its page (--html).
    let html = d.join("fleet.html").display().to_string();
    let mut a = args("pipe");
    a.splice(2..2, ["--html".to_string(), html.clone()]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = rdmakit_env(&a, &[("PATH", &path)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("/2 nodes reported"), "{err:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Sweep: 2 of 2 nodes reported"));
    let page = std::fs::read_to_string(&html).unwrap();
    let v = rdmakit_report::embedded_json(&page).unwrap();
    assert_eq!(v["kind"], "fleet");
    let fleet: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("pipe/fleet.json")).unwrap()).unwrap();
    assert_eq!(v["data"], fleet, "the page embeds the sweep's fleet.json");
}
