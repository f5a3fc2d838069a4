//! `rdma_getaddrinfo` / `rdma_freeaddrinfo` and the endpoint helpers
//! `rdma_create_ep` / `rdma_destroy_ep` built on them.
//!
//! Like librdmacm's addrinfo.c: `getaddrinfo(3)` with hints derived from the
//! rdma hints (QP type → socket type, port space → protocol), the first
//! result converted. No ibacm is consulted: RoCE routes are computed when an
//! ID resolves its route, so `ai_route` stays empty.

use libc::{addrinfo, c_char, c_int, c_void, sockaddr};
use rdmakit_ibverbs_abi::consts::*;
use rdmakit_ibverbs_abi::{ibv_pd, ibv_qp_init_attr};

use crate::abi::*;
use crate::guard::Res;

unsafe fn dup_addr(src: *const sockaddr, len: libc::socklen_t) -> Res<*mut sockaddr> {
    if src.is_null() || len == 0 {
        return Ok(std::ptr::null_mut());
    }
    // SAFETY: malloc of len bytes; the source has len readable bytes.
    let p = unsafe { libc::malloc(len as usize) };
    if p.is_null() {
        return Err(libc::ENOMEM);
    }
    // SAFETY: both regions are len bytes.
    unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), p.cast::<u8>(), len as usize) };
    Ok(p.cast())
}

fn to_ai_hints(h: &rdma_addrinfo) -> addrinfo {
    // SAFETY: plain data.
    let mut ai: addrinfo = unsafe { std::mem::zeroed() };
    if h.ai_flags & RAI_PASSIVE != 0 {
        ai.ai_flags = libc::AI_PASSIVE;
    }
    if h.ai_flags & RAI_NUMERICHOST != 0 {
        ai.ai_flags |= libc::AI_NUMERICHOST;
    }
    // AF_IB (27) has no getaddrinfo meaning.
    if h.ai_family != 27 {
        ai.ai_family = h.ai_family;
    }
    ai.ai_socktype = match h.ai_qp_type as u32 {
        IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_XRC_SEND | IBV_QPT_XRC_RECV => libc::SOCK_STREAM,
        IBV_QPT_UD => libc::SOCK_DGRAM,
        _ => 0,
    };
    ai.ai_protocol = match h.ai_port_space as u32 {
        RDMA_PS_TCP => libc::IPPROTO_TCP,
        RDMA_PS_UDP | RDMA_PS_IPOIB => libc::IPPROTO_UDP,
        RDMA_PS_IB if ai.ai_socktype == libc::SOCK_STREAM => libc::IPPROTO_TCP,
        RDMA_PS_IB if ai.ai_socktype == libc::SOCK_DGRAM => libc::IPPROTO_UDP,
        _ => 0,
    };
    ai
}

/// Why `rdma_getaddrinfo` failed.
pub(crate) enum GaiError {
    /// `getaddrinfo`'s own code (EAI_*), returned as is.
    Eai(c_int),
    /// An errno: -1 is returned with errno set.
    Errno(c_int),
}

/// `rdma_getaddrinfo`.
pub(crate) unsafe fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> Result<(), GaiError> {
    if (node.is_null() && service.is_null() && hints.is_null()) || res.is_null() {
        return Err(GaiError::Errno(libc::EINVAL));
    }
    // SAFETY: calloc of one struct.
    let rai =
        unsafe { libc::calloc(1, std::mem::size_of::<rdma_addrinfo>()) }.cast::<rdma_addrinfo>();
    if rai.is_null() {
        return Err(GaiError::Errno(libc::ENOMEM));
    }
    // SAFETY: just allocated and zeroed.
    let r = unsafe { &mut *rai };
    // SAFETY: the caller's hints, if any.
    let h = (!hints.is_null()).then(|| unsafe { &*hints });
    let out = (|| -> Result<(), GaiError> {
        if !node.is_null() || !service.is_null() {
            let ai_hints = h.map(to_ai_hints);
            let mut ai: *mut addrinfo = std::ptr::null_mut();
            // SAFETY: libc getaddrinfo with the caller's strings.
            let rc = unsafe {
                libc::getaddrinfo(
                    node,
                    service,
                    ai_hints
                        .as_ref()
                        .map_or(std::ptr::null(), |x| x as *const addrinfo),
                    &mut ai,
                )
            };
            if rc != 0 {
                return Err(GaiError::Eai(rc));
            }
            // SAFETY: a successful getaddrinfo returns at least one result.
            let a = unsafe { &*ai };
            r.ai_qp_type = hinted_or(
                h.map_or(0, |h| h.ai_qp_type),
                a.ai_socktype,
                &[
                    (libc::SOCK_STREAM, IBV_QPT_RC as c_int),
                    (libc::SOCK_DGRAM, IBV_QPT_UD as c_int),
                ],
            );
            r.ai_port_space = hinted_or(
                h.map_or(0, |h| h.ai_port_space),
                a.ai_protocol,
                &[
                    (libc::IPPROTO_TCP, RDMA_PS_TCP as c_int),
                    (libc::IPPROTO_UDP, RDMA_PS_UDP as c_int),
                ],
            );
            r.ai_family = a.ai_family;
            let res = if a.ai_flags & libc::AI_PASSIVE != 0 {
                r.ai_flags = RAI_PASSIVE;
                // SAFETY: the result's address of ai_addrlen bytes.
                unsafe { dup_addr(a.ai_addr, a.ai_addrlen) }.map(|p| {
                    r.ai_src_addr = p;
                    r.ai_src_len = a.ai_addrlen;
                })
            } else {
                // SAFETY: as above.
                unsafe { dup_addr(a.ai_addr, a.ai_addrlen) }.map(|p| {
                    r.ai_dst_addr = p;
                    r.ai_dst_len = a.ai_addrlen;
                })
            };
            if !a.ai_canonname.is_null() {
                // SAFETY: a NUL-terminated name from getaddrinfo.
                let c = unsafe { libc::strdup(a.ai_canonname) };
                if r.ai_flags & RAI_PASSIVE != 0 {
                    r.ai_src_canonname = c;
                } else {
                    r.ai_dst_canonname = c;
                }
            }
            // SAFETY: the list getaddrinfo returned.
            unsafe { libc::freeaddrinfo(ai) };
            res.map_err(GaiError::Errno)?;
        } else if let Some(h) = h {
            r.ai_flags = h.ai_flags;
            r.ai_family = h.ai_family;
            r.ai_qp_type = h.ai_qp_type;
            r.ai_port_space = h.ai_port_space;
            if h.ai_dst_len > 0 {
                // SAFETY: the hint's address of ai_dst_len bytes.
                r.ai_dst_addr =
                    unsafe { dup_addr(h.ai_dst_addr, h.ai_dst_len) }.map_err(GaiError::Errno)?;
                r.ai_dst_len = h.ai_dst_len;
            }
        }
        if let Some(h) = h {
            if r.ai_src_len == 0 && h.ai_src_len > 0 {
                // SAFETY: the hint's address of ai_src_len bytes.
                r.ai_src_addr =
                    unsafe { dup_addr(h.ai_src_addr, h.ai_src_len) }.map_err(GaiError::Errno)?;
                r.ai_src_len = h.ai_src_len;
            }
        }
        Ok(())
    })();
    match out {
        Ok(()) => {
            // SAFETY: the caller's out pointer.
            unsafe { *res = rai };
            Ok(())
        }
        Err(e) => {
            // SAFETY: ours, partly filled.
            unsafe { freeaddrinfo(rai) };
            Err(e)
        }
    }
}

