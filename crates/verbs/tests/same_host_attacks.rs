//! Issue 34, item 1: an unprivileged user (uid 65534) against a root soft
//! NIC's same-host path. Before the fix such a user connected to a root
//! `rdmakit perf` server like any peer, then sent same-host requests (vendor
//! opcodes 0xC0–0xC2) over UDP naming the server's own pid, addresses it
//! knew, and iovecs outside any MR: 8 KiB of the server's memory landed in
//! the attacker's buffer and its bytes in the server's stack.
//!
//! Here this test process (root) is the responder: an RC QP in RTS, an MR
//! of a known pattern, and canaries on its heap and stack. The attacker,
//! this binary spawned again as uid 65534, sends every form of that
//! request — today's header and the old one naming a pid and a cookie —
//! each with a valid ICRC and the PSN the QP expects, then one ordinary
//! SEND, which must arrive (so the packets were well formed and addressed,
//! and only their opcode kept them out). It also tries to reach the
//! server's same-host channel directly. Nothing may be read or written: the
//! MR, both canaries and the attacker's own buffer are checked, and every
//! request must be counted as refused.

use std::io::{BufRead, Write};
use std::net::{SocketAddrV4, UdpSocket};
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rdmakit_soft::Gid;
use rdmakit_verbs::{Access, ConnectOpts, Context, DeviceConfig, Endpoint, WcStatus};
use rdmakit_wire::cma as wcma;
use rdmakit_wire::icrc::{compute_ipv4, Ipv4Flow};

mod common;

const ROLE: &str = "RDMAKIT_SAME_HOST_ATTACKER";
const T: Duration = Duration::from_secs(10);
const MR_LEN: usize = 64 * 1024;
const CANARY: &[u8] = b"SECRET-CANARY-OF-THE-ROOT-SERVER;";
/// The attacker's own buffer, which the old READ attack filled with the
/// server's memory.
const MINE: u8 = 0x11;

fn pattern(i: usize) -> u8 {
    (i as u8).wrapping_mul(37) ^ 0x5c
}

fn canary(len: usize) -> Vec<u8> {
    CANARY.iter().copied().cycle().take(len).collect()
}

/// The attacker; a no-op unless spawned by the test below as uid 65534.
#[test]
fn child_role() {
    if std::env::var_os(ROLE).is_none() {
        return;
    }
    let stdin = std::io::stdin();
    let mut line = String::new();
    stdin.lock().read_line(&mut line).unwrap();
    // SERVER <ip:port> <qpn> <mr addr> <rkey> <heap canary> <stack canary> <pid> <base>
    let first = line.clone();
    let f: Vec<&str> = first.split_whitespace().collect();
    assert_eq!(f[0], "SERVER");
    let server: SocketAddrV4 = f[1].parse().unwrap();
    let qpn = u32::from_str_radix(f[2], 16).unwrap();
    let mr = u64::from_str_radix(f[3], 16).unwrap();
    let rkey = u32::from_str_radix(f[4], 16).unwrap();
    let heap = u64::from_str_radix(f[5], 16).unwrap();
    let stack = u64::from_str_radix(f[6], 16).unwrap();
    let pid: u32 = f[7].parse().unwrap();
    let base = f[8].to_string();
    // A fake peer: the server's QP is connected to it.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let me = match sock.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        std::net::SocketAddr::V6(_) => unreachable!(),
    };
    let psn = 0x1234;
    let ep = Endpoint {
        qpn: 0x77,
        gid: Gid::from_ipv4(*me.ip()),
        psn,
    };
    println!("@@EP {}", ep.to_wire());
    line.clear();
    stdin.lock().read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "GO");
    // My own buffer: the old READ attack had the server push its memory
    // here.
    let mine = vec![MINE; 8192];
    let mut sent = 0;
    let mut send = |op: u8, hdr: &[u8]| {
        let mut pkt = vec![0u8; 12];
        pkt[0] = op;
        pkt[2..4].copy_from_slice(&[0xff, 0xff]);
        pkt[5..8].copy_from_slice(&qpn.to_be_bytes()[1..]);
        pkt[8] = 0x80; // AckReq
        pkt[9..12].copy_from_slice(&psn.to_be_bytes()[1..]);
        pkt.extend_from_slice(hdr);
        // Pad to 4 bytes (PadCnt in the BTH).
        let pad = (4 - hdr.len() % 4) % 4;
        pkt[1] = (pad as u8) << 4;
        pkt.resize(pkt.len() + pad, 0);
        let flow = Ipv4Flow {
            src: *me.ip(),
            dst: *server.ip(),
            sport: me.port(),
            dport: server.port(),
            ident: 0,
            dont_frag: true,
        };
        let crc = compute_ipv4(&flow, &pkt).unwrap();
        pkt.extend_from_slice(&crc.to_le_bytes());
        sock.send_to(&pkt, server).unwrap();
        sent += 1;
    };
    let header = |len: u32, iov: &[(u64, u64)]| {
        let mut v = [(0u64, 0u64); wcma::MAX_IOV];
        v[..iov.len()].copy_from_slice(iov);
        let r = wcma::Repr {
            len,
            rkey,
            va: mr,
            iov_count: iov.len() as u8,
            iov: v,
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut wcma::Packet::new_unchecked(&mut b[..]))
            .unwrap();
        b
    };
    // Pull the server's heap canary into its MR; push its MR into its own
    // stack; pull it into a receive WQE; and push it into my buffer.
    send(wcma::OP_WRITE, &header(8192, &[(heap, 8192)]));
    send(wcma::OP_READ, &header(4096, &[(stack, 4096)]));
    send(wcma::OP_SEND, &header(8192, &[(heap, 8192)]));
    send(
        wcma::OP_READ,
        &header(8192, &[(mine.as_ptr() as u64, 8192)]),
    );
    // The header of the attack as it was found: the server's pid, a cookie
    // address and value, then the iovecs.
    let mut old = Vec::new();
    old.extend_from_slice(&pid.to_be_bytes());
    old.extend_from_slice(&[1, 0, 0, 0]);
    old.extend_from_slice(&8192u32.to_be_bytes());
    old.extend_from_slice(&rkey.to_be_bytes());
    old.extend_from_slice(&mr.to_be_bytes());
    old.extend_from_slice(&heap.to_be_bytes());
    old.extend_from_slice(&0u64.to_be_bytes());
    old.extend_from_slice(&heap.to_be_bytes());
    old.extend_from_slice(&8192u64.to_be_bytes());
    send(wcma::OP_WRITE, &old);
    send(wcma::OP_READ, &old);
    // One ordinary SEND ONLY at the same PSN: it must be delivered.
    send(0x04, b"LEGIT-SEND");
    // The server's same-host channel, reached directly.
    let netns = std::fs::metadata("/proc/self/ns/net")
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap();
    let path = format!(
        "{base}/rdmakit-soft.0/net/{netns}-{}-{}",
        server.ip(),
        server.port()
    );
    let channel = match std::os::unix::net::UnixStream::connect(&path) {
        Ok(_) => "connected".to_string(),
        Err(e) => format!("{:?}", e.kind()),
    };
    // Nothing may come back: no ACK, no NAK, no data.
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 2048];
    let mut replies = 0;
    while let Ok((n, _)) = sock.recv_from(&mut buf) {
        // The SEND's ACK is the only answer allowed.
        if n >= 16 && buf[0] == 0x11 {
            continue;
        }
        replies += 1;
    }
    let untouched = mine.iter().all(|&b| b == MINE);
    println!("@@DONE {sent} {channel} {replies} {untouched}");
    line.clear();
    stdin.lock().read_line(&mut line).unwrap();
}

