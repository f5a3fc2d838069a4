//! The bytes the engine emits are pinned: deterministic simulator runs (RC,
//! UC and UD; every opcode the engine sends; loss, reordering and
//! duplication; RNR, a NAK that ends the connection, retry exhaustion, the
//! same-host request and its decline) are recorded as captures in
//! `tests/data/emitted/` and every run must send exactly those packets, in
//! that order, from the same node at the same virtual time. The completions
//! and counters of each run are pinned beside them (insta snapshots).
//!
//! This is the proof that a refactor of the engine (its codec, its parts)
//! changed no behaviour. The captures are pcap files (LINKTYPE_IPV4,
//! nanosecond timestamps of the virtual clock; node n is 10.0.0.n+1, UDP
//! 4791, with a valid ICRC), so `rdmakit pcap` or tcpdump show them.
//! `RDMAKIT_UPDATE_FIXTURES=1` rewrites them (after a change that is meant
//! to change the bytes).

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use rdmakit_proto::sim::{LinkConfig, Network, QpRef};
use rdmakit_proto::testing::{rts_qp, HookedMem, SameHostHook};
use rdmakit_proto::{
    Access, AddressHandle, Instant, MemTable, Memory, Mtu, Pd, PeerCopy, PeerError, Qp, QpType,
    RecvWr, SendOp, SendWr, Sge, UdDest, Wc,
};
use rdmakit_wire::{icrc, ipv4, roce, udp};

const BUF: u64 = 0x10_0000;
const LEN: usize = 64 * 1024;
/// The keys of the one region each node registers (`MemTable`'s first).
const LKEY: u32 = 0x11;
const RKEY: u32 = 0x22;

/// One recorded run: its packets and what the two QPs saw.
struct Run {
    net: Network,
    a: QpRef,
    b: QpRef,
}

fn lossy(mtu: Mtu) -> LinkConfig {
    LinkConfig {
        mtu,
        latency: Duration::from_micros(3),
        jitter: Duration::from_micros(2),
        reorder: 0.05,
        loss: 0.05,
        duplicate: 0.03,
        timeout: 8,
        ..LinkConfig::default()
    }
}

fn start(cfg: LinkConfig, seed: u64, t: QpType) -> Run {
    let mut net = Network::new(cfg, seed);
    let (a, b) = net.connected_pair(t);
    net.trace = Some(Vec::new());
    for q in [a, b] {
        assert_eq!(net.register_all(q, BUF, LEN), (LKEY, RKEY));
    }
    net.fill(a, LKEY, |k| (k * 7 + 1) as u8);
    net.fill(b, LKEY, |k| (k * 13 + 5) as u8);
    Run { net, a, b }
}

fn sge(off: u64, length: u32) -> Vec<Sge> {
    vec![Sge {
        addr: BUF + off,
        length,
        lkey: LKEY,
    }]
}

impl Run {
    fn recv(&mut self, at: QpRef, wr_id: u64, off: u64, len: u32) {
        self.net
            .qp_mut(at)
            .post_recv(RecvWr {
                wr_id,
                sg_list: sge(off, len),
            })
            .unwrap();
    }

    fn send(&mut self, at: QpRef, wr: SendWr) {
        self.net.qp_mut(at).post_send(wr).unwrap();
    }
}

