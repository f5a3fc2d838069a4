//! Debian's unmodified perftest on the shim, client and server as two
//! processes: every RC test, in perftest's `ibv_wr_*` mode and with
//! `--use_old_post_send`, and `-a` sweeps.
//!
//! perftest takes its `ibv_wr_*` path only on devices it recognises by
//! vendor part id (ConnectX, EFA, HNS); `RDMAKIT_SHIM_VENDOR=0x02c9:4119`
//! makes the soft NIC report a ConnectX-5's ids so that path runs too.
//!
//! `--tclass` runs are captured on `lo` (testkit's `lo_capture`, needs
//! CAP_NET_RAW): the traffic class is the DSCP on the wire.

mod common;

use std::time::Duration;

use common::*;
use rdmakit_testkit::lo_capture;

const LIMIT: Duration = Duration::from_secs(120);
const MLX5: &[(&str, &str)] = &[("RDMAKIT_SHIM_VENDOR", "0x02c9:4119")];

/// Runs one test and returns the numbers of its result row.
fn perf(tool: &str, n: u16, extra: &[&str], envs: &[(&str, &str)], wr_api: bool) -> Vec<f64> {
    if !have(tool) {
        return Vec::new();
    }
    let _g = serial();
    let p = port(n);
    let mut args = vec!["-x", "0", "-p", &p];
    args.extend_from_slice(extra);
    let out = pair(tool, &args, envs, LIMIT);
    let c = both_ok(&format!("{tool} {extra:?}"), &out);
    let api = if wr_api { ": ON" } else { ": OFF" };
    assert!(
        c.lines()
            .any(|l| l.contains("ibv_wr* API") && l.trim_end().ends_with(api)),
        "{tool}: expected ibv_wr* API{api}\n{c}"
    );
    // The last row that starts with a message size holds the figures.
    let row = c
        .lines()
        .rfind(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u64>().is_ok())
        })
        .unwrap_or_else(|| panic!("{tool}: no result row\n{c}"));
    let nums: Vec<f64> = row
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(nums.len() >= 4, "{tool}: {row}");
    nums
}

/// Bandwidth row: bytes, iterations, BW peak, BW average, MsgRate.
fn bw(tool: &str, n: u16, extra: &[&str], envs: &[(&str, &str)], wr_api: bool) {
    let v = perf(tool, n, extra, envs, wr_api);
    if let [_, iters, _, avg, rate, ..] = v[..] {
        assert!(iters > 0.0 && avg > 0.0 && rate > 0.0, "{tool}: {v:?}");
    }
}

/// Latency row: bytes, iterations, t_min, t_max, t_typical, t_avg, ...
fn lat(tool: &str, n: u16, extra: &[&str], envs: &[(&str, &str)], wr_api: bool) {
    let v = perf(tool, n, extra, envs, wr_api);
    if let [_, iters, tmin, tmax, _, tavg, ..] = v[..] {
        assert!(iters > 0.0, "{tool}: {v:?}");
        assert!(tmin > 0.0 && tmin <= tavg && tavg <= tmax, "{tool}: {v:?}");
    }
}

#[test]
fn write_bw() {
    bw("ib_write_bw", 20, &["-n", "500"], MLX5, true);
    bw(
        "ib_write_bw",
        21,
        &["-n", "500", "--use_old_post_send"],
        &[],
        false,
    );
}

#[test]
fn read_bw() {
    bw("ib_read_bw", 22, &["-n", "500"], MLX5, true);
    bw(
        "ib_read_bw",
        23,
        &["-n", "500", "--use_old_post_send"],
        &[],
        false,
    );
}

#[test]
fn send_bw() {
    bw("ib_send_bw", 24, &["-n", "500"], MLX5, true);
    bw(
        "ib_send_bw",
        25,
        &["-n", "500", "--use_old_post_send"],
        &[],
        false,
    );
}

#[test]
fn atomic_bw() {
    bw("ib_atomic_bw", 26, &["-n", "500"], MLX5, true);
    bw(
        "ib_atomic_bw",
        27,
        &["-n", "500", "--use_old_post_send"],
        &[],
        false,
    );
}

#[test]
fn send_lat() {
    lat("ib_send_lat", 28, &["-n", "500"], MLX5, true);
    lat(
        "ib_send_lat",
        29,
        &["-n", "500", "--use_old_post_send"],
        &[],
        false,
    );
}

#[test]
fn write_lat() {
    lat("ib_write_lat", 30, &["-n", "500"], MLX5, true);
    lat(
        "ib_write_lat",
        31,
        &["-n", "500", "--use_old_post_send"],
        &[],
        false,
    );
}

