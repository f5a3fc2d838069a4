//! A QP's engine and what the device keeps beside it: the sans-IO
//! transport engine (`rdmakit_proto::Qp`), which of its send WRs own a
//! descriptor, the receives it took, its inline store, its transmit buffer
//! and flow, its destination's ring and path. One pass
//! ([`Engine::drive`]) moves posted WRs in, transmits, frees descriptors,
//! delivers completions and raises the events of state changes; a received
//! packet is fed with [`Engine::feed`].

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::Ordering;

use rdmakit_proto::{
    Access, AddressHandle, Answer, Arrival, AttrMask, Clock, Extent, Instant, Key, MemError,
    MemResult, Memory, ModifyError, Pd, QpAttr, QpConfig, QpState, QpType, SendWr, WcStatus,
};
use rdmakit_types::device::{AsyncEvent, QpInit};
use rdmakit_wire::cma as wcma;
use rdmakit_wire::{bth, OpCode};

use crate::cma::SoftTransport;
use crate::lock;
use crate::net::{self, Net};

use super::super::ah::Path;
use super::super::shared::Shared;
use super::Qp;

/// lkey of the engine-internal inline store (never a registered MR's key:
/// MR indices skip 0xffffff).
const INLINE_LKEY: u32 = 0xffff_ff00;

/// A QP's engine and its transmit state (behind the QP's engine lock).
#[derive(Debug)]
pub(in crate::device) struct Engine {
    qp: rdmakit_proto::Qp,
    /// Send WRs inside the engine, oldest first: does it own a descriptor?
    fifo: VecDeque<bool>,
    rq_in_engine: usize,
    srq_fed: usize,
    inline_store: Vec<u8>,
    inline_slot: usize,
    /// Transmit buffer: the engine writes each packet at the batch's tail.
    txbuf: Vec<u8>,
    /// Packets at the start of `txbuf` waiting for one send.
    batch: net::TxBatch,
    sport: u16,
    /// The flow socket of `sport`, looked up once per port, not per packet.
    flow: net::FlowCache,
    /// A connected QP's peer endpoint (from its AV, set at RTR): the only
    /// sender whose same-host ring may carry same-host requests to it.
    remote: Option<SocketAddrV4>,
    /// The last path looked up, `(AddressHandle, path)`: interned paths
    /// never change, so a packet to the same one skips the path table.
    path: Option<(u32, Path)>,
    /// A connected QP's primary path, `(AddressHandle, address)`: a packet
    /// from that address comes from the AV (a path table may hold several
    /// paths to one address, one per DSCP).
    av: Option<(AddressHandle, Ipv4Addr)>,
    last_state: QpState,
    last_error: Option<WcStatus>,
    /// Plain ACKs held back, the QP listed in the device's held ACKs.
    ack_held: bool,
}

/// How a packet came to a QP ([`Engine::feed`]).
#[derive(Clone, Copy, Debug)]
pub(in crate::device) struct Came<'a> {
    /// The sender's endpoint.
    pub(in crate::device) src: SocketAddrV4,
    /// The process the kernel identified as the sender, when the packet
    /// came on a same-host ring.
    pub(in crate::device) peer: Option<&'a net::shm::Peer>,
    /// The IP header said Congestion Experienced.
    pub(in crate::device) ce: bool,
    /// The fault plan's answer to it, when it is a request to refuse.
    pub(in crate::device) answer: Option<Answer>,
}

impl Engine {
    /// The engine of QP `cfg.qpn`, created with `init`.
    pub(super) fn new(cfg: QpConfig, init: &QpInit) -> Engine {
        let qpn = cfg.qpn;
        let qp = rdmakit_proto::Qp::new(cfg);
        let txlen = qp.max_packet_len() + net::ICRC_LEN;
        let inline_len = init.max_send_wr as usize * init.max_inline_data as usize;
        Engine {
            qp,
            fifo: VecDeque::new(),
            rq_in_engine: 0,
            srq_fed: 0,
            inline_store: vec![0; inline_len],
            inline_slot: 0,
            txbuf: vec![0; txlen],
            batch: net::TxBatch::default(),
            sport: net::flow_port(qpn, 0),
            flow: net::FlowCache::default(),
            remote: None,
            path: None,
            av: None,
            last_state: QpState::Reset,
            last_error: None,
            ack_held: false,
        }
    }

