//! Memory windows (type 1 and type 2, as rxe has them): `ibv_alloc_mw`,
//! `ibv_dealloc_mw` and `ibv_bind_mw` through the context's ops table, and
//! the bind / local-invalidate work requests `post` and the `ibv_wr_*`
//! builders turn into the soft NIC's local operations.

use libc::c_int;
use rdmakit_ibverbs_abi::{consts::*, *};
use rdmakit_soft::proto::{Access, MwBind, SendOp};

use crate::device::{Ctx, Obj};
use crate::guard::{self, nonnull, Res};
use crate::mem::pd_of;
use crate::post::{post, request};
use crate::qp::qp_of;

#[repr(C)]
pub(crate) struct Mw {
    pub mw: ibv_mw,
}

/// The context and MW behind a live `ibv_mw *`.
fn mw_of<'a>(mw: *mut ibv_mw) -> Res<(&'a Ctx, &'a mut ibv_mw)> {
    nonnull(mw)?;
    // SAFETY: non-NULL; the context is validated before use.
    let ctx = Ctx::from_ptr(unsafe { (*mw).context })?;
    if !ctx.is_live(mw) {
        return Err(libc::EINVAL);
    }
    // SAFETY: a live MW of ours; programs read `rkey`, the library writes it
    // after a bind, as libibverbs does.
    Ok((ctx, unsafe { &mut *mw }))
}

pub(crate) unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, type_: u32) -> *mut ibv_mw {
    guard::ptr("ibv_alloc_mw", || {
        let (ctx, h) = pd_of(pd)?;
        let type2 = match type_ {
            IBV_MW_TYPE_1 => false,
            IBV_MW_TYPE_2 => true,
            t => {
                return Err(guard::refuse(
                    libc::EINVAL,
                    "ibv_alloc_mw",
                    &format!("memory window type {t} (1 or 2)"),
                ))
            }
        };
        let key = ctx.dev.alloc_mw(h, type2).map_err(guard::soft)?;
        let b = Box::new(Mw {
            mw: ibv_mw {
                context: ctx.ibv(),
                pd,
                rkey: key,
                handle: key,
                type_,
            },
        });
        Ok(ctx.insert(Obj::Mw(b)) as *mut ibv_mw)
    })
}

pub(crate) unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    guard::int("ibv_dealloc_mw", || {
        let (ctx, m) = mw_of(mw)?;
        let key = m.handle;
        ctx.retire(mw, || ctx.dev.dealloc_mw(key).map_err(guard::soft))
    })
}

/// The bind operation of a window: the MR's lkey, range and rights.
fn bind_op(mw: &ibv_mw, new_rkey: u32, info: &ibv_mw_bind_info, type1: bool) -> Res<SendOp> {
    const V: &str = "ibv_bind_mw";
    if info.mw_access_flags & IBV_ACCESS_ZERO_BASED != 0 {
        return Err(guard::unsupported("zero-based memory windows"));
    }
    let mr_lkey = if info.mr.is_null() {
        if info.length != 0 {
            return Err(guard::refuse(
                libc::EINVAL,
                V,
                "a bind of length > 0 without an MR",
            ));
        }
        0
    } else {
        // SAFETY: the program passes its MR (validated by the soft NIC's
        // table when the bind executes).
        unsafe { (*info.mr).lkey }
    };
    Ok(SendOp::BindMw(MwBind {
        mw_rkey: mw.rkey,
        new_rkey,
        mr_lkey,
        addr: info.addr,
        length: info.length,
        access: Access(info.mw_access_flags & 0xf),
        type1,
    }))
}

/// `ibv_inc_rkey`: the next key of a window (the low 8 bits count).
fn inc_rkey(rkey: u32) -> u32 {
    (rkey & 0xffff_ff00) | (rkey.wrapping_add(1) & 0xff)
}

/// `ibv_bind_mw` of a type 1 window: a bind work request on `qp` under the
/// window's next key, which becomes `mw->rkey` once posted.
pub(crate) unsafe extern "C" fn bind_mw(
    qp: *mut ibv_qp,
    mw: *mut ibv_mw,
    bind: *mut ibv_mw_bind,
) -> c_int {
    guard::int("ibv_bind_mw", || {
        let (ctx, q) = qp_of(qp)?;
        let (mctx, m) = mw_of(mw)?;
        nonnull(bind)?;
        if !std::ptr::eq(ctx, mctx) || m.type_ != IBV_MW_TYPE_1 {
            return Err(guard::refuse(
                libc::EINVAL,
                "ibv_bind_mw",
                "a type 1 window of the QP's context",
            ));
        }
        // SAFETY: non-NULL bind from the caller.
        let b = unsafe { &*bind };
        let new_rkey = inc_rkey(m.rkey);
        let op = bind_op(m, new_rkey, &b.bind_info, true)?;
        let req = request(b.wr_id, op, Vec::new(), b.send_flags, None);
        post(ctx, q, std::slice::from_ref(&req)).map_err(|(_, e)| e)?;
        m.rkey = new_rkey;
        Ok(())
    })
}

/// The operation of an `IBV_WR_BIND_MW` work request (a type 2 window,
/// its new key from the request); the window's `rkey` follows.
pub(crate) fn bind_wr(ctx: &Ctx, b: &ibv_send_wr_bind_mw) -> Res<SendOp> {
    let (mctx, m) = mw_of(b.mw)?;
    if !std::ptr::eq(ctx, mctx) {
        return Err(libc::EINVAL);
    }
    let op = bind_op(m, b.rkey, &b.bind_info, false)?;
    m.rkey = b.rkey;
    Ok(op)
}
