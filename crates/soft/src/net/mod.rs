//! The UDP driver: RoCEv2 datagrams on UDP port 4791.
//!
//! A device has one address, its GID (`::ffff:a.b.c.d` at index 0), the
//! same for every context of it in every process — as a netdev-backed
//! device has one GID table. Two ways to get one:
//!
//! - **Configured** (`DeviceConfig::addr`, `RDMAKIT_SOFT_ADDR`): the device
//!   *is* that address and binds `addr:4791` itself, so kernel rxe or
//!   another host reaches it. One context at a time per address (as one
//!   netdev per address); a second bind fails with `EADDRINUSE`.
//! - **Host** (the default): the device is bound to the host's first
//!   interface that is up, running and not loopback, and has its IPv4
//!   address ([`host_device_addr`]) — as rxe bound to `eth0` has eth0's
//!   address as its GID — or 127.0.0.1 on a host without one. Every
//!   context on the host shares that address: each binds a private
//!   endpoint, `127.77.s.t:4791` for a free *slot* `s·256+t` in 1..=1023
//!   (the kernel's exclusive bind hands out slots, so no registry is
//!   needed), and its QPNs are `slot << 14 | index`. A packet for
//!   `(device address, QPN)` goes to the endpoint of the QPN's slot — the
//!   host's own address delivered locally, the kernel's demultiplexing by
//!   QPN done by the sender. Packets from another context's endpoint carry
//!   the device address in their GRH. So any number of processes, and any
//!   number of contexts in one process, address each other by the one GID
//!   plus QPN. The traffic never leaves the host: to reach another host or
//!   kernel rxe, configure the address.
//!
//! The UDP payload is the RoCEv2 packet from the BTH through the 4-byte
//! ICRC; the ICRC is computed over the IPv4/UDP headers the kernel will emit
//! (identification 0, DF), which the socket layer never shows us. Source
//! ports carry flow entropy in 0xC000..=0xFFFF: each flow sends from its own
//! socket bound to `(endpoint address, flow_port)`.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cma::SoftTransport;
use crate::errno::{Errno, Origin, Result, SoftError};
use rdmakit_wire::{bth, ipv4, udp};

mod offload;
pub(crate) mod shm;

/// The RoCEv2 UDP destination port.
pub const ROCE_PORT: u16 = 4791;
/// Requested socket receive buffer (SO_RCVBUF).
pub const RECV_BUFFER: usize = 4 << 20;
/// Bytes of ICRC after the transport packet.
pub const ICRC_LEN: usize = 4;
/// The address of a host device on a host without a non-loopback IPv4
/// address (its GID is then `::ffff:127.0.0.1`).
pub const LOOPBACK_DEVICE_ADDR: Ipv4Addr = Ipv4Addr::LOCALHOST;
/// Bits of a loopback device's QPN below its context's slot number.
pub const SLOT_SHIFT: u32 = 14;
/// The highest slot (QPNs are 24 bits: 10 bits of slot, 14 of index).
pub const MAX_SLOT: u32 = (1 << (24 - SLOT_SHIFT)) - 1;

/// The address of a device that was not configured with one: the IPv4
/// address of the host's first interface (in interface-index order, as
/// `getifaddrs` lists them) that is up and running and not loopback — the
/// netdev the device is bound to, as rxe is to `eth0` — else
/// [`LOOPBACK_DEVICE_ADDR`]. Every process of the host (of one network
/// namespace) gets the same answer. A device opened after the interface's
/// address changed has the new one; an open context keeps its address
/// (rxe's GID table would follow the change).
pub fn host_device_addr() -> Ipv4Addr {
    pick_host_addr(&host_ipv4_addrs()).unwrap_or(LOOPBACK_DEVICE_ADDR)
}

/// An interface's IPv4 address and flags (`IFF_*`), as `getifaddrs` lists
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfAddr {
    /// The address.
    pub addr: Ipv4Addr,
    /// The interface's flags.
    pub flags: u32,
}

/// The first address of an up, running, non-loopback interface that is
/// usable as a unicast source (not 0.0.0.0, 169.254/16 link-local or
/// multicast): the netdev a host device is bound to.
pub fn pick_host_addr(addrs: &[IfAddr]) -> Option<Ipv4Addr> {
    let want = (libc::IFF_UP | libc::IFF_RUNNING) as u32;
    addrs
        .iter()
        .find(|a| {
            a.flags & want == want
                && a.flags & libc::IFF_LOOPBACK as u32 == 0
                && !a.addr.is_loopback()
                && !a.addr.is_unspecified()
                && !a.addr.is_link_local()
                && !a.addr.is_multicast()
                && !a.addr.is_broadcast()
        })
        .map(|a| a.addr)
}

/// The host's IPv4 interface addresses (empty when `getifaddrs` fails).
fn host_ipv4_addrs() -> Vec<IfAddr> {
    let mut out = Vec::new();
    let mut ifa: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we walk read-only and free once.
    if unsafe { libc::getifaddrs(&mut ifa) } != 0 {
        return out;
    }
    let mut cur = ifa;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned.
        let e = unsafe { &*cur };
        if !e.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr of its family.
            let fam = unsafe { (*e.ifa_addr).sa_family };
            if libc::c_int::from(fam) == libc::AF_INET {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*e.ifa_addr.cast::<libc::sockaddr_in>() };
                out.push(IfAddr {
                    addr: Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                    flags: e.ifa_flags,
                });
            }
        }
        cur = e.ifa_next;
    }
    // SAFETY: the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(ifa) };
    out
}

/// The private endpoint address of loopback slot `slot` (1..=MAX_SLOT).
pub fn slot_addr(slot: u32) -> Ipv4Addr {
    Ipv4Addr::new(127, 77, (slot >> 8) as u8, (slot & 0xff) as u8)
}

