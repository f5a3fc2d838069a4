//! A deterministic network of engines for tests and benchmarks.
//!
//! Nodes own a [`MemTable`] and some [`Qp`]s. Time is virtual and only moves
//! when [`Network::step`] moves it to the next event (a packet arrival or a
//! QP deadline), so a run is a pure function of its configuration and seed
//! and every failure replays.
//!
//! Each link applies, from one seeded generator: latency plus uniform jitter
//! (which reorders), an extra reorder delay with some probability, loss,
//! duplication and corruption. Every packet travels with its ICRC
//! (`rdmakit_wire::icrc` over a synthetic IPv4/UDP 4791 encapsulation); a
//! corrupted packet fails it at the receiver and is dropped before the engine
//! sees it, as a NIC drops a packet whose ICRC does not validate. (A flip in
//! BTH byte 4 — FECN, BECN, reserved — is not covered by the ICRC and is
//! delivered, as on a real network.)
//!
//! An [`AddressHandle`] is the index of the destination node; the receiving
//! node hands the packet to the QP named by the BTH destination QPN, with
//! [`Arrival::src`] the sending node's and [`Arrival::ce`] the packet's ECN
//! mark.
//!
//! For congestion, two more stages (both off unless set): every node's NIC
//! sends at a line rate ([`Network::set_nic_rate`]: packets wait their
//! turn, nothing is dropped), and the link into one node can be a
//! [`Bottleneck`] ([`Network::set_bottleneck`]): a FIFO served at its rate,
//! with a queue of fixed size in bytes (tail drop) that marks ECN-capable
//! packets CE when more than `mark_above` bytes wait as they arrive (a
//! DCTCP-style step, on enqueue, as the test bed's tc-BPF marker does). The
//! link latency follows the bottleneck. Sizes on the wire count the
//! Ethernet, IPv4 and UDP headers and the ICRC.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;
use std::time::Duration;

use rdmakit_wire::{bth, ipv4, roce, udp};

use crate::cc::Rate;
use crate::engine::{Arrival, Qp, QpConfig};
use crate::mem::{MemTable, Pd};
use crate::qp::{Access, AddressHandle, Mtu, QpAttr, QpState, QpType};
use crate::time::Instant;
use crate::wr::Wc;

/// Link behaviour, shared by every link of a [`Network`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConfig {
    /// One-way latency.
    pub latency: Duration,
    /// Extra uniform delay in `0..jitter` per packet (links stay FIFO
    /// otherwise: a packet never overtakes an earlier one unless picked by
    /// `reorder`).
    pub jitter: Duration,
    /// Probability that a packet is delayed by `reorder_delay` more.
    pub reorder: f64,
    /// Extra delay of a reordered packet.
    pub reorder_delay: Duration,
    /// Probability that a packet is lost.
    pub loss: f64,
    /// Probability that a packet is delivered twice.
    pub duplicate: f64,
    /// Probability that one bit of a packet is flipped.
    pub corrupt: f64,
    /// Path MTU given to QPs that [`Network::connected_pair`] brings up.
    pub mtu: Mtu,
    /// Largest transport packet (BTH through pad) the link carries; larger
    /// ones are dropped, as a switch drops frames above its MTU. `None` =
    /// no limit.
    pub link_mtu: Option<usize>,
    /// Local ACK timeout exponent for those QPs.
    pub timeout: u8,
    /// retry_cnt for those QPs (7 is seven retries: only rnr_retry 7 is
    /// infinite).
    pub retry_cnt: u8,
    /// rnr_retry for those QPs (7 = infinite).
    pub rnr_retry: u8,
    /// min_rnr_timer code for those QPs.
    pub min_rnr_timer: u8,
}

impl Default for LinkConfig {
    fn default() -> LinkConfig {
        LinkConfig {
            latency: Duration::from_micros(2),
            jitter: Duration::ZERO,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(5),
            loss: 0.0,
            duplicate: 0.0,
            corrupt: 0.0,
            mtu: Mtu::Mtu1024,
            link_mtu: None,
            timeout: 8, // ~1 ms
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1, // 10 µs
        }
    }
}

/// Counters of the simulated links.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Packets handed to the network by engines.
    pub sent: u64,
    /// Packets delivered to an engine.
    pub delivered: u64,
    /// Packets the link lost.
    pub lost: u64,
    /// Extra copies the link made.
    pub duplicated: u64,
    /// Packets corrupted by the link (and then dropped by the ICRC check).
    pub corrupted: u64,
    /// Packets dropped by a test's filter.
    pub filtered: u64,
    /// Packets for which no QP with that number exists on the node.
    pub no_qp: u64,
    /// Packets above the link MTU.
    pub oversize: u64,
}

