//! The Ethernet probes on the running kernel: a veth pair in a network
//! namespace the test creates (`ip netns`, deleted with its interfaces when
//! the test ends), asked from a thread moved into that namespace, so nothing
//! of the host's own network is touched.
//!
//! Needs root (creating a namespace). As another user it skips, saying so,
//! unless `RDMAKIT_REQUIRE_NETNS` is set; without `ip` (iproute2) it fails.

use std::fs::File;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use rdmakit_host::ethernet::{live, EthQuery};
use rdmakit_host::source::{Errno, LiveSource, Probe, Source};

/// A network namespace holding the veth pair `rkv0` / `rkv1`, both up;
/// deleted on drop.
struct Netns {
    name: String,
}

fn ip(args: &[&str]) -> String {
    let o = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("ip (apt-get install iproute2) cannot run: {e}"));
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

impl Netns {
    /// The namespace, or None (skipped, saying so) when this is not root.
    fn new() -> Option<Netns> {
        // Fails loudly, root or not, when `ip` is missing.
        ip(&["-V"]);
        if !rustix::process::geteuid().is_root() {
            assert!(
                std::env::var_os("RDMAKIT_REQUIRE_NETNS").is_none(),
                "creating a network namespace needs root; RDMAKIT_REQUIRE_NETNS is set"
            );
            eprintln!("SKIP: creating a network namespace needs root");
            return None;
        }
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "rdmakit-eth-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        let n = ns.name.as_str();
        ip(&[
            "-n", n, "link", "add", "rkv0", "type", "veth", "peer", "name", "rkv1",
        ]);
        ip(&["-n", n, "link", "set", "rkv0", "up"]);
        ip(&["-n", n, "link", "set", "rkv1", "up"]);
        Some(ns)
    }

    /// `f` on a thread inside the namespace.
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::scope(|s| {
            s.spawn(|| {
                let fd = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
                rustix::thread::move_into_link_name_space(
                    fd.as_fd(),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .expect("setns into the test's namespace");
                f()
            })
            .join()
            .expect("the thread in the namespace panicked")
        })
    }

    /// The ifindex of `dev` inside the namespace.
    fn ifindex(&self, dev: &str) -> u64 {
        let out = ip(&["-n", &self.name, "-o", "link", "show", dev]);
        out.split(':')
            .next()
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no ifindex in {out:?}"))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .stdin(Stdio::null())
            .output();
    }
}

/// The statistics of a veth are `ethtool -S` text with veth's own names;
/// `peer_ifindex` is the other end's index.
#[test]
fn veth_stats_are_ethtool_s_text_with_peer_ifindex() {
    let Some(ns) = Netns::new() else { return };
    let peer = ns.ifindex("rkv1");
    let (direct, probed) = ns.run(|| {
        (
            live::answer(&EthQuery::Stats("rkv0".into())),
            LiveSource::host().probe(&Probe::Ethernet(EthQuery::Stats("rkv0".into()))),
        )
    });
    let text = String::from_utf8(direct.expect("veth statistics")).unwrap();
    eprintln!("{text}");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("NIC statistics:"));
    let mut names = Vec::new();
    for l in lines {
        let (name, value) = l
            .strip_prefix("     ")
            .and_then(|l| l.rsplit_once(": "))
            .unwrap_or_else(|| panic!("not an ethtool -S line: {l:?}"));
        let value: u64 = value.parse().unwrap_or_else(|_| panic!("{l:?}"));
        if name == "peer_ifindex" {
            assert_eq!(value, peer, "{l:?}");
        }
        names.push(name.to_string());
    }
    assert!(names.iter().any(|n| n == "peer_ifindex"), "{names:?}");
    assert!(
        names.iter().any(|n| n.starts_with("rx_queue_0_")),
        "{names:?}"
    );
    // Through LiveSource, the same answer (the values may have moved on).
    let probed = String::from_utf8(probed.expect("through the source")).unwrap();
    assert_eq!(probed.lines().count(), text.lines().count());
    assert!(probed.contains(&format!("     peer_ifindex: {peer}\n")));
}

/// The answer is byte for byte what `ethtool -S` prints (scripts/test
/// installs ethtool; without it this fails, naming the package).
/// Nothing sends on the pair, so the counters stand still between the two.
#[test]
fn veth_stats_are_byte_for_byte_ethtools() {
    let have = ["/usr/sbin/ethtool", "/sbin/ethtool", "/usr/bin/ethtool"]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
    assert!(
        have,
        "ethtool is not installed: apt-get install ethtool (scripts/test does)"
    );
    let Some(ns) = Netns::new() else { return };
    let ours = ns.run(|| live::answer(&EthQuery::Stats("rkv1".into())));
    let theirs = ip(&["netns", "exec", &ns.name, "ethtool", "-S", "rkv1"]);
    assert_eq!(String::from_utf8(ours.unwrap()).unwrap(), theirs);
}

/// veth has no pause, FEC, module or DCB operations: each is an errno, and
/// on this kernel (6.x) every one is EOPNOTSUPP (ethtool: "Operation not
/// supported"; dcb: the same from RTM_GETDCB), which the capture format
/// records as "not applicable".
#[test]
fn veth_pause_fec_module_dcb_are_eopnotsupp() {
    let Some(ns) = Netns::new() else { return };
    let answers = ns.run(|| {
        EthQuery::all("rkv1")
            .into_iter()
            .filter(|q| !matches!(q, EthQuery::Stats(_)))
            .map(|q| (q.clone(), live::answer(&q)))
            .collect::<Vec<_>>()
    });
    assert_eq!(answers.len(), 4);
    for (q, a) in answers {
        assert_eq!(a, Err(Errno::EOPNOTSUPP), "{q:?}");
    }
}

/// The namespace's interfaces are not the host's: asked from the test's
/// own thread, the same name is no netdev.
#[test]
fn the_answer_comes_from_the_calling_threads_namespace() {
    let Some(ns) = Netns::new() else { return };
    let inside = ns.run(|| live::answer(&EthQuery::Stats("rkv0".into())));
    assert!(inside.is_ok(), "{inside:?}");
    if !std::path::Path::new("/sys/class/net/rkv0").exists() {
        for q in EthQuery::all("rkv0") {
            assert_eq!(live::answer(&q), Err(Errno::ENODEV), "{q:?}");
        }
    }
}
