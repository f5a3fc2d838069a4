//! Shared receive queues.

use super::*;

/// A shared receive queue.
#[derive(Debug)]
pub struct Srq {
    pub(super) pd: Arc<Pd>,
    pub(super) handle: u32,
}

impl Drop for Srq {
    fn drop(&mut self) {
        let _ = self.pd.ctx.ops.destroy_srq(self.handle);
    }
}

impl Srq {
    /// `ibv_post_srq_recv`.
    ///
    /// # Errors
    /// `EINVAL`, `ENOMEM` (full), with `bad_wr`.
    pub fn post_recv(&self, wrs: &[RecvWr]) -> Result<()> {
        self.pd.ctx.ops.post_srq_recv(self.handle, wrs)
    }

    /// `ibv_modify_srq(IBV_SRQ_LIMIT)`: arms the limit event.
    ///
    /// # Errors
    /// `EINVAL` for a limit above the SRQ's depth.
    pub fn arm_limit(&self, limit: u32) -> Result<()> {
        self.pd.ctx.ops.modify_srq_limit(self.handle, limit)
    }

    /// The provider handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
}
