//! Issue 19 item 3 and issue 34: the soft NIC's same-host path. Two
//! processes on this host (this test binary spawned again as the child)
//! move 1 MiB RC WRITE, READ and SEND; with `transport: auto` (the default)
//! on both sides each message is one vendor request and one cross-memory
//! copy, every packet in same-host rings, and with `udp` on either side
//! every byte is a datagram. A responder the kernel does not let reach the
//! requester's memory declines and the requester falls back to packets; a
//! killed responder ends in RETRY_EXC_ERR.

use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::Duration;

use rdmakit_soft::{DataPath, SoftTransport};
use rdmakit_verbs::{Access, ConnectOpts, Context, DeviceConfig, Endpoint, RemoteBuf, WcStatus};

mod common;

const ROLE: &str = "RDMAKIT_SAME_HOST_CHILD";
const T: Duration = Duration::from_secs(30);
const LEN: usize = 1 << 20;

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed ^ (i >> 10) as u8)
        .collect()
}

fn config(t: &str) -> DeviceConfig {
    DeviceConfig {
        transport: SoftTransport::parse(t).unwrap(),
        ..DeviceConfig::default()
    }
}

/// This file's tests one at a time: one of them makes the process
/// non-dumpable for a while, which every same-host copy from it meets.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static M: std::sync::Mutex<()> = std::sync::Mutex::new(());
    M.lock().unwrap_or_else(|p| p.into_inner())
}

/// The responder; a no-op unless spawned by a test below. Its buffer:
/// [0, 1 MiB) takes the WRITE, [1, 2) is READ, [2, 3) takes the SEND.
#[test]
fn child_role() {
    let Some(mode) = std::env::var_os(ROLE) else {
        return;
    };
    let mode = mode.to_string_lossy().into_owned();
    let ctx = Context::open_soft(config(mode.split(':').next().unwrap())).unwrap();
    let (pd, cq, qp) = common::rc_qp(&ctx, ConnectOpts::default());
    let buf = pd.alloc_buf(3 * LEN, Access::all()).unwrap();
    qp.qp().recv(1, &buf, 2 * LEN..3 * LEN).unwrap();
    buf.write(LEN, &pattern(0x5a, LEN)).unwrap();
    let ep = qp.endpoint().unwrap();
    let r = buf.remote(0);
    println!("@@EP {} {:x} {:x}", ep.to_wire(), r.addr, r.rkey);
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    stdin.read_line(&mut line).unwrap();
    let peer = Endpoint::from_wire(line.trim().strip_prefix("EP ").unwrap()).unwrap();
    let qp = qp.connect(&peer).unwrap().ready_to_send().unwrap();
    println!("@@READY");
    if mode.ends_with(":die") {
        std::thread::sleep(T);
        return;
    }
    let w = cq.wait(1, T).unwrap();
    assert_eq!(
        (w[0].status, w[0].byte_len as usize),
        (WcStatus::Success, LEN)
    );
    assert!(
        buf.to_vec(0..LEN).unwrap() == pattern(0xa5, LEN),
        "WRITE data"
    );
    assert!(
        buf.to_vec(2 * LEN..3 * LEN).unwrap() == pattern(0x3c, LEN),
        "SEND data"
    );
    let s = ctx.soft().unwrap();
    let path = s.qp_data_path(qp.qpn()).unwrap();
    let st = s.qp_stats(qp.qpn()).unwrap();
    println!("@@CHILD-OK {} {}", path.as_str(), st.same_host_declined);
    line.clear();
    stdin.read_line(&mut line).unwrap();
}

struct Peer {
    child: Child,
    stdin: ChildStdin,
    rx: mpsc::Receiver<String>,
    ep: Endpoint,
    remote: RemoteBuf,
}

impl Peer {
    fn spawn(mode: &str) -> Peer {
        Peer::spawn_with(mode, &[])
    }

