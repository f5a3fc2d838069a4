//! Protection domains, memory regions and address handles of the soft
//! device.

use super::*;

impl Device {
    // ------------------------------------------------------------------ PD

    /// `ibv_alloc_pd`.
    ///
    /// # Errors
    /// `EINVAL` when `max_pd` PDs exist (rxe's pool limit).
    pub fn alloc_pd(&self) -> Result<u32> {
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        if o.pds.len() >= self.sh.limits.max_pd as usize {
            return Err(self
                .sh
                .exhausted("ibv_alloc_pd", "max_pd", self.sh.limits.max_pd));
        }
        let id = o.next_pd;
        o.next_pd = o.next_pd.wrapping_add(1).max(1);
        self.sh.register(
            "ibv_alloc_pd",
            Kind::Pd,
            id,
            "max_pd",
            self.sh.limits.max_pd,
        )?;
        o.pds.insert(id, 0);
        Ok(id)
    }

    /// `ibv_dealloc_pd`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown PD, `EBUSY` while MRs, QPs, SRQs or AHs use it.
    pub fn dealloc_pd(&self, pd: u32) -> Result<()> {
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        match o.pds.get(&pd) {
            None => Err(err(
                "ibv_dealloc_pd",
                Errno::EINVAL,
                Origin::Kernel,
                "no such PD",
            )),
            Some(&n) if n > 0 => Err(err(
                "ibv_dealloc_pd",
                Errno::EBUSY,
                Origin::Kernel,
                format!("{n} objects still use the PD"),
            )),
            Some(_) => {
                o.pds.remove(&pd);
                self.sh.unregister(Kind::Pd, pd);
                Ok(())
            }
        }
    }

    pub(super) fn pd_ref(&self, verb: &'static str, pd: u32, delta: isize) -> Result<()> {
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        let n = o
            .pds
            .get_mut(&pd)
            .ok_or_else(|| err(verb, Errno::EINVAL, Origin::Kernel, "no such PD"))?;
        *n = n.saturating_add_signed(delta);
        Ok(())
    }

    // ------------------------------------------------------------------ MR

    /// `ibv_reg_mr`: registers `[ptr, ptr + len)`; returns the key (lkey ==
    /// rkey). The MR's virtual address is `ptr`.
    ///
    /// # Safety
    /// The registration contract of [`crate::dma`]: the buffer stays valid
    /// for reads and writes until [`Device::dereg_mr`] returned, and the
    /// application holds no Rust reference to bytes the NIC may write.
    ///
    /// # Errors
    /// `EINVAL` for an unknown PD, a zero or oversized length, remote write
    /// or atomic rights without local write (as ib_core checks), or when
    /// `max_mr` MRs exist.
    pub unsafe fn reg_mr(&self, pd: u32, ptr: *mut u8, len: usize, access: Access) -> Result<u32> {
        // SAFETY: forwarded contract.
        unsafe { self.reg_mr_iova(pd, ptr, len, ptr as u64, access) }
    }

    /// `ibv_reg_mr_iova`: like [`Device::reg_mr`], but the MR's virtual
    /// address (what work requests and remote peers name) is `iova`, not
    /// `ptr` (0 for a zero-based MR).
    ///
    /// # Safety
    /// As [`Device::reg_mr`].
    ///
    /// # Errors
    /// As [`Device::reg_mr`], and `EINVAL` when `iova + len` overflows.
    pub unsafe fn reg_mr_iova(
        &self,
        pd: u32,
        ptr: *mut u8,
        len: usize,
        iova: u64,
        access: Access,
    ) -> Result<u32> {
        const V: &str = "ibv_reg_mr";
        let len64 = len as u64;
        check_region(V, ptr, len, iova, self.sh.limits.max_mr_size)?;
        check_access(V, access)?;
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        let Some(n) = o.pds.get_mut(&pd) else {
            return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such PD"));
        };
        if o.mrs.len() >= self.sh.limits.max_mr as usize {
            return Err(self.sh.exhausted(V, "max_mr", self.sh.limits.max_mr));
        }
        *n += 1;
        // SAFETY: forwarded from this function's own contract.
        let key = unsafe { write(&self.sh.mem).register_at(Pd(pd), ptr, len64, iova, access) };
        if let Err(e) = self
            .sh
            .register(V, Kind::Mr, key, "max_mr", self.sh.limits.max_mr)
        {
            write(&self.sh.mem).deregister(key);
            if let Some(n) = o.pds.get_mut(&pd) {
                *n = n.saturating_sub(1);
            }
            return Err(e);
        }
        o.mrs.insert(key, pd);
        Ok(key)
    }