/// `rdma_freeaddrinfo`.
pub(crate) unsafe fn freeaddrinfo(mut res: *mut rdma_addrinfo) {
    while !res.is_null() {
        // SAFETY: a list built by getaddrinfo above (malloc'd members).
        unsafe {
            let r = &*res;
            let next = r.ai_next;
            for p in [
                r.ai_connect,
                r.ai_route,
                r.ai_src_canonname.cast::<c_void>(),
                r.ai_dst_canonname.cast::<c_void>(),
                r.ai_src_addr.cast::<c_void>(),
                r.ai_dst_addr.cast::<c_void>(),
            ] {
                libc::free(p);
            }
            libc::free(res.cast());
            res = next;
        }
    }
}

/// `rdma_create_ep`.
pub(crate) unsafe fn create_ep(
    out: *mut *mut rdma_cm_id,
    res: *const rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> Res<()> {
    if out.is_null() || res.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's addrinfo.
    let r = unsafe { &*res };
    let id = crate::id::create(
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        r.ai_port_space as u32,
        r.ai_qp_type as u32,
    )?;
    let setup = || -> Res<()> {
        if r.ai_flags & RAI_PASSIVE != 0 {
            crate::id::bind(id, r.ai_src_addr)?;
            let attr = (!qp_init_attr.is_null()).then(|| {
                // SAFETY: the caller's struct.
                let mut a = unsafe { *qp_init_attr };
                a.qp_type = r.ai_qp_type as u32;
                a
            });
            return crate::id::set_passive_attrs(id, pd, attr);
        }
        crate::id::resolve_addr(id, r.ai_src_addr, r.ai_dst_addr, 2000)?;
        crate::id::resolve_route(id, 2000)?;
        if !qp_init_attr.is_null() {
            // SAFETY: the caller's struct.
            unsafe { (*qp_init_attr).qp_type = r.ai_qp_type as u32 };
            crate::qp::create_qp(id, pd, qp_init_attr)?;
        }
        if r.ai_connect_len > 0 && !r.ai_connect.is_null() {
            // SAFETY: ai_connect_len readable bytes.
            let d =
                unsafe { std::slice::from_raw_parts(r.ai_connect.cast::<u8>(), r.ai_connect_len) };
            crate::id::set_connect_data(id, d)?;
        }
        Ok(())
    };
    match setup() {
        Ok(()) => {
            // SAFETY: the caller's out pointer.
            unsafe { *out = id };
            Ok(())
        }
        Err(e) => {
            destroy_ep(id);
            Err(e)
        }
    }
}

/// `rdma_destroy_ep`.
pub(crate) fn destroy_ep(id: *mut rdma_cm_id) {
    let _ = crate::qp::destroy_qp(id);
    let _ = crate::qp::destroy_srq(id);
    let _ = crate::id::destroy(id);
}

/// The caller's hint when it gave one (non-zero), else what the socket
/// value `from` maps to in `map` (0 when nothing does).
fn hinted_or(hint: c_int, from: c_int, map: &[(c_int, c_int)]) -> c_int {
    if hint != 0 {
        return hint;
    }
    map.iter().find(|(k, _)| *k == from).map_or(0, |(_, v)| *v)
}
