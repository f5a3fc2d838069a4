//! Congestion control end to end: soft-NIC RC senders (`rdmakit perf
//! write-bw`, each in its own network namespace with its own address) into
//! one receiver through a 10 Mb/s bottleneck with a 60 kB tail-drop queue
//! and ECN marking above 20 kB (testkit's ECN dumbbell: an HTB class, a
//! bfifo, a tc-BPF virtual-queue marker). The same three flows run twice in
//! one test, congestion control off (`RDMAKIT_SOFT_CC=off`: data leaves
//! Not-ECT, nothing reacts) and on (the 10 Mb/s DCQCN profile), and the
//! test compares them: drops at the bottleneck, its use, the fairness of
//! the two first flows, retransmissions, the counters of both ends, and how
//! fast a third flow joining mid-run reaches its share. Needs root, iproute2,
//! clang-14, libbpf-dev and bpftool (scripts/test installs them); a missing
//! one fails the test naming its package.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rdmakit_testkit::ecn::{Config, Dumbbell, MarkerStats, Node, Running};

/// The bottleneck, Mb/s.
const RATE_MBIT: u32 = 10;
/// The first two flows' run.
const RUN: Duration = Duration::from_secs(8);
/// When the third flow joins, and for how long it runs.
const LATE: Duration = Duration::from_secs(4);
const LATE_RUN: Duration = Duration::from_secs(4);
/// What samples the flows' rates.
const SAMPLE: Duration = Duration::from_millis(100);

/// The tests here run one at a time: each needs the machine's CPU for its
/// soft NICs' pacing, and ib_write_bw's clients spin.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rdmakit"))
}

/// One flow: sender i (10.77.i.2) to its own receiver address.
struct Flow {
    i: u8,
    server_addr: Ipv4Addr,
    port: u16,
}

/// What one run measured.
struct Outcome {
    /// (seconds since the first clients started, per-sender bytes offered
    /// to the bottleneck so far).
    samples: Vec<(f64, [u64; 8])>,
    /// (seconds, the marker's model drops so far): when the queue overflowed.
    overflows: Vec<(f64, u64)>,
    /// The bottleneck over the whole run.
    drops: u64,
    sent_packets: u64,
    marker: MarkerStats,
    /// Per flow: the client's and the server's `perf --json` report.
    clients: Vec<serde_json::Value>,
    servers: Vec<serde_json::Value>,
    /// CPU time of every perf process, seconds, and the run's wall time.
    cpu: f64,
    wall: f64,
}

impl Outcome {
    /// A sender's rate over [a, b] seconds, bits/s (Ethernet frames
    /// offered to the bottleneck).
    fn rate(&self, sender: usize, a: f64, b: f64) -> f64 {
        let at = |t: f64| {
            self.samples
                .iter()
                .min_by(|x, y| (x.0 - t).abs().total_cmp(&(y.0 - t).abs()))
                .map(|s| (s.0, s.1[sender]))
                .expect("samples were taken")
        };
        let ((t0, b0), (t1, b1)) = (at(a), at(b));
        (b1.saturating_sub(b0) as f64 * 8.0) / (t1 - t0).max(1e-3)
    }

    /// A device counter summed over the flows' clients or servers.
    fn sum(reports: &[serde_json::Value], name: &str) -> u64 {
        reports
            .iter()
            .map(|r| r["device_counters"][name].as_u64().unwrap_or(0))
            .sum()
    }

    fn client(&self, name: &str) -> u64 {
        Outcome::sum(&self.clients, name)
    }

    fn server(&self, name: &str) -> u64 {
        Outcome::sum(&self.servers, name)
    }

    fn drop_fraction(&self) -> f64 {
        self.drops as f64 / (self.sent_packets + self.drops).max(1) as f64
    }

