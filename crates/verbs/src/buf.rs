//! Owned, page-aligned memory for registered buffers. The only module of
//! this crate with `unsafe`.

use std::alloc::Layout;
use std::ptr::NonNull;

/// A zeroed, page-aligned heap allocation accessed only by copies (never
/// through Rust references), so the NIC may write it concurrently.
#[derive(Debug)]
pub(crate) struct OwnedMem {
    ptr: NonNull<u8>,
    layout: Layout,
    /// Never freed: a device may still address it (see [`OwnedMem::leak`]).
    leaked: bool,
}

// SAFETY: OwnedMem is a uniquely owned allocation; all access is by raw
// copies, which are as thread-safe as the NIC's own accesses.
unsafe impl Send for OwnedMem {}
// SAFETY: shared access only performs raw copies (see above).
unsafe impl Sync for OwnedMem {}

impl OwnedMem {
    /// `len` zeroed bytes aligned to 4096; None if `len` is 0 or too large.
    pub(crate) fn new(len: usize) -> Option<OwnedMem> {
        let layout = Layout::from_size_align(len, 4096).ok()?;
        if len == 0 {
            return None;
        }
        // SAFETY: the layout has a non-zero size (checked above).
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        NonNull::new(p).map(|ptr| OwnedMem {
            ptr,
            layout,
            leaked: false,
        })
    }

    /// Keeps the allocation forever: called when deregistration failed, so
    /// the device may still DMA into these bytes and freeing them would
    /// hand memory it writes to the next allocation.
    pub(crate) fn leak(&mut self) {
        self.leaked = true;
    }

    /// Whether [`OwnedMem::leak`] was called.
    #[cfg(test)]
    pub(crate) fn is_leaked(&self) -> bool {
        self.leaked
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }

    /// Copies `out.len()` bytes from `off`. The caller checked the range.
    pub(crate) fn read(&self, off: usize, out: &mut [u8]) {
        debug_assert!(off + out.len() <= self.len());
        // SAFETY: the caller checked `off + out.len() <= len`; the allocation
        // is live while `self` is; `out` is a distinct buffer.
        unsafe {
            core::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), out.as_mut_ptr(), out.len())
        }
    }

    /// Copies `data` to `off`. The caller checked the range.
    pub(crate) fn write(&self, off: usize, data: &[u8]) {
        debug_assert!(off + data.len() <= self.len());
        // SAFETY: as in `read`; writes go through the raw pointer only, and no
        // Rust reference to these bytes exists.
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len())
        }
    }
}

impl Drop for OwnedMem {
    fn drop(&mut self) {
        if self.leaked {
            return;
        }
        // SAFETY: allocated in `new` with exactly this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}
