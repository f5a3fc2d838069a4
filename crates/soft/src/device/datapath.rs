//! The soft device's data path: driving a QP's engine (transmit, descriptor
//! release, completions, async events), taking datagrams off the socket,
//! held ACKs, timers, and the per-device progress thread.

use super::*;
use rdmakit_wire::{bth, cma as wcma};

impl Shared {
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

    pub(super) fn qp(&self, qpn: u32) -> Option<Arc<QpShared>> {
        read(&self.qps).get(&qpn).cloned()
    }

    pub(super) fn cq(&self, cq: u32) -> Option<Arc<CqShared>> {
        read(&self.cqs).get(&cq).cloned()
    }

    pub(super) fn intern_path(&self, ip: Ipv4Addr) -> u32 {
        let mut p = lock(&self.paths);
        if let Some(i) = p.iter().position(|&a| a == ip) {
            return i as u32;
        }
        p.push(ip);
        (p.len() - 1) as u32
    }

    pub(super) fn path(&self, ah: AddressHandle) -> Option<Ipv4Addr> {
        lock(&self.paths).get(ah.0 as usize).copied()
    }

    pub(super) fn raise(&self, e: AsyncEvent) {
        let mut q = lock(&self.events);
        q.push_back(e);
        let _ = rustix::io::write(self.events_efd.as_fd(), &1u64.to_ne_bytes());
        drop(q);
        self.events_cv.notify_all();
    }

    pub(super) fn notify(&self, c: &CqShared) {
        if !c.armed.swap(false, Ordering::AcqRel) {
            return;
        }
        self.armed_cqs.fetch_sub(1, Ordering::AcqRel);
        if let Some(ch) = &c.channel {
            let mut q = lock(&ch.queue);
            q.push_back(c.id);
            let _ = rustix::io::write(ch.efd.as_fd(), &1u64.to_ne_bytes());
            let _ = rustix::io::write(ch.bell.as_fd(), &1u64.to_ne_bytes());
            drop(q);
            ch.cv.notify_all();
        }
    }

    pub(super) fn push_wc(&self, c: &CqShared, wc: Wc) {
        let mut q = lock(&c.queue);
        if q.len() >= c.cap.load(Ordering::Relaxed) {
            drop(q);
            self.counters.cq_overruns.fetch_add(1, Ordering::Relaxed);
            if !c.overrun.swap(true, Ordering::AcqRel) {
                self.raise(AsyncEvent::CqErr { cq: c.id });
            }
            return;
        }
        q.push_back(wc);
        c.ready.store(q.len(), Ordering::Release);
        drop(q);
        self.notify(c);
    }

