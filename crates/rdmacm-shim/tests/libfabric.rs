//! libfabric's verbs provider on the default soft0, unmodified and without
//! an environment variable (issue 20 item 7): `fi_info -p verbs` lists MSG,
//! DGRAM and both RDM endpoints (ofi_rxm over MSG, ofi_rxd over DGRAM), and
//! `fi_pingpong -p verbs` runs `-e msg` and `-e rdm` between two processes
//! of this host, every byte checked (`-c`).
//!
//! libfabric 1.17 offers FI_EP_MSG only on a device that one of the host's
//! non-loopback interface addresses resolves to through rdma_cm
//! (prov/verbs/src/verbs_info.c, `vrb_getifaddrs`). The default soft0 is
//! bound to the host's first non-loopback interface and has its address,
//! as rxe bound to eth0 has eth0's (`rdmakit_soft::net::host_device_addr`),
//! so it is found as rxe is. On a host (namespace) whose only interface is
//! `lo` soft0 falls back to 127.0.0.1 and libfabric offers no MSG
//! endpoint; tests/netns.rs shows that case.
//!
//! ofi_rxm opens a 262,144-entry MSG CQ (its rx size times a universe of
//! 256 peers): soft0's max_cqe is mlx5's 4,194,303 (entries are allocated
//! as completions arrive), where rxe's 32,767 makes `fi_enable` fail.

mod common;

use std::time::Duration;

use common::{
    assert_verbs_endpoints, command, fi_info_blocks, free_port, have, serial, text, wait,
};

const LIMIT: Duration = Duration::from_secs(90);

/// The host has an address soft0 can be bound to (else these tests are
/// about the 127.0.0.1 fallback, which tests/netns.rs covers).
fn host_addr() -> Option<std::net::Ipv4Addr> {
    let a = rdmakit_soft::net::host_device_addr();
    if a.is_loopback() {
        assert!(
            std::env::var_os("RDMAKIT_REQUIRE_NETNS").is_none(),
            "this host has no non-loopback IPv4 address for soft0"
        );
        eprintln!("SKIP: no non-loopback IPv4 address on this host (soft0 is on 127.0.0.1)");
        return None;
    }
    Some(a)
}

#[test]
fn fi_info_lists_msg_dgram_and_both_rdm_endpoints_of_the_default_soft0() {
    if !have("fi_info", "libfabric-bin") {
        return;
    }
    let Some(addr) = host_addr() else { return };
    let t = rdmakit_testkit::run_ok(command("fi_info", &["-p", "verbs"]), LIMIT, "fi_info");
    assert_verbs_endpoints(&t);
    // What libfabric found soft0 through: the host's interface address.
    let o = wait(
        command("fi_info", &["-p", "verbs", "-t", "FI_EP_MSG"])
            .env("FI_LOG_LEVEL", "info")
            .spawn()
            .unwrap(),
        LIMIT,
        "fi_info -t FI_EP_MSG",
    );
    let t = text(&o);
    assert!(
        t.contains("#1 soft0 - IPoIB addresses:") && t.contains(&format!("\t{addr}\n")),
        "libfabric did not resolve {addr} to soft0:\n{t}"
    );
}

/// `fi_pingpong args` server and client (to `dst`), 100 iterations of
/// `size` bytes with data checks; both must exit 0 with every message
/// acknowledged. Returns the client's output.
fn pingpong(args: &[&str], size: &str, dst: &str) -> String {
    let port = free_port();
    let ps = port.to_string();
    let mut sargs = args.to_vec();
    sargs.extend_from_slice(&["-I", "100", "-c", "-S", size, "-B", &ps]);
    let mut cargs = args.to_vec();
    cargs.extend_from_slice(&["-I", "100", "-c", "-S", size, "-P", &ps, dst]);
    rdmakit_testkit::fi_pingpong(
        command("fi_pingpong", &sargs),
        command("fi_pingpong", &cargs),
        port,
        100,
        LIMIT,
        &format!("fi_pingpong {args:?} {size} bytes to {dst}"),
    )
}

#[test]
fn fi_pingpong_verbs_msg_on_the_default_soft0() {
    if !have("fi_pingpong", "libfabric-bin") {
        return;
    }
    let Some(addr) = host_addr() else { return };
    let _g = serial();
    let addr = addr.to_string();
    // To the host's address (soft0's), and to 127.0.0.1, which the
    // kernel's rdma_cm binds to the first active device too.
    for (size, dst) in [("1", addr.as_str()), ("65536", "127.0.0.1")] {
        pingpong(&["-p", "verbs", "-e", "msg"], size, dst);
    }
}

#[test]
fn fi_pingpong_verbs_rdm_over_rxm_and_rxd_on_the_default_soft0() {
    if !have("fi_pingpong", "libfabric-bin") {
        return;
    }
    if host_addr().is_none() {
        return;
    }
    let _g = serial();
    // `-p verbs` picks ofi_rxm (RDM over MSG, the first RDM endpoint
    // listed); rxd (over DGRAM) named explicitly.
    for prov in ["verbs", "verbs;ofi_rxd"] {
        for size in ["1", "65536"] {
            pingpong(&["-p", prov, "-e", "rdm"], size, "127.0.0.1");
        }
    }
    // The provider `-p verbs -e rdm` runs is ofi_rxm: its CQ of 262,144
    // entries is created (rxe's max_cqe of 32,767 refused it).
    let o = wait(
        command("fi_info", &["-p", "verbs", "-t", "FI_EP_RDM"])
            .spawn()
            .unwrap(),
        LIMIT,
        "fi_info -t FI_EP_RDM",
    );
    let t = text(&o);
    assert!(
        fi_info_blocks(&t)
            .first()
            .is_some_and(|b| b.starts_with("verbs;ofi_rxm\n")),
        "{t}"
    );
}
