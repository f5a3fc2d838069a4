//! Queue pairs: the QP table with `max_qp` and the limits a QP is created
//! and modified against (`max_qp_wr`, `max_sge`, `max_inline`,
//! `max_qp_rd_atom`, `max_qp_init_rd_atom`), and each QP — its CQs and
//! SRQ, its descriptor rings, its engine ([`engine`]) and the state and
//! deadline the receive path and the timers read without its lock.
//! Posting happens here: taking a descriptor and "DMA-mapping" its buffers
//! under the ring's lock, a failed mapping returning the descriptor.

mod desc;
mod engine;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use rdmakit_proto::{
    Access, AddressHandle, AttrMask, Key, MemResult, Memory, Pd, QpAttr, QpConfig, QpState, QpType,
    RecvWr, SendWr, Wc,
};
use rdmakit_types::device::{QpInit, SendRequest};
use rustc_hash::FxHashMap;

use crate::attr::{Av, Limits};
use crate::dma::MrTable;
use crate::errno::{Errno, Origin, Result};
use crate::faults::Verb;
use crate::net;
use crate::registry::Kind;
use crate::ring::{MapFailure, Ring, RingStats};
use crate::{lock, read, write};

use super::admit::Limit;
use super::ah::Path;
use super::cq::Cq;
use super::info::PostFailure;
use super::shared::Shared;
use super::srq::Srq;
use super::{err, state_from_u8};
use desc::{InlineData, SendDesc};
pub(super) use engine::{Came, Engine};

/// The QP table.
#[derive(Debug)]
pub(super) struct Qps {
    // Looked up per datagram and per post: FxHash, not SipHash (the keys
    // are the device's own numbers, nothing to defend against).
    map: RwLock<QpMap>,
    limits: QpLimits,
}

#[derive(Debug)]
struct QpMap {
    qps: FxHashMap<u32, Arc<Qp>>,
    next: u32,
}

/// The device limits a QP is checked against.
#[derive(Clone, Copy, Debug)]
struct QpLimits {
    max_qp: Limit,
    max_qp_wr: u32,
    max_sge: u32,
    max_inline: u32,
    max_qp_rd_atom: u32,
    max_qp_init_rd_atom: u32,
}

/// A queue pair.
#[derive(Debug)]
pub(super) struct Qp {
    qpn: u32,
    qp_type: QpType,
    pd: u32,
    init: QpInit,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    srq: Option<Arc<Srq>>,
    sq: Mutex<Ring<SendDesc>>,
    rq: Mutex<Ring<RecvWr>>,
    engine: Mutex<Engine>,
    /// The engine's state after its last pass (read by posts).
    state: AtomicU8,
    /// The engine's next timer after its last pass (ns; `u64::MAX`: none).
    deadline: AtomicU64,
}

impl Qps {
    /// An empty table enforcing the device's QP limits.
    pub(super) fn new(limits: &Limits) -> Qps {
        Qps {
            map: RwLock::new(QpMap {
                qps: FxHashMap::default(),
                next: 17,
            }),
            limits: QpLimits {
                max_qp: Limit::new("max_qp", limits.max_qp),
                max_qp_wr: limits.max_qp_wr,
                max_sge: limits.max_sge,
                max_inline: limits.max_inline,
                max_qp_rd_atom: limits.max_qp_rd_atom,
                max_qp_init_rd_atom: limits.max_qp_init_rd_atom,
            },
        }
    }

