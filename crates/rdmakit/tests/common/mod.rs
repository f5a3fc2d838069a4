//! What the binary's end-to-end tests share: running `rdmakit` hermetically and
//! finding the repository's fixtures. Each test binary uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// Variables of the caller's environment that would change what rdmakit does
/// (device, provider, fleet token, Slurm): every test starts without them and
/// sets what it means to test.
const AMBIENT: &[&str] = &[
    "RDMAKIT_SOFT_NAME",
    "RDMAKIT_SOFT_ADDR",
    "RDMAKIT_PROVIDER",
    "RDMAKIT_IBVERBS_LIB",
    "RDMAKIT_FLEET_TOKEN",
    "SLURM_CONF",
];

/// The rdmakit binary under test, without colors and without the caller's
/// [`AMBIENT`] variables.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rdmakit"));
    c.env("NO_COLOR", "1");
    for v in AMBIENT {
        c.env_remove(v);
    }
    c
}

/// Runs `rdmakit ARGS` to completion.
pub fn rdmakit(args: &[&str]) -> Output {
    bin().args(args).output().expect("rdmakit runs")
}

/// Runs `rdmakit ARGS` with extra environment variables.
pub fn rdmakit_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = bin();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("rdmakit runs")
}

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The repository's fixtures/ (real captures, each with its SOURCE note).
pub fn fixtures() -> PathBuf {
    repo().join("fixtures")
}

/// The path of `fixtures/NAME`, which must exist: a missing fixture fails the
/// test instead of letting it pass on nothing.
pub fn fixture(name: &str) -> String {
    let p = fixtures().join(name);
    assert!(
        p.exists(),
        "fixture {} is missing (fixtures/ is part of the repository)",
        p.display()
    );
    p.display().to_string()
}

/// Bytes as text (lossy).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A TCP port on loopback that nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}
