//! rdma_cm IDs: what `rdma_create_id` hands out and every call on it.
//!
//! Each call follows rdma-core's librdmacm (cma.c) for what happens in user
//! space — which parameters it fills in, when it moves the QP, which calls
//! wait on a synchronous ID — and drives the engine where librdmacm writes a
//! command to the kernel.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Condvar, Mutex};

use libc::{c_int, c_void, sockaddr, AF_INET, AF_INET6};
use rdmakit_cm::ib::PathRec;
use rdmakit_cm::qp::QpAttrs;
use rdmakit_cm::rdma::ConnParam;
use rdmakit_ibverbs_abi::consts::*;
use rdmakit_ibverbs_abi::{ibv_gid, ibv_qp_attr};
use rdmakit_proto::{QpState, QpType};

use crate::abi::*;
use crate::addr::{self, PortClaim};
use crate::channel::{kind, Channel, CmEvent};
use crate::guard::{why, Res};
use crate::state::{state, Global};

/// An ID: the C struct first, so `rdma_cm_id *` leads back here.
#[repr(C)]
pub(crate) struct IdPriv {
    pub id: rdma_cm_id,
    /// The engine's ID.
    pub handle: u32,
    /// Created without a channel: calls wait for their event.
    pub sync: bool,
    /// Events handed to the application and events it acknowledged.
    counts: Mutex<(u32, u32)>,
    acked: Condvar,
    /// `rdma_create_ep`'s QP attributes for passive IDs.
    pub qp_init_attr: Option<rdmakit_ibverbs_abi::ibv_qp_init_attr>,
    /// `rdma_getaddrinfo`'s `ai_connect` data, sent with the REQ.
    pub connect: Vec<u8>,
    pub initiator_depth: u8,
    pub responder_resources: u8,
    /// A CONNECT_RESPONSE could not be completed: later REJECTED /
    /// DISCONNECTED events are not reported.
    pub connect_error: bool,
    pub claim: Option<PortClaim>,
    pub reuse: bool,
    pub ack_timeout: Option<u8>,
    pub local_ece: (u32, u32),
    pub remote_ece: (u32, u32),
}

impl IdPriv {
    /// A new ID (not yet in the global tables).
    pub(crate) fn alloc(
        channel: *mut rdma_event_channel,
        context: *mut c_void,
        ps: u32,
        qp_type: u32,
        handle: u32,
        sync: bool,
    ) -> Res<*mut IdPriv> {
        // SAFETY: rdma_cm_id is pointers, integers and sockaddr unions; all
        // zero is its initial value in librdmacm too (calloc).
        let mut id: rdma_cm_id = unsafe { std::mem::zeroed() };
        id.channel = channel;
        id.context = context;
        id.ps = ps;
        id.qp_type = qp_type;
        Ok(Box::into_raw(Box::new(IdPriv {
            id,
            handle,
            sync,
            counts: Mutex::new((0, 0)),
            acked: Condvar::new(),
            qp_init_attr: None,
            connect: Vec::new(),
            initiator_depth: 0,
            responder_resources: 0,
            connect_error: false,
            claim: None,
            reuse: false,
            ack_timeout: None,
            local_ece: (0, 0),
            remote_ece: (0, 0),
        })))
    }