    /// `ibv_create_qp` on device `sh`: see [`super::Device::create_qp`].
    pub(super) fn create(&self, sh: &Shared, init: &QpInit) -> Result<u32> {
        const V: &str = "ibv_create_qp";
        let l = self.limits;
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
        let send_cq = sh
            .cqs()
            .get(init.send_cq)
            .ok_or_else(|| err(V, Errno::EINVAL, Origin::Kernel, "no such send CQ"))?;
        let recv_cq = sh
            .cqs()
            .get(init.recv_cq)
            .ok_or_else(|| err(V, Errno::EINVAL, Origin::Kernel, "no such receive CQ"))?;
        let srq = match init.srq {
            None => None,
            Some(s) => Some(
                sh.srqs()
                    .get(s)
                    .ok_or_else(|| err(V, Errno::EINVAL, Origin::Kernel, "no such SRQ"))?,
            ),
        };
        let adm = sh.admission();
        let mut pds = sh.pds().lock();
        pds.check(V, init.pd)?;
        let mut m = write(&self.map);
        adm.check(V, m.qps.len(), l.max_qp)?;
        // A loopback device's QPNs carry this context's slot (the sender
        // routes by them); a configured address's start at 17.
        let base = sh.net().qpn_base();
        let qpn = match base {
            Some(base) => {
                let span = 1u32 << net::SLOT_SHIFT;
                let free = (0..span)
                    .map(|i| base | ((m.next.wrapping_add(i)) % span))
                    .find(|q| !m.qps.contains_key(q));
                match free {
                    Some(q) => q,
                    None => return Err(adm.exhausted(V, "QPs per context", span)),
                }
            }
            None => {
                let mut qpn = m.next;
                while m.qps.contains_key(&qpn) || qpn < 17 {
                    qpn = (qpn + 1) & 0x00ff_ffff;
                }
                qpn
            }
        };
        adm.register(V, Kind::Qp, qpn, l.max_qp)?;
        pds.hold(init.pd);
        m.next = match base {
            Some(_) => (qpn + 1) & ((1 << net::SLOT_SHIFT) - 1),
            None => (qpn + 1) & 0x00ff_ffff,
        };
        let port = sh.port();
        let mut cfg = QpConfig::new(qpn, init.qp_type, Pd(init.pd));
        cfg.max_send_wr = init.max_send_wr as usize;
        cfg.max_recv_wr = if srq.is_some() {
            1
        } else {
            init.max_recv_wr as usize
        };
        cfg.max_sge = init.max_send_sge.max(init.max_recv_sge).max(1) as usize;
        cfg.sq_sig_all = init.sq_sig_all;
        cfg.pkey_table = port.pkeys.clone();
        cfg.max_rd_atomic_cap =
            u8::try_from(l.max_qp_rd_atom.max(l.max_qp_init_rd_atom)).unwrap_or(u8::MAX);
        cfg.port_mtu = port.active_mtu;
        // The line rate stays the engine's default, the port's 25 Gb/s.
        cfg.cc = Arc::clone(sh.cc());
        send_cq.attach();
        recv_cq.attach();
        if let Some(s) = &srq {
            s.attach();
        }
        let q = Arc::new(Qp {
            qpn,
            qp_type: init.qp_type,
            pd: init.pd,
            init: init.clone(),
            send_cq,
            recv_cq,
            srq,
            sq: Mutex::new(Ring::new(init.max_send_wr as usize)),
            rq: Mutex::new(Ring::new(init.max_recv_wr as usize)),
            engine: Mutex::new(Engine::new(cfg, init)),
            state: AtomicU8::new(QpState::Reset as u8),
            deadline: AtomicU64::new(u64::MAX),
        });
        m.qps.insert(qpn, q);
        Ok(qpn)
    }

    /// `ibv_destroy_qp`: outstanding work requests are discarded.
    /// `EINVAL` for an unknown QP.
    pub(super) fn destroy(&self, sh: &Shared, qpn: u32) -> Result<()> {
        // A completed receive's ACK still goes out, as from a real NIC.
        sh.flush_held_acks();
        let q = write(&self.map).qps.remove(&qpn).ok_or_else(|| {
            err(
                "ibv_destroy_qp",
                Errno::EINVAL,
                Origin::Kernel,
                "no such QP",
            )
        })?;
        q.send_cq.detach();
        q.recv_cq.detach();
        if let Some(s) = &q.srq {
            // WRs the QP took from the SRQ are consumed with it.
            let fed = q.engine().srq_fed();
            s.detach(fed);
        }
        sh.counters().retire(&q.stats());
        sh.pds().release(q.pd);
        sh.admission().unregister(Kind::Qp, qpn);
        Ok(())
    }

