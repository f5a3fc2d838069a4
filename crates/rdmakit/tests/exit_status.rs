//! One table of exit statuses for every subcommand (rdmakit_vocab::exit): 0 done,
//! 1 something to act on, 2 usage or rdmakit failure, 3 part of the answer could
//! not be read. Each subcommand runs here in the situations it meets — against
//! the real binary, real captures (fixtures/) and the soft NIC — and every status
//! it ends with must be documented in its man page's EXIT STATUS section and at
//! the end of its `--help`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// One run: the subcommand (as typed), what situation it meets, its
/// arguments and environment, the status it must end with, and a text its
/// output (stdout or stderr) must hold.
struct Run {
    sub: &'static str,
    situation: &'static str,
    args: Vec<String>,
    env: Vec<(String, String)>,
    code: i32,
    says: String,
}

fn run(sub: &'static str, situation: &'static str, args: &[&str], code: i32, says: &str) -> Run {
    Run {
        sub,
        situation,
        args: args.iter().map(|s| s.to_string()).collect(),
        env: Vec::new(),
        code,
        says: says.to_string(),
    }
}

impl Run {
    fn env(mut self, k: &str, v: &str) -> Run {
        self.env.push((k.into(), v.into()));
        self
    }
}

/// A capture directory with a host tree and no RDMA netlink answers: a
/// bundle recorded without them.
fn no_netlink_capture(dir: &Path) -> String {
    let d = dir.join("no-netlink");
    std::fs::create_dir_all(d.join("root/sys/class/infiniband")).unwrap();
    d.display().to_string()
}

/// fixtures/pcap/rc_pingpong-s64.pcap with one payload byte of the last
/// packet flipped: its ICRC no longer matches.
fn corrupted_pcap(dir: &Path) -> String {
    let mut b = std::fs::read(fixture("pcap/rc_pingpong-s64.pcap")).unwrap();
    let n = b.len();
    b[n - 10] ^= 0xff;
    let p = dir.join("corrupt.pcap");
    std::fs::write(&p, b).unwrap();
    p.display().to_string()
}

