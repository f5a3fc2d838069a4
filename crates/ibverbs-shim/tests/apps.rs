//! The programs RDMA users run, unmodified, on the drop-in stack (issue 20):
//! UCX (`ucx_info`, `ucx_perftest` tag_bw / tag_lat over rc_verbs and
//! ud_verbs), qperf (`rc_bw rc_lat ud_lat`), an Open MPI ping-pong over
//! `--mca pml ucx`, libfabric's `fi_info` and `fi_pingpong` (verbs RDM over
//! UD, data checked), each as Debian ships it, two processes on loopback;
//! and the soft NIC's registry after processes are killed mid-transfer.
//! libfabric's MSG endpoints and RDM over ofi_rxm need librdmacm: they run
//! on the drop-in librdmacm.so.1 in crates/rdmacm-shim/tests/libfabric.rs.
//!
//! Setup is what `rdmakit shim install` does: the library directory first on
//! `LD_LIBRARY_PATH`, and (as root) the device node UCX stats. The one
//! variable set is `UCX_TLS`, pure transport selection as one sets it to
//! test any NIC: between two processes of one host UCX otherwise carries
//! the tag traffic over shared memory. Without it `ucx_perftest` (UCX
//! 1.13.1, `UCX_LOG_LEVEL=info`) logs
//! `ep_cfg[0]: tag(sysv/memory cma/memory rc_verbs/soft0:1)`: soft0's
//! rc_verbs is found and used as a lane, but messages go by sysv and cma.
//! `UCX_NET_DEVICES` is not needed (soft0:1 is the only device offering
//! rc_verbs and ud_verbs), and nothing else is set.
//!
//! The tools come from Debian's ucx-utils, qperf, openmpi-bin /
//! libopenmpi-dev, libfabric-bin and perftest (scripts/test installs them).
//! A missing tool, or a device node that cannot be created (not root), fails
//! the test, naming the package: these tests never pass without running the
//! real program.

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

const LIMIT: Duration = Duration::from_secs(180);

/// Fails unless `tool` is installed.
fn need(tool: &str, pkg: &str) {
    let found = ["/usr/bin", "/bin", "/usr/local/bin"]
        .iter()
        .any(|d| Path::new(d).join(tool).exists());
    assert!(
        found,
        "{tool} is missing: apt-get install {pkg} (scripts/test installs it)"
    );
}

/// The device node UCX needs, as `rdmakit shim install` creates it (root).
fn need_node() {
    if let Err(e) = rdmakit_soft::devnode::install("soft0") {
        panic!(
            "cannot create {}: {e} (run the tests as root, as scripts/test does in CI, or \
             `rdmakit shim install` once as root)",
            rdmakit_soft::devnode::path("soft0").display()
        );
    }
}

/// UCX's verbs transports (not shared memory): the transport selection.
fn ucx_env(tls: &str) -> Vec<(&'static str, String)> {
    vec![("UCX_TLS", tls.to_string())]
}

/// A TCP port nothing uses now (fixed ports collide with another run).
fn free_port() -> String {
    rdmakit_testkit::free_port().to_string()
}

/// Waits until `server` listens on `port` for its client: a client that
/// connects too early fails (ucx_perftest, perftest) — a fixed sleep was
/// too short on two busy cores.
fn await_listen(server: Child, port: &str, _what: &str) -> Child {
    rdmakit_testkit::await_listen(server, port.parse().unwrap(), LIMIT)
}

fn cmd(tool: &str, args: &[&str], envs: &[(&str, String)]) -> Command {
    let mut c = command(tool, args);
    for (k, v) in envs {
        c.env(k, v);
    }
    c
}

/// A server/client pair of `tool` (the client gets 127.0.0.1 and `client`
/// appended), the client started once the server listens on `port`; both
/// must exit 0. Returns (server, client) output.
fn ok_pair(
    tool: &str,
    port: &str,
    server: &[&str],
    client: &[&str],
    envs: &[(&str, String)],
) -> (String, String) {
    let s = await_listen(cmd(tool, server, envs).spawn().unwrap(), port, tool);
    let mut cargs: Vec<&str> = vec!["127.0.0.1"];
    cargs.extend_from_slice(client);
    let c = wait(
        cmd(tool, &cargs, envs).spawn().unwrap(),
        LIMIT,
        &format!("{tool} client"),
    );
    let s = wait(s, LIMIT, &format!("{tool} server"));
    assert!(
        s.status.success() && c.status.success(),
        "{tool} {client:?}: server {:?}, client {:?}\n--- server\n{}\n--- client\n{}",
        s.status,
        c.status,
        text(&s),
        text(&c)
    );
    (text(&s), text(&c))
}

#[test]
fn fi_info_loads_and_lists_the_tcp_provider() {
    need("fi_info", "libfabric-bin");
    // Exited 127 on `undefined symbol: efadv_create_cq, version EFA_1.2`.
    let o = wait(
        command("fi_info", &["-p", "tcp"]).spawn().unwrap(),
        LIMIT,
        "fi_info",
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("provider: tcp"), "{}", text(&o));
}

