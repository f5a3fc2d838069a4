//! Every function librdmacm.so.1 of rdma-core 44 exports, bound to its
//! version node (`objdump -T` of Debian 12's library; build.rs declares the
//! nodes). Each one is a thin wrapper: arguments in, one call, errno out,
//! no panic across the boundary ([`crate::guard`]).

use libc::{c_char, c_int, c_void, size_t, sockaddr};
use rdmakit_ibverbs_abi::{
    ibv_context, ibv_pd, ibv_qp_attr, ibv_qp_init_attr, ibv_qp_init_attr_ex, ibv_srq_init_attr,
    ibv_srq_init_attr_ex,
};

use crate::abi::*;
use crate::channel::Channel;
use crate::guard::{self, minus1, value};
use crate::state::state;

use rdmakit_ibverbs_abi::versioned;

versioned! {
    "RDMACM_1.0": [
        rdma_create_event_channel, rdma_destroy_event_channel, rdma_create_id, rdma_destroy_id,
        rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route, rdma_create_qp, rdma_destroy_qp,
        rdma_connect, rdma_listen, rdma_accept, rdma_reject, rdma_notify, rdma_disconnect,
        rdma_get_cm_event, rdma_ack_cm_event, rdma_get_src_port, rdma_get_dst_port,
        rdma_join_multicast, rdma_leave_multicast, rdma_get_devices, rdma_free_devices,
        rdma_event_str, rdma_set_option, rdma_migrate_id, rdma_getaddrinfo, rdma_freeaddrinfo,
        rdma_get_request, rdma_create_ep, rdma_destroy_ep, rdma_create_srq, rdma_destroy_srq,
        rdma_create_srq_ex, rdma_create_qp_ex,
        rsocket, rbind, rlisten, raccept, rconnect, rshutdown, rclose, rrecv, rrecvfrom,
        rrecvmsg, rsend, rsendto, rsendmsg, rread, rreadv, rwrite, rwritev, rpoll, rselect,
        rgetpeername, rgetsockname, rsetsockopt, rgetsockopt, rfcntl, riomap, riounmap, riowrite,
    ]
    "RDMACM_1.1": [rdma_join_multicast_ex]
    "RDMACM_1.2": [rdma_establish, rdma_init_qp_attr]
    "RDMACM_1.3": [rdma_get_remote_ece, rdma_reject_ece, rdma_set_local_ece]
}

// ---- channels and events -------------------------------------------------

