//! The IBVERBS_1.0 compatibility symbols and the public helpers of
//! libibverbs that need no device.
//!
//! rdma-core keeps a second version of 33 verbs bound to `IBVERBS_1.0`
//! (`ibv_open_device@IBVERBS_1.0` beside the default
//! `ibv_open_device@@IBVERBS_1.1`) for binaries linked before the 2006 ABI
//! change, with their own struct layouts (`ibv_context_1_0`, ...). The
//! drop-in library exports every one of them so the symbol sets match, but
//! does not provide that ABI: a program linked against it stops at its first
//! call (`ibv_get_device_list` returns NULL) with a message saying why and
//! what to do. No binary in Debian 12 uses these versions. (`void` and
//! GUID-returning ones share the NULL path: their return value is ignored
//! or 0.)

use std::sync::Once;

use libc::c_int;

use crate::guard;

/// What every IBVERBS_1.0 entry point does: say why, once, and fail.
fn refuse() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        eprintln!(
            "rdmakit libibverbs: this program was linked against the libibverbs 1.0 ABI \
             (IBVERBS_1.0, 2006), which the rdmakit drop-in library does not provide; \
             rebuild it against a current rdma-core (its verbs fail with ENOSYS)"
        )
    });
    guard::set_errno(libc::ENOSYS);
}

/// The 1.0 verbs that return a pointer, a GUID or nothing: NULL / 0.
extern "C" fn refuse_null() -> usize {
    refuse();
    0
}

/// The 1.0 verbs that return an int: -1 with errno ENOSYS.
extern "C" fn refuse_int() -> c_int {
    refuse();
    -1
}

/// One assembly thunk per 1.0 symbol (`name_v1_0`, see `thunk!`), bound to
/// `name@IBVERBS_1.0`; it jumps to a Rust function with the return value of
/// the verb's kind.
macro_rules! v1_0 {
    ($($kind:ident $name:ident;)*) => {
        $(v1_0!(@thunk $kind $name);)*
        /// The IBVERBS_1.0 names (the symbol test's list).
        #[allow(dead_code)]
        pub(crate) const V1_0: &[&str] = &[$(stringify!($name)),*];
    };
    (@thunk int $name:ident) => { v1_0!(@asm $name, refuse_int); };
    (@thunk ptr $name:ident) => { v1_0!(@asm $name, refuse_null); };
    (@asm $name:ident, $target:ident) => {
        thunk!(
            concat!(stringify!($name), "_v1_0"),
            concat!(stringify!($name), "@IBVERBS_1.0"),
            $target
        );
    };
}

v1_0! {
    ptr ibv_ack_async_event;
    ptr ibv_ack_cq_events;
    ptr ibv_alloc_pd;
    int ibv_attach_mcast;
    int ibv_close_device;
    ptr ibv_create_ah;
    ptr ibv_create_cq;
    ptr ibv_create_qp;
    ptr ibv_create_srq;
    int ibv_dealloc_pd;
    int ibv_dereg_mr;
    int ibv_destroy_ah;
    int ibv_destroy_cq;
    int ibv_destroy_qp;
    int ibv_destroy_srq;
    int ibv_detach_mcast;
    ptr ibv_free_device_list;
    int ibv_get_async_event;
    int ibv_get_cq_event;
    ptr ibv_get_device_guid;
    ptr ibv_get_device_list;
    ptr ibv_get_device_name;
    int ibv_modify_qp;
    int ibv_modify_srq;
    ptr ibv_open_device;
    int ibv_query_device;
    int ibv_query_gid;
    int ibv_query_pkey;
    int ibv_query_port;
    int ibv_query_qp;
    int ibv_query_srq;
    ptr ibv_reg_mr;
    int ibv_resize_cq;
}

/// `ibv_register_driver@IBVERBS_1.1` (a non-default version in rdma-core
/// too): the driver interface is private since rdma-core 13; the symbol
/// stays for old libfabric usnic providers, and does nothing.
extern "C" fn register_driver_noop() {}

thunk!(
    "ibv_register_driver_v1_1",
    "ibv_register_driver@IBVERBS_1.1",
    register_driver_noop
);

/// IB static rates (`enum ibv_rate`) and their multiples of 2.5 Gb/s.
const RATE_MULT: [(c_int, c_int); 9] = [
    (2, 1),
    (5, 2),
    (3, 4),
    (6, 8),
    (4, 12),
    (7, 16),
    (8, 24),
    (9, 32),
    (10, 48),
];

/// `enum ibv_rate` → Mb/s (rdma-core's table, including the FDR/EDR/HDR/NDR
/// rates that are no multiple of 2.5 Gb/s).
const RATE_MBPS: [(c_int, c_int); 23] = [
    (2, 2500),
    (5, 5000),
    (3, 10000),
    (6, 20000),
    (4, 30000),
    (7, 40000),
    (8, 60000),
    (9, 80000),
    (10, 120000),
    (11, 14062),
    (12, 56250),
    (13, 112500),
    (14, 168750),
    (15, 25781),
    (16, 103125),
    (17, 206250),
    (18, 309375),
    (19, 28125),
    (20, 53125),
    (21, 425000),
    (22, 637500),
    (23, 850000),
    (24, 1275000),
];

/// `ibv_rate_to_mult@IBVERBS_1.0`: -1 for a rate without a multiple.
#[no_mangle]
pub unsafe extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    RATE_MULT
        .iter()
        .find(|(r, _)| *r == rate)
        .map_or(-1, |(_, m)| *m)
}

/// `mult_to_ibv_rate@IBVERBS_1.0`: `IBV_RATE_MAX` (0) for an unknown multiple.
#[no_mangle]
pub unsafe extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    RATE_MULT
        .iter()
        .find(|(_, m)| *m == mult)
        .map_or(0, |(r, _)| *r)
}

/// `ibv_rate_to_mbps@IBVERBS_1.1`: -1 for an unknown rate.
#[no_mangle]
pub unsafe extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATE_MBPS
        .iter()
        .find(|(r, _)| *r == rate)
        .map_or(-1, |(_, m)| *m)
}

/// `mbps_to_ibv_rate@IBVERBS_1.1`: `IBV_RATE_MAX` (0) for an unknown speed.
#[no_mangle]
pub unsafe extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATE_MBPS
        .iter()
        .find(|(_, m)| *m == mbps)
        .map_or(0, |(r, _)| *r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_helpers_are_inverse_where_rdma_core_defines_them() {
        // SAFETY: pure functions.
        unsafe {
            for (r, m) in RATE_MULT {
                assert_eq!(mult_to_ibv_rate(ibv_rate_to_mult(r)), r);
                assert_eq!(ibv_rate_to_mult(mult_to_ibv_rate(m)), m);
            }
            for (r, _) in RATE_MBPS {
                assert_eq!(mbps_to_ibv_rate(ibv_rate_to_mbps(r)), r);
            }
            assert_eq!(ibv_rate_to_mbps(0), -1);
            assert_eq!(mbps_to_ibv_rate(12345), 0);
            assert_eq!(ibv_rate_to_mult(11), -1, "FDR10 is no multiple of 2.5 Gb/s");
        }
    }
}
