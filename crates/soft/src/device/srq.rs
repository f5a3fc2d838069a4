//! Shared receive queues of the soft device.

use super::*;

impl Device {
    // ------------------------------------------------------------------ SRQ

    /// `ibv_create_srq`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown PD, `max_wr` 0 or above `max_srq_wr`,
    /// `max_sge` above `max_srq_sge`, or when `max_srq` SRQs exist.
    pub fn create_srq(&self, pd: u32, max_wr: u32, max_sge: u32, srq_limit: u32) -> Result<u32> {
        const V: &str = "ibv_create_srq";
        let l = &self.sh.limits;
        if max_wr == 0 || max_wr > l.max_srq_wr || max_sge > l.max_srq_sge {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "max_wr/max_sge outside the device limits",
            ));
        }
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        let Some(n) = o.pds.get_mut(&pd) else {
            return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such PD"));
        };
        let mut srqs = write(&self.sh.srqs);
        if srqs.len() >= l.max_srq as usize {
            return Err(self.sh.exhausted(V, "max_srq", l.max_srq));
        }
        let id = o.next_srq;
        self.sh.register(V, Kind::Srq, id, "max_srq", l.max_srq)?;
        *n += 1;
        o.next_srq = o.next_srq.wrapping_add(1).max(1);
        srqs.insert(
            id,
            Arc::new(SrqShared {
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
    ///
    /// # Errors
    /// `EINVAL` for an unknown SRQ or a limit above its depth.
    pub fn arm_srq(&self, srq: u32, limit: u32) -> Result<()> {
        let s = read(&self.sh.srqs).get(&srq).cloned().ok_or_else(|| {
            err(
                "ibv_modify_srq",
                Errno::EINVAL,
                Origin::Kernel,
                "no such SRQ",
            )
        })?;
        if limit as usize > lock(&s.ring).capacity() {
            return Err(err(
                "ibv_modify_srq",
                Errno::EINVAL,
                Origin::Kernel,
                "srq_limit above max_wr",
            ));
        }
        s.limit.store(u64::from(limit), Ordering::Release);
        Ok(())
    }

    /// `ibv_destroy_srq`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown SRQ, `EBUSY` while QPs use it.
    pub fn destroy_srq(&self, srq: u32) -> Result<()> {
        let mut srqs = write(&self.sh.srqs);
        let pd = match srqs.get(&srq) {
            None => {
                return Err(err(
                    "ibv_destroy_srq",
                    Errno::EINVAL,
                    Origin::Kernel,
                    "no such SRQ",
                ))
            }
            Some(s) if s.users.load(Ordering::Acquire) > 0 => {
                return Err(err(
                    "ibv_destroy_srq",
                    Errno::EBUSY,
                    Origin::Kernel,
                    "QPs still use the SRQ",
                ))
            }
            Some(s) => s.pd,
        };
        srqs.remove(&srq);
        drop(srqs);
        self.sh.unregister(Kind::Srq, srq);
        let _ = self.pd_ref("ibv_destroy_srq", pd, -1);
        Ok(())
    }

    /// `ibv_post_srq_recv`.
    ///
    /// # Errors
    /// [`PostFailure`]: `EINVAL` (unknown SRQ, too many SGEs), `ENOMEM`
    /// (SRQ full or injected mapping fault).
    pub fn post_srq_recv(&self, srq: u32, wrs: &[RecvWr]) -> core::result::Result<(), PostFailure> {
        const V: &str = "ibv_post_srq_recv";
        let s = read(&self.sh.srqs)
            .get(&srq)
            .cloned()
            .ok_or_else(|| PostFailure {
                index: 0,
                error: err(V, Errno::EINVAL, Origin::Library, "no such SRQ"),
            })?;
        for (i, wr) in wrs.iter().enumerate() {
            let fail = |e| PostFailure { index: i, error: e };
            if wr.sg_list.len() > s.max_sge as usize {
                return Err(fail(err(
                    V,
                    Errno::EINVAL,
                    Origin::Library,
                    "too many SGEs",
                )));
            }
            // lkeys are checked when data lands (see `post_recv`).
            let r = lock(&s.ring).post_recv(&self.sh.faults, wr);
            if let Err(e) = r {
                return Err(fail(self.sh.map_failure(V, e)));
            }
        }
        Ok(())
    }

    /// Descriptor-ring counters of an SRQ.
    pub fn srq_ring_stats(&self, srq: u32) -> Option<RingStats> {
        read(&self.sh.srqs).get(&srq).map(|s| lock(&s.ring).stats())
    }
}
