//! The soft NIC's fault plan (`RDMAKIT_SOFT_FAULTS`, docs/fault-injection.md)
//! under Debian's unmodified ibverbs-utils and perftest, client and server
//! as two processes: lossy, reordering, duplicating links that the
//! transport repairs (data checked by the tool), faults that reach the
//! peer as what they are (bad ICRCs, CE marks), and a verb failure the
//! program reports. Each side's counters come from the drop-in library's
//! closing lines (`RDMAKIT_SHIM_DEBUG`).

mod common;

use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(120);

/// One side's closing fault line: what it injected and what its transport
/// counted.
#[derive(Debug, Default, Clone, Copy)]
struct Side {
    drop: u64,
    dup: u64,
    reorder: u64,
    corrupt: u64,
    delay: u64,
    ce: u64,
    retransmitted: u64,
    ack_timeouts: u64,
    out_of_sequence: u64,
    icrc_errors: u64,
}

/// The fault line of one side's output ("... faults injected: D dropped,
/// U duplicated, R reordered, C corrupted, L delayed, E CE marked, F verbs
/// failed; X packets retransmitted, T ACK timeouts, Q duplicate requests,
/// O out-of-sequence NAKs sent, I ICRC errors").
fn side(what: &str, out: &str) -> Side {
    let line = out
        .lines()
        .find_map(|l| l.split_once("faults injected:").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("{what}: no fault line in\n{out}"));
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let [drop, dup, reorder, corrupt, delay, ce, _fail, retransmitted, ack_timeouts, _dups, out_of_sequence, icrc_errors] =
        n[..]
    else {
        panic!("{what}: {line}");
    };
    Side {
        drop,
        dup,
        reorder,
        corrupt,
        delay,
        ce,
        retransmitted,
        ack_timeouts,
        out_of_sequence,
        icrc_errors,
    }
}

/// Runs `tool` as a pair with the fault plan `faults` on `transport`;
/// both must succeed. The server's and the client's fault lines.
fn faulted(tool: &str, n: u16, args: &[&str], faults: &str, transport: &str) -> (Side, Side) {
    let _g = serial();
    let p = port(n);
    let mut a = vec!["-p", &p];
    a.extend_from_slice(args);
    let env = [
        ("RDMAKIT_SOFT_FAULTS", faults),
        ("RDMAKIT_SOFT_TRANSPORT", transport),
        ("RDMAKIT_SHIM_DEBUG", "1"),
    ];
    let out = pair(tool, &a, &env, LIMIT);
    let what = format!("{tool} {args:?} with {faults:?} on {transport}");
    let (s, c) = rdmakit_testkit::both_ok(&what, &out);
    (side(&what, &s), side(&what, &c))
}

/// 5 % of the SENDs lost, 2 % of all packets reordered three deep and 2 %
/// duplicated (on each side's receive): ibv_rc_pingpong checks every
/// buffer (`-c`) and completes, and every lost packet was sent again — a
/// requester whose SEND was lost retransmits it (after an ACK timeout, or
/// on the NAK a later packet causes). ACKs are not dropped: a lost last
/// ACK would leave a requester retrying to a peer that already exited.
/// Same-host rings are asked for and not taken: a plan with packet rules
/// puts every packet on the link.
#[test]
fn rc_pingpong_checks_its_data_through_loss_reordering_and_duplication() {
    if !have("ibv_rc_pingpong") {
        return;
    }
    let plan = "rng=7; drop p=0.05 opcode=send; reorder depth=3 p=0.02; dup p=0.02";
    for (n, transport) in [(80, "udp"), (81, "auto")] {
        let args = ["-g", "0", "-c", "-n", "300"];
        let (s, c) = faulted("ibv_rc_pingpong", n, &args, plan, transport);
        let drops = s.drop + c.drop;
        assert!(
            drops > 0 && s.dup + c.dup > 0 && s.reorder + c.reorder > 0,
            "{s:?} {c:?}"
        );
        assert!(
            s.retransmitted + c.retransmitted >= drops,
            "{drops} packets lost, fewer sent again: {s:?} {c:?}"
        );
        assert!(s.ack_timeouts + c.ack_timeouts + s.out_of_sequence + c.out_of_sequence > 0);
    }
}

