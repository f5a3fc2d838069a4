//! Entry points that exist so programs load, and answer "not supported":
//! multicast, ECE, kernel-struct copies for librdmacm, and the `mlx5dv_*` /
//! `efadv_*` functions perftest links (for DC/SRD tests only).

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

fn null_with(what: &str) -> *mut c_void {
    guard::set_errno(guard::unsupported(what));
    std::ptr::null_mut()
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_open_device(_dev: *mut c_void, _attr: *mut c_void) -> *mut c_void {
    null_with("mlx5 direct verbs (mlx5dv_open_device)")
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_create_qp(
    _c: *mut c_void,
    _a: *mut c_void,
    _m: *mut c_void,
) -> *mut c_void {
    null_with("mlx5 DC QPs (mlx5dv_create_qp)")
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_qp_ex_from_ibv_qp_ex(_qp: *mut c_void) -> *mut c_void {
    null_with("mlx5 direct verbs (mlx5dv_qp_ex_from_ibv_qp_ex)")
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_general_cmd(
    _c: *mut c_void,
    _i: *const c_void,
    _il: usize,
    _o: *mut c_void,
    _ol: usize,
) -> c_int {
    guard::unsupported("mlx5 DevX (mlx5dv_devx_general_cmd)")
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_create_mkey(_attr: *mut c_void) -> *mut c_void {
    null_with("mlx5 mkeys (mlx5dv_create_mkey)")
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_destroy_mkey(_mkey: *mut c_void) -> c_int {
    guard::unsupported("mlx5 mkeys (mlx5dv_destroy_mkey)")
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_dek_create(_c: *mut c_void, _a: *mut c_void) -> *mut c_void {
    null_with("mlx5 crypto (mlx5dv_dek_create)")
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_dek_destroy(_dek: *mut c_void) -> c_int {
    guard::unsupported("mlx5 crypto (mlx5dv_dek_destroy)")
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_crypto_login(_c: *mut c_void, _a: *mut c_void) -> c_int {
    guard::unsupported("mlx5 crypto (mlx5dv_crypto_login)")
}

#[no_mangle]
pub unsafe extern "C" fn efadv_query_device(_c: *mut c_void, _a: *mut c_void, _l: u32) -> c_int {
    guard::unsupported("EFA direct verbs (efadv_query_device)")
}

#[no_mangle]
pub unsafe extern "C" fn efadv_create_qp_ex(
    _c: *mut c_void,
    _a: *mut c_void,
    _e: *mut c_void,
    _l: u32,
) -> *mut c_void {
    null_with("EFA SRD QPs (efadv_create_qp_ex)")
}
