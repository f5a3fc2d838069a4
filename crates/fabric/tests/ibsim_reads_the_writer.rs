//! The writer's output is read by an existing tool: ibsim loads the
//! topology [`ibnetdiscover::write`] printed for the real capture, and
//! unmodified ibnetdiscover, run against that simulated fabric under the
//! umad2sim preload, finds the same nodes, ports, LIDs, widths and cables.
//!
//! Needs ibsim-utils, libumad2sim0 and infiniband-diags; fails (never
//! skips) when one is missing. [`Ibsim`] is a small launcher local to this
//! file: ibsim without a console (`-n`) on its own socket name, stopped
//! when dropped.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rdmakit_fabric::ibnetdiscover::{self, WriteOptions};
use rdmakit_fabric::{compare, Expected, Node, Subnet};
use rdmakit_testkit::fixture_bytes;

const IBSIM: &str = "/usr/bin/ibsim";
const PRELOAD: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";
const IBNETDISCOVER: &str = "/usr/sbin/ibnetdiscover";

/// One ibsim process on a unique socket name, in its own directory.
struct Ibsim {
    child: Child,
    dir: tempfile::TempDir,
    sock: String,
}

impl Ibsim {
    /// Starts ibsim on `net` and waits (10 s at most) until it is ready.
    fn start(net: &str) -> Ibsim {
        for (path, package) in [
            (IBSIM, "ibsim-utils"),
            (PRELOAD, "libumad2sim0"),
            (IBNETDISCOVER, "infiniband-diags"),
        ] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: apt-get install {package}"
            );
        }
        static N: AtomicU32 = AtomicU32::new(0);
        let sock = format!(
            "rdmakit-fabric-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let net_path = dir.path().join("topology.net");
        fs::write(&net_path, net).expect("write the net file");
        let log = fs::File::create(dir.path().join("ibsim.log")).expect("log");
        let child = Command::new(IBSIM)
            .args(["-s", "-n"])
            .arg(&net_path)
            .env("IBSIM_SOCKNAME", &sock)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start ibsim");
        let sim = Ibsim { child, dir, sock };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = sim.log();
            if log.contains("Network simulator ready") {
                return sim;
            }
            assert!(Instant::now() < deadline, "ibsim did not start:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = fs::File::open(self.dir.path().join("ibsim.log")) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Runs a diagnostic under the preload, 20 s at most.
    fn run(&self, tool: &str, args: &[&str]) -> Output {
        let out = Command::new("timeout")
            .arg("20")
            .arg(tool)
            .args(args)
            .env("LD_PRELOAD", PRELOAD)
            .env("IBSIM_SOCKNAME", &self.sock)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("run the tool");
        assert!(
            out.status.success(),
            "{tool} failed: {:?}\n{}\nibsim:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        out
    }
}

impl Drop for Ibsim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fixture_text(name: &str) -> String {
    String::from_utf8(fixture_bytes(&format!("fabric/{name}"))).expect("UTF-8 fixture")
}

/// The nodes by GUID: the order and the origin depend on where the
/// discovery started (ibsim attaches to the file's first node).
fn by_guid(s: &Subnet) -> Vec<Node> {
    let mut v = s.nodes().to_vec();
    v.sort_by_key(|n| n.guid);
    v
}

#[test]
fn ibsim_builds_the_fabric_the_writer_printed() {
    let capture = ibnetdiscover::parse(&fixture_text("ibnetdiscover.txt")).unwrap();
    let written = ibnetdiscover::write(&capture, &WriteOptions::default());
    let sim = Ibsim::start(&written);
    let out = sim.run(IBNETDISCOVER, &[]);
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let again = ibnetdiscover::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // ibsim takes the GUIDs, descriptions, port counts, LIDs (no SM runs
    // here, so they are the file's) and widths from the written file.
    assert_eq!(by_guid(&again), by_guid(&capture));
    assert_eq!(compare(&Expected::from_subnet(&capture), &again), []);
    // The clients attach to the first node written: the first switch.
    let first = capture.nodes().iter().find(|n| n.port0.is_some()).unwrap();
    assert_eq!(again.origin().map(|o| o.node_guid), Some(first.guid));
}
