//! Memory access: the only way the engine touches registered memory.
//!
//! Every method validates the key, the protection domain, the bounds and the
//! access rights **before** any byte moves; a failed check moves nothing.
//! [`MemTable`] is a plain in-memory implementation used by tests and the
//! simulator; the software NIC implements [`Memory`] over its own MR table.

use crate::qp::Access;

/// Protection domain handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Pd(pub u32);

/// Which key a request presents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// A local key from a work request's scatter/gather entry.
    Local(u32),
    /// A remote key from a packet (RETH, AtomicETH).
    Remote(u32),
}

/// Why a memory access was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum MemError {
    /// No region has this key, or it was invalidated.
    #[error("no valid memory region for the key")]
    BadKey,
    /// The region belongs to another protection domain.
    #[error("memory region belongs to another protection domain")]
    WrongPd,
    /// Address range outside the region (or overflowing).
    #[error("address range outside the memory region")]
    OutOfBounds,
    /// The region lacks a required access right.
    #[error("memory region lacks the required access right")]
    AccessDenied,
    /// An atomic on an address that is not 8-byte aligned.
    #[error("atomic address is not 8-byte aligned")]
    Misaligned,
}

/// What a [`Memory`] check or byte move returns.
pub type MemResult<T = ()> = Result<T, MemError>;

/// A registered range as an access sees it once the key is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Owning protection domain.
    pub pd: Pd,
    /// Address of byte 0.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Access rights granted.
    pub access: Access,
}

impl Extent {
    /// The offset of `[addr, addr + len)` in this extent, after the checks
    /// every access makes once its key is found, in this order: `pd` owns
    /// it, the range lies inside without overflow, the rights include `need`.
    ///
    /// # Errors
    /// `WrongPd`, `OutOfBounds` or `AccessDenied`: the first failing check.
    pub fn offset(&self, pd: Pd, addr: u64, len: u64, need: Access) -> MemResult<usize> {
        if self.pd != pd {
            return Err(MemError::WrongPd);
        }
        let end = addr.checked_add(len).ok_or(MemError::OutOfBounds)?;
        if addr < self.addr || end > self.addr + self.len {
            return Err(MemError::OutOfBounds);
        }
        if !self.access.contains(need) {
            return Err(MemError::AccessDenied);
        }
        usize::try_from(addr - self.addr).map_err(|_| MemError::OutOfBounds)
    }
}

/// An atomic operation on 8 bytes of remote memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// Store `swap` if the current value equals `compare`.
    CompareSwap {
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// Add `add` (wrapping).
    FetchAdd {
        /// Addend.
        add: u64,
    },
}