/// Mixed RC operations both ways over a lossy link: SEND (0 bytes to several
/// MTUs), SEND with immediate, WRITE, WRITE with immediate, READ, both
/// atomics, unsignaled WRs (their ACK probe), a solicited SEND.
fn rc_mixed_lossy() -> Run {
    let mut r = start(lossy(Mtu::Mtu256), 7, QpType::Rc);
    let (a, b) = (r.a, r.b);
    let rk = RKEY;
    for i in 0..12 {
        r.recv(b, 100 + i, 0x8000 + i * 2048, 2048);
        r.recv(a, 200 + i, 0x8000 + i * 2048, 2048);
    }
    let ops = [
        SendOp::Send,
        SendOp::SendWithImm { imm: 0x0102_0304 },
        SendOp::Write {
            remote_addr: BUF + 0x2000,
            rkey: rk,
        },
        SendOp::WriteWithImm {
            remote_addr: BUF + 0x3000,
            rkey: rk,
            imm: 0xdead_beef,
        },
        SendOp::Read {
            remote_addr: BUF + 0x4000,
            rkey: rk,
        },
        SendOp::FetchAdd {
            remote_addr: BUF + 0x5000,
            rkey: rk,
            add: 3,
        },
        SendOp::CompareSwap {
            remote_addr: BUF + 0x5008,
            rkey: rk,
            compare: 0,
            swap: 9,
        },
    ];
    let lens = [0u32, 1, 255, 256, 257, 700, 1024];
    for round in 0..3u64 {
        for (i, op) in ops.iter().enumerate() {
            let atomic = matches!(op, SendOp::FetchAdd { .. } | SendOp::CompareSwap { .. });
            let len = if atomic {
                8
            } else {
                lens[(i + round as usize) % lens.len()]
            };
            let mut wr = SendWr::new(round * 10 + i as u64, *op, sge(0x100 * i as u64, len));
            wr.signaled = (i + round as usize) % 3 != 0;
            wr.solicited = i == 0;
            r.send(a, wr);
        }
        // The other way: a SEND and a READ.
        r.send(b, SendWr::new(500 + round, SendOp::Send, sge(0x600, 300)));
        let read = SendOp::Read {
            remote_addr: BUF + 0x7000,
            rkey: RKEY,
        };
        r.send(b, SendWr::new(600 + round, read, sge(0x1000, 600)));
        r.net.run_until_idle();
    }
    // An unsignaled tail and nothing after it: the ACK probe.
    let mut wr = SendWr::new(99, SendOp::Send, sge(0, 40));
    wr.signaled = false;
    r.send(a, wr);
    r.net.run_until_idle();
    r
}

/// A SEND without a receive WQE: RNR NAKs until one is posted.
fn rc_rnr() -> Run {
    let mut r = start(
        LinkConfig {
            min_rnr_timer: 1,
            rnr_retry: 7,
            ..LinkConfig::default()
        },
        1,
        QpType::Rc,
    );
    let (a, b) = (r.a, r.b);
    r.send(a, SendWr::new(1, SendOp::Send, sge(0, 1500)));
    r.net.run_until(Instant::ZERO + Duration::from_micros(50));
    r.recv(b, 2, 0x8000, 4096);
    r.net.run_until_idle();
    r
}

/// A WRITE under a bad R_Key: NAK (remote access error), ERR, flushes.
fn rc_remote_access_nak() -> Run {
    let mut r = start(LinkConfig::default(), 1, QpType::Rc);
    let (a, b) = (r.a, r.b);
    r.recv(b, 7, 0x8000, 64);
    let bad = SendOp::Write {
        remote_addr: BUF,
        rkey: 0xbad,
    };
    r.send(a, SendWr::new(1, SendOp::Send, sge(0, 10)));
    r.send(a, SendWr::new(2, bad, sge(0, 100)));
    r.send(a, SendWr::new(3, SendOp::Send, sge(0, 10)));
    r.net.run_until_idle();
    r
}

/// Every response lost: retries, then RETRY_EXC_ERR.
fn rc_retry_exhausted() -> Run {
    let mut r = start(
        LinkConfig {
            timeout: 4,
            retry_cnt: 2,
            ..LinkConfig::default()
        },
        1,
        QpType::Rc,
    );
    let (a, b) = (r.a, r.b);
    let from_b = b.node;
    r.net.filter = Some(Box::new(move |from, _| from == from_b));
    r.recv(b, 1, 0x8000, 4096);
    r.send(a, SendWr::new(1, SendOp::Send, sge(0, 2000)));
    r.net.run_until_idle();
    r
}

/// A SEND with invalidate of the responder's second region, then a local
/// invalidate the memory refuses (MW_BIND_ERR, the QP goes to ERR).
fn rc_send_with_inv_then_bad_local_inv() -> Run {
    let mut r = start(LinkConfig::default(), 1, QpType::Rc);
    let (a, b) = (r.a, r.b);
    let (_, rkey2) = r.net.register_all(b, 2 * BUF, 4096);
    r.recv(b, 1, 0x8000, 64);
    r.send(
        a,
        SendWr::new(1, SendOp::SendWithInv { rkey: rkey2 }, sge(0, 20)),
    );
    r.send(
        a,
        SendWr::new(2, SendOp::LocalInv { rkey: 0x77 }, Vec::new()),
    );
    r.send(a, SendWr::new(3, SendOp::Send, sge(0, 20)));
    r.net.run_until_idle();
    r
}