    fn reported(&self) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.0 += 1;
    }

    pub(crate) fn acknowledged(&self) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.1 += 1;
        self.acked.notify_all();
    }

    /// Waits until every reported event is acknowledged.
    fn wait_acked(&self) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        while c.1 < c.0 {
            c = self.acked.wait(c).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Writes an IPv4 socket address into an `rdma_addr` union.
pub(crate) fn set_sockaddr(u: &mut rdma_sockaddr, a: SocketAddrV4) {
    // SAFETY: plain data.
    let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    s.sin_family = AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    // SAFETY: all-zero storage is valid; then the sin view is written.
    *u = unsafe { std::mem::zeroed() };
    u.sin = s;
}

/// An IPv4 address from a `sockaddr` (AF_INET, or an IPv4-mapped / the
/// unspecified AF_INET6 address).
///
/// # Safety
/// `a` is NULL or points at a sockaddr of its family's size.
pub(crate) unsafe fn sockaddr_v4(a: *const sockaddr) -> Res<SocketAddrV4> {
    if a.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's sockaddr; the family says how large it is.
    match unsafe { (*a).sa_family } as c_int {
        AF_INET => {
            // SAFETY: AF_INET means a sockaddr_in.
            let s = unsafe { &*a.cast::<libc::sockaddr_in>() };
            Ok(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
                u16::from_be(s.sin_port),
            ))
        }
        AF_INET6 => {
            // SAFETY: AF_INET6 means a sockaddr_in6.
            let s = unsafe { &*a.cast::<libc::sockaddr_in6>() };
            let v6 = std::net::Ipv6Addr::from(s.sin6_addr.s6_addr);
            let v4 = if v6.is_unspecified() {
                Some(Ipv4Addr::UNSPECIFIED)
            } else {
                v6.to_ipv4_mapped()
            };
            match v4 {
                Some(v4) => Ok(SocketAddrV4::new(v4, u16::from_be(s.sin6_port))),
                None => Err(why(
                    libc::EAFNOSUPPORT,
                    format_args!("{v6}: the soft NIC has IPv4 RoCEv2 GIDs only"),
                )),
            }
        }
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// Copies the caller's sockaddr into an `rdma_addr` union as given.
///
/// # Safety
/// `a` points at a sockaddr of its family's size.
unsafe fn copy_sockaddr(u: &mut rdma_sockaddr, a: *const sockaddr) {
    // SAFETY: the family says the size; the union holds 128 bytes.
    let len = match unsafe { (*a).sa_family } as c_int {
        AF_INET6 => std::mem::size_of::<libc::sockaddr_in6>(),
        _ => std::mem::size_of::<libc::sockaddr_in>(),
    };
    // SAFETY: as above.
    unsafe {
        *u = std::mem::zeroed();
        std::ptr::copy_nonoverlapping(a.cast::<u8>(), (u as *mut rdma_sockaddr).cast::<u8>(), len);
    }
}

/// Fills `route.path_rec` from a path.
pub(crate) fn set_path(id: &mut IdPriv, p: &PathRec) {
    if id.id.route.path_rec.is_null() {
        // SAFETY: malloc'd like librdmacm does, freed at destroy.
        let m = unsafe { libc::calloc(1, std::mem::size_of::<ibv_sa_path_rec>()) };
        if m.is_null() {
            return;
        }
        id.id.route.path_rec = m.cast();
    }
    let rec = ibv_sa_path_rec {
        dgid: ibv_gid { raw: p.dgid },
        sgid: ibv_gid { raw: p.sgid },
        dlid: 0,
        slid: 0,
        raw_traffic: 0,
        flow_label: p.flow_label.to_be(),
        hop_limit: p.hop_limit,
        traffic_class: p.traffic_class,
        reversible: 1,
        numb_path: 1,
        pkey: p.pkey.to_be(),
        sl: p.sl,
        mtu_selector: 2,
        mtu: p.mtu,
        rate_selector: 2,
        rate: p.rate,
        packet_life_time_selector: 2,
        packet_life_time: p.packet_life_time,
        preference: 0,
    };
    // SAFETY: non-NULL, sized for one record.
    unsafe { *id.id.route.path_rec = rec };
    id.id.route.num_paths = 1;
    id.id.route.addr.ibaddr.dgid = ibv_gid { raw: p.dgid };
    id.id.route.addr.ibaddr.sgid = ibv_gid { raw: p.sgid };
}

/// Validates an ID pointer and returns it with the lock held.
pub(crate) fn locked<'a>(
    id: *mut rdma_cm_id,
) -> Res<(std::sync::MutexGuard<'static, Global>, &'a mut IdPriv)> {
    let g = state()?;
    let p = id.cast::<IdPriv>();
    if id.is_null() || !g.is_live(p) {
        return Err(libc::EINVAL);
    }
    // SAFETY: live IDs stay valid while the lock is held (destroy removes
    // them under it before freeing).
    Ok((g, unsafe { &mut *p }))
}

fn qp_type_of(t: u32) -> QpType {
    match t {
        IBV_QPT_UD => QpType::Ud,
        IBV_QPT_UC => QpType::Uc,
        _ => QpType::Rc,
    }
}

fn cm_err(e: rdmakit_cm::Error) -> c_int {
    why(e.errno(), format_args!("{e}"))
}

/// `rdma_create_id` / `rdma_create_id2`.
pub(crate) fn create(
    channel: *mut rdma_event_channel,
    context: *mut c_void,
    ps: u32,
    qp_type: u32,
) -> Res<*mut rdma_cm_id> {
    if ![RDMA_PS_TCP, RDMA_PS_UDP, RDMA_PS_IB, RDMA_PS_IPOIB].contains(&ps) {
        return Err(why(
            libc::EINVAL,
            format_args!("unknown port space {ps:#x}"),
        ));
    }
    let mut g = state()?;
    let (ch, sync) = if channel.is_null() {
        (Channel::create()?.cast::<rdma_event_channel>(), true)
    } else {
        Channel::from_ptr(channel)?;
        (channel, false)
    };
    let h = g.cm.create_id(ps as u16, qp_type_of(qp_type));
    let idp = IdPriv::alloc(ch, context, ps, qp_type, h, sync)?;
    g.ids.insert(h, idp);
    g.live.insert(idp as usize);
    // SAFETY: just allocated.
    Ok(unsafe { &mut (*idp).id })
}

/// `rdma_destroy_id`.
pub(crate) fn destroy(id: *mut rdma_cm_id) -> Res<()> {
    let (mut g, p) = locked(id)?;
    let idp: *mut IdPriv = p;
    let now = g.now();
    g.cm.destroy(now, p.handle);
    g.flush();
    g.ids.remove(&p.handle);
    g.live.remove(&(idp as usize));
    if let Some(c) = p.claim.take() {
        g.ports.release(&c);
    }
    drop(g);
    if let Ok(c) = Channel::from_ptr(p.id.channel) {
        c.purge(idp);
    }
    if !p.id.event.is_null() {
        ack(p.id.event);
        p.id.event = std::ptr::null_mut();
    }
    p.wait_acked();
    if !p.id.route.path_rec.is_null() {
        // SAFETY: calloc'd in set_path.
        unsafe { libc::free(p.id.route.path_rec.cast()) };
    }
    if p.sync {
        // SAFETY: the ID's private channel, used by nobody else.
        unsafe { Channel::destroy(p.id.channel.cast()) };
    }
    // SAFETY: allocated by IdPriv::alloc; removed from every table above.
    drop(unsafe { Box::from_raw(idp) });
    Ok(())
}

/// `rdma_bind_addr`.
pub(crate) fn bind(id: *mut rdma_cm_id, addr: *const sockaddr) -> Res<()> {
    // SAFETY: the caller's sockaddr.
    let a = unsafe { sockaddr_v4(addr) }?;
    let (mut g, p) = locked(id)?;
    bind_locked(&mut g, p, a)?;
    // SAFETY: checked by sockaddr_v4.
    unsafe { copy_sockaddr(&mut p.id.route.addr.src, addr) };
    set_port(
        &mut p.id.route.addr.src,
        p.claim.as_ref().map_or(0, |c| c.port),
    );
    Ok(())
}

fn set_port(u: &mut rdma_sockaddr, port: u16) {
    // SAFETY: both views start with family; the port sits at the same offset.
    unsafe {
        match u.addr.sa_family as c_int {
            AF_INET6 => u.sin6.sin6_port = port.to_be(),
            _ => u.sin.sin_port = port.to_be(),
        }
    }
}

fn bind_locked(g: &mut Global, p: &mut IdPriv, a: SocketAddrV4) -> Res<()> {
    let dev = g.dev_addr();
    let ip = *a.ip();
    if !ip.is_unspecified() && !addr::is_soft(ip, dev) {
        return Err(if addr::host_has(ip) {
            why(
                libc::ENODEV,
                format_args!(
                    "{ip} is this host's but no RDMA device runs on it (the soft NIC is on {dev})"
                ),
            )
        } else {
            why(
                libc::EADDRNOTAVAIL,
                format_args!("{ip} is not an address of this host"),
            )
        });
    }
    if p.claim.is_some() {
        return Err(libc::EINVAL);
    }
    let claim = g.ports.claim(p.id.ps, ip, a.port(), g.endpoint(), dev)?;
    let port = claim.port;
    if let Err(e) = g.cm.bind(p.handle, SocketAddrV4::new(ip, port)) {
        g.ports.release(&claim);
        return Err(cm_err(e));
    }
    p.claim = Some(claim);
    if !ip.is_unspecified() {
        g.attach(p);
    }
    Ok(())
}

/// `rdma_listen`.
pub(crate) fn listen(id: *mut rdma_cm_id, _backlog: c_int) -> Res<()> {
    let (mut g, p) = locked(id)?;
    if p.claim.is_none() {
        // An unbound ID listens on the wildcard address, any port.
        bind_locked(&mut g, p, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
        set_sockaddr(
            &mut p.id.route.addr.src,
            SocketAddrV4::new(
                Ipv4Addr::UNSPECIFIED,
                p.claim.as_ref().map_or(0, |c| c.port),
            ),
        );
    }
    g.cm.listen(p.handle).map_err(cm_err)?;
    if let Some(c) = &p.claim {
        g.ports.set_listening(c, g.endpoint());
    }
    Ok(())
}

/// Waits for a synchronous ID's event (librdmacm's `ucma_complete`).
fn complete(idp: *mut IdPriv) -> Res<()> {
    // SAFETY: the caller owns the ID and passes it live.
    let p = unsafe { &mut *idp };
    if !p.sync {
        return Ok(());
    }
    if !p.id.event.is_null() {
        ack(p.id.event);
        p.id.event = std::ptr::null_mut();
    }
    let ev = get_event(p.id.channel)?;
    p.id.event = ev;
    // SAFETY: just returned by get_event.
    let e = unsafe { &*ev };
    if e.status != 0 {
        return Err(if e.event == kind::REJECTED {
            libc::ECONNREFUSED
        } else {
            e.status.abs()
        });
    }
    Ok(())
}

/// `rdma_resolve_addr`.
pub(crate) fn resolve_addr(
    id: *mut rdma_cm_id,
    src: *const sockaddr,
    dst: *const sockaddr,
    _timeout_ms: c_int,
) -> Res<()> {
    // SAFETY: the caller's sockaddrs.
    let d = unsafe { sockaddr_v4(dst) }?;
    let s = if src.is_null() {
        None
    } else {
        // SAFETY: as above.
        Some(unsafe { sockaddr_v4(src) }?)
    };
    let idp = {
        let (mut g, p) = locked(id)?;
        if p.claim.is_none() {
            let bind_to = s.unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
            bind_locked(&mut g, p, bind_to)?;
        }
        let port = p.claim.as_ref().map_or(0, |c| c.port);
        let local = g.local(port);
        let (dev, me) = (g.dev_addr(), g.endpoint());
        let peer = addr::route(&g.ports, dev, me, p.id.ps, *d.ip(), d.port()).map_err(|e| -e);
        g.cm.resolve_addr(p.handle, local, d, peer)
            .map_err(cm_err)?;
        g.attach(p);
        set_sockaddr(&mut p.id.route.addr.src, local);
        // SAFETY: checked by sockaddr_v4.
        unsafe { copy_sockaddr(&mut p.id.route.addr.dst, dst) };
        if let Ok(peer) = peer {
            p.id.route.addr.ibaddr.dgid = ibv_gid { raw: peer.gid };
        }
        g.flush();
        p as *mut IdPriv
    };
    complete(idp)
}

/// `rdma_resolve_route`.
pub(crate) fn resolve_route(id: *mut rdma_cm_id, _timeout_ms: c_int) -> Res<()> {
    let idp = {
        let (mut g, p) = locked(id)?;
        g.cm.resolve_route(p.handle).map_err(cm_err)?;
        if let Some(r) = g.cm.id(p.handle).and_then(|i| i.route) {
            set_path(p, &r);
        }
        g.flush();
        p as *mut IdPriv
    };
    complete(idp)
}

/// Connection parameters as librdmacm completes them
/// (`ucma_copy_conn_param_to_kern`).
fn conn_param(p: &IdPriv, param: *const rdma_conn_param, qp_num: u32, srq: bool) -> ConnParam {
    let mut c = ConnParam {
        private_data: p.connect.clone(),
        responder_resources: p.responder_resources,
        initiator_depth: p.initiator_depth,
        qp_num,
        srq,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    };
    if !param.is_null() {
        // SAFETY: the caller's struct.
        let q = unsafe { &*param };
        c.flow_control = q.flow_control != 0;
        c.retry_count = q.retry_count;
        c.rnr_retry_count = q.rnr_retry_count;
        if !q.private_data.is_null() && q.private_data_len > 0 {
            // SAFETY: the caller passes private_data_len readable bytes.
            let d = unsafe {
                std::slice::from_raw_parts(
                    q.private_data.cast::<u8>(),
                    usize::from(q.private_data_len),
                )
            };
            c.private_data.extend_from_slice(d);
        }
    }
    c
}

fn valid_param(g: &Global, p: &IdPriv, param: *const rdma_conn_param) -> Res<()> {
    if p.id.ps != RDMA_PS_TCP {
        return Ok(());
    }
    if p.id.qp.is_null() && param.is_null() {
        return Err(why(
            libc::EINVAL,
            "a TCP port space ID without a QP needs conn_param",
        ));
    }
    if param.is_null() {
        return Ok(());
    }
    // SAFETY: the caller's struct.
    let q = unsafe { &*param };
    if (q.responder_resources != RDMA_MAX_RESP_RES && q.responder_resources > g.dev.max_resp_res)
        || (q.initiator_depth != RDMA_MAX_INIT_DEPTH && q.initiator_depth > g.dev.max_init_depth)
    {
        return Err(why(
            libc::EINVAL,
            "responder resources / initiator depth above the device's",
        ));
    }
    Ok(())
}

fn qp_num_srq(p: &IdPriv, param: *const rdma_conn_param) -> (u32, bool) {
    if !p.id.qp.is_null() {
        // SAFETY: the ID's QP, created by rdma_create_qp or set by the caller.
        let qp = unsafe { &*p.id.qp };
        return (qp.qp_num, !qp.srq.is_null());
    }
    if param.is_null() {
        return (0, false);
    }
    // SAFETY: the caller's struct.
    let q = unsafe { &*param };
    (q.qp_num, q.srq != 0)
}

/// `rdma_connect`.
pub(crate) fn connect(id: *mut rdma_cm_id, param: *const rdma_conn_param) -> Res<()> {
    let idp = {
        let (mut g, p) = locked(id)?;
        valid_param(&g, p, param)?;
        // SAFETY (both): the caller's struct, when non-NULL.
        let q = (!param.is_null()).then(|| unsafe { &*param });
        p.initiator_depth = match q {
            Some(q) if q.initiator_depth != RDMA_MAX_INIT_DEPTH => q.initiator_depth,
            _ => g.dev.max_init_depth,
        };
        p.responder_resources = match q {
            Some(q) if q.responder_resources != RDMA_MAX_RESP_RES => q.responder_resources,
            _ => g.dev.max_resp_res,
        };
        let (qp_num, srq) = qp_num_srq(p, param);
        let c = conn_param(p, param, qp_num, srq);
        // The kernel finds the listener when the REQ arrives; find the
        // process owning a loopback port now, not at address resolution.
        if let Some(d) = g.cm.id(p.handle).and_then(|i| i.dst) {
            if addr::is_soft(*d.ip(), g.dev_addr()) || d.ip().is_unspecified() {
                let (dev, me) = (g.dev_addr(), g.endpoint());
                let peer = addr::route(&g.ports, dev, me, p.id.ps, *d.ip(), d.port())?;
                let gid = peer.gid;
                g.cm.retarget(p.handle, peer).map_err(cm_err)?;
                p.id.route.addr.ibaddr.dgid = ibv_gid { raw: gid };
                if !p.id.route.path_rec.is_null() {
                    // SAFETY: allocated by set_path.
                    unsafe { (*p.id.route.path_rec).dgid = ibv_gid { raw: gid } };
                }
            }
        }
        let now = g.now();
        g.cm.connect(now, p.handle, &c).map_err(cm_err)?;
        p.connect.clear();
        g.flush();
        p as *mut IdPriv
    };
    complete(idp)
}

/// `rdma_accept`.
pub(crate) fn accept(id: *mut rdma_cm_id, param: *const rdma_conn_param) -> Res<()> {
    let (idp, ud) = {
        let (mut g, p) = locked(id)?;
        valid_param(&g, p, param)?;
        if p.id.qp.is_null() && param.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's struct, when non-NULL.
        let q = (!param.is_null()).then(|| unsafe { &*param });
        p.initiator_depth = match q {
            Some(q) if q.initiator_depth != RDMA_MAX_INIT_DEPTH => q.initiator_depth,
            _ => p.initiator_depth.min(g.dev.max_init_depth),
        };
        p.responder_resources = match q {
            Some(q) if q.responder_resources != RDMA_MAX_RESP_RES => q.responder_resources,
            _ => p.responder_resources.min(g.dev.max_resp_res),
        };
        let ud = p.id.qp_type == IBV_QPT_UD;
        if !ud {
            crate::qp::modify_rtr(&g, p, p.responder_resources)?;
            crate::qp::modify_rts(&g, p, p.initiator_depth)?;
        }
        let (qp_num, srq) = qp_num_srq(p, param);
        let c = conn_param(p, param, qp_num, srq);
        let now = g.now();
        if let Err(e) = g.cm.accept(now, p.handle, &c) {
            crate::qp::modify_err(&g, p);
            return Err(cm_err(e));
        }
        g.flush();
        (p as *mut IdPriv, ud)
    };
    if ud {
        return Ok(());
    }
    complete(idp)
}

/// `rdma_reject` / `rdma_reject_ece`.
pub(crate) fn reject(id: *mut rdma_cm_id, data: *const c_void, len: u8, reason: u8) -> Res<()> {
    let (mut g, p) = locked(id)?;
    let pd = if data.is_null() || len == 0 {
        &[][..]
    } else {
        // SAFETY: the caller passes len readable bytes.
        unsafe { std::slice::from_raw_parts(data.cast::<u8>(), usize::from(len)) }
    };
    let now = g.now();
    g.cm.reject(now, p.handle, pd, reason).map_err(cm_err)?;
    g.flush();
    Ok(())
}

/// `rdma_disconnect`.
pub(crate) fn disconnect(id: *mut rdma_cm_id) -> Res<()> {
    let idp = {
        let (mut g, p) = locked(id)?;
        if p.id.verbs.is_null() {
            return Err(libc::EINVAL);
        }
        crate::qp::modify_err(&g, p);
        let now = g.now();
        g.cm.disconnect(now, p.handle).map_err(cm_err)?;
        g.flush();
        p as *mut IdPriv
    };
    complete(idp)
}

/// `rdma_establish`.
pub(crate) fn establish(id: *mut rdma_cm_id) -> Res<()> {
    let (mut g, p) = locked(id)?;
    if !p.id.qp.is_null() {
        return Err(libc::EINVAL);
    }
    g.cm.establish(p.handle).map_err(cm_err)?;
    g.flush();
    Ok(())
}

/// `rdma_notify`.
pub(crate) fn notify(id: *mut rdma_cm_id, event: u32) -> Res<()> {
    let (mut g, p) = locked(id)?;
    if event != IBV_EVENT_COMM_EST {
        return Err(libc::EINVAL);
    }
    g.cm.notify_established(p.handle).map_err(cm_err)?;
    g.flush();
    Ok(())
}

/// Writes engine QP attributes into an `ibv_qp_attr`; returns the mask.
pub(crate) fn to_ibv(a: &QpAttrs, out: &mut ibv_qp_attr) -> c_int {
    out.qp_state = a.state as u32;
    out.qp_access_flags = a.access.0;
    out.pkey_index = a.pkey_index;
    out.port_num = a.port;
    out.qkey = a.qkey;
    out.ah_attr.grh.dgid = ibv_gid { raw: a.av.dgid };
    out.ah_attr.grh.flow_label = a.av.flow_label;
    out.ah_attr.grh.sgid_index = a.av.sgid_index;
    out.ah_attr.grh.hop_limit = a.av.hop_limit;
    out.ah_attr.grh.traffic_class = a.av.traffic_class;
    out.ah_attr.dlid = 0;
    out.ah_attr.sl = a.av.sl;
    out.ah_attr.src_path_bits = 0;
    out.ah_attr.static_rate = a.av.static_rate;
    out.ah_attr.is_global = u8::from(a.mask.contains(rdmakit_proto::AttrMask::AV));
    out.ah_attr.port_num = a.av.port;
    out.path_mtu = u32::from(a.path_mtu);
    out.dest_qp_num = a.dest_qpn;
    out.rq_psn = a.rq_psn;
    out.max_dest_rd_atomic = a.max_dest_rd_atomic;
    out.min_rnr_timer = a.min_rnr_timer;
    out.timeout = a.timeout;
    out.retry_cnt = a.retry_cnt;
    out.rnr_retry = a.rnr_retry;
    out.sq_psn = a.sq_psn;
    out.max_rd_atomic = a.max_rd_atomic;
    a.mask.0 as c_int
}

/// The attributes for `state` of an ID's QP (`rdma_init_qp_attr`).
pub(crate) fn qp_attrs(g: &Global, p: &IdPriv, state: u32) -> Res<QpAttrs> {
    let st = match state {
        IBV_QPS_INIT => QpState::Init,
        IBV_QPS_RTR => QpState::Rtr,
        IBV_QPS_RTS => QpState::Rts,
        _ => return Err(libc::EINVAL),
    };
    let mut a = g.cm.init_qp_attr(p.handle, st).map_err(cm_err)?;
    if st == QpState::Rts {
        if let Some(t) = p.ack_timeout {
            a.timeout = t;
        }
    }
    Ok(a)
}

/// `rdma_init_qp_attr`.
pub(crate) fn init_qp_attr(
    id: *mut rdma_cm_id,
    attr: *mut ibv_qp_attr,
    mask: *mut c_int,
) -> Res<()> {
    if attr.is_null() || mask.is_null() {
        return Err(libc::EINVAL);
    }
    let (g, p) = locked(id)?;
    // SAFETY: the caller's struct.
    let out = unsafe { &mut *attr };
    let a = qp_attrs(&g, p, out.qp_state)?;
    // SAFETY: the caller's int.
    unsafe { *mask = to_ibv(&a, out) };
    Ok(())
}

/// `rdma_set_option`.
pub(crate) fn set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: usize,
) -> Res<()> {
    let (mut g, p) = locked(id)?;
    // One byte exactly, as the kernel's ucma_set_option_id takes it.
    let byte = || -> Res<u8> {
        if val.is_null() || len != 1 {
            return Err(libc::EINVAL);
        }
        // SAFETY: at least one readable byte.
        Ok(unsafe { *val.cast::<u8>() })
    };
    let int = || -> Res<c_int> {
        if val.is_null() || len < std::mem::size_of::<c_int>() {
            return Err(libc::EINVAL);
        }
        // SAFETY: an int's worth of readable bytes (maybe unaligned).
        Ok(unsafe { std::ptr::read_unaligned(val.cast::<c_int>()) })
    };
    match (level, name) {
        // The traffic class of the route resolved after it (its DSCP goes
        // on the wire; the ECN bits are the NIC's).
        (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) => g.cm.set_tos(p.handle, byte()?).map_err(cm_err)?,
        (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR) => p.reuse = int()? != 0,
        (RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY) => {
            int()?;
        }
        (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT) => p.ack_timeout = Some(byte()?.min(31)),
        (RDMA_OPTION_IB, RDMA_OPTION_IB_PATH) => {
            // A path from rdma_getaddrinfo: a RoCE route is computed, not
            // looked up, so resolve it as rdma_resolve_route would.
            g.cm.resolve_route(p.handle).map_err(cm_err)?;
            if let Some(r) = g.cm.id(p.handle).and_then(|i| i.route) {
                set_path(p, &r);
            }
            g.flush();
        }
        _ => return Err(libc::ENOSYS),
    }
    Ok(())
}

/// `rdma_migrate_id`.
pub(crate) fn migrate(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> Res<()> {
    let (g, p) = locked(id)?;
    if p.sync && channel.is_null() {
        return Err(libc::EINVAL);
    }
    let (to, sync) = if channel.is_null() {
        (Channel::create()?.cast::<rdma_event_channel>(), true)
    } else {
        Channel::from_ptr(channel)?;
        (channel, false)
    };
    let from = p.id.channel;
    let idp: *mut IdPriv = p;
    if let (Ok(f), Ok(t)) = (Channel::from_ptr(from), Channel::from_ptr(to)) {
        f.move_events(idp, t);
    }
    let was_sync = p.sync;
    p.id.channel = to;
    p.sync = sync;
    drop(g);
    if was_sync {
        if !p.id.event.is_null() {
            ack(p.id.event);
            p.id.event = std::ptr::null_mut();
        }
        // SAFETY: the ID's old private channel.
        unsafe { Channel::destroy(from.cast()) };
    }
    p.wait_acked();
    Ok(())
}

/// `rdma_get_cm_event`: the next event, processed as librdmacm does.
pub(crate) fn get_event(channel: *mut rdma_event_channel) -> Res<*mut rdma_cm_event> {
    let ch = Channel::from_ptr(channel)?;
    loop {
        let mut ev = ch.wait()?;
        if process(&mut ev) {
            let idp = ev.id_priv;
            // SAFETY: an event's ID lives until its events are acknowledged.
            unsafe { (*idp).reported() };
            return Ok(&mut Box::leak(ev).event);
        }
    }
}

/// librdmacm's per-event work; false drops the event.
fn process(ev: &mut CmEvent) -> bool {
    let Ok(g) = state() else { return true };
    if !g.is_live(ev.id_priv) {
        return false;
    }
    // SAFETY: live ID, lock held.
    let p = unsafe { &mut *ev.id_priv };
    match ev.event.event {
        kind::CONNECT_REQUEST => {
            // SAFETY: a connected-mode request carries conn params.
            let c = unsafe { ev.event.param.conn };
            if p.id.qp_type != IBV_QPT_UD {
                p.initiator_depth = c.initiator_depth;
                p.responder_resources = c.responder_resources;
            }
        }
        kind::CONNECT_RESPONSE => {
            if p.id.qp.is_null() {
                return true;
            }
            let ok = crate::qp::modify_rtr(&g, p, RDMA_MAX_RESP_RES)
                .and_then(|()| crate::qp::modify_rts(&g, p, RDMA_MAX_INIT_DEPTH));
            let mut g = g;
            let ok = ok.and_then(|()| g.cm.establish(p.handle).map_err(cm_err));
            g.flush();
            match ok {
                Ok(()) => ev.event.event = kind::ESTABLISHED,
                Err(_) => {
                    crate::qp::modify_err(&g, p);
                    ev.event.event = kind::CONNECT_ERROR;
                    ev.event.status = -1;
                    p.connect_error = true;
                }
            }
        }
        kind::REJECTED => {
            if p.connect_error {
                return false;
            }
            crate::qp::modify_err(&g, p);
        }
        kind::DISCONNECTED if p.connect_error => return false,
        _ => {}
    }
    true
}

/// `rdma_ack_cm_event`.
pub(crate) fn ack(event: *mut rdma_cm_event) {
    // SAFETY: events are the first field of a leaked Box<CmEvent>.
    let ev = unsafe { Box::from_raw(event.cast::<CmEvent>()) };
    // SAFETY: the ID waits in destroy until this acknowledgement.
    unsafe { (*ev.id_priv).acknowledged() };
}

/// `rdma_get_request`.
pub(crate) fn get_request(listen: *mut rdma_cm_id) -> Res<*mut rdma_cm_id> {
    let (pd, attr, ch) = {
        let (_g, l) = locked(listen)?;
        if !l.sync {
            return Err(libc::EINVAL);
        }
        if !l.id.event.is_null() {
            ack(l.id.event);
            l.id.event = std::ptr::null_mut();
        }
        (l.id.pd, l.qp_init_attr, l.id.channel)
    };
    let ev = get_event(ch)?;
    // SAFETY: just returned.
    let e = unsafe { &*ev };
    let keep = |err: c_int| -> Res<*mut rdma_cm_id> {
        if let Ok((_g, l)) = locked(listen) {
            l.id.event = ev;
        }
        Err(err)
    };
    if e.event == kind::REJECTED {
        return keep(libc::ECONNREFUSED);
    }
    if e.status != 0 {
        return keep(e.status.abs());
    }
    if e.event != kind::CONNECT_REQUEST {
        return keep(libc::EINVAL);
    }
    let child = e.id;
    if let Some(mut a) = attr {
        if let Err(err) = crate::qp::create_qp(child, pd, &mut a) {
            return keep(err);
        }
    }
    if let Ok((_g, c)) = locked(child) {
        c.id.event = ev;
    }
    Ok(child)
}

/// Marks an ID as created by `rdma_create_ep` for a passive endpoint.
pub(crate) fn set_passive_attrs(
    id: *mut rdma_cm_id,
    pd: *mut rdmakit_ibverbs_abi::ibv_pd,
    attr: Option<rdmakit_ibverbs_abi::ibv_qp_init_attr>,
) -> Res<()> {
    let (_g, p) = locked(id)?;
    if !pd.is_null() {
        p.id.pd = pd;
    }
    p.qp_init_attr = attr;
    Ok(())
}

/// Stores `ai_connect` data for the REQ.
pub(crate) fn set_connect_data(id: *mut rdma_cm_id, d: &[u8]) -> Res<()> {
    let (_g, p) = locked(id)?;
    p.connect = d.to_vec();
    Ok(())
}

/// `rdma_set_local_ece`.
pub(crate) fn set_local_ece(id: *mut rdma_cm_id, vendor: u32, options: u32) -> Res<()> {
    let (_g, p) = locked(id)?;
    if !p.id.qp.is_null() || vendor == 0 {
        return Err(libc::EINVAL);
    }
    p.local_ece = (vendor, options);
    Ok(())
}

/// `rdma_get_remote_ece`.
pub(crate) fn remote_ece(id: *mut rdma_cm_id) -> Res<(u32, u32)> {
    let (_g, p) = locked(id)?;
    if !p.id.qp.is_null() {
        return Err(libc::EINVAL);
    }
    Ok(p.remote_ece)
}

/// The event kind of a pending event pointer (tests, diagnostics).
#[allow(dead_code)]
pub(crate) fn event_kind(e: *const rdma_cm_event) -> u32 {
    // SAFETY: a live event.
    unsafe { (*e).event }
}

/// Port of a sockaddr in an `rdma_addr` union, host order.
pub(crate) fn port_of(u: &rdma_sockaddr) -> u16 {
    // SAFETY: both views have the port at the same offset after the family.
    unsafe {
        match u.addr.sa_family as c_int {
            AF_INET6 => u16::from_be(u.sin6.sin6_port),
            AF_INET => u16::from_be(u.sin.sin_port),
            _ => 0,
        }
    }
}
