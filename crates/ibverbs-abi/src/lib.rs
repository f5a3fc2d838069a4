//! The libibverbs ABI of rdma-core 44 (Debian 12) as `#[repr(C)]` Rust types.
//!
//! Two users need the same layouts, seen from opposite sides:
//! - `rdmakit-verbs`' rdma-core provider *calls* a libibverbs.so.1 loaded with
//!   dlopen, and reaches the inline data-path functions (`ibv_post_send`,
//!   `ibv_poll_cq`, ...) through the context's ops table, as C programs do;
//! - `rdmakit-ibverbs-shim` *is* a libibverbs.so.1: it hands these structs to
//!   unmodified C programs, which read fields and call through the tables at
//!   fixed offsets.
//!
//! The types are written from the header's documented layout (no header is
//! needed to build). Every size below is asserted at compile time against the
//! figures in `../shared/reference/libibverbs-abi.md`; `tests/layout.rs`
//! compiles a C program against the installed `<infiniband/verbs.h>` and
//! compares every field offset of every type listed in [`layout::FIELDS`].
//!
//! Names follow C (`ibv_context`, `qp_num`), as in the `libc` crate, so that a
//! reader can hold this file next to verbs.h. Anonymous C unions get a name
//! (documented where they appear). Enums are plain integer constants in
//! [`consts`]: a C program may hand us any value, and a Rust enum holding an
//! unlisted value would be undefined behaviour.

#![allow(non_camel_case_types)]
#![warn(missing_docs)]

pub mod consts;
pub mod convert;
pub mod layout;
pub mod rdmakit;
mod types;

pub use types::*;

/// `verbs_get_ctx()` accepts a context only when `abi_compat` holds this.
pub const ABI_IS_EXTENDED: *mut libc::c_void = usize::MAX as *mut libc::c_void;

/// `verbs_context.sz` for rdma-core 44: the whole struct, so every op the
/// inline helpers look for (`sz >= sizeof(verbs_context) - offsetof(op)`) is
/// "available".
pub const VERBS_CONTEXT_SZ: usize = core::mem::size_of::<verbs_context>();

/// Recovers the `verbs_context` that embeds `ctx` as its last field
/// (`verbs_get_ctx` without the `abi_compat` check).
///
/// # Safety
/// `ctx` must point at the `context` field of a live `verbs_context`.
pub unsafe fn verbs_context_of(ctx: *mut ibv_context) -> *mut verbs_context {
    // SAFETY: per the contract `ctx` sits at offset `CONTEXT_OFFSET` inside a
    // verbs_context allocation, so stepping back stays inside it.
    unsafe {
        ctx.cast::<u8>()
            .sub(core::mem::offset_of!(verbs_context, context))
            .cast()
    }
}
