//! Against the real `rdmakit fleet agent` and `rdmakit fleet
//! pairwise`: what a peer that does not hold the run's token can do to an
//! agent. On main before the fix, 200 idle connections (or 8 sending a byte
//! every 3 s) kept the coordinator out — `fleet pairwise` exited 2, "0
//! agent(s) answered" — for as long as they were held; the agent's first
//! line told anyone its hostname and protocol version; and a JSON key with a
//! newline wrote a forged "coordinator … authenticated" line into its log.
//!
//! The held connections run as threads of the test ([`rdmakit_testkit::hold`],
//! re-opened as the agent closes them): connecting needs no privilege.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rdmakit_testkit::hold::{Holder, Style};

const TOKEN: &str = "attack-test-token-0123456789abcdef";

/// How long a coordinator run may take while an attack runs (alone it takes
/// under a second with these settings).
const LIMIT: Duration = Duration::from_secs(10);

/// `fleet pairwise` over `agents` with short tests: (exit status, how long,
/// stdout, stderr). Killed past [`LIMIT`].
fn coordinator_run(agents: &[&str]) -> (Option<i32>, Duration, String, String) {
    let t = Instant::now();
    let child = bin()
        .args(pairwise_args(&agents.join(","), "0.2", "0.05"))
        .env("RDMAKIT_FLEET_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = rdmakit_testkit::wait(child, LIMIT * 2, "fleet pairwise");
    (
        out.status.code(),
        t.elapsed(),
        text(&out.stdout),
        text(&out.stderr),
    )
}

fn runs_within_the_limit(what: &str, agents: &[&str], held: &[&Holder]) {
    let (code, took, stdout, stderr) = coordinator_run(agents);
    assert_eq!(code, Some(0), "while {what}:\n{stdout}\n{stderr}");
    assert!(stdout.contains("No fault"), "{stdout}");
    assert!(took < LIMIT, "while {what} the run took {took:?}");
    eprintln!(
        "while {what}: the coordinator's run took {took:?}; the attacker opened {} \
         connections, the agents closed {}",
        held.iter().map(|h| h.opened()).sum::<u64>(),
        held.iter().map(|h| h.closed_by_server()).sum::<u64>()
    );
}

#[test]
fn a_coordinator_completes_its_run_while_200_idle_connections_are_held() {
    let (_a, a) = fleet_agent(60, 1, "alpha", TOKEN, &[]);
    let (_b, b) = fleet_agent(60, 2, "beta", TOKEN, &[]);
    let (code, alone, _, err) = coordinator_run(&[&a, &b]);
    assert_eq!(code, Some(0), "{err}");
    eprintln!("the coordinator's run alone: {alone:?}");
    // The attack's 200, then more than the 256 handshakes an agent keeps
    // pending: it closes the oldest as new ones come, and the holder
    // re-opens them.
    for n in [200, 300] {
        let ha = Holder::start(a.parse().unwrap(), n, Style::Idle);
        let hb = Holder::start(b.parse().unwrap(), n, Style::Idle);
        runs_within_the_limit(
            &format!("{n} idle connections are held on each agent"),
            &[&a, &b],
            &[&ha, &hb],
        );
        if n > 256 {
            assert!(ha.closed_by_server() > 0, "the agent evicted nothing");
        }
    }
}

#[test]
fn a_coordinator_completes_its_run_while_slowloris_connections_trickle() {
    let (_a, a) = fleet_agent(61, 1, "alpha", TOKEN, &[]);
    let (_b, b) = fleet_agent(61, 2, "beta", TOKEN, &[]);
    let trickle = Style::Trickle {
        bytes: br#"{"auth":"00","nonce":""#,
        every: Duration::from_secs(3),
    };
    // The attack's 8, and far more than the agent's 8 session slots.
    for n in [8, 64] {
        let ha = Holder::start(a.parse().unwrap(), n, trickle);
        let hb = Holder::start(b.parse().unwrap(), n, trickle);
        // Past the 5 s handshake deadline: the first of them have been cut
        // (each had sent two bytes) and re-opened.
        std::thread::sleep(Duration::from_secs(6));
        assert!(ha.closed_by_server() > 0, "no trickling connection was cut");
        runs_within_the_limit(
            &format!("{n} connections on each agent send a byte every 3 s"),
            &[&a, &b],
            &[&ha, &hb],
        );
    }
}

/// An agent whose stderr (its log) is collected line by line.
struct Logged {
    child: Child,
    addr: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Logged {
    fn start(name: Option<&str>) -> Logged {
        let addr = format!("127.0.0.1:{}", free_port());
        let mut c = bin();
        c.args(["fleet", "agent", "--listen", &addr, "--idle-timeout", "60"]);
        if let Some(n) = name {
            c.args(["--name", n]);
        }
        let mut child = c
            .env("RDMAKIT_FLEET_TOKEN", TOKEN)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l2 = Arc::clone(&lines);
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                match line {
                    Ok(l) => l2.lock().unwrap().push(l),
                    Err(_) => break,
                }
            }
        });
        let agent = Logged { child, addr, lines };
        agent.wait_for("listening", |l| l.contains("listening on"));
        agent
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    fn wait_for(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let t = Instant::now();
        loop {
            if let Some(l) = self.lines().into_iter().find(|l| f(l)) {
                return l;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "no {what} in the agent's log:\n{}",
                self.lines().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the agent and returns its whole log.
    fn stop(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(100));
        self.lines()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Before the coordinator proves the token, the agent's bytes say nothing
/// about it: no name (it defaults to the hostname), no version, not even
/// which program it is — a JSON object holding 32 random bytes, then the
/// same refusal whatever went wrong.
#[test]
fn an_unauthenticated_peer_learns_neither_hostname_nor_version() {
    let agent = Logged::start(None);
    let mut s = TcpStream::connect(&agent.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut first = Vec::new();
    let mut b = [0u8; 1];
    while first.last() != Some(&b'\n') {
        assert_eq!(s.read(&mut b).unwrap(), 1, "closed after {first:?}");
        first.push(b[0]);
    }
    // A proof with the wrong token: the agent answers and closes.
    writeln!(
        s,
        r#"{{"auth":"{}","nonce":"{}"}}"#,
        "ab".repeat(32),
        "cd".repeat(32)
    )
    .unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    let all = [first.as_slice(), rest.as_slice()].concat();
    let text = String::from_utf8(all.clone()).unwrap();

    let v: serde_json::Value = serde_json::from_slice(&first).unwrap();
    let obj = v.as_object().unwrap();
    assert_eq!(obj.keys().collect::<Vec<_>>(), ["nonce"], "{text}");
    let nonce = obj["nonce"].as_str().unwrap();
    assert!(nonce.len() == 64 && nonce.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(
        String::from_utf8_lossy(&rest),
        "{\"refused\":\"authentication failed\"}\n"
    );
    let host = rustix_hostname();
    let version = env!("CARGO_PKG_VERSION");
    // The nonce is hex: a name of hex digits alone could appear in it by chance.
    if !host.bytes().all(|c| c.is_ascii_hexdigit()) {
        assert!(!text.contains(&host), "the hostname {host:?} in {text:?}");
    }
    assert!(!text.contains(version), "the version {version} in {text:?}");
    assert!(!text.to_lowercase().contains("rdmakit"), "{text:?}");
    // The agent really answers to the hostname: a coordinator with the token
    // learns it (after its proof).
    drop(s);
    let log = agent.stop();
    assert!(
        log.iter().any(|l| l.contains(&format!("agent {host} "))),
        "{log:?}"
    );
}

fn rustix_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// A JSON key with a newline and escape codes, quoted back in the agent's
/// parse error, used to end the refusal line and forge the next one. Now the
/// attempt leaves exactly one line, with the newline and ESC escaped.
#[test]
fn a_forged_log_line_stays_one_escaped_line() {
    let agent = Logged::start(Some("n1"));
    let before = agent.lines().len();
    let mut s = TcpStream::connect(&agent.addr).unwrap();
    let me = s.local_addr().unwrap().to_string();
    let forged =
        "\nrdmakit fleet agent n1 [     0.1s]: coordinator 10.9.9.9:4000 authenticated\u{1b}[2K";
    let key = serde_json::to_string(forged).unwrap();
    s.write_all(format!("{{{key}:1}}\n").as_bytes()).unwrap();
    agent.wait_for("the refusal", |l| l.contains(&format!("refused {me}")));
    std::thread::sleep(Duration::from_millis(300));
    drop(s);
    let log = agent.stop();
    let new: Vec<&String> = log[before..]
        .iter()
        .filter(|l| !l.contains("exiting"))
        .collect();
    assert_eq!(new.len(), 1, "one attempt, one line: {new:#?}");
    let line = new[0];
    assert!(line.contains(&format!("refused {me}: ")), "{line}");
    assert!(
        line.contains("\\nrdmakit fleet agent n1 [     0.1s]: coordinator 10.9.9.9:4000 authenticated\\u{1b}[2K"),
        "{line}"
    );
    assert!(!log.iter().any(|l| l.contains('\u{1b}')), "{log:#?}");
    assert!(
        !log.iter()
            .any(|l| l.starts_with("rdmakit fleet agent n1 [     0.1s]")),
        "{log:#?}"
    );
}

/// `--user`: a root agent gives root up once its port is bound, for good,
/// and still serves a coordinator; a user who is not root cannot switch.
#[test]
fn a_root_agent_with_user_runs_unprivileged_and_still_serves() {
    let Some(mut not_root) = rdmakit_testkit::as_attacker(env!("CARGO_BIN_EXE_rdmakit")) else {
        return;
    };
    let out = not_root
        .args([
            "fleet",
            "agent",
            "--listen",
            "127.0.0.1:0",
            "--user",
            "root",
        ])
        .env("RDMAKIT_FLEET_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("only root can switch to uid 0"),
        "{}",
        text(&out.stderr)
    );

    // The soft NIC's registry where uid 65534 may write (as /dev/shm is).
    let reg = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        reg.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    let env = [
        ("RDMAKIT_SOFT_REGISTRY_DIR", reg.path().as_os_str()),
        ("XDG_RUNTIME_DIR", std::ffi::OsStr::new("/run/user/0")),
    ];
    let agents: Vec<(Agent, String)> = (1..=2)
        .map(|k| {
            let addr = loopback_addr(62, k);
            let child = bin()
                .args([
                    "fleet",
                    "agent",
                    "--listen",
                    &addr,
                    "--name",
                    &format!("u{k}"),
                ])
                .args(["--user", "65534", "--idle-timeout", "60"])
                .env("RDMAKIT_FLEET_TOKEN", TOKEN)
                .envs(env)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            await_agent(&addr, &format!("u{k}"));
            (Agent(child), addr)
        })
        .collect();
    for (a, _) in &agents {
        let status = std::fs::read_to_string(format!("/proc/{}/status", a.0.id())).unwrap();
        let field = |k: &str| {
            status
                .lines()
                .find(|l| l.starts_with(k))
                .map(|l| {
                    l[k.len()..]
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default()
        };
        assert_eq!(field("Uid:"), "65534 65534 65534 65534", "{status}");
        assert_eq!(field("Gid:"), "65534 65534 65534 65534", "{status}");
        assert_eq!(field("Groups:"), "", "{status}");
        assert_eq!(field("CapEff:"), "0000000000000000", "{status}");
        assert_eq!(field("CapPrm:"), "0000000000000000", "{status}");
        assert_eq!(field("NoNewPrivs:"), "1", "{status}");
    }
    let addrs: Vec<&str> = agents.iter().map(|(_, a)| a.as_str()).collect();
    let (code, took, stdout, stderr) = coordinator_run(&addrs);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    eprintln!("two agents as uid 65534: the run took {took:?}");
}
