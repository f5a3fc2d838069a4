//! What the binary's end-to-end tests share: running `rdmakit` hermetically and
//! finding the repository's fixtures. Each test binary uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

use rdmakit_soft::faults::Plan;
use rdmakit_soft::{DeviceConfig, Errno, Limits};

/// Variables of the caller's environment that would change what rdmakit does
/// (device, provider, fleet token, Slurm): every test starts without them and
/// sets what it means to test.
const AMBIENT: &[&str] = &[
    "RDMAKIT_SOFT_NAME",
    "RDMAKIT_SOFT_ADDR",
    "RDMAKIT_PROVIDER",
    "RDMAKIT_IBVERBS_LIB",
    "RDMAKIT_FLEET_TOKEN",
    "SLURM_CONF",
];

/// The rdmakit binary under test, without colors and without the caller's
/// [`AMBIENT`] variables.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rdmakit"));
    c.env("NO_COLOR", "1");
    for v in AMBIENT {
        c.env_remove(v);
    }
    c
}

/// Runs `rdmakit ARGS` to completion.
pub fn rdmakit(args: &[&str]) -> Output {
    bin().args(args).output().expect("rdmakit runs")
}

/// Runs `rdmakit ARGS` with extra environment variables.
pub fn rdmakit_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = bin();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("rdmakit runs")
}

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The repository's fixtures/ (real captures, each with its SOURCE note).
pub fn fixtures() -> PathBuf {
    repo().join("fixtures")
}

/// The path of `fixtures/NAME`, which must exist: a missing fixture fails the
/// test instead of letting it pass on nothing.
pub fn fixture(name: &str) -> String {
    let p = fixtures().join(name);
    assert!(
        p.exists(),
        "fixture {} is missing (fixtures/ is part of the repository)",
        p.display()
    );
    p.display().to_string()
}

/// Bytes as text (lossy).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A TCP port on loopback that nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Runs `cmd` with its stderr on a pseudo-terminal (progress bars draw only
/// there): (exit status, stdout, what the terminal showed).
pub fn on_a_pty(mut cmd: Command) -> (Option<i32>, String, String) {
    use std::io::Read as _;
    use std::os::fd::{FromRawFd as _, OwnedFd};
    use std::process::Stdio;
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two new descriptors into the locals; no name, termios or size.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let child = cmd
        .env("TERM", "xterm")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut f = std::fs::File::from(master);
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        // Ends with EIO once the child (the last holder of the slave) has exited.
        while let Ok(n) = f.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        String::from_utf8_lossy(&buf).into_owned()
    });
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        reader.join().unwrap(),
    )
}

/// A fleet agent, killed on drop.
pub struct Agent(pub std::process::Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `rdmakit fleet agent` named `name` (token `token`, extra
/// environment `env`) on a loopback address of its own, 127.<net + pid
/// bits>.<pid bits>.<k>, and waits until it listens; returns it and its
/// address.
pub fn fleet_agent(
    net: u8,
    k: u8,
    name: &str,
    token: &str,
    env: &[(&str, &std::ffi::OsStr)],
) -> (Agent, String) {
    use std::process::Stdio;
    let addr = loopback_addr(net, k);
    let child = bin()
        .args(["fleet", "agent", "--listen", &addr, "--name", name])
        .args(["--idle-timeout", "120"])
        .env("RDMAKIT_FLEET_TOKEN", token)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let agent = Agent(child);
    await_agent(&addr, name);
    (agent, addr)
}

/// A free TCP address on a loopback address of its own, 127.<net + pid
/// bits>.<pid bits>.<k>: tests running at once (and the soft NICs they bind)
/// do not meet.
pub fn loopback_addr(net: u8, k: u8) -> String {
    let p = std::process::id();
    let ip = format!(
        "127.{}.{}.{k}",
        net + (p % 50) as u8,
        (p / 50 % 250) as u8 + 1
    );
    let l = std::net::TcpListener::bind(format!("{ip}:0")).unwrap();
    l.local_addr().unwrap().to_string()
}

/// Waits (20 s at the most) until the agent `name` listens on `addr`.
pub fn await_agent(addr: &str, name: &str) {
    use std::time::{Duration, Instant};
    let t = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "agent {name} never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `name` of each node of a fleet or pairwise report, in order.
pub fn node_names(report: &serde_json::Value) -> Vec<&str> {
    report["nodes"]
        .as_array()
        .expect("a report with nodes")
        .iter()
        .map(|n| n["name"].as_str().expect("a node name"))
        .collect()
}

/// `fleet pairwise --agents AGENTS` with one 64 KiB size, `seconds` of bandwidth
/// and `lat` seconds of latency per pair: the short run the tests use.
pub fn pairwise_args(agents: &str, seconds: &str, lat: &str) -> Vec<String> {
    [
        "fleet",
        "pairwise",
        "--agents",
        agents,
        "--sizes",
        "65536",
        "--seconds",
        seconds,
        "--lat-seconds",
        lat,
    ]
    .map(String::from)
    .to_vec()
}

/// A fake Slurm of two idle nodes, n1 and n2 of partition gpu, written to `dir`
/// (put it first on PATH): scontrol and sinfo list them, srun runs each task
/// here after `queue_secs` (as a queue would), labelled as `srun --label` does.
pub fn fake_slurm(dir: &std::path::Path, queue_secs: u32) {
    let scontrol = "#!/bin/sh\n\
        case \"$1 $2\" in\n\
          'show hostnames') echo \"$3\" | tr ',' '\\n' ;;\n\
          'show node') printf 'NodeName=n1 State=IDLE\\nNodeName=n2 State=IDLE\\n' ;;\n\
          *) exit 9 ;;\n\
        esac\n";
    let sinfo = "#!/bin/sh\nprintf 'n1 gpu\\nn2 gpu\\n'\n";
    let srun = format!(
        "#!/bin/sh\n\
        nodes=''\n\
        while [ $# -gt 0 ]; do\n\
          case \"$1\" in --nodelist=*) nodes=\"${{1#--nodelist=}}\" ;; --*) ;; *) break ;; esac\n\
          shift\n\
        done\n\
        sleep {queue_secs}\n\
        i=0\n\
        for n in $(echo \"$nodes\" | tr ',' ' '); do\n\
          SLURMD_NODENAME=$n \"$@\" | sed \"s/^/$i: /\"\n\
          i=$((i + 1))\n\
        done\n"
    );
    for (name, text) in [("scontrol", scontrol), ("sinfo", sinfo), ("srun", &srun)] {
        rdmakit_testkit::write_script(&dir.join(name), text);
    }
}

/// Waits for `c` at most `limit`; kills it past that. Its status and output.
pub fn finish(
    mut c: std::process::Child,
    limit: std::time::Duration,
) -> (Option<i32>, String, String) {
    let t = std::time::Instant::now();
    while c.try_wait().unwrap().is_none() && t.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = c.kill();
    let o = c.wait_with_output().unwrap();
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

/// A soft device named `name` with room for `max_qp` QPs, refusing the next
/// with `exhaustion`, leaky (its records kept after its context is gone) or
/// not: the device the registry tests contend for.
pub fn soft_config(name: &str, max_qp: u32, exhaustion: Errno, leaky: bool) -> DeviceConfig {
    DeviceConfig {
        name: Some(name.into()),
        limits: Limits {
            max_qp,
            ..Limits::default()
        },
        faults: Plan {
            exhaust: Some(exhaustion),
            ..Plan::default()
        },
        leaky: Some(leaky),
        ..DeviceConfig::default()
    }
}
