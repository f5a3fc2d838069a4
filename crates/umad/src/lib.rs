//! MAD I/O: management datagrams between rdmakit and an InfiniBand port.
//!
//! This crate owns the umad side of `rdmakit fabric`: it loads rdma-core's
//! libibumad.so.3 at run time ([`Library`]), finds the CA and port
//! ([`Port::open`]: the first Active port unless both are named), registers
//! agents per management class ([`Port::agent`]: 0x01 LID-routed SMI, 0x81
//! directed-route SMI, 0x04 PMA, 0x03 SA, ...), and runs request/reply
//! transactions ([`Port::transact`]) with a bounded window, fresh TIDs,
//! timeouts, retries and validated replies ([`transact`] states the rules).
//! It knows nothing of what the MADs mean: the attribute layouts live in
//! `rdmakit-wire`, discovery in `rdmakit-fabric`.
//!
//! Why libibumad by `dlopen`: the same binary starts on a host without
//! rdma-core and says "library layer missing", and it works unchanged under
//! ibsim's umad2sim preload, which intercepts libibumad's `open`, `read`,
//! `write`, `ioctl`, `poll` and `scandir` but not the `open64`/`openat` Rust's
//! std uses (and whose `read` returns -11 on an empty queue, and whose `poll`
//! watches only the first fake fd: one port per poll, as here).
//!
//! Promises: every reply is bounded in size (256 bytes), time (the
//! [`Policy`]) and count (the window, [`MAX_REQUESTS`] per call); a bad reply
//! is counted and dropped, never a panic.
//!
//! ```no_run
//! use rdmakit_umad::{Dest, Policy, Port, Request};
//! let mut port = Port::open(None, None)?;
//! let mut mad = [0u8; 256];
//! mad[..4].copy_from_slice(&[1, 0x01, 1, 0x01]); // SMP Get
//! mad[16..18].copy_from_slice(&0x0011u16.to_be_bytes()); // NodeInfo
//! let reply = port.transact1(&Request::new(Dest::smi(2), mad), &Policy::default());
//! # Ok::<(), rdmakit_umad::Error>(())
//! ```

#![warn(missing_docs)]

mod error;
mod library;
mod port;
pub mod transact;

pub use error::{status_text, Error, Layer, MadError};
pub use library::{Library, DEFAULT_LIBRARY, LIBRARY_ENV};
pub use port::{Agent, Port, PortInfo, MAX_AGENTS};
pub use transact::{
    Dest, Policy, Request, Stats, CLASS_PMA, CLASS_SA, CLASS_SMI, CLASS_SMI_DIRECT, GSI_QKEY,
    MAD_LEN, MAX_REQUESTS, MAX_WINDOW, PERMISSIVE_LID,
};
