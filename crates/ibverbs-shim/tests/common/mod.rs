//! Running Debian's unmodified rdma-core tools and perftest on the shim.
//!
//! The tools come from Debian's `ibverbs-utils` and `perftest` packages
//! (scripts/test installs them). Without them a test skips, saying so,
//! unless `RDMAKIT_REQUIRE_IBVERBS_TOOLS=1` (scripts/test sets it) turns that
//! into a failure.

#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

pub use rdmakit_testkit::{serial, text, wait};

/// A directory holding libibverbs.so.1 and the libmlx5.so.1 / libefa.so.1
/// links to it, as `rdmakit shim install` lays it out.
pub fn shim_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        rdmakit_testkit::install_libs("shim-test-lib", &[("libibverbs.so", "libibverbs.so.1")])
    })
}

/// True when `tool` is installed; otherwise skips (or fails when required).
pub fn have(tool: &str) -> bool {
    rdmakit_testkit::have(
        tool,
        "ibverbs-utils perftest",
        "RDMAKIT_REQUIRE_IBVERBS_TOOLS",
    )
}

pub fn command(tool: &str, args: &[&str]) -> Command {
    let mut c = Command::new(tool);
    c.args(args)
        .env("LD_LIBRARY_PATH", shim_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs `tool args` alone.
pub fn run(tool: &str, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = command(tool, args);
    c.envs(envs.iter().copied());
    wait(c.spawn().unwrap(), Duration::from_secs(60), tool)
}

/// A server/client pair: the server with `args`, the client with `args`
/// plus 127.0.0.1. Returns (server, client) output. The server listens on
/// TCP before it creates anything; a client that comes too early retries
/// (pingpong) or fails to connect (perftest), hence the head start.
pub fn pair(tool: &str, args: &[&str], envs: &[(&str, &str)], limit: Duration) -> (Output, Output) {
    let mut s = command(tool, args);
    s.envs(envs.iter().copied());
    let mut cargs: Vec<&str> = args.to_vec();
    cargs.push("127.0.0.1");
    let mut c = command(tool, &cargs);
    c.envs(envs.iter().copied());
    rdmakit_testkit::pair(s, c, Duration::from_millis(700), limit, tool)
}

/// Asserts both sides exited 0 and returns the client's output.
pub fn both_ok(what: &str, pair: &(Output, Output)) -> String {
    rdmakit_testkit::both_ok(what, pair).1
}

/// A TCP port of its own for each pair (tests in one binary run in threads).
pub fn port(n: u16) -> String {
    (19000 + n).to_string()
}

/// `program` (C, against Debian's verbs.h) compiled and linked to the
/// shim's libibverbs.so.1; None (a skip) without libibverbs-dev unless
/// `RDMAKIT_REQUIRE_IBVERBS_DEV` makes that a failure. Keep the directory
/// alive while the binary runs.
pub fn verbs_program(
    program: &str,
    name: &str,
    flags: &[&str],
) -> Option<(tempfile::TempDir, PathBuf)> {
    if !rdmakit_testkit::have_file(
        "/usr/include/infiniband/verbs.h",
        "libibverbs-dev",
        "RDMAKIT_REQUIRE_IBVERBS_DEV",
    ) {
        return None;
    }
    Some(rdmakit_testkit::compile_c_text(
        program,
        name,
        flags,
        &[&format!("-L{}", shim_dir().display()), "-l:libibverbs.so.1"],
    ))
}
