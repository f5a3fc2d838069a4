//! libibverbs.so.1 loaded at run time: the exported entry points as typed
//! function pointers, and errno handling around them.
//!
//! Only the entry points every libibverbs since rdma-core 13 exports are
//! required (device list and open/close); every other symbol is optional, so
//! a partial implementation (an older library, the rdmakit shim) loads and a
//! missing entry point fails only the verb that needs it, with `ENOSYS` at
//! the library layer naming the symbol.

use std::ffi::c_int;
use std::sync::Arc;

use libc::{c_void, size_t};
use rdmakit_ibverbs_abi::*;

use crate::error::{Errno, Error, Layer, Result};

/// The library name looked for when no path is given.
pub const DEFAULT_LIBRARY: &str = "libibverbs.so.1";

/// Environment variable naming the libibverbs to load (a path or a name).
pub const LIBRARY_ENV: &str = "RDMAKIT_IBVERBS_LIB";

type DevList = unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device;
type FreeDevList = unsafe extern "C" fn(*mut *mut ibv_device);
type DevName = unsafe extern "C" fn(*mut ibv_device) -> *const libc::c_char;
type OpenDev = unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context;
type CloseDev = unsafe extern "C" fn(*mut ibv_context) -> c_int;
type QueryDevice = unsafe extern "C" fn(*mut ibv_context, *mut ibv_device_attr) -> c_int;
type QueryPort = unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr) -> c_int;
type QueryGid = unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut ibv_gid) -> c_int;
type QueryGidEx =
    unsafe extern "C" fn(*mut ibv_context, u32, u32, *mut ibv_gid_entry, u32, size_t) -> c_int;
type QueryGidTable =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_gid_entry, size_t, u32, size_t) -> isize;
type QueryPkey = unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut u16) -> c_int;
type AllocPd = unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd;
type DeallocPd = unsafe extern "C" fn(*mut ibv_pd) -> c_int;
type RegMr = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, size_t, c_int) -> *mut ibv_mr;
type DeregMr = unsafe extern "C" fn(*mut ibv_mr) -> c_int;
type CreateCompChannel = unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_comp_channel;
type DestroyCompChannel = unsafe extern "C" fn(*mut ibv_comp_channel) -> c_int;
type GetCqEvent =
    unsafe extern "C" fn(*mut ibv_comp_channel, *mut *mut ibv_cq, *mut *mut c_void) -> c_int;
type AckCqEvents = unsafe extern "C" fn(*mut ibv_cq, u32);
type CreateCq = unsafe extern "C" fn(
    *mut ibv_context,
    c_int,
    *mut c_void,
    *mut ibv_comp_channel,
    c_int,
) -> *mut ibv_cq;
type DestroyCq = unsafe extern "C" fn(*mut ibv_cq) -> c_int;
type CreateQp = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp;
type ModifyQp = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int;
type QueryQp =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int, *mut ibv_qp_init_attr) -> c_int;
type DestroyQp = unsafe extern "C" fn(*mut ibv_qp) -> c_int;
type CreateSrq = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq;
type ModifySrq = unsafe extern "C" fn(*mut ibv_srq, *mut ibv_srq_attr, c_int) -> c_int;
type DestroySrq = unsafe extern "C" fn(*mut ibv_srq) -> c_int;
type CreateAh = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_ah_attr) -> *mut ibv_ah;
type DestroyAh = unsafe extern "C" fn(*mut ibv_ah) -> c_int;
type GetAsyncEvent = unsafe extern "C" fn(*mut ibv_context, *mut ibv_async_event) -> c_int;
type AckAsyncEvent = unsafe extern "C" fn(*mut ibv_async_event);

/// The exported entry points this provider calls. `None`: not exported by
/// the loaded library.
#[allow(missing_docs)]
pub(crate) struct Fns {
    pub get_device_list: DevList,
    pub free_device_list: FreeDevList,
    pub get_device_name: DevName,
    pub open_device: OpenDev,
    pub close_device: CloseDev,
    pub query_device: Option<QueryDevice>,
    pub query_port: Option<QueryPort>,
    pub query_gid: Option<QueryGid>,
    pub query_gid_ex: Option<QueryGidEx>,
    pub query_gid_table: Option<QueryGidTable>,
    pub query_pkey: Option<QueryPkey>,
    pub alloc_pd: Option<AllocPd>,
    pub dealloc_pd: Option<DeallocPd>,
    pub reg_mr: Option<RegMr>,
    pub dereg_mr: Option<DeregMr>,
    pub create_comp_channel: Option<CreateCompChannel>,
    pub destroy_comp_channel: Option<DestroyCompChannel>,
    pub get_cq_event: Option<GetCqEvent>,
    pub ack_cq_events: Option<AckCqEvents>,
    pub create_cq: Option<CreateCq>,
    pub destroy_cq: Option<DestroyCq>,
    pub create_qp: Option<CreateQp>,
    pub modify_qp: Option<ModifyQp>,
    pub query_qp: Option<QueryQp>,
    pub destroy_qp: Option<DestroyQp>,
    pub create_srq: Option<CreateSrq>,
    pub modify_srq: Option<ModifySrq>,
    pub destroy_srq: Option<DestroySrq>,
    pub create_ah: Option<CreateAh>,
    pub destroy_ah: Option<DestroyAh>,
    pub get_async_event: Option<GetAsyncEvent>,
    pub ack_async_event: Option<AckAsyncEvent>,
}

/// A loaded libibverbs and its entry points. Shared (`Arc`) by the provider
/// and every device it opened, so the code stays mapped while any context
/// is open.
pub struct Library {
    path: String,
    pub(crate) f: Fns,
    // Declared last: unloaded after nothing can call `f` any more.
    _lib: libloading::Library,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library").field("path", &self.path).finish()
    }
}