    /// `ibv_modify_qp` on device `sh`: see [`super::Device::modify_qp`].
    pub(super) fn modify(
        &self,
        sh: &Shared,
        qpn: u32,
        attr: &QpAttr,
        mask: AttrMask,
        av: Option<Av>,
    ) -> Result<()> {
        const V: &str = "ibv_modify_qp";
        // A completed receive's ACK still goes out before the QP leaves RTS
        // (rdma_disconnect moves it to ERR right after the last receive), as
        // from a real NIC: a held one would be lost and the peer's send
        // would retry until it fails.
        sh.flush_held_acks();
        let q = self
            .get(qpn)
            .ok_or_else(|| err(V, Errno::EINVAL, Origin::Kernel, "no such QP"))?;
        let l = self.limits;
        let mut a = attr.clone();
        if mask.contains(AttrMask::PORT) && attr.port_num != 1 {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                format!("port {} does not exist", attr.port_num),
            ));
        }
        if mask.contains(AttrMask::MAX_DEST_RD_ATOMIC)
            && u32::from(attr.max_dest_rd_atomic) > l.max_qp_rd_atom
        {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "max_dest_rd_atomic above max_qp_rd_atom",
            ));
        }
        if mask.contains(AttrMask::MAX_QP_RD_ATOMIC)
            && u32::from(attr.max_rd_atomic) > l.max_qp_init_rd_atom
        {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "max_rd_atomic above max_qp_init_rd_atom",
            ));
        }
        if mask.contains(AttrMask::PATH_MTU) && attr.path_mtu.bytes() > sh.port().active_mtu.bytes()
        {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "path_mtu above the port's active MTU",
            ));
        }
        let mut path = None;
        if mask.contains(AttrMask::AV) {
            let (ip, tclass) = av
                .and_then(|av| Some((av.dgid.to_ipv4()?, av.traffic_class)))
                .ok_or_else(|| {
                    err(
                        V,
                        Errno::EINVAL,
                        Origin::Kernel,
                        "AV needs an IPv4-mapped RoCEv2 destination GID",
                    )
                })?;
            let p = Path::new(ip, tclass);
            a.ah = AddressHandle(sh.ahs().intern(p));
            path = Some(p);
        }
        let clock = sh.clock();
        let mut eng = q.engine();
        let st = eng
            .modify(&q, sh.net(), &a, mask, path, sh.transport())
            .map_err(|(e, cur)| {
                err(
                    V,
                    Errno::EINVAL,
                    Origin::Kernel,
                    format!("{e} ({cur:?} -> {:?}, mask {mask:?})", attr.qp_state),
                )
            })?;
        if st == QpState::Reset {
            lock(&q.sq).discard_posted();
            lock(&q.rq).discard_posted();
            // Its completions leave its CQs too, as mlx5 cleans them on the
            // way to RESET: a flushed receive of the QP's previous life must
            // not surface after the QP is brought up again (pyverbs'
            // test_mr_rereg_* restate their QPs and poll one completion).
            q.send_cq.purge(qpn);
            q.recv_cq.purge(qpn);
        }
        eng.drive(&q, sh, &clock);
        Ok(())
    }

    /// A QP.
    pub(super) fn get(&self, qpn: u32) -> Option<Arc<Qp>> {
        read(&self.map).qps.get(&qpn).cloned()
    }

    /// The QPs whose timer is due at `now` (ns), and the earliest deadline
    /// of the others.
    pub(super) fn due(&self, now: u64) -> (Vec<Arc<Qp>>, Option<u64>) {
        let mut next = None::<u64>;
        let due = read(&self.map)
            .qps
            .values()
            .filter(|q| {
                let d = q.deadline();
                if d <= now {
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
        (due, next)
    }

    /// Every QP (`Some(n)`: QP `n` only, if it exists).
    pub(super) fn select(&self, qpn: Option<u32>) -> Vec<Arc<Qp>> {
        let m = read(&self.map);
        match qpn {
            Some(n) => m.qps.get(&n).cloned().into_iter().collect(),
            None => m.qps.values().cloned().collect(),
        }
    }

    /// The live QPs' transport counters, summed.
    pub(super) fn transport_sums(&self) -> super::info::QpSums {
        read(&self.map)
            .qps
            .values()
            .fold(super::info::QpSums::default(), |acc, q| {
                acc.add(super::info::QpSums::of(&q.stats()))
            })
    }

    /// Live QPs.
    pub(super) fn len(&self) -> usize {
        read(&self.map).qps.len()
    }
}

impl Qp {
    /// `ibv_query_qp`: current attributes and init attributes.
    pub(super) fn query(&self) -> (QpAttr, QpInit) {
        (self.engine().attr(), self.init.clone())
    }

    /// Engine counters.
    pub(super) fn stats(&self) -> rdmakit_proto::Stats {
        self.engine().stats()
    }

    /// Whether its packets to its (last) destination go through a
    /// same-host ring rather than the socket.
    pub(super) fn on_ring(&self) -> bool {
        self.engine().on_ring()
    }

    /// Descriptor-ring counters of its send and receive queues.
    pub(super) fn ring_stats(&self) -> (RingStats, RingStats) {
        (lock(&self.sq).stats(), lock(&self.rq).stats())
    }

    /// `ibv_post_send` of a list on device `sh`: see
    /// [`super::Device::post_send`].
    ///
    /// # Safety
    /// As [`super::Device::post_send`].
    pub(super) unsafe fn post_send(
        &self,
        sh: &Shared,
        reqs: &[SendRequest],
    ) -> core::result::Result<(), PostFailure> {
        const V: &str = "ibv_post_send";
        let mut result = Ok(());
        for (i, req) in reqs.iter().enumerate() {
            let fail = |e| PostFailure { index: i, error: e };
            let ud = match self.validate_send(sh, req) {
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
            let mem = inline.is_none().then(|| sh.mrs().memory());
            let need = if req.wr.op.is_rd_atomic() {
                Access::LOCAL_WRITE
            } else {
                Access::empty()
            };
            let mut ring = lock(&self.sq);
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
            let r = ring.take_and_map(
                || sh.injected_failure(Verb::Post).is_some(),
                || {
                    if let Some(mem) = &mem {
                        if let Err(e) = map_sges(mem, Pd(self.pd), &wr.sg_list, need) {
                            return Err((e, wr));
                        }
                    }
                    Ok(SendDesc::new(wr, inline))
                },
            );
            drop(ring);
            drop(mem);
            match r {
                Ok(()) => {}
                Err(MapFailure::Refused((_, wr))) => {
                    // Completes with LOC_PROT_ERR in order: hand the earlier
                    // descriptors and then this request to the engine.
                    let clock = sh.clock();
                    let mut eng = self.engine();
                    eng.drive(self, sh, &clock);
                    let posted = eng.post_refused(wr);
                    eng.drive(self, sh, &clock);
                    if !posted {
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
                    result = Err(fail(sh.counters().map_failure(V, e)));
                    break;
                }
            }
        }
        let clock = sh.clock();
        self.engine().drive(self, sh, &clock);
        result
    }

    /// Checks a send request against the QP; returns its UD destination
    /// with the AH resolved to the device's path handle (None for RC/UC).
    fn validate_send(
        &self,
        sh: &Shared,
        req: &SendRequest,
    ) -> Result<Option<rdmakit_proto::UdDest>> {
        const V: &str = "ibv_post_send";
        use rdmakit_proto::SendOp;
        let st = self.state();
        if matches!(st, QpState::Reset | QpState::Init | QpState::Rtr) {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Library,
                format!("QP {} is in {st:?}; sends need RTS", self.qpn),
            ));
        }
        let wr = &req.wr;
        if !wr.op.allowed_on(self.qp_type) {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Library,
                format!("{:?} is not valid on a {:?} QP", wr.op, self.qp_type),
            ));
        }
        if wr.sg_list.len() > self.init.max_send_sge as usize {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Library,
                format!(
                    "{} SGEs, QP max_send_sge {}",
                    wr.sg_list.len(),
                    self.init.max_send_sge
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
            if len > u64::from(self.init.max_inline_data) {
                return Err(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    format!(
                        "inline {len} bytes > max_inline_data {}",
                        self.init.max_inline_data
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
        if self.qp_type == QpType::Ud {
            let Some(mut ud) = wr.ud else {
                return Err(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    "UD send without address handle",
                ));
            };
            let Some(path) = sh.ahs().path_of(ud.ah.0) else {
                return Err(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    "unknown address handle",
                ));
            };
            ud.ah = path;
            return Ok(Some(ud));
        }
        Ok(wr.ud)
    }

    /// `ibv_post_recv` of a list on device `sh`: see
    /// [`super::Device::post_recv`].
    pub(super) fn post_recv(
        &self,
        sh: &Shared,
        wrs: &[RecvWr],
    ) -> core::result::Result<(), PostFailure> {
        const V: &str = "ibv_post_recv";
        let mut result = Ok(());
        for (i, wr) in wrs.iter().enumerate() {
            let fail = |e| PostFailure { index: i, error: e };
            if self.srq.is_some() {
                result = Err(fail(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    "QP uses an SRQ",
                )));
                break;
            }
            if self.state() == QpState::Reset {
                result = Err(fail(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    "QP is in RESET",
                )));
                break;
            }
            if wr.sg_list.len() > self.init.max_recv_sge as usize {
                result = Err(fail(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    format!(
                        "{} SGEs, QP max_recv_sge {}",
                        wr.sg_list.len(),
                        self.init.max_recv_sge
                    ),
                )));
                break;
            }
            // The SGEs' lkeys are checked when data lands, as rxe does: a
            // bad one completes this receive with LOC_PROT_ERR and NAKs the
            // sender (REM_OP_ERR); only the descriptor (and an injected
            // mapping fault) can fail the post.
            let r = lock(&self.rq).post_recv(|| sh.injected_failure(Verb::Post).is_some(), wr);
            if let Err(e) = r {
                result = Err(fail(sh.counters().map_failure(V, e)));
                break;
            }
        }
        // No engine work here: the next datagram fetches posted receives
        // (`Engine::feed`), so reposting between taking a message and
        // replying (perftest's latency tests, rdmakit perf's server) costs
        // no engine pass and leaves a held ACK held — the reply goes first.
        // In ERR the receives complete at once, flushed.
        if self.state() == QpState::Err {
            let clock = sh.clock();
            let mut eng = self.engine();
            let hold = eng.ack_held();
            eng.drive_with(self, sh, &clock, hold);
        }
        result
    }

    /// The QP's number.
    pub(super) fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Its transport.
    pub(super) fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// Its PD.
    pub(super) fn pd(&self) -> u32 {
        self.pd
    }

    /// What it was created with.
    pub(super) fn init(&self) -> &QpInit {
        &self.init
    }

    /// Its send queue's descriptor ring.
    fn sq(&self) -> &Mutex<Ring<SendDesc>> {
        &self.sq
    }

    /// The ring its receives come from: its SRQ's, or its own.
    fn recv_ring(&self) -> &Mutex<Ring<RecvWr>> {
        self.srq.as_deref().map_or(&self.rq, Srq::ring)
    }

    /// Its SRQ.
    fn srq(&self) -> Option<&Srq> {
        self.srq.as_deref()
    }

    /// The CQ a completion goes to.
    fn cq_of(&self, wc: &Wc) -> &Cq {
        if wc.is_recv() {
            &self.recv_cq
        } else {
            &self.send_cq
        }
    }

    /// Records what the engine's last pass left: its state and next timer.
    fn publish(&self, state: QpState, deadline: u64) {
        self.state.store(state as u8, Ordering::Release);
        self.deadline.store(deadline, Ordering::Release);
    }

    /// The engine's state after its last pass.
    fn state(&self) -> QpState {
        state_from_u8(self.state.load(Ordering::Acquire))
    }

    /// The engine's next timer (ns; `u64::MAX`: none).
    pub(super) fn deadline(&self) -> u64 {
        self.deadline.load(Ordering::Acquire)
    }

    /// The engine, locked.
    pub(super) fn engine(&self) -> MutexGuard<'_, Engine> {
        lock(&self.engine)
    }
}

fn map_sges(mem: &MrTable, pd: Pd, sges: &[rdmakit_proto::Sge], need: Access) -> MemResult {
    let v = mem.view();
    for s in sges {
        v.check(pd, Key::Local(s.lkey), s.addr, u64::from(s.length), need)?;
    }
    Ok(())
}
