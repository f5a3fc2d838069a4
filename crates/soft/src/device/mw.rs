//! Memory windows: which PD each window is in and `max_mw`. A window's
//! key and binding live in the MR table ([`super::mr::Mrs`]), whose key
//! space the windows share; the engine binds them.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::attr::Limits;
use crate::errno::{Errno, Origin, Result};
use crate::lock;

use super::admit::{Admission, Limit};
use super::err;
use super::mr::Mrs;
use super::pd::PdGuard;

/// The memory-window table.
#[derive(Debug)]
pub(super) struct Mws {
    /// Window key index (the key without its 8 variable bits) → its PD.
    owners: Mutex<HashMap<u32, u32>>,
    limit: Limit,
}

impl Mws {
    /// An empty table enforcing `max_mw`.
    pub(super) fn new(limits: &Limits) -> Mws {
        Mws {
            owners: Mutex::new(HashMap::new()),
            limit: Limit::new("max_mw", limits.max_mw),
        }
    }

    /// `ibv_alloc_mw`: an unbound window of `pd` (type 2 with `type2`);
    /// returns its key.
    pub(super) fn alloc(
        &self,
        adm: &Admission,
        pds: &mut PdGuard<'_>,
        mrs: &Mrs,
        pd: u32,
        type2: bool,
    ) -> Result<u32> {
        const V: &str = "ibv_alloc_mw";
        let mut owners = lock(&self.owners);
        adm.check(V, owners.len(), self.limit)?;
        pds.check(V, pd)?;
        pds.hold(pd);
        let key = mrs.alloc_window(pd, type2);
        owners.insert(key >> 8, pd);
        Ok(key)
    }

    /// `ibv_dealloc_mw`: `EINVAL` for an unknown window.
    pub(super) fn dealloc(&self, pds: &mut PdGuard<'_>, mrs: &Mrs, key: u32) -> Result<()> {
        let Some(pd) = lock(&self.owners).remove(&(key >> 8)) else {
            return Err(err(
                "ibv_dealloc_mw",
                Errno::EINVAL,
                Origin::Kernel,
                "no such memory window",
            ));
        };
        mrs.dealloc_window(key);
        pds.release(pd);
        Ok(())
    }
}