/// A bottleneck link into one node: rate, queue, ECN marking threshold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bottleneck {
    /// Service rate.
    pub rate: Rate,
    /// Queue size in bytes: a packet that does not fit is dropped.
    pub queue: usize,
    /// ECT packets arriving while more than this many bytes wait are
    /// marked CE.
    pub mark_above: usize,
    /// Counters and per-sender bytes since the bottleneck was set.
    pub stats: BottleneckStats,
    /// When the queue is empty again (the last packet's departure).
    busy_until: Instant,
}

/// What a [`Bottleneck`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BottleneckStats {
    /// Packets that arrived at the queue.
    pub arrived: u64,
    /// Packets dropped because the queue was full.
    pub dropped: u64,
    /// Packets marked CE.
    pub marked: u64,
    /// Bytes on the wire forwarded, by sending node.
    pub bytes_from: Vec<u64>,
}

impl Bottleneck {
    /// A bottleneck of `rate` with a `queue`-byte queue marking above
    /// `mark_above` bytes.
    pub fn new(rate: Rate, queue: usize, mark_above: usize) -> Bottleneck {
        Bottleneck {
            rate,
            queue,
            mark_above,
            ..Bottleneck::default()
        }
    }

    /// Bytes forwarded from every node.
    pub fn bytes(&self) -> u64 {
        self.stats.bytes_from.iter().sum()
    }
}

/// Ethernet (14), IPv4 (20) and UDP (8) headers around a transport packet
/// and its ICRC.
const WIRE_OVERHEAD: usize = 14 + 20 + 8;

/// Time to send `bytes` at `rate`.
fn serialize(bytes: usize, rate: Rate) -> Duration {
    let bits = bytes as u64 * 8;
    Duration::from_nanos((bits * 1_000_000).div_ceil(rate.kbps().max(1)))
}

/// Identifies one QP of the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QpRef {
    /// Node index (also the node's [`AddressHandle`]).
    pub node: usize,
    /// Index of the QP on the node.
    pub qp: usize,
}

/// A QP and the completions polled from it so far.
#[derive(Debug)]
pub struct SimQp {
    /// The engine.
    pub qp: Qp,
    /// Completions not yet taken by the test.
    pub wcs: Vec<Wc>,
}

/// A host: memory and QPs.
#[derive(Debug, Default)]
pub struct Node {
    /// Registered memory of this host.
    pub mem: MemTable,
    /// QPs of this host.
    pub qps: Vec<SimQp>,
}

/// A test's verdict on a packet about to enter the network: `true` drops it.
pub type Filter = Box<dyn FnMut(usize, &roce::Repr<'_>) -> bool>;

struct InFlight {
    from: usize,
    to: usize,
    bytes: Vec<u8>,
    /// The IP TOS byte (DSCP, ECN).
    tos: u8,
    /// Still to pass the bottleneck into `to`.
    queued: bool,
}

/// SplitMix64: small, fast and good enough for fault injection.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next() >> 11) as f64) < p * (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// A deterministic network of engines.
pub struct Network {
    now: Instant,
    cfg: LinkConfig,
    rng: Rng,
    nodes: Vec<Node>,
    queue: BinaryHeap<Reverse<(Instant, u64)>>,
    slots: std::collections::HashMap<u64, InFlight>,
    seq: u64,
    link_last: std::collections::HashMap<(usize, usize), Instant>,
    /// Every NIC's line rate, if limited; when each NIC is free again.
    nic: Option<(Rate, Vec<Instant>)>,
    /// The bottleneck and the node behind it.
    bottleneck: Option<(usize, Bottleneck)>,
    buf: Vec<u8>,
    /// Link counters.
    pub stats: NetStats,
    /// Optional test hook called for every packet entering the network
    /// (with the sending node); returning `true` drops the packet.
    pub filter: Option<Filter>,
    /// Every packet entering the network, if set (sending node, time, bytes).
    pub trace: Option<Vec<(usize, Instant, Vec<u8>)>>,
}

impl core::fmt::Debug for Network {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Network")
            .field("now", &self.now)
            .field("cfg", &self.cfg)
            .field("nodes", &self.nodes.len())
            .field("in_flight", &self.queue.len())
            .field("stats", &self.stats)
            .finish()
    }
}

