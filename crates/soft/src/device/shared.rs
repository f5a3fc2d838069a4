//! What every context of a device shares with its progress thread: the
//! device's parts — identity and attributes, admission, one table per
//! object (each owning its state and limits), the async event queue, the
//! network, the progress thread's plan — and the receive path that ties
//! them together: datagrams and ring packets are taken off the network and
//! fed to their QPs' engines, held ACKs are sent, timers fired.
//!
//! [`Shared`] owns its parts and hands them out through narrow accessors;
//! every other module reaches a part through those, never through
//! `Shared`'s fields.

use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rdmakit_proto::{Answer, Clock, Instant, LazyClock, Wc};
use rdmakit_types::device::AsyncEvent;
use rdmakit_wire::{bth, cma as wcma};

use crate::attr::{DeviceAttr, Limits, PortAttr};
use crate::cma::SoftTransport;
use crate::errno::{Errno, Origin, Result, SoftError};
use crate::faults::{self, Dir, Happening, Held, Injector, PacketInfo, Verb};
use crate::lock;
use crate::net::{self, Net};
use crate::registry::Registry;

use super::admit::{registry_error, Admission};
use super::ah::Ahs;
use super::channel::Channels;
use super::config::DeviceConfig;
use super::cq::{Cq, Cqs, Pushed};
use super::events::AsyncEvents;
use super::gsi::{Gsi, GSI_QPN};
use super::info::{AtomicCounters, Counters, ResourceCounts};
use super::mr::Mrs;
use super::mw::Mws;
use super::pd::Pds;
use super::progress::Progress;
use super::qp::{Came, Qp, Qps};
use super::srq::Srqs;
use super::{err, monotonic_ns, LOOPBACK_LID};

/// The device's parts.
#[derive(Debug)]
pub(super) struct Shared {
    name: String,
    attr: DeviceAttr,
    port: PortAttr,
    limits: Limits,
    /// How packets and RC data reach a peer on this host, resolved once
    /// at open ([`Net::transport`]) and handed to the MR table.
    transport: SoftTransport,
    /// CLOCK_MONOTONIC at creation, ns: the engine's time is read from the
    /// clock directly (see [`monotonic_ns`]), not through `Instant`.
    epoch_ns: u64,
    leaky: bool,
    /// Busy-poll mode ([`DeviceConfig::busy_poll`]).
    busy_poll: bool,
    admission: Admission,
    pds: Pds,
    mrs: Mrs,
    mws: Mws,
    ahs: Ahs,
    cqs: Cqs,
    channels: Channels,
    srqs: Srqs,
    qps: Qps,
    events: AsyncEvents,
    net: Net,
    /// The fault plan at work; None when it has no rules, so the data path
    /// pays one predictable branch for faults and nothing else.
    faults: Option<Box<Injector>>,
    counters: AtomicCounters,
    /// The context descriptor when no registry holds one.
    ctx_fd_anon: OwnedFd,
    progress: Progress,
    poll_buf: Mutex<PollBuf>,
    held_acks: HeldAcks,
    /// QP1 and the management agent attached to it.
    gsi: Gsi,
    /// Congestion control parameters every QP reads
    /// ([`DeviceConfig::cc`]).
    cc: Arc<rdmakit_proto::cc::Params>,
}

