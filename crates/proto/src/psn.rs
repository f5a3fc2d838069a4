//! 24-bit packet sequence numbers: wire's [`Psn`], the one PSN arithmetic of
//! the stack (the bytes on the wire and the engine's windows agree by
//! construction).

pub use rdmakit_wire::psn::{Psn, MASK as PSN_MASK};
