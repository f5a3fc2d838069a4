//! What tests of the engine share with the integration tests and the fuzz
//! targets (the `test-support` feature; never in a release build): a QP
//! brought up for the same-host path and a memory that answers its calls.
//!
//! ```
//! use rdmakit_proto::testing::{rts_qp, HookedMem, SameHostHook};
//! use rdmakit_proto::{Access, MemTable, Mtu, Pd, PeerCopy, PeerError, QpType};
//!
//! /// Declines every same-host copy.
//! struct Decline;
//! impl SameHostHook for Decline {
//!     fn peer_copy(&mut self, _: &MemTable, _: &PeerCopy<'_>) -> Result<u64, PeerError> {
//!         Err(PeerError::Declined("test"))
//!     }
//! }
//!
//! let qp = rts_qp(0x11, 0x22, QpType::Rc, Mtu::Mtu1024, Access::REMOTE_WRITE, true);
//! assert!(qp.same_host_active());
//! let mut t = MemTable::new();
//! t.register(Pd(1), 0x1000, 64, Access::all());
//! let _mem = HookedMem { t, hook: Decline };
//! ```

use crate::mem::{AtomicOp, Key, MemResult, MemTable, Memory, Pd, PeerCopy, PeerError};
use crate::qp::{Access, AddressHandle, Mtu, QpAttr, QpState, QpType};
use crate::{Qp, QpConfig};

/// A QP `qpn` of PD 1 in RTS facing `dest_qpn` across a back-to-back link:
/// path and port MTU `mtu`, the peer may do what `access` grants, QKey
/// 0x1111_1111, address handle `qpn >> 5`, ACK timeout 8, two retries and
/// two RNR retries, four reads in flight each way; same-host requests on
/// when `same_host`.
///
/// # Panics
/// When the engine refuses the bring-up (it accepts these attributes for
/// every QP type).
pub fn rts_qp(qpn: u32, dest_qpn: u32, t: QpType, mtu: Mtu, access: Access, same_host: bool) -> Qp {
    let mut c = QpConfig::new(qpn, t, Pd(1));
    c.port_mtu = mtu;
    let mut q = Qp::new(c);
    let attr = QpAttr {
        path_mtu: mtu,
        qkey: 0x1111_1111,
        dest_qp_num: dest_qpn,
        qp_access_flags: access,
        ah: AddressHandle(qpn >> 5),
        timeout: 8,
        retry_cnt: 2,
        rnr_retry: 2,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        ..QpAttr::default()
    };
    q.bring_up(&attr, QpState::Rts).expect("bring-up");
    q.set_same_host(same_host);
    q
}

/// What a test's [`HookedMem`] does when the engine takes the same-host
/// path; everything else its table answers.
pub trait SameHostHook {
    /// Whether a buffer's host address is its own address once the table
    /// checked it (the same-host path's precondition). The default: no
    /// host addresses, so the engine sends ordinary packets.
    fn host_addrs(&self) -> bool {
        false
    }

    /// [`Memory::peer_copy`] over the table.
    ///
    /// # Errors
    /// As [`Memory::peer_copy`].
    fn peer_copy(&mut self, t: &MemTable, copy: &PeerCopy<'_>) -> Result<u64, PeerError>;
}

/// A [`MemTable`] as a test's [`Memory`]: the table checks, reads, writes,
/// executes atomics and invalidates; the hook answers the same-host calls.
/// Memory windows are refused, as [`Memory`]'s defaults do.
pub struct HookedMem<H> {
    /// The regions.
    pub t: MemTable,
    /// The same-host calls.
    pub hook: H,
}

impl<H: SameHostHook> Memory for HookedMem<H> {
    fn check(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> MemResult {
        self.t.check(pd, key, addr, len, need)
    }
    fn read(&self, pd: Pd, key: Key, addr: u64, out: &mut [u8], need: Access) -> MemResult {
        self.t.read(pd, key, addr, out, need)
    }
    fn write(&mut self, pd: Pd, key: Key, addr: u64, data: &[u8], need: Access) -> MemResult {
        self.t.write(pd, key, addr, data, need)
    }
    fn atomic(&mut self, pd: Pd, rkey: u32, addr: u64, op: AtomicOp) -> MemResult<u64> {
        self.t.atomic(pd, rkey, addr, op)
    }
    fn invalidate(&mut self, pd: Pd, rkey: u32) -> MemResult {
        self.t.invalidate(pd, rkey)
    }
    fn host_addr(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> Option<u64> {
        if !self.hook.host_addrs() {
            return None;
        }
        self.t.check(pd, key, addr, len, need).ok().map(|()| addr)
    }
    fn peer_copy(&mut self, copy: &PeerCopy<'_>) -> Result<u64, PeerError> {
        self.hook.peer_copy(&self.t, copy)
    }
}