/// Registered memory as the engine sees it.
///
/// Implementations must validate before moving bytes: `pd` must own the
/// region, `[addr, addr + len)` must lie inside it without overflow, and the
/// region must grant `need` (local reads need no right; a `Key::Remote`
/// access also requires that the region's remote key is valid).
pub trait Memory {
    /// Checks an access without moving bytes.
    ///
    /// # Errors
    /// The first failing check.
    fn check(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> MemResult;

    /// Copies `out.len()` bytes from `addr` into `out`.
    ///
    /// # Errors
    /// The first failing check; `out` is then untouched.
    fn read(&self, pd: Pd, key: Key, addr: u64, out: &mut [u8], need: Access) -> MemResult;

    /// Copies `data` to `addr`.
    ///
    /// # Errors
    /// The first failing check; memory is then untouched.
    fn write(&mut self, pd: Pd, key: Key, addr: u64, data: &[u8], need: Access) -> MemResult;

    /// Executes an 8-byte atomic at `addr` (must be 8-byte aligned, region
    /// must grant REMOTE_ATOMIC) and returns the original value. The 8 bytes
    /// are a little-endian `u64` in memory (as on x86 and arm64 hosts); the
    /// wire carries them big-endian.
    ///
    /// # Errors
    /// The first failing check; memory is then untouched.
    fn atomic(&mut self, pd: Pd, rkey: u32, addr: u64, op: AtomicOp) -> MemResult<u64>;

    /// Invalidates a remote key (SEND with invalidate).
    ///
    /// # Errors
    /// `BadKey` when no region has the key, `WrongPd` when it belongs to another PD.
    fn invalidate(&mut self, pd: Pd, rkey: u32) -> MemResult;

    /// Binds a memory window for a QP of `pd` (see [`crate::MwBind`]).
    /// Memories without windows refuse every bind.
    ///
    /// # Errors
    /// The first failing check (unknown window or MR, wrong PD, range,
    /// rights, a bound type 2 window, a key of another window).
    fn bind_mw(&mut self, pd: Pd, bind: &crate::MwBind) -> MemResult {
        let _ = (pd, bind);
        Err(MemError::BadKey)
    }

    /// Invalidates a window's key from the local send queue
    /// (`IBV_WR_LOCAL_INV`).
    ///
    /// # Errors
    /// `BadKey` when no type 2 window has the key, `WrongPd` for another PD.
    fn invalidate_local(&mut self, pd: Pd, rkey: u32) -> MemResult {
        let _ = (pd, rkey);
        Err(MemError::BadKey)
    }

    /// The host address of `[addr, addr + len)` under local key `key`,
    /// after the usual checks, for a same-host peer to copy from or to.
    /// `None` (the default) when the range cannot be named that way: the
    /// engine then sends ordinary packets.
    fn host_addr(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> Option<u64> {
        let _ = (pd, key, addr, len, need);
        None
    }

    /// Moves bytes between the local ranges `copy.local` (key, address,
    /// length; each checked for `copy.need` before any byte moves) and the
    /// buffers `copy.peer` of the same-host peer that sent the request, in
    /// one cross-memory copy: [`PeerDir::Pull`] reads the peer into the
    /// local ranges, [`PeerDir::Push`] writes them into the peer. Returns
    /// the bytes moved.
    ///
    /// Which process the peer is comes from the channel the request
    /// arrived on, never from the request: the implementation knows it (the
    /// soft NIC binds each same-host ring to the process the kernel named
    /// when the ring was set up) and declines a request that came another
    /// way.
    ///
    /// # Errors
    /// [`PeerError::Mem`] for a failed check (nothing moved);
    /// [`PeerError::Declined`] when the copy cannot be made (no support, no
    /// authenticated channel, no permission, the peer gone). The default
    /// declines everything.
    fn peer_copy(&mut self, copy: &PeerCopy<'_>) -> Result<u64, PeerError> {
        let _ = copy;
        Err(PeerError::Declined("this memory has no same-host copy"))
    }
}

/// A same-host copy as [`Memory::peer_copy`] takes it.
#[derive(Clone, Copy, Debug)]
pub struct PeerCopy<'a> {
    /// Protection domain of the local ranges.
    pub pd: Pd,
    /// The local ranges: (key, address, length).
    pub local: &'a [(Key, u64, u64)],
    /// The right every local range must grant.
    pub need: Access,
    /// The peer's own buffers (host address, length), as its request names
    /// them: only ever reached in the process the channel identified.
    pub peer: &'a [(u64, u64)],
    /// Which way the bytes move.
    pub dir: PeerDir,
}

/// Direction of a same-host copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerDir {
    /// Peer → local (a WRITE or SEND arriving).
    Pull,
    /// Local → peer (a READ's data).
    Push,
}