/// The ICRC of `transport` (BTH through pad) carried from node `from` to
/// node `to` in a synthetic IPv4 (10.0.0.from+1 -> 10.0.0.to+1) / UDP 4791
/// encapsulation, computed by `rdmakit_wire::icrc`.
fn icrc(from: usize, to: usize, transport: &[u8]) -> u32 {
    let ip = ipv4_header(from, to, transport.len());
    let mut udp = [0u8; udp::HEADER_LEN];
    udp::Repr {
        src_port: 0xc000 | (from as u16 & 0x3fff),
        dst_port: rdmakit_wire::ROCEV2_UDP_PORT,
        payload_len: transport.len() + roce::ICRC_LEN,
    }
    .emit(&mut udp::Packet::new_unchecked(&mut udp[..]));
    // A transport packet from an engine always has a full BTH; a shorter one
    // gets a value that no trailer matches by construction of the caller.
    rdmakit_wire::icrc::compute_parts(&ip, &udp, transport).unwrap_or(0)
}

/// The synthetic IPv4 header of a packet from node `from` to node `to`
/// (10.0.0.from+1 -> 10.0.0.to+1, UDP, ECT(0), DF, TTL 64, identification
/// 0, checksum 0: the ICRC masks it and nothing reads it).
fn ipv4_header(from: usize, to: usize, transport_len: usize) -> [u8; ipv4::HEADER_LEN] {
    let (f, d) = ((from as u8).wrapping_add(1), (to as u8).wrapping_add(1));
    let mut h = [0u8; ipv4::HEADER_LEN];
    let mut p = ipv4::Packet::new_unchecked(&mut h[..]);
    ipv4::Repr {
        dscp_ecn: 0x02,
        ..ipv4::Repr::udp(
            Ipv4Addr::new(10, 0, 0, f),
            Ipv4Addr::new(10, 0, 0, d),
            udp::HEADER_LEN + transport_len + roce::ICRC_LEN,
        )
    }
    .emit(&mut p);
    p.set_checksum(0);
    h
}

/// The 40-byte GRH area a UD receive gets for that packet: 20 zero bytes,
/// then the IPv4 header (how RoCEv2 over IPv4 fills it).
fn grh_area(from: usize, to: usize, transport_len: usize) -> [u8; 40] {
    let mut g = [0u8; 40];
    g[20..].copy_from_slice(&ipv4_header(from, to, transport_len));
    g
}

impl Network {
    /// An empty network with links configured by `cfg` and fault injection
    /// seeded by `seed`.
    pub fn new(cfg: LinkConfig, seed: u64) -> Network {
        Network {
            now: Instant::ZERO,
            cfg,
            rng: Rng(seed),
            nodes: Vec::new(),
            queue: BinaryHeap::new(),
            slots: std::collections::HashMap::new(),
            seq: 0,
            link_last: std::collections::HashMap::new(),
            nic: None,
            bottleneck: None,
            buf: vec![0; 4096 + 128],
            stats: NetStats::default(),
            filter: None,
            trace: None,
        }
    }

    /// Virtual now.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Link configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Changes the link behaviour from now on.
    pub fn set_config(&mut self, cfg: LinkConfig) {
        self.cfg = cfg;
    }

    /// Every node's NIC sends at `rate` from now on (packets wait their
    /// turn at the NIC; none is dropped there).
    pub fn set_nic_rate(&mut self, rate: Rate) {
        self.nic = Some((rate, Vec::new()));
    }

    /// Packets to `node` pass `b` from now on (replacing an earlier one).
    pub fn set_bottleneck(&mut self, node: usize, b: Bottleneck) {
        self.bottleneck = Some((node, b));
    }

    /// The bottleneck, if one is set.
    pub fn bottleneck(&self) -> Option<&Bottleneck> {
        self.bottleneck.as_ref().map(|(_, b)| b)
    }

    /// Adds an empty node and returns its index.
    pub fn add_node(&mut self) -> usize {
        self.nodes.push(Node::default());
        self.nodes.len() - 1
    }

    /// Adds a QP in RESET to `node`.
    ///
    /// # Panics
    /// If `node` does not exist (test code).
    pub fn add_qp(&mut self, node: usize, cfg: QpConfig) -> QpRef {
        let n = &mut self.nodes[node];
        n.qps.push(SimQp {
            qp: Qp::new(cfg),
            wcs: Vec::new(),
        });
        QpRef {
            node,
            qp: n.qps.len() - 1,
        }
    }

