//! Protection domains: the parent of MRs, QPs, SRQs and AHs.

use super::*;

/// A protection domain.
#[derive(Debug)]
pub struct Pd {
    pub(super) ctx: Arc<Context>,
    pub(super) handle: u32,
}

impl Drop for Pd {
    fn drop(&mut self) {
        let _ = self.ctx.ops.dealloc_pd(self.handle);
    }
}

impl Pd {
    /// The device.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The provider handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// `ibv_reg_mr` of application memory.
    ///
    /// # Safety
    /// `[ptr, ptr + len)` must stay valid for reads and writes until the
    /// returned [`Mr`] is dropped, and while it is registered the
    /// application must not hold Rust references (`&[u8]`, `&mut [u8]`) to
    /// bytes the NIC may write (local receives/READs, remote WRITEs and
    /// atomics): synchronise through completions, or use [`Pd::alloc_buf`].
    ///
    /// # Errors
    /// `EINVAL` for bad access flags, a zero length or when `max_mr` is reached.
    pub unsafe fn reg_mr(self: &Arc<Self>, ptr: *mut u8, len: usize, access: Access) -> Result<Mr> {
        // SAFETY: forwarded from this function's contract.
        let key = unsafe { self.ctx.ops.reg_mr(self.handle, ptr, len, access) }?;
        Ok(Mr {
            pd: Arc::clone(self),
            key,
            rkey: self.ctx.ops.mr_rkey(key).unwrap_or(key),
            addr: ptr as u64,
            len,
            registered: true,
        })
    }

    /// Allocates `len` zeroed, page-aligned bytes and registers them: a
    /// safe, owned registered buffer.
    ///
    /// # Errors
    /// `ENOMEM` (application layer) when the allocation fails; `ibv_reg_mr`'s errors.
    pub fn alloc_buf(self: &Arc<Self>, len: usize, access: Access) -> Result<MrBuf> {
        let mem = OwnedMem::new(len).ok_or_else(|| {
            Error::application(
                "ibv_reg_mr",
                Errno::ENOMEM,
                format!("cannot allocate {len} bytes"),
            )
        })?;
        // SAFETY: `mem` is owned by the returned MrBuf, which frees it only
        // after the MR was deregistered (and never when that failed);
        // OwnedMem never creates references to its bytes (raw copies only).
        let mr = unsafe { self.reg_mr(mem.ptr(), mem.len(), access) }?;
        Ok(MrBuf { mr, mem })
    }

    /// `ibv_create_ah` to a RoCEv2 GID (a [`Gid`] alone: traffic class 0),
    /// or to an [`Av`] with the traffic class its sends carry (the DSCP;
    /// the ECN bits are the NIC's).
    ///
    /// # Errors
    /// `EINVAL` for a GID that is not IPv4-mapped or when `max_ah` is reached.
    pub fn create_ah(self: &Arc<Self>, av: impl Into<Av>) -> Result<Arc<Ah>> {
        let av = av.into();
        let handle = self.ctx.ops.create_ah(self.handle, av)?;
        Ok(Arc::new(Ah {
            pd: Arc::clone(self),
            handle,
            av,
        }))
    }

    /// `ibv_create_srq`.
    ///
    /// # Errors
    /// `EINVAL` for limits outside the device's.
    pub fn create_srq(self: &Arc<Self>, max_wr: u32, max_sge: u32) -> Result<Arc<Srq>> {
        let handle = self.ctx.ops.create_srq(self.handle, max_wr, max_sge, 0)?;
        Ok(Arc::new(Srq {
            pd: Arc::clone(self),
            handle,
        }))
    }

    /// A QP builder (`ibv_create_qp`) with both queues on `cq`.
    pub fn qp_builder(self: &Arc<Self>, qp_type: QpType, cq: &Arc<Cq>) -> QpBuilder {
        QpBuilder {
            pd: Arc::clone(self),
            qp_type,
            send_cq: Arc::clone(cq),
            recv_cq: Arc::clone(cq),
            srq: None,
            max_send_wr: 128,
            max_recv_wr: 128,
            max_send_sge: 4,
            max_recv_sge: 4,
            max_inline_data: 64,
            sq_sig_all: false,
        }
    }
}
