//! Address handles: the AH table with `max_ah`, each AH's PD and path, and
//! the path table every address vector resolves to — an AH's, and a
//! connected QP's primary path. A path is a destination address and the
//! DSCP its packets carry, interned once; the engine names it by its index
//! (`AddressHandle`). The DSCP is the address vector's traffic class
//! without its ECN bits (the NIC's): at most 64 paths per destination.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Mutex;

use rdmakit_proto::AddressHandle;

use crate::attr::{Av, Limits};
use crate::errno::{Errno, Origin, Result};
use crate::lock;
use crate::registry::Kind;

use super::admit::{Admission, Limit};
use super::err;
use super::pd::PdGuard;

/// The AH table and the path table.
#[derive(Debug)]
pub(super) struct Ahs {
    map: Mutex<AhMap>,
    limit: Limit,
    /// Interned destinations, by index; never removed (a device has few).
    paths: Mutex<Vec<Path>>,
}

/// Where a path leads and the DSCP its packets carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Path {
    /// The destination address.
    pub(super) ip: Ipv4Addr,
    /// The traffic class with its ECN bits cleared: `DSCP << 2`.
    pub(super) dscp: u8,
}

impl Path {
    /// The path to `ip` with `traffic_class`'s DSCP.
    pub(super) fn new(ip: Ipv4Addr, traffic_class: u8) -> Path {
        Path {
            ip,
            dscp: traffic_class & !ECN_MASK,
        }
    }
}

/// The ECN bits of an IP TOS byte.
const ECN_MASK: u8 = 0b11;

#[derive(Debug)]
struct AhMap {
    /// AH → (its PD, its path).
    ahs: HashMap<u32, (u32, u32)>,
    next: u32,
}

impl Ahs {
    /// Empty tables enforcing `max_ah`.
    pub(super) fn new(limits: &Limits) -> Ahs {
        Ahs {
            map: Mutex::new(AhMap {
                ahs: HashMap::new(),
                next: 1,
            }),
            limit: Limit::new("max_ah", limits.max_ah),
            paths: Mutex::new(Vec::new()),
        }
    }

    /// `ibv_create_ah` in `pd` for a RoCEv2 destination GID and traffic
    /// class.
    pub(super) fn create(
        &self,
        adm: &Admission,
        pds: &mut PdGuard<'_>,
        pd: u32,
        av: Av,
    ) -> Result<u32> {
        const V: &str = "ibv_create_ah";
        let ip = av.dgid.to_ipv4().ok_or_else(|| {
            err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                "destination GID is not an IPv4-mapped RoCEv2 GID",
            )
        })?;
        pds.check(V, pd)?;
        let mut m = lock(&self.map);
        adm.check(V, m.ahs.len(), self.limit)?;
        let id = m.next;
        adm.register(V, Kind::Ah, id, self.limit)?;
        pds.hold(pd);
        let path = self.intern(Path::new(ip, av.traffic_class));
        m.next = m.next.wrapping_add(1).max(1);
        m.ahs.insert(id, (pd, path));
        Ok(id)
    }

    /// `ibv_destroy_ah`: `EINVAL` for an unknown AH.
    pub(super) fn destroy(&self, adm: &Admission, pds: &mut PdGuard<'_>, ah: u32) -> Result<()> {
        let Some((pd, _)) = lock(&self.map).ahs.remove(&ah) else {
            return Err(err(
                "ibv_destroy_ah",
                Errno::EINVAL,
                Origin::Kernel,
                "no such AH",
            ));
        };
        pds.release(pd);
        adm.unregister(Kind::Ah, ah);
        Ok(())
    }

    /// The path an AH resolves to (what a UD send names), if it exists.
    pub(super) fn path_of(&self, ah: u32) -> Option<AddressHandle> {
        lock(&self.map)
            .ahs
            .get(&ah)
            .map(|&(_, path)| AddressHandle(path))
    }

    /// `path`'s index, interned.
    pub(super) fn intern(&self, path: Path) -> u32 {
        let mut p = lock(&self.paths);
        if let Some(i) = p.iter().position(|&a| a == path) {
            return i as u32;
        }
        p.push(path);
        (p.len() - 1) as u32
    }

    /// A path to `ip` if one was interned (the first, whatever its DSCP):
    /// a lookup that never adds (a received packet's source must not grow
    /// the table).
    pub(super) fn find(&self, ip: Ipv4Addr) -> Option<AddressHandle> {
        let p = lock(&self.paths);
        p.iter()
            .position(|a| a.ip == ip)
            .and_then(|i| u32::try_from(i).ok())
            .map(AddressHandle)
    }

    /// Where a path leads and its DSCP.
    pub(super) fn path(&self, ah: AddressHandle) -> Option<Path> {
        lock(&self.paths).get(ah.0 as usize).copied()
    }

    /// Live AHs.
    pub(super) fn len(&self) -> usize {
        lock(&self.map).ahs.len()
    }
}