#[no_mangle]
pub extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    value("rdma_create_event_channel", std::ptr::null_mut(), || {
        drop(state()?);
        Ok(Channel::create()?.cast())
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    guard::void("rdma_destroy_event_channel", || {
        if Channel::from_ptr(channel).is_ok() {
            // SAFETY: a live channel the application is done with.
            unsafe { Channel::destroy(channel.cast()) };
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
) -> c_int {
    minus1("rdma_get_cm_event", || {
        if event.is_null() {
            return Err(libc::EINVAL);
        }
        let e = crate::id::get_event(channel)?;
        // SAFETY: the caller's out pointer.
        unsafe { *event = e };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    minus1("rdma_ack_cm_event", || {
        if event.is_null() {
            return Err(libc::EINVAL);
        }
        crate::id::ack(event);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn rdma_event_str(event: u32) -> *const c_char {
    crate::channel::event_str(event).as_ptr()
}

// ---- devices -------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    let list = value("rdma_get_devices", std::ptr::null_mut(), || {
        let g = state()?;
        // SAFETY: calloc of two pointers.
        let l = unsafe { libc::calloc(2, std::mem::size_of::<*mut ibv_context>()) }
            .cast::<*mut ibv_context>();
        if l.is_null() {
            return Err(libc::ENOMEM);
        }
        // SAFETY: room for two pointers; the second stays NULL.
        unsafe { *l = g.dev.ctx };
        Ok(l)
    });
    if !num_devices.is_null() {
        // SAFETY: the caller's int.
        unsafe { *num_devices = i32::from(!list.is_null()) };
    }
    list
}

#[no_mangle]
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    // SAFETY: allocated by calloc in rdma_get_devices.
    unsafe { libc::free(list.cast()) };
}

// ---- IDs -----------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> c_int {
    minus1("rdma_create_id", || {
        if id.is_null() {
            return Err(libc::EINVAL);
        }
        let qp_type = if ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP {
            rdmakit_ibverbs_abi::consts::IBV_QPT_UD
        } else {
            rdmakit_ibverbs_abi::consts::IBV_QPT_RC
        };
        let p = crate::id::create(channel, context, ps, qp_type)?;
        // SAFETY: the caller's out pointer.
        unsafe { *id = p };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    minus1("rdma_destroy_id", || crate::id::destroy(id))
}

#[no_mangle]
pub unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
    minus1("rdma_bind_addr", || crate::id::bind(id, addr))
}

#[no_mangle]
pub unsafe extern "C" fn rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src_addr: *mut sockaddr,
    dst_addr: *mut sockaddr,
    timeout_ms: c_int,
) -> c_int {
    minus1("rdma_resolve_addr", || {
        crate::id::resolve_addr(id, src_addr, dst_addr, timeout_ms)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
    minus1("rdma_resolve_route", || {
        crate::id::resolve_route(id, timeout_ms)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    minus1("rdma_listen", || crate::id::listen(id, backlog))
}

#[no_mangle]
pub unsafe extern "C" fn rdma_connect(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    minus1("rdma_connect", || crate::id::connect(id, conn_param))
}

#[no_mangle]
pub unsafe extern "C" fn rdma_accept(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    minus1("rdma_accept", || crate::id::accept(id, conn_param))
}

#[no_mangle]
pub unsafe extern "C" fn rdma_reject(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    minus1("rdma_reject", || {
        crate::id::reject(id, private_data, private_data_len, 0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_reject_ece(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    // IBTA's "vendor option not supported".
    minus1("rdma_reject_ece", || {
        crate::id::reject(id, private_data, private_data_len, 35)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, event: u32) -> c_int {
    minus1("rdma_notify", || crate::id::notify(id, event))
}

#[no_mangle]
pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    minus1("rdma_disconnect", || crate::id::disconnect(id))
}

#[no_mangle]
pub unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    minus1("rdma_establish", || crate::id::establish(id))
}

#[no_mangle]
pub unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    qp_attr: *mut ibv_qp_attr,
    qp_attr_mask: *mut c_int,
) -> c_int {
    minus1("rdma_init_qp_attr", || {
        crate::id::init_qp_attr(id, qp_attr, qp_attr_mask)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: size_t,
) -> c_int {
    minus1("rdma_set_option", || {
        crate::id::set_option(id, level, optname, optval, optlen)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_migrate_id(
    id: *mut rdma_cm_id,
    channel: *mut rdma_event_channel,
) -> c_int {
    minus1("rdma_migrate_id", || crate::id::migrate(id, channel))
}

#[no_mangle]
pub unsafe extern "C" fn rdma_get_request(
    listen: *mut rdma_cm_id,
    id: *mut *mut rdma_cm_id,
) -> c_int {
    minus1("rdma_get_request", || {
        if id.is_null() {
            return Err(libc::EINVAL);
        }
        let c = crate::id::get_request(listen)?;
        // SAFETY: the caller's out pointer.
        unsafe { *id = c };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    if id.is_null() {
        return 0;
    }
    // SAFETY: the caller's ID.
    crate::id::port_of(unsafe { &(*id).route.addr.src }).to_be()
}

#[no_mangle]
pub unsafe extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    if id.is_null() {
        return 0;
    }
    // SAFETY: the caller's ID.
    crate::id::port_of(unsafe { &(*id).route.addr.dst }).to_be()
}

#[no_mangle]
pub unsafe extern "C" fn rdma_set_local_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    minus1("rdma_set_local_ece", || {
        if ece.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's struct.
        let e = unsafe { &*ece };
        if e.comp_mask != 0 {
            return Err(libc::EINVAL);
        }
        crate::id::set_local_ece(id, e.vendor_id, e.options)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    minus1("rdma_get_remote_ece", || {
        if ece.is_null() {
            return Err(libc::EINVAL);
        }
        let (vendor, options) = crate::id::remote_ece(id)?;
        // SAFETY: the caller's struct.
        unsafe {
            (*ece).vendor_id = vendor;
            (*ece).options = options;
            (*ece).comp_mask = 0;
        }
        Ok(())
    })
}

// ---- QPs and SRQs --------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    minus1("rdma_create_qp", || {
        crate::qp::create_qp(id, pd, qp_init_attr)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut rdma_cm_id,
    qp_init_attr: *mut ibv_qp_init_attr_ex,
) -> c_int {
    minus1("rdma_create_qp_ex", || {
        crate::qp::create_qp_ex(id, qp_init_attr)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    guard::void("rdma_destroy_qp", || {
        let _ = crate::qp::destroy_qp(id);
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_create_srq(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> c_int {
    minus1("rdma_create_srq", || crate::qp::create_srq(id, pd, attr))
}

#[no_mangle]
pub unsafe extern "C" fn rdma_create_srq_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_srq_init_attr_ex,
) -> c_int {
    minus1("rdma_create_srq_ex", || crate::qp::create_srq_ex(id, attr))
}

#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    guard::void("rdma_destroy_srq", || {
        let _ = crate::qp::destroy_srq(id);
    })
}

// ---- addresses and endpoints ---------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    use crate::addrinfo::GaiError;
    // SAFETY: the caller's strings, hints and out pointer.
    let r = std::panic::catch_unwind(|| unsafe {
        crate::addrinfo::getaddrinfo(node, service, hints, res)
    });
    match r {
        Ok(Ok(())) => 0,
        Ok(Err(GaiError::Eai(rc))) => rc,
        Ok(Err(GaiError::Errno(e))) => {
            guard::set_errno(e);
            -1
        }
        Err(_) => {
            guard::set_errno(libc::EIO);
            -1
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    // SAFETY: a list from rdma_getaddrinfo.
    guard::void("rdma_freeaddrinfo", || unsafe {
        crate::addrinfo::freeaddrinfo(res)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the caller's pointers.
    minus1("rdma_create_ep", || unsafe {
        crate::addrinfo::create_ep(id, res, pd, qp_init_attr)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    guard::void("rdma_destroy_ep", || crate::addrinfo::destroy_ep(id))
}

// ---- multicast -----------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn rdma_join_multicast(
    _id: *mut rdma_cm_id,
    _addr: *mut sockaddr,
    _context: *mut c_void,
) -> c_int {
    minus1("rdma_join_multicast", || {
        Err(guard::unsupported("multicast (rdma_join_multicast)"))
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_join_multicast_ex(
    _id: *mut rdma_cm_id,
    _attr: *mut rdma_cm_join_mc_attr_ex,
    _context: *mut c_void,
) -> c_int {
    minus1("rdma_join_multicast_ex", || {
        Err(guard::unsupported("multicast (rdma_join_multicast_ex)"))
    })
}

#[no_mangle]
pub unsafe extern "C" fn rdma_leave_multicast(_id: *mut rdma_cm_id, _addr: *mut sockaddr) -> c_int {
    minus1("rdma_leave_multicast", || Err(libc::EADDRNOTAVAIL))
}