    /// The soft NICs' counters as the reports give them (perf's JSON;
    /// perftest reports none).
    fn counters(&self) -> String {
        if !self.clients.iter().all(serde_json::Value::is_object) {
            return "soft NIC counters: not reported (perftest)".into();
        }
        format!(
            "retransmitted {}; marked {} (receivers); CNPs sent {}, handled {}, ignored {}",
            self.client("retransmitted_packets"),
            self.server("np_ecn_marked_roce_packets"),
            self.server("np_cnp_sent"),
            self.client("rp_cnp_handled"),
            self.client("rp_cnp_ignored"),
        )
    }

    /// When the third flow's first bytes reached the bottleneck: the first
    /// sample after its client started with more of its bytes than at the
    /// start (its process, device and connection take a while to start).
    fn joined(&self) -> f64 {
        let t3 = LATE.as_secs_f64();
        let base = self
            .samples
            .iter()
            .rev()
            .find(|s| s.0 <= t3)
            .map_or(0, |s| s.1[3]);
        self.samples
            .iter()
            .find(|s| s.0 > t3 && s.1[3] > base)
            .map_or(t3, |s| s.0)
    }

    /// The third flow's rate over [a, b] seconds after it joined, as a
    /// fraction of its fair share of the bottleneck, C/3.
    fn late_share(&self, a: f64, b: f64) -> f64 {
        let j = self.joined();
        self.rate(3, j + a, j + b) / (f64::from(RATE_MBIT) * 1e6 / 3.0)
    }

