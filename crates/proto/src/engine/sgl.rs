//! Scatter/gather lists: walking one, gathering a request's payload from
//! it, scattering received data into it (every byte through [`Memory`],
//! which checks key, PD, bounds and rights), and the emptied lists a QP
//! keeps for the driver's next work request.

use std::ops::Range;

use crate::mem::{Key, MemError, Memory, Pd};
use crate::qp::Access;
use crate::wr::Sge;

/// Emptied scatter/gather lists kept per direction for reuse.
const SPARE_SGLS: usize = 64;

/// The emptied scatter/gather lists of completed WRs, handed back to the
/// driver so that a post needs no allocation.
#[derive(Debug, Default)]
pub(super) struct Spares {
    lists: Vec<Vec<Sge>>,
}

impl Spares {
    /// Keeps `sgl` (emptied) for reuse; a few small lists, not every list.
    pub(super) fn keep(&mut self, mut sgl: Vec<Sge>) {
        if self.lists.len() < SPARE_SGLS && sgl.capacity() > 0 && sgl.capacity() <= 16 {
            sgl.clear();
            self.lists.push(sgl);
        }
    }

    /// A kept list, if any.
    pub(super) fn take(&mut self) -> Option<Vec<Sge>> {
        self.lists.pop()
    }
}

/// Bytes a scatter/gather list covers.
pub(super) fn sgl_len(sgl: &[Sge]) -> u64 {
    sgl.iter().map(|s| u64::from(s.length)).sum()
}

/// Walks `len` bytes of `sgl` starting `off` bytes in: `piece(key, addr,
/// range)` for each SGE's share, `range` being where those bytes sit in the
/// walk. Returns how many of the `len` bytes the list does not cover.
fn walk_sgl(
    sgl: &[Sge],
    mut off: u64,
    len: usize,
    mut piece: impl FnMut(Key, u64, Range<usize>) -> Result<(), MemError>,
) -> Result<usize, MemError> {
    let mut done = 0usize;
    for s in sgl {
        if done == len {
            break;
        }
        let l = u64::from(s.length);
        if off >= l {
            off -= l;
            continue;
        }
        let n = usize::try_from(l - off)
            .unwrap_or(usize::MAX)
            .min(len - done);
        let addr = s.addr.checked_add(off).ok_or(MemError::OutOfBounds)?;
        piece(Key::Local(s.lkey), addr, done..done + n)?;
        done += n;
        off = 0;
    }
    Ok(len - done)
}

/// Reads `out.len()` bytes at offset `off` of `sgl` (local keys, any
/// rights) into `out`.
pub(super) fn gather<M: Memory + ?Sized>(
    mem: &M,
    pd: Pd,
    sgl: &[Sge],
    off: u64,
    out: &mut [u8],
) -> Result<(), MemError> {
    let left = walk_sgl(sgl, off, out.len(), |key, addr, at| {
        mem.read(pd, key, addr, &mut out[at], Access::empty())
    })?;
    if left > 0 {
        return Err(MemError::OutOfBounds);
    }
    Ok(())
}

/// Writes `data` at offset `off` of `sgl` (local keys, LOCAL_WRITE); a
/// failure moves no byte.
pub(super) fn scatter<M: Memory + ?Sized>(
    mem: &mut M,
    pd: Pd,
    sgl: &[Sge],
    off: u64,
    data: &[u8],
) -> Result<(), MemError> {
    // The data lands in one SGE (a message into a one-SGE receive, every
    // packet of one): the write checks the range before it moves a byte,
    // so the separate validation pass (a second key lookup) is not needed.
    if let Some((key, addr)) = one_piece(sgl, off, data.len()) {
        return mem.write(pd, key, addr, data, Access::LOCAL_WRITE);
    }
    // Validate the whole range first so that a failure moves no byte.
    let left = walk_sgl(sgl, off, data.len(), |key, addr, at| {
        mem.check(pd, key, addr, at.len() as u64, Access::LOCAL_WRITE)
    })?;
    if left > 0 {
        return Err(MemError::OutOfBounds);
    }
    walk_sgl(sgl, off, data.len(), |key, addr, at| {
        mem.write(pd, key, addr, &data[at], Access::LOCAL_WRITE)
    })?;
    Ok(())
}

/// Where `len` (> 0) bytes at offset `off` of `sgl` go when they all fall
/// in one SGE: its key and the address; None otherwise (several SGEs, not
/// enough room, an address that overflows).
fn one_piece(sgl: &[Sge], mut off: u64, len: usize) -> Option<(Key, u64)> {
    if len == 0 {
        return None;
    }
    for s in sgl {
        let l = u64::from(s.length);
        if off >= l {
            off -= l;
            continue;
        }
        let fits = u64::try_from(len).is_ok_and(|n| n <= l - off);
        return fits.then(|| s.addr.checked_add(off).map(|a| (Key::Local(s.lkey), a)))?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_in_one_sge_is_written_in_one_piece() {
        let sge = |addr, length, lkey| Sge { addr, length, lkey };
        let sgl = [sge(0x1000, 8, 1), sge(0x2000, 16, 2), sge(0x3000, 0, 3)];
        assert_eq!(one_piece(&sgl, 0, 8), Some((Key::Local(1), 0x1000)));
        assert_eq!(one_piece(&sgl, 2, 6), Some((Key::Local(1), 0x1002)));
        assert_eq!(one_piece(&sgl, 8, 16), Some((Key::Local(2), 0x2000)));
        assert_eq!(one_piece(&sgl, 12, 4), Some((Key::Local(2), 0x2004)));
        // Across two SGEs, past the end, nothing to write, overflow: the
        // two-pass path decides.
        assert_eq!(one_piece(&sgl, 4, 8), None);
        assert_eq!(one_piece(&sgl, 24, 1), None);
        assert_eq!(one_piece(&sgl, 0, 0), None);
        assert_eq!(one_piece(&[sge(u64::MAX, 8, 1)], 1, 1), None);
    }
}
