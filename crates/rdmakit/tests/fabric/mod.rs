//! A fabric of network namespaces on a Linux bridge, one `rdmakit fleet
//! agent` in each (its soft NIC bound to the namespace's address), and real
//! faults injected with tc: a slow node (tbf on its eth0 and on its veth's
//! bridge side: both directions), a slow pair (htb with a slow class chosen
//! by a u32 match on the peer's address, on both ends). Needs root; fails
//! loudly, never skips, when namespaces cannot be made.
//!
//! Names carry this process's id, so concurrent runs do not collide, and
//! everything is torn down on drop.

#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const TOKEN: &str = "fabric-test-token-0123456789abcdef";
pub const AGENT_PORT: u16 = 18516;

pub struct Fabric {
    pub n: usize,
    tag: String,
    subnet: u8,
    agents: Vec<Option<Child>>,
    pub logs: PathBuf,
    _dir: tempfile::TempDir,
}

/// Runs a command, panicking with its output when it fails.
pub fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e} (iproute2 is needed)"));
    assert!(
        out.status.success(),
        "{args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sh_quiet(args: &[&str]) {
    let _ = Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_rdmakit")
}

impl Fabric {
    /// `n` namespaces on a bridge, with their agents running.
    pub fn new(n: usize) -> Fabric {
        assert!(
            rdmakit_testkit::is_root(),
            "the namespace tier needs root (ip netns, tc); this machine and CI run the tests as root"
        );
        let pid = std::process::id();
        let tag = format!("rkp{}", pid % 100_000);
        let subnet = (pid % 250) as u8 + 1;
        let dir = tempfile::tempdir().unwrap();
        let mut f = Fabric {
            n,
            tag,
            subnet,
            agents: Vec::new(),
            logs: dir.path().to_path_buf(),
            _dir: dir,
        };
        f.teardown_net();
        let br = f.bridge();
        sh(&["ip", "link", "add", &br, "type", "bridge"]);
        sh(&[
            "ip",
            "addr",
            "add",
            &format!("10.247.{}.1/24", f.subnet),
            "dev",
            &br,
        ]);
        sh(&["ip", "link", "set", &br, "up"]);
        for i in 0..n {
            let ns = f.ns(i);
            let h = f.veth(i);
            sh(&["ip", "netns", "add", &ns]);
            sh(&[
                "ip", "link", "add", &h, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ]);
            sh(&["ip", "link", "set", &h, "master", &br, "mtu", "9000", "up"]);
            sh(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
            sh(&["ip", "-n", &ns, "link", "set", "eth0", "mtu", "9000", "up"]);
            sh(&[
                "ip",
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", f.ip(i)),
                "dev",
                "eth0",
            ]);
        }
        for i in 0..n {
            f.agents.push(Some(f.spawn_agent(i)));
        }
        f.wait_ready();
        f
    }

    /// Sets node `i`'s link MTU (its eth0 and its veth's bridge side).
    pub fn set_mtu(&self, i: usize, mtu: u32) {
        let m = mtu.to_string();
        sh(&["ip", "link", "set", &self.veth(i), "mtu", &m]);
        sh(&["ip", "-n", &self.ns(i), "link", "set", "eth0", "mtu", &m]);
    }

    pub fn name(&self, i: usize) -> String {
        format!("n{}", i + 1)
    }

    pub fn ip(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 247, self.subnet, 10 + i as u8)
    }

    pub fn ns(&self, i: usize) -> String {
        format!("{}n{}", self.tag, i + 1)
    }

