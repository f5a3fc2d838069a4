//! rdmakit's private interface for its own librdmacm.so.1
//! (crates/rdmacm-shim), which runs the connection manager in the
//! application's process and needs what a kernel's rdma_cm reaches inside
//! the driver: the device's address, and QP1 to send and receive CM MADs.
//! Plain C types only (the two libraries are built separately); not part of
//! libibverbs' ABI, so unversioned.

use libc::{c_int, c_void, size_t, ssize_t};
use rdmakit_ibverbs_abi::ibv_context;

use crate::device::Ctx;
use crate::guard;

pub use rdmakit_ibverbs_abi::rdmakit::RdmakitDevInfo;

/// Fills `info` for the device of `ctx`. Returns 0 or an errno.
#[no_mangle]
pub unsafe extern "C" fn rdmakit_dev_info(
    ctx: *mut ibv_context,
    info: *mut RdmakitDevInfo,
) -> c_int {
    guard::int("rdmakit_dev_info", || {
        let c = Ctx::from_ptr(ctx)?;
        let out = guard::nonnull(info)?;
        // SAFETY: the caller passes a writable struct; `size` says how much
        // of it it knows, and only this version's layout is written when it
        // is at least ours.
        if unsafe { (*out).size } < std::mem::size_of::<RdmakitDevInfo>() as u32 {
            return Err(libc::EINVAL);
        }
        let dev = &c.dev;
        let port = dev.port_attr(1).map_err(guard::soft)?;
        let attr = dev.attr();
        let gid_index = u32::from(rdmakit_soft::ROCEV2_GID_INDEX);
        let gid = dev.gid(1, gid_index).map_err(guard::soft)?;
        // rdma_cm's port table lives in this user's registry directory of
        // the device, which no other user can write.
        let dir = dev
            .registry_dir()
            .map(|d| d.join(".cm"))
            .unwrap_or_default();
        // SAFETY: checked non-NULL and large enough above.
        let o = unsafe { &mut *out };
        o.ipv4 = u32::from(dev.addr()).to_be();
        o.gid = gid.0;
        o.gid_index = gid_index;
        o.node_guid = attr.node_guid;
        o.active_mtu = port.active_mtu.bytes();
        o.ack_delay = u32::from(attr.local_ca_ack_delay);
        o.max_qp_rd_atom = attr.max_qp_rd_atom;
        o.max_qp_init_rd_atom = attr.max_qp_init_rd_atom;
        o.max_qp_wr = attr.max_qp_wr;
        guard::put_cstr(&mut o.shared_dir, &dir.to_string_lossy());
        o.endpoint_ipv4 = u32::from(*dev.endpoint().ip()).to_be();
        Ok(())
    })
}

/// Attaches the caller as QP1's management agent; returns an fd that polls
/// readable while MADs wait, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn rdmakit_gsi_open(ctx: *mut ibv_context) -> c_int {
    let mut fd = -1;
    let r = guard::minus1("rdmakit_gsi_open", || {
        let c = Ctx::from_ptr(ctx)?;
        fd = c.dev.gsi_attach().map_err(guard::soft)?;
        Ok(())
    });
    if r == 0 {
        fd
    } else {
        -1
    }
}

/// Takes the next MAD received on QP1: copies at most `len` bytes to `buf`,
/// stores the sender's IPv4 address as its GRH names it (network order) in
/// `*src` and where its QP1 is reached (answers go there) in `*via`, returns
/// the MAD's length; -1 with errno EAGAIN when none waits (not a failure: no
/// debug line), EINVAL for a bad context or buffer.
#[no_mangle]
pub unsafe extern "C" fn rdmakit_gsi_recv(
    ctx: *mut ibv_context,
    buf: *mut c_void,
    len: size_t,
    src: *mut u32,
    via: *mut u32,
) -> ssize_t {
    let mut n: ssize_t = -1;
    let r = guard::minus1("rdmakit_gsi_recv", || {
        let c = Ctx::from_ptr(ctx)?;
        guard::nonnull(buf)?;
        let Some(m) = c.dev.gsi_recv() else {
            return Ok(());
        };
        let k = m.mad.len().min(len);
        // SAFETY: the caller passes `len` writable bytes at `buf`.
        unsafe { std::ptr::copy_nonoverlapping(m.mad.as_ptr(), buf.cast::<u8>(), k) };
        if !src.is_null() {
            // SAFETY: non-NULL, the caller passes a writable u32.
            unsafe { *src = u32::from(m.src).to_be() };
        }
        if !via.is_null() {
            // SAFETY: non-NULL, the caller passes a writable u32.
            unsafe { *via = u32::from(m.via).to_be() };
        }
        n = ssize_t::try_from(m.mad.len()).unwrap_or(ssize_t::MAX);
        Ok(())
    });
    if r != 0 {
        return -1;
    }
    if n < 0 {
        guard::set_errno(libc::EAGAIN);
    }
    n
}

/// Sends `len` bytes of MAD from QP1 to the QP1 reached at `dst` (IPv4,
/// network order: a `via` of [`rdmakit_gsi_recv`], another context's
/// `endpoint_ipv4`, or another host's address).
/// Returns 0 or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn rdmakit_gsi_send(
    ctx: *mut ibv_context,
    dst: u32,
    mad: *const c_void,
    len: size_t,
) -> c_int {
    guard::minus1("rdmakit_gsi_send", || {
        let c = Ctx::from_ptr(ctx)?;
        if mad.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller passes `len` readable bytes at `mad`.
        let bytes = unsafe { std::slice::from_raw_parts(mad.cast::<u8>(), len) };
        c.dev
            .gsi_send(std::net::Ipv4Addr::from(u32::from_be(dst)), bytes)
            .map_err(guard::soft)
    })
}
