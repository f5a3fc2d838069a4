//! Registered memory: the soft NIC's "DMA". The only module with `unsafe`.
//!
//! # Registration contract
//! [`MrTable::register`] records a raw pointer and a length. From then until
//! [`MrTable::deregister`] returns, the soft NIC may read and write those
//! bytes from its progress thread at any time the region's rights allow
//! (local accesses from posted work requests, remote WRITE/READ/atomics from
//! the network). The caller of `register` promises that:
//! 1. `[ptr, ptr + len)` is one allocation valid for reads and writes and
//!    stays allocated until `deregister` returned (the buffer outlives the MR);
//! 2. while the region is registered, nothing in the application holds a
//!    Rust reference (`&[u8]` / `&mut [u8]`) to bytes the NIC may write
//!    concurrently; the application synchronises through completions, as
//!    with any RDMA NIC.
//!
//! Every access validates key, PD, bounds and rights first (proto's
//! [`Memory`] contract); a failed check moves no byte. `deregister` takes the
//! table's write lock, so it waits for any access in progress and no access
//! starts afterwards.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rdmakit_proto::{Access, AtomicOp, Extent, Key, MemError, MemResult, Memory, Pd};

/// One registered region.
#[derive(Debug)]
struct Region {
    pd: Pd,
    /// Virtual address of byte 0 (equal to the host pointer).
    addr: u64,
    len: u64,
    ptr: *mut u8,
    access: Access,
    key: u32,
    rkey_valid: AtomicBool,
    /// Windows bound onto it (it cannot be deregistered meanwhile).
    bound_mws: std::sync::atomic::AtomicUsize,
}

/// A memory window: remote access to part of an MR under the window's own
/// key, granted by a bind (type 1: `ibv_bind_mw`; type 2: a bind work
/// request) and withdrawn by a rebind, an invalidation or deallocation.
#[derive(Debug)]
struct Window {
    pd: Pd,
    type2: bool,
    key: u32,
    bound: Option<Binding>,
}

#[derive(Clone, Copy, Debug)]
struct Binding {
    mr_key: u32,
    addr: u64,
    len: u64,
    access: Access,
}

/// The device's memory-region table: keys → raw buffers, and the memory
/// windows bound onto them (one key space: a key's index names either).
#[derive(Debug)]
pub struct MrTable {
    regions: rustc_hash::FxHashMap<u32, Region>,
    /// Windows change under a bind work request, which the engine executes
    /// holding the table for reading: they sit behind their own lock.
    windows: std::sync::Mutex<rustc_hash::FxHashMap<u32, Window>>,
    next_index: u32,
    /// The same-host copy path's identity and switch ([`crate::cma`]).
    same_host: crate::cma::SameHost,
}

// SAFETY: the raw pointers in `Region` are only dereferenced through the
// validated accessors below, under the registration contract (the buffer is
// valid for the MR's lifetime and the table's RwLock orders deregistration
// after every access). Moving the table between threads moves no bytes.
unsafe impl Send for MrTable {}
// SAFETY: shared access only reads the table structure; byte accesses through
// `&MrTable` are the NIC's DMA, permitted by the registration contract.
unsafe impl Sync for MrTable {}

/// A fresh random 32-bit value (SipHash keyed by a per-call `RandomState`).
pub(crate) fn random_u32() -> u32 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    h.finish() as u32
}

impl MrTable {
    /// An empty table whose key indices start at a random point, of a
    /// device whose transport is `transport` (which turns the same-host
    /// copy path on or off, [`crate::cma::SameHost`]).
    pub fn new(transport: crate::cma::SoftTransport) -> MrTable {
        MrTable {
            regions: rustc_hash::FxHashMap::default(),
            windows: std::sync::Mutex::new(rustc_hash::FxHashMap::default()),
            next_index: random_u32() & 0x00ff_ffff,
            same_host: crate::cma::SameHost::new(transport),
        }
    }

    /// The same-host copy path of this table's device.
    pub fn same_host(&self) -> &crate::cma::SameHost {
        &self.same_host
    }

    /// Number of registered regions.
    pub fn len(&self) -> usize {
        self.regions.len()
    }