struct Attacker {
    child: Child,
    rx: mpsc::Receiver<String>,
}

impl Drop for Attacker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn same_host_requests_from_an_unprivileged_user_move_no_byte() {
    let Some(cmd) = rdmakit_testkit::as_attacker(std::env::current_exe().unwrap()) else {
        return;
    };
    let ctx = Context::open_soft(DeviceConfig::default()).unwrap();
    let soft = ctx.soft().unwrap();
    let (pd, cq, qp) = common::rc_qp(&ctx, ConnectOpts::default());
    let mr = pd.alloc_buf(MR_LEN, Access::all()).unwrap();
    let want: Vec<u8> = (0..MR_LEN).map(pattern).collect();
    mr.write(0, &want).unwrap();
    let recv = pd.alloc_buf(64 * 1024, Access::all()).unwrap();
    qp.qp().recv(9, &recv, 0..64 * 1024).unwrap();
    let heap = canary(8192);
    let stack: [u8; 4096] = std::array::from_fn(|i| CANARY[i % CANARY.len()]);
    let remote = mr.remote(0);
    let (child, mut stdin, rx) = common::spawn_child_cmd(cmd, ROLE, "1");
    let a = Attacker { child, rx };
    writeln!(
        stdin,
        "SERVER {} {:x} {:x} {:x} {:x} {:x} {} {}",
        soft.endpoint(),
        qp.qp().qpn(),
        remote.addr,
        remote.rkey,
        heap.as_ptr() as u64,
        stack.as_ptr() as u64,
        std::process::id(),
        rdmakit_soft::userdir::base().display()
    )
    .unwrap();
    let ep = a.rx.recv_timeout(T).expect("attacker went silent");
    let ep = Endpoint::from_wire(ep.strip_prefix("EP ").unwrap()).unwrap();
    let qp = qp.connect(&ep).unwrap().ready_to_send().unwrap();
    let c0 = soft.counters();
    writeln!(stdin, "GO").unwrap();
    let done = a.rx.recv_timeout(T).expect("attacker went silent");
    let f: Vec<&str> = done.split_whitespace().collect();
    assert_eq!(f[0], "DONE", "{done}");
    let sent: u64 = f[1].parse().unwrap();
    assert_eq!(sent, 7);
    // The ordinary SEND arrives: the requests were well formed, their ICRC
    // valid and their PSN the expected one.
    let w = cq
        .wait(1, T)
        .unwrap_or_else(|e| panic!("{e}: {:?}", soft.counters()));
    assert_eq!((w[0].wr_id, w[0].status), (9, WcStatus::Success), "{w:?}");
    assert_eq!(recv.to_vec(0..10).unwrap(), b"LEGIT-SEND");
    let start = Instant::now();
    let refused = loop {
        let r = soft.counters().rx_same_host_refused - c0.rx_same_host_refused;
        if r >= sent - 1 || start.elapsed() > T {
            break r;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(refused, sent - 1, "every same-host request refused");
    assert!(mr.to_vec(0..MR_LEN).unwrap() == want, "the MR changed");
    assert_eq!(heap, canary(8192), "the heap canary changed");
    assert!(
        stack.iter().zip(CANARY.iter().cycle()).all(|(a, b)| a == b),
        "the stack canary changed"
    );
    let st = soft.qp_stats(qp.qpn()).unwrap();
    assert_eq!(st.same_host_executed + st.same_host_declined, 0);
    assert_eq!(
        f[2], "PermissionDenied",
        "the channel of root's context: {done}"
    );
    assert_eq!(f[3], "0", "the server answered a request: {done}");
    assert_eq!(f[4], "true", "the attacker's buffer received bytes: {done}");
    drop(stdin);
}