    /// Runs the engine of `q` until it has nothing more to do right now:
    /// fetches posted descriptors (the doorbell), transmits, delivers
    /// completions, frees the descriptors of completed WRs, re-arms the timer.
    pub(super) fn drive(&self, q: &QpShared, eng: &mut Engine, now: impl Clock) {
        self.drive_with(q, eng, now, false);
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
    pub(super) fn drive_with(
        &self,
        q: &QpShared,
        eng: &mut Engine,
        now: impl Clock,
        hold_acks: bool,
    ) {
        self.drive_inner(q, eng, now, hold_acks, true);
    }

    /// [`Shared::drive_with`]; `doorbell` false skips fetching posted send
    /// WRs (a datagram's pass: a thread posting meanwhile waits for the
    /// engine lock and then drives itself).
    fn drive_inner(
        &self,
        q: &QpShared,
        eng: &mut Engine,
        now: impl Clock,
        hold_acks: bool,
        doorbell: bool,
    ) {
        let inline_max = q.init.max_inline_data as usize;
        // Doorbell: fetch posted send descriptors.
        if doorbell {
            let mut sq = lock(&q.sq);
            if eng.qp.state() == QpState::Reset {
                sq.discard_posted();
            }
            while let Some(mut d) = sq.fetch() {
                if let Some(data) = d.inline.take() {
                    let bytes = data.bytes();
                    let slot = eng.inline_slot % q.init.max_send_wr.max(1) as usize;
                    eng.inline_slot = eng.inline_slot.wrapping_add(1);
                    let off = slot * inline_max;
                    if let Some(dst) = eng.inline_store.get_mut(off..off + bytes.len()) {
                        dst.copy_from_slice(bytes);
                    }
                    d.wr.sg_list.clear();
                    d.wr.sg_list.push(rdmakit_proto::Sge {
                        addr: off as u64,
                        length: bytes.len() as u32,
                        lkey: INLINE_LKEY,
                    });
                }
                match eng.qp.post_send(d.wr) {
                    Ok(()) => eng.fifo.push_back(true),
                    Err(_) => sq.complete(1),
                }
            }
        }
        // Transmit (the path MTU may have grown since creation). Packets
        // queue in `txbuf` back to back while they can leave in one GSO
        // send (see `net::TxBatch`); the rest is flushed after the loop.
        let need = eng.qp.max_packet_len() + net::ICRC_LEN;
        let mem = read(&self.mem);
        let mut m = EngineMem {
            view: mem.view(),
            pd: Pd(q.pd),
            inline: &eng.inline_store,
            peer: None,
        };
        for pass in [true, false] {
            // The second pass only sends the plain ACKs the first held
            // back: with nothing left for the responder (a requester's
            // post, most datagrams) it would find nothing.
            if !pass && (hold_acks || !eng.qp.responder_pending()) {
                break;
            }
            loop {
                let at = eng.batch.tail();
                if eng.txbuf.len() < at + need {
                    eng.txbuf.resize(at + need, 0);
                }
                let buf = &mut eng.txbuf[at..];
                let t = if pass {
                    eng.qp.poll_transmit_deferring_acks(now, buf, &mut m)
                } else {
                    eng.qp.poll_transmit(now, buf, &mut m)
                };
                let Some(t) = t else { break };
                let dst = match eng.path {
                    Some((ah, ip)) if ah == t.ah.0 => ip,
                    _ => {
                        let Some(ip) = self.path(t.ah) else { continue };
                        eng.path = Some((t.ah.0, ip));
                        ip
                    }
                };
                let sport = eng.sport;
                self.net.queue(
                    dst,
                    sport,
                    &mut eng.flow,
                    &mut eng.batch,
                    &mut eng.txbuf,
                    t.len,
                    &self.counters.tx_packets,
                    &self.counters.tx_errors,
                );
            }
        }
        self.net.flush(
            &eng.flow,
            &mut eng.batch,
            &eng.txbuf,
            &self.counters.tx_packets,
            &self.counters.tx_errors,
        );
        drop(mem);
        if !hold_acks {
            eng.ack_held = false;
        } else if !eng.ack_held && eng.qp.responder_pending() {
            eng.ack_held = true;
            lock(&self.held_acks).push(q.qpn);
            self.acks_held.store(true, Ordering::Release);
        }
        // Posted receives wait in their ring until a datagram needs one
        // (`receive` fetches them first) — or the QP is in ERR (perhaps
        // since this pass), where they complete at once, flushed.
        if eng.qp.state() == QpState::Err {
            self.fetch_recvs(q, eng);
        }
        // Free the descriptors of completed WRs (the engine completes in
        // order) before their completions become visible: an application
        // that sees a completion may post into the slot at once (perftest
        // keeps exactly TX depth outstanding) and must not get ENOMEM.
        let done = eng.fifo.len().saturating_sub(eng.qp.sq_outstanding());
        let mut with_desc = 0;
        for _ in 0..done {
            if eng.fifo.pop_front() == Some(true) {
                with_desc += 1;
            }
        }
        // The engine's emptied scatter/gather lists go back to the rings
        // with the descriptors, for the next posts to reuse.
        if with_desc > 0 {
            let mut sq = lock(&q.sq);
            sq.complete(with_desc);
            while let Some(v) = eng.qp.spare_send_sgl() {
                sq.keep_sgl(v);
            }
        }
        let rq_out = eng.qp.rq_outstanding();
        let (ring, fed) = match &q.srq {
            Some(s) => (&s.ring, &mut eng.srq_fed),
            None => (&q.rq, &mut eng.rq_in_engine),
        };
        let k = fed.saturating_sub(rq_out);
        if k > 0 {
            *fed -= k;
            let mut ring = lock(ring);
            ring.complete(k);
            while let Some(v) = eng.qp.spare_recv_sgl() {
                ring.keep_sgl(v);
            }
        }
        // Completions.
        while let Some(wc) = eng.qp.poll_completion() {
            if wc.status != WcStatus::Success && wc.status != WcStatus::WrFlushErr {
                eng.last_error = Some(wc.status);
            }
            let cq = if wc.is_recv() { &q.recv_cq } else { &q.send_cq };
            self.push_wc(cq, wc);
        }
        // State changes the engine made on its own raise async events.
        let st = eng.qp.state();
        if st != eng.last_state {
            if st == QpState::Err {
                let ev = match eng.last_error {
                    Some(
                        WcStatus::LocProtErr | WcStatus::LocAccessErr | WcStatus::RemAccessErr,
                    ) => AsyncEvent::QpAccessErr { qpn: q.qpn },
                    Some(WcStatus::RemInvReqErr | WcStatus::LocQpOpErr | WcStatus::LocLenErr) => {
                        AsyncEvent::QpReqErr { qpn: q.qpn }
                    }
                    _ => AsyncEvent::QpFatal { qpn: q.qpn },
                };
                self.raise(ev);
            }
            eng.last_state = st;
        }
        q.state.store(st as u8, Ordering::Release);
        let d = eng.qp.poll_timeout().map_or(u64::MAX, Instant::as_nanos);
        q.deadline.store(d, Ordering::Release);
        // The progress thread sleeps in recv until `wake_at`, or naps until
        // `nap_until`; an earlier timer wakes it with an empty datagram to
        // our own socket, or an unpark.
        if d < self.wake_at.load(Ordering::Acquire) {
            self.wake_at.store(0, Ordering::Release);
            self.rescan.store(true, Ordering::Release);
            self.net.kick();
        }
        if d < self.nap_until.load(Ordering::Acquire) {
            self.nap_until.store(0, Ordering::Release);
            if let Some(t) = self.progress.get() {
                t.unpark();
            }
        }
    }

    /// Moves posted receive WRs (not an SRQ's) into the engine.
    fn fetch_recvs(&self, q: &QpShared, eng: &mut Engine) {
        if q.srq.is_none() {
            let mut rq = lock(&q.rq);
            if eng.qp.state() == QpState::Reset {
                rq.discard_posted();
            }
            while let Some(wr) = rq.fetch() {
                match eng.qp.post_recv(wr) {
                    Ok(()) => eng.rq_in_engine += 1,
                    Err(_) => rq.complete(1),
                }
            }
        }
    }

    /// Feeds what one receive returned from `src` (a datagram, or several
    /// of one flow coalesced by UDP_GRO with segment size `seg`; see
    /// [`net::gro_split`]). Every packet's ICRC is checked on its own; a
    /// notify datagram makes the rings accept what their channel was handed
    /// ([`net::shm`]); a same-host request is dropped and counted: it is
    /// taken only from a same-host ring, never from the network. Whether it
    /// held a transport packet (not only a wake-up or a notify).
    pub(super) fn receive(
        &self,
        src: SocketAddrV4,
        buf: &[u8],
        seg: usize,
        hold_acks: bool,
        now: impl Clock,
    ) -> bool {
        let mut pkts = net::gro_split(buf, seg)
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
                let pkt = self.check_icrc(src, d)?;
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
        self.deliver(src, None, &mut pkts, hold_acks, now);
        traffic
    }

    /// Hands transport packets from `src` (checked, without ICRC) to their
    /// QPs: a run of packets for one QP is fed under one engine lock and
    /// the engine driven (transmit, completions) once after the run, so the
    /// 16 packets of a 64 KiB write cost one lookup, one lock and one pass,
    /// and their ACKs coalesce. `peer`: the process the kernel identified
    /// as their sender, when they came on a same-host ring.
    pub(super) fn deliver<'a>(
        &self,
        src: SocketAddrV4,
        peer: Option<&net::shm::Peer>,
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
                self.receive_gsi(src, pkt);
                continue;
            }
            let Some(q) = self.qp(dqpn) else {
                self.counters.rx_unknown_qp.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let mut eng = lock(&q.engine);
            self.feed(&q, &mut eng, src, peer, pkt, now);
            // The rest of the run for this QP (a coalesced buffer is one
            // flow, so usually all of it).
            while let Some(next) = pkts.next_if(|p| qp_of(p) == Some(dqpn)) {
                self.feed(&q, &mut eng, src, peer, next, now);
            }
            self.drive_inner(&q, &mut eng, now, hold_acks, false);
        }
    }

    /// The transport packet of a datagram whose ICRC is right (else None,
    /// counted).
    fn check_icrc<'a>(&self, src: SocketAddrV4, dgram: &'a [u8]) -> Option<&'a [u8]> {
        self.net.check_icrc(
            src,
            dgram,
            &self.counters.rx_malformed,
            &self.counters.rx_icrc_errors,
        )
    }

    /// Hands one checked packet to the QP's engine (locked by the caller):
    /// first the receives posted since the last pass (post_recv leaves them
    /// in the ring) or one from the SRQ. A same-host request reaches the
    /// engine only from a same-host ring (`peer`: bound to the process the
    /// kernel identified) whose sender is the QP's own peer (the endpoint
    /// its AV names): from anywhere else it is dropped and counted.
    fn feed(
        &self,
        q: &QpShared,
        eng: &mut Engine,
        src: SocketAddrV4,
        peer: Option<&net::shm::Peer>,
        pkt: &[u8],
        now: impl Clock,
    ) {
        if pkt.first().is_some_and(|&op| wcma::is_cma_opcode(op))
            && (peer.is_none() || eng.remote != Some(src))
        {
            self.counters
                .rx_same_host_refused
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.counters.rx_packets.fetch_add(1, Ordering::Relaxed);
        if peer.is_none() {
            self.counters
                .rx_socket_packets
                .fetch_add(1, Ordering::Relaxed);
        }
        self.fetch_recvs(q, eng);
        if let Some(s) = &q.srq {
            if eng.qp.rq_outstanding() == 0 && eng.qp.state() != QpState::Reset {
                let mut ring = lock(&s.ring);
                if let Some(wr) = ring.fetch() {
                    match eng.qp.post_recv(wr) {
                        Ok(()) => eng.srq_fed += 1,
                        Err(_) => ring.complete(1),
                    }
                }
                let limit = s.limit.load(Ordering::Acquire);
                if limit > 0 && (ring.posted() as u64) < limit {
                    s.limit.store(0, Ordering::Release);
                    drop(ring);
                    self.raise(AsyncEvent::SrqLimitReached { srq: s.id });
                }
            }
        }
        let mem = read(&self.mem);
        // Split borrows: the inline store is only read through `m`.
        let Engine {
            qp, inline_store, ..
        } = eng;
        let mut m = EngineMem {
            view: mem.view(),
            pd: Pd(q.pd),
            inline: inline_store,
            peer,
        };
        if q.qp_type == QpType::Ud {
            // Another context's private endpoint is the device's address.
            let from = SocketAddrV4::new(self.net.source_addr(*src.ip()), src.port());
            let grh = net::grh_for(from, self.net.addr(), pkt.len() + 8 + net::ICRC_LEN);
            qp.handle_packet_with_grh(now, pkt, &grh, &mut m);
        } else {
            qp.handle_packet(now, pkt, &mut m);
        }
    }

    /// Sends the plain ACKs application threads held back.
    pub(super) fn flush_held_acks(&self) {
        // A load first: a busy poller calls this on every empty poll, and
        // a swap would write the line each time.
        if !self.acks_held.load(Ordering::Acquire) || !self.acks_held.swap(false, Ordering::AcqRel)
        {
            return;
        }
        // One at a time, not `mem::take` of the list: its allocation stays
        // for the next push (one held ACK per message in a ping-pong).
        // Entries pushed meanwhile are sent too; their flag is set again
        // and a later call finds the list empty.
        let clock = self.clock();
        loop {
            let Some(qpn) = lock(&self.held_acks).pop() else {
                break;
            };
            if let Some(q) = self.qp(qpn) {
                let mut eng = lock(&q.engine);
                if eng.ack_held {
                    self.drive(&q, &mut eng, &clock);
                }
            }
        }
    }

    /// Processes up to `max` datagrams already waiting, without blocking,
    /// in the caller's thread (busy-poll mode). Skips when another thread
    /// is doing the same.
    pub(super) fn poll_network(&self, max: usize) {
        let Ok(mut b) = self.poll_buf.try_lock() else {
            return;
        };
        self.drain_network(&mut b, max, false, || false);
    }

    /// An application thread's busy poll: [`Shared::poll_network`] holding
    /// ACKs, stopping early once `done` holds after a datagram, and while
    /// the rings carry the traffic reading the socket only now and then
    /// ([`super::PollBuf::spare_socket`]).
    pub(super) fn busy_poll_network(&self, max: usize, done: impl Fn() -> bool) {
        let Ok(mut b) = self.poll_buf.try_lock() else {
            return;
        };
        self.drain_network(&mut b, max, true, done);
    }

    /// Takes and processes up to `max` waiting datagrams, stopping early once
    /// `done` holds after one. Every datagram is taken and processed under
    /// `poll_buf`'s lock (`b`), by whichever thread holds it, so a flow's
    /// packets are processed in arrival order. `app`: an application
    /// thread's busy poll, which holds the plain ACKs of socket datagrams
    /// back too (those of ring packets every drain holds) and spares the
    /// socket while the rings carry the traffic. How many packets it took
    /// from same-host rings.
    pub(super) fn drain_network(
        &self,
        pb: &mut super::PollBuf,
        max: usize,
        app: bool,
        done: impl Fn() -> bool,
    ) -> usize {
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
                    self.deliver(src, Some(peer.as_ref()), pkts, true, &clock);
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
                Some((n, src, seg)) => {
                    wakes.get_or_insert_with(|| self.net.hold_wakes());
                    if self.receive(src, &pb.buf[..n], seg, app, &clock) {
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

    pub(super) fn fire_timers(&self) -> Option<u64> {
        // Read at once (every deadline is compared), but as the passes'
        // clock type: one instance of the engine's code, not two.
        let clock = self.clock();
        let now = (&clock).now();
        let mut next = None::<u64>;
        let due: Vec<Arc<QpShared>> = read(&self.qps)
            .values()
            .filter(|q| {
                let d = q.deadline.load(Ordering::Acquire);
                if d <= now.as_nanos() {
                    true
                } else {
                    if d != u64::MAX {
                        next = Some(next.map_or(d, |n| n.min(d)));
                    }
                    false
                }
            })
            .cloned()
            .collect();
        for q in due {
            let mut eng = lock(&q.engine);
            eng.qp.handle_timeout(&clock);
            self.drive(&q, &mut eng, &clock);
            let d = q.deadline.load(Ordering::Acquire);
            if d != u64::MAX {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        next
    }
}

/// The progress thread's first nap beside a busy poller; each nap the
/// poller keeps polling through doubles it, up to [`NAP_MAX`].
const NAP_MIN: Duration = Duration::from_millis(1);

/// The longest nap. The thread notices that the poller stopped (and takes
/// the datagrams waiting since) within two naps: after a long busy-polling
/// phase, within 16 ms. Engine timers, an earlier deadline and an armed CQ
/// still cut any nap short. (4 ms instead: the VM tier's 1 KiB ping-pong
/// gained half as much and less steadily, 3 rounds in one guest.)
const NAP_MAX: Duration = Duration::from_millis(8);

/// How long the progress thread keeps looking at the rings after a drain
/// of ring packets, before it blocks.
const LINGER: Duration = Duration::from_micros(50);

/// After a drain of ring packets pushed from another CPU, whose ACKs their
/// sender is about to answer with more: looks at the rings for up to
/// [`LINGER`] before the progress thread blocks, so the next batch is
/// taken without a wake-up datagram and an idle CPU's wake-up (~0.1-2 ms
/// on a VM's halted vCPU, per batch of a same-host WRITE stream). Not when
/// the sender shares this core: there a spinning receiver only takes the
/// sender's time, and sleeping keeps the wake-up's preemption
/// (docs/soft-nic.md, "Lingering"). A yield that hands the core to another
/// thread for longer than the budget ends it too.
fn linger(r: &crate::net::shm::Rings) {
    if !r.sender_elsewhere() {
        return;
    }
    let start = std::time::Instant::now();
    while !r.ready() && start.elapsed() < LINGER {
        // SAFETY: sched_yield takes no arguments and cannot fail.
        unsafe { libc::sched_yield() };
    }
}

pub(super) fn progress_loop(sh: &Shared) {
    let _ = sh.progress.set(std::thread::current());
    let mut next_timer: Option<u64> = None;
    // When this thread last saw `busy_polls` move (ns since epoch, 0 =
    // never): the time of the application's last busy poll, to within a
    // nap, without a clock read on the poller's every spin.
    let mut seen_polls = sh.busy_polls.load(Ordering::Acquire);
    let mut polled = 0u64;
    let mut observe = |t: u64| {
        let p = sh.busy_polls.load(Ordering::Acquire);
        if p != seen_polls {
            seen_polls = p;
            polled = t.max(1);
        }
        polled
    };
    let mut nap = NAP_MIN;
    while !sh.shutdown.load(Ordering::Acquire) {
        let now = sh.now().as_nanos();
        let wait = match next_timer {
            Some(t) if t > now => Duration::from_nanos(t - now),
            Some(_) => Duration::from_micros(20),
            None => Duration::from_millis(20),
        }
        .clamp(Duration::from_micros(20), Duration::from_millis(20));
        // While an application thread busy-polls (within the last
        // millisecond) it receives for us: stay off the socket's wait queue
        // so the kernel does not wake this thread for every datagram, and
        // only look after the timers and held ACKs now and then. Datagrams
        // are taken here only when the poller has not polled for 200 µs
        // (seen at this thread's wake-ups, so within about a nap):
        // taking them under its feet (and transmitting what their ACKs
        // open) contends for the engine lock and a core, which cost a
        // sending application 3-11% of its bandwidth.
        let polled = observe(now);
        let napping = polled != 0
            && now.saturating_sub(polled) < 1_000_000
            && sh.armed_cqs.load(Ordering::Acquire) == 0;
        let wait = if napping {
            // Each wake-up on a 2-core host preempts a spinning thread and
            // contends for its locks: 1 ms naps rather than 200 µs (8-byte
            // RTT -12%, 6 of 6 interleaved pairs), and longer while the
            // poller keeps polling (up to NAP_MAX; under qemu's TCG, where a
            // wake-up costs ~170 µs of CPU, a 1 ms nap took a core's sixth
            // from each spinning ping-pong side). Engine timers still cut
            // the nap short, and so does arming a CQ for a blocking wait
            // (`req_notify_cq` unparks) or an earlier deadline (`nap_until`).
            let this = wait.min(nap);
            sh.nap_until.store(
                now.saturating_add(u64::try_from(this.as_nanos()).unwrap_or(u64::MAX)),
                Ordering::Release,
            );
            std::thread::park_timeout(this);
            sh.nap_until.store(0, Ordering::Release);
            sh.flush_held_acks();
            let t = sh.now().as_nanos();
            if t.saturating_sub(observe(t)) >= 200_000 {
                sh.poll_network(64);
                nap = NAP_MIN;
            } else {
                nap = (nap * 2).min(NAP_MAX);
            }
            Duration::ZERO
        } else {
            nap = NAP_MIN;
            wait
        };
        let planned = now.saturating_add(u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX));
        if !wait.is_zero() {
            sh.wake_at.store(planned, Ordering::Release);
            // A ring's sender wakes us through the socket once the rings'
            // flags are up; what it wrote before is taken now.
            let rings = sh.net.rings();
            let mut from_rings = 0;
            if rings.is_some_and(|r| r.sleep()) || sh.net.wait_readable(wait) {
                let mut b = lock(&sh.poll_buf);
                from_rings = sh.drain_network(&mut b, 64, false, || false);
            }
            if let Some(r) = rings {
                r.wake();
            }
            sh.flush_held_acks();
            if let Some(r) = rings.filter(|_| from_rings > 0) {
                linger(r);
            }
        }
        // Scan the QPs' timers only when the planned wake-up passed or a
        // drive set an earlier deadline (not on every datagram).
        if sh.now().as_nanos() >= planned || sh.rescan.swap(false, Ordering::AcqRel) {
            next_timer = sh.fire_timers();
            if let Some(r) = sh.net.rings() {
                r.prune();
            }
        }
    }
}