/// The slot of a private endpoint address, if it is one.
pub fn addr_slot(a: Ipv4Addr) -> Option<u32> {
    let o = a.octets();
    let s = (u32::from(o[2]) << 8) | u32::from(o[3]);
    (o[0] == 127 && o[1] == 77 && (1..=MAX_SLOT).contains(&s)).then_some(s)
}

/// The UDP source port of the flow between local QP `lqpn` and remote QP
/// `rqpn` (the kernel's `rdma_flow_label_to_udp_sport` of
/// `fold20(lqpn * rqpn)`; 0 for an unconnected QP uses `lqpn` alone).
pub fn flow_port(lqpn: u32, rqpn: u32) -> u16 {
    let v = u64::from(lqpn) * u64::from(if rqpn == 0 { 1 } else { rqpn });
    let fl = ((v ^ (v >> 20) ^ (v >> 40)) & 0xfffff) as u32;
    let p = (fl & 0x3fff) ^ ((fl & 0xfc000) >> 14);
    (p as u16) | 0xc000
}

pub use offload::Offloads;
pub(crate) use offload::{gro_size, gro_split, probe_offloads, send_segments, TosSocket, TxBatch};
use offload::{set_ip_opt, set_udp_opt, GroSwitch, RecvSeen, UDP_GRO};

/// A QP's sending state, cached per engine: its flow socket by source port
/// (`None` inside: the port could not be bound, the device socket sends
/// instead), and its last destination's ring (`None` inside: that
/// destination takes none, UDP carries its packets; see [`shm`]).
#[derive(Debug, Default)]
pub(crate) struct FlowCache {
    sock: Option<(u16, Option<Arc<TosSocket>>)>,
    ring: shm::RingCache,
}

impl FlowCache {
    /// Whether the last destination's packets go through a ring.
    pub(crate) fn on_ring(&self) -> bool {
        matches!(self.ring, Some((_, Some(_))))
    }
}

#[derive(Debug)]
pub(crate) struct Net {
    /// The device's address (its GID).
    addr: Ipv4Addr,
    /// The address this context's socket is bound to: `addr` itself, or a
    /// loopback slot's private endpoint.
    local: Ipv4Addr,
    /// The loopback slot (None for a configured address).
    slot: Option<u32>,
    port: u16,
    sock: TosSocket,
    flows: Mutex<HashMap<u16, Option<Arc<TosSocket>>>>,
    /// Per datagram length, the solver of the IPv4 identification/DF bits
    /// an ICRC implies (see [`IdentSolver`]).
    solvers: Mutex<HashMap<usize, Arc<IdentSolver>>>,
    /// A raw IPv4 socket (`IPPROTO_RAW`, send-only) when the process may
    /// open one (CAP_NET_RAW): datagrams to other hosts then carry an IPv4
    /// header we wrote, so the identification the ICRC covers is known.
    /// Through a UDP socket the kernel picks it (Linux 6.x numbers DF
    /// datagrams too), and a strict receiver such as rxe drops the packet.
    raw: Option<std::os::fd::OwnedFd>,
    ident: std::sync::atomic::AtomicU16,
    /// The offloads in use (see [`Offloads`]).
    offloads: Offloads,
    /// Whether UDP_GRO is on at the moment ([`GroSwitch`], packed), when
    /// `offloads.gro`. Changed only by the thread receiving (one at a time,
    /// under the device's receive buffer lock).
    gro_switch: AtomicU64,
    /// The largest packet (UDP payload) a GSO send may carry: the kernel
    /// refuses segments beyond the route's MTU (EINVAL), or GSO through a
    /// device without checksum offload (EIO); a refused size lowers this
    /// and packets that large leave one per send.
    gso_max_seg: AtomicUsize,
    /// Same-host rings, when the transport is `auto` and the marker could
    /// be written.
    rings: Option<shm::Rings>,
    /// Whether receives read each datagram's IP TOS byte (IP_RECVTOS): on a
    /// configured address, the one reachable over a network, where a
    /// switch may mark CE. A loopback slot's traffic never crosses a
    /// queue that marks, so its receives keep the cheaper `recvfrom`.
    recv_tos: bool,
}

/// What one receive returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Datagram {
    /// Bytes received (one datagram, or several of one flow: `seg`).
    pub(crate) len: usize,
    /// The sender.
    pub(crate) from: SocketAddrV4,
    /// The UDP_GRO segment size when the kernel coalesced several
    /// datagrams of one flow (else 0; see [`gro_split`]).
    pub(crate) seg: usize,
    /// The IP TOS byte (DSCP << 2 | ECN) when the socket reads it
    /// ([`Net::reads_tos`]; GRO coalesces only datagrams with equal TOS),
    /// else 0.
    pub(crate) tos: u8,
}

impl Datagram {
    /// Whether the datagram arrived marked Congestion Experienced.
    pub(crate) fn ce(&self) -> bool {
        self.tos & 3 == 3
    }
}

fn bind_err(verb: &'static str, e: &std::io::Error, what: String) -> SoftError {
    SoftError::new(
        verb,
        Errno(e.raw_os_error().unwrap_or(Errno::EIO.0)),
        Origin::Kernel,
        format!("{what}: {e}"),
    )
}

