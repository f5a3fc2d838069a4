//! Address handles (UD destinations).

use super::*;

/// An address handle (UD destination).
#[derive(Debug)]
pub struct Ah {
    pub(super) pd: Arc<Pd>,
    pub(super) handle: u32,
    pub(super) dgid: Gid,
}

impl Drop for Ah {
    fn drop(&mut self) {
        let _ = self.pd.ctx.ops.destroy_ah(self.handle);
    }
}

impl Ah {
    /// Destination GID.
    pub fn dgid(&self) -> Gid {
        self.dgid
    }
    /// The provider handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
}