    /// Two new nodes with one QP each (QPN 0x11 and 0x22, PD 1), brought to
    /// RTS and connected to each other with this network's MTU, timeout and
    /// retry settings, all remote rights, 16 READ/atomic resources. UD QPs
    /// get Q_Key 0x1111_1111.
    pub fn connected_pair(&mut self, qp_type: QpType) -> (QpRef, QpRef) {
        let na = self.add_node();
        let nb = self.add_node();
        let mut ca = QpConfig::new(0x11, qp_type, Pd(1));
        ca.port_mtu = self.cfg.mtu;
        let mut cb = QpConfig::new(0x22, qp_type, Pd(1));
        cb.port_mtu = self.cfg.mtu;
        let a = self.add_qp(na, ca);
        let b = self.add_qp(nb, cb);
        self.connect(a, b);
        self.connect(b, a);
        (a, b)
    }

    /// Brings `local` from RESET to RTS connected to `remote` (for UD only
    /// the Q_Key matters) with the valid attribute masks for its type.
    ///
    /// # Panics
    /// If a modify fails (test code).
    pub fn connect(&mut self, local: QpRef, remote: QpRef) {
        self.connect_psn(local, remote, 0, 0);
    }

    /// [`Network::connect`] with explicit first send PSN and expected
    /// receive PSN (the peer must use the mirror values).
    ///
    /// # Panics
    /// If a modify fails (test code).
    pub fn connect_psn(&mut self, local: QpRef, remote: QpRef, sq_psn: u32, rq_psn: u32) {
        let rqpn = self.qp(remote).qpn();
        let c = self.cfg;
        let qp = self.qp_mut(local);
        let attr = QpAttr {
            path_mtu: c.mtu,
            qkey: 0x1111_1111,
            dest_qp_num: rqpn,
            qp_access_flags: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            ah: AddressHandle(remote.node as u32),
            timeout: c.timeout,
            retry_cnt: c.retry_cnt,
            rnr_retry: c.rnr_retry,
            min_rnr_timer: c.min_rnr_timer,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            sq_psn,
            rq_psn,
            ..QpAttr::default()
        };
        qp.bring_up(&attr, QpState::Rts)
            .expect("RESET->RTS bring-up");
    }

    /// A node.
    ///
    /// # Panics
    /// If it does not exist (test code).
    pub fn node(&self, r: QpRef) -> &Node {
        &self.nodes[r.node]
    }

    /// A node, mutably.
    ///
    /// # Panics
    /// If it does not exist (test code).
    pub fn node_mut(&mut self, r: QpRef) -> &mut Node {
        &mut self.nodes[r.node]
    }

    /// Registers `len` bytes at `addr` on `r`'s node in PD 1 with every
    /// access right; returns (lkey, rkey).
    pub fn register_all(&mut self, r: QpRef, addr: u64, len: usize) -> (u32, u32) {
        self.nodes[r.node]
            .mem
            .register(Pd(1), addr, len, Access::all())
    }

    /// Fills the region `lkey` of `r`'s node with `byte(offset)`.
    ///
    /// # Panics
    /// If the region does not exist (test code).
    pub fn fill(&mut self, r: QpRef, lkey: u32, byte: impl Fn(usize) -> u8) {
        let region = self.nodes[r.node].mem.region_mut(lkey).expect("region");
        for (k, x) in region.data.iter_mut().enumerate() {
            *x = byte(k);
        }
    }

    /// A QP.
    ///
    /// # Panics
    /// If it does not exist (test code).
    pub fn qp(&self, r: QpRef) -> &Qp {
        &self.nodes[r.node].qps[r.qp].qp
    }

    /// A QP, mutably.
    ///
    /// # Panics
    /// If it does not exist (test code).
    pub fn qp_mut(&mut self, r: QpRef) -> &mut Qp {
        &mut self.nodes[r.node].qps[r.qp].qp
    }

    /// Completions of `r` collected so far (polls the QP first).
    pub fn take_completions(&mut self, r: QpRef) -> Vec<Wc> {
        let q = &mut self.nodes[r.node].qps[r.qp];
        while let Some(wc) = q.qp.poll_completion() {
            q.wcs.push(wc);
        }
        std::mem::take(&mut q.wcs)
    }

