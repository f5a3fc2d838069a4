//! Memory regions: the device's MR table ([`crate::dma::MrTable`]: keys →
//! buffers, and the memory windows bound onto them), the PD of each MR,
//! `max_mr` and `max_mr_size`. The MR table also holds the same-host copy
//! path's switch, set from the device's transport when it opens.
//!
//! Locks: the PD table's (taken by the caller), then the MR owners', then
//! the MR table's. The engine reads the MR table for every access and
//! every posted SGE's mapping ([`Mrs::memory`]).

use std::collections::HashMap;
use std::sync::{Mutex, RwLock, RwLockReadGuard};

use rdmakit_proto::{Access, Pd};

use crate::attr::Limits;
use crate::cma::SoftTransport;
use crate::dma::MrTable;
use crate::errno::{Errno, Origin, Result};
use crate::registry::Kind;
use crate::{lock, read, write};

use super::admit::{Admission, Limit};
use super::err;
use super::pd::PdGuard;

/// The MR table and what the device keeps beside it.
#[derive(Debug)]
pub(super) struct Mrs {
    mem: RwLock<MrTable>,
    /// MR key → its PD.
    owners: Mutex<HashMap<u32, u32>>,
    limit: Limit,
    max_mr_size: u64,
}

impl Mrs {
    /// An empty table enforcing `max_mr` and `max_mr_size`, of a device
    /// whose transport is `transport`.
    pub(super) fn new(limits: &Limits, transport: SoftTransport) -> Mrs {
        Mrs {
            mem: RwLock::new(MrTable::new(transport)),
            owners: Mutex::new(HashMap::new()),
            limit: Limit::new("max_mr", limits.max_mr),
            max_mr_size: limits.max_mr_size,
        }
    }

    /// `ibv_reg_mr_iova` in PD `pd`: see [`super::Device::reg_mr_iova`].
    ///
    /// # Safety
    /// The registration contract of [`crate::dma`] for `[ptr, ptr + len)`.
    pub(super) unsafe fn register(
        &self,
        adm: &Admission,
        pds: &mut PdGuard<'_>,
        pd: u32,
        region: (*mut u8, usize, u64),
        access: Access,
    ) -> Result<u32> {
        const V: &str = "ibv_reg_mr";
        let (ptr, len, iova) = region;
        check_region(V, ptr, len, iova, self.max_mr_size)?;
        check_access(V, access)?;
        pds.check(V, pd)?;
        let mut owners = lock(&self.owners);
        adm.check(V, owners.len(), self.limit)?;
        // SAFETY: forwarded from this function's own contract.
        let key = unsafe { write(&self.mem).register_at(Pd(pd), ptr, len as u64, iova, access) };
        if let Err(e) = adm.register(V, Kind::Mr, key, self.limit) {
            write(&self.mem).deregister(key);
            return Err(e);
        }
        owners.insert(key, pd);
        pds.hold(pd);
        Ok(key)
    }

    /// `ibv_dereg_mr`: `EINVAL` for an unknown key, or while memory
    /// windows are bound onto the MR (rxe's answer).
    pub(super) fn deregister(
        &self,
        adm: &Admission,
        pds: &mut PdGuard<'_>,
        key: u32,
    ) -> Result<()> {
        const V: &str = "ibv_dereg_mr";
        let mut owners = lock(&self.owners);
        if read(&self.mem).has_bound_windows(key) {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "memory windows are still bound to the MR",
            ));
        }
        let Some(pd) = owners.remove(&key) else {
            return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such MR"));
        };
        write(&self.mem).deregister(key);
        pds.release(pd);
        adm.unregister(Kind::Mr, key);
        Ok(())
    }

    /// `ibv_rereg_mr`: see [`super::Device::rereg_mr`].
    ///
    /// # Safety
    /// With `translation`, the new buffer is under the registration
    /// contract from now on.
    pub(super) unsafe fn rereg(
        &self,
        pds: &mut PdGuard<'_>,
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
            check_region(V, ptr, len, iova, self.max_mr_size)?;
        }
        let mut owners = lock(&self.owners);
        let Some(&old_pd) = owners.get(&key) else {
            return Err(err(V, Errno::EINVAL, Origin::Kernel, "no such MR"));
        };
        if let Some(p) = pd {
            pds.check(V, p)?;
        }
        // SAFETY: forwarded from this function's contract.
        let done = unsafe {
            write(&self.mem).rereg(
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
            pds.release(old_pd);
            pds.hold(p);
            owners.insert(key, p);
        }
        Ok(())
    }

    /// The MR table for reading: what a posted SGE is mapped against and
    /// what the engine accesses memory through.
    pub(super) fn memory(&self) -> RwLockReadGuard<'_, MrTable> {
        read(&self.mem)
    }

    /// A new memory window's key (the windows share the MRs' key space).
    pub(super) fn alloc_window(&self, pd: u32, type2: bool) -> u32 {
        write(&self.mem).alloc_mw(Pd(pd), type2)
    }

    /// Frees a memory window's key.
    pub(super) fn dealloc_window(&self, key: u32) {
        write(&self.mem).dealloc_mw(key);
    }

    /// Live MRs.
    pub(super) fn len(&self) -> usize {
        lock(&self.owners).len()
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
