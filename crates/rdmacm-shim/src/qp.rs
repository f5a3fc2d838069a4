//! QPs, CQs and SRQs on an ID (`rdma_create_qp`, `rdma_create_srq`, ...)
//! and the QP transitions librdmacm makes for the application.

use libc::c_int;
use rdmakit_ibverbs_abi::consts::*;
use rdmakit_ibverbs_abi::{
    ibv_pd, ibv_qp, ibv_qp_attr, ibv_qp_init_attr, ibv_qp_init_attr_ex, ibv_srq_init_attr,
    ibv_srq_init_attr_ex,
};

use crate::abi::*;
use crate::guard::{caller_mut, why, Res};
use crate::id::{locked, qp_attrs, to_ibv, IdPriv};
use crate::state::Global;

fn modify(g: &Global, qp: *mut ibv_qp, attr: &mut ibv_qp_attr, mask: c_int) -> Res<()> {
    // SAFETY: a QP of the ID; libibverbs validates it.
    match unsafe { (g.v.ibv_modify_qp)(qp, attr, mask) } {
        0 => Ok(()),
        e => Err(e),
    }
}

fn modify_to(g: &Global, p: &IdPriv, state: u32, adjust: impl FnOnce(&mut ibv_qp_attr)) -> Res<()> {
    let a = qp_attrs(g, p, state)?;
    let mut attr = ibv_qp_attr::default();
    let mask = to_ibv(&a, &mut attr);
    adjust(&mut attr);
    modify(g, p.id.qp, &mut attr, mask)
}

/// `ucma_modify_qp_rtr`: INIT again (access rights now known), then RTR.
pub(crate) fn modify_rtr(g: &Global, p: &IdPriv, resp_res: u8) -> Res<()> {
    if p.id.qp.is_null() {
        return Ok(());
    }
    modify_to(g, p, IBV_QPS_INIT, |_| {})?;
    modify_to(g, p, IBV_QPS_RTR, |a| {
        if resp_res != RDMA_MAX_RESP_RES {
            a.max_dest_rd_atomic = resp_res;
        }
    })
}

/// `ucma_modify_qp_rts`.
pub(crate) fn modify_rts(g: &Global, p: &IdPriv, init_depth: u8) -> Res<()> {
    if p.id.qp.is_null() {
        return Ok(());
    }
    modify_to(g, p, IBV_QPS_RTS, |a| {
        if init_depth != RDMA_MAX_INIT_DEPTH {
            a.max_rd_atomic = init_depth;
        }
    })
}

/// `ucma_modify_qp_err`.
pub(crate) fn modify_err(g: &Global, p: &IdPriv) {
    if p.id.qp.is_null() {
        return;
    }
    let mut a = ibv_qp_attr {
        qp_state: IBV_QPS_ERR,
        ..ibv_qp_attr::default()
    };
    let _ = modify(g, p.id.qp, &mut a, IBV_QP_STATE as c_int);
}

/// Brings a new QP to where librdmacm leaves it: INIT for connected QPs,
/// RTS for UD (`ucma_init_conn_qp`, `ucma_init_ud_qp`).
fn init_qp(g: &Global, p: &IdPriv, qp: *mut ibv_qp) -> Res<()> {
    let a = qp_attrs(g, p, IBV_QPS_INIT)?;
    let mut attr = ibv_qp_attr::default();
    let mask = to_ibv(&a, &mut attr);
    modify(g, qp, &mut attr, mask)?;
    if p.id.qp_type != IBV_QPT_UD {
        return Ok(());
    }
    let mut a = ibv_qp_attr {
        qp_state: IBV_QPS_RTR,
        ..ibv_qp_attr::default()
    };
    modify(g, qp, &mut a, IBV_QP_STATE as c_int)?;
    let mut a = ibv_qp_attr {
        qp_state: IBV_QPS_RTS,
        sq_psn: 0,
        ..ibv_qp_attr::default()
    };
    modify(g, qp, &mut a, (IBV_QP_STATE | IBV_QP_SQ_PSN) as c_int)
}

