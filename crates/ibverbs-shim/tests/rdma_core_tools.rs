//! Debian's unmodified ibverbs-utils on the shim: ibv_devices, ibv_devinfo,
//! and the pingpong examples between two processes on this machine.

mod common;

use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(90);

#[test]
fn ibv_devices_lists_the_soft_nic() {
    if !have("ibv_devices") {
        return;
    }
    let o = run("ibv_devices", &[], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.lines().any(|l| l.trim_start().starts_with("soft0")),
        "{t}"
    );
}

#[test]
fn ibv_devinfo_shows_an_active_roce_port() {
    if !have("ibv_devinfo") {
        return;
    }
    let o = run("ibv_devinfo", &[], &[]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for want in [
        "hca_id:\tsoft0",
        "transport:\t\t\tInfiniBand (0)",
        "state:\t\t\tPORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
    ] {
        assert!(t.contains(want), "missing {want:?} in\n{t}");
    }
}

#[test]
fn ibv_devinfo_verbose_shows_limits_and_the_rocev2_gid_at_index_0() {
    if !have("ibv_devinfo") {
        return;
    }
    let o = run("ibv_devinfo", &["-v"], &[]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for want in [
        "max_qp:\t\t\t\t16384",
        "max_cqe:\t\t\t4194303",
        "phys_state:\t\tLINK_UP (5)",
    ] {
        assert!(t.contains(want), "missing {want:?} in\n{t}");
    }
    let gid = t
        .lines()
        .find(|l| l.contains("GID[  0]:"))
        .unwrap_or_else(|| panic!("no GID[0] in\n{t}"));
    assert!(
        gid.contains(&format!("::ffff:{}", rdmakit_soft::net::host_device_addr()))
            && gid.ends_with("RoCE v2"),
        "{gid}"
    );
}

fn pingpong(tool: &str, n: u16, extra: &[&str]) -> String {
    pingpong_env(tool, n, extra, &[])
}

fn pingpong_env(tool: &str, n: u16, extra: &[&str], env: &[(&str, &str)]) -> String {
    let _g = serial();
    let p = port(n);
    let mut args = vec!["-g", "0", "-p", &p];
    args.extend_from_slice(extra);
    let out = pair(tool, &args, env, LIMIT);
    let c = both_ok(&format!("{tool} {extra:?}"), &out);
    // "<bytes> bytes in <s> seconds = <rate> Mbit/sec" and "<n> iters in ...".
    let iters = c
        .lines()
        .find(|l| l.contains(" iters in "))
        .unwrap_or_else(|| panic!("no result line:\n{c}"));
    let n: u64 = iters.split_whitespace().next().unwrap().parse().unwrap();
    assert!(n > 0, "{iters}");
    c
}

#[test]
fn rc_pingpong_default() {
    if have("ibv_rc_pingpong") {
        pingpong("ibv_rc_pingpong", 1, &[]);
    }
}

#[test]
fn rc_pingpong_validates_buffer_contents() {
    if have("ibv_rc_pingpong") {
        pingpong("ibv_rc_pingpong", 2, &["-c"]);
    }
}

#[test]
fn rc_pingpong_with_completion_events() {
    if have("ibv_rc_pingpong") {
        pingpong("ibv_rc_pingpong", 3, &["-e"]);
    }
}

#[test]
fn rc_pingpong_with_the_new_post_send_api() {
    if have("ibv_rc_pingpong") {
        pingpong("ibv_rc_pingpong", 4, &["-N"]);
    }
}

#[test]
fn rc_pingpong_messages_above_the_mtu_validated() {
    if have("ibv_rc_pingpong") {
        // 4096-byte MTU: 20000 bytes is five packets, 65536 sixteen.
        pingpong("ibv_rc_pingpong", 5, &["-s", "20000", "-n", "200", "-c"]);
        pingpong(
            "ibv_rc_pingpong",
            6,
            &["-s", "65536", "-n", "100", "-c", "-e"],
        );
    }
}

#[test]
fn ud_pingpong() {
    if have("ibv_ud_pingpong") {
        pingpong("ibv_ud_pingpong", 7, &[]);
    }
}

#[test]
fn uc_and_srq_pingpong() {
    if have("ibv_uc_pingpong") {
        pingpong("ibv_uc_pingpong", 8, &[]);
    }
    if have("ibv_srq_pingpong") {
        pingpong("ibv_srq_pingpong", 9, &[]);
    }
}

/// Both processes on the default transport (`auto`): every packet between
/// them goes through a shared-memory ring. Busy-polling and blocking
/// (`-e`: the progress thread sleeps and a ring's sender wakes it), single-
/// and multi-packet messages (16 packets of 4 KiB), contents validated, and
/// the other connection types. The client's closing line (with
/// `RDMAKIT_SHIM_DEBUG`) shows its packets went both ways through rings and
/// none through the socket.
#[test]
fn pingpongs_over_same_host_rings() {
    let on_rings = |tool: &str, n: u16, extra: &[&str]| {
        let c = closing_counts(tool, n, extra, "auto");
        let close = &c.line;
        assert!(c.tx > 0 && c.ring_tx == c.tx, "{tool}: {close}");
        // Received: nothing from the socket. (Popped from a ring is not
        // always handed to a QP: a packet for a QP destroyed at the end of
        // the run is dropped.)
        assert!(c.rx > 0 && c.sock_rx == 0, "{tool}: {close}");
        c.woke
    };
    if have("ibv_rc_pingpong") {
        on_rings("ibv_rc_pingpong", 60, &["-c", "-n", "2000"]);
        // Blocking on events, the server's progress thread sleeps between
        // messages and the client's pushes wake it.
        let woke = on_rings("ibv_rc_pingpong", 61, &["-c", "-e", "-n", "500"]);
        assert!(woke > 0, "-e: no push woke the server's progress thread");
        on_rings("ibv_rc_pingpong", 62, &["-s", "65536", "-n", "200", "-c"]);
    }
    if have("ibv_uc_pingpong") {
        on_rings("ibv_uc_pingpong", 63, &["-c"]);
    }
    if have("ibv_ud_pingpong") {
        on_rings("ibv_ud_pingpong", 64, &[]);
    }
    if have("ibv_srq_pingpong") {
        on_rings("ibv_srq_pingpong", 65, &[]);
    }
}

/// With `RDMAKIT_SOFT_TRANSPORT=udp` the same tools put every packet on the
/// socket (what a capture sees) and none in a ring.
#[test]
fn pingpongs_over_forced_udp() {
    let on_udp = |tool: &str, n: u16, extra: &[&str]| {
        let c = closing_counts(tool, n, extra, "udp");
        let close = &c.line;
        assert!(c.tx > 0 && c.ring_tx == 0 && c.woke == 0, "{tool}: {close}");
        assert!(
            c.rx > 0 && c.ring_rx == 0 && c.sock_rx == c.rx,
            "{tool}: {close}"
        );
    };
    if have("ibv_rc_pingpong") {
        on_udp("ibv_rc_pingpong", 66, &["-c", "-n", "500"]);
        on_udp(
            "ibv_rc_pingpong",
            67,
            &["-s", "65536", "-n", "100", "-c", "-e"],
        );
    }
    if have("ibv_ud_pingpong") {
        on_udp("ibv_ud_pingpong", 68, &[]);
    }
}

/// The client's closing line with `RDMAKIT_SHIM_DEBUG`, "... (<transport>):
/// T packets sent, R through same-host rings (W woke the receiver); T
/// received, R from rings, S from the socket; refused F rings and Q
/// same-host requests", and its counts.
struct Closing {
    line: String,
    tx: u64,
    ring_tx: u64,
    woke: u64,
    rx: u64,
    ring_rx: u64,
    sock_rx: u64,
}

/// Runs a ping-pong pair on `transport` with `RDMAKIT_SHIM_DEBUG` and reads
/// the client's closing line.
fn closing_counts(tool: &str, n: u16, extra: &[&str], transport: &str) -> Closing {
    let env = [
        ("RDMAKIT_SOFT_TRANSPORT", transport),
        ("RDMAKIT_SHIM_DEBUG", "1"),
    ];
    let out = pingpong_env(tool, n, extra, &env);
    let close = out
        .lines()
        .find(|l| l.contains("ibv_close_device"))
        .unwrap_or_else(|| panic!("{tool}: no closing line in\n{out}"))
        .to_string();
    assert!(close.contains(&format!("({transport})")), "{tool}: {close}");
    let nums: Vec<u64> = close
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let [.., tx, ring_tx, woke, rx, ring_rx, sock_rx, refused_rings, refused_requests] = nums[..]
    else {
        panic!("{tool}: {close}");
    };
    // Why a ring did not come about, when one did not (the drop-in prints
    // it after the closing line): part of every message about this run.
    let misses: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("rdmakit libibverbs: ring to") || l.contains("refused a ring"))
        .collect();
    let close = if misses.is_empty() {
        close
    } else {
        format!("{close} [{}]", misses.join("; "))
    };
    // Between two processes of one user, nothing is refused (a refusal is
    // another user's ring, or a same-host request not on its peer's ring).
    assert_eq!((refused_rings, refused_requests), (0, 0), "{tool}: {close}");
    Closing {
        line: close,
        tx,
        ring_tx,
        woke,
        rx,
        ring_rx,
        sock_rx,
    }
}
