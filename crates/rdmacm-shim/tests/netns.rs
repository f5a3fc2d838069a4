//! libfabric's verbs MSG endpoints on a soft NIC that sits on a real
//! interface's address (issue 20 item 7).
//!
//! libfabric 1.17's verbs provider offers FI_EP_MSG only on devices that
//! one of the host's interface addresses resolves to through rdma_cm, and
//! it skips every interface flagged IFF_LOOPBACK (prov/verbs/src/
//! verbs_info.c, vrb_getifaddrs). The default soft0 is bound to the host's
//! first non-loopback interface and has its address (tests/libfabric.rs
//! runs libfabric on it); in a namespace whose only interface is `lo` it
//! falls back to 127.0.0.1, and `fi_info -p verbs` lists no MSG endpoint
//! there, as it lists none for a device without an IP interface.
//! Configured with the address of a veth interface (`RDMAKIT_SOFT_ADDR`,
//! the soft NIC's netdev address, as `rdma link add ... netdev` is for
//! rxe), soft0 gets them, and two processes with two such soft0s talk.
//!
//! The interfaces live in network namespaces the test creates and deletes
//! (`ip netns`, root only); without root the test skips, saying so, unless
//! `RDMAKIT_REQUIRE_NETNS=1` turns that into a failure.

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{
    assert_verbs_endpoints, fi_info_blocks, have, have_serial, lib_dir, registry_dir, text, wait,
};

const LIMIT: Duration = Duration::from_secs(60);

/// A network namespace with a veth pair whose first end has `addr`/24;
/// deleted (with its interfaces) on drop.
struct Netns {
    name: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

impl Netns {
    /// A namespace whose only interface is `lo` (up).
    fn lo_only() -> Result<Netns, String> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "rdmakit-fimsg-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    fn new(addr: &str, peer: &str) -> Result<Netns, String> {
        let ns = Netns::lo_only()?;
        let n = ns.name.as_str();
        ip(&[
            "-n", n, "link", "add", "rk0", "type", "veth", "peer", "name", "rk1",
        ])?;
        ip(&["-n", n, "addr", "add", &format!("{addr}/24"), "dev", "rk0"])?;
        ip(&["-n", n, "addr", "add", &format!("{peer}/24"), "dev", "rk1"])?;
        ip(&["-n", n, "link", "set", "rk0", "up"])?;
        ip(&["-n", n, "link", "set", "rk1", "up"])?;
        Ok(ns)
    }

    /// `tool args` inside the namespace on the drop-in stack, soft0 on `addr`.
    fn command(&self, addr: &str, tool: &str, args: &[&str]) -> Command {
        let mut c = self.default_command(tool, args);
        c.env("RDMAKIT_SOFT_ADDR", addr);
        c
    }

    /// `tool args` inside the namespace on the drop-in stack, soft0 as it
    /// comes (no address configured).
    fn default_command(&self, tool: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, tool])
            .args(args)
            .env("LD_LIBRARY_PATH", lib_dir())
            .env("RDMAKIT_SOFT_REGISTRY_DIR", registry_dir())
            .env_remove("RDMAKIT_SOFT_ADDR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// True when this may create namespaces (root); otherwise skips, saying
/// so, or fails when required.
fn may_create() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_NETNS").is_none(),
            "creating a network namespace needs root"
        );
        eprintln!("SKIP: creating a network namespace needs root");
    }
    root
}

/// The namespace, or None (skipped) when this is not root.
fn netns(addr: &str, peer: &str) -> Option<Netns> {
    may_create()
        .then(|| Netns::new(addr, peer).unwrap_or_else(|e| panic!("network namespace: {e}")))
}

#[test]
fn fi_info_lists_verbs_msg_endpoints_of_soft0_on_a_veth_address() {
    if !have("fi_info", "libfabric-bin") {
        return;
    }
    let Some(ns) = netns("10.77.0.1", "10.77.0.2") else {
        return;
    };
    let t = rdmakit_testkit::run_ok(
        ns.command("10.77.0.1", "fi_info", &["-p", "verbs"]),
        LIMIT,
        "fi_info",
    );
    assert_verbs_endpoints(&t);

    // The interface address is what libfabric found soft0 through: the
    // MSG endpoint's source address when asked for one.
    let t = rdmakit_testkit::run_ok(
        ns.command(
            "10.77.0.1",
            "fi_info",
            &["-p", "verbs", "-t", "FI_EP_MSG", "-v"],
        )
        .env("FI_LOG_LEVEL", "info"),
        LIMIT,
        "fi_info -t FI_EP_MSG -v",
    );
    assert!(
        t.contains("#1 soft0 - IPoIB addresses:") && t.contains("\t10.77.0.1\n"),
        "libfabric did not resolve 10.77.0.1 to soft0:\n{t}"
    );
}

