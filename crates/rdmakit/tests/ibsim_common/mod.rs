//! What the tests on a simulated InfiniBand fabric share: the test tree
//! (2 spines, 4 leaves, 16 hosts) and rdmakit run under the umad2sim
//! preload of a `rdmakit_testkit::ibsim::Fabric`, bounded in time.

#![allow(dead_code)]

use std::process::{Output, Stdio};
use std::time::Duration;

use rdmakit_testkit::ibsim::Fabric;
use rdmakit_types::{Speed, Width};

/// How long one rdmakit run may take on the test tree.
pub const LIMIT: Duration = Duration::from_secs(30);

/// The test tree, in ibsim's net format.
pub fn tree() -> String {
    rdmakit_fabric::fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).expect("the test tree")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `rdmakit ARGS` under the fabric's preload (no colour, 100 columns).
pub fn rdmakit(fab: &Fabric, args: &[&str]) -> Output {
    let child = fab
        .command(env!("CARGO_BIN_EXE_rdmakit"))
        .args(args)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rdmakit");
    rdmakit_testkit::wait(child, LIMIT, &format!("rdmakit {args:?}"))
}

/// `rdmakit ARGS`, which must exit with `code`; its stdout.
pub fn rdmakit_ok(fab: &Fabric, args: &[&str], code: i32) -> String {
    let o = rdmakit(fab, args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "rdmakit {args:?}\nstdout:\n{}\nstderr:\n{}\n{}",
        text(&o.stdout),
        text(&o.stderr),
        fab.logs()
    );
    text(&o.stdout)
}