    /// Applies `ibv_modify_qp`'s attributes (validated by the caller
    /// against the device) to the engine: its flow and, with a new primary
    /// `path`, its route, its traffic class and whether its large RC
    /// messages may take the same-host path (the device's `transport` is
    /// `auto` and the destination's packets go through a same-host ring).
    /// Returns the new state, or why the engine refused and the state it
    /// stayed in.
    pub(super) fn modify(
        &mut self,
        q: &Qp,
        net: &Net,
        attr: &QpAttr,
        mask: AttrMask,
        path: Option<Path>,
        transport: SoftTransport,
    ) -> Result<QpState, (ModifyError, QpState)> {
        let cur = self.qp.state();
        self.qp.modify(attr, mask).map_err(|e| (e, cur))?;
        if mask.contains(AttrMask::DEST_QPN) || mask.contains(AttrMask::AV) {
            let dq = self.qp.attr().dest_qp_num;
            self.sport = net::flow_port(q.qpn(), dq);
        }
        if let Some(Path { ip, dscp }) = path {
            self.qp.set_traffic_class(dscp);
            self.av = Some((attr.ah, ip));
            let dq = self.qp.attr().dest_qp_num;
            if q.qp_type() != QpType::Ud {
                net.prepare(&mut self.flow, ip, dq);
                self.remote = Some(net.route(ip, dq));
            }
            // A same-host request travels nowhere but a same-host ring, as
            // a receiver takes one only from the ring of the process the
            // kernel identified.
            let on = self.flow.on_ring() && transport == SoftTransport::Auto;
            self.qp.set_same_host(on);
        }
        let st = self.qp.state();
        self.last_state = st;
        Ok(st)
    }

    /// Hands the engine a send WR whose mapping was refused (it completes
    /// with LOC_PROT_ERR in order); false when the engine's queue is full.
    /// Puts the QP in ERR as a fatal error would (the fault plan's
    /// `qp_fatal`): the next [`Engine::drive`] flushes its WRs and raises
    /// `IBV_EVENT_QP_FATAL`. False when it was in RESET or ERR already.
    pub(in crate::device) fn fail(&mut self) -> bool {
        if matches!(self.qp.state(), QpState::Reset | QpState::Err) {
            return false;
        }
        let attr = QpAttr {
            qp_state: QpState::Err,
            ..QpAttr::default()
        };
        self.last_error = None;
        self.qp.modify(&attr, AttrMask::STATE).is_ok()
    }

    pub(super) fn post_refused(&mut self, wr: SendWr) -> bool {
        let posted = self.qp.post_send(wr).is_ok();
        if posted {
            self.fifo.push_back(false);
        }
        posted
    }

    /// Receives the engine took from its QP's SRQ and holds.
    pub(super) fn srq_fed(&self) -> usize {
        self.srq_fed
    }

    /// The QP's current attributes.
    pub(super) fn attr(&self) -> QpAttr {
        self.qp.attr()
    }

    /// The engine's counters.
    pub(super) fn stats(&self) -> rdmakit_proto::Stats {
        *self.qp.stats()
    }

    /// Whether the QP's packets to its (last) destination go through a
    /// same-host ring.
    pub(super) fn on_ring(&self) -> bool {
        self.flow.on_ring()
    }

    /// Whether the QP's plain ACKs are held back.
    pub(in crate::device) fn ack_held(&self) -> bool {
        self.ack_held
    }

    /// Fires the engine's due timers (drive it afterwards).
    pub(in crate::device) fn handle_timeout(&mut self, now: impl Clock) {
        self.qp.handle_timeout(now);
    }

    /// Runs the engine of `q` until it has nothing more to do right now:
    /// fetches posted descriptors (the doorbell), transmits, delivers
    /// completions, frees the descriptors of completed WRs, re-arms the timer.
    pub(in crate::device) fn drive(&mut self, q: &Qp, sh: &Shared, now: impl Clock) {
        self.drive_with(q, sh, now, false);
    }