#[test]
fn on_a_host_with_only_lo_soft0_is_on_127_0_0_1_and_has_no_msg_endpoints() {
    // The other half of the explanation above, so that a change in either
    // (libfabric accepting lo, or soft0 choosing its address otherwise)
    // shows here. No address configured: soft0 as it comes.
    if !have("fi_info", "libfabric-bin") || !may_create() {
        return;
    }
    let ns = Netns::lo_only().unwrap_or_else(|e| panic!("network namespace: {e}"));
    let o = wait(
        ns.default_command("ibv_devinfo", &["-v"]).spawn().unwrap(),
        LIMIT,
        "ibv_devinfo",
    );
    let t = text(&o);
    assert!(
        o.status.success() && t.contains("::ffff:127.0.0.1"),
        "soft0 is not on 127.0.0.1 without another interface:\n{t}"
    );
    let t = rdmakit_testkit::run_ok(
        ns.default_command("fi_info", &["-p", "verbs"])
            .env("FI_LOG_LEVEL", "info"),
        LIMIT,
        "fi_info",
    );
    assert!(
        t.contains("skipping device: soft0 for FI_EP_MSG"),
        "libfabric's reason for no MSG endpoint changed:\n{t}"
    );
    assert!(
        !fi_info_blocks(&t)
            .iter()
            .any(|b| b.starts_with("verbs\n") && b.contains("type: FI_EP_MSG\n")),
        "{t}"
    );
    // DGRAM stays: it needs no IP interface.
    assert!(
        fi_info_blocks(&t)
            .iter()
            .any(|b| b.starts_with("verbs\n") && b.contains("type: FI_EP_DGRAM\n")),
        "{t}"
    );
}

#[test]
fn by_default_soft0_takes_the_first_non_loopback_address_of_its_namespace() {
    // As rxe bound to the netdev: no RDMAKIT_SOFT_ADDR, a namespace with a
    // veth pair up; soft0's GID is the first interface address `ip`
    // lists after lo's (interface-index order), in every process.
    if !have("ibv_devinfo", "ibverbs-utils") {
        return;
    }
    let Some(ns) = netns("10.77.0.1", "10.77.0.2") else {
        return;
    };
    let o = Command::new("ip")
        .args(["-n", &ns.name, "-o", "-4", "addr", "show", "up"])
        .output()
        .unwrap();
    let first = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter_map(|a| a.split('/').next())
        .find(|a| !a.starts_with("127."))
        .unwrap_or_else(|| panic!("no veth address in {o:?}"))
        .to_string();
    for _ in 0..2 {
        let o = wait(
            ns.default_command("ibv_devinfo", &["-v"]).spawn().unwrap(),
            LIMIT,
            "ibv_devinfo",
        );
        let t = text(&o);
        let gid = t
            .lines()
            .find(|l| l.contains("GID[  0]:"))
            .unwrap_or_else(|| panic!("no GID[0] in\n{t}"));
        assert!(
            gid.contains(&format!("::ffff:{first}")),
            "{gid} (want {first})"
        );
    }
}

#[test]
fn fi_pingpong_verbs_msg_between_two_soft_nics_on_one_host() {
    // Two processes on one host, each with soft0 on an address of its own
    // (10.77.0.1 and 10.77.0.2, the two ends of a veth pair), as two RoCE
    // devices on one host are. The server binds "localhost" (libfabric's
    // local_node) and so advertises 127.0.0.1:port as its name; the
    // client's connection to it reaches the server's soft0 through the
    // rdma_cm port table, and its QP is addressed with the GID of the
    // device that owns the port (not the client's own). -c checks every
    // byte received.
    let Some(_g) = have_serial("fi_pingpong", "libfabric-bin") else {
        return;
    };
    let Some(ns) = netns("10.77.0.1", "10.77.0.2") else {
        return;
    };
    // The namespace is the test's own: the default control port is free.
    let port = 47592;
    let args = ["-p", "verbs", "-e", "msg", "-I", "100", "-c"];
    for size in ["1", "65536"] {
        let mut sargs = args.to_vec();
        sargs.extend_from_slice(&["-S", size]);
        let mut cargs = sargs.clone();
        cargs.push("10.77.0.1");
        rdmakit_testkit::fi_pingpong(
            ns.command("10.77.0.1", "fi_pingpong", &sargs),
            ns.command("10.77.0.2", "fi_pingpong", &cargs),
            port,
            100,
            LIMIT,
            &format!("fi_pingpong {size} bytes"),
        );
    }
}
