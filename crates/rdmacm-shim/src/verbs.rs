//! The libibverbs functions librdmacm calls, looked up at run time in the
//! libibverbs.so.1 the process loads (rdma-core's librdmacm links it; ours
//! finds it with `dlopen`, which returns the one already loaded). It must be
//! rdmakit's drop-in: the private `rdmakit_*` entry points give the device's
//! address and QP1.

use std::ffi::CStr;
use std::sync::OnceLock;

use libc::{c_int, c_void, size_t, ssize_t};
use rdmakit_ibverbs_abi::{
    ibv_comp_channel, ibv_context, ibv_cq, ibv_device, ibv_device_attr, ibv_pd, ibv_qp,
    ibv_qp_attr, ibv_qp_init_attr, ibv_srq, ibv_srq_init_attr,
};

/// `struct rdmakit_dev_info` of the drop-in libibverbs (its src/rdmakit.rs).
pub(crate) use rdmakit_ibverbs_abi::rdmakit::RdmakitDevInfo as DevInfo;

/// The version node of libibverbs' `rdmakit_*` exports this library calls
/// (crates/ibverbs-shim/build.rs).
const RDMAKIT_NODE: &str = "RDMAKIT_PRIVATE_1\0";

macro_rules! table {
    ($($name:ident : fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The functions, resolved once.
        #[allow(non_snake_case)]
        pub(crate) struct Verbs {
            $(pub $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl Verbs {
            /// # Safety
            /// `h` is a handle from dlopen.
            unsafe fn load(h: *mut c_void) -> Result<Verbs, String> {
                Ok(Verbs {
                    $($name: {
                        let name = concat!(stringify!($name), "\0");
                        // rdmakit's own exports are versioned (RDMAKIT_PRIVATE_n,
                        // bumped when a signature changes), so a libibverbs of
                        // another rdmakit build is refused, never called with
                        // the wrong arguments.
                        let p = if name.starts_with("rdmakit_") {
                            // SAFETY: h is a live handle; both strings are
                            // NUL-terminated.
                            unsafe {
                                libc::dlvsym(h, name.as_ptr().cast(), RDMAKIT_NODE.as_ptr().cast())
                            }
                        } else {
                            // SAFETY: h is a live handle; the name is NUL-terminated.
                            unsafe { libc::dlsym(h, name.as_ptr().cast()) }
                        };
                        if p.is_null() {
                            return Err(if name.starts_with("rdmakit_") {
                                format!("{}@{}", stringify!($name), RDMAKIT_NODE.trim_end_matches('\0'))
                            } else {
                                stringify!($name).to_string()
                            });
                        }
                        // SAFETY: the symbol is the C function of that name,
                        // whose prototype the field type spells out.
                        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) $(-> $ret)?>(p) }
                    },)*
                })
            }
        }
    };
}

table! {
    ibv_get_device_list: fn(*mut c_int) -> *mut *mut ibv_device;
    ibv_free_device_list: fn(*mut *mut ibv_device);
    ibv_open_device: fn(*mut ibv_device) -> *mut ibv_context;
    ibv_query_device: fn(*mut ibv_context, *mut ibv_device_attr) -> c_int;
    ibv_alloc_pd: fn(*mut ibv_context) -> *mut ibv_pd;
    ibv_create_comp_channel: fn(*mut ibv_context) -> *mut ibv_comp_channel;
    ibv_destroy_comp_channel: fn(*mut ibv_comp_channel) -> c_int;
    ibv_create_cq: fn(*mut ibv_context, c_int, *mut c_void, *mut ibv_comp_channel, c_int) -> *mut ibv_cq;
    ibv_destroy_cq: fn(*mut ibv_cq) -> c_int;
    ibv_create_qp: fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp;
    ibv_modify_qp: fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int;
    ibv_destroy_qp: fn(*mut ibv_qp) -> c_int;
    ibv_create_srq: fn(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq;
    ibv_destroy_srq: fn(*mut ibv_srq) -> c_int;
    rdmakit_dev_info: fn(*mut ibv_context, *mut DevInfo) -> c_int;
    rdmakit_gsi_open: fn(*mut ibv_context) -> c_int;
    rdmakit_gsi_recv: fn(*mut ibv_context, *mut c_void, size_t, *mut u32, *mut u32) -> ssize_t;
    rdmakit_gsi_send: fn(*mut ibv_context, u32, *const c_void, size_t) -> c_int;
}

/// The loaded functions, or why they could not be loaded.
pub(crate) fn verbs() -> Result<&'static Verbs, c_int> {
    static V: OnceLock<Result<Verbs, String>> = OnceLock::new();
    let v = V.get_or_init(|| {
        // SAFETY: dlopen with a NUL-terminated name; the handle is never closed.
        let h = unsafe {
            libc::dlopen(
                c"libibverbs.so.1".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_GLOBAL,
            )
        };
        if h.is_null() {
            // SAFETY: dlerror returns a NUL-terminated string or NULL.
            let why = unsafe { libc::dlerror() };
            let why = if why.is_null() {
                "unknown error".to_string()
            } else {
                // SAFETY: non-NULL, NUL-terminated.
                unsafe { CStr::from_ptr(why) }
                    .to_string_lossy()
                    .into_owned()
            };
            return Err(format!("cannot load libibverbs.so.1: {why}"));
        }
        // SAFETY: h is a live handle.
        unsafe { Verbs::load(h) }.map_err(|missing| {
            format!(
                "the libibverbs.so.1 this process loaded has no {missing}: rdmakit's \
                 librdmacm runs on rdmakit's drop-in libibverbs (install both with \
                 `rdmakit shim install DIR` and put DIR first on LD_LIBRARY_PATH)"
            )
        })
    });
    match v {
        Ok(v) => Ok(v),
        Err(why) => {
            static TOLD: std::sync::Once = std::sync::Once::new();
            TOLD.call_once(|| eprintln!("rdmakit librdmacm: {why}"));
            Err(libc::ENODEV)
        }
    }
}
