//! A drop-in `libibverbs.so.1` over rdmakit's software RoCEv2 NIC.
//!
//! Unmodified programs built against rdma-core (ibv_devinfo, ibv_rc_pingpong,
//! perftest, users' own code) load this library instead of rdma-core's when
//! it comes first on `LD_LIBRARY_PATH`, and run on a [`rdmakit_soft::Device`]:
//! a userspace NIC speaking RoCEv2 over UDP port 4791, with no kernel RDMA.
//!
//! The library is a thin adapter: every verb translates the C structs of
//! rdma-core 44 ([`rdmakit_ibverbs_abi`]) into a call on the soft device and
//! back. What C programs reach without calling a function — the data-path
//! ops table in `ibv_context`, the extended ops of `verbs_context`, the
//! `ibv_wr_*` table of `ibv_qp_ex`, the polling table of `ibv_cq_ex` — is
//! filled in when the object is created.
//!
//! Exported symbols carry the version nodes rdma-core 44 uses (build.rs
//! writes the node list; [`exports`], [`compat`] and [`providers`] bind each
//! symbol with `.symver`), and the set equals the public exports of Debian's
//! libibverbs.so.1, libmlx5.so.1 and libefa.so.1 (tests/symbols.rs), so
//! `libmlx5.so.1` and `libefa.so.1` can be links to this library (`rdmakit
//! shim install`); their direct verbs answer "not this vendor's device".
//!
//! Conventions kept from libibverbs: functions returning a pointer set
//! `errno` and return NULL on failure; functions returning `int` return 0 or
//! a positive errno (the data-path ops too). No panic crosses the C
//! boundary: every export runs inside [`guard`], which turns one into `EIO`.
//! Objects are never freed while the program may still hold their pointer
//! in another thread: a destroyed object is marked dead (every later call
//! on it fails with `EINVAL`, as a double `ibv_dereg_mr` should) and its
//! memory is released with its context.

#![deny(unsafe_op_in_unsafe_fn)]
#![allow(clippy::missing_safety_doc)]

/// An assembly thunk `$local` that jumps to the Rust function `$target`,
/// bound with `.symver` to `$versioned` (`name@NODE`). The thunk is not a
/// Rust item, so rustc's version script keeps its own name local and only
/// the versioned alias is exported.
macro_rules! thunk {
    ($local:expr, $versioned:expr, $target:path) => {
        #[cfg(target_arch = "x86_64")]
        std::arch::global_asm!(
            concat!(".globl ", $local),
            concat!(".type ", $local, ", @function"),
            concat!($local, ":"),
            "jmp {f}",
            concat!(".symver ", $local, ", ", $versioned),
            f = sym $target,
        );
        #[cfg(target_arch = "aarch64")]
        std::arch::global_asm!(
            concat!(".globl ", $local),
            concat!(".type ", $local, ", %function"),
            concat!($local, ":"),
            "b {f}",
            concat!(".symver ", $local, ", ", $versioned),
            f = sym $target,
        );
    };
}

mod compat;
mod cq;
mod device;
mod exports;
mod gid;
mod guard;
mod mem;
mod mw;
mod post;
mod providers;
mod qp;
mod rdmakit;
mod stubs;
mod wr;