    fn veth(&self, i: usize) -> String {
        format!("{}h{}", self.tag, i + 1)
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    pub fn agents_arg(&self) -> String {
        self.agents_of(&(0..self.n).collect::<Vec<_>>())
    }

    fn agents_of(&self, nodes: &[usize]) -> String {
        nodes
            .iter()
            .map(|&i| format!("{}:{AGENT_PORT}", self.ip(i)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Runs `program args` inside namespace `i`.
    pub fn exec(&self, i: usize, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(i), program]);
        c
    }

    fn spawn_agent(&self, i: usize) -> Child {
        let log = std::fs::File::create(self.logs.join(format!("agent{}.log", i + 1))).unwrap();
        self.exec(i, bin())
            .args([
                "fleet",
                "agent",
                "--listen",
                &format!("{}:{AGENT_PORT}", self.ip(i)),
                "--name",
                &self.name(i),
                "--idle-timeout",
                "900",
            ])
            .env("RDMAKIT_FLEET_TOKEN", TOKEN)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start an agent")
    }

    fn wait_ready(&self) {
        let t = Instant::now();
        for i in 0..self.n {
            let a = std::net::SocketAddr::from((self.ip(i), AGENT_PORT));
            while std::net::TcpStream::connect_timeout(&a, Duration::from_millis(200)).is_err() {
                assert!(
                    t.elapsed() < Duration::from_secs(30),
                    "agent {} never listened: {}",
                    i + 1,
                    self.log(i)
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.logs.join(format!("agent{}.log", i + 1))).unwrap_or_default()
    }

    /// Node `i` slow both ways: tbf on its eth0 (egress) and on its veth's
    /// bridge side (what it receives).
    pub fn slow_node(&self, i: usize, mbit: u32) {
        let rate = format!("{mbit}mbit");
        for (ns, dev) in [(Some(self.ns(i)), "eth0".to_string()), (None, self.veth(i))] {
            let mut a = vec!["tc"];
            if let Some(ns) = &ns {
                a = vec!["ip", "netns", "exec", ns, "tc"];
            }
            let mut args: Vec<&str> = a.clone();
            args.extend([
                "qdisc", "add", "dev", &dev, "root", "tbf", "rate", &rate, "burst", "256kbit",
                "latency", "400ms",
            ]);
            sh(&args);
        }
    }

    /// The pair (`a`, `b`) slow both ways, everyone else at full speed:
    /// on each end an htb root whose default class is fast and whose slow
    /// class takes the packets to the other end (u32 match ip dst).
    pub fn slow_pair(&self, a: usize, b: usize, mbit: u32) {
        for (me, peer) in [(a, b), (b, a)] {
            let ns = self.ns(me);
            let tc = |rest: &[&str]| {
                let mut v = vec!["ip", "netns", "exec", &ns, "tc"];
                v.extend_from_slice(rest);
                sh(&v);
            };
            tc(&[
                "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10",
            ]);
            tc(&[
                "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate",
                "20gbit",
            ]);
            tc(&[
                "class",
                "add",
                "dev",
                "eth0",
                "parent",
                "1:",
                "classid",
                "1:20",
                "htb",
                "rate",
                &format!("{mbit}mbit"),
                "ceil",
                &format!("{mbit}mbit"),
            ]);
            tc(&[
                "filter",
                "add",
                "dev",
                "eth0",
                "parent",
                "1:",
                "protocol",
                "ip",
                "u32",
                "match",
                "ip",
                "dst",
                &format!("{}/32", self.ip(peer)),
                "flowid",
                "1:20",
            ]);
        }
    }

    /// [`Fabric::slow_pair`] whose slow class queues at most `limit`
    /// packets (a pfifo under it, both ends): what does not fit is dropped,
    /// a congested link's loss. (This kernel has no netem to lose packets
    /// at random.)
    pub fn lossy_pair(&self, a: usize, b: usize, mbit: u32, limit: u32) {
        self.slow_pair(a, b, mbit);
        let limit = limit.to_string();
        for me in [a, b] {
            sh(&[
                "ip",
                "netns",
                "exec",
                &self.ns(me),
                "tc",
                "qdisc",
                "add",
                "dev",
                "eth0",
                "parent",
                "1:20",
                "handle",
                "20:",
                "pfifo",
                "limit",
                &limit,
            ]);
        }
    }

    /// Removes every qdisc the fault injections added.
    pub fn clear(&self) {
        for i in 0..self.n {
            sh_quiet(&[
                "ip",
                "netns",
                "exec",
                &self.ns(i),
                "tc",
                "qdisc",
                "del",
                "dev",
                "eth0",
                "root",
            ]);
            sh_quiet(&["tc", "qdisc", "del", "dev", &self.veth(i), "root"]);
        }
    }

    /// `rdmakit fleet pairwise --json` against the agents: the report and
    /// the exit status.
    pub fn pairwise(&self, extra: &[&str]) -> (serde_json::Value, i32) {
        self.pairwise_on(&(0..self.n).collect::<Vec<_>>(), extra)
    }

    /// The same on some of the agents only.
    pub fn pairwise_on(&self, nodes: &[usize], extra: &[&str]) -> (serde_json::Value, i32) {
        let out = Command::new(bin())
            .args([
                "fleet",
                "pairwise",
                "--json",
                "--agents",
                &self.agents_of(nodes),
            ])
            .args(extra)
            .env("RDMAKIT_FLEET_TOKEN", TOKEN)
            .output()
            .expect("run the coordinator");
        let code = out.status.code().unwrap_or(-1);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "pairwise printed no JSON ({e}), exit {code}: {}\nagent 1: {}",
                String::from_utf8_lossy(&out.stderr),
                self.log(0)
            )
        });
        (v, code)
    }

    /// The faults of a report as strings (`node n3`, `link n2-n5`).
    pub fn faults(v: &serde_json::Value) -> Vec<String> {
        v["faults"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|f| match f["kind"].as_str() {
                        Some("node") => format!("node {}", f["node"].as_str().unwrap_or("?")),
                        Some("link") => format!(
                            "link {}-{}",
                            f["nodes"][0].as_str().unwrap_or("?"),
                            f["nodes"][1].as_str().unwrap_or("?")
                        ),
                        _ => format!("? {f}"),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Median of the screening cells, MB/s.
    pub fn median(v: &serde_json::Value) -> f64 {
        v["matrix"]["median_mbs"].as_f64().unwrap_or(0.0)
    }

    /// Stops agent `i` (SIGKILL) and reports whether it was still running.
    pub fn kill_agent(&mut self, i: usize) -> bool {
        match self.agents[i].take() {
            Some(mut c) => {
                let alive = matches!(c.try_wait(), Ok(None));
                let _ = c.kill();
                let _ = c.wait();
                alive
            }
            None => false,
        }
    }

    fn teardown_net(&self) {
        // The veth first: deleting it removes both ends at once, where a
        // deleted namespace frees its end later, from a kernel work queue —
        // and the next fabric of this process reuses the names.
        for i in 0..self.n.max(16) {
            sh_quiet(&["ip", "link", "del", &self.veth(i)]);
            sh_quiet(&["ip", "netns", "del", &self.ns(i)]);
        }
        sh_quiet(&["ip", "link", "del", &self.bridge()]);
    }

    pub fn dir(&self) -> &Path {
        &self.logs
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        for i in 0..self.agents.len() {
            self.kill_agent(i);
        }
        self.teardown_net();
    }
}

/// The slow rate for injected faults: an eighth of the clean matrix's
/// median (in Mbit/s), so the fault is far outside the noise of a loaded
/// 2-core machine however fast the build is.
pub fn slow_mbit(clean_median_mbs: f64) -> u32 {
    ((clean_median_mbs * 8.388_608 / 8.0) as u32).max(2)
}