/// The same link under perftest's RDMA WRITE stream (4 KiB messages, its
/// default depth of 128): the receiver loses 5 % of the WRITE packets and
/// the sender retransmits at least as many.
#[test]
fn ib_write_bw_completes_through_loss_reordering_and_duplication() {
    if !have("ib_write_bw") {
        return;
    }
    let plan = "rng=11; drop p=0.05 opcode=write; reorder depth=3 p=0.02; dup p=0.02";
    let args = ["-x", "0", "-s", "4096", "-n", "2000"];
    let (s, c) = faulted("ib_write_bw", 82, &args, plan, "udp");
    assert!(s.drop > 50, "the server receives the WRITEs: {s:?}");
    assert_eq!(c.drop, 0, "the client receives only ACKs: {c:?}");
    assert!(c.retransmitted >= s.drop, "{s:?} {c:?}");
}

/// Faults on each side's transmit reach the peer as what they are: every
/// packet sent with a bad ICRC is counted as an ICRC error by the side
/// that received it (and, `dir=both`, the ones corrupted on receipt too),
/// CE marks arrive, delayed packets come late but come, and the data is
/// intact.
#[test]
fn corrupted_delayed_and_ce_marked_packets_reach_the_peer_as_such() {
    if !have("ibv_rc_pingpong") {
        return;
    }
    let plan = "rng=9; corrupt icrc p=0.02 dir=both opcode=send; delay 1ms p=0.05 dir=tx; \
                ce p=0.1 dir=tx";
    let args = ["-g", "0", "-c", "-n", "300"];
    let (s, c) = faulted("ibv_rc_pingpong", 83, &args, plan, "udp");
    assert!(s.corrupt > 0 && c.corrupt > 0, "{s:?} {c:?}");
    assert_eq!(
        s.corrupt + c.corrupt,
        s.icrc_errors + c.icrc_errors,
        "{s:?} {c:?}"
    );
    assert!(s.retransmitted + c.retransmitted >= s.corrupt + c.corrupt);
    assert!(
        s.delay > 0 && c.delay > 0 && s.ce > 0 && c.ce > 0,
        "{s:?} {c:?}"
    );
}

/// The first create_qp of an unmodified program fails with ENOSPC: it says
/// "Couldn't create QP" and exits non-zero, and the drop-in library names
/// the errno and the fault.
#[test]
fn the_nth_create_qp_fails_with_the_errno_the_plan_names() {
    if !have("ibv_rc_pingpong") {
        return;
    }
    let env = [
        ("RDMAKIT_SOFT_FAULTS", "fail create_qp nth=1 errno=ENOSPC"),
        ("RDMAKIT_SHIM_DEBUG", "1"),
    ];
    let p = port(84);
    let out = run("ibv_rc_pingpong", &["-g", "0", "-p", &p], &env);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("Couldn't create QP"), "{t}");
    assert!(
        t.contains("ibv_create_qp: ENOSPC (28): injected fault (RDMAKIT_SOFT_FAULTS)"),
        "{t}"
    );
    assert!(t.contains("1 verbs failed"), "{t}");
}

/// A plan the grammar refuses fails the device's open, and the program
/// says it could not open it; the message names the item and the column.
#[test]
fn a_bad_plan_fails_the_open_naming_the_item_and_column() {
    if !have("ibv_rc_pingpong") {
        return;
    }
    let env = [
        ("RDMAKIT_SOFT_FAULTS", "rng=1; drop p=0.5 opcode=jump"),
        ("RDMAKIT_SHIM_DEBUG", "1"),
    ];
    let p = port(85);
    let out = run("ibv_rc_pingpong", &["-g", "0", "-p", &p], &env);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("Couldn't get context"), "{t}");
    assert!(
        t.contains("RDMAKIT_SOFT_FAULTS: item 2, column 19: opcode=jump"),
        "{t}"
    );
}
