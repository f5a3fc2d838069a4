//! libfabric's verbs MSG endpoints on a soft NIC that sits on a real
//! interface's address (issue 20 item 7).
//!
//! libfabric 1.17's verbs provider offers FI_EP_MSG only on devices that
//! one of the host's interface addresses resolves to through rdma_cm, and
//! it skips every interface flagged IFF_LOOPBACK (prov/verbs/src/
//! verbs_info.c, vrb_getifaddrs). The default soft0 lives on 127.0.0.1, so
//! `fi_info -p verbs` lists no MSG endpoint there, as it lists none for a
//! device without an IP interface. Configured with the address of a veth
//! interface (`RDMAKIT_SOFT_ADDR`, the soft NIC's netdev address, as
//! `rdma link add ... netdev` is for rxe), soft0 gets them.
//!
//! The interface lives in a network namespace the test creates and deletes
//! (`ip netns`, root only); without root the test skips, saying so, unless
//! `RDMAKIT_REQUIRE_NETNS=1` turns that into a failure.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{have, lib_dir, registry_dir, text, wait};

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
    fn new(addr: &str, peer: &str) -> Result<Netns, String> {
        let name = format!("rdmakit-fimsg-{}", std::process::id());
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        let n = ns.name.as_str();
        ip(&["-n", n, "link", "set", "lo", "up"])?;
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
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, tool])
            .args(args)
            .env("LD_LIBRARY_PATH", lib_dir())
            .env("RDMAKIT_SOFT_REGISTRY_DIR", registry_dir())
            .env("RDMAKIT_SOFT_ADDR", addr)
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

/// The namespace, or None (skipped) when this is not root.
fn netns(addr: &str, peer: &str) -> Option<Netns> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_NETNS").is_none(),
            "creating a network namespace needs root"
        );
        eprintln!("SKIP: creating a network namespace needs root");
        return None;
    }
    Some(Netns::new(addr, peer).unwrap_or_else(|e| panic!("network namespace: {e}")))
}

/// The `provider: ...` blocks of `fi_info` output.
fn blocks(t: &str) -> Vec<&str> {
    t.split("provider: ").skip(1).collect()
}

#[test]
fn fi_info_lists_verbs_msg_endpoints_of_soft0_on_a_veth_address() {
    if !have("fi_info", "libfabric-bin") {
        return;
    }
    let Some(ns) = netns("10.77.0.1", "10.77.0.2") else {
        return;
    };
    let o = wait(
        ns.command("10.77.0.1", "fi_info", &["-p", "verbs"])
            .spawn()
            .unwrap(),
        LIMIT,
        "fi_info",
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for (prov, dom, ty) in [
        ("verbs", "soft0", "FI_EP_MSG"),
        ("verbs", "soft0-dgram", "FI_EP_DGRAM"),
        ("verbs;ofi_rxm", "soft0", "FI_EP_RDM"),
        ("verbs;ofi_rxd", "soft0-dgram", "FI_EP_RDM"),
    ] {
        let hit = blocks(&t).iter().any(|b| {
            b.starts_with(&format!("{prov}\n"))
                && b.contains(&format!("domain: {dom}\n"))
                && b.contains(&format!("type: {ty}\n"))
        });
        assert!(hit, "no {prov} {ty} endpoint on {dom} in\n{t}");
    }

    // The interface address is what libfabric found soft0 through: the
    // MSG endpoint's source address when asked for one.
    let o = wait(
        ns.command("10.77.0.1", "fi_info", &["-p", "verbs", "-e", "msg", "-v"])
            .env("FI_LOG_LEVEL", "info")
            .spawn()
            .unwrap(),
        LIMIT,
        "fi_info -v",
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("#1 soft0 - IPoIB addresses:") && t.contains("\t10.77.0.1\n"),
        "libfabric did not resolve 10.77.0.1 to soft0:\n{t}"
    );
}

#[test]
fn on_loopback_soft0_has_no_msg_endpoints_because_libfabric_skips_lo() {
    // The other half of the explanation above, so that a change in either
    // (libfabric accepting lo, or soft0 gaining an interface) shows here.
    if !have("fi_info", "libfabric-bin") {
        return;
    }
    let o = wait(
        common::command("fi_info", &["-p", "verbs"])
            .env("FI_LOG_LEVEL", "info")
            .spawn()
            .unwrap(),
        LIMIT,
        "fi_info",
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("skipping device: soft0 for FI_EP_MSG"),
        "libfabric's reason for no MSG endpoint changed:\n{t}"
    );
    assert!(
        !blocks(&t)
            .iter()
            .any(|b| b.starts_with("verbs\n") && b.contains("type: FI_EP_MSG\n")),
        "{t}"
    );
}