    /// With `wrapper` (a program and its arguments) in front of the child.
    fn spawn_with(mode: &str, wrapper: &[&str]) -> Peer {
        let (child, stdin, rx) = common::spawn_child_with(ROLE, mode, wrapper);
        let line = rx.recv_timeout(T).expect("child went silent");
        let (ep, remote) = common::parse_ep(&line);
        Peer {
            child,
            stdin,
            rx,
            ep,
            remote,
        }
    }

    fn next(&self) -> String {
        self.rx.recv_timeout(T).expect("child went silent")
    }

    fn say(&mut self, s: &str) {
        writeln!(self.stdin, "{s}").unwrap();
        self.stdin.flush().unwrap();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Outcome {
    /// Packets the requester sent for the three messages.
    tx: u64,
    /// Of them, through a same-host ring; and packets taken from rings.
    ring_tx: u64,
    ring_rx: u64,
    path: DataPath,
    fallbacks: u64,
    /// What the child reported: its QP's data path and declines sent.
    child: String,
}

/// WRITE, READ then SEND of 1 MiB each from this process (`me`) to a child
/// with transport `peer`, all data checked on both sides.
fn three_messages(me: &str, peer: &str) -> Outcome {
    three_messages_with(me, Peer::spawn(peer))
}

fn three_messages_with(me: &str, mut p: Peer) -> Outcome {
    let ctx = Context::open_soft(config(me)).unwrap();
    let (pd, cq, qp) = common::rc_qp(&ctx, ConnectOpts::default());
    let ep = qp.endpoint().unwrap().to_wire();
    p.say(&format!("EP {ep}"));
    let qp = qp.connect(&p.ep).unwrap().ready_to_send().unwrap();
    assert_eq!(p.next(), "READY");
    let buf = pd.alloc_buf(3 * LEN, Access::all()).unwrap();
    buf.write(0, &pattern(0xa5, LEN)).unwrap();
    buf.write(2 * LEN, &pattern(0x3c, LEN)).unwrap();
    let s = ctx.soft().unwrap();
    let c0 = s.counters();
    qp.write(1, &buf, 0..LEN, p.remote).unwrap();
    let from = RemoteBuf {
        addr: p.remote.addr + LEN as u64,
        ..p.remote
    };
    qp.read(2, &buf, LEN..2 * LEN, from).unwrap();
    qp.send(3, &buf, 2 * LEN..3 * LEN).unwrap();
    let w = cq.wait(3, T).unwrap();
    assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
    let c = s.counters();
    let tx = c.tx_packets - c0.tx_packets;
    assert!(
        buf.to_vec(LEN..2 * LEN).unwrap() == pattern(0x5a, LEN),
        "READ data"
    );
    let child = p.next();
    let child = child
        .strip_prefix("CHILD-OK ")
        .expect("child failed")
        .to_string();
    p.say("BYE");
    let st = s.qp_stats(qp.qpn()).unwrap();
    Outcome {
        tx,
        ring_tx: c.ring_tx_packets - c0.ring_tx_packets,
        ring_rx: c.ring_rx_packets - c0.ring_rx_packets,
        path: s.qp_data_path(qp.qpn()).unwrap(),
        fallbacks: st.same_host_fallbacks,
        child,
    }
}

/// `auto` (the default) on both sides: the same vendor requests and
/// copies, and every packet each way goes through a ring instead of the
/// socket.
#[test]
fn auto_on_both_sides_carries_every_packet_through_rings() {
    let _one = one_at_a_time();
    let o = three_messages("auto", "auto");
    assert!(o.tx <= 8, "{} packets for 3 MiB", o.tx);
    assert_eq!(o.ring_tx, o.tx, "every packet through the ring");
    assert!(o.ring_rx >= 1, "the responses came back through a ring");
    assert_eq!(o.path, DataPath::SameHost);
    assert_eq!(o.fallbacks, 0);
    assert_eq!(o.child, "same-host 0");
}

/// A peer that takes no rings (`udp`) gets datagrams, every byte: a
/// same-host request travels only in a ring (issue 34), so none is sent.
#[test]
fn auto_to_a_peer_without_rings_sends_every_byte_as_datagrams() {
    let _one = one_at_a_time();
    let o = three_messages("auto", "udp");
    assert_eq!((o.ring_tx, o.ring_rx), (0, 0));
    assert!(o.tx >= 2048, "{} datagrams", o.tx);
    assert_eq!(o.path, DataPath::Udp);
    assert_eq!(o.fallbacks, 0, "no request was tried");
    assert_eq!(o.child, "udp 0");
}

#[test]
fn forced_udp_sends_every_byte_as_datagrams() {
    let _one = one_at_a_time();
    let o = three_messages("udp", "udp");
    // WRITE and SEND: 1024 packets each at the 1024-byte path MTU.
    assert!(o.tx >= 2048, "{} datagrams", o.tx);
    assert_eq!(o.path, DataPath::Udp);
    assert_eq!(o.child, "udp 0");
}

/// `PR_SET_DUMPABLE`: while false, only a process with CAP_SYS_PTRACE
/// may reach this one's memory.
fn set_dumpable(on: bool) {
    // SAFETY: prctl with integer arguments only.
    let r = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, libc::c_ulong::from(on), 0, 0, 0) };
    assert_eq!(r, 0, "prctl(PR_SET_DUMPABLE)");
}

