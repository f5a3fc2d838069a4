//! Queue-pair verbs of the soft device: create, modify, query, destroy, and
//! posting send and receive work requests through the descriptor rings.

use super::*;

impl Device {
    // ------------------------------------------------------------------ QP

    /// `ibv_create_qp`: returns the QPN. The QP starts in RESET.
    ///
    /// # Errors
    /// `EINVAL` for unknown PD/CQ/SRQ, capabilities above the device limits
    /// (`max_qp_wr`, `max_sge`, `max_inline`), or when `max_qp` QPs exist
    /// (rxe's pool limit). Zero depths are allowed: a receive-only or
    /// send-only QP.
    pub fn create_qp(&self, init: &QpInit) -> Result<u32> {
        const V: &str = "ibv_create_qp";
        let l = &self.sh.limits;
        // A zero send (or receive) depth is a receive-only (send-only) QP,
        // which rxe and mlx5 accept.
        if init.max_send_wr > l.max_qp_wr
            || init.max_recv_wr > l.max_qp_wr
            || init.max_send_sge > l.max_sge
            || init.max_recv_sge > l.max_sge
            || init.max_inline_data > l.max_inline
        {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                format!(
                    "capabilities above device limits (max_qp_wr {}, max_sge {}, max_inline {})",
                    l.max_qp_wr, l.max_sge, l.max_inline
                ),
            ));
        }
        let send_cq = self
            .sh
            .cq(init.send_cq)
            .ok_or_else(|| err(V, Errno::EINVAL, Origin::Kernel, "no such send CQ"))?;
        let recv_cq = self
            .sh
            .cq(init.recv_cq)
            .ok_or_else(|| err(V, Errno::EINVAL, Origin::Kernel, "no such receive CQ"))?;
        let srq = match init.srq {
            None => None,
            Some(s) => Some(
                read(&self.sh.srqs)
                    .get(&s)
                    .cloned()
                    .ok_or_else(|| err(V, Errno::EINVAL, Origin::Kernel, "no such SRQ"))?,
            ),
        };
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        let Some(pdrefs) = o.pds.get_mut(&init.pd) else {
            return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such PD"));
        };
        let mut qps = write(&self.sh.qps);
        if qps.len() >= l.max_qp as usize {
            return Err(self.sh.exhausted(V, "max_qp", l.max_qp));
        }
        // A loopback device's QPNs carry this context's slot (the sender
        // routes by them); a configured address's start at 17.
        let qpn = match self.sh.net.qpn_base() {
            Some(base) => {
                let span = 1u32 << net::SLOT_SHIFT;
                let free = (0..span)
                    .map(|i| base | ((o.next_qpn.wrapping_add(i)) % span))
                    .find(|q| !qps.contains_key(q));
                match free {
                    Some(q) => q,
                    None => return Err(self.sh.exhausted(V, "QPs per context", span)),
                }
            }
            None => {
                let mut qpn = o.next_qpn;
                while qps.contains_key(&qpn) || qpn < 17 {
                    qpn = (qpn + 1) & 0x00ff_ffff;
                }
                qpn
            }
        };
        self.sh.register(V, Kind::Qp, qpn, "max_qp", l.max_qp)?;
        *pdrefs += 1;
        o.next_qpn = match self.sh.net.qpn_base() {
            Some(_) => (qpn + 1) & ((1 << net::SLOT_SHIFT) - 1),
            None => (qpn + 1) & 0x00ff_ffff,
        };
        let mut cfg = QpConfig::new(qpn, init.qp_type, Pd(init.pd));
        cfg.max_send_wr = init.max_send_wr as usize;
        cfg.max_recv_wr = if srq.is_some() {
            1
        } else {
            init.max_recv_wr as usize
        };
        cfg.max_sge = init.max_send_sge.max(init.max_recv_sge).max(1) as usize;
        cfg.sq_sig_all = init.sq_sig_all;
        cfg.pkey_table = self.sh.port.pkeys.clone();
        cfg.max_rd_atomic_cap =
            u8::try_from(l.max_qp_rd_atom.max(l.max_qp_init_rd_atom)).unwrap_or(u8::MAX);
        cfg.port_mtu = self.sh.port.active_mtu;
        let eng = rdmakit_proto::Qp::new(cfg);
        let txlen = eng.max_packet_len() + net::ICRC_LEN;
        let inline_len = init.max_send_wr as usize * init.max_inline_data as usize;
        send_cq.users.fetch_add(1, Ordering::AcqRel);
        recv_cq.users.fetch_add(1, Ordering::AcqRel);
        if let Some(s) = &srq {
            s.users.fetch_add(1, Ordering::AcqRel);
        }
        let q = Arc::new(QpShared {
            qpn,
            qp_type: init.qp_type,
            pd: init.pd,
            init: init.clone(),
            send_cq,
            recv_cq,
            srq,
            sq: Mutex::new(Ring::new(init.max_send_wr as usize)),
            rq: Mutex::new(Ring::new(init.max_recv_wr as usize)),
            engine: Mutex::new(Engine {
                qp: eng,
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
                last_state: QpState::Reset,
                last_error: None,
                ack_held: false,
            }),
            state: AtomicU8::new(QpState::Reset as u8),
            deadline: AtomicU64::new(u64::MAX),
        });
        qps.insert(qpn, q);
        Ok(qpn)
    }

    /// `ibv_destroy_qp`: outstanding work requests are discarded.
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP.
    pub fn destroy_qp(&self, qpn: u32) -> Result<()> {
        // A completed receive's ACK still goes out, as from a real NIC.
        self.sh.flush_held_acks();
        let q = write(&self.sh.qps).remove(&qpn).ok_or_else(|| {
            err(
                "ibv_destroy_qp",
                Errno::EINVAL,
                Origin::Kernel,
                "no such QP",
            )
        })?;
        q.send_cq.users.fetch_sub(1, Ordering::AcqRel);
        q.recv_cq.users.fetch_sub(1, Ordering::AcqRel);
        if let Some(s) = &q.srq {
            s.users.fetch_sub(1, Ordering::AcqRel);
            // WRs the QP took from the SRQ are consumed with it.
            let eng = lock(&q.engine);
            lock(&s.ring).complete(eng.srq_fed);
        }
        let _ = self.pd_ref("ibv_destroy_qp", q.pd, -1);
        self.sh.unregister(Kind::Qp, qpn);
        Ok(())
    }

    /// `ibv_modify_qp`, validated like `ib_modify_qp_is_ok`. `av` is the
    /// destination GID when `mask` has `AV` (RC/UC primary path).
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP, a transition or mask the table refuses,
    /// an out-of-range value, a port other than 1, or an AV whose GID is not
    /// IPv4-mapped.
    pub fn modify_qp(
        &self,
        qpn: u32,
        attr: &QpAttr,
        mask: AttrMask,
        av: Option<Gid>,
    ) -> Result<()> {
        const V: &str = "ibv_modify_qp";
        // A completed receive's ACK still goes out before the QP leaves RTS
        // (rdma_disconnect moves it to ERR right after the last receive), as
        // from a real NIC: a held one would be lost and the peer's send
        // would retry until it fails.
        self.sh.flush_held_acks();
        let q = self
            .sh
            .qp(qpn)
            .ok_or_else(|| err(V, Errno::EINVAL, Origin::Kernel, "no such QP"))?;
        let mut a = attr.clone();
        let mut peer_ip = None;
        if mask.contains(AttrMask::PORT) && attr.port_num != 1 {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                format!("port {} does not exist", attr.port_num),
            ));
        }
        if mask.contains(AttrMask::MAX_DEST_RD_ATOMIC)
            && u32::from(attr.max_dest_rd_atomic) > self.sh.limits.max_qp_rd_atom
        {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "max_dest_rd_atomic above max_qp_rd_atom",
            ));
        }
        if mask.contains(AttrMask::MAX_QP_RD_ATOMIC)
            && u32::from(attr.max_rd_atomic) > self.sh.limits.max_qp_init_rd_atom
        {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "max_rd_atomic above max_qp_init_rd_atom",
            ));
        }
        if mask.contains(AttrMask::PATH_MTU)
            && attr.path_mtu.bytes() > self.sh.port.active_mtu.bytes()
        {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "path_mtu above the port's active MTU",
            ));
        }
        if mask.contains(AttrMask::AV) {
            let ip = av.and_then(Gid::to_ipv4).ok_or_else(|| {
                err(
                    V,
                    Errno::EINVAL,
                    Origin::Kernel,
                    "AV needs an IPv4-mapped RoCEv2 destination GID",
                )
            })?;
            a.ah = AddressHandle(self.sh.intern_path(ip));
            peer_ip = Some(ip);
        }
        let clock = self.sh.clock();
        let mut eng = lock(&q.engine);
        let cur = eng.qp.state();
        eng.qp.modify(&a, mask).map_err(|e| {
            err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                format!("{e} ({cur:?} -> {:?}, mask {mask:?})", attr.qp_state),
            )
        })?;
        if mask.contains(AttrMask::DEST_QPN) || mask.contains(AttrMask::AV) {
            let dq = eng.qp.attr().dest_qp_num;
            eng.sport = net::flow_port(qpn, dq);
        }
        if let Some(ip) = peer_ip {
            let dq = eng.qp.attr().dest_qp_num;
            if q.qp_type != QpType::Ud {
                self.sh.net.prepare(&mut eng.flow, ip, dq);
                eng.remote = Some(self.sh.net.route(ip, dq));
            }
            let on = self.sh.same_host_path(eng.flow.on_ring());
            eng.qp.set_same_host(on);
        }
        let st = eng.qp.state();
        eng.last_state = st;
        if st == QpState::Reset {
            lock(&q.sq).discard_posted();
            lock(&q.rq).discard_posted();
            // Its completions leave its CQs too, as mlx5 cleans them on the
            // way to RESET: a flushed receive of the QP's previous life must
            // not surface after the QP is brought up again (pyverbs'
            // test_mr_rereg_* restate their QPs and poll one completion).
            for cq in [&q.send_cq, &q.recv_cq] {
                let mut wcs = lock(&cq.queue);
                wcs.retain(|w| w.qp_num != qpn);
                cq.ready.store(wcs.len(), Ordering::Release);
            }
        }
        self.sh.drive(&q, &mut eng, &clock);
        Ok(())
    }

    /// `ibv_query_qp`: current attributes and init attributes.
    ///
    /// # Errors
    /// `EINVAL` for an unknown QP.
    pub fn query_qp(&self, qpn: u32) -> Result<(QpAttr, QpInit)> {
        let q = self
            .sh
            .qp(qpn)
            .ok_or_else(|| err("ibv_query_qp", Errno::EINVAL, Origin::Kernel, "no such QP"))?;
        let a = lock(&q.engine).qp.attr();
        Ok((a, q.init.clone()))
    }

    /// Engine counters of a QP.
    pub fn qp_stats(&self, qpn: u32) -> Option<rdmakit_proto::Stats> {
        self.sh.qp(qpn).map(|q| *lock(&q.engine).qp.stats())
    }

    /// Whether QP `qpn`'s packets to its (last) destination go through a
    /// same-host ring rather than the socket; None for an unknown QP.
    pub fn qp_on_ring(&self, qpn: u32) -> Option<bool> {
        self.sh.qp(qpn).map(|q| lock(&q.engine).flow.on_ring())
    }

    /// Descriptor-ring counters of a QP's send and receive queues.
    pub fn qp_ring_stats(&self, qpn: u32) -> Option<(RingStats, RingStats)> {
        self.sh
            .qp(qpn)
            .map(|q| (lock(&q.sq).stats(), lock(&q.rq).stats()))
    }

    /// `ibv_post_send` of a list.
    ///
    /// Per request, under the send queue's lock: take a descriptor, map
    /// every SGE (lkey, bounds, rights; inline data is copied instead), post
    /// the descriptor; a failed mapping returns the descriptor first.
    /// A protection failure of the mapping (bad lkey, range, rights) is not
    /// an errno: like a real NIC the request completes with `LOC_PROT_ERR`
    /// (and an RC QP goes to ERR).
    ///
    /// # Safety
    /// For `inline` requests, every SGE's `[addr, addr + length)` must be
    /// readable memory for the duration of this call (the lkey is ignored).
    ///
    /// # Errors
    /// [`PostFailure`] naming the first request not posted: `EINVAL` (state
    /// below RTS, opcode invalid for the QP type, too many SGEs, inline too
    /// large, atomic not 8 bytes / not 8-byte aligned, UD without AH or
    /// unknown AH), `ENOMEM` (send queue full, or an injected DMA-mapping
    /// fault).
    pub unsafe fn post_send(
        &self,
        qpn: u32,
        reqs: &[SendRequest],
    ) -> core::result::Result<(), PostFailure> {
        const V: &str = "ibv_post_send";
        let q = self.sh.qp(qpn).ok_or_else(|| PostFailure {
            index: 0,
            error: err(V, Errno::EINVAL, Origin::Library, "no such QP"),
        })?;
        let mut result = Ok(());
        for (i, req) in reqs.iter().enumerate() {
            let fail = |e| PostFailure { index: i, error: e };
            let ud = match self.validate_send(&q, req) {
                Ok(ud) => ud,
                Err(e) => {
                    result = Err(fail(e));
                    break;
                }
            };
            let inline = if req.inline {
                // SAFETY: forwarded from this function's contract.
                Some(unsafe { InlineData::copy(&req.wr.sg_list) })
            } else {
                None
            };
            // Inline data names no registered memory: no MR table to read.
            let mem = inline.is_none().then(|| read(&self.sh.mem));
            let need = if req.wr.op.is_rd_atomic() {
                Access::LOCAL_WRITE
            } else {
                Access::empty()
            };
            let mut ring = lock(&q.sq);
            // The WR is built in a spare scatter/gather list of the ring
            // (an inline one needs none: the doorbell names the inline
            // store) and moves into the descriptor; a refused mapping hands
            // it back for its LOC_PROT_ERR completion.
            let mut sg_list = ring.sgl();
            if inline.is_none() {
                sg_list.extend_from_slice(&req.wr.sg_list);
            }
            let wr = SendWr {
                wr_id: req.wr.wr_id,
                op: req.wr.op,
                sg_list,
                signaled: req.wr.signaled,
                fence: req.wr.fence,
                solicited: req.wr.solicited,
                ud,
            };
            let r = ring.take_and_map(&self.sh.faults, || {
                if let Some(mem) = &mem {
                    if let Err(e) = map_sges(mem, Pd(q.pd), &wr.sg_list, need) {
                        return Err((e, wr));
                    }
                }
                Ok(SendDesc { wr, inline })
            });
            drop(ring);
            drop(mem);
            match r {
                Ok(()) => {}
                Err(MapFailure::Refused((_, wr))) => {
                    // Completes with LOC_PROT_ERR in order: hand the earlier
                    // descriptors and then this request to the engine.
                    let clock = self.sh.clock();
                    let mut eng = lock(&q.engine);
                    self.sh.drive(&q, &mut eng, &clock);
                    let posted = eng.qp.post_send(wr);
                    if posted.is_ok() {
                        eng.fifo.push_back(false);
                    }
                    self.sh.drive(&q, &mut eng, &clock);
                    if posted.is_err() {
                        result = Err(fail(err(
                            V,
                            Errno::ENOMEM,
                            Origin::Library,
                            "work queue full",
                        )));
                        break;
                    }
                }
                Err(e) => {
                    let e = match e {
                        MapFailure::Full => MapFailure::Full,
                        MapFailure::Injected => MapFailure::Injected,
                        MapFailure::Refused((m, _)) => MapFailure::Refused(m),
                    };
                    result = Err(fail(self.sh.map_failure(V, e)));
                    break;
                }
            }
        }
        let clock = self.sh.clock();
        let mut eng = lock(&q.engine);
        self.sh.drive(&q, &mut eng, &clock);
        result
    }

    /// Checks a send request against the QP; returns its UD destination
    /// with the AH resolved to the device's path handle (None for RC/UC).
    pub(super) fn validate_send(
        &self,
        q: &QpShared,
        req: &SendRequest,
    ) -> Result<Option<rdmakit_proto::UdDest>> {
        const V: &str = "ibv_post_send";
        use rdmakit_proto::SendOp;
        let st = state_from_u8(q.state.load(Ordering::Acquire));
        if matches!(st, QpState::Reset | QpState::Init | QpState::Rtr) {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Library,
                format!("QP {} is in {st:?}; sends need RTS", q.qpn),
            ));
        }
        let wr = &req.wr;
        let ok = wr.op.allowed_on(q.qp_type);
        if !ok {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Library,
                format!("{:?} is not valid on a {:?} QP", wr.op, q.qp_type),
            ));
        }
        if wr.sg_list.len() > q.init.max_send_sge as usize {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Library,
                format!(
                    "{} SGEs, QP max_send_sge {}",
                    wr.sg_list.len(),
                    q.init.max_send_sge
                ),
            ));
        }
        let len: u64 = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
        if req.inline {
            if wr.op.is_rd_atomic() {
                return Err(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    "inline is not valid for READ/atomics",
                ));
            }
            if len > u64::from(q.init.max_inline_data) {
                return Err(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    format!(
                        "inline {len} bytes > max_inline_data {}",
                        q.init.max_inline_data
                    ),
                ));
            }
        }
        let atomic_addr = match wr.op {
            SendOp::CompareSwap { remote_addr, .. } | SendOp::FetchAdd { remote_addr, .. } => {
                Some(remote_addr)
            }
            _ => None,
        };
        if atomic_addr.is_some_and(|a| len != 8 || a % 8 != 0) {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Library,
                "atomics need 8 bytes at an 8-byte aligned address",
            ));
        }
        if q.qp_type == QpType::Ud {
            let Some(mut ud) = wr.ud else {
                return Err(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    "UD send without address handle",
                ));
            };
            let o = lock(&self.sh.objs);
            let Some(&(_, path)) = o.ahs.get(&ud.ah.0) else {
                return Err(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    "unknown address handle",
                ));
            };
            ud.ah = AddressHandle(path);
            return Ok(Some(ud));
        }
        Ok(wr.ud)
    }

    /// `ibv_post_recv` of a list.
    ///
    /// # Errors
    /// [`PostFailure`]: `EINVAL` (QP in RESET, QP uses an SRQ, too many
    /// SGEs), `ENOMEM` (receive queue full or an injected mapping fault).
    pub fn post_recv(&self, qpn: u32, wrs: &[RecvWr]) -> core::result::Result<(), PostFailure> {
        const V: &str = "ibv_post_recv";
        let q = self.sh.qp(qpn).ok_or_else(|| PostFailure {
            index: 0,
            error: err(V, Errno::EINVAL, Origin::Library, "no such QP"),
        })?;
        let mut result = Ok(());
        for (i, wr) in wrs.iter().enumerate() {
            let fail = |e| PostFailure { index: i, error: e };
            if q.srq.is_some() {
                result = Err(fail(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    "QP uses an SRQ",
                )));
                break;
            }
            if state_from_u8(q.state.load(Ordering::Acquire)) == QpState::Reset {
                result = Err(fail(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    "QP is in RESET",
                )));
                break;
            }
            if wr.sg_list.len() > q.init.max_recv_sge as usize {
                result = Err(fail(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    format!(
                        "{} SGEs, QP max_recv_sge {}",
                        wr.sg_list.len(),
                        q.init.max_recv_sge
                    ),
                )));
                break;
            }
            // The SGEs' lkeys are checked when data lands, as rxe does: a
            // bad one completes this receive with LOC_PROT_ERR and NAKs the
            // sender (REM_OP_ERR); only the descriptor (and an injected
            // mapping fault) can fail the post.
            let r = lock(&q.rq).post_recv(&self.sh.faults, wr);
            if let Err(e) = r {
                result = Err(fail(self.sh.map_failure(V, e)));
                break;
            }
        }
        // No engine work here: the next datagram fetches posted receives
        // (`Shared::receive`), so reposting between taking a message and
        // replying (perftest's latency tests, rdmakit perf's server) costs
        // no engine pass and leaves a held ACK held — the reply goes first.
        // In ERR the receives complete at once, flushed.
        if state_from_u8(q.state.load(Ordering::Acquire)) == QpState::Err {
            let clock = self.sh.clock();
            let mut eng = lock(&q.engine);
            let hold = eng.ack_held;
            self.sh.drive_with(&q, &mut eng, &clock, hold);
        }
        result
    }
}
