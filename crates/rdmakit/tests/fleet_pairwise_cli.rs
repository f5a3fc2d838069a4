//! `rdmakit fleet agent` / `fleet pairwise` at the command line: no token,
//! no agent; an unsafe token file is refused; unreachable agents and bad
//! arguments exit 2; two agents on loopback give a rendered matrix.

mod common;

use common::*;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;

const TOKEN: &str = "cli-test-token-0123456789abcdef";

#[test]
fn an_agent_without_a_token_does_not_start() {
    let out = bin()
        .args(["fleet", "agent", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no token"), "{err}");
    assert!(err.contains("RDMAKIT_FLEET_TOKEN"), "{err}");
}

#[test]
fn a_token_file_others_can_read_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("token");
    let mut w = std::fs::File::create(&f).unwrap();
    writeln!(w, "{TOKEN}").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = bin()
        .args(["fleet", "agent", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0640") && err.contains("chmod 600"), "{err}");
    // A short token is refused too.
    let out = bin()
        .args(["fleet", "agent", "--listen", "127.0.0.1:0"])
        .env("RDMAKIT_FLEET_TOKEN", "short")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 16"));
}

#[test]
fn pairwise_needs_agents_that_answer() {
    let out = bin().args(["fleet", "pairwise"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "no --agents nor --slurm");
    // Nothing listens on these ports.
    let dead: Vec<String> = (0..2)
        .map(|_| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        })
        .collect();
    let out = bin()
        .args(["fleet", "pairwise", "--agents", &dead.join(",")])
        .env("RDMAKIT_FLEET_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0 agent(s) answered"), "{err}");
    assert!(err.contains(&dead[0]), "{err}");
    let out = bin()
        .args(["fleet", "pairwise", "--agents", "a:1,b:2", "--sizes", "0"])
        .env("RDMAKIT_FLEET_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// An agent on a loopback address of its own; returns it and its address.
fn agent(k: u8, name: &str) -> (Agent, String) {
    fleet_agent(40, k, name, TOKEN, &[])
}

#[test]
fn two_agents_on_loopback_render_a_matrix() {
    let (_a, a) = agent(1, "alpha");
    let (_b, b) = agent(2, "beta");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("pairwise.html");
    let out = bin()
        .args(pairwise_args(&format!("{a},{b}"), "0.2", "0.05"))
        .arg("--html")
        .arg(&html)
        .env("RDMAKIT_FLEET_TOKEN", TOKEN)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}\n{err}");
    assert!(
        text.contains("2 nodes, full matrix (1 rounds, 1 pairs)"),
        "{text}"
    );
    assert!(text.contains("RC WRITE bandwidth"), "{text}");
    assert!(text.contains("alpha") && text.contains("beta"), "{text}");
    assert!(text.contains("No fault"), "{text}");
    assert!(!text.contains('\u{1b}'), "colors with NO_COLOR: {text:?}");
    // The page: the 2 × 2 matrix, the run embedded.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("data-plot=\"pairwise-bandwidth\""));
    assert!(!page.contains("//"));
    let v = rdmakit_report::embedded_json(&page).unwrap();
    assert_eq!(v["data"]["schema"], "rdmakit.pairwise/v1");
    assert_eq!(v["data"]["nodes"].as_array().unwrap().len(), 2);
}

/// `--from RUN.json`: a saved run rendered again, its exit status as when it ran.
#[test]
fn a_saved_run_renders_again() {
    let run = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../report/tests/data/6ns-slow-pair-n1-n5-2.json"
    );
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("p.html");
    let out = bin()
        .args(["fleet", "pairwise", "--from", run, "--html"])
        .arg(&html)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a fault: {text}");
    assert!(text.contains("link n1 <-> n5"), "{text}");
    let page = std::fs::read_to_string(&html).unwrap();
    let v = rdmakit_report::embedded_json(&page).unwrap();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run).unwrap()).unwrap();
    assert_eq!(v["data"], saved);
    // Not a run: exit 2, said why.
    let out = bin()
        .args(["fleet", "pairwise", "--from"])
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a pairwise run"));
}

/// Runs `fleet pairwise` against `agents` with its stderr on a pseudo-terminal:
/// (exit status, stdout, what the terminal showed).
fn pairwise_on_a_terminal(agents: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut c = bin();
    c.args(pairwise_args(agents, "0.3", "0.1"))
        .args(extra)
        .env("RDMAKIT_FLEET_TOKEN", TOKEN);
    on_a_pty(c)
}

/// Progress on stderr only on a terminal and never with --json: the terminal sees
/// the rounds, a pipe sees none of it, and stdout stays the report either way.
#[test]
fn progress_only_on_a_terminal() {
    let (_a, a) = agent(3, "gamma");
    let (_b, b) = agent(4, "delta");
    let agents = format!("{a},{b}");
    let (code, stdout, shown) = pairwise_on_a_terminal(&agents, &[]);
    assert_eq!(code, Some(0), "{stdout}\n{shown}");
    assert!(stdout.contains("2 nodes, full matrix"), "{stdout}");
    assert!(
        shown.contains("screening round 1/1") || shown.contains("1/1 pairs"),
        "no progress on the terminal: {shown:?}"
    );
    assert!(!stdout.contains("screening round"), "{stdout}");
    // --json on a terminal: no progress at all, the JSON alone on stdout.
    let (code, stdout, shown) = pairwise_on_a_terminal(&agents, &["--json"]);
    assert_eq!(code, Some(0), "{stdout}\n{shown}");
    assert!(
        !shown.contains("round") && !shown.contains("pairs"),
        "{shown:?}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["schema"], "rdmakit.pairwise/v1");
    // A pipe: nothing but the report on stdout, no progress on stderr.
    let out = bin()
        .args(pairwise_args(&agents, "0.3", "0.1"))
        .env("RDMAKIT_FLEET_TOKEN", TOKEN)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("round") && !err.contains("pairs"), "{err:?}");
}
