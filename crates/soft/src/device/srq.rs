//! Shared receive queues: the SRQ table with `max_srq`, `max_srq_wr` and
//! `max_srq_sge`, each SRQ's descriptor ring and its limit event.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rdmakit_proto::RecvWr;

use crate::attr::Limits;
use crate::errno::{Errno, Origin, Result};
use crate::registry::Kind;
use crate::ring::{Ring, RingStats};
use crate::{lock, read, write};

use super::admit::{Admission, Limit};
use super::err;
use super::info::{AtomicCounters, PostFailure};
use super::pd::PdGuard;

/// The SRQ table.
#[derive(Debug)]
pub(super) struct Srqs {
    map: RwLock<SrqMap>,
    limit: Limit,
    max_wr: u32,
    max_sge: u32,
}

#[derive(Debug)]
struct SrqMap {
    srqs: HashMap<u32, Arc<Srq>>,
    next: u32,
}

/// A shared receive queue.
#[derive(Debug)]
pub(super) struct Srq {
    id: u32,
    pd: u32,
    max_sge: u32,
    ring: Mutex<Ring<RecvWr>>,
    /// The armed limit (`srq_limit`; 0: disarmed).
    limit: AtomicU64,
    /// QPs receiving from it.
    users: AtomicUsize,
}

impl Srqs {
    /// An empty table enforcing `max_srq`, `max_srq_wr` and `max_srq_sge`.
    pub(super) fn new(limits: &Limits) -> Srqs {
        Srqs {
            map: RwLock::new(SrqMap {
                srqs: HashMap::new(),
                next: 1,
            }),
            limit: Limit::new("max_srq", limits.max_srq),
            max_wr: limits.max_srq_wr,
            max_sge: limits.max_srq_sge,
        }
    }

    /// `ibv_create_srq` in `pd`.
    pub(super) fn create(
        &self,
        adm: &Admission,
        pds: &mut PdGuard<'_>,
        pd: u32,
        max_wr: u32,
        max_sge: u32,
        srq_limit: u32,
    ) -> Result<u32> {
        const V: &str = "ibv_create_srq";
        if max_wr == 0 || max_wr > self.max_wr || max_sge > self.max_sge {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "max_wr/max_sge outside the device limits",
            ));
        }
        pds.check(V, pd)?;
        let mut m = write(&self.map);
        adm.check(V, m.srqs.len(), self.limit)?;
        let id = m.next;
        adm.register(V, Kind::Srq, id, self.limit)?;
        pds.hold(pd);
        m.next = m.next.wrapping_add(1).max(1);
        m.srqs.insert(
            id,
            Arc::new(Srq {
                id,
                pd,
                max_sge,
                ring: Mutex::new(Ring::new(max_wr as usize)),
                limit: AtomicU64::new(u64::from(srq_limit)),
                users: AtomicUsize::new(0),
            }),
        );
        Ok(id)
    }

    /// `ibv_modify_srq` with `IBV_SRQ_LIMIT`: arms the limit event.
    /// `EINVAL` for an unknown SRQ or a limit above its depth.
    pub(super) fn arm(&self, srq: u32, limit: u32) -> Result<()> {
        const V: &str = "ibv_modify_srq";
        let s = self
            .get(srq)
            .ok_or_else(|| err(V, Errno::EINVAL, Origin::Kernel, "no such SRQ"))?;
        if limit as usize > lock(&s.ring).capacity() {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "srq_limit above max_wr",
            ));
        }
        s.limit.store(u64::from(limit), Ordering::Release);
        Ok(())
    }

    /// `ibv_destroy_srq`: returns its PD. `EINVAL` for an unknown SRQ,
    /// `EBUSY` while QPs use it.
    pub(super) fn destroy(&self, adm: &Admission, srq: u32) -> Result<u32> {
        const V: &str = "ibv_destroy_srq";
        let mut m = write(&self.map);
        let pd = match m.srqs.get(&srq) {
            None => return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such SRQ")),
            Some(s) if s.users.load(Ordering::Acquire) > 0 => {
                return Err(err(
                    V,
                    Errno::EBUSY,
                    Origin::Kernel,
                    "QPs still use the SRQ",
                ))
            }
            Some(s) => s.pd,
        };
        m.srqs.remove(&srq);
        drop(m);
        adm.unregister(Kind::Srq, srq);
        Ok(pd)
    }

    /// An SRQ.
    pub(super) fn get(&self, srq: u32) -> Option<Arc<Srq>> {
        read(&self.map).srqs.get(&srq).cloned()
    }

    /// Descriptor-ring counters of an SRQ.
    pub(super) fn ring_stats(&self, srq: u32) -> Option<RingStats> {
        read(&self.map)
            .srqs
            .get(&srq)
            .map(|s| lock(&s.ring).stats())
    }

    /// Live SRQs.
    pub(super) fn len(&self) -> usize {
        read(&self.map).srqs.len()
    }
}

impl Srq {
    /// The SRQ's handle.
    pub(super) fn id(&self) -> u32 {
        self.id
    }

    /// Its descriptor ring (a QP on it releases what it consumed here).
    pub(super) fn ring(&self) -> &Mutex<Ring<RecvWr>> {
        &self.ring
    }

    /// A QP receives from it from now on.
    pub(super) fn attach(&self) {
        self.users.fetch_add(1, Ordering::AcqRel);
    }

    /// A QP that received from it is gone, with the `fed` WRs it had taken
    /// (consumed with it).
    pub(super) fn detach(&self, fed: usize) {
        self.users.fetch_sub(1, Ordering::AcqRel);
        lock(&self.ring).complete(fed);
    }

    /// `ibv_post_srq_recv` of a list: `EINVAL` for too many SGEs, `ENOMEM`
    /// when full or for an injected mapping fault (counted in `counters`).
    pub(super) fn post(
        &self,
        wrs: &[RecvWr],
        inject: impl Fn() -> bool,
        counters: &AtomicCounters,
    ) -> core::result::Result<(), PostFailure> {
        const V: &str = "ibv_post_srq_recv";
        for (i, wr) in wrs.iter().enumerate() {
            let fail = |e| PostFailure { index: i, error: e };
            if wr.sg_list.len() > self.max_sge as usize {
                return Err(fail(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    "too many SGEs",
                )));
            }
            // lkeys are checked when data lands (see `Qp::post_recv`).
            let r = lock(&self.ring).post_recv(&inject, wr);
            if let Err(e) = r {
                return Err(fail(counters.map_failure(V, e)));
            }
        }
        Ok(())
    }

    /// Hands the next posted WR, if any, to `post` (which says whether the
    /// QP's engine took it; if not, its descriptor is freed). Whether the
    /// armed limit was crossed: its event is then due, and the limit
    /// disarmed.
    pub(super) fn feed(&self, post: impl FnOnce(RecvWr) -> bool) -> bool {
        let mut ring = lock(&self.ring);
        if let Some(wr) = ring.fetch() {
            if !post(wr) {
                ring.complete(1);
            }
        }
        let limit = self.limit.load(Ordering::Acquire);
        if limit > 0 && (ring.posted() as u64) < limit {
            self.limit.store(0, Ordering::Release);
            return true;
        }
        false
    }
}