    /// The third flow's rate per quarter second of its first two, Mb/s.
    fn late_series(&self) -> String {
        let t3 = self.joined();
        (0..8)
            .map(|k| {
                let a = t3 + f64::from(k) * 0.25;
                format!("{:.2}", self.rate(3, a, a + 0.25) / 1e6)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Every flow's rate per half second of the run, Mb/s.
    fn flow_series(&self) -> String {
        (1..=3)
            .map(|s| {
                let r: Vec<String> = (0..18)
                    .map(|k| {
                        format!(
                            "{:.1}",
                            self.rate(s, f64::from(k) * 0.5, f64::from(k + 1) * 0.5) / 1e6
                        )
                    })
                    .collect();
                format!("flow {s}: {}", r.join(" "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The queue's overflows per second of the run (the marker's model).
    fn overflow_series(&self) -> String {
        let first = self.overflows.first().map_or(0, |o| o.1);
        let at = |t: f64| {
            self.overflows
                .iter()
                .rev()
                .find(|o| o.0 <= t)
                .map_or(first, |o| o.1)
        };
        let end = self.overflows.last().map_or(0.0, |o| o.0).ceil() as u32;
        (0..end)
            .map(|k| (at(f64::from(k + 1)) - at(f64::from(k))).to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// One paragraph for a failure message and the log.
    fn describe(&self, name: &str) -> String {
        let c = f64::from(RATE_MBIT) * 1e6;
        let (r1, r2) = (self.rate(1, 1.0, 4.0), self.rate(2, 1.0, 4.0));
        format!(
            "{name}: bottleneck dropped {} of {} packets ({:.2} %; per second: {}); flows 1-4 s: {:.2} + {:.2} \
             Mb/s (use {:.1} %, Jain {:.3}); third flow joined at {:.2} s, {:.2} Mb/s at +0.5-1 s, {:.2} at +1-2 s ({:.2} of C/3 {:.2}); \
             (per 0.25 s: {}); marked {} (marker); {}; CPU {:.1} s of {:.1} s wall on 2 cores \
             ({:.0} % used); per 0.5 s: {}",
            self.drops,
            self.sent_packets + self.drops,
            100.0 * self.drop_fraction(),
            self.overflow_series(),
            r1 / 1e6,
            r2 / 1e6,
            100.0 * (r1 + r2) / c,
            jain(&[r1, r2]),
            self.joined(),
            self.rate(3, self.joined() + 0.5, self.joined() + 1.0) / 1e6,
            self.rate(3, self.joined() + 1.0, self.joined() + 2.0) / 1e6,
            self.late_share(1.0, 2.0),
            c / 3.0 / 1e6,
            self.late_series(),
            self.marker.marked,
            self.counters(),
            self.cpu,
            self.wall,
            100.0 * self.cpu / (2.0 * self.wall),
            self.flow_series(),
        )
    }
}

/// Jain's fairness index of `x`.
fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * q).max(f64::MIN_POSITIVE)
}

/// The soft NIC's settings for one end: its own address in its namespace,
/// datagrams only, a 1500-byte link (path MTU 1024), congestion control
/// `cc`, and a registry of this dumbbell's.
fn soft_env(cmd: &mut std::process::Command, d: &Dumbbell, addr: Ipv4Addr, cc: &str) {
    cmd.env("RDMAKIT_SOFT_ADDR", addr.to_string())
        .env("RDMAKIT_SOFT_TRANSPORT", "udp")
        .env("RDMAKIT_SOFT_NETDEV_MTU", "1500")
        .env("RDMAKIT_SOFT_CC", cc)
        .env("RDMAKIT_SOFT_REGISTRY_DIR", d.dir().join("registry"))
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
}

/// What runs the flows: `rdmakit perf write-bw` (its JSON reports carry the
/// soft NIC's counters), or Debian's unmodified perftest `ib_write_bw` on
/// the drop-in libibverbs (its reports are text; the bottleneck's counters
/// speak for it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tool {
    Perf,
    Perftest,
}

impl Tool {
    /// Both ends: 64 KiB RDMA WRITEs, 4 in flight, path MTU 1024; perf in
    /// event mode (`-e`: it sleeps on the completion channel instead of
    /// spinning, so the machine keeps CPU to spare). perftest's
    /// `ib_write_bw` refuses `-e` ("Events feature not available on WRITE
    /// verb"): its clients spin, as on a real NIC.
    fn command(self, d: &Dumbbell, node: Node, f: &Flow, run: Duration) -> std::process::Command {
        let secs = run.as_secs().to_string();
        let port = f.port.to_string();
        let mut c = match self {
            Tool::Perf => {
                let mut c = d.command(node, bin());
                c.args([
                    "perf", "write-bw", "-e", "--json", "-m", "1024", "-s", "65536",
                ])
                .args(["-t", "4", "-D", &secs, "-p", &port]);
                c
            }
            Tool::Perftest => {
                let mut c = d.command(node, "ib_write_bw");
                c.args(["-d", "soft0", "-x", "0", "-F", "-m", "1024", "-s", "65536"])
                    .args(["-t", "4", "-D", &secs, "-p", &port])
                    .env("LD_LIBRARY_PATH", shim_dir());
                c
            }
        };
        if node != Node::Receiver {
            c.arg(f.server_addr.to_string());
        }
        c
    }
}

/// The drop-in libibverbs.so.1, as `rdmakit shim install` lays it out:
/// once per test binary (laying it out again while a process loads it
/// would hand that process a half-copied library).
fn shim_dir() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        rdmakit_testkit::install_libs("congestion-lib", &[("libibverbs.so", "libibverbs.so.1")])
    })
}

fn server(d: &Dumbbell, tool: Tool, f: &Flow, cc: &str, run: Duration) -> Running {
    let mut c = tool.command(d, Node::Receiver, f, run);
    soft_env(&mut c, d, f.server_addr, cc);
    d.spawn(&mut c)
        .unwrap_or_else(|e| panic!("{tool:?} server {}: {e}", f.i))
}

fn client(d: &Dumbbell, tool: Tool, f: &Flow, cc: &str, run: Duration) -> Running {
    let mut c = tool.command(d, Node::Sender(f.i), f, run);
    soft_env(&mut c, d, d.addr(Node::Sender(f.i)), cc);
    d.spawn(&mut c)
        .unwrap_or_else(|e| panic!("{tool:?} client {}: {e}", f.i))
}

/// A process's report (it exited 0): perf's JSON, or perftest's text as a
/// JSON string.
fn report(r: Running, tool: Tool, what: &str) -> serde_json::Value {
    let out = r.wait(RUN + Duration::from_secs(40), what);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} failed ({:?}): {text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    match tool {
        Tool::Perf => serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {e}: {text}")),
        Tool::Perftest => {
            assert!(
                text.contains("BW average"),
                "{what}: no result table: {text}"
            );
            serde_json::Value::String(text.into_owned())
        }
    }
}

/// CPU seconds (user + system) of the children this process reaped.
fn children_cpu() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN is a valid target.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// Flows 1 and 2 for [`RUN`], flow 3 (when there is one) from [`LATE`]
/// for [`LATE_RUN`], run by `tool` with congestion control `cc` at both
/// ends.
fn run(d: &Dumbbell, tool: Tool, flows: &[Flow], cc: &str) -> Outcome {
    let runs = [RUN, RUN, LATE_RUN];
    let servers: Vec<Running> = flows
        .iter()
        .zip(runs)
        .map(|(f, r)| server(d, tool, f, cc, r))
        .collect();
    // The servers listen before a client connects (their TCP port).
    std::thread::sleep(Duration::from_millis(500));
    let cpu0 = children_cpu();
    let before = d.stats().expect("bottleneck before");
    let start = Instant::now();
    let early: Vec<Running> = flows[..2]
        .iter()
        .map(|f| client(d, tool, f, cc, RUN))
        .collect();
    let mut late = None;
    let mut samples = Vec::new();
    let mut overflows = Vec::new();
    while start.elapsed() < RUN + Duration::from_millis(1500) {
        if late.is_none() && start.elapsed() >= LATE {
            late = flows.get(2).map(|f| client(d, tool, f, cc, LATE_RUN));
        }
        let m = d.marker().expect("marker read").expect("marking is on");
        let t = start.elapsed().as_secs_f64();
        samples.push((t, m.src_bytes));
        overflows.push((t, m.model_drops));
        std::thread::sleep(SAMPLE);
    }
    let mut clients: Vec<serde_json::Value> = early
        .into_iter()
        .enumerate()
        .map(|(i, r)| report(r, tool, &format!("{tool:?} client {}", i + 1)))
        .collect();
    if let Some(r) = late {
        clients.push(report(r, tool, &format!("{tool:?} client 3")));
    }
    let servers: Vec<serde_json::Value> = servers
        .into_iter()
        .enumerate()
        .map(|(i, r)| report(r, tool, &format!("{tool:?} server {}", i + 1)))
        .collect();
    let wall = start.elapsed().as_secs_f64();
    let b = d.stats().expect("bottleneck after").since(&before);
    Outcome {
        samples,
        overflows,
        drops: b.bfifo.drops,
        sent_packets: b.bfifo.packets,
        marker: b.marker.expect("marking is on"),
        clients,
        servers,
        cpu: children_cpu() - cpu0,
        wall,
    }
}

/// `n` flows, sender i to its own receiver address (10.77.100.2, .4, .5).
fn flows(d: &Dumbbell, n: u8) -> Vec<Flow> {
    (1..=n)
        .map(|i| Flow {
            i,
            server_addr: if i == 1 {
                d.addr(Node::Receiver)
            } else {
                d.add_receiver_address(i + 2).expect("receiver address")
            },
            port: 18600 + u16::from(i),
        })
        .collect()
}

/// Two unmodified perftest `ib_write_bw` flows on the drop-in libibverbs,
/// congestion control off and then on: the same bottleneck figures. A
/// process's soft NIC counters are its own, so here the bottleneck's
/// drops stand for the retransmissions they cause.
#[test]
fn dcqcn_under_unmodified_ib_write_bw() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        rdmakit_testkit::installed("ib_write_bw").is_some(),
        "ib_write_bw is missing: apt-get install perftest"
    );
    let d = Dumbbell::up(Config {
        rate_mbit: RATE_MBIT,
        senders: 2,
        ..Config::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let flows = flows(&d, 2);
    let off = run(&d, Tool::Perftest, &flows, "off");
    let on = run(
        &d,
        Tool::Perftest,
        &flows,
        &format!("bottleneck={RATE_MBIT}"),
    );
    let why = format!("{}\n{}", off.describe("CC off"), on.describe("CC on"));
    eprintln!("{why}");
    assert!(off.drop_fraction() >= 0.01, "{why}");
    assert_eq!(off.marker.marked, 0, "{why}");
    let c = f64::from(RATE_MBIT) * 1e6;
    let (r1, r2) = (on.rate(1, 1.0, 4.0), on.rate(2, 1.0, 4.0));
    assert!(r1 + r2 >= 0.8 * c, "bottleneck use below 80 %\n{why}");
    assert!(jain(&[r1, r2]) >= 0.9, "unfair\n{why}");
    assert!(on.marker.marked > 0, "{why}");
    assert!(on.drops * 10 <= off.drops, "{why}");
}

#[test]
fn dcqcn_keeps_a_congested_bottleneck_full_fair_and_nearly_lossless() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = Dumbbell::up(Config {
        rate_mbit: RATE_MBIT,
        senders: 3,
        ..Config::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let flows = flows(&d, 3);
    let off = run(&d, Tool::Perf, &flows, "off");
    eprintln!("{}", off.describe("CC off"));
    // The 10 Mb/s profile, as RDMAKIT_SOFT_CC=bottleneck=10 gives it.
    let on = run(&d, Tool::Perf, &flows, &format!("bottleneck={RATE_MBIT}"));
    eprintln!("{}", on.describe("CC on"));
    let why = format!("{}\n{}", off.describe("CC off"), on.describe("CC on"));

    // Off: nothing marks or reacts, and the queue overflows.
    assert!(off.drop_fraction() >= 0.01, "{why}");
    assert_eq!(off.marker.marked, 0, "Not-ECT data is never marked\n{why}");
    assert_eq!(
        off.server("np_cnp_sent") + off.client("rp_cnp_handled"),
        0,
        "{why}"
    );

    // On: the bottleneck stays used and the two flows share it.
    let c = f64::from(RATE_MBIT) * 1e6;
    let (r1, r2) = (on.rate(1, 1.0, 4.0), on.rate(2, 1.0, 4.0));
    assert!(r1 + r2 >= 0.8 * c, "bottleneck use below 80 %\n{why}");
    assert!(jain(&[r1, r2]) >= 0.9, "unfair\n{why}");
    // Retransmissions at least ten times fewer than without.
    let (ron, roff) = (
        on.client("retransmitted_packets"),
        off.client("retransmitted_packets"),
    );
    assert!(roff > 0 && ron * 10 <= roff, "{why}");
    // A late flow takes its fair share, C/3: within 20 % over the second
    // after its first (from its first bytes at the bottleneck, not from
    // its process's start). Over 0.5-1 s after joining it ran at 0.82-1.42
    // of C/3 in the runs seen: a half second at ~3 Mb/s holds ~190
    // packets, and DCQCN's sawtooth moves that by a quarter.
    let late = on.late_share(1.0, 2.0);
    assert!(
        (late - 1.0).abs() <= 0.2,
        "third flow at {late:.2} of C/3 over 1-2 s after joining\n{why}"
    );
    // The counters account for it: marks reached the receivers, every CNP
    // they sent was acted on by its sender, none ignored.
    let marked = on.server("np_ecn_marked_roce_packets");
    let (sent, handled) = (on.server("np_cnp_sent"), on.client("rp_cnp_handled"));
    assert!(marked > 0 && marked <= on.marker.marked, "{why}");
    assert!(sent > 0 && sent <= marked, "{why}");
    assert_eq!(handled, sent, "{why}");
    assert_eq!(on.client("rp_cnp_ignored"), 0, "{why}");
    // With CPU to spare on this 2-core machine.
    assert!(on.cpu < 0.5 * 2.0 * on.wall, "{why}");
}