/// The error of a failed `dlopen` / missing required symbol: library layer.
fn load_error(path: &str, errno: Errno, what: String) -> Error {
    Error {
        verb: "dlopen",
        errno,
        layer: Layer::Library,
        detail: format!(
            "cannot use libibverbs: looked for {path:?} ({}): {what}; install rdma-core's \
             libibverbs1 (Debian/Ubuntu) / libibverbs (RHEL, SUSE), or set {LIBRARY_ENV} to \
             its path",
            if path.contains('/') {
                "that path"
            } else {
                "the dynamic linker's search path: LD_LIBRARY_PATH, ld.so.cache, /lib, /usr/lib"
            }
        ),
        bad_wr: None,
    }
}

impl Library {
    /// Loads `path` (a file name searched like `dlopen` does, or a path).
    ///
    /// # Errors
    /// `dlopen` failing (`ENOENT`, the `dlerror` text in the detail) or a
    /// library without the required entry points (`ENOSYS`), library layer.
    pub fn load(path: &str) -> Result<Arc<Library>> {
        // SAFETY: loading libibverbs runs its constructors, which only
        // initialise its own state (no Rust invariants involved).
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| load_error(path, Errno::ENOENT, format!("dlopen failed: {e}")))?;
        macro_rules! req {
            ($name:literal) => {{
                // SAFETY: the symbol is declared in verbs.h with the type
                // of the field it is stored in.
                match unsafe { lib.get(concat!($name, "\0").as_bytes()) } {
                    Ok(s) => *s,
                    Err(e) => {
                        return Err(load_error(
                            path,
                            Errno::ENOSYS,
                            format!("not a libibverbs: no symbol {}: {e}", $name),
                        ))
                    }
                }
            }};
        }
        macro_rules! opt {
            ($name:literal) => {{
                // SAFETY: as in `req!`.
                unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .ok()
                    .map(|s| *s)
            }};
        }
        let f = Fns {
            get_device_list: req!("ibv_get_device_list"),
            free_device_list: req!("ibv_free_device_list"),
            get_device_name: req!("ibv_get_device_name"),
            open_device: req!("ibv_open_device"),
            close_device: req!("ibv_close_device"),
            query_device: opt!("ibv_query_device"),
            query_port: opt!("ibv_query_port"),
            query_gid: opt!("ibv_query_gid"),
            query_gid_ex: opt!("_ibv_query_gid_ex"),
            query_gid_table: opt!("_ibv_query_gid_table"),
            query_pkey: opt!("ibv_query_pkey"),
            alloc_pd: opt!("ibv_alloc_pd"),
            dealloc_pd: opt!("ibv_dealloc_pd"),
            reg_mr: opt!("ibv_reg_mr"),
            dereg_mr: opt!("ibv_dereg_mr"),
            create_comp_channel: opt!("ibv_create_comp_channel"),
            destroy_comp_channel: opt!("ibv_destroy_comp_channel"),
            get_cq_event: opt!("ibv_get_cq_event"),
            ack_cq_events: opt!("ibv_ack_cq_events"),
            create_cq: opt!("ibv_create_cq"),
            destroy_cq: opt!("ibv_destroy_cq"),
            create_qp: opt!("ibv_create_qp"),
            modify_qp: opt!("ibv_modify_qp"),
            query_qp: opt!("ibv_query_qp"),
            destroy_qp: opt!("ibv_destroy_qp"),
            create_srq: opt!("ibv_create_srq"),
            modify_srq: opt!("ibv_modify_srq"),
            destroy_srq: opt!("ibv_destroy_srq"),
            create_ah: opt!("ibv_create_ah"),
            destroy_ah: opt!("ibv_destroy_ah"),
            get_async_event: opt!("ibv_get_async_event"),
            ack_async_event: opt!("ibv_ack_async_event"),
        };
        Ok(Arc::new(Library {
            path: path.to_string(),
            f,
            _lib: lib,
        }))
    }

    /// What was loaded (the name or path given to `dlopen`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// `ENOSYS` for an entry point the loaded library does not export.
    pub(crate) fn missing(&self, verb: &'static str) -> Error {
        Error {
            verb,
            errno: Errno::ENOSYS,
            layer: Layer::Library,
            detail: format!("{} does not export {verb}", self.path),
            bad_wr: None,
        }
    }
}

/// Sets the calling thread's `errno` to 0 (before a call whose failure is
/// reported only through `errno`).
pub(crate) fn clear_errno() {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = 0 }
}

/// This thread's `errno`, or `fallback` when the library left it at 0.
pub(crate) fn errno_or(fallback: Errno) -> Errno {
    // SAFETY: as in `clear_errno`.
    let e = unsafe { *libc::__errno_location() };
    if e > 0 {
        Errno(e)
    } else {
        fallback
    }
}

/// `strerror` text of an errno (the C library's words, without Rust's
/// "(os error N)").
pub(crate) fn strerror(e: Errno) -> String {
    rdmakit_vocab::errno::strerror(e.0).into_owned()
}

/// A verb's error: `errno` plus its text and `what`.
pub(crate) fn verb_error(verb: &'static str, errno: Errno, layer: Layer, what: String) -> Error {
    Error {
        verb,
        errno,
        layer,
        detail: format!("{what}: {}", strerror(errno)),
        bad_wr: None,
    }
}

/// The error of a call returning an `int` status: rdma-core returns a
/// positive errno, some older paths `-1` with `errno`, or `-errno`.
pub(crate) fn status_errno(rc: c_int) -> Errno {
    match rc {
        -1 => errno_or(Errno::EIO),
        r if r < 0 => Errno(-r),
        r => Errno(r),
    }
}
