//! Protection domains: the PD table, each PD with the number of objects
//! (MRs, MWs, AHs, QPs, SRQs) created in it, and `max_pd`.
//!
//! An object is created in a PD under the table's lock ([`Pds::lock`]):
//! the PD is checked, the object made and the PD's count raised while no
//! `ibv_dealloc_pd` can come between. The PD lock is taken before any
//! other table's.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::attr::Limits;
use crate::errno::{Errno, Origin, Result};
use crate::lock;
use crate::registry::Kind;

use super::admit::{Admission, Limit};
use super::err;

/// The PD table.
#[derive(Debug)]
pub(super) struct Pds {
    map: Mutex<PdMap>,
    limit: Limit,
}

#[derive(Debug)]
struct PdMap {
    /// PD → objects created in it.
    users: HashMap<u32, usize>,
    next: u32,
}

/// The PD table, locked: PDs neither come nor go while it is held.
pub(super) struct PdGuard<'a>(MutexGuard<'a, PdMap>);

impl Pds {
    /// An empty table enforcing `max_pd`.
    pub(super) fn new(limits: &Limits) -> Pds {
        Pds {
            map: Mutex::new(PdMap {
                users: HashMap::new(),
                next: 1,
            }),
            limit: Limit::new("max_pd", limits.max_pd),
        }
    }

    /// `ibv_alloc_pd`.
    pub(super) fn alloc(&self, adm: &Admission) -> Result<u32> {
        const V: &str = "ibv_alloc_pd";
        let mut m = lock(&self.map);
        adm.check(V, m.users.len(), self.limit)?;
        let id = m.next;
        m.next = m.next.wrapping_add(1).max(1);
        adm.register(V, Kind::Pd, id, self.limit)?;
        m.users.insert(id, 0);
        Ok(id)
    }

    /// `ibv_dealloc_pd`: `EINVAL` for an unknown PD, `EBUSY` while
    /// objects use it.
    pub(super) fn dealloc(&self, adm: &Admission, pd: u32) -> Result<()> {
        const V: &str = "ibv_dealloc_pd";
        let mut m = lock(&self.map);
        match m.users.get(&pd) {
            None => Err(err(V, Errno::EINVAL, Origin::Kernel, "no such PD")),
            Some(&n) if n > 0 => Err(err(
                V,
                Errno::EBUSY,
                Origin::Kernel,
                format!("{n} objects still use the PD"),
            )),
            Some(_) => {
                m.users.remove(&pd);
                adm.unregister(Kind::Pd, pd);
                Ok(())
            }
        }
    }

    /// The table locked, to create an object in a PD.
    pub(super) fn lock(&self) -> PdGuard<'_> {
        PdGuard(lock(&self.map))
    }

    /// An object of `pd` is gone.
    pub(super) fn release(&self, pd: u32) {
        self.lock().release(pd);
    }

    /// Live PDs.
    pub(super) fn len(&self) -> usize {
        lock(&self.map).users.len()
    }
}

impl PdGuard<'_> {
    /// `EINVAL` ("no such PD") in `verb` unless `pd` exists.
    pub(super) fn check(&self, verb: &'static str, pd: u32) -> Result<()> {
        if self.contains(pd) {
            Ok(())
        } else {
            Err(err(verb, Errno::EINVAL, Origin::Kernel, "no such PD"))
        }
    }

    /// Whether `pd` exists.
    pub(super) fn contains(&self, pd: u32) -> bool {
        self.0.users.contains_key(&pd)
    }

    /// One more object in `pd` (checked by the caller).
    pub(super) fn hold(&mut self, pd: u32) {
        if let Some(n) = self.0.users.get_mut(&pd) {
            *n += 1;
        }
    }

    /// One object less in `pd`.
    pub(super) fn release(&mut self, pd: u32) {
        if let Some(n) = self.0.users.get_mut(&pd) {
            *n = n.saturating_sub(1);
        }
    }
}
