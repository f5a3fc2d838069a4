//! Queue pairs and shared receive queues: create, modify, query, destroy.

use std::sync::Mutex;

use libc::c_int;
use rdmakit_ibverbs_abi::{consts::*, *};
use rdmakit_soft::proto::{AttrMask, QpType};
use rdmakit_soft::{Av, Gid, QpInit};

use crate::cq::cq_of;
use crate::device::{Ctx, Obj};
use crate::guard::{self, nonnull, Res};
use crate::mem::pd_of;
use crate::wr::Batch;

/// A QP. `ex` comes first: `ibv_qp *` and `ibv_qp_ex *` are its address.
#[repr(C)]
pub(crate) struct Qp {
    pub ex: ibv_qp_ex,
    pub qpn: u32,
    pub qp_type: QpType,
    /// The `ibv_wr_*` batch being built.
    pub batch: Mutex<Batch>,
    /// The primary path's address vector as last set (`ibv_query_qp`
    /// returns it, as the kernel does).
    pub av: Mutex<ibv_ah_attr>,
}

#[repr(C)]
pub(crate) struct Srq {
    pub srq: ibv_srq,
    pub attr: Mutex<ibv_srq_attr>,
}

/// The context and QP behind a live `ibv_qp *`.
pub(crate) fn qp_of<'a>(qp: *mut ibv_qp) -> Res<(&'a Ctx, &'a Qp)> {
    nonnull(qp)?;
    // SAFETY: non-NULL; the context is validated before use.
    let ctx = Ctx::from_ptr(unsafe { (*qp).context })?;
    if !ctx.is_live(qp) {
        return Err(libc::EINVAL);
    }
    // SAFETY: a live QP of ours: the ibv_qp is the prefix of a Qp.
    Ok((ctx, unsafe { &*qp.cast::<Qp>() }))
}

/// The context and SRQ behind a live `ibv_srq *`.
pub(crate) fn srq_of<'a>(srq: *mut ibv_srq) -> Res<(&'a Ctx, &'a Srq)> {
    nonnull(srq)?;
    // SAFETY: non-NULL; the context is validated before use.
    let ctx = Ctx::from_ptr(unsafe { (*srq).context })?;
    if !ctx.is_live(srq) {
        return Err(libc::EINVAL);
    }
    // SAFETY: a live SRQ of ours.
    Ok((ctx, unsafe { &*srq.cast::<Srq>() }))
}

fn qp_type(t: u32) -> Res<QpType> {
    if let Some(t) = convert::qp_type_from_c(t) {
        return Ok(t);
    }
    match t {
        IBV_QPT_XRC_SEND | IBV_QPT_XRC_RECV => Err(guard::unsupported("XRC QPs")),
        IBV_QPT_RAW_PACKET => Err(guard::unsupported("raw packet QPs")),
        IBV_QPT_DRIVER => Err(guard::unsupported("driver QPs (DC, SRD)")),
        _ => Err(libc::EINVAL),
    }
}

fn create(ctx: &Ctx, pd: *mut ibv_pd, a: &mut ibv_qp_init_attr_ex) -> Res<*mut Qp> {
    let (pctx, pdh) = pd_of(pd)?;
    if !std::ptr::eq(pctx, ctx) {
        return Err(libc::EINVAL);
    }
    let t = qp_type(a.qp_type)?;
    let (_, scq) = cq_of(a.send_cq)?;
    let (_, rcq) = cq_of(a.recv_cq)?;
    let srq = if a.srq.is_null() {
        None
    } else {
        Some(srq_of(a.srq)?.1.srq.handle)
    };
    let init = QpInit {
        qp_type: t,
        pd: pdh,
        send_cq: scq.handle,
        recv_cq: rcq.handle,
        srq,
        max_send_wr: a.cap.max_send_wr,
        max_recv_wr: a.cap.max_recv_wr,
        max_send_sge: a.cap.max_send_sge,
        max_recv_sge: a.cap.max_recv_sge,
        max_inline_data: a.cap.max_inline_data,
        sq_sig_all: a.sq_sig_all != 0,
    };
    let qpn = ctx.dev.create_qp(&init).map_err(guard::soft)?;
    if let Ok((_, got)) = ctx.dev.query_qp(qpn) {
        a.cap = caps(&got);
    }
    // SAFETY: ibv_qp_ex is pointers, Options, integers and pthread objects.
    let mut ex: ibv_qp_ex = unsafe { std::mem::zeroed() };
    let b = &mut ex.qp_base;
    b.context = ctx.ibv();
    b.qp_context = a.qp_context;
    b.pd = pd;
    b.send_cq = a.send_cq;
    b.recv_cq = a.recv_cq;
    b.srq = a.srq;
    b.handle = qpn;
    b.qp_num = qpn;
    b.state = IBV_QPS_RESET;
    b.qp_type = a.qp_type;
    crate::wr::fill_table(&mut ex);
    let q = Box::new(Qp {
        ex,
        qpn,
        qp_type: t,
        batch: Mutex::new(Batch::default()),
        av: Mutex::new(ibv_ah_attr::default()),
    });
    let addr = ctx.insert(Obj::Qp(q));
    ctx.objs().qps.insert(qpn, addr);
    Ok(addr as *mut Qp)
}