/// A memory whose buffers have host addresses (the same-host path's
/// precondition) and whose copies succeed (`accept`) or are declined.
struct HostAddrs {
    accept: bool,
}

impl SameHostHook for HostAddrs {
    fn host_addrs(&self) -> bool {
        true
    }
    fn peer_copy(&mut self, t: &MemTable, copy: &PeerCopy<'_>) -> Result<u64, PeerError> {
        for &(k, a, n) in copy.local {
            t.check(copy.pd, k, a, n, copy.need)?;
        }
        if !self.accept {
            return Err(PeerError::Declined("test"));
        }
        Ok(copy.local.iter().map(|l| l.2).sum())
    }
}

type HostMem = HookedMem<HostAddrs>;

/// Two QPs connected back to back (no simulator: its memory has no host
/// addresses), the packets of both recorded at time zero.
struct Direct {
    qp: [Qp; 2],
    mem: [HostMem; 2],
    trace: Vec<(usize, Instant, Vec<u8>)>,
}

fn direct(t: QpType, mtu: Mtu, same_host: bool, accept: bool) -> Direct {
    let side = |qpn, dqpn| {
        let access = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
        let q = rts_qp(qpn, dqpn, t, mtu, access, same_host);
        let mut t = MemTable::new();
        assert_eq!(t.register(Pd(1), BUF, LEN, Access::all()), (LKEY, RKEY));
        let hook = HostAddrs { accept };
        (q, HookedMem { t, hook })
    };
    let (qa, ma) = side(0x11, 0x22);
    let (qb, mb) = side(0x22, 0x11);
    Direct {
        qp: [qa, qb],
        mem: [ma, mb],
        trace: Vec::new(),
    }
}

impl Direct {
    /// Moves packets both ways until both sides are quiet, at time zero.
    fn run(&mut self) {
        self.run_mangled(&mut Rng(0), 0);
    }

    /// Moves packets both ways, mangling one in `one_in` on its way (a
    /// bit flipped, cut short, or bytes added; the engine sees it, as if
    /// its ICRC had held), and fires timers when both sides are quiet,
    /// until nothing moves and no timer runs.
    fn run_mangled(&mut self, rng: &mut Rng, one_in: u64) {
        let mut buf = vec![0u8; 4096];
        let mut now = Instant::ZERO;
        for _ in 0..10_000 {
            let mut moved = false;
            for from in [0, 1] {
                let to = 1 - from;
                while let Some(t) = self.qp[from].poll_transmit(now, &mut buf, &mut self.mem[from])
                {
                    let mut bytes = buf[..t.len].to_vec();
                    self.trace.push((from, now, bytes.clone()));
                    if one_in > 0 && rng.below(one_in) == 0 {
                        mangle(rng, &mut bytes);
                    }
                    self.qp[to].handle_packet(now, &bytes, &mut self.mem[to]);
                    moved = true;
                }
            }
            if moved {
                continue;
            }
            let Some(next) = self.qp.iter().filter_map(Qp::poll_timeout).min() else {
                return;
            };
            now = now.max(next);
            for q in &mut self.qp {
                q.handle_timeout(now);
            }
        }
        panic!("no end after 10,000 rounds");
    }
}

/// xorshift64: the test's deterministic choices.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Flips a bit, cuts the packet short or adds bytes to it.
fn mangle(rng: &mut Rng, b: &mut Vec<u8>) {
    match rng.below(4) {
        0 | 1 => {
            // Mostly in the headers, where the checks are.
            let span = b.len().min(if rng.below(2) == 0 { 32 } else { usize::MAX }) as u64;
            let i = rng.below(span) as usize;
            b[i] ^= 1 << rng.below(8);
        }
        2 => b.truncate(rng.below(b.len() as u64) as usize),
        _ => {
            for _ in 0..=rng.below(5) {
                b.push(rng.below(256) as u8);
            }
        }
    }
}