    /// `ibv_dereg_mr`. After it returns the NIC never touches the buffer.
    ///
    /// # Errors
    /// `EINVAL` for an unknown key, or while memory windows are bound onto
    /// the MR (rxe's answer).
    pub fn dereg_mr(&self, key: u32) -> Result<()> {
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        if read(&self.sh.mem).has_bound_windows(key) {
            return Err(err(
                "ibv_dereg_mr",
                Errno::EINVAL,
                Origin::Kernel,
                "memory windows are still bound to the MR",
            ));
        }
        let Some(pd) = o.mrs.remove(&key) else {
            return Err(err(
                "ibv_dereg_mr",
                Errno::EINVAL,
                Origin::Kernel,
                "no such MR",
            ));
        };
        write(&self.sh.mem).deregister(key);
        if let Some(n) = o.pds.get_mut(&pd) {
            *n = n.saturating_sub(1);
        }
        self.sh.unregister(Kind::Mr, key);
        Ok(())
    }

    /// `ibv_rereg_mr`: changes an MR's PD, access rights and/or the memory
    /// it covers (`translation`: new pointer, length and IOVA), keeping its
    /// keys. Work requests that named the old settings complete against the
    /// new ones, as after a real re-registration.
    ///
    /// # Safety
    /// With `translation`, the new buffer is under [`Device::reg_mr`]'s
    /// contract from now on; the old one is released when this returns.
    ///
    /// # Errors
    /// `EINVAL` for an unknown MR or PD, invalid access flags or an invalid
    /// new range.
    pub unsafe fn rereg_mr(
        &self,
        key: u32,
        pd: Option<u32>,
        access: Option<Access>,
        translation: Option<(*mut u8, usize, u64)>,
    ) -> Result<()> {
        const V: &str = "ibv_rereg_mr";
        if let Some(a) = access {
            check_access(V, a)?;
        }
        if let Some((ptr, len, iova)) = translation {
            check_region(V, ptr, len, iova, self.sh.limits.max_mr_size)?;
        }
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        let Some(&old_pd) = o.mrs.get(&key) else {
            return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such MR"));
        };
        if let Some(p) = pd {
            if !o.pds.contains_key(&p) {
                return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such PD"));
            }
        }
        // SAFETY: forwarded from this function's contract.
        let done = unsafe {
            write(&self.sh.mem).rereg(
                key,
                pd.map(Pd),
                access,
                translation.map(|(p, l, i)| (p, l as u64, i)),
            )
        };
        if !done {
            return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such MR"));
        }
        if let Some(p) = pd.filter(|&p| p != old_pd) {
            if let Some(n) = o.pds.get_mut(&old_pd) {
                *n = n.saturating_sub(1);
            }
            if let Some(n) = o.pds.get_mut(&p) {
                *n += 1;
            }
            o.mrs.insert(key, p);
        }
        Ok(())
    }

    // ------------------------------------------------------------------ MW

    /// `ibv_alloc_mw`: an unbound memory window of `pd`, type 1 (bound with
    /// `ibv_bind_mw`) or type 2 (bound by a `BindMw` work request); returns
    /// its key.
    ///
    /// # Errors
    /// `EINVAL` for an unknown PD or when `max_mw` windows exist.
    pub fn alloc_mw(&self, pd: u32, type2: bool) -> Result<u32> {
        const V: &str = "ibv_alloc_mw";
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        if o.mws.len() >= self.sh.limits.max_mw as usize {
            return Err(self.sh.exhausted(V, "max_mw", self.sh.limits.max_mw));
        }
        let Some(n) = o.pds.get_mut(&pd) else {
            return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such PD"));
        };
        *n += 1;
        let key = write(&self.sh.mem).alloc_mw(Pd(pd), type2);
        o.mws.insert(key >> 8, pd);
        Ok(key)
    }