    /// True when no region is registered.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Registers `[ptr, ptr + len)`; returns the key (lkey == rkey, as rxe:
    /// 24 index bits, 8 random key bits).
    ///
    /// # Safety
    /// The module's registration contract: the buffer is valid for reads and
    /// writes of `len` bytes until [`MrTable::deregister`] of the returned key
    /// returned, and the application holds no Rust reference to bytes the NIC
    /// may write meanwhile.
    pub unsafe fn register(&mut self, pd: Pd, ptr: *mut u8, len: u64, access: Access) -> u32 {
        // SAFETY: forwarded contract.
        unsafe { self.register_at(pd, ptr, len, ptr as u64, access) }
    }

    /// [`MrTable::register`] with virtual address `iova` for byte 0 (work
    /// requests and remote peers name `iova + offset`).
    ///
    /// # Safety
    /// As [`MrTable::register`].
    pub unsafe fn register_at(
        &mut self,
        pd: Pd,
        ptr: *mut u8,
        len: u64,
        iova: u64,
        access: Access,
    ) -> u32 {
        let key = self.new_key();
        let index = key >> 8;
        self.regions.insert(
            index,
            Region {
                pd,
                addr: iova,
                len,
                ptr,
                access,
                key,
                rkey_valid: AtomicBool::new(true),
                bound_mws: std::sync::atomic::AtomicUsize::new(0),
            },
        );
        key
    }

    /// A fresh key: an index no region or window uses (24 bits, skipping
    /// 0xffffff) and 8 random key bits.
    fn new_key(&mut self) -> u32 {
        let windows = self.windows.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut index = self.next_index & 0x00ff_ffff;
        while self.regions.contains_key(&index)
            || windows.contains_key(&index)
            || index == 0x00ff_ffff
        {
            index = (index + 1) & 0x00ff_ffff;
        }
        self.next_index = index.wrapping_add(1);
        (index << 8) | (random_u32() & 0xff)
    }