/// RC, UC or UD traffic both ways (every operation the type has, 0 bytes to
/// several MTUs), one packet in five mangled on the way: the engine's
/// answers to truncated packets, bad pad counts, header versions, opcodes,
/// QPNs, P_Keys, PSNs and syndromes are pinned with the rest.
fn mangled(t: QpType, seed: u64) -> Direct {
    let mut d = direct(t, Mtu::Mtu256, false, false);
    for (q, peer) in [(0, 1), (1, 0)] {
        for i in 0..16u64 {
            d.qp[q]
                .post_recv(RecvWr {
                    wr_id: 100 + i,
                    sg_list: sge(0x8000 + i * 2048, 2048),
                })
                .unwrap();
        }
        let mut ops = vec![
            (SendOp::Send, 700u32),
            (SendOp::SendWithImm { imm: 5 }, 100),
            (SendOp::Send, 0),
        ];
        if t != QpType::Ud {
            let w = |o| SendOp::Write {
                remote_addr: BUF + o,
                rkey: RKEY,
            };
            ops.push((w(0x2000), 600));
            ops.push((
                SendOp::WriteWithImm {
                    remote_addr: BUF + 0x3000,
                    rkey: RKEY,
                    imm: 6,
                },
                256,
            ));
        }
        if t == QpType::Rc {
            let read = SendOp::Read {
                remote_addr: BUF + 0x4000,
                rkey: RKEY,
            };
            ops.push((read, 900));
            ops.push((
                SendOp::FetchAdd {
                    remote_addr: BUF + 0x5000,
                    rkey: RKEY,
                    add: 1,
                },
                8,
            ));
            ops.push((
                SendOp::CompareSwap {
                    remote_addr: BUF + 0x5008,
                    rkey: RKEY,
                    compare: 0,
                    swap: 2,
                },
                8,
            ));
        }
        // UD: messages within the MTU, and more of them.
        let (rounds, cap) = if t == QpType::Ud {
            (5, 250)
        } else {
            (2, u32::MAX)
        };
        for round in 0..rounds {
            for (i, &(op, len)) in ops.iter().enumerate() {
                let len = len.min(cap);
                let mut wr = SendWr::new(round * 10 + i as u64, op, sge(0x100 * i as u64, len));
                if t == QpType::Ud {
                    wr.ud = Some(UdDest {
                        ah: AddressHandle(peer),
                        remote_qpn: [0x11, 0x22][peer as usize],
                        remote_qkey: 0x1111_1111,
                    });
                }
                d.qp[q].post_send(wr).unwrap();
            }
        }
    }
    d.run_mangled(&mut Rng(seed), if t == QpType::Ud { 2 } else { 5 });
    d
}

/// Large RC messages as same-host requests (one vendor packet each for a
/// WRITE, a SEND and a READ): executed, or declined (NAK code 0x1e) and
/// sent again as packets.
fn rc_same_host(accept: bool) -> Direct {
    let mut d = direct(QpType::Rc, Mtu::Mtu1024, true, accept);
    d.qp[1]
        .post_recv(RecvWr {
            wr_id: 1,
            sg_list: sge(0x8000, 8192),
        })
        .unwrap();
    let write = SendOp::Write {
        remote_addr: BUF + 0x2000,
        rkey: RKEY,
    };
    let read = SendOp::Read {
        remote_addr: BUF,
        rkey: RKEY,
    };
    for (i, (op, len)) in [(write, 3000), (SendOp::Send, 2500), (read, 2100)]
        .into_iter()
        .enumerate()
    {
        let wr = SendWr::new(i as u64 + 1, op, sge(0x4000 * i as u64, len));
        d.qp[0].post_send(wr).unwrap();
    }
    d.run();
    d
}

/// UC SENDs and WRITEs over a lossy link (gaps drop the rest of a message).
fn uc_lossy() -> Run {
    let mut r = start(lossy(Mtu::Mtu256), 3, QpType::Uc);
    let (a, b) = (r.a, r.b);
    let rk = RKEY;
    for i in 0..10u64 {
        r.recv(b, 100 + i, 0x8000 + i * 2048, 2048);
    }
    for i in 0..10u64 {
        let len = [0u32, 100, 256, 600, 1000][i as usize % 5];
        let op = match i % 3 {
            0 => SendOp::Send,
            1 => SendOp::WriteWithImm {
                remote_addr: BUF + 0x2000,
                rkey: rk,
                imm: i as u32,
            },
            _ => SendOp::Write {
                remote_addr: BUF + 0x3000,
                rkey: rk,
            },
        };
        r.send(a, SendWr::new(i, op, sge(i * 64, len)));
    }
    r.net.run_until_idle();
    r
}