    /// Moves posted WRs into the engine, transmits, and completes.
    ///
    /// Requests always go before plain ACKs. With `hold_acks` (a datagram
    /// taken by a busy-polling application thread), plain ACKs stay queued:
    /// the thread then returns the completion to the application first,
    /// whose reply (if any) goes out before the ACK — the ACK is never on
    /// the peer's critical path, which reaps send completions lazily and
    /// times out in milliseconds. The next poll of an empty CQ, the QP's
    /// next post, or the progress thread (within a nap, ≤ 8 ms) sends them.
    pub(in crate::device) fn drive_with(
        &mut self,
        q: &Qp,
        sh: &Shared,
        now: impl Clock,
        hold_acks: bool,
    ) {
        self.drive_inner(q, sh, now, hold_acks, true);
    }

    /// The pass after packets were fed ([`Engine::feed`]): as
    /// [`Engine::drive_with`] without the doorbell (a thread posting
    /// meanwhile waits for the engine lock and then drives itself).
    pub(in crate::device) fn drive_received(
        &mut self,
        q: &Qp,
        sh: &Shared,
        now: impl Clock,
        hold_acks: bool,
    ) {
        self.drive_inner(q, sh, now, hold_acks, false);
    }

    fn drive_inner(
        &mut self,
        q: &Qp,
        sh: &Shared,
        now: impl Clock,
        hold_acks: bool,
        doorbell: bool,
    ) {
        let init = q.init();
        let inline_max = init.max_inline_data as usize;
        // Doorbell: fetch posted send descriptors.
        if doorbell {
            let mut sq = lock(q.sq());
            if self.qp.state() == QpState::Reset {
                sq.discard_posted();
            }
            while let Some(d) = sq.fetch() {
                let (mut wr, inline) = d.into_parts();
                if let Some(data) = inline {
                    let bytes = data.bytes();
                    let slot = self.inline_slot % init.max_send_wr.max(1) as usize;
                    self.inline_slot = self.inline_slot.wrapping_add(1);
                    let off = slot * inline_max;
                    if let Some(dst) = self.inline_store.get_mut(off..off + bytes.len()) {
                        dst.copy_from_slice(bytes);
                    }
                    wr.sg_list.clear();
                    wr.sg_list.push(rdmakit_proto::Sge {
                        addr: off as u64,
                        length: bytes.len() as u32,
                        lkey: INLINE_LKEY,
                    });
                }
                match self.qp.post_send(wr) {
                    Ok(()) => self.fifo.push_back(true),
                    Err(_) => sq.complete(1),
                }
            }
        }
        let counters = sh.counters();
        // Transmit (the path MTU may have grown since creation). Packets
        // queue in `txbuf` back to back while they can leave in one GSO
        // send (see `net::TxBatch`); the rest is flushed after the loop.
        let need = self.qp.max_packet_len() + net::ICRC_LEN;
        let mem = sh.mrs().memory();
        let mut m = EngineMem {
            view: mem.view(),
            pd: Pd(q.pd()),
            inline: &self.inline_store,
            peer: None,
        };
        // A UD packet carries its AH's DSCP (`ud_tos`).
        let ud = self.qp.qp_type() == QpType::Ud;
        for pass in [true, false] {
            // The second pass only sends the plain ACKs the first held
            // back: with nothing left for the responder (a requester's
            // post, most datagrams) it would find nothing.
            if !pass && (hold_acks || !self.qp.responder_pending()) {
                break;
            }
            loop {
                let at = self.batch.tail();
                if self.txbuf.len() < at + need {
                    self.txbuf.resize(at + need, 0);
                }
                let buf = &mut self.txbuf[at..];
                let t = if pass {
                    self.qp.poll_transmit_deferring_acks(now, buf, &mut m)
                } else {
                    self.qp.poll_transmit(now, buf, &mut m)
                };
                let Some(t) = t else { break };
                let path = match self.path {
                    Some((ah, p)) if ah == t.ah.0 => p,
                    _ => {
                        let Some(p) = sh.ahs().path(t.ah) else {
                            continue;
                        };
                        self.path = Some((t.ah.0, p));
                        p
                    }
                };
                let mut tos = if ud {
                    ud_tos(&self.txbuf[at..at + t.len], path.dscp, t.tos)
                } else {
                    t.tos
                };
                let sport = self.sport;
                if let Some(f) = sh.packet_faults() {
                    let pkt = &self.txbuf[at..at + t.len];
                    match sh.transmit_fault(f, q.qpn(), pkt, (path.ip, sport, tos)) {
                        Some(marked) => tos = marked,
                        None => continue,
                    }
                }
                sh.net().queue(
                    path.ip,
                    sport,
                    tos,
                    &mut self.flow,
                    &mut self.batch,
                    &mut self.txbuf,
                    t.len,
                    &counters.tx_packets,
                    &counters.tx_errors,
                );
            }
        }
        sh.net().flush(
            &self.flow,
            &mut self.batch,
            &self.txbuf,
            &counters.tx_packets,
            &counters.tx_errors,
        );
        drop(mem);
        if !hold_acks {
            self.ack_held = false;
        } else if !self.ack_held && self.qp.responder_pending() {
            self.ack_held = true;
            sh.hold_ack(q.qpn());
        }
        // Posted receives wait in their ring until a datagram needs one
        // (`feed` fetches them first) — or the QP is in ERR (perhaps
        // since this pass), where they complete at once, flushed.
        if self.qp.state() == QpState::Err {
            self.fetch_recvs(q);
        }
        // Free the descriptors of completed WRs (the engine completes in
        // order) before their completions become visible: an application
        // that sees a completion may post into the slot at once (perftest
        // keeps exactly TX depth outstanding) and must not get ENOMEM.
        let done = self.fifo.len().saturating_sub(self.qp.sq_outstanding());
        let mut with_desc = 0;
        for _ in 0..done {
            if self.fifo.pop_front() == Some(true) {
                with_desc += 1;
            }
        }
        // The engine's emptied scatter/gather lists go back to the rings
        // with the descriptors, for the next posts to reuse.
        if with_desc > 0 {
            let mut sq = lock(q.sq());
            sq.complete(with_desc);
            while let Some(v) = self.qp.spare_send_sgl() {
                sq.keep_sgl(v);
            }
        }
        let rq_out = self.qp.rq_outstanding();
        let fed = if q.srq().is_some() {
            &mut self.srq_fed
        } else {
            &mut self.rq_in_engine
        };
        let k = fed.saturating_sub(rq_out);
        if k > 0 {
            *fed -= k;
            let mut ring = lock(q.recv_ring());
            ring.complete(k);
            while let Some(v) = self.qp.spare_recv_sgl() {
                ring.keep_sgl(v);
            }
        }
        // Completions.
        while let Some(wc) = self.qp.poll_completion() {
            if wc.status != WcStatus::Success && wc.status != WcStatus::WrFlushErr {
                self.last_error = Some(wc.status);
            }
            sh.complete(q.cq_of(&wc), wc);
        }
        // State changes the engine made on its own raise async events.
        let st = self.qp.state();
        if st != self.last_state {
            if st == QpState::Err {
                let qpn = q.qpn();
                let ev = match self.last_error {
                    Some(
                        WcStatus::LocProtErr | WcStatus::LocAccessErr | WcStatus::RemAccessErr,
                    ) => AsyncEvent::QpAccessErr { qpn },
                    Some(WcStatus::RemInvReqErr | WcStatus::LocQpOpErr | WcStatus::LocLenErr) => {
                        AsyncEvent::QpReqErr { qpn }
                    }
                    _ => AsyncEvent::QpFatal { qpn },
                };
                sh.raise(ev);
            }
            self.last_state = st;
        }
        let d = self.qp.poll_timeout().map_or(u64::MAX, Instant::as_nanos);
        q.publish(st, d);
        sh.progress().deadline(d, sh.net());
    }