impl Shared {
    /// Opens the device's parts: the registry, the descriptors, the
    /// socket (and same-host rings).
    ///
    /// # Errors
    /// As [`super::Device::open`].
    pub(super) fn open(cfg: &DeviceConfig) -> Result<Shared> {
        let name = cfg.name.clone().unwrap_or_else(|| "soft0".to_string());
        let addr = cfg.configured_addr()?;
        let exhaustion = cfg.faults.exhaust.unwrap_or(Errno::EINVAL);
        // A registry that cannot be used safely (a refused base or
        // directory, a lock held past the bounded wait) fails the open,
        // saying which path and why: limits never silently stop counting.
        let registry = if cfg.shared_registry {
            let root = cfg.registry_root();
            Some(Registry::open_in(&root, &name).map_err(|e| registry_error(&e, &root))?)
        } else {
            None
        };
        let leaky = cfg
            .leaky
            .unwrap_or_else(|| registry.as_ref().is_some_and(Registry::device_leaky));
        // The context the objects belong to: held (flock) while this device
        // is open or a forked child keeps the descriptor.
        if let Some(r) = &registry {
            r.attach(leaky).map_err(|e| registry_error(&e, r.dir()))?;
        }
        let admission = Admission::new(name.clone(), registry, exhaustion);
        // A failed open leaves no context file behind (a second bind of a
        // configured address left one until the next open swept it).
        let detach = |e: SoftError| {
            admission.remove_instance();
            e
        };
        let ctx_fd_anon =
            rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).map_err(|e| {
                detach(err(
                    "ibv_open_device",
                    Errno(e.raw_os_error()),
                    Origin::Kernel,
                    "eventfd for the context descriptor failed",
                ))
            })?;
        let events = AsyncEvents::new().map_err(detach)?;
        let allowed = net::Offloads {
            gso: cfg.gso,
            gro: cfg.gro,
        };
        // Packet faults act on the link: a plan with packet rules puts
        // every packet on it (UDP), none in a same-host ring or copy.
        let link_events = (cfg.faults.events.iter()).any(|e| e.event != faults::Event::QpFatal);
        let asked = match cfg.faults.packets.is_empty() && !link_events {
            true => cfg.transport,
            false => SoftTransport::Udp,
        };
        let net = Net::bind(addr, cfg.udp_port, allowed, cfg.raw_tx, asked).map_err(detach)?;
        // The one transport the device uses from now on: what was asked
        // for, unless the rings could not be had.
        let transport = net.transport();
        let addr = net.addr();
        let mut port = crate::attr::port_attr(addr, cfg.netdev_mtu);
        // The loopback device's port has LID 1: RoCE has no LIDs (rxe's
        // port_lid is 0, and an AV without a GRH is refused), but a device
        // that is the whole host can say what an InfiniBand-style program
        // means by the LID it exchanged — this port (`lid_destination`).
        if net.qpn_base().is_some() {
            port.lid = LOOPBACK_LID;
        }
        let l = &cfg.limits;
        Ok(Shared {
            name,
            attr: crate::attr::device_attr(l, addr),
            cc: Arc::new(cfg.cc.clone()),
            port,
            limits: l.clone(),
            transport,
            epoch_ns: monotonic_ns(),
            leaky,
            busy_poll: cfg.busy_poll,
            admission,
            pds: Pds::new(l),
            mrs: Mrs::new(l, transport),
            mws: Mws::new(l),
            ahs: Ahs::new(l),
            cqs: Cqs::new(l),
            channels: Channels::new(),
            srqs: Srqs::new(l),
            qps: Qps::new(l),
            events,
            net,
            faults: (!cfg.faults.packets.is_empty()
                || !cfg.faults.verbs.is_empty()
                || !cfg.faults.events.is_empty())
            .then(|| Box::new(Injector::new(&cfg.faults))),
            counters: AtomicCounters::default(),
            ctx_fd_anon,
            progress: Progress::new(),
            poll_buf: Mutex::new(PollBuf::default()),
            held_acks: HeldAcks::default(),
            gsi: Gsi::new(),
        })
    }

    // ------------------------------------------------------------------ parts

    /// Device name.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// Device attributes.
    pub(super) fn attr(&self) -> &DeviceAttr {
        &self.attr
    }

    /// Port 1's attributes (its state as configured).
    pub(super) fn port(&self) -> &PortAttr {
        &self.port
    }

    /// The limits the device enforces (each table holds its own).
    pub(super) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The transport in use.
    pub(super) fn transport(&self) -> SoftTransport {
        self.transport
    }

    /// Whether the device keeps a dead process's objects.
    pub(super) fn leaky(&self) -> bool {
        self.leaky
    }

    /// Admission against the limits and the registry.
    pub(super) fn admission(&self) -> &Admission {
        &self.admission
    }

    /// The PD table.
    pub(super) fn pds(&self) -> &Pds {
        &self.pds
    }

    /// The MR table.
    pub(super) fn mrs(&self) -> &Mrs {
        &self.mrs
    }

    /// The memory-window table.
    pub(super) fn mws(&self) -> &Mws {
        &self.mws
    }

    /// The AH and path tables.
    /// The congestion control parameters QPs are created with.
    pub(super) fn cc(&self) -> &Arc<rdmakit_proto::cc::Params> {
        &self.cc
    }

    pub(super) fn ahs(&self) -> &Ahs {
        &self.ahs
    }

    /// The CQ table.
    pub(super) fn cqs(&self) -> &Cqs {
        &self.cqs
    }

    /// The completion-channel table.
    pub(super) fn channels(&self) -> &Channels {
        &self.channels
    }

    /// The SRQ table.
    pub(super) fn srqs(&self) -> &Srqs {
        &self.srqs
    }

    /// The QP table.
    pub(super) fn qps(&self) -> &Qps {
        &self.qps
    }

    /// The async event queue.
    pub(super) fn events(&self) -> &AsyncEvents {
        &self.events
    }

    /// The network: socket, flows, same-host rings.
    pub(super) fn net(&self) -> &Net {
        &self.net
    }

    /// The fault plan at work when it has packet rules.
    pub(super) fn packet_faults(&self) -> Option<&Injector> {
        self.faults.as_deref().filter(|f| f.has_packet_rules())
    }

    /// Whether this call of `verb` is to fail, and with which errno (a
    /// fault of the plan, counted).
    pub(super) fn injected_failure(&self, verb: Verb) -> Option<Errno> {
        self.faults.as_deref()?.fail(verb)
    }

    /// The device counters as the data path bumps them.
    pub(super) fn counters(&self) -> &AtomicCounters {
        &self.counters
    }

    /// The progress thread's plan.
    pub(super) fn progress(&self) -> &Progress {
        &self.progress
    }

    /// QP1.
    pub(super) fn gsi(&self) -> &Gsi {
        &self.gsi
    }

    /// The context's descriptor: the registry's locked context file, else
    /// an anonymous one.
    pub(super) fn context_fd(&self) -> RawFd {
        self.admission
            .registry()
            .and_then(Registry::context_fd)
            .unwrap_or_else(|| self.ctx_fd_anon.as_raw_fd())
    }

    /// The counters now.
    pub(super) fn counters_now(&self) -> Counters {
        let mut c = self
            .counters
            .snapshot(self.net.rings(), self.qps.transport_sums());
        if let Some(f) = &self.faults {
            c.faults = f.counts();
        }
        c
    }

    /// Publishes the counters for other processes when they changed since
    /// `last` (what was published before); returns what is published now.
    /// A failed write is tried again at the next snapshot.
    pub(super) fn publish_counters(
        &self,
        last: Option<crate::registry::counters::Values>,
    ) -> Option<crate::registry::counters::Values> {
        let Some(r) = self.admission.registry() else {
            return last;
        };
        let now = self.counters_now().published();
        if last == Some(now) {
            return last;
        }
        match r.publish(&now) {
            Ok(()) => Some(now),
            Err(_) => last,
        }
    }

    /// Live objects per type.
    pub(super) fn resource_counts(&self) -> ResourceCounts {
        ResourceCounts {
            pd: self.pds.len(),
            mr: self.mrs.len(),
            cq: self.cqs.len(),
            qp: self.qps.len(),
            srq: self.srqs.len(),
            ah: self.ahs.len(),
        }
    }

    // ------------------------------------------------------------------ time

    /// The engine's time: since the device opened.
    pub(super) fn now(&self) -> Instant {
        Instant::from_nanos(monotonic_ns().saturating_sub(self.epoch_ns))
    }

    /// The engine's clock for one pass: read when the engine first arms or
    /// checks a timer, at most once ([`LazyClock`]). A ping-pong side read
    /// the clock four times per round (its post, the peer's message, the
    /// peer's ACK, its own held ACK); only the post arms a timer.
    pub(super) fn clock(&self) -> LazyClock<impl Fn() -> Instant + '_> {
        LazyClock::new(move || self.now())
    }

    // ------------------------------------------------------------------ what an engine pass leaves

    /// Queues an async event.
    pub(super) fn raise(&self, e: AsyncEvent) {
        self.events.raise(e);
    }

    /// Adds a completion to CQ `c`; a full CQ loses it, counted, and says
    /// so once with `IBV_EVENT_CQ_ERR`.
    pub(super) fn complete(&self, c: &Cq, wc: Wc) {
        if let Pushed::Lost { first } = self.cqs.push(c, wc) {
            self.counters.cq_overruns.fetch_add(1, Ordering::Relaxed);
            if first {
                self.raise(AsyncEvent::CqErr { cq: c.id() });
            }
        }
    }

    /// QP `qpn` holds plain ACKs back ([`HeldAcks`]).
    pub(super) fn hold_ack(&self, qpn: u32) {
        self.held_acks.push(qpn);
    }

    /// Sends the plain ACKs application threads held back.
    pub(super) fn flush_held_acks(&self) {
        if !self.held_acks.take_flag() {
            return;
        }
        // One at a time, not `mem::take` of the list: its allocation stays
        // for the next push (one held ACK per message in a ping-pong).
        // Entries pushed meanwhile are sent too; their flag is set again
        // and a later call finds the list empty.
        let clock = self.clock();
        while let Some(qpn) = self.held_acks.pop() {
            if let Some(q) = self.qps.get(qpn) {
                let mut eng = q.engine();
                if eng.ack_held() {
                    eng.drive(&q, self, &clock);
                }
            }
        }
    }

    // ------------------------------------------------------------------ receive path

    /// What `ibv_poll_cq` does on an empty CQ `c` in busy-poll mode:
    /// receive in the caller's thread, stopping at the first datagram that
    /// completes into `c` — the application gets its completion without
    /// another `recvfrom` (or the peer's ACK) in between.
    pub(super) fn busy_poll_for(&self, c: &Cq) {
        if !self.busy_poll {
            return;
        }
        self.progress.busy_polled();
        self.flush_held_acks();
        let Ok(mut b) = self.poll_buf.try_lock() else {
            return;
        };
        self.drain(&mut b, 64, true, || c.has_completions());
    }

    /// Processes up to `max` datagrams already waiting, without blocking,
    /// in the caller's thread. Skips when another thread is doing the same.
    pub(super) fn poll_network(&self, max: usize) {
        let Ok(mut b) = self.poll_buf.try_lock() else {
            return;
        };
        self.drain(&mut b, max, false, || false);
    }

    /// The progress thread's receive: like [`Shared::poll_network`], but
    /// waiting for a thread already at it. How many packets it took from
    /// same-host rings.
    pub(super) fn drain_network(&self, max: usize) -> usize {
        let mut b = lock(&self.poll_buf);
        self.drain(&mut b, max, false, || false)
    }

    /// Takes and processes up to `max` waiting datagrams, stopping early once
    /// `done` holds after one. Every datagram is taken and processed under
    /// `poll_buf`'s lock (`pb`), by whichever thread holds it, so a flow's
    /// packets are processed in arrival order. `app`: an application
    /// thread's busy poll, which holds the plain ACKs of socket datagrams
    /// back too (those of ring packets every drain holds) and spares the
    /// socket while the rings carry the traffic. How many packets it took
    /// from same-host rings.
    fn drain(&self, pb: &mut PollBuf, max: usize, app: bool, done: impl Fn() -> bool) -> usize {
        // One clock for the pass, read only if a packet arms a timer.
        let clock = self.clock();
        // The rings' receivers this drain's packets wake are woken once,
        // when it ends (`net::shm::wake`); held from the first packet, so
        // an empty poll pays nothing for it.
        let mut wakes = None;
        // Same-host rings first: a memory load each, no system call. Their
        // plain ACKs are held (`deliver`) and go once the rings are
        // drained, one cumulative ACK per QP: the progress thread's right
        // after, a busy poller's at its next poll. One ACK per request
        // cost a same-host WRITE stream's requester a pass per ACK; with
        // 16 requests per drain, 1.34 times the bandwidth (10 pairs).
        let took = self.net.rings().map_or(0, |r| {
            r.drain(
                &mut pb.buf,
                max,
                |src, peer, pkt| {
                    wakes.get_or_insert_with(|| self.net.hold_wakes());
                    let pkts = &mut std::iter::once(pkt).peekable();
                    let came = Came {
                        src,
                        peer: Some(peer.as_ref()),
                        ce: false,
                        answer: None,
                    };
                    self.deliver(came, pkts, true, &clock);
                },
                &done,
            )
        });
        if took > 0 {
            pb.rings_last = true;
            if !app {
                self.flush_held_acks();
            }
            if done() {
                return took;
            }
        } else if app && pb.spare_socket() {
            return took;
        }
        for _ in took..max {
            match self.net.try_recv(&mut pb.buf) {
                Some(d) => {
                    wakes.get_or_insert_with(|| self.net.hold_wakes());
                    if self.receive(d, &pb.buf[..d.len], app, &clock) {
                        pb.rings_last = false;
                    }
                }
                None => break,
            }
            if done() {
                break;
            }
        }
        took
    }

    /// Feeds what one receive `d` returned (a datagram, or several of one
    /// flow coalesced by UDP_GRO with segment size `d.seg`, all with `d`'s
    /// IP TOS; see [`net::gro_split`]). Every packet's ICRC is checked on its own; a
    /// notify datagram makes the rings accept what their channel was handed
    /// ([`net::shm`]); a same-host request is dropped and counted: it is
    /// taken only from a same-host ring, never from the network. Whether it
    /// held a transport packet (not only a wake-up or a notify).
    fn receive(&self, d: net::Datagram, buf: &[u8], hold_acks: bool, now: impl Clock) -> bool {
        let src = d.from;
        let mut pkts = net::gro_split(buf, d.seg)
            .filter_map(|d| {
                if d.is_empty() {
                    return None; // a wake-up from `Net::kick` or a ring's sender
                }
                if d == net::shm::NOTIFY {
                    if let Some(r) = self.net.rings() {
                        r.accept();
                    }
                    return None;
                }
                let pkt = self.net.check_icrc(
                    src,
                    d,
                    &self.counters.rx_malformed,
                    &self.counters.rx_icrc_errors,
                )?;
                if pkt.first().is_some_and(|&op| wcma::is_cma_opcode(op)) {
                    self.counters
                        .rx_same_host_refused
                        .fetch_add(1, Ordering::Relaxed);
                    return None;
                }
                Some(pkt)
            })
            .peekable();
        let traffic = pkts.peek().is_some();
        let came = Came {
            src,
            peer: None,
            ce: d.ce(),
            answer: None,
        };
        self.deliver(came, &mut pkts, hold_acks, now);
        traffic
    }

    /// Hands transport packets that came as `came` says (checked, without
    /// ICRC) to their QPs: a run of packets for one QP is fed under one
    /// engine lock and the engine driven (transmit, completions) once after
    /// the run, so the 16 packets of a 64 KiB write cost one lookup, one
    /// lock and one pass, and their ACKs coalesce.
    fn deliver<'a>(
        &self,
        came: Came<'_>,
        pkts: &mut std::iter::Peekable<impl Iterator<Item = &'a [u8]>>,
        hold_acks: bool,
        now: impl Clock,
    ) {
        match self.packet_faults() {
            None => self.deliver_as_is(came, pkts, hold_acks, now),
            Some(f) => self.deliver_faulted(f, came, pkts, hold_acks, now),
        }
    }

    /// [`Shared::deliver`] with the fault plan's receive rules: each packet
    /// judged on its own, then dropped, counted as an ICRC error
    /// (corrupted), held back (delayed, reordered), or delivered (CE
    /// marked, twice). A same-host request is never faulted: it is taken
    /// only from its peer's ring, and a later delivery would refuse it.
    fn deliver_faulted<'a>(
        &self,
        f: &Injector,
        came: Came<'_>,
        pkts: &mut std::iter::Peekable<impl Iterator<Item = &'a [u8]>>,
        hold_acks: bool,
        now: impl Clock,
    ) {
        for pkt in pkts {
            let one = |ce: bool, answer: Option<Answer>| {
                let pkts = &mut std::iter::once(pkt).peekable();
                let came = Came { ce, answer, ..came };
                self.deliver_as_is(came, pkts, hold_acks, now);
            };
            let Some(info) = judged(pkt, Dir::Rx, None) else {
                one(came.ce, None);
                continue;
            };
            let t = self.now().as_nanos();
            let v = f.judge(info, t);
            let ce = came.ce || v.ce;
            if v.drop {
            } else if v.corrupt {
                self.counters.rx_icrc_errors.fetch_add(1, Ordering::Relaxed);
            } else if let Some(h) = v.hold {
                let tos = if ce { 0b11 } else { 0 };
                f.hold(Held::new(Dir::Rx, pkt, came.src, tos, h));
                self.progress.deadline(h.0, &self.net);
            } else {
                one(ce, v.answer);
                if v.dup {
                    one(ce, None);
                }
            }
            self.release(f.due(Some(Dir::Rx), t), now);
        }
    }

    /// Sends or delivers packets the fault plan held back and are due.
    pub(super) fn release(&self, due: Vec<Held>, now: impl Clock) {
        for mut h in due {
            match h.dir {
                Dir::Rx => {
                    let pkts = &mut std::iter::once(&h.bytes[..]).peekable();
                    let came = Came {
                        src: h.addr,
                        peer: None,
                        ce: h.tos == 0b11,
                        answer: None,
                    };
                    self.deliver_as_is(came, pkts, false, now);
                }
                _ => {
                    let len = h.bytes.len();
                    h.bytes.resize(len + net::ICRC_LEN, 0);
                    self.net.send(
                        *h.addr.ip(),
                        h.addr.port(),
                        h.tos,
                        &mut net::FlowCache::default(),
                        &mut h.bytes,
                        len,
                        false,
                        &self.counters.tx_packets,
                        &self.counters.tx_errors,
                    );
                }
            }
        }
    }

    /// Sends now the packets the fault plan holds back on their way out
    /// (delayed, reordered): the device is going, and what a link carries
    /// still arrives when its sender has gone — a peer waiting for this
    /// side's last ACK gets it.
    pub(super) fn send_held_back(&self) {
        if let Some(f) = self.packet_faults() {
            self.release(f.due(Some(Dir::Tx), u64::MAX), &self.clock());
        }
    }

    /// The fault plan's verdict on a packet QP `qpn` sends (`pkt`, without
    /// ICRC, to `dst` from source port `sport` with TOS `tos`), at the
    /// engine's transmit: whether it still goes the usual way, and with
    /// which TOS. A dropped packet goes nowhere; a corrupted, duplicated
    /// or held one goes (also) as its own datagram.
    pub(super) fn transmit_fault(
        &self,
        f: &Injector,
        qpn: u32,
        pkt: &[u8],
        (dst, sport, tos): (std::net::Ipv4Addr, u16, u8),
    ) -> Option<u8> {
        let Some(info) = judged(pkt, Dir::Tx, Some(qpn)) else {
            return Some(tos);
        };
        let t = self.now().as_nanos();
        let v = f.judge(info, t);
        let tos = if v.ce { tos | 0b11 } else { tos };
        let copy = |corrupt: bool| {
            let mut b = Vec::with_capacity(pkt.len() + net::ICRC_LEN);
            b.extend_from_slice(pkt);
            b.resize(pkt.len() + net::ICRC_LEN, 0);
            self.net.send(
                dst,
                sport,
                tos,
                &mut net::FlowCache::default(),
                &mut b,
                pkt.len(),
                corrupt,
                &self.counters.tx_packets,
                &self.counters.tx_errors,
            );
        };
        let due = f.due(Some(Dir::Tx), t);
        let out = if v.drop {
            None
        } else if v.corrupt {
            copy(true);
            None
        } else if let Some(h) = v.hold {
            let to = SocketAddrV4::new(dst, sport);
            f.hold(Held::new(Dir::Tx, pkt, to, tos, h));
            self.progress.deadline(h.0, &self.net);
            None
        } else {
            if v.dup {
                copy(false);
            }
            Some(tos)
        };
        self.release(due, &self.clock());
        out
    }

    /// [`Shared::deliver`] without faults (`came.answer`: the fault plan's
    /// answer to a request).
    fn deliver_as_is<'a>(
        &self,
        came: Came<'_>,
        pkts: &mut std::iter::Peekable<impl Iterator<Item = &'a [u8]>>,
        hold_acks: bool,
        now: impl Clock,
    ) {
        let qp_of = |p: &[u8]| bth::Packet::new_checked(p).map(|b| b.dest_qp()).ok();
        while let Some(pkt) = pkts.next() {
            let Some(dqpn) = qp_of(pkt) else {
                self.counters.rx_malformed.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            if dqpn == GSI_QPN {
                self.gsi.receive(came.src, pkt, &self.net, &self.counters);
                continue;
            }
            let Some(q) = self.qps.get(dqpn) else {
                self.counters.rx_unknown_qp.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let mut eng = q.engine();
            eng.feed(&q, self, came, pkt, now);
            // The rest of the run for this QP (a coalesced buffer is one
            // flow, so usually all of it).
            while let Some(next) = pkts.next_if(|p| qp_of(p) == Some(dqpn)) {
                eng.feed(&q, self, came, next, now);
            }
            eng.drive_received(&q, self, now, hold_acks);
        }
    }

    /// Whether port 1's link is down (the fault plan's `link down` or
    /// `device_fatal`).
    pub(super) fn link_down(&self) -> bool {
        self.faults
            .as_deref()
            .is_some_and(|f| f.link_down(self.now().as_nanos()))
    }

    /// Whether a packet that leaves outside the QPs' transmit (a MAD) is
    /// lost to a down link now (counted).
    pub(super) fn lost_to_link(&self) -> bool {
        self.faults
            .as_deref()
            .is_some_and(|f| f.lost_to_link(self.now().as_nanos()))
    }

    /// Makes an event rule's happening happen: the port's events, QPs to
    /// ERR (each raising its QP_FATAL when driven).
    fn happen(&self, f: &Injector, h: Happening, clock: impl Clock) {
        let fail = |qpn: Option<u32>| {
            for q in self.qps.select(qpn) {
                let mut eng = q.engine();
                if eng.fail() {
                    f.count_qp_fatal(1);
                    eng.drive(&q, self, clock);
                }
            }
        };
        match h {
            Happening::LinkDown => self.raise(AsyncEvent::PortErr { port: 1 }),
            Happening::LinkUp => self.raise(AsyncEvent::PortActive { port: 1 }),
            Happening::QpFatal(qpn) => fail(qpn),
            Happening::DeviceFatal => {
                self.raise(AsyncEvent::DeviceFatal);
                fail(None);
            }
        }
    }

    /// Fires the timers that are due; the next deadline (ns), if any.
    pub(super) fn fire_timers(&self) -> Option<u64> {
        // Read at once (every deadline is compared), but as the passes'
        // clock type: one instance of the engine's code, not two.
        let clock = self.clock();
        let now = (&clock).now();
        let (due, mut next): (Vec<Arc<Qp>>, _) = self.qps.due(now.as_nanos());
        if let Some(f) = self.faults.as_deref() {
            self.release(f.due(None, now.as_nanos()), &clock);
            for h in f.events_due(now.as_nanos()) {
                self.happen(f, h, now);
            }
            if let Some(d) = f.next_due().into_iter().chain(f.next_event()).min() {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        for q in due {
            let mut eng = q.engine();
            eng.handle_timeout(&clock);
            eng.drive(&q, self, &clock);
            let d = q.deadline();
            if d != u64::MAX {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        next
    }
}

/// The receive buffer every datagram and ring packet is taken into (one
/// thread at a time), and what busy polls know about where traffic comes
/// from.
#[derive(Debug)]
struct PollBuf {
    buf: Vec<u8>,
    /// The last packet came from a same-host ring, not the socket: a busy
    /// poll then reads the socket only every [`SOCKET_EVERY`]th time it
    /// finds the rings empty, instead of a `recvfrom` per spin (the one
    /// system call left on a ring's busy poll).
    rings_last: bool,
    /// Ring-empty busy polls until the socket is read again.
    socket_in: u32,
}

/// How often a busy poll reads the socket while the rings carry the
/// traffic: a datagram from a peer that takes no rings waits at most this
/// many spins, and its arrival makes every poll read the socket again.
const SOCKET_EVERY: u32 = 16;

impl PollBuf {
    /// Whether a busy poll that found the rings empty leaves the socket
    /// alone this time: while a ring carried the last packet, all but every
    /// [`SOCKET_EVERY`]th time.
    fn spare_socket(&mut self) -> bool {
        if !self.rings_last {
            return false;
        }
        if self.socket_in > 0 {
            self.socket_in -= 1;
            return true;
        }
        self.socket_in = SOCKET_EVERY - 1;
        false
    }
}

impl Default for PollBuf {
    fn default() -> PollBuf {
        PollBuf {
            buf: vec![0; 65536],
            rings_last: false,
            socket_in: 0,
        }
    }
}

/// QPs whose plain ACKs an application thread held back (see
/// [`super::qp::Engine::drive_with`]), and a flag that says the list may
/// be non-empty.
#[derive(Debug, Default)]
struct HeldAcks {
    qpns: Mutex<Vec<u32>>,
    any: AtomicBool,
}

impl HeldAcks {
    /// QP `qpn` holds ACKs back.
    fn push(&self, qpn: u32) {
        lock(&self.qpns).push(qpn);
        self.any.store(true, Ordering::Release);
    }

    /// Whether ACKs may be held, clearing the flag.
    fn take_flag(&self) -> bool {
        // A load first: a busy poller calls this on every empty poll, and
        // a swap would write the line each time.
        self.any.load(Ordering::Acquire) && self.any.swap(false, Ordering::AcqRel)
    }

    /// The next QP listed.
    fn pop(&self) -> Option<u32> {
        lock(&self.qpns).pop()
    }
}

/// What the fault plan judges of a transport packet (`pkt`, without ICRC)
/// going `dir` on QP `qpn` (on receive, the BTH's destination QP): `None`
/// for a packet it never judges, one too short for a BTH or a same-host
/// request.
fn judged(pkt: &[u8], dir: Dir, qpn: Option<u32>) -> Option<PacketInfo> {
    let b = bth::Packet::new_checked(pkt).ok()?;
    let opcode = b.opcode().0;
    (!wcma::is_cma_opcode(opcode)).then(|| PacketInfo {
        dir,
        qp: qpn.unwrap_or_else(|| b.dest_qp()),
        opcode,
        psn: b.psn(),
    })
}