    /// `ibv_alloc_mw`: a window of `pd`, unbound; returns its key.
    pub fn alloc_mw(&mut self, pd: Pd, type2: bool) -> u32 {
        let key = self.new_key();
        self.windows
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                key >> 8,
                Window {
                    pd,
                    type2,
                    key,
                    bound: None,
                },
            );
        key
    }

    /// `ibv_dealloc_mw`: the window and every key it had are gone. Returns
    /// its PD, or None for an unknown window.
    pub fn dealloc_mw(&mut self, key: u32) -> Option<Pd> {
        let windows = self.windows.get_mut().unwrap_or_else(|p| p.into_inner());
        let w = windows.remove(&(key >> 8))?;
        if let Some(b) = w.bound {
            self.unbind_from(b.mr_key);
        }
        Some(w.pd)
    }

    /// Whether windows are bound onto the MR with `key`.
    pub fn has_bound_windows(&self, key: u32) -> bool {
        self.regions
            .get(&(key >> 8))
            .filter(|r| r.key == key)
            .is_some_and(|r| r.bound_mws.load(Ordering::Acquire) > 0)
    }

    fn unbind_from(&self, mr_key: u32) {
        if let Some(r) = self.regions.get(&(mr_key >> 8)).filter(|r| r.key == mr_key) {
            let _ = r
                .bound_mws
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        }
    }

    /// Binds a window (the checks of rxe's `rxe_check_bind_mw`): the window
    /// and the MR belong to `pd` (the QP's), a type 2 window is unbound and
    /// keeps its index, the MR allows binding (`MW_BIND`) and covers the
    /// range, remote write or atomic rights need local write on the MR. A
    /// zero length unbinds a type 1 window.
    fn bind(&self, pd: Pd, b: &rdmakit_proto::MwBind) -> MemResult {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let w = windows
            .get_mut(&(b.mw_rkey >> 8))
            .filter(|w| w.key == b.mw_rkey)
            .ok_or(MemError::BadKey)?;
        if w.pd != pd {
            return Err(MemError::WrongPd);
        }
        if b.type1 == w.type2 || (b.new_rkey >> 8) != (b.mw_rkey >> 8) {
            return Err(MemError::BadKey);
        }
        if w.type2 && w.bound.is_some() {
            return Err(MemError::AccessDenied);
        }
        let binding = if b.length == 0 {
            None
        } else {
            let r = self
                .regions
                .get(&(b.mr_lkey >> 8))
                .filter(|r| r.key == b.mr_lkey)
                .ok_or(MemError::BadKey)?;
            if r.pd != pd {
                return Err(MemError::WrongPd);
            }
            let end = b.addr.checked_add(b.length).ok_or(MemError::OutOfBounds)?;
            if b.addr < r.addr || end > r.addr + r.len {
                return Err(MemError::OutOfBounds);
            }
            let writes =
                b.access.contains(Access::REMOTE_WRITE) || b.access.contains(Access::REMOTE_ATOMIC);
            if !r.access.contains(Access::MW_BIND)
                || (writes && !r.access.contains(Access::LOCAL_WRITE))
            {
                return Err(MemError::AccessDenied);
            }
            r.bound_mws.fetch_add(1, Ordering::AcqRel);
            Some(Binding {
                mr_key: b.mr_lkey,
                addr: b.addr,
                len: b.length,
                access: b.access,
            })
        };
        if let Some(old) = w.bound.take() {
            self.unbind_from(old.mr_key);
        }
        w.bound = binding;
        w.key = b.new_rkey;
        Ok(())
    }

    /// Unbinds the type 2 window with `rkey` (local invalidate, or a remote
    /// SEND with invalidate naming a window).
    fn invalidate_window(&self, pd: Pd, rkey: u32) -> MemResult {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let w = windows
            .get_mut(&(rkey >> 8))
            .filter(|w| w.key == rkey && w.type2)
            .ok_or(MemError::BadKey)?;
        if w.pd != pd {
            return Err(MemError::WrongPd);
        }
        if let Some(b) = w.bound.take() {
            self.unbind_from(b.mr_key);
        }
        Ok(())
    }

    /// The MR region and offset a bound window's key reaches.
    fn locate_window(
        &self,
        pd: Pd,
        k: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> MemResult<(&Region, usize)> {
        let b = {
            let windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
            let w = windows
                .get(&(k >> 8))
                .filter(|w| w.key == k)
                .ok_or(MemError::BadKey)?;
            if w.pd != pd {
                return Err(MemError::WrongPd);
            }
            w.bound.ok_or(MemError::BadKey)?
        };
        let end = addr.checked_add(len).ok_or(MemError::OutOfBounds)?;
        if addr < b.addr || end > b.addr + b.len {
            return Err(MemError::OutOfBounds);
        }
        if !b.access.contains(need) {
            return Err(MemError::AccessDenied);
        }
        let r = self
            .regions
            .get(&(b.mr_key >> 8))
            .filter(|r| r.key == b.mr_key)
            .ok_or(MemError::BadKey)?;
        let off = usize::try_from(addr - r.addr).map_err(|_| MemError::OutOfBounds)?;
        Ok((r, off))
    }

    /// Removes a region; afterwards the NIC never touches its bytes again.
    /// Returns false when no region has `key`.
    pub fn deregister(&mut self, key: u32) -> bool {
        let idx = key >> 8;
        match self.regions.get(&idx) {
            Some(r) if r.key == key => {
                self.regions.remove(&idx);
                true
            }
            _ => false,
        }
    }

    /// Changes a region's PD, rights and/or buffer (new pointer, length,
    /// IOVA), keeping its key. False when no region has `key`.
    ///
    /// # Safety
    /// A new buffer is under [`MrTable::register`]'s contract from now on;
    /// the old one is no longer touched once this returns (the caller holds
    /// the table's write lock, so no access is in progress).
    pub unsafe fn rereg(
        &mut self,
        key: u32,
        pd: Option<Pd>,
        access: Option<Access>,
        translation: Option<(*mut u8, u64, u64)>,
    ) -> bool {
        let Some(r) = self.regions.get_mut(&(key >> 8)).filter(|r| r.key == key) else {
            return false;
        };
        if let Some(p) = pd {
            r.pd = p;
        }
        if let Some(a) = access {
            r.access = a;
        }
        if let Some((ptr, len, iova)) = translation {
            r.ptr = ptr;
            r.len = len;
            r.addr = iova;
        }
        true
    }

    /// (pd, addr, len, access) of the region with `key`.
    pub fn describe(&self, key: u32) -> Option<(Pd, u64, u64, Access)> {
        self.regions
            .get(&(key >> 8))
            .filter(|r| r.key == key)
            .map(|r| (r.pd, r.addr, r.len, r.access))
    }

    /// Validates and returns (region, offset).
    fn locate(
        &self,
        pd: Pd,
        key: Key,
        addr: u64,
        len: u64,
        need: Access,
    ) -> MemResult<(&Region, usize)> {
        let (k, remote) = match key {
            Key::Local(k) => (k, false),
            Key::Remote(k) => (k, true),
        };
        let Some(r) = self.regions.get(&(k >> 8)).filter(|r| r.key == k) else {
            // A window's key reaches its MR remotely, never locally.
            return if remote {
                self.locate_window(pd, k, addr, len, need)
            } else {
                Err(MemError::BadKey)
            };
        };
        if remote && !r.rkey_valid.load(Ordering::Acquire) {
            return Err(MemError::BadKey);
        }
        let extent = Extent {
            pd: r.pd,
            addr: r.addr,
            len: r.len,
            access: r.access,
        };
        Ok((r, extent.offset(pd, addr, len, need)?))
    }

    /// The view the engine uses (validated accesses through `&self`).
    pub fn view(&self) -> MemView<'_> {
        MemView(self)
    }
}