    /// Moves posted receive WRs (not an SRQ's) into the engine.
    fn fetch_recvs(&mut self, q: &Qp) {
        if q.srq().is_none() {
            let mut rq = lock(q.recv_ring());
            if self.qp.state() == QpState::Reset {
                rq.discard_posted();
            }
            while let Some(wr) = rq.fetch() {
                match self.qp.post_recv(wr) {
                    Ok(()) => self.rq_in_engine += 1,
                    Err(_) => rq.complete(1),
                }
            }
        }
    }

    /// Hands one checked packet that came as `from` says to the engine of
    /// `q`: first the
    /// receives posted since the last pass (post_recv leaves them in the
    /// ring) or one from the SRQ. A same-host request reaches the engine
    /// only from a same-host ring (`peer`: bound to the process the kernel
    /// identified) whose sender is the QP's own peer (the endpoint its AV
    /// names): from anywhere else it is dropped and counted. Drive the
    /// engine after the run ([`Engine::drive_received`]).
    pub(in crate::device) fn feed(
        &mut self,
        q: &Qp,
        sh: &Shared,
        from: Came<'_>,
        pkt: &[u8],
        now: impl Clock,
    ) {
        let Came {
            src,
            peer,
            ce,
            answer,
        } = from;
        let counters = sh.counters();
        if pkt.first().is_some_and(|&op| wcma::is_cma_opcode(op))
            && (peer.is_none() || self.remote != Some(src))
        {
            counters
                .rx_same_host_refused
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        counters.rx_packets.fetch_add(1, Ordering::Relaxed);
        if peer.is_none() {
            counters.rx_socket_packets.fetch_add(1, Ordering::Relaxed);
        }
        self.fetch_recvs(q);
        if let Some(s) = q.srq() {
            if self.qp.rq_outstanding() == 0 && self.qp.state() != QpState::Reset {
                let Engine { qp, srq_fed, .. } = self;
                let due = s.feed(|wr| {
                    let ok = qp.post_recv(wr).is_ok();
                    if ok {
                        *srq_fed += 1;
                    }
                    ok
                });
                if due {
                    sh.raise(AsyncEvent::SrqLimitReached { srq: s.id() });
                }
            }
        }
        let mem = sh.mrs().memory();
        // Split borrows: the inline store is only read through `m`.
        let Engine {
            qp, inline_store, ..
        } = self;
        let mut m = EngineMem {
            view: mem.view(),
            pd: Pd(q.pd()),
            inline: inline_store,
            peer,
        };
        // The source as a path the engine names (looked up, never added:
        // a CNP acts only from the QP's own AV, a UD CNP goes to a known
        // path). Another context's private endpoint is the device's
        // address.
        let net = sh.net();
        let from_ip = net.source_addr(*src.ip());
        let path = match self.av {
            Some((ah, ip)) if ip == from_ip => Some(ah),
            _ => sh.ahs().find(from_ip),
        };
        let arrival = Arrival {
            ce,
            src: path,
            answer,
        };
        if q.qp_type() == QpType::Ud {
            let from = SocketAddrV4::new(from_ip, src.port());
            let grh = net::grh_for(from, net.addr(), pkt.len() + 8 + net::ICRC_LEN);
            qp.handle_arrival(now, pkt, arrival, Some(&grh), &mut m);
        } else {
            qp.handle_arrival(now, pkt, arrival, None, &mut m);
        }
    }
}

/// [`Memory`] for the engine: the MR table plus the QP's inline store.
struct EngineMem<'a> {
    view: crate::dma::MemView<'a>,
    pd: Pd,
    inline: &'a [u8],
    /// The process the packet being handled came from, when it came on a
    /// same-host ring (the kernel identified it when the ring was handed
    /// over); None for a datagram, and when transmitting.
    peer: Option<&'a net::shm::Peer>,
}