#[test]
fn fi_info_lists_the_verbs_dgram_and_rdm_endpoints_of_soft0() {
    need("fi_info", "libfabric-bin");
    let t = rdmakit_testkit::run_ok(command("fi_info", &["-p", "verbs"]), LIMIT, "fi_info");
    // Without the drop-in librdmacm (Debian's finds no kernel rdma_cm)
    // there are no MSG endpoints; tests/libfabric.rs of rdmacm-shim has
    // them.
    for (prov, ty) in [("verbs", "FI_EP_DGRAM"), ("verbs;ofi_rxd", "FI_EP_RDM")] {
        let hit = t.split("provider: ").any(|b| {
            b.starts_with(&format!("{prov}\n"))
                && b.contains("domain: soft0-dgram")
                && b.contains(&format!("type: {ty}"))
        });
        assert!(hit, "no {prov} {ty} endpoint on soft0 in\n{t}");
    }
}

#[test]
fn fi_pingpong_verbs_rdm_with_data_checks() {
    need("fi_pingpong", "libfabric-bin");
    let _g = serial();
    // The server binds its control port with -B, the client names it
    // with -P; -c checks every byte received.
    let args = ["-p", "verbs", "-e", "rdm", "-I", "100", "-c"];
    // 1 byte, and 64 KiB: sixteen 4 KiB UD datagrams rxd reassembles.
    for size in ["1", "65536"] {
        fi_pingpong_pair(&args, size, &free_port());
    }
}

fn fi_pingpong_pair(args: &[&str], size: &str, port: &str) {
    let mut server = args.to_vec();
    server.extend_from_slice(&["-S", size, "-B", port]);
    let mut client = args.to_vec();
    client.extend_from_slice(&["-S", size, "-P", port, "127.0.0.1"]);
    rdmakit_testkit::fi_pingpong(
        command("fi_pingpong", &server),
        command("fi_pingpong", &client),
        port.parse().unwrap(),
        100,
        LIMIT,
        &format!("fi_pingpong {args:?} {size} bytes"),
    );
}

#[test]
fn ucx_info_lists_soft0_rc_verbs_and_ud_verbs() {
    need("ucx_info", "ucx-utils");
    need_node();
    let t = rdmakit_testkit::run_ok(command("ucx_info", &["-d"]), LIMIT, "ucx_info");
    assert!(t.contains("# Memory domain: soft0"), "{t}");
    for tl in ["rc_verbs", "ud_verbs"] {
        let block = t
            .split("#      Transport: ")
            .find(|b| b.starts_with(tl) && b.contains("Device: soft0:1"));
        assert!(block.is_some(), "no {tl} on soft0:1 in\n{t}");
    }
}

/// `Final:` row of ucx_perftest: iterations, then latency and bandwidth.
fn final_row(out: &str) -> Vec<f64> {
    out.lines()
        .find(|l| l.trim_start().starts_with("Final:"))
        .unwrap_or_else(|| panic!("no Final: row in\n{out}"))
        .split_whitespace()
        .skip(1)
        .filter_map(|w| w.parse().ok())
        .collect()
}

#[test]
fn ucx_perftest_tag_bw_and_tag_lat_over_rc_verbs_and_ud_verbs() {
    need("ucx_perftest", "ucx-utils");
    need_node();
    let _g = serial();
    for (tls, test, size, iters) in [
        ("rc_verbs,ud_verbs", "tag_lat", "8", "2000"),
        ("rc_verbs,ud_verbs", "tag_bw", "65536", "500"),
        ("ud_verbs", "tag_lat", "8", "2000"),
        ("ud_verbs", "tag_bw", "65536", "200"),
    ] {
        let envs = ucx_env(tls);
        let port = free_port();
        let port = port.as_str();
        let (_, c) = ok_pair(
            "ucx_perftest",
            port,
            &["-p", port],
            &["-p", port, "-t", test, "-s", size, "-n", iters],
            &envs,
        );
        // Iterations, latency (50%ile, average, overall), bandwidth and
        // message rate (average, overall). The overall bandwidth of 8-byte
        // tag_lat prints as 0.00 MB/s once a busy host stretches its
        // overall latency past ~800 us (ud_verbs retransmission waits), so
        // tag_lat is checked by its latency and message rate.
        let v = final_row(&c);
        assert!(v.len() >= 8, "{tls} {test}: {v:?}\n{c}");
        let measured = match test {
            "tag_bw" => v[5] > 0.0,
            _ => v[3] > 0.0 && v[7] > 0.0,
        };
        assert!(
            v[0] as u64 == iters.parse::<u64>().unwrap() && measured,
            "{tls} {test}: {v:?}\n{c}"
        );
    }
}