    /// `ibv_dealloc_mw`: the window and its keys are gone (a bound window's
    /// access ends with it).
    ///
    /// # Errors
    /// `EINVAL` for an unknown window.
    pub fn dealloc_mw(&self, key: u32) -> Result<()> {
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        let Some(pd) = o.mws.remove(&(key >> 8)) else {
            return Err(err(
                "ibv_dealloc_mw",
                Errno::EINVAL,
                Origin::Kernel,
                "no such memory window",
            ));
        };
        write(&self.sh.mem).dealloc_mw(key);
        if let Some(n) = o.pds.get_mut(&pd) {
            *n = n.saturating_sub(1);
        }
        Ok(())
    }

    // ------------------------------------------------------------------ AH

    /// `ibv_create_ah` for a RoCEv2 destination GID (IPv4-mapped).
    ///
    /// # Errors
    /// `EINVAL` for an unknown PD, a GID that is not IPv4-mapped, or when
    /// `max_ah` AHs exist.
    pub fn create_ah(&self, pd: u32, dgid: Gid) -> Result<u32> {
        const V: &str = "ibv_create_ah";
        let ip = dgid.to_ipv4().ok_or_else(|| {
            err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "destination GID is not an IPv4-mapped RoCEv2 GID",
            )
        })?;
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        if !o.pds.contains_key(&pd) {
            return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such PD"));
        }
        if o.ahs.len() >= self.sh.limits.max_ah as usize {
            return Err(self.sh.exhausted(V, "max_ah", self.sh.limits.max_ah));
        }
        let id = o.next_ah;
        self.sh
            .register(V, Kind::Ah, id, "max_ah", self.sh.limits.max_ah)?;
        let Some(n) = o.pds.get_mut(&pd) else {
            return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such PD"));
        };
        *n += 1;
        let path = self.sh.intern_path(ip);
        o.next_ah = o.next_ah.wrapping_add(1).max(1);
        o.ahs.insert(id, (pd, path));
        Ok(id)
    }

    /// `ibv_destroy_ah`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown AH.
    pub fn destroy_ah(&self, ah: u32) -> Result<()> {
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        let Some((pd, _)) = o.ahs.remove(&ah) else {
            return Err(err(
                "ibv_destroy_ah",
                Errno::EINVAL,
                Origin::Kernel,
                "no such AH",
            ));
        };
        if let Some(n) = o.pds.get_mut(&pd) {
            *n = n.saturating_sub(1);
        }
        self.sh.unregister(Kind::Ah, ah);
        Ok(())
    }
}

fn check_region(verb: &'static str, ptr: *mut u8, len: usize, iova: u64, max: u64) -> Result<()> {
    let len64 = len as u64;
    if len == 0 || len64 > max || ptr.is_null() || iova.checked_add(len64).is_none() {
        return Err(err(
            verb,
            Errno::EINVAL,
            Origin::Kernel,
            "zero, oversized or null buffer, or an IOVA range that wraps",
        ));
    }
    Ok(())
}

/// The access checks ib_core makes (`ib_check_mr_access`).
fn check_access(verb: &'static str, access: Access) -> Result<()> {
    if (access.contains(Access::REMOTE_WRITE) || access.contains(Access::REMOTE_ATOMIC))
        && !access.contains(Access::LOCAL_WRITE)
    {
        return Err(err(
            verb,
            Errno::EINVAL,
            Origin::Kernel,
            "REMOTE_WRITE/REMOTE_ATOMIC require LOCAL_WRITE",
        ));
    }
    if access.0 & !(Access::all() | Access::MW_BIND).0 != 0 {
        return Err(err(
            verb,
            Errno::EINVAL,
            Origin::Kernel,
            "unknown access flags",
        ));
    }
    Ok(())
}
