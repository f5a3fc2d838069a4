//! rdma_cm semantics through the public C API: tests/c/cm_semantics.c,
//! built against rdma-core 44's headers (Debian's librdmacm-dev), run on
//! rdmakit's librdmacm.so.1. Each mode checks one group of behaviours the
//! kernel's rdma_cm has (see the C file's header); all run in one process
//! per mode, both ends on the soft NIC.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

const HEADER: &str = "/usr/include/rdma/rdma_cma.h";

/// The program, compiled once; None (skip) without the headers unless
/// RDMAKIT_REQUIRE_RDMACM_DEV is set.
fn program() -> Option<&'static PathBuf> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        if !rdmakit_testkit::have_file(HEADER, "librdmacm-dev", "RDMAKIT_REQUIRE_RDMACM_DEV") {
            return None;
        }
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/cm_semantics.c");
        let bin = common::lib_dir().join("cm_semantics");
        rdmakit_testkit::compile_c(
            &src,
            &bin,
            &["-Wall", "-Werror", "-O1"],
            &["-lrdmacm", "-libverbs", "-lpthread"],
        );
        Some(bin)
    })
    .as_ref()
}

fn run(mode: &str, port: u16) {
    let Some(bin) = program() else { return };
    let _g = common::serial();
    let out = common::wait(
        common::command(bin.to_str().unwrap(), &[mode, &port.to_string()])
            .spawn()
            .unwrap(),
        Duration::from_secs(60),
        mode,
    );
    let text = common::text(&out);
    assert!(
        out.status.success() && text.contains(&format!("ok {mode}")),
        "cm_semantics {mode}: {:?}\n{text}",
        out.status
    );
}

#[test]
fn the_event_fd_polls_readable_exactly_while_events_wait() {
    run("channel", 18501);
}

#[test]
fn address_and_route_resolution_fill_the_id() {
    run("addr", 18511);
}

#[test]
fn bind_resolve_and_connect_errors_are_linuxs() {
    run("errors", 18521);
}

#[test]
fn reject_accept_disconnect_and_timewait_with_private_data() {
    run("connect", 18531);
}

#[test]
fn init_qp_attr_gives_the_connections_qp_attributes() {
    run("qpattr", 18541);
}

#[test]
fn create_ep_and_the_rdma_verbs_helpers_move_data() {
    run("ep", 18551);
}