impl EngineMem<'_> {
    fn inline_range(&self, pd: Pd, addr: u64, len: u64) -> MemResult<usize> {
        let store = Extent {
            pd: self.pd,
            addr: 0,
            len: self.inline.len() as u64,
            access: Access::empty(),
        };
        store.offset(pd, addr, len, Access::empty())
    }
}

impl Memory for EngineMem<'_> {
    fn check(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> MemResult {
        if key == Key::Local(INLINE_LKEY) {
            if need.contains(Access::LOCAL_WRITE) {
                return Err(MemError::AccessDenied);
            }
            return self.inline_range(pd, addr, len).map(|_| ());
        }
        self.view.check(pd, key, addr, len, need)
    }
    fn read(&self, pd: Pd, key: Key, addr: u64, out: &mut [u8], need: Access) -> MemResult {
        if key == Key::Local(INLINE_LKEY) {
            let off = self.inline_range(pd, addr, out.len() as u64)?;
            out.copy_from_slice(&self.inline[off..off + out.len()]);
            return Ok(());
        }
        self.view.read(pd, key, addr, out, need)
    }
    fn write(&mut self, pd: Pd, key: Key, addr: u64, data: &[u8], need: Access) -> MemResult {
        if key == Key::Local(INLINE_LKEY) {
            return Err(MemError::AccessDenied);
        }
        self.view.write(pd, key, addr, data, need)
    }
    fn atomic(
        &mut self,
        pd: Pd,
        rkey: u32,
        addr: u64,
        op: rdmakit_proto::AtomicOp,
    ) -> MemResult<u64> {
        self.view.atomic(pd, rkey, addr, op)
    }
    fn invalidate(&mut self, pd: Pd, rkey: u32) -> MemResult {
        self.view.invalidate(pd, rkey)
    }
    fn bind_mw(&mut self, pd: Pd, bind: &rdmakit_proto::MwBind) -> MemResult {
        self.view.bind_mw(pd, bind)
    }
    fn invalidate_local(&mut self, pd: Pd, rkey: u32) -> MemResult {
        self.view.invalidate_local(pd, rkey)
    }
    fn host_addr(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> Option<u64> {
        // Inline data lives in the QP's store: it goes as packets.
        (key != Key::Local(INLINE_LKEY))
            .then(|| self.view.host_addr(pd, key, addr, len, need))
            .flatten()
    }
    fn peer_copy(
        &mut self,
        copy: &rdmakit_proto::PeerCopy<'_>,
    ) -> core::result::Result<u64, rdmakit_proto::PeerError> {
        if copy.local.iter().any(|l| l.0 == Key::Local(INLINE_LKEY)) {
            return Err(MemError::AccessDenied.into());
        }
        self.view.peer_copy_from(copy, self.peer)
    }
}

/// The IP TOS byte of a UD packet to a path with `dscp`: the engine's `tos`
/// with its DSCP replaced by the AH's (a UD QP's destinations each have
/// their own traffic class, the engine knows one), keeping the ECN bits the
/// engine chose. A CNP keeps the engine's TOS whole (`np_cnp_dscp`).
fn ud_tos(packet: &[u8], dscp: u8, tos: u8) -> u8 {
    let cnp = bth::Packet::new_checked(packet).is_ok_and(|b| b.opcode() == OpCode::CNP);
    if cnp {
        tos
    } else {
        dscp | (tos & 0b11)
    }
}

#[cfg(test)]
mod tests {
    use rdmakit_wire::{cnp, OpCode};

    use super::ud_tos;

    #[test]
    fn a_ud_packet_takes_the_ahs_dscp_and_keeps_the_engines_ecn_but_a_cnp_keeps_its_tos() {
        let mut send = [0u8; 28];
        send[0] = OpCode::UD_SEND_ONLY.0;
        assert_eq!(ud_tos(&send, 26 << 2, 0b10), (26 << 2) | 0b10);
        // The engine chose Not-ECT (low bits 00): the AH's DSCP alone.
        assert_eq!(ud_tos(&send, 26 << 2, 5 << 2), 26 << 2);
        let mut c = [0u8; 64];
        let n = cnp::Repr::new(0x77).emit_without_icrc(&mut c).unwrap();
        assert_eq!(ud_tos(&c[..n], 26 << 2, 48 << 2), 48 << 2, "np_cnp_dscp");
    }
}
