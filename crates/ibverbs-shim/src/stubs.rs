//! Entry points that exist so programs load, and answer "not supported":
//! multicast, ECE, kernel-struct copies for librdmacm. (The `mlx5dv_*` /
//! `efadv_*` entry points are in `providers`.)

use libc::{c_int, c_void};
use rdmakit_ibverbs_abi::*;

use crate::guard;

#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast(
    _qp: *mut ibv_qp,
    _gid: *const ibv_gid,
    _lid: u16,
) -> c_int {
    guard::unsupported("multicast (ibv_attach_mcast)")
}

#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast(
    _qp: *mut ibv_qp,
    _gid: *const ibv_gid,
    _lid: u16,
) -> c_int {
    guard::unsupported("multicast (ibv_detach_mcast)")
}

/// ECE is optional: "no options" is a valid answer, as for most devices.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_ece(_qp: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

#[no_mangle]
pub unsafe extern "C" fn ibv_set_ece(_qp: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// The `ib_user_*` kernel-struct converters librdmacm links; rdma_cm is
/// not supported, so they are never reached with real data.
#[no_mangle]
pub unsafe extern "C" fn ibv_copy_qp_attr_from_kern(_dst: *mut c_void, _src: *mut c_void) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_copy_ah_attr_from_kern(_dst: *mut c_void, _src: *mut c_void) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_copy_path_rec_from_kern(_dst: *mut c_void, _src: *mut c_void) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_copy_path_rec_to_kern(_dst: *mut c_void, _src: *mut c_void) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// Importing objects from another process's context needs the kernel's
/// uverbs file (shared by file-descriptor passing); the soft NIC has none.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_device(_cmd_fd: c_int) -> *mut c_void {
    guard::set_errno(guard::unsupported(
        "importing a context (ibv_import_device)",
    ));
    std::ptr::null_mut()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_import_pd(_ctx: *mut c_void, _handle: u32) -> *mut c_void {
    guard::set_errno(guard::unsupported("importing a PD (ibv_import_pd)"));
    std::ptr::null_mut()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_import_mr(_pd: *mut c_void, _handle: u32) -> *mut c_void {
    guard::set_errno(guard::unsupported("importing an MR (ibv_import_mr)"));
    std::ptr::null_mut()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_import_dm(_ctx: *mut c_void, _handle: u32) -> *mut c_void {
    guard::set_errno(guard::unsupported("device memory (ibv_import_dm)"));
    std::ptr::null_mut()
}

/// Nothing can have been imported, so there is nothing to release.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_pd(_pd: *mut c_void) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_mr(_mr: *mut c_void) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_dm(_dm: *mut c_void) {}