/// [`Memory`] over a shared [`MrTable`]: byte moves are the NIC's DMA.
#[derive(Debug)]
pub struct MemView<'a>(&'a MrTable);

impl MemView<'_> {
    /// [`Memory::peer_copy`] for a request taken from the same-host ring of
    /// `peer` (None: it came another way, and is declined): every local
    /// range is checked against this table (key, PD, bounds, rights) and
    /// translated to host addresses before the one system call moves a
    /// byte, which reaches `peer`'s memory alone ([`crate::cma`]).
    ///
    /// # Errors
    /// As [`Memory::peer_copy`].
    pub(crate) fn peer_copy_from(
        &self,
        copy: &rdmakit_proto::PeerCopy<'_>,
        peer: Option<&crate::net::shm::Peer>,
    ) -> Result<u64, rdmakit_proto::PeerError> {
        let mut host = Vec::with_capacity(copy.local.len());
        for &(key, addr, len) in copy.local {
            let (r, off) = self.0.locate(copy.pd, key, addr, len, copy.need)?;
            host.push((r.ptr as u64 + off as u64, len));
        }
        self.0.same_host.copy(&host, peer, copy.peer, copy.dir)
    }
}

impl Memory for MemView<'_> {
    fn check(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> MemResult {
        self.0.locate(pd, key, addr, len, need).map(|_| ())
    }

    fn read(&self, pd: Pd, key: Key, addr: u64, out: &mut [u8], need: Access) -> MemResult {
        let (r, off) = self.0.locate(pd, key, addr, out.len() as u64, need)?;
        // SAFETY: `locate` proved [off, off + out.len()) lies inside the
        // registered buffer, which the registration contract keeps valid
        // while it is in the table (we hold a shared borrow of the table, so
        // deregistration cannot run). `out` is a separate Rust buffer, so the
        // ranges do not overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(r.ptr.add(off), out.as_mut_ptr(), out.len());
        }
        Ok(())
    }

    fn write(&mut self, pd: Pd, key: Key, addr: u64, data: &[u8], need: Access) -> MemResult {
        let (r, off) = self.0.locate(pd, key, addr, data.len() as u64, need)?;
        // SAFETY: as in `read`: the destination range was validated against
        // the registered buffer, which is valid for writes under the
        // registration contract (no Rust reference to it exists meanwhile).
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), r.ptr.add(off), data.len());
        }
        Ok(())
    }

    fn atomic(&mut self, pd: Pd, rkey: u32, addr: u64, op: AtomicOp) -> MemResult<u64> {
        let (r, off) = self
            .0
            .locate(pd, Key::Remote(rkey), addr, 8, Access::REMOTE_ATOMIC)?;
        // SAFETY: 8 bytes at `off` lie inside the buffer (validated above).
        let p = unsafe { r.ptr.add(off) };
        if addr % 8 != 0 || (p as usize) % 8 != 0 {
            return Err(MemError::Misaligned);
        }
        // SAFETY: `p` is 8-byte aligned, inside a buffer valid for reads and
        // writes for the region's lifetime, and every NIC access to these
        // bytes as a u64 goes through atomic operations, so concurrent
        // atomics from several QPs are serialised by the CPU.
        let cell = unsafe { AtomicU64::from_ptr(p.cast::<u64>()) };
        Ok(match op {
            AtomicOp::CompareSwap { compare, swap } => {
                match cell.compare_exchange(compare, swap, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(v) | Err(v) => v,
                }
            }
            AtomicOp::FetchAdd { add } => cell.fetch_add(add, Ordering::AcqRel),
        })
    }

    fn invalidate(&mut self, pd: Pd, rkey: u32) -> MemResult {
        let Some(r) = self
            .0
            .regions
            .get(&(rkey >> 8))
            .filter(|r| r.key == rkey && r.rkey_valid.load(Ordering::Acquire))
        else {
            return self.0.invalidate_window(pd, rkey);
        };
        if r.pd != pd {
            return Err(MemError::WrongPd);
        }
        r.rkey_valid.store(false, Ordering::Release);
        Ok(())
    }

    fn bind_mw(&mut self, pd: Pd, bind: &rdmakit_proto::MwBind) -> MemResult {
        self.0.bind(pd, bind)
    }

    fn host_addr(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> Option<u64> {
        let (r, off) = self.0.locate(pd, key, addr, len, need).ok()?;
        Some(r.ptr as u64 + off as u64)
    }

    /// Declines: a copy needs the channel a request arrived on
    /// ([`MemView::peer_copy_from`]), which this view does not know.
    fn peer_copy(
        &mut self,
        copy: &rdmakit_proto::PeerCopy<'_>,
    ) -> Result<u64, rdmakit_proto::PeerError> {
        self.peer_copy_from(copy, None)
    }

    fn invalidate_local(&mut self, pd: Pd, rkey: u32) -> MemResult {
        self.0.invalidate_window(pd, rkey)
    }
}