fn destroy_cqs(g: &Global, p: &mut IdPriv) {
    // SAFETY (all): objects the ID holds; libibverbs validates them.
    unsafe {
        if !p.id.recv_cq.is_null() {
            (g.v.ibv_destroy_cq)(p.id.recv_cq);
            if !p.id.send_cq.is_null() && p.id.send_cq != p.id.recv_cq {
                (g.v.ibv_destroy_cq)(p.id.send_cq);
            }
            p.id.send_cq = std::ptr::null_mut();
            p.id.recv_cq = std::ptr::null_mut();
        }
        if !p.id.recv_cq_channel.is_null() {
            (g.v.ibv_destroy_comp_channel)(p.id.recv_cq_channel);
            if !p.id.send_cq_channel.is_null() && p.id.send_cq_channel != p.id.recv_cq_channel {
                (g.v.ibv_destroy_comp_channel)(p.id.send_cq_channel);
            }
            p.id.send_cq_channel = std::ptr::null_mut();
            p.id.recv_cq_channel = std::ptr::null_mut();
        }
    }
}

fn create_cqs(g: &Global, p: &mut IdPriv, send: u32, recv: u32) -> Res<()> {
    let ctx = p.id.verbs;
    let idp: *mut IdPriv = &mut *p;
    let mk = |size: u32| -> Res<(*mut _, *mut _)> {
        // SAFETY: the ID's context (attached before any QP can exist).
        let ch = unsafe { (g.v.ibv_create_comp_channel)(ctx) };
        if ch.is_null() {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::ENOMEM));
        }
        // SAFETY: as above; the CQ's context pointer is the ID, as librdmacm sets it.
        let cq = unsafe {
            (g.v.ibv_create_cq)(
                ctx,
                c_int::try_from(size).unwrap_or(c_int::MAX),
                idp.cast(),
                ch,
                0,
            )
        };
        if cq.is_null() {
            let e = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::ENOMEM);
            // SAFETY: just created.
            unsafe { (g.v.ibv_destroy_comp_channel)(ch) };
            return Err(e);
        }
        Ok((ch, cq))
    };
    if recv > 0 {
        match mk(recv) {
            Ok((ch, cq)) => {
                p.id.recv_cq_channel = ch;
                p.id.recv_cq = cq;
            }
            Err(e) => return Err(e),
        }
    }
    if send > 0 {
        match mk(send) {
            Ok((ch, cq)) => {
                p.id.send_cq_channel = ch;
                p.id.send_cq = cq;
            }
            Err(e) => {
                destroy_cqs(g, p);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// `rdma_create_qp`.
pub(crate) fn create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> Res<()> {
    // SAFETY: the caller's struct.
    let a = unsafe { caller_mut(attr) }?;
    let mut ex = ibv_qp_init_attr_ex {
        comp_mask: IBV_QP_INIT_ATTR_PD,
        pd,
        // The other extended fields stay zero (comp_mask PD).
        ..rdmakit_ibverbs_abi::convert::qp_init_attr_ex(a)
    };
    let r = create_qp_ex(id, &mut ex);
    a.send_cq = ex.send_cq;
    a.recv_cq = ex.recv_cq;
    a.srq = ex.srq;
    a.cap = ex.cap;
    r
}

/// `rdma_create_qp_ex`.
pub(crate) fn create_qp_ex(id: *mut rdma_cm_id, attr: *mut ibv_qp_init_attr_ex) -> Res<()> {
    // SAFETY: the caller's struct.
    let a = unsafe { caller_mut(attr) }?;
    let (g, p) = locked(id)?;
    if !p.id.qp.is_null() {
        return Err(libc::EINVAL);
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
        a.comp_mask |= IBV_QP_INIT_ATTR_PD;
        a.pd = p.id.pd;
    } else {
        // SAFETY: the caller's PD.
        if p.id.verbs != unsafe { (*a.pd).context } {
            return Err(why(
                libc::EINVAL,
                "the PD belongs to another context than the ID",
            ));
        }
    }
    if p.id.verbs.is_null() || a.pd.is_null() {
        return Err(why(libc::EINVAL, "the ID is not bound to a device yet"));
    }
    if (!p.id.recv_cq.is_null() && !a.recv_cq.is_null() && p.id.recv_cq != a.recv_cq)
        || (!p.id.send_cq.is_null() && !a.send_cq.is_null() && p.id.send_cq != a.send_cq)
    {
        return Err(libc::EINVAL);
    }
    let send = if !a.send_cq.is_null() || !p.id.send_cq.is_null() {
        0
    } else {
        a.cap.max_send_wr
    };
    let recv = if !a.recv_cq.is_null() || !p.id.recv_cq.is_null() {
        0
    } else {
        a.cap.max_recv_wr
    };
    create_cqs(&g, p, send, recv)?;
    if a.send_cq.is_null() {
        a.send_cq = p.id.send_cq;
    }
    if a.recv_cq.is_null() {
        a.recv_cq = p.id.recv_cq;
    }
    if !p.id.srq.is_null() && a.srq.is_null() {
        a.srq = p.id.srq;
    }
    let qp = if a.comp_mask & !IBV_QP_INIT_ATTR_PD == 0 {
        let mut basic = rdmakit_ibverbs_abi::convert::qp_init_attr_basic(a);
        // SAFETY: a PD of the ID's context.
        let qp = unsafe { (g.v.ibv_create_qp)(a.pd, &mut basic) };
        a.cap = basic.cap;
        qp
    } else {
        // The extended create of the context (what ibv_create_qp_ex inlines).
        // SAFETY: contexts of rdmakit's libibverbs are verbs_contexts.
        let vctx = unsafe { &*rdmakit_ibverbs_abi::verbs_context_of(p.id.verbs) };
        match vctx.create_qp_ex {
            // SAFETY: the context's own op with its own context.
            Some(f) => unsafe { f(p.id.verbs, a) },
            None => std::ptr::null_mut(),
        }
    };
    if qp.is_null() {
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL);
        destroy_cqs(&g, p);
        return Err(e);
    }
    if let Err(e) = init_qp(&g, p, qp) {
        // SAFETY: just created.
        unsafe { (g.v.ibv_destroy_qp)(qp) };
        destroy_cqs(&g, p);
        return Err(e);
    }
    // SAFETY: just created.
    p.id.pd = unsafe { (*qp).pd };
    p.id.qp = qp;
    Ok(())
}

/// `rdma_destroy_qp`.
pub(crate) fn destroy_qp(id: *mut rdma_cm_id) -> Res<()> {
    let (g, p) = locked(id)?;
    if !p.id.qp.is_null() {
        // SAFETY: the ID's QP.
        unsafe { (g.v.ibv_destroy_qp)(p.id.qp) };
    }
    p.id.qp = std::ptr::null_mut();
    destroy_cqs(&g, p);
    Ok(())
}

/// `rdma_create_srq_ex`: basic SRQs (XRC is not supported by the soft NIC).
pub(crate) fn create_srq_ex(id: *mut rdma_cm_id, attr: *mut ibv_srq_init_attr_ex) -> Res<()> {
    // SAFETY: the caller's struct.
    let a = unsafe { caller_mut(attr) }?;
    let (g, p) = locked(id)?;
    if a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE != 0 && a.srq_type != IBV_SRQT_BASIC {
        return Err(crate::guard::unsupported(
            "XRC / tag-matching SRQs through rdma_cm",
        ));
    }
    let pd = if a.comp_mask & IBV_SRQ_INIT_ATTR_PD != 0 && !a.pd.is_null() {
        a.pd
    } else {
        p.id.pd
    };
    if pd.is_null() {
        return Err(why(libc::EINVAL, "the ID is not bound to a device yet"));
    }
    let mut basic = ibv_srq_init_attr {
        srq_context: a.srq_context,
        attr: a.attr,
    };
    // SAFETY: a PD of the ID's context.
    let srq = unsafe { (g.v.ibv_create_srq)(pd, &mut basic) };
    if srq.is_null() {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL));
    }
    a.attr = basic.attr;
    p.id.srq = srq;
    Ok(())
}

/// `rdma_create_srq`.
pub(crate) fn create_srq(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> Res<()> {
    // SAFETY: the caller's struct.
    let a = unsafe { caller_mut(attr) }?;
    let mut ex = ibv_srq_init_attr_ex {
        srq_context: a.srq_context,
        attr: a.attr,
        comp_mask: IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
        srq_type: IBV_SRQT_BASIC,
        pd,
        // SAFETY: plain data; the XRC / tag-matching fields stay zero.
        ..unsafe { std::mem::zeroed() }
    };
    let r = create_srq_ex(id, &mut ex);
    a.attr = ex.attr;
    r
}

/// `rdma_destroy_srq`.
pub(crate) fn destroy_srq(id: *mut rdma_cm_id) -> Res<()> {
    let (g, p) = locked(id)?;
    if !p.id.srq.is_null() {
        // SAFETY: the ID's SRQ.
        unsafe { (g.v.ibv_destroy_srq)(p.id.srq) };
    }
    p.id.srq = std::ptr::null_mut();
    destroy_cqs(&g, p);
    Ok(())
}