/// Why a same-host copy did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    /// A local check failed; nothing moved.
    #[error(transparent)]
    Mem(#[from] MemError),
    /// The copy cannot be made; the requester should send packets.
    #[error("same-host copy declined: {0}")]
    Declined(&'static str),
}

/// One registered region of a [`MemTable`].
#[derive(Clone, Debug)]
pub struct Region {
    /// Owning protection domain.
    pub pd: Pd,
    /// Virtual address of byte 0.
    pub addr: u64,
    /// Access rights.
    pub access: Access,
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
    /// False once the rkey was invalidated.
    pub rkey_valid: bool,
    /// The bytes.
    pub data: Vec<u8>,
}

/// A simple memory-region table: a `Vec` of regions, keys encode the index.
#[derive(Clone, Debug, Default)]
pub struct MemTable {
    regions: Vec<Region>,
}

impl MemTable {
    /// An empty table.
    pub fn new() -> MemTable {
        MemTable::default()
    }

    /// Registers `len` zeroed bytes at virtual address `addr`; returns the
    /// region's (lkey, rkey).
    pub fn register(&mut self, pd: Pd, addr: u64, len: usize, access: Access) -> (u32, u32) {
        let i = u32::try_from(self.regions.len()).unwrap_or(u32::MAX >> 8) & 0x00ff_ffff;
        let lkey = (i << 8) | 0x11;
        let rkey = (i << 8) | 0x22;
        self.regions.push(Region {
            pd,
            addr,
            access,
            lkey,
            rkey,
            rkey_valid: true,
            data: vec![0; len],
        });
        (lkey, rkey)
    }

    /// The region that owns `key` (either key of it), if any.
    pub fn region(&self, key: u32) -> Option<&Region> {
        self.regions.get((key >> 8) as usize)
    }

    /// Mutable access to the region that owns `key`, for test setup.
    pub fn region_mut(&mut self, key: u32) -> Option<&mut Region> {
        self.regions.get_mut((key >> 8) as usize)
    }

    fn locate(
        &self,
        pd: Pd,
        key: Key,
        addr: u64,
        len: u64,
        need: Access,
    ) -> MemResult<(usize, usize)> {
        let (k, remote) = match key {
            Key::Local(k) => (k, false),
            Key::Remote(k) => (k, true),
        };
        let i = (k >> 8) as usize;
        let r = self.regions.get(i).ok_or(MemError::BadKey)?;
        if remote {
            if r.rkey != k || !r.rkey_valid {
                return Err(MemError::BadKey);
            }
        } else if r.lkey != k {
            return Err(MemError::BadKey);
        }
        let extent = Extent {
            pd: r.pd,
            addr: r.addr,
            len: r.data.len() as u64,
            access: r.access,
        };
        Ok((i, extent.offset(pd, addr, len, need)?))
    }
}

impl Memory for MemTable {
    fn check(&self, pd: Pd, key: Key, addr: u64, len: u64, need: Access) -> MemResult {
        self.locate(pd, key, addr, len, need).map(|_| ())
    }

    fn read(&self, pd: Pd, key: Key, addr: u64, out: &mut [u8], need: Access) -> MemResult {
        let (i, off) = self.locate(pd, key, addr, out.len() as u64, need)?;
        out.copy_from_slice(&self.regions[i].data[off..off + out.len()]);
        Ok(())
    }

    fn write(&mut self, pd: Pd, key: Key, addr: u64, data: &[u8], need: Access) -> MemResult {
        let (i, off) = self.locate(pd, key, addr, data.len() as u64, need)?;
        self.regions[i].data[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn atomic(&mut self, pd: Pd, rkey: u32, addr: u64, op: AtomicOp) -> MemResult<u64> {
        let (i, off) = self.locate(pd, Key::Remote(rkey), addr, 8, Access::REMOTE_ATOMIC)?;
        if addr % 8 != 0 {
            return Err(MemError::Misaligned);
        }
        let cell = &mut self.regions[i].data[off..off + 8];
        let mut b = [0u8; 8];
        b.copy_from_slice(cell);
        let orig = u64::from_le_bytes(b);
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } => {
                if orig == compare {
                    swap
                } else {
                    orig
                }
            }
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
        };
        cell.copy_from_slice(&new.to_le_bytes());
        Ok(orig)
    }

    fn invalidate(&mut self, pd: Pd, rkey: u32) -> MemResult {
        let r = self
            .regions
            .get_mut((rkey >> 8) as usize)
            .filter(|r| r.rkey == rkey && r.rkey_valid)
            .ok_or(MemError::BadKey)?;
        if r.pd != pd {
            return Err(MemError::WrongPd);
        }
        r.rkey_valid = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_before_moving_bytes() {
        let mut m = MemTable::new();
        let (lk, rk) = m.register(Pd(1), 0x1000, 64, Access::LOCAL_WRITE | Access::REMOTE_READ);
        assert_eq!(
            m.write(Pd(1), Key::Remote(rk), 0x1000, &[1], Access::REMOTE_WRITE),
            Err(MemError::AccessDenied)
        );
        assert_eq!(
            m.write(Pd(2), Key::Local(lk), 0x1000, &[1], Access::LOCAL_WRITE),
            Err(MemError::WrongPd)
        );
        assert_eq!(
            m.write(Pd(1), Key::Local(lk), 0x103f, &[1, 2], Access::LOCAL_WRITE),
            Err(MemError::OutOfBounds)
        );
        assert_eq!(
            m.write(Pd(1), Key::Local(rk), 0x1000, &[1], Access::LOCAL_WRITE),
            Err(MemError::BadKey)
        );
        assert_eq!(
            m.check(Pd(1), Key::Remote(rk), u64::MAX, 2, Access::REMOTE_READ),
            Err(MemError::OutOfBounds)
        );
        assert!(m.region(lk).is_some_and(|r| r.data.iter().all(|&b| b == 0)));
        m.write(Pd(1), Key::Local(lk), 0x103f, &[7], Access::LOCAL_WRITE)
            .unwrap();
        let mut o = [0u8; 1];
        m.read(Pd(1), Key::Remote(rk), 0x103f, &mut o, Access::REMOTE_READ)
            .unwrap();
        assert_eq!(o, [7]);
    }
}
