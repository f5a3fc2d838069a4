//! Address handles (UD destinations).

use super::*;

/// An address handle (UD destination).
#[derive(Debug)]
pub struct Ah {
    pub(super) pd: Arc<Pd>,
    pub(super) handle: u32,
    pub(super) av: Av,
}

impl Drop for Ah {
    fn drop(&mut self) {
        let _ = self.pd.ctx.ops.destroy_ah(self.handle);
    }
}

impl Ah {
    /// Destination GID.
    pub fn dgid(&self) -> Gid {
        self.av.dgid
    }
    /// Traffic class of the sends through it (its DSCP goes on the wire).
    pub fn traffic_class(&self) -> u8 {
        self.av.traffic_class
    }
    /// The provider handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
}