fn caps(i: &QpInit) -> ibv_qp_cap {
    ibv_qp_cap {
        max_send_wr: i.max_send_wr,
        max_recv_wr: i.max_recv_wr,
        max_send_sge: i.max_send_sge,
        max_recv_sge: i.max_recv_sge,
        max_inline_data: i.max_inline_data,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    guard::ptr("ibv_create_qp", || {
        let (ctx, _) = pd_of(pd)?;
        nonnull(attr)?;
        // SAFETY: non-NULL attributes from the caller.
        let a = unsafe { &mut *attr };
        let mut ex = convert::qp_init_attr_ex(a);
        let q = create(ctx, pd, &mut ex)?;
        a.cap = ex.cap;
        Ok(q.cast())
    })
}

pub(crate) unsafe extern "C" fn create_qp_ex(
    context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    guard::ptr("ibv_create_qp_ex", || {
        let ctx = Ctx::from_ptr(context)?;
        nonnull(attr)?;
        // SAFETY: non-NULL attributes from the caller.
        let a = unsafe { &mut *attr };
        check_init_ex(a)?;
        Ok(create(ctx, a.pd, a)?.cast())
    })
}

/// rxe's `check_qp_init_attr`: PD, create flags and send-ops flags are the
/// attributes it knows; no create flag is supported (0 is fine); each QP
/// type has its own set of `ibv_wr_*` operations.
fn check_init_ex(a: &ibv_qp_init_attr_ex) -> Res<()> {
    const V: &str = "ibv_create_qp_ex";
    let known =
        IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if a.comp_mask & !known != 0 {
        return Err(guard::unsupported(
            "ibv_create_qp_ex attributes other than PD, create flags and send-ops flags (XRC, RSS, TSO)",
        ));
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
        return Err(guard::refuse(
            libc::EINVAL,
            V,
            "no PD (IBV_QP_INIT_ATTR_PD)",
        ));
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0 {
        return Err(guard::unsupported(
            "QP create flags (multicast loopback blocking, scatter FCS, VLAN stripping, source QPN)",
        ));
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
        let rc = IBV_QP_EX_WITH_RDMA_WRITE
            | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
            | IBV_QP_EX_WITH_SEND
            | IBV_QP_EX_WITH_SEND_WITH_IMM
            | IBV_QP_EX_WITH_RDMA_READ
            | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
            | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
            | IBV_QP_EX_WITH_LOCAL_INV
            | IBV_QP_EX_WITH_BIND_MW
            | IBV_QP_EX_WITH_SEND_WITH_INV;
        let uc = IBV_QP_EX_WITH_RDMA_WRITE
            | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
            | IBV_QP_EX_WITH_SEND
            | IBV_QP_EX_WITH_SEND_WITH_IMM
            | IBV_QP_EX_WITH_BIND_MW
            | IBV_QP_EX_WITH_SEND_WITH_INV;
        let ud = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
        let ok = match a.qp_type {
            IBV_QPT_RC => rc,
            IBV_QPT_UC => uc,
            IBV_QPT_UD => ud,
            _ => 0,
        };
        if a.send_ops_flags & !ok != 0 {
            return Err(guard::unsupported(&format!(
                "send_ops_flags {:#x} on this QP type (TSO and atomic write are not \
                 available; UD has SEND only, UC no READ, atomics or local invalidate)",
                a.send_ops_flags & !ok
            )));
        }
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    match qp_of(qp) {
        Ok(_) => qp.cast(),
        Err(e) => {
            guard::set_errno(e);
            std::ptr::null_mut()
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    guard::int("ibv_modify_qp", || {
        let (ctx, q) = qp_of(qp)?;
        nonnull(attr)?;
        // SAFETY: non-NULL attributes from the caller.
        let a = unsafe { &*attr };
        let mask = AttrMask(attr_mask as u32);
        let p = convert::qp_attr_for_modify(a, mask).map_err(|_| libc::EINVAL)?;
        let av = if mask.contains(AttrMask::AV) {
            // RoCE addresses by GID; an AV without a GRH is refused (rxe),
            // except LID 0 on the loopback device (`lid_destination`),
            // whose traffic class is 0 (no GRH, no class).
            Some(if a.ah_attr.is_global == 0 {
                Av::from(
                    ctx.dev
                        .lid_destination("ibv_modify_qp", a.ah_attr.dlid)
                        .map_err(guard::soft)?,
                )
            } else {
                Av {
                    dgid: Gid(a.ah_attr.grh.dgid.raw),
                    traffic_class: a.ah_attr.grh.traffic_class,
                }
            })
        } else {
            None
        };
        if mask.contains(AttrMask::ALT_PATH) {
            return Err(guard::unsupported("alternate paths (IBV_QP_ALT_PATH)"));
        }
        ctx.dev
            .modify_qp(q.qpn, &p, mask, av)
            .map_err(guard::soft)?;
        if mask.contains(AttrMask::AV) {
            *q.av.lock().unwrap_or_else(|p| p.into_inner()) = a.ah_attr;
        }
        if mask.contains(AttrMask::STATE) {
            let qp_mut = (q as *const Qp).cast_mut();
            // SAFETY: a live QP; `state` is informative for the program,
            // written as libibverbs writes it after a successful modify.
            unsafe { (*qp_mut).ex.qp_base.state = a.qp_state };
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard::int("ibv_query_qp", || {
        let (ctx, q) = qp_of(qp)?;
        nonnull(attr)?;
        nonnull(init_attr)?;
        let (p, init) = ctx.dev.query_qp(q.qpn).map_err(guard::soft)?;
        let out = ibv_qp_attr {
            // The soft NIC's current state is the state.
            cur_qp_state: p.qp_state as u32,
            path_mig_state: IBV_MIG_MIGRATED,
            cap: caps(&init),
            ah_attr: ibv_ah_attr {
                port_num: p.port_num,
                ..*q.av.lock().unwrap_or_else(|p| p.into_inner())
            },
            ..ibv_qp_attr::from(&p)
        };
        // SAFETY: both checked non-NULL; q's fields are live.
        unsafe {
            *attr = out;
            let b = &q.ex.qp_base;
            *init_attr = ibv_qp_init_attr {
                qp_context: b.qp_context,
                send_cq: b.send_cq,
                recv_cq: b.recv_cq,
                srq: b.srq,
                cap: caps(&init),
                qp_type: b.qp_type,
                sq_sig_all: c_int::from(init.sq_sig_all),
            };
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    guard::int("ibv_destroy_qp", || {
        let (ctx, q) = qp_of(qp)?;
        let qpn = q.qpn;
        ctx.retire(qp, || ctx.dev.destroy_qp(qpn).map_err(guard::soft))?;
        ctx.objs().qps.remove(&qpn);
        Ok(())
    })
}

// ---- SRQ -------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    guard::ptr("ibv_create_srq", || {
        let (ctx, pdh) = pd_of(pd)?;
        nonnull(attr)?;
        // SAFETY: non-NULL attributes from the caller.
        let a = unsafe { &mut *attr };
        let h = ctx
            .dev
            .create_srq(pdh, a.attr.max_wr, a.attr.max_sge, a.attr.srq_limit)
            .map_err(guard::soft)?;
        // SAFETY: ibv_srq is pointers, integers and pthread objects.
        let mut srq: ibv_srq = unsafe { std::mem::zeroed() };
        srq.context = ctx.ibv();
        srq.srq_context = a.srq_context;
        srq.pd = pd;
        srq.handle = h;
        let s = Box::new(Srq {
            srq,
            attr: Mutex::new(a.attr),
        });
        let addr = ctx.insert(Obj::Srq(s));
        ctx.objs().srqs.insert(h, addr);
        Ok(addr as *mut ibv_srq)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> c_int {
    guard::int("ibv_modify_srq", || {
        let (ctx, s) = srq_of(srq)?;
        nonnull(attr)?;
        // SAFETY: non-NULL attributes from the caller.
        let a = unsafe { &*attr };
        let mask = mask as u32;
        if mask & IBV_SRQ_MAX_WR != 0 {
            return Err(guard::unsupported("resizing an SRQ (IBV_SRQ_MAX_WR)"));
        }
        if mask & IBV_SRQ_LIMIT != 0 {
            ctx.dev
                .arm_srq(s.srq.handle, a.srq_limit)
                .map_err(guard::soft)?;
            s.attr.lock().unwrap_or_else(|p| p.into_inner()).srq_limit = a.srq_limit;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    guard::int("ibv_query_srq", || {
        let (_, s) = srq_of(srq)?;
        nonnull(attr)?;
        // SAFETY: checked non-NULL.
        unsafe { *attr = *s.attr.lock().unwrap_or_else(|p| p.into_inner()) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    guard::int("ibv_destroy_srq", || {
        let (ctx, s) = srq_of(srq)?;
        let h = s.srq.handle;
        ctx.retire(srq, || ctx.dev.destroy_srq(h).map_err(guard::soft))?;
        ctx.objs().srqs.remove(&h);
        Ok(())
    })
}

/// `ibv_query_qp_data_in_order@IBVERBS_1.14`: 0, "not guaranteed" — what
/// rdma-core answers for a provider without the op (rxe among them).
#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp_data_in_order(
    qp: *mut ibv_qp,
    _op: u32,
    _flags: u32,
) -> c_int {
    match qp_of(qp) {
        Ok(_) => 0,
        Err(e) => {
            guard::set_errno(e);
            0
        }
    }
}