#[test]
fn qperf_rc_bw_rc_lat_ud_lat() {
    need("qperf", "qperf");
    let _g = serial();
    // qperf without -cm exchanges LIDs and builds AVs without a GRH; a
    // receive-only QP (max_send_wr 0) serves rc_bw.
    let port = free_port();
    let port = port.as_str();
    let (_, c) = ok_pair(
        "qperf",
        port,
        &["-lp", port],
        &["-lp", port, "-t", "2", "rc_bw", "rc_lat", "ud_lat", "quit"],
        &[],
    );
    for (test, unit) in [
        ("rc_bw:", "bw"),
        ("rc_lat:", "latency"),
        ("ud_lat:", "latency"),
    ] {
        let at = c.find(test).unwrap_or_else(|| panic!("no {test} in\n{c}"));
        assert!(
            c[at..]
                .lines()
                .nth(1)
                .is_some_and(|l| l.contains(unit) && l.contains('=')),
            "{test}\n{c}"
        );
    }
    assert!(!c.to_lowercase().contains("failed"), "{c}");
}

const MPI_PINGPONG: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank, size;
    static char buf[65536];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) { if (!rank) printf("need 2 ranks\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    int bad = 0;
    for (int len = 1; len <= (int)sizeof buf; len *= 4) {
        for (int i = 0; i < 50; i++) {
            if (rank == 0) {
                memset(buf, (char)(i + len), len);
                MPI_Send(buf, len, MPI_CHAR, 1, i, MPI_COMM_WORLD);
                MPI_Recv(buf, len, MPI_CHAR, 1, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int k = 0; k < len; k++) if (buf[k] != (char)(i + len + 1)) { bad++; break; }
            } else {
                MPI_Recv(buf, len, MPI_CHAR, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int k = 0; k < len; k++) if (buf[k] != (char)(i + len)) { bad++; break; }
                memset(buf, (char)(i + len + 1), len);
                MPI_Send(buf, len, MPI_CHAR, 0, i, MPI_COMM_WORLD);
            }
        }
    }
    printf("rank %d bad %d\n", rank, bad);
    MPI_Finalize();
    return bad != 0;
}
"#;

#[test]
fn open_mpi_ping_pong_of_two_ranks_over_pml_ucx() {
    need("mpicc", "libopenmpi-dev");
    need("mpirun", "openmpi-bin");
    need_node();
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("pingpong.c");
    let bin = dir.path().join("pingpong");
    std::fs::write(&src, MPI_PINGPONG).unwrap();
    let o = Command::new("mpicc")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let lib = shim_dir().display().to_string();
    let mut c = Command::new("mpirun");
    c.args(["--allow-run-as-root", "-np", "2", "--mca", "pml", "ucx"])
        .args(["-x", &format!("LD_LIBRARY_PATH={lib}")])
        .args(["-x", "UCX_TLS=rc_verbs,ud_verbs"])
        .arg(&bin)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let o: Output = wait(c.spawn().unwrap(), LIMIT, "mpirun");
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("rank 0 bad 0") && t.contains("rank 1 bad 0"),
        "{t}"
    );
}

/// Issue 20, "done when": after a run that kills processes mid-transfer,
/// the registry holds nothing of dead processes without a living holder.
#[test]
fn processes_killed_mid_transfer_leave_nothing_in_the_registry() {
    need("ib_write_bw", "perftest");
    let _g = serial();
    let port = free_port();
    let args = ["-x", "0", "-p", &port, "-D", "60", "-s", "65536"];
    let mut s = await_listen(
        command("ib_write_bw", &args).spawn().unwrap(),
        &port,
        "ib_write_bw",
    );
    let mut cargs = args.to_vec();
    cargs.push("127.0.0.1");
    let mut c = command("ib_write_bw", &cargs).spawn().unwrap();
    let pids = [s.id(), c.id()];
    let reg = rdmakit_soft::registry::Registry::open("soft0").unwrap();
    // Wait until both hold QPs (the transfer runs), then SIGKILL both.
    let end = Instant::now() + LIMIT;
    loop {
        let recs = reg.list().unwrap();
        if pids
            .iter()
            .all(|p| recs.iter().any(|r| r.pid == *p && r.kind.as_str() == "qp"))
        {
            break;
        }
        assert!(
            Instant::now() < end,
            "ib_write_bw never created its QPs: {recs:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1000));
    for p in [&mut s, &mut c] {
        p.kill().unwrap();
        p.wait().unwrap();
    }
    let recs = reg.list().unwrap();
    assert!(
        !recs.iter().any(|r| pids.contains(&r.pid)),
        "objects of killed processes remain: {recs:?}"
    );
    // The next open of the device deletes their files too.
    drop(rdmakit_soft::Device::open(rdmakit_soft::DeviceConfig::default()).unwrap());
    let left: Vec<String> = std::fs::read_dir(reg.dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| pids.iter().any(|p| n.contains(&format!("-{p}-"))))
        .collect();
    assert!(
        left.is_empty(),
        "files of killed processes remain: {left:?}"
    );
}