    /// Packets in flight.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// Drains every QP's transmit and completion queues into the network.
    pub fn flush(&mut self) {
        for ni in 0..self.nodes.len() {
            for qi in 0..self.nodes[ni].qps.len() {
                loop {
                    let node = &mut self.nodes[ni];
                    let q = &mut node.qps[qi];
                    let Some(t) = q.qp.poll_transmit(self.now, &mut self.buf, &mut node.mem) else {
                        break;
                    };
                    let bytes = self.buf[..t.len].to_vec();
                    self.send(ni, t.ah, t.tos, bytes);
                }
                let q = &mut self.nodes[ni].qps[qi];
                while let Some(wc) = q.qp.poll_completion() {
                    q.wcs.push(wc);
                }
            }
        }
    }

    fn send(&mut self, from: usize, ah: AddressHandle, tos: u8, mut bytes: Vec<u8>) {
        self.stats.sent += 1;
        if let Some(t) = self.trace.as_mut() {
            t.push((from, self.now, bytes.clone()));
        }
        if let Some(f) = self.filter.as_mut() {
            if let Ok(p) = roce::Repr::parse_without_icrc(&bytes) {
                if f(from, &p) {
                    self.stats.filtered += 1;
                    return;
                }
            }
        }
        let c = self.cfg;
        if c.link_mtu.is_some_and(|m| bytes.len() > m) {
            self.stats.oversize += 1;
            return;
        }
        if self.rng.chance(c.loss) {
            self.stats.lost += 1;
            return;
        }
        let crc = icrc(from, ah.0 as usize, &bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        let copies = if self.rng.chance(c.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut b = bytes.clone();
            if self.rng.chance(c.corrupt) {
                self.stats.corrupted += 1;
                let bit = self.rng.below(b.len() as u64 * 8);
                b[(bit / 8) as usize] ^= 1 << (bit % 8);
            }
            let mut at = self.now;
            if let Some((rate, free)) = &mut self.nic {
                if free.len() <= from {
                    free.resize(from + 1, Instant::ZERO);
                }
                at = at.max(free[from]) + serialize(b.len() + WIRE_OVERHEAD, *rate);
                free[from] = at;
            }
            let to = ah.0 as usize;
            let f = InFlight {
                from,
                to,
                bytes: b,
                tos,
                queued: false,
            };
            if self.bottleneck.as_ref().is_some_and(|(n, _)| *n == to) {
                self.schedule(at, InFlight { queued: true, ..f });
            } else {
                self.travel(at, f);
            }
        }
    }

    /// `f` leaves its last queue at `at` and crosses the link: latency,
    /// jitter, maybe reordering.
    fn travel(&mut self, at: Instant, f: InFlight) {
        let c = self.cfg;
        let delay = c.latency + Duration::from_nanos(self.rng.below(c.jitter.as_nanos() as u64));
        let mut at = at + delay;
        // A link is FIFO except for the packets picked for reordering.
        let last = self
            .link_last
            .entry((f.from, f.to))
            .or_insert(Instant::ZERO);
        if self.rng.chance(c.reorder) {
            at = at + c.reorder_delay;
        } else {
            at = at.max(*last);
            *last = at;
        }
        self.schedule(at, f);
    }

    fn schedule(&mut self, at: Instant, f: InFlight) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq)));
        self.slots.insert(self.seq, f);
    }

    /// `f` arrives at the bottleneck now: dropped, or marked and queued.
    fn enqueue(&mut self, mut f: InFlight) {
        let now = self.now;
        let Some((_, b)) = self.bottleneck.as_mut() else {
            return self.travel(now, f);
        };
        let wire = f.bytes.len() + WIRE_OVERHEAD;
        let waiting = if b.busy_until > now {
            let ns = (b.busy_until - now).as_nanos();
            (ns * u128::from(b.rate.kbps()) / 8_000_000) as usize
        } else {
            0
        };
        b.stats.arrived += 1;
        if waiting + wire > b.queue {
            b.stats.dropped += 1;
            return;
        }
        if waiting > b.mark_above && f.tos & 0b11 != 0 {
            f.tos |= 0b11;
            b.stats.marked += 1;
        }
        b.busy_until = b.busy_until.max(now) + serialize(wire, b.rate);
        let per = &mut b.stats.bytes_from;
        if per.len() <= f.from {
            per.resize(f.from + 1, 0);
        }
        per[f.from] += wire as u64;
        let at = b.busy_until;
        self.travel(at, InFlight { queued: false, ..f });
    }

    fn deliver(&mut self, f: InFlight) {
        let from = f.from;
        let Some(node) = self.nodes.get_mut(f.to) else {
            self.stats.no_qp += 1;
            return;
        };
        let Some(split) = f.bytes.len().checked_sub(4) else {
            return;
        };
        let (pkt, trailer) = f.bytes.split_at(split);
        let Ok(bth) = bth::Packet::new_checked(pkt) else {
            return;
        };
        if trailer != icrc(from, f.to, pkt).to_le_bytes() {
            return; // ICRC mismatch: dropped like a NIC would.
        }
        let dqpn = bth.dest_qp();
        let Some(q) = node.qps.iter_mut().find(|q| q.qp.qpn() == dqpn) else {
            self.stats.no_qp += 1;
            return;
        };
        self.stats.delivered += 1;
        let arrival = Arrival {
            ce: f.tos & 0b11 == 0b11,
            src: Some(AddressHandle(from as u32)),
            answer: None,
        };
        if q.qp.qp_type() == QpType::Ud {
            let grh = grh_area(from, f.to, pkt.len());
            q.qp.handle_arrival(self.now, pkt, arrival, Some(&grh), &mut node.mem);
        } else {
            q.qp.handle_arrival(self.now, pkt, arrival, None, &mut node.mem);
        }
    }

    /// The next event time, if any: a packet arrival or a QP deadline.
    pub fn next_event(&self) -> Option<Instant> {
        let mut t = self.queue.peek().map(|Reverse((t, _))| *t);
        for n in &self.nodes {
            for q in &n.qps {
                if let Some(d) = q.qp.poll_timeout() {
                    t = Some(t.map_or(d, |t| t.min(d)));
                }
            }
        }
        t
    }

    /// Flushes, then advances virtual time to the next event and processes
    /// it (every packet due by then, then every due timer), then flushes
    /// again. Returns `false` when there is no event left.
    pub fn step(&mut self) -> bool {
        self.flush();
        let Some(t) = self.next_event() else {
            return false;
        };
        if t > self.now {
            self.now = t;
        }
        while let Some(Reverse((at, seq))) = self.queue.peek().copied() {
            if at > self.now {
                break;
            }
            self.queue.pop();
            match self.slots.remove(&seq) {
                Some(f) if f.queued => self.enqueue(f),
                Some(f) => self.deliver(f),
                None => {}
            }
        }
        let now = self.now;
        for n in &mut self.nodes {
            for q in &mut n.qps {
                if q.qp.poll_timeout().is_some_and(|d| d <= now) {
                    q.qp.handle_timeout(now);
                }
            }
        }
        self.flush();
        true
    }

    /// Steps until nothing is in flight and no timer runs, or virtual time
    /// passes 60 s from now. Returns `true` if the network went idle.
    pub fn run_until_idle(&mut self) -> bool {
        let limit = self.now + Duration::from_secs(60);
        while self.now <= limit {
            if !self.step() {
                return true;
            }
        }
        false
    }

    /// Steps while the next event is no later than `t`, then sets now to `t`.
    pub fn run_until(&mut self, t: Instant) {
        loop {
            self.flush();
            match self.next_event() {
                Some(e) if e <= t => {
                    self.step();
                }
                _ => break,
            }
        }
        if t > self.now {
            self.now = t;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The synthetic IPv4 header is the one the simulator always used
    /// (ECT(0), DF, TTL 64, UDP, identification and checksum 0) and the
    /// ICRC over it is what wire computes for that flow.
    #[test]
    fn the_synthetic_encapsulation_is_unchanged() {
        let h = ipv4_header(2, 0, 100);
        let t = (20 + 8 + 100 + 4u16).to_be_bytes();
        assert_eq!(
            h,
            [0x45, 0x02, t[0], t[1], 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 3, 10, 0, 0, 1]
        );
        let g = grh_area(2, 0, 100);
        assert_eq!((&g[..20], &g[20..]), (&[0u8; 20][..], &h[..]));
        let transport = [
            0x04, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 1, 0, 0, 0, 0,
        ];
        let flow = rdmakit_wire::icrc::Ipv4Flow {
            src: Ipv4Addr::new(10, 0, 0, 3),
            dst: Ipv4Addr::new(10, 0, 0, 1),
            sport: 0xc002,
            dport: 4791,
            ident: 0,
            dont_frag: true,
        };
        assert_eq!(
            icrc(2, 0, &transport),
            rdmakit_wire::icrc::compute_ipv4(&flow, &transport).unwrap()
        );
    }
}