/// UD SENDs with and without immediate data, one too large for the port MTU
/// and one under a privileged Q_Key.
fn ud() -> Run {
    let mut r = start(LinkConfig::default(), 1, QpType::Ud);
    let (a, b) = (r.a, r.b);
    for i in 0..4u64 {
        r.recv(b, 100 + i, 0x8000 + i * 2048, 2048);
    }
    for (i, (op, len, qkey)) in [
        (SendOp::Send, 100u32, 0x1111_1111u32),
        (SendOp::SendWithImm { imm: 42 }, 0, 0x1111_1111),
        (SendOp::Send, 2000, 0x1111_1111),
        (SendOp::Send, 64, 0x8000_0000),
    ]
    .into_iter()
    .enumerate()
    {
        let mut wr = SendWr::new(i as u64, op, sge(0, len));
        wr.ud = Some(UdDest {
            ah: AddressHandle(b.node as u32),
            remote_qpn: 0x22,
            remote_qkey: qkey,
        });
        r.send(a, wr);
    }
    r.net.run_until_idle();
    r
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/emitted")
}

/// The run's packets as a pcap (nanosecond, LINKTYPE_IPV4) file.
fn pcap(trace: &[(usize, Instant, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&228u32.to_le_bytes()); // LINKTYPE_IPV4
    for (from, at, bytes) in trace {
        let frame = datagram(*from, 1 - *from, bytes);
        let ns = (*at - Instant::ZERO).as_nanos() as u64;
        out.extend_from_slice(&((ns / 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((ns % 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame);
    }
    out
}

/// IPv4 + UDP 4791 + the transport packet + its ICRC.
fn datagram(from: usize, to: usize, transport: &[u8]) -> Vec<u8> {
    let udp_len = udp::HEADER_LEN + transport.len() + roce::ICRC_LEN;
    let mut d = vec![0u8; ipv4::HEADER_LEN + udp_len];
    let ip = ipv4::Repr::udp(
        Ipv4Addr::new(10, 0, 0, from as u8 + 1),
        Ipv4Addr::new(10, 0, 0, to as u8 + 1),
        udp_len,
    );
    ip.emit(&mut ipv4::Packet::new_unchecked(&mut d[..ipv4::HEADER_LEN]));
    udp::Repr {
        src_port: 0xc000 | from as u16,
        dst_port: rdmakit_wire::ROCEV2_UDP_PORT,
        payload_len: transport.len() + roce::ICRC_LEN,
    }
    .emit(&mut udp::Packet::new_unchecked(
        &mut d[ipv4::HEADER_LEN..ipv4::HEADER_LEN + udp::HEADER_LEN],
    ));
    let at = ipv4::HEADER_LEN + udp::HEADER_LEN;
    d[at..at + transport.len()].copy_from_slice(transport);
    let crc = icrc::compute_parts(&d[..ipv4::HEADER_LEN], &d[ipv4::HEADER_LEN..at], transport)
        .expect("an engine packet has a BTH");
    let n = d.len();
    d[n - roce::ICRC_LEN..].copy_from_slice(&crc.to_le_bytes());
    d
}

/// (time in ns, frame) of each record of a pcap this test wrote.
fn records(pcap: &[u8]) -> Vec<(u64, &[u8])> {
    let mut v = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let u = |o: usize| u32::from_le_bytes(pcap[o..o + 4].try_into().unwrap());
        let ns = u64::from(u(at)) * 1_000_000_000 + u64::from(u(at + 4));
        let len = u(at + 8) as usize;
        v.push((ns, &pcap[at + 16..at + 16 + len]));
        at += 16 + len;
    }
    v
}

/// One line per packet: the decoded transport packet.
fn describe(frame: &[u8]) -> String {
    let ip = ipv4::HEADER_LEN + udp::HEADER_LEN;
    let from = frame.get(15).copied().unwrap_or(0);
    match frame
        .get(ip..)
        .map(roce::Packet::new_checked)
        .and_then(|p| p.ok())
        .and_then(|p| roce::Repr::parse(&p).ok())
    {
        Some(r) => format!("from 10.0.0.{from}: {r}"),
        None => format!("from 10.0.0.{from}: {frame:02x?}"),
    }
}

/// Compares the run's packets with its capture (or writes the capture),
/// and what the QPs saw with the snapshot.
fn check(name: &str, run: Run) {
    let Run { mut net, a, b } = run;
    let trace = net.trace.take().expect("traced");
    let mut s = String::new();
    for (label, q) in [("a", a), ("b", b)] {
        let wcs = net.take_completions(q);
        describe_qp(&mut s, label, net.qp(q), &wcs);
    }
    let _ = writeln!(s, "net: {:?}", net.stats);
    check_bytes(name, &trace, s);
}

fn check_direct(name: &str, mut d: Direct) {
    let mut s = String::new();
    for (label, q) in [("a", 0), ("b", 1)] {
        let wcs: Vec<_> = std::iter::from_fn(|| d.qp[q].poll_completion()).collect();
        describe_qp(&mut s, label, &d.qp[q], &wcs);
    }
    check_bytes(name, &d.trace, s);
}

fn describe_qp(s: &mut String, label: &str, qp: &Qp, wcs: &[Wc]) {
    let _ = writeln!(s, "{label}: state {:?}", qp.state());
    for wc in wcs {
        let _ = writeln!(
            s,
            "  wc {} {:?} {:?} len {} imm {:?} inv {:?} src_qp {:#x} grh {}",
            wc.wr_id,
            wc.status,
            wc.opcode,
            wc.byte_len,
            wc.imm_data,
            wc.invalidated_rkey,
            wc.src_qp,
            wc.grh
        );
    }
    let _ = writeln!(s, "  {:?}", qp.stats());
}

fn check_bytes(name: &str, trace: &[(usize, Instant, Vec<u8>)], mut s: String) {
    let got = pcap(trace);
    let path = data_dir().join(format!("{name}.pcap"));
    if std::env::var_os("RDMAKIT_UPDATE_FIXTURES").is_some() {
        std::fs::create_dir_all(data_dir()).unwrap();
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (RDMAKIT_UPDATE_FIXTURES=1 writes it)",
            path.display()
        )
    });
    if got != want {
        let (g, w) = (records(&got), records(&want));
        let i = g.iter().zip(&w).take_while(|(x, y)| x == y).count();
        let show = |r: &[(u64, &[u8])]| {
            r.get(i).map_or("nothing".to_string(), |(t, f)| {
                format!("at {t} ns {}", describe(f))
            })
        };
        panic!(
            "{name}: packet {} of {} differs from {} of the capture ({} packets)\n got: {}\nwant: {}",
            i + 1,
            g.len(),
            path.display(),
            w.len(),
            show(&g),
            show(&w),
        );
    }
    let _ = writeln!(s, "packets: {}", trace.len());
    insta::assert_snapshot!(name, s);
}

#[test]
fn rc_mixed_lossy_bytes_are_pinned() {
    check("rc_mixed_lossy", rc_mixed_lossy());
}

#[test]
fn rc_rnr_bytes_are_pinned() {
    check("rc_rnr", rc_rnr());
}

#[test]
fn rc_remote_access_nak_bytes_are_pinned() {
    check("rc_remote_access_nak", rc_remote_access_nak());
}

#[test]
fn rc_retry_exhausted_bytes_are_pinned() {
    check("rc_retry_exhausted", rc_retry_exhausted());
}

#[test]
fn rc_send_with_inv_then_bad_local_inv_bytes_are_pinned() {
    check(
        "rc_send_with_inv_then_bad_local_inv",
        rc_send_with_inv_then_bad_local_inv(),
    );
}

#[test]
fn rc_same_host_executed_bytes_are_pinned() {
    check_direct("rc_same_host_executed", rc_same_host(true));
}

#[test]
fn rc_same_host_declined_bytes_are_pinned() {
    check_direct("rc_same_host_declined", rc_same_host(false));
}

#[test]
fn uc_lossy_bytes_are_pinned() {
    check("uc_lossy", uc_lossy());
}

#[test]
fn rc_mangled_bytes_are_pinned() {
    check_direct("rc_mangled", mangled(QpType::Rc, 0x5eed));
}

#[test]
fn uc_mangled_bytes_are_pinned() {
    check_direct("uc_mangled", mangled(QpType::Uc, 0x5eed));
}

#[test]
fn ud_mangled_bytes_are_pinned() {
    check_direct("ud_mangled", mangled(QpType::Ud, 0x5eed));
}

#[test]
fn ud_bytes_are_pinned() {
    check("ud", ud());
}