#[test]
fn read_lat() {
    lat("ib_read_lat", 32, &["-n", "500"], MLX5, true);
    lat(
        "ib_read_lat",
        33,
        &["-n", "500", "--use_old_post_send"],
        &[],
        false,
    );
}

#[test]
fn sweeps_from_2_bytes_to_8_mib() {
    // -a: every power of two from 2 B to 8 MiB (2048 packets per message).
    bw("ib_write_bw", 34, &["-a", "-n", "20"], MLX5, true);
    lat(
        "ib_send_lat",
        35,
        &["-a", "-n", "20", "--use_old_post_send"],
        &[],
        false,
    );
}

#[test]
fn rdma_cm_is_refused_with_a_message_not_a_hang() {
    if !have("ib_write_bw") {
        return;
    }
    let _g = serial();
    let p = port(36);
    let o = run("ib_write_bw", &["-R", "-p", &p, "127.0.0.1"], &[]);
    // A clean exit with an error, not a crash by signal.
    assert!(
        o.status.code().is_some_and(|c| c != 0),
        "{:?}\n{}",
        o.status,
        text(&o)
    );
    assert!(
        text(&o).contains("rdma_create_event_channel failed"),
        "{}",
        text(&o)
    );
}

/// The soft NIC on UDP (no same-host rings, so every packet crosses `lo`),
/// one datagram per packet, congestion control off (data leaves Not-ECT).
const ON_THE_WIRE: &[(&str, &str)] = &[
    ("RDMAKIT_SOFT_TRANSPORT", "udp"),
    ("RDMAKIT_SOFT_GSO", "0"),
    ("RDMAKIT_SOFT_CC", "off"),
];

/// Runs `tool` (server and client, both with `--tclass=tclass`) while
/// capturing `lo`; returns the RoCEv2 packets seen, or None (a skip).
fn captured(tool: &str, n: u16, tclass: u8, extra: &[&str]) -> Option<Vec<lo_capture::Packet>> {
    if !have(tool) {
        return None;
    }
    let _g = serial();
    let cap = lo_capture::LoCapture::start()?;
    let p = port(n);
    let t = format!("--tclass={tclass}");
    let mut args = vec!["-x", "0", "-p", &p, &t];
    args.extend_from_slice(extra);
    let out = pair(tool, &args, ON_THE_WIRE, LIMIT);
    both_ok(&format!("{tool} {args:?}"), &out);
    Some(cap.finish())
}

/// `ib_write_bw --tclass=107` (DSCP 26, ECN bits 11): every RDMA WRITE of
/// the client and every ACK of the server leaves with TOS 0x68 — DSCP 26
/// from `ibv_modify_qp`'s `ah_attr.grh.traffic_class`, the ECN bits the
/// NIC's (Not-ECT with congestion control off), not the application's.
#[test]
fn write_bw_tclass_is_the_dscp_of_writes_and_acks() {
    let Some(pkts) = captured("ib_write_bw", 37, (26 << 2) | 0b11, &["-n", "200"]) else {
        return;
    };
    let ours: Vec<_> = pkts.iter().filter(|p| p.dscp() == 26).collect();
    let writes = ours
        .iter()
        .filter(|p| (0x06..=0x0b).contains(&p.opcode))
        .count();
    let acks = ours.iter().filter(|p| p.opcode == 0x11).count();
    assert!(
        writes >= 200 && acks > 0,
        "{writes} RDMA WRITE and {acks} ACK packets with DSCP 26 among {} captured",
        pkts.len()
    );
    assert!(
        ours.iter().all(|p| p.ecn() == 0),
        "the application's ECN bits reached the wire: {:?}",
        ours.iter().find(|p| p.ecn() != 0)
    );
}

/// `ib_send_bw -c UD --tclass=40` (DSCP 10): the datagrams carry the
/// traffic class of the AH perftest creates for its peer.
#[test]
fn ud_send_bw_tclass_is_the_dscp_of_the_datagrams() {
    let Some(pkts) = captured("ib_send_bw", 38, 10 << 2, &["-c", "UD", "-n", "200"]) else {
        return;
    };
    // UD SEND ONLY (0x64) and SEND ONLY with immediate (0x65).
    let sends = pkts
        .iter()
        .filter(|p| p.dscp() == 10 && (0x64..=0x65).contains(&p.opcode))
        .count();
    assert!(
        sends >= 200,
        "{sends} UD SEND packets with DSCP 10 among {} captured",
        pkts.len()
    );
}