impl Net {
    /// Binds `addr:port` (a configured device address), or a free loopback
    /// slot's endpoint of the host device ([`host_device_addr`]) when
    /// `addr` is None. Uses the offloads `allowed` the kernel offers, a
    /// raw send socket when `raw_tx` and the process may, and same-host
    /// rings when `transport` is [`SoftTransport::Auto`] (and the ring
    /// directory takes a marker: [`Net::transport`] says what came of it).
    pub(crate) fn bind(
        addr: Option<Ipv4Addr>,
        port: u16,
        allowed: Offloads,
        raw_tx: bool,
        transport: SoftTransport,
    ) -> Result<Net> {
        let (sock, dev_addr, slot) = match addr {
            Some(a) => (
                UdpSocket::bind(SocketAddrV4::new(a, port)).map_err(|e| {
                    bind_err("ibv_open_device", &e, format!("cannot bind {a}:{port}"))
                })?,
                a,
                None,
            ),
            None => {
                let (s, slot) = Self::bind_slot(port)?;
                (s, host_device_addr(), Some(slot))
            }
        };
        // Best effort: a deep receive buffer absorbs a full RC window
        // (128 PSNs × 4 KiB) per QP burst; the kernel caps it at rmem_max.
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&sock, RECV_BUFFER);
        let local = match sock.local_addr() {
            Ok(SocketAddr::V4(a)) => *a.ip(),
            _ => dev_addr,
        };
        let (offloads, gro_start) = probe_offloads(&sock, allowed);
        let recv_tos = addr.is_some() && set_ip_opt(&sock, libc::IP_RECVTOS, 1);
        let rings = (transport == SoftTransport::Auto)
            .then(|| shm::Rings::new(SocketAddrV4::new(local, port)).ok())
            .flatten();
        Ok(Net {
            addr: dev_addr,
            local,
            slot,
            port,
            sock: TosSocket::new(sock),
            flows: Mutex::new(HashMap::new()),
            solvers: Mutex::new(HashMap::new()),
            raw: raw_tx.then(raw_socket).flatten(),
            ident: std::sync::atomic::AtomicU16::new(1),
            offloads,
            gro_switch: AtomicU64::new(gro_start.to_bits()),
            gso_max_seg: AtomicUsize::new(if offloads.gso {
                usize::from(u16::MAX)
            } else {
                0
            }),
            rings,
            recv_tos,
        })
    }

    /// Whether receives read each datagram's IP TOS (a configured address).
    #[cfg(test)]
    pub(crate) fn reads_tos(&self) -> bool {
        self.recv_tos
    }

    /// Binds the endpoint of a free loopback slot, trying from a random one.
    fn bind_slot(port: u16) -> Result<(UdpSocket, u32)> {
        let start = crate::dma::random_u32() ^ std::process::id().rotate_left(7);
        let mut last = None;
        for i in 0..MAX_SLOT {
            let slot = (start.wrapping_add(i) % MAX_SLOT) + 1;
            match UdpSocket::bind(SocketAddrV4::new(slot_addr(slot), port)) {
                Ok(s) => return Ok((s, slot)),
                Err(e) => last = Some(e),
            }
        }
        let e = last.unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::AddrInUse));
        Err(bind_err(
            "ibv_open_device",
            &e,
            format!(
                "no free loopback endpoint 127.77.x.y:{port} ({MAX_SLOT} contexts open on this \
                 host, or a kernel RoCE stack — rdma_rxe, a RoCE NIC's driver — listens on \
                 0.0.0.0:{port}; give the soft NIC another port with RDMAKIT_SOFT_UDP_PORT)"
            ),
        ))
    }

    /// The device's address (its GID's IPv4 address).
    pub(crate) fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    /// The UDP offloads in use.
    pub(crate) fn offloads(&self) -> Offloads {
        self.offloads
    }

    /// Where this context's socket is bound.
    pub(crate) fn endpoint(&self) -> SocketAddrV4 {
        SocketAddrV4::new(self.local, self.port)
    }

    /// The first QPN of this context (loopback devices: its slot's range).
    pub(crate) fn qpn_base(&self) -> Option<u32> {
        self.slot.map(|s| s << SLOT_SHIFT)
    }

    /// Where a packet for QP `dqpn` at address `dst` goes: on a loopback
    /// device, the device's own address means the endpoint of the QPN's
    /// slot; anything else is sent as addressed.
    pub(crate) fn route(&self, dst: Ipv4Addr, dqpn: u32) -> SocketAddrV4 {
        if self.slot.is_some() && dst == self.addr {
            let slot = dqpn >> SLOT_SHIFT;
            if (1..=MAX_SLOT).contains(&slot) {
                return SocketAddrV4::new(slot_addr(slot), self.port);
            }
        }
        SocketAddrV4::new(dst, self.port)
    }

    /// The address a packet from `src` came from, as the GRH reports it:
    /// another context's private endpoint is the device's own address.
    pub(crate) fn source_addr(&self, src: Ipv4Addr) -> Ipv4Addr {
        if self.slot.is_some() && addr_slot(src).is_some() {
            self.addr
        } else {
            src
        }
    }

    fn flow_socket(&self, sport: u16) -> Option<Arc<TosSocket>> {
        let mut f = crate::lock(&self.flows);
        f.entry(sport)
            .or_insert_with(|| {
                UdpSocket::bind(SocketAddrV4::new(self.local, sport))
                    .ok()
                    .map(|s| Arc::new(TosSocket::new(s)))
            })
            .clone()
    }

    fn icrc(&self, src: SocketAddrV4, dst: SocketAddrV4, transport: &[u8]) -> u32 {
        icrc_with(src, dst, transport, 0, true)
    }

    /// Appends the ICRC to `buf[..len]` and sends it to `dst` (routed by
    /// the packet's destination QP, see [`Net::route`]) from the flow's
    /// source port, with IP TOS `tos`. `corrupt`: with a wrong ICRC (an
    /// injected fault; never through the raw socket).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send(
        &self,
        dst: Ipv4Addr,
        sport: u16,
        tos: u8,
        cache: &mut FlowCache,
        buf: &mut [u8],
        len: usize,
        corrupt: bool,
        tx: &AtomicU64,
        tx_err: &AtomicU64,
    ) {
        if !matches!(cache.sock, Some((p, _)) if p == sport) {
            cache.sock = Some((sport, self.flow_socket(sport)));
        }
        let flow = cache.sock.as_ref().and_then(|(_, s)| s.as_deref());
        let (sock, sport) = match flow {
            Some(s) => (s, sport),
            None => (&self.sock, self.port),
        };
        let Some(pkt) = buf.get_mut(..len + ICRC_LEN) else {
            tx_err.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let dqpn = bth::Packet::new_checked(&pkt[..]).map_or(0, |b| b.dest_qp());
        let to = self.route(dst, dqpn);
        if let Some(raw) = self
            .raw
            .as_ref()
            .filter(|_| !to.ip().is_loopback() && !corrupt)
        {
            let src = SocketAddrV4::new(self.local, sport);
            return self.send_raw(raw, src, to, tos, pkt, len, tx, tx_err);
        }
        let crc = self.icrc(SocketAddrV4::new(self.local, sport), to, &pkt[..len]);
        let crc = if corrupt { !crc } else { crc };
        pkt[len..].copy_from_slice(&crc.to_le_bytes());
        send_one(sock, pkt, to, tos, tx, tx_err);
    }

    /// Appends the ICRC to the packet of `len` bytes the engine wrote at
    /// `buf[batch.tail()..]` and queues it in `batch` — or first sends the
    /// batch when the packet cannot join it (another destination or flow,
    /// longer than its segments, a limit reached) and moves the packet to
    /// the front. A packet that cannot go by GSO (offload off, too large,
    /// the raw socket's path) leaves at once. [`Net::flush`] sends the rest.
    /// `tos`: the packet's IP TOS byte (DSCP and ECN; a ring ignores it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn queue(
        &self,
        dst: Ipv4Addr,
        sport: u16,
        tos: u8,
        cache: &mut FlowCache,
        batch: &mut TxBatch,
        buf: &mut [u8],
        len: usize,
        tx: &AtomicU64,
        tx_err: &AtomicU64,
    ) {
        let mut at = batch.tail();
        let plen = len + ICRC_LEN;
        if buf.len() < at + plen {
            tx_err.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let dqpn = bth::Packet::new_checked(&buf[at..at + len]).map_or(0, |b| b.dest_qp());
        let to = self.route(dst, dqpn);
        if let Some(ob) = self.outbox(cache, to) {
            // A ring: no ICRC, no socket. What the batch holds (for another
            // destination) leaves first.
            if batch.count > 0 {
                self.flush(cache, batch, buf, tx, tx_err);
            }
            let pushed = ob.push(&buf[at..at + len]);
            if pushed == shm::Pushed::Wake {
                // Woken when the pass ends, with every packet the pass has
                // for it waiting: woken at the first, a receiver takes it
                // alone, and on a shared core preempts this thread before
                // the next (`shm::wake`).
                if let Some(earlier) = batch.wake.replace(to).filter(|&e| e != to) {
                    shm::wake(&self.sock, earlier);
                }
            }
            if pushed == shm::Pushed::Dropped {
                tx_err.fetch_add(1, Ordering::Relaxed);
            } else {
                tx.fetch_add(1, Ordering::Relaxed);
                if let Some(r) = &self.rings {
                    r.pushed(pushed == shm::Pushed::Wake);
                }
            }
            return;
        }
        let raw = self.raw.as_ref().filter(|_| !to.ip().is_loopback());
        let gso = raw.is_none() && plen <= self.gso_max_seg.load(Ordering::Relaxed);
        if batch.count > 0 && !(gso && batch.admits(to, sport, tos, plen)) {
            self.flush(cache, batch, buf, tx, tx_err);
            if gso {
                buf.copy_within(at..at + plen, 0);
                at = 0;
            }
        }
        // The flow socket is looked up after the flush: the batch went out
        // from the socket of its own port.
        if !matches!(cache.sock, Some((p, _)) if p == sport) {
            cache.sock = Some((sport, self.flow_socket(sport)));
        }
        let flow = cache.sock.as_ref().and_then(|(_, s)| s.as_deref());
        let (sock, src_port) = match flow {
            Some(s) => (s, sport),
            None => (&self.sock, self.port),
        };
        let src = SocketAddrV4::new(self.local, src_port);
        let pkt = &mut buf[at..at + plen];
        if let Some(raw) = raw {
            return self.send_raw(raw, src, to, tos, pkt, len, tx, tx_err);
        }
        let crc = self.icrc(src, to, &pkt[..len]);
        pkt[len..].copy_from_slice(&crc.to_le_bytes());
        if !gso {
            return send_one(sock, pkt, to, tos, tx, tx_err);
        }
        batch.add(to, sport, tos, plen);
        if batch.closed() {
            self.flush(cache, batch, buf, tx, tx_err);
        }
    }

    /// Sends the packets queued in `batch` (at the start of `buf`): one
    /// UDP_SEGMENT `sendmsg`, or one `sendto` for a single packet. When the
    /// kernel refuses the segmentation, the packets go one by one.
    pub(crate) fn flush(
        &self,
        cache: &FlowCache,
        batch: &mut TxBatch,
        buf: &[u8],
        tx: &AtomicU64,
        tx_err: &AtomicU64,
    ) {
        let b = std::mem::take(batch);
        // The ring receiver the pass owes a wake-up ([`TxBatch`]'s `wake`):
        // a pass flushes at its end, or earlier only when it mixes ring
        // and socket packets.
        if let Some(to) = b.wake {
            shm::wake(&self.sock, to);
        }
        let (Some(to), Some(data)) = (b.to, buf.get(..b.bytes)) else {
            return;
        };
        let sock = match &cache.sock {
            Some((p, Some(s))) if *p == b.port => &**s,
            _ => &self.sock,
        };
        if b.count == 1 {
            return send_one(sock, data, to, b.tos, tx, tx_err);
        }
        let seg = u16::try_from(b.seg).unwrap_or(u16::MAX);
        match send_segments(sock, to, data, seg, b.tos) {
            Ok(()) => {
                tx.fetch_add(b.count as u64, Ordering::Relaxed);
            }
            Err(e) => {
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINVAL | libc::EIO | libc::EOPNOTSUPP | libc::ENOPROTOOPT)
                ) {
                    self.gso_max_seg.fetch_min(b.seg - 1, Ordering::Relaxed);
                }
                for p in gro_split(data, b.seg) {
                    send_one(sock, p, to, b.tos, tx, tx_err);
                }
            }
        }
    }

    /// Holds the ring wake-ups this thread owes until the guard drops (a
    /// receive drain: [`shm::hold_wakes`]).
    pub(crate) fn hold_wakes(&self) -> shm::HeldWakes<'_> {
        shm::hold_wakes(&self.sock)
    }

    /// Sends through the raw socket with an IPv4 header of our own
    /// (identification from a counter, never 0, which the kernel would
    /// replace; DF; TTL 64; TOS `tos`) and UDP checksum 0, and the ICRC over
    /// exactly that (the ICRC masks the TOS: a switch may mark CE).
    #[allow(clippy::too_many_arguments)]
    fn send_raw(
        &self,
        raw: &std::os::fd::OwnedFd,
        src: SocketAddrV4,
        to: SocketAddrV4,
        tos: u8,
        pkt: &mut [u8],
        len: usize,
        tx: &AtomicU64,
        tx_err: &AtomicU64,
    ) {
        let mut ident = self.ident.fetch_add(1, Ordering::Relaxed);
        if ident == 0 {
            ident = self.ident.fetch_add(1, Ordering::Relaxed);
        }
        let crc = icrc_with(src, to, &pkt[..len], ident, true);
        pkt[len..].copy_from_slice(&crc.to_le_bytes());
        let Some(d) = raw_datagram(src, to, ident, tos, pkt) else {
            tx_err.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let dst = SocketAddrV4::new(*to.ip(), 0);
        match rustix::net::sendto_v4(raw, &d, rustix::net::SendFlags::empty(), &dst) {
            Ok(_) => tx.fetch_add(1, Ordering::Relaxed),
            Err(_) => tx_err.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// The ring into the context at `to` when this context uses rings and
    /// that one takes them ([`shm::Rings::outbox`]).
    fn outbox(&self, cache: &mut FlowCache, to: SocketAddrV4) -> Option<Arc<shm::Outbox>> {
        let r = self.rings.as_ref()?;
        let same_host = to.ip().is_loopback() || *to.ip() == self.local || *to.ip() == self.addr;
        r.outbox(&mut cache.ring, to, same_host, &self.sock)
    }

    /// Decides a connected QP's path to `dst`/`dqpn` when its AV is set
    /// (RTR), not at its first packet: a ring to a context that takes
    /// them is made, populated and announced then, so connection setup pays
    /// for it and the first messages do not.
    pub(crate) fn prepare(&self, cache: &mut FlowCache, dst: Ipv4Addr, dqpn: u32) {
        let to = self.route(dst, dqpn);
        let _ = self.outbox(cache, to);
    }

    /// This context's same-host rings, if it uses them.
    pub(crate) fn rings(&self) -> Option<&shm::Rings> {
        self.rings.as_ref()
    }

    /// The transport this context really uses: [`SoftTransport::Auto`]
    /// when it listens for same-host rings, else [`SoftTransport::Udp`] (so
    /// configured, or its user's directory refused the rings).
    pub(crate) fn transport(&self) -> SoftTransport {
        if self.rings.is_some() {
            SoftTransport::Auto
        } else {
            SoftTransport::Udp
        }
    }

    /// Wakes the progress thread blocked in [`Net::recv`] (an empty datagram
    /// to our own socket; the receive path ignores it).
    pub(crate) fn kick(&self) {
        let _ = self.sock.send_to(&[], self.endpoint());
    }

    /// Receives one datagram if one is waiting (never blocks): its length,
    /// sender, the UDP_GRO segment size when the kernel coalesced several
    /// datagrams of one flow into it (else 0; see [`gro_split`]) and its IP
    /// TOS when the socket reads it.
    pub(crate) fn try_recv(&self, buf: &mut [u8]) -> Option<Datagram> {
        if !self.offloads.gro {
            return if self.recv_tos {
                self.try_recvmsg(buf)
            } else {
                self.try_recvfrom(buf)
            };
        }
        let sw = GroSwitch::from_bits(self.gro_switch.load(Ordering::Relaxed));
        let r = if sw.reads_control() || self.recv_tos {
            self.try_recvmsg(buf)
        } else {
            self.try_recvfrom(buf)
        };
        let seen = match r {
            Some(d) => RecvSeen::Datagram {
                len: d.len,
                seg: d.seg,
            },
            // Only "nothing queued" proves no coalesced buffer is left.
            None if std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) => {
                RecvSeen::Empty
            }
            None => return None,
        };
        let (next, set) = sw.observe(seen);
        if next != sw {
            if let Some(on) = set {
                let _ = set_udp_opt(&self.sock, UDP_GRO, i32::from(on));
            }
            self.gro_switch.store(next.to_bits(), Ordering::Relaxed);
        }
        r
    }

    /// A plain `recvfrom` (no control message to read).
    fn try_recvfrom(&self, buf: &mut [u8]) -> Option<Datagram> {
        match rustix::net::recvfrom(&self.sock, buf, rustix::net::RecvFlags::DONTWAIT) {
            Ok((len, Some(rustix::net::SocketAddrAny::V4(from)))) => Some(Datagram {
                len,
                from,
                seg: 0,
                tos: 0,
            }),
            _ => None,
        }
    }

    /// A `recvmsg` reading the UDP_GRO segment size and the IP TOS.
    fn try_recvmsg(&self, buf: &mut [u8]) -> Option<Datagram> {
        // SAFETY: sockaddr_in is plain integers; all-zero is valid.
        let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut ctrl = [0u64; 8];
        let len = std::mem::size_of_val(&ctrl);
        let mut msg = offload::msghdr(&mut addr, &mut iov, &mut ctrl, len);
        // SAFETY: every pointer in `msg` is valid for the call; a direct
        // syscall, not libc's cancellation point (see `send`).
        let r = unsafe {
            libc::syscall(
                libc::SYS_recvmsg,
                self.sock.as_raw_fd(),
                &mut msg as *mut libc::msghdr,
                libc::MSG_DONTWAIT,
            )
        };
        let n = usize::try_from(r).ok()?.min(buf.len());
        if addr.sin_family != libc::AF_INET as libc::sa_family_t {
            return None;
        }
        let from = SocketAddrV4::new(
            Ipv4Addr::from(addr.sin_addr.s_addr.to_ne_bytes()),
            u16::from_be(addr.sin_port),
        );
        let clen = (msg.msg_controllen as usize).min(std::mem::size_of_val(&ctrl));
        // SAFETY: `ctrl` is 64 initialised bytes.
        let control = unsafe { std::slice::from_raw_parts(ctrl.as_ptr().cast::<u8>(), clen) };
        Some(Datagram {
            len: n,
            from,
            seg: gro_size(control),
            tos: offload::tos_of(control).unwrap_or(0),
        })
    }

    /// Waits at most `wait` for a datagram without taking it, so
    /// that taking and processing stay under one lock in the caller: two
    /// threads each taking datagrams would process a flow out of order,
    /// which UC cannot recover from (it drops the message).
    ///
    /// `ppoll`, whose timeout is a high-resolution timer: a socket receive
    /// timeout (SO_RCVTIMEO) counts in scheduler ticks, 4 ms at this
    /// kernel's HZ=250, which held a paced QP (one 1 KiB packet per 880 µs
    /// at 10 Mb/s) to a packet per tick once its application slept on a
    /// completion channel and the progress thread alone sent.
    pub(crate) fn wait_readable(&self, wait: Duration) -> bool {
        let wait = wait.max(Duration::from_micros(1));
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(wait.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(wait.subsec_nanos()),
        };
        let mut fd = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask.
        let r = unsafe { libc::ppoll(&mut fd, 1, &ts, std::ptr::null()) };
        r > 0 && fd.revents & libc::POLLIN != 0
    }

    /// Checks the ICRC of a datagram from `src`; returns the transport packet
    /// without ICRC, or None (counted) when it is malformed or corrupt.
    pub(crate) fn check_icrc<'a>(
        &self,
        src: SocketAddrV4,
        dgram: &'a [u8],
        malformed: &AtomicU64,
        bad: &AtomicU64,
    ) -> Option<&'a [u8]> {
        if dgram.len() < bth::HEADER_LEN + ICRC_LEN {
            malformed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let (pkt, trailer) = dgram.split_at(dgram.len() - ICRC_LEN);
        let dst = self.endpoint();
        let want = self.icrc(src, dst, pkt);
        let got = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
        if got == want {
            return Some(pkt);
        }
        // The socket hides the IPv4 header, whose identification and DF bit
        // the ICRC covers. A sender whose kernel picks a non-zero
        // identification (Linux rxe: __ip_select_ident) is accepted when some
        // (identification, DF) explains the difference exactly.
        let solver = {
            let mut m = crate::lock(&self.solvers);
            if m.len() > 4096 {
                m.clear();
            }
            Arc::clone(
                m.entry(pkt.len())
                    .or_insert_with(|| Arc::new(IdentSolver::new(src, dst, pkt.len()))),
            )
        };
        if solver.solve(got ^ want).is_some() {
            return Some(pkt);
        }
        bad.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// One send of one packet with IP TOS `tos`: rustix's direct `sendto`
/// syscall when the socket's option gives that TOS (std's goes through
/// libc's sendto, a thread-cancellation point that toggles async-cancel
/// state around the call: ~3% of a bandwidth sender's CPU), else a
/// `sendmsg` carrying the TOS as a control message ([`TosSocket`]).
fn send_one(
    sock: &TosSocket,
    pkt: &[u8],
    to: SocketAddrV4,
    tos: u8,
    tx: &AtomicU64,
    tx_err: &AtomicU64,
) {
    let sent = match sock.cmsg_tos(tos) {
        None => rustix::net::sendto_v4(sock, pkt, rustix::net::SendFlags::empty(), &to).is_ok(),
        Some(t) => offload::send_msg(sock, to, pkt, None, Some(t)).is_ok(),
    };
    match sent {
        true => tx.fetch_add(1, Ordering::Relaxed),
        false => tx_err.fetch_add(1, Ordering::Relaxed),
    };
}

/// The IPv4 + UDP datagram of the raw send path around `pkt` (ICRC
/// included): DF, TTL 64, identification `ident`, TOS `tos`, UDP checksum
/// 0 (allowed over IPv4; the ICRC covers the payload). `None` if it does
/// not fit one datagram (wire's Reprs would saturate the length fields).
fn raw_datagram(
    src: SocketAddrV4,
    to: SocketAddrV4,
    ident: u16,
    tos: u8,
    pkt: &[u8],
) -> Option<Vec<u8>> {
    let udp_len = udp::HEADER_LEN + pkt.len();
    let total = u16::try_from(ipv4::HEADER_LEN + udp_len).ok()?;
    let ip = ipv4::Repr {
        ident,
        dscp_ecn: tos,
        ..ipv4::Repr::udp(*src.ip(), *to.ip(), udp_len)
    };
    let u = udp::Repr {
        src_port: src.port(),
        dst_port: to.port(),
        payload_len: pkt.len(),
    };
    let mut d = vec![0u8; usize::from(total)];
    ip.emit(&mut ipv4::Packet::new_unchecked(&mut d[..]));
    u.emit(&mut udp::Packet::new_unchecked(&mut d[ipv4::HEADER_LEN..]));
    d[ipv4::HEADER_LEN + udp::HEADER_LEN..].copy_from_slice(pkt);
    Some(d)
}

/// The 40-byte GRH area of a UD receive for an IPv4 sender: 20 zero bytes,
/// then the IPv4 header (as rxe places it).
pub(crate) fn grh_for(src: SocketAddrV4, dst: Ipv4Addr, ip_payload_len: usize) -> [u8; 40] {
    let mut g = [0u8; 40];
    ipv4::Repr::udp(*src.ip(), dst, ip_payload_len)
        .emit(&mut ipv4::Packet::new_unchecked(&mut g[20..]));
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The raw path's datagram is the header the ICRC was computed over:
    /// the bytes the hand-built header had (DF, TTL 64, UDP checksum 0),
    /// plus a valid IPv4 checksum, and the whole frame passes wire's ICRC
    /// check; a datagram too long for the length fields is refused.
    #[test]
    fn the_raw_datagram_carries_the_header_the_icrc_covers() {
        let src: SocketAddrV4 = "10.0.0.1:49153".parse().unwrap();
        let to: SocketAddrV4 = "10.0.0.2:4791".parse().unwrap();
        let mut pkt = vec![0x04, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 1];
        pkt.extend_from_slice(&[1, 2, 3, 4]);
        let crc = icrc_with(src, to, &pkt, 0x1234, true);
        pkt.extend_from_slice(&crc.to_le_bytes());
        // ECT(0) on DSCP 26, as a congestion-controlled QP's data.
        let d = raw_datagram(src, to, 0x1234, 0x6a, &pkt).unwrap();
        let mut want = vec![0x45, 0x6a, 0, 48, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0];
        want.extend_from_slice(&[
            10, 0, 0, 1, 10, 0, 0, 2, 0xc0, 0x01, 0x12, 0xb7, 0, 28, 0, 0,
        ]);
        want.extend_from_slice(&pkt);
        let ip = ipv4::Packet::new_checked(&d[..]).unwrap();
        assert!(ip.verify_checksum());
        let mut got = d.clone();
        got[10..12].fill(0);
        assert_eq!(got, want);
        assert_eq!(rdmakit_wire::frame::icrc_valid_ip(&d), Ok(true));
        // A switch marking CE changes the TOS (and the IP checksum), not
        // the ICRC's verdict: the ICRC masks the TOS byte.
        let mut marked = d.clone();
        marked[1] |= 3;
        assert_eq!(rdmakit_wire::frame::icrc_valid_ip(&marked), Ok(true));
        assert!(raw_datagram(src, to, 1, 0, &vec![0; 65_536 - 28]).is_none());
        assert!(raw_datagram(src, to, 1, 0, &vec![0; 65_535 - 28]).is_some());
    }

    #[test]
    fn flow_ports_are_in_the_rocev2_entropy_range() {
        for l in [1u32, 17, 0x12345, 0xffffff] {
            for r in [0u32, 1, 18, 0xabcdef] {
                let p = flow_port(l, r);
                assert!((0xc000..=0xffff).contains(&p), "{p:#x}");
            }
        }
        assert_ne!(flow_port(17, 18), flow_port(17, 19));
    }

    #[test]
    fn loopback_qpns_route_to_their_slots_endpoint() {
        for slot in [1, 255, 256, 777, MAX_SLOT] {
            assert_eq!(addr_slot(slot_addr(slot)), Some(slot));
        }
        assert_eq!(addr_slot(Ipv4Addr::new(127, 77, 0, 0)), None);
        assert_eq!(addr_slot(Ipv4Addr::new(127, 0, 0, 1)), None);
        let a = Net::bind(None, 0, Offloads::ALL, true, SoftTransport::Udp).unwrap();
        let b = Net::bind(None, 0, Offloads::ALL, true, SoftTransport::Udp).unwrap();
        assert_eq!(a.addr(), host_device_addr());
        assert_eq!(a.addr(), b.addr(), "one device address for every context");
        let (ba, bb) = (a.qpn_base().unwrap(), b.qpn_base().unwrap());
        assert_ne!(ba, bb);
        // A QPN of b, addressed to the device address, goes to b's socket.
        assert_eq!(a.route(a.addr(), bb | 42).ip(), b.endpoint().ip());
        assert_eq!(b.route(b.addr(), ba | 7).ip(), a.endpoint().ip());
        // Other addresses are sent as addressed.
        let far = Ipv4Addr::new(10, 0, 3, 2);
        assert_eq!(*a.route(far, bb).ip(), far);
        // The GRH names the device, not a context's private endpoint.
        assert_eq!(a.source_addr(*b.endpoint().ip()), a.addr());
        assert_eq!(a.source_addr(far), far);
    }

    #[test]
    fn the_host_device_takes_the_first_up_running_non_loopback_address() {
        let (up, run, lo) = (
            libc::IFF_UP as u32,
            libc::IFF_RUNNING as u32,
            libc::IFF_LOOPBACK as u32,
        );
        let a = |s: &str, flags| IfAddr {
            addr: s.parse().unwrap(),
            flags,
        };
        let list = [
            a("127.0.0.1", up | run | lo),
            a("10.9.9.9", up),           // no carrier
            a("169.254.3.4", up | run),  // link-local
            a("192.0.2.2", up | run),    // eth0
            a("198.51.100.7", up | run), // a later interface
        ];
        assert_eq!(pick_host_addr(&list), Some("192.0.2.2".parse().unwrap()));
        assert_eq!(pick_host_addr(&list[..3]), None);
        assert_eq!(pick_host_addr(&[]), None);
        // This host: some interface holds the address the device takes.
        let h = host_device_addr();
        assert!(
            h == LOOPBACK_DEVICE_ADDR || UdpSocket::bind(SocketAddrV4::new(h, 0)).is_ok(),
            "{h} is no address of this host"
        );
    }
}

/// The send-only raw IPv4 socket, unless the process lacks CAP_NET_RAW
/// (the device configuration's `raw_tx` decides whether to try).
fn raw_socket() -> Option<std::os::fd::OwnedFd> {
    rustix::net::socket_with(
        rustix::net::AddressFamily::INET,
        rustix::net::SocketType::RAW,
        rustix::net::SocketFlags::CLOEXEC,
        Some(rustix::net::ipproto::RAW),
    )
    .ok()
}

/// The ICRC of a transport packet between `src` and `dst` as sent in an
/// IPv4 header with identification `ident` and the given DF bit (TTL, TOS
/// and checksum are masked by the ICRC itself).
fn icrc_with(src: SocketAddrV4, dst: SocketAddrV4, transport: &[u8], ident: u16, df: bool) -> u32 {
    let flow = rdmakit_wire::icrc::Ipv4Flow {
        src: *src.ip(),
        dst: *dst.ip(),
        sport: src.port(),
        dport: dst.port(),
        ident,
        dont_frag: df,
    };
    // A transport packet from the engine always holds a BTH and fits a
    // datagram; on the impossible error 0 makes the receiver drop it.
    rdmakit_wire::icrc::compute_ipv4(&flow, transport).unwrap_or(0)
}

/// Finds the IPv4 identification and DF bit a received ICRC implies.
///
/// CRC-32 is affine: flipping header bit *j* changes the ICRC by a fixed
/// vector that depends only on how many bytes follow it, not on their
/// content. So `received ^ computed(ident 0, DF)` must be a XOR of the
/// 17 vectors of the identification's 16 bits and DF; Gaussian elimination
/// over GF(2) (32 equations, 17 unknowns) says whether it is, and which.
/// Accepting any of the 2^17 headers leaves 15 of the ICRC's 32 bits to
/// catch corruption (UDP's own checksum covers the datagram as well).
#[derive(Debug)]
pub(crate) struct IdentSolver {
    /// `pivot[b]`: a basis vector whose highest set bit is `b`, and the
    /// unknowns (bit 0..16 = identification bits, 16 = DF) it combines.
    pivot: [Option<(u32, u32)>; 32],
}

impl IdentSolver {
    /// The solver for transport packets of `len` bytes (without ICRC).
    pub(crate) fn new(src: SocketAddrV4, dst: SocketAddrV4, len: usize) -> IdentSolver {
        let zero = vec![0u8; len.max(12)];
        let base = icrc_with(src, dst, &zero, 0, true);
        let mut s = IdentSolver { pivot: [None; 32] };
        for j in 0..17u32 {
            let v = if j < 16 {
                icrc_with(src, dst, &zero, 1 << j, true)
            } else {
                icrc_with(src, dst, &zero, 0, false)
            } ^ base;
            s.insert(v, 1 << j);
        }
        s
    }

    fn insert(&mut self, mut v: u32, mut m: u32) {
        for b in (0..32).rev() {
            if v & (1 << b) == 0 {
                continue;
            }
            match self.pivot[b] {
                Some((pv, pm)) => {
                    v ^= pv;
                    m ^= pm;
                }
                None => {
                    self.pivot[b] = Some((v, m));
                    return;
                }
            }
        }
    }

    /// `(identification, df)` such that the ICRC difference `diff` is
    /// explained by them, if any.
    pub(crate) fn solve(&self, mut diff: u32) -> Option<(u16, bool)> {
        let mut m = 0u32;
        for b in (0..32).rev() {
            if diff & (1 << b) == 0 {
                continue;
            }
            let (pv, pm) = self.pivot[b]?;
            diff ^= pv;
            m ^= pm;
        }
        // DF set is the baseline: the DF unknown flips it off.
        Some(((m & 0xffff) as u16, m & (1 << 16) == 0))
    }
}

#[cfg(test)]
mod ident_tests {
    use super::*;

    fn a(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    #[test]
    fn the_identification_a_sender_chose_is_recovered_from_the_icrc() {
        let (src, dst) = (a("10.0.3.2:49152"), a("10.0.3.1:4791"));
        let pkt: Vec<u8> = (0..1052u32).map(|i| (i * 7 + 3) as u8).collect();
        let solver = IdentSolver::new(src, dst, pkt.len());
        let base = icrc_with(src, dst, &pkt, 0, true);
        for (ident, df) in [(0x1234, true), (0xffff, true), (1, false), (0xbeef, false)] {
            let got = icrc_with(src, dst, &pkt, ident, df);
            assert_eq!(solver.solve(got ^ base), Some((ident, df)));
        }
        // A corrupted ICRC is refused unless it happens to fall in the span.
        let corrupt = icrc_with(src, dst, &pkt, 0x1234, true) ^ 0x8000_0001;
        let refused = (0..32)
            .filter(|b| solver.solve((corrupt ^ (1 << b)) ^ base).is_none())
            .count();
        assert!(refused >= 15, "{refused}");
    }
}
