//! Memory regions: registrations over application memory ([`Mr`]), the
//! remote view peers exchange ([`RemoteBuf`]) and owned buffers ([`MrBuf`]).

use super::*;

/// A registered memory region over application memory.
#[derive(Debug)]
pub struct Mr {
    pub(super) pd: Arc<Pd>,
    pub(super) key: u32,
    pub(super) rkey: u32,
    pub(super) addr: u64,
    pub(super) len: usize,
    /// False once `ibv_dereg_mr` was called (whatever it answered).
    pub(super) registered: bool,
}

impl Mr {
    /// `ibv_dereg_mr`, reporting its error (dropping an `Mr` deregisters it
    /// too, but cannot say whether that worked).
    ///
    /// # Errors
    /// The provider's error: the registration may then still be live, and
    /// the memory behind it must stay valid (the caller still owns it).
    pub fn close(mut self) -> Result<()> {
        self.dereg()
    }

    /// Deregisters once; later calls do nothing.
    fn dereg(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.registered, false) {
            return Ok(());
        }
        self.pd.ctx.ops.dereg_mr(self.key)
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        let _ = self.dereg();
    }
}

/// A remote buffer: address and rkey (what peers exchange).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteBuf {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
}

impl Mr {
    /// Local key.
    pub fn lkey(&self) -> u32 {
        self.key
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// Virtual address of byte 0.
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for a zero-length region (never: registration refuses them).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The PD.
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }
    /// An SGE for `range` of this region.
    ///
    /// # Errors
    /// `EINVAL` (application layer) when `range` is outside the region.
    pub fn sge(&self, range: Range<usize>) -> Result<Sge> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::application(
                "ibv_post_send",
                Errno::EINVAL,
                format!("range {range:?} outside the {}-byte MR", self.len),
            ));
        }
        Ok(Sge {
            addr: self.addr + range.start as u64,
            length: u32::try_from(range.end - range.start).unwrap_or(u32::MAX),
            lkey: self.key,
        })
    }
    /// The remote view of byte `offset`.
    pub fn remote(&self, offset: usize) -> RemoteBuf {
        RemoteBuf {
            addr: self.addr + offset as u64,
            rkey: self.rkey,
        }
    }
}

/// An owned, registered buffer. Its bytes are reached by copies only
/// ([`MrBuf::read`], [`MrBuf::write`]), never by references, so the NIC may
/// write them at any time without undefined behaviour in safe code.
///
/// Its memory is freed only after the MR is deregistered. When
/// deregistration fails the device may still address the buffer, so the
/// memory is leaked rather than freed; [`MrBuf::close`] reports that error.
#[derive(Debug)]
pub struct MrBuf {
    pub(super) mr: Mr,
    pub(super) mem: OwnedMem,
}

impl Drop for MrBuf {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

impl MrBuf {
    /// Deregisters the buffer and frees its memory, reporting the error of
    /// `ibv_dereg_mr` (dropping an `MrBuf` does the same silently).
    ///
    /// # Errors
    /// The provider's error; the buffer's memory is then leaked, never
    /// freed, because the device may still DMA into it.
    pub fn close(mut self) -> Result<()> {
        self.release()
    }

    /// Deregisters once; on failure marks the memory leaked, so dropping
    /// `mem` afterwards keeps it.
    pub(super) fn release(&mut self) -> Result<()> {
        self.mr
            .dereg()
            .inspect_err(|_| self.mem.leak())
            .map_err(|mut e| {
                e.detail = format!(
                    "{}; the {} bytes of the buffer stay allocated (leaked), since the device may \
                 still address them",
                    e.detail,
                    self.mem.len()
                );
                e
            })
    }

    /// The memory region.
    pub fn mr(&self) -> &Mr {
        &self.mr
    }
    /// Length.
    pub fn len(&self) -> usize {
        self.mem.len()
    }
    /// Always false (zero-length buffers are refused).
    pub fn is_empty(&self) -> bool {
        self.mem.len() == 0
    }
    fn check(&self, off: usize, len: usize) -> Result<()> {
        match off.checked_add(len) {
            Some(end) if end <= self.mem.len() => Ok(()),
            _ => Err(Error::application(
                "MrBuf",
                Errno::EINVAL,
                format!(
                    "{len} bytes at {off} outside the {}-byte buffer",
                    self.mem.len()
                ),
            )),
        }
    }
    /// Copies bytes out of the buffer.
    ///
    /// # Errors
    /// `EINVAL` (application layer) when the range is outside the buffer.
    pub fn read(&self, off: usize, out: &mut [u8]) -> Result<()> {
        self.check(off, out.len())?;
        self.mem.read(off, out);
        Ok(())
    }
    /// Copies bytes into the buffer.
    ///
    /// # Errors
    /// `EINVAL` (application layer) when the range is outside the buffer.
    pub fn write(&self, off: usize, data: &[u8]) -> Result<()> {
        self.check(off, data.len())?;
        self.mem.write(off, data);
        Ok(())
    }
    /// A copy of `range`.
    ///
    /// # Errors
    /// `EINVAL` (application layer) when the range is outside the buffer.
    pub fn to_vec(&self, range: Range<usize>) -> Result<Vec<u8>> {
        let mut v = vec![0; range.end.saturating_sub(range.start)];
        self.read(range.start, &mut v)?;
        Ok(v)
    }
    /// The little-endian u64 at `off` (atomics' results).
    ///
    /// # Errors
    /// `EINVAL` (application layer) when the range is outside the buffer.
    pub fn read_u64(&self, off: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(off, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    /// An SGE for `range`.
    ///
    /// # Errors
    /// `EINVAL` (application layer) when the range is outside the buffer.
    pub fn sge(&self, range: Range<usize>) -> Result<Sge> {
        self.mr.sge(range)
    }
    /// The remote view of byte `offset`.
    pub fn remote(&self, offset: usize) -> RemoteBuf {
        self.mr.remote(offset)
    }
}