fn table(dir: &Path) -> Vec<Run> {
    let healthy = fixture("healthy");
    let busy = fixture("healthy-busy");
    let mlx4 = fixture("mlx4-saturated-edit");
    let pci = format!(
        "{}/../report/tests/data/mlx5-pci.json.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let slow_node = format!(
        "{}/../report/tests/data/6ns-slow-node-n3-9.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let no_nl = no_netlink_capture(dir);
    let pcap_ok = fixture("pcap/rc_pingpong-s64.pcap");
    let pcap_bad = corrupted_pcap(dir);
    let out = |name: &str| dir.join(name).display().to_string();
    let (bundle, expected, shim_dir) = (out("b.json"), out("expected.json"), out("shim"));
    // What `shim install` checks of a library (ELF, the IBVERBS_1.1 node,
    // rdmakit's marker): shim_cli.rs installs the real one.
    let lib = out("libibverbs.so");
    std::fs::write(&lib, b"\x7fELF IBVERBS_1.1 rdmakit libibverbs").unwrap();
    let registry = out("registry");
    std::fs::create_dir_all(&registry).unwrap();
    let port = free_port().to_string();
    let h = healthy.as_str();
    vec![
        run(
            "doctor",
            "a healthy capture",
            &["doctor", "--from", h],
            0,
            "rxe0",
        ),
        run(
            "doctor",
            "saturated error counters",
            &["doctor", "--from", &mlx4],
            1,
            "RDK-H010",
        ),
        run(
            "doctor",
            "no such bundle",
            &["doctor", "--from", "/nonexistent"],
            2,
            "ENOENT",
        ),
        run(
            "explain",
            "a known errno",
            &["explain", "ENOSPC"],
            0,
            "ENOSPC",
        ),
        run(
            "explain",
            "an unknown term",
            &["explain", "NOSUCHTHING"],
            2,
            "no such code, errno or status",
        ),
        run(
            "collect",
            "a capture converted",
            &["collect", "--from", h, "-o", &bundle],
            0,
            "wrote",
        ),
        run(
            "collect",
            "an unwritable bundle path",
            &["collect", "--from", h, "-o", "/nonexistent/b.json"],
            2,
            "its directory does not exist",
        ),
        run("pcap", "a clean capture", &["pcap", &pcap_ok], 0, "ICRC"),
        run(
            "pcap",
            "a packet with a bad ICRC",
            &["pcap", &pcap_bad],
            1,
            "ICRC",
        ),
        run(
            "pcap",
            "no such capture",
            &["pcap", "/nonexistent"],
            2,
            "ENOENT",
        ),
        run("dev", "a capture", &["dev", "--from", h], 0, "rxe0"),
        run("dev", "the live host", &["dev"], 0, ""),
        run(
            "dev",
            "no such device",
            &["dev", "mlx5_9", "--from", h],
            2,
            "no RDMA device",
        ),
        run(
            "dev",
            "no netlink recorded",
            &["dev", "--from", &no_nl],
            3,
            "holds no RDMA netlink",
        ),
        run("link", "a capture", &["link", "--from", h], 0, "rxe0/1"),
        run("link", "the live host", &["link"], 0, ""),
        run(
            "link",
            "a bad port",
            &["link", "rxe0/x", "--from", h],
            2,
            "the port must be",
        ),
        run(
            "link",
            "no netlink recorded",
            &["link", "--from", &no_nl],
            3,
            "holds no RDMA netlink",
        ),
        run("res", "a capture", &["res", "--from", h], 0, "rxe0"),
        run("res", "the live host", &["res"], 0, "soft NIC"),
        run(
            "res",
            "a bad kind",
            &["res", "qpx", "x", "--from", h],
            2,
            "unknown resource",
        ),
        run(
            "res",
            "a dump not recorded",
            &["res", "ctx", "--from", h],
            3,
            "not recorded",
        ),
        run("stat", "a capture", &["stat", "--from", h], 0, "rxe0/1"),
        run("stat", "the live host", &["stat"], 0, ""),
        run(
            "stat",
            "a bad object",
            &["stat", "qps", "rxe0", "--from", h],
            2,
            "unknown statistic",
        ),
        run(
            "stat",
            "QP counters not recorded",
            &["stat", "qp", "--from", &busy],
            3,
            "QP counters: not recorded",
        ),
        run("devinfo", "the soft NIC", &["devinfo"], 0, "hca_id:").env("RDMAKIT_PROVIDER", "soft"),
        run(
            "devinfo",
            "a capture (no ibv_query_port answers)",
            &["devinfo", "--from", h],
            3,
            "max_mtu, active_mtu, port_lmc (ibv_query_port): not recorded",
        ),
        run(
            "devinfo",
            "no such device",
            &["devinfo", "-d", "mlx5_9"],
            2,
            "wasn't found",
        )
        .env("RDMAKIT_PROVIDER", "soft"),
        run(
            "metrics",
            "a capture",
            &["metrics", "--from", h],
            0,
            "rdmakit_",
        ),
        run(
            "metrics",
            "no such bundle",
            &["metrics", "--from", "/nonexistent"],
            2,
            "ENOENT",
        ),
        run(
            "perf",
            "no server listening",
            &["perf", "write-bw", "127.0.0.1", "-p", &port, "-n", "10"],
            1,
            "ECONNREFUSED",
        ),
        run(
            "perf",
            "an invalid size",
            &["perf", "write-bw", "127.0.0.1", "-s", "0"],
            2,
            "--size",
        ),
        run(
            "soft status",
            "an empty registry",
            &["soft", "status"],
            0,
            "",
        )
        .env("RDMAKIT_SOFT_REGISTRY_DIR", &registry),
        run(
            "soft status",
            "a device name with a slash",
            &["soft", "status", "-d", "a/b"],
            2,
            "a/b",
        )
        .env("RDMAKIT_SOFT_REGISTRY_DIR", &registry),
        run(
            "soft leaky",
            "set on",
            &["soft", "leaky", "on", "-d", "rdkt-exit0"],
            0,
            "leaky",
        )
        .env("RDMAKIT_SOFT_REGISTRY_DIR", &registry),
        run(
            "soft leaky",
            "a device name with a slash",
            &["soft", "leaky", "on", "-d", "a/b"],
            2,
            "a/b",
        )
        .env("RDMAKIT_SOFT_REGISTRY_DIR", &registry),
        run(
            "soft reclaim",
            "nothing to free",
            &["soft", "reclaim", "--dry-run"],
            0,
            "",
        )
        .env("RDMAKIT_SOFT_REGISTRY_DIR", &registry),
        run(
            "soft reclaim",
            "a device name with a slash",
            &["soft", "reclaim", "-d", "a/b"],
            2,
            "a/b",
        )
        .env("RDMAKIT_SOFT_REGISTRY_DIR", &registry),
        run(
            "shim install",
            "a library given",
            &["shim", "install", &shim_dir, "--from", &lib],
            0,
            "",
        )
        .env("RDMAKIT_SOFT_REGISTRY_DIR", &registry),
        run(
            "shim install",
            "no such library",
            &["shim", "install", &shim_dir, "--from", "/nonexistent"],
            2,
            "--from /nonexistent: ENOENT",
        ),
        run(
            "fleet report",
            "a healthy node",
            &["fleet", "report", h],
            0,
            "1 ok",
        ),
        run(
            "fleet report",
            "a node with errors",
            &["fleet", "report", &mlx4],
            1,
            "error",
        ),
        run(
            "fleet report",
            "no such input",
            &["fleet", "report", "/nonexistent"],
            2,
            "ENOENT",
        ),
        run(
            "fleet baseline",
            "a healthy node",
            &["fleet", "baseline", h, "-o", &expected],
            0,
            "node",
        ),
        run(
            "fleet baseline",
            "no such input",
            &["fleet", "baseline", "/nonexistent", "-o", &expected],
            2,
            "ENOENT",
        ),
        run(
            "fleet sweep",
            "no Slurm",
            &["fleet", "sweep", "-o", &out("sweep")],
            2,
            "sinfo",
        )
        .env("PATH", dir.to_str().unwrap()),
        run(
            "fleet agent",
            "idle until its timeout",
            &[
                "fleet",
                "agent",
                "--listen",
                "127.0.0.1:0",
                "--idle-timeout",
                "1",
            ],
            0,
            "idle",
        )
        .env(
            "RDMAKIT_FLEET_TOKEN",
            "an-exit-status-test-token-of-32+bytes",
        ),
        run(
            "fleet agent",
            "no token",
            &["fleet", "agent", "--listen", "127.0.0.1:0"],
            2,
            "token",
        ),
        run(
            "fleet pairwise",
            "a saved run with a slow node",
            &["fleet", "pairwise", "--from", &slow_node],
            1,
            "n3",
        ),
        run(
            "fleet pairwise",
            "no such saved run",
            &["fleet", "pairwise", "--from", "/nonexistent"],
            2,
            "ENOENT",
        ),
        run(
            "verbs-test",
            "the soft NIC",
            &["verbs-test", "--filter", "query"],
            0,
            "PASS query",
        )
        .env("RDMAKIT_PROVIDER", "soft"),
        run(
            "verbs-test",
            "a filter matching nothing",
            &["verbs-test", "--filter", "zzz"],
            2,
            "zzz",
        )
        .env("RDMAKIT_PROVIDER", "soft"),
        // Without the umad2sim preload this machine has no umad device; the
        // simulated fabric's runs (0, 1 and 3) are in fabric_ibsim.rs and
        // fabric_check_ibsim.rs.
        run(
            "fabric discover",
            "no umad device",
            &["fabric", "discover"],
            2,
            "(kernel layer)",
        ),
        run(
            "fabric counters",
            "no umad device",
            &["fabric", "counters", "--json"],
            2,
            "(kernel layer)",
        ),
        run(
            "fabric route",
            "no umad device",
            &["fabric", "route", "1", "2"],
            2,
            "(kernel layer)",
        ),
        run(
            "fabric check",
            "no umad device",
            &["fabric", "check"],
            2,
            "(kernel layer)",
        ),
        run(
            "fabric check",
            "an expected topology that cannot be read",
            &["fabric", "check", "--expected", "/nonexistent/cables"],
            2,
            "--expected /nonexistent/cables",
        ),
        run("irq", "a software device", &["irq", "--from", h], 0, "rxe0"),
        run(
            "irq",
            "vectors on another NUMA node",
            &["irq", "--from", &pci],
            1,
            "RDK-I005",
        ),
        run(
            "irq",
            "no such bundle",
            &["irq", "--from", "/nonexistent"],
            2,
            "ENOENT",
        ),
        run(
            "completions",
            "bash",
            &["completions", "bash"],
            0,
            "_rdmakit",
        ),
        run(
            "completions",
            "an unknown shell",
            &["completions", "tcsh"],
            2,
            "tcsh",
        ),
        run("man", "the page", &["man"], 0, "EXIT STATUS"),
        run(
            "man",
            "an unwritable directory",
            &["man", "--dir", "/proc/rdmakit"],
            2,
            "--dir",
        ),
    ]
}

/// Every leaf subcommand, as typed ("soft status"), from the generated man pages.
fn subcommands(man_dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(man_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|f| {
            f.strip_suffix(".1")
                .and_then(|f| f.strip_prefix("rdmakit-"))
                .map(|s| s.replace('-', " ").replace("verbs test", "verbs-test"))
        })
        .collect();
    // Groups have pages too; a leaf is a page no other page extends.
    let all = out.clone();
    out.retain(|s| !all.iter().any(|o| o.starts_with(&format!("{s} "))));
    out.sort();
    out
}

/// The codes a man page's EXIT STATUS section lists.
fn man_codes(page: &str) -> BTreeSet<i32> {
    let Some(at) = page.find(".SH \"EXIT STATUS\"") else {
        return BTreeSet::new();
    };
    let section = &page[at + 1..];
    let end = section.find("\n.SH").unwrap_or(section.len());
    section[..end]
        .lines()
        .filter_map(|l| l.strip_prefix("\\fB")?.strip_suffix("\\fR")?.parse().ok())
        .collect()
}

/// The codes the end of `--help` lists.
fn help_codes(help: &str) -> BTreeSet<i32> {
    let Some(at) = help.find("Exit status:") else {
        return BTreeSet::new();
    };
    help[at..]
        .lines()
        .filter_map(|l| {
            let t = l.strip_prefix("  ")?;
            let (n, _) = t.split_once("  ")?;
            n.parse().ok()
        })
        .collect()
}

#[test]
fn every_subcommand_exits_as_the_table_says() {
    let dir = tempfile::tempdir().unwrap();
    let runs = table(dir.path());
    let mut seen: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
    let mut failures = Vec::new();
    for r in &runs {
        let mut c = bin();
        c.args(&r.args).stdin(Stdio::null());
        for (k, v) in &r.env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        if o.status.code() != Some(r.code) || !all.contains(&r.says) {
            failures.push(format!(
                "{} ({}): {:?} exited {:?}, want {} and {:?} in:\n{all}",
                r.sub,
                r.situation,
                r.args,
                o.status.code(),
                r.code,
                r.says
            ));
        }
        seen.entry(r.sub).or_default().insert(r.code);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // Every subcommand is in the table, and documents each status it ended with.
    let man = dir.path().join("man");
    let o = rdmakit(&["man", "--dir", man.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let subs = subcommands(&man);
    assert!(subs.len() >= 25, "{subs:?}");
    for s in &subs {
        if s == "monitor" {
            // Live only and endless when the kernel has RDMA: its own test below.
            continue;
        }
        let codes = seen
            .get(s.as_str())
            .unwrap_or_else(|| panic!("`rdmakit {s}` has no run in the exit-status table"));
        let page = std::fs::read_to_string(man.join(format!("rdmakit-{}.1", s.replace(' ', "-"))))
            .unwrap();
        let documented = man_codes(&page);
        assert!(
            codes.is_subset(&documented),
            "rdmakit-{s}.1 documents {documented:?}, the runs ended with {codes:?}"
        );
        let mut args: Vec<&str> = s.split(' ').collect();
        args.push("--help");
        let help = text(&rdmakit(&args).stdout);
        assert_eq!(
            help_codes(&help),
            documented,
            "rdmakit {s} --help vs its man page"
        );
    }
    let top = std::fs::read_to_string(man.join("rdmakit.1")).unwrap();
    assert_eq!(man_codes(&top), BTreeSet::from([0, 1, 2, 3]));
}

/// A usage error is 2 on every subcommand, said by clap.
#[test]
fn an_unknown_flag_is_exit_2_on_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man");
    assert!(rdmakit(&["man", "--dir", man.to_str().unwrap()])
        .status
        .success());
    for s in subcommands(&man) {
        let mut args: Vec<&str> = s.split(' ').collect();
        args.push("--no-such-flag");
        let o = rdmakit(&args);
        assert_eq!(o.status.code(), Some(2), "rdmakit {s} --no-such-flag");
        assert!(
            text(&o.stderr).contains("unexpected argument '--no-such-flag'"),
            "{s}: {}",
            text(&o.stderr)
        );
    }
}

/// `soft reclaim` refuses the objects of a live process: exit 1, naming it.
#[test]
fn soft_reclaim_refusing_a_live_owner_is_exit_1() {
    use rdmakit_soft::{Device, DeviceConfig};
    let name = format!("rdkt-exit-{}", std::process::id());
    let dev = Device::open(DeviceConfig {
        name: Some(name.clone()),
        ..DeviceConfig::default()
    })
    .unwrap();
    let _pd = dev.alloc_pd().unwrap();
    let o = rdmakit(&["soft", "reclaim", "-d", &name]);
    let err = text(&o.stderr);
    let dir = rdmakit_soft::registry::Registry::open(&name)
        .unwrap()
        .dir()
        .to_path_buf();
    drop(dev);
    let _ = std::fs::remove_dir_all(dir);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("pid {} (alive", std::process::id())),
        "{err}"
    );
}

/// `monitor` on a kernel without RDMA netlink: nothing to subscribe to, exit 3
/// naming the kernel layer; with it, it waits for events (stopped after 2 s).
#[test]
fn monitor_without_rdma_netlink_is_exit_3() {
    let mut child = bin()
        .arg("monitor")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            assert_eq!(st.code(), Some(3), "{err}");
            assert!(
                err.contains("kernel layer") && err.contains("EPROTONOSUPPORT"),
                "{err}"
            );
            return;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
