//! The fleet's flags (agent, pairwise over loopback and a fake Slurm, sweep)
//! run against the real binary: the part of flags_cli.rs's coverage that
//! needs agents and launchers. flags_cli.rs's coverage test reads this file
//! as its own.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::*;

const TOKEN: &str = "flags-test-token-0123456789abcdef";

/// An agent on a loopback address of its own (the soft NIC binds it too, as
/// common::fleet_agent picks them): (process, address), `extra` flags added.
fn agent(k: u8, name: &str, extra: &[&str], token_file: &Path) -> (Child, String) {
    let addr = loopback_addr(120, k);
    let c = bin()
        .args(["fleet", "agent", "--listen", &addr, "--name", name])
        .args(["--token-file", token_file.to_str().unwrap()])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    await_agent(&addr, name);
    (c, addr)
}

fn token_file(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let p = dir.join("token");
    std::fs::write(&p, TOKEN).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// The agent's flags (but --user, fleet_agent_attacks.rs) and the
/// coordinator's measuring flags, on two agents over loopback: --once agents
/// leave when their coordinator does.
#[test]
fn fleet_agent_and_pairwise_flags_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let tok = token_file(dir.path());
    let common = [
        "--idle-timeout",
        "60",
        "--max-test-seconds",
        "30",
        "--max-size",
        "1048576",
        "--once",
    ];
    let (a, a_addr) = agent(1, "alpha", &common, &tok);
    let (b, b_addr) = agent(2, "beta", &common, &tok);
    let agents = format!("{a_addr},{b_addr}");
    let o = rdmakit(&[
        "fleet",
        "pairwise",
        "--agents",
        &agents,
        "--token-file",
        tok.to_str().unwrap(),
        "--sizes",
        "65536",
        "--seconds",
        "0.1",
        "--lat-seconds",
        "0.05",
        "--tx-depth",
        "8",
        "--mtu",
        "1024",
        "--no-confirm",
        "--confirm-parallel",
        "2",
        "--port-rate",
        "100",
        "--relative",
        "0.5",
        "--reference",
        "alpha",
        "--quick",
        "--json",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(node_names(&v), ["alpha", "beta"]);
    // --once: the run over, both agents are gone.
    for (c, name) in [(a, "alpha"), (b, "beta")] {
        let (code, _, err) = finish(c, Duration::from_secs(15));
        assert_eq!(
            code,
            Some(0),
            "{name} did not leave with its coordinator: {err}"
        );
    }

    // --announce / --advertise: the READY line, and -d must name a device.
    let (c, _) = agent(
        3,
        "gamma",
        &[
            "--idle-timeout",
            "1",
            "--announce",
            "--advertise",
            "127.0.0.9",
            "-d",
            "soft0",
        ],
        &tok,
    );
    let (code, out, err) = finish(c, Duration::from_secs(15));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("\"name\":\"gamma\",\"addr\":\"127.0.0.9:"),
        "{out}"
    );
    let o = rdmakit(&[
        "fleet",
        "agent",
        "--listen",
        "127.0.0.1:0",
        "--ib-dev",
        "mlx5_9",
        "--token-file",
        tok.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("-d mlx5_9: no such RDMA device"),
        "{}",
        text(&o.stderr)
    );
    let o = rdmakit(&[
        "fleet",
        "agent",
        "--listen",
        "127.0.0.1:0",
        "--advertise",
        "127.0.0.9",
    ]);
    assert_eq!(o.status.code(), Some(2), "--advertise without --announce");
}

/// The coordinator's Slurm flags reach srun (a fake one that records its
/// arguments and fails), and are refused without --slurm.
#[test]
fn fleet_pairwise_slurm_flags_reach_srun() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let record = d.join("srun.args");
    let srun = d.join("srun");
    rdmakit_testkit::write_script(
        &srun,
        &format!("#!/bin/sh\necho \"$@\" > {}\nexit 1\n", record.display()),
    );
    let o = rdmakit(&[
        "fleet",
        "pairwise",
        "--slurm",
        "-N",
        "2",
        "--partition",
        "gpu",
        "--nodelist",
        "n[1-2]",
        "--agent-port",
        "19999",
        "--ib-dev",
        "mlx5_0",
        "--srun",
        srun.to_str().unwrap(),
        "--agent-program",
        "/opt/rdmakit/bin/rdmakit",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let args = std::fs::read_to_string(&record).unwrap();
    for a in [
        "--nodes=2",
        "--partition=gpu",
        "--nodelist=n[1-2]",
        "/opt/rdmakit/bin/rdmakit fleet agent --listen 0.0.0.0:19999",
        "-d mlx5_0",
    ] {
        assert!(args.contains(a), "{a:?} in {args}");
    }
    let o = rdmakit(&[
        "fleet",
        "pairwise",
        "--agents",
        "127.0.0.1:1",
        "--srun",
        "/bin/true",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--srun applies with --slurm"),
        "{}",
        text(&o.stderr)
    );
}

/// `fleet sweep`'s flags on a fake Slurm of two nodes (scontrol, sinfo, srun
/// running each task here).
#[test]
fn fleet_sweep_flags_on_a_fake_slurm() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fake_slurm(d, 0);
    let path = format!(
        "{}:{}",
        d.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cap = fixture("healthy");
    let bin_path = env!("CARGO_BIN_EXE_rdmakit");
    let sweep = |out: &str, extra: &[&str]| {
        let mut a = vec![
            "fleet",
            "sweep",
            "--timeout",
            "60",
            "--rdmakit",
            bin_path,
            "-o",
            out,
        ];
        a.extend_from_slice(extra);
        a.extend(["--", "--from", cap.as_str()]);
        rdmakit_env(&a, &[("PATH", &path)])
    };
    let first = d.join("first").display().to_string();
    let o = sweep(&first, &["--partition", "gpu", "--bundles", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("\"schema\": \"rdmakit.fleet/v1\""));
    assert!(
        Path::new(&first).join("bundles/n1.json.gz").is_file(),
        "--bundles"
    );
    let exp = d.join("expected.json").display().to_string();
    assert!(rdmakit(&["fleet", "baseline", &cap, "-o", &exp])
        .status
        .success());
    let html = d.join("s.html").display().to_string();
    let o = sweep(
        &d.join("second").display().to_string(),
        &[
            "--nodelist",
            "n1,n2",
            "--verbose",
            "--html",
            &html,
            "--baseline",
            &format!("{first}/fleet.json"),
            "--expect",
            &exp,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("Sweep: 2 of 2 nodes reported"),
        "{}",
        text(&o.stdout)
    );
    assert!(Path::new(&html).is_file());
}
