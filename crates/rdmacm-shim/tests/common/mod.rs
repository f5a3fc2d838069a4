//! Running unmodified rdma_cm programs on rdmakit's librdmacm.so.1 and
//! libibverbs.so.1.
//!
//! The programs come from Debian packages (rdmacm-utils, qperf,
//! libfabric-bin; scripts/test installs them). Without one a test skips,
//! saying so, unless `RDMAKIT_REQUIRE_RDMACM_TOOLS=1` (scripts/test sets it)
//! turns that into a failure.
//!
//! Every test binary gets its own soft NIC registry directory, so the
//! rdma_cm port table its programs share is theirs alone (two test runs at
//! once never see each other's listeners).

#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{MutexGuard, OnceLock};
use std::time::Duration;

pub use rdmakit_testkit::{await_listen, both_ok, free_port, listening, serial, tail, text, wait};

/// A directory laid out as `rdmakit shim install` does: libibverbs.so.1,
/// librdmacm.so.1, and libmlx5.so.1 / libefa.so.1 links.
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        rdmakit_testkit::install_libs(
            "rdmacm-test-lib",
            &[
                ("libibverbs.so", "libibverbs.so.1"),
                ("librdmacm.so", "librdmacm.so.1"),
            ],
        )
    })
}

/// This test binary's soft NIC registry (and rdma_cm port table).
pub fn registry_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// True when `tool` is installed; otherwise skips (or fails when required).
pub fn have(tool: &str, package: &str) -> bool {
    rdmakit_testkit::have(tool, package, "RDMAKIT_REQUIRE_RDMACM_TOOLS")
}

/// When `tool` is installed, the [`serial`] lock to run it under; otherwise
/// `None`, and the test skips (or fails when required) as with [`have`].
pub fn have_serial(tool: &str, package: &str) -> Option<MutexGuard<'static, ()>> {
    have(tool, package).then(serial)
}

pub fn command(tool: &str, args: &[&str]) -> Command {
    let mut c = Command::new(tool);
    c.args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("RDMAKIT_SOFT_REGISTRY_DIR", registry_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs a server, then (once it had time to listen) a client, and waits
/// for both. Returns (server, client).
pub fn pair(server: &[&str], client: &[&str], limit: Duration) -> (Output, Output) {
    rdmakit_testkit::pair(
        command(server[0], &server[1..]),
        command(client[0], &client[1..]),
        Duration::from_millis(500),
        limit,
        server[0],
    )
}

/// Asserts `fi_info -p verbs` output `t` lists soft0's endpoints: MSG,
/// DGRAM (on `soft0-dgram`), RDM over ofi_rxm and RDM over ofi_rxd.
pub fn assert_verbs_endpoints(t: &str) {
    let blocks = fi_info_blocks(t);
    for (prov, dom, ty) in [
        ("verbs", "soft0", "FI_EP_MSG"),
        ("verbs", "soft0-dgram", "FI_EP_DGRAM"),
        ("verbs;ofi_rxm", "soft0", "FI_EP_RDM"),
        ("verbs;ofi_rxd", "soft0-dgram", "FI_EP_RDM"),
    ] {
        let hit = blocks.iter().any(|b| {
            b.starts_with(&format!("{prov}\n"))
                && b.contains(&format!("domain: {dom}\n"))
                && b.contains(&format!("type: {ty}\n"))
        });
        assert!(hit, "no {prov} {ty} endpoint on {dom} in\n{t}");
    }
}

/// The `provider: ...` blocks of `fi_info` output.
pub fn fi_info_blocks(t: &str) -> Vec<&str> {
    t.split("provider: ").skip(1).collect()
}