/// A responder the kernel does not let reach the requester's memory
/// declines its first request; the requester falls back to packets, in the
/// same ring, and every byte arrives. The child runs without
/// CAP_SYS_PTRACE, as any unprivileged process does; the kernel then
/// refuses it this process's memory — as root because this process holds
/// capabilities the child lacks (commoncap's ptrace check), as another
/// user because this process is made non-dumpable.
#[test]
fn a_responder_the_kernel_refuses_declines_and_packets_deliver() {
    let _one = one_at_a_time();
    // As root, the child keeps uid 0 (the same user: a ring) but none of
    // the capabilities.
    let wrapper: &[&str] = if rdmakit_testkit::is_root() {
        &[
            "setpriv",
            "--inh-caps=-all",
            "--bounding-set=-sys_ptrace",
            "--",
        ]
    } else {
        &[]
    };
    let p = Peer::spawn_with("auto", wrapper);
    set_dumpable(false);
    let o = three_messages_with("auto", p);
    set_dumpable(true);
    assert_eq!(o.fallbacks, 1, "one decline, then packets on that QP");
    assert_eq!(o.path, DataPath::Udp);
    assert!(o.tx >= 2048, "{} packets", o.tx);
    assert_eq!(o.ring_tx, o.tx, "the packets still go through the ring");
    assert_eq!(o.child, "udp 1");
}

#[test]
fn a_killed_responder_ends_in_retry_exceeded() {
    let _one = one_at_a_time();
    let mut p = Peer::spawn("auto:die");
    let ctx = Context::open_soft(config("auto")).unwrap();
    let opts = ConnectOpts {
        timeout: 10,
        retry_cnt: 2,
        ..ConnectOpts::default()
    };
    let (pd, cq, qp) = common::rc_qp(&ctx, opts);
    let ep = qp.endpoint().unwrap().to_wire();
    p.say(&format!("EP {ep}"));
    let qp = qp.connect(&p.ep).unwrap().ready_to_send().unwrap();
    assert_eq!(p.next(), "READY");
    p.child.kill().unwrap();
    p.child.wait().unwrap();
    let buf = pd.alloc_buf(LEN, Access::all()).unwrap();
    qp.write(1, &buf, 0..LEN, p.remote).unwrap();
    let w = cq.wait(1, T).unwrap();
    assert_eq!(w[0].status, WcStatus::RetryExcErr);
    let st = ctx.soft().unwrap().qp_stats(qp.qpn()).unwrap();
    assert!(st.same_host_sent >= 1, "the request went the same-host way");
}