/// Copies `len` bytes from application memory at `addr` (an inline send's
/// SGE, which the NIC reads by CPU copy without an lkey).
///
/// # Safety
/// `[addr, addr + len)` must be valid for reads for the duration of the call
/// (the contract of the unsafe `post_send`).
pub(crate) unsafe fn copy_inline(addr: u64, len: usize, out: &mut Vec<u8>) {
    // SAFETY: the caller guarantees the source range is readable; `out` is a
    // distinct Vec, extended by exactly `len` bytes.
    unsafe {
        let src = core::slice::from_raw_parts(addr as usize as *const u8, len);
        out.extend_from_slice(src);
    }
}

/// Copies `out.len()` bytes of inline send data from `addr` into `out`.
///
/// # Safety
/// `[addr, addr + out.len())` must be readable and not overlap `out`.
pub(crate) unsafe fn copy_inline_to(addr: u64, out: &mut [u8]) {
    // SAFETY: the caller guarantees the source range is readable and
    // distinct from `out`.
    unsafe {
        let src = core::slice::from_raw_parts(addr as usize as *const u8, out.len());
        out.copy_from_slice(src);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_before_moving_bytes() {
        let mut buf = vec![0u8; 64];
        let mut t = MrTable::new(crate::cma::SoftTransport::Udp);
        // SAFETY: `buf` outlives the table use below and is not borrowed
        // while registered (only accessed again after deregistration).
        let k = unsafe {
            t.register(
                Pd(1),
                buf.as_mut_ptr(),
                64,
                Access::LOCAL_WRITE | Access::REMOTE_READ,
            )
        };
        let base = t.describe(k).map(|d| d.1).unwrap_or(0);
        let mut v = t.view();
        assert_eq!(
            v.write(Pd(1), Key::Remote(k), base, &[1], Access::REMOTE_WRITE),
            Err(MemError::AccessDenied)
        );
        assert_eq!(
            v.write(Pd(2), Key::Local(k), base, &[1], Access::LOCAL_WRITE),
            Err(MemError::WrongPd)
        );
        assert_eq!(
            v.write(
                Pd(1),
                Key::Local(k),
                base + 63,
                &[1, 2],
                Access::LOCAL_WRITE
            ),
            Err(MemError::OutOfBounds)
        );
        assert_eq!(
            v.write(Pd(1), Key::Local(k ^ 0x80), base, &[1], Access::LOCAL_WRITE),
            Err(MemError::BadKey)
        );
        v.write(Pd(1), Key::Local(k), base + 63, &[7], Access::LOCAL_WRITE)
            .unwrap();
        assert!(t.deregister(k));
        assert!(!t.deregister(k));
        assert_eq!(buf[63], 7);
        assert!(buf[..63].iter().all(|&b| b == 0));
    }
}
