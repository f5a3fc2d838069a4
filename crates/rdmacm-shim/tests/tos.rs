//! `rdma_set_option(RDMA_OPTION_ID_TOS)` on the wire: Debian's unmodified
//! ucmatose (RC) and udaddy (UD) with `-t`, two processes on loopback on
//! rdmakit's librdmacm.so.1 + libibverbs.so.1, the soft NIC on UDP so that
//! every packet crosses `lo`, captured there (testkit's `lo_capture`,
//! needs CAP_NET_RAW). The ToS is the traffic class of the route: of the
//! REQ's primary path, so of both QPs' address vectors (the passive side
//! takes the REQ's path), and of a UD peer's address handle.

mod common;

use std::time::Duration;

use rdmakit_testkit::lo_capture::{LoCapture, Packet};

const LIMIT: Duration = Duration::from_secs(90);

/// UDP only, one datagram per packet, congestion control off (data leaves
/// Not-ECT, so the TOS byte is the DSCP alone).
const ON_THE_WIRE: &[(&str, &str)] = &[
    ("RDMAKIT_SOFT_TRANSPORT", "udp"),
    ("RDMAKIT_SOFT_GSO", "0"),
    ("RDMAKIT_SOFT_CC", "off"),
];

/// Runs `server` then `client` while capturing `lo`; both must exit 0.
fn captured(server: &[&str], client: &[&str]) -> Option<Vec<Packet>> {
    let _g = common::have_serial(server[0], "rdmacm-utils")?;
    let cap = LoCapture::start()?;
    let mut s = common::command(server[0], &server[1..]);
    s.envs(ON_THE_WIRE.iter().copied());
    let mut c = common::command(client[0], &client[1..]);
    c.envs(ON_THE_WIRE.iter().copied());
    let out = rdmakit_testkit::pair(s, c, Duration::from_millis(500), LIMIT, server[0]);
    common::both_ok(&format!("{client:?}"), &out);
    Some(cap.finish())
}

/// `ucmatose -t 0x8b` (DSCP 34, ECN bits 11): the client's SENDs and the
/// server's ACKs and SENDs leave with TOS 0x88, the ECN bits the NIC's.
#[test]
fn ucmatose_tos_is_the_dscp_of_both_sides() {
    let Some(pkts) = captured(
        &["ucmatose", "-p", "18620", "-C", "20"],
        &[
            "ucmatose",
            "-s",
            "127.0.0.1",
            "-p",
            "18620",
            "-C",
            "20",
            "-t",
            "0x8b",
        ],
    ) else {
        return;
    };
    let ours: Vec<_> = pkts.iter().filter(|p| p.dscp() == 34).collect();
    // RC SEND FIRST … SEND ONLY with immediate.
    let sends = ours.iter().filter(|p| p.opcode <= 0x05).count();
    let acks = ours.iter().filter(|p| p.opcode == 0x11).count();
    assert!(
        sends >= 40 && acks > 0,
        "{sends} RC SEND and {acks} ACK packets with DSCP 34 among {} captured",
        pkts.len()
    );
    assert!(
        ours.iter().all(|p| p.tos == 34 << 2),
        "the application's ECN bits reached the wire: {:?}",
        ours.iter().find(|p| p.ecn() != 0)
    );
}

/// `udaddy -t 0x28` (DSCP 10): the client's datagrams go through an AH
/// made from the ESTABLISHED event's `ah_attr`, whose traffic class is the
/// route's.
#[test]
fn udaddy_tos_is_the_dscp_of_the_datagrams() {
    let Some(pkts) = captured(
        &["udaddy", "-C", "10"],
        &["udaddy", "-s", "127.0.0.1", "-C", "10", "-t", "0x28"],
    ) else {
        return;
    };
    // UD SEND ONLY (0x64) and with immediate (0x65).
    let sends = pkts
        .iter()
        .filter(|p| p.dscp() == 10 && (0x64..=0x65).contains(&p.opcode))
        .count();
    assert!(
        sends >= 10,
        "{sends} UD SEND packets with DSCP 10 among {} captured",
        pkts.len()
    );
}
