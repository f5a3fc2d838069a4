//! The `ibv_wr_*` work-request builders of `ibv_qp_ex` (perftest's default
//! path): `ibv_wr_start`, an operation, its addressing and data, then
//! `ibv_wr_complete` posts the batch (or `ibv_wr_abort` drops it).

use libc::{c_int, c_void, size_t};
use rdmakit_ibverbs_abi::*;
use rdmakit_soft::proto::{AddressHandle, SendOp, Sge, UdDest};
use rdmakit_soft::SendRequest;

use crate::guard;
use crate::mem::ah_handle;
use crate::post::{post, request};
use crate::qp::{qp_of, Qp};

/// The requests built since `ibv_wr_start`.
#[derive(Default)]
pub(crate) struct Batch {
    reqs: Vec<SendRequest>,
    /// Copies of inline data (`ibv_wr_set_inline_data*`), which the
    /// program may reuse as soon as the call returns; the requests' SGEs
    /// point into these until the batch is posted.
    inline: Vec<Vec<u8>>,
    /// First error seen while building (reported by `ibv_wr_complete`).
    err: c_int,
}

// SAFETY: the raw addresses in SGEs are plain integers; the inline copies
// are owned here.
unsafe impl Send for Batch {}

pub(crate) fn fill_table(ex: &mut ibv_qp_ex) {
    ex.wr_start = Some(wr_start);
    ex.wr_complete = Some(wr_complete);
    ex.wr_abort = Some(wr_abort);
    ex.wr_send = Some(wr_send);
    ex.wr_send_imm = Some(wr_send_imm);
    ex.wr_send_inv = Some(wr_send_inv);
    ex.wr_rdma_write = Some(wr_rdma_write);
    ex.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    ex.wr_rdma_read = Some(wr_rdma_read);
    ex.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    ex.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    ex.wr_set_sge = Some(wr_set_sge);
    ex.wr_set_sge_list = Some(wr_set_sge_list);
    ex.wr_set_inline_data = Some(wr_set_inline_data);
    ex.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    ex.wr_set_ud_addr = Some(wr_set_ud_addr);
    ex.wr_bind_mw = Some(wr_bind_mw);
    ex.wr_local_inv = Some(wr_local_inv);
}

fn with_batch(verb: &'static str, qp: *mut ibv_qp_ex, f: impl FnOnce(&Qp, &mut Batch)) {
    guard::void(verb, || {
        if let Ok((_, q)) = qp_of(qp.cast()) {
            let mut b = q.batch.lock().unwrap_or_else(|p| p.into_inner());
            f(q, &mut b);
        }
    });
}

/// Starts a new request with the QP's current `wr_id` / `wr_flags`.
fn push(verb: &'static str, qp: *mut ibv_qp_ex, op: SendOp) {
    with_batch(verb, qp, |q, b| {
        b.reqs
            .push(request(q.ex.wr_id, op, Vec::new(), q.ex.wr_flags, None));
    });
}

/// Applies `f` to the request being built; an `ibv_wr_set_*` with no
/// request before it is an error `ibv_wr_complete` reports.
fn last(
    verb: &'static str,
    qp: *mut ibv_qp_ex,
    f: impl FnOnce(&mut SendRequest, &mut Vec<Vec<u8>>),
) {
    with_batch(verb, qp, |_, b| match b.reqs.last_mut() {
        Some(r) => f(r, &mut b.inline),
        None => b.err = libc::EINVAL,
    });
}

unsafe extern "C" fn wr_start(qp: *mut ibv_qp_ex) {
    with_batch("ibv_wr_start", qp, |_, b| *b = Batch::default());
}

unsafe extern "C" fn wr_complete(qp: *mut ibv_qp_ex) -> c_int {
    guard::int("ibv_wr_complete", || {
        let (ctx, q) = qp_of(qp.cast())?;
        let b = std::mem::take(&mut *q.batch.lock().unwrap_or_else(|p| p.into_inner()));
        if b.err != 0 {
            return Err(b.err);
        }
        post(ctx, q, &b.reqs).map_err(|(_, e)| e)
    })
}

unsafe extern "C" fn wr_abort(qp: *mut ibv_qp_ex) {
    with_batch("ibv_wr_abort", qp, |_, b| *b = Batch::default());
}

unsafe extern "C" fn wr_send(qp: *mut ibv_qp_ex) {
    push("ibv_wr_send", qp, SendOp::Send);
}

unsafe extern "C" fn wr_send_imm(qp: *mut ibv_qp_ex, imm: u32) {
    push(
        "ibv_wr_send_imm",
        qp,
        SendOp::SendWithImm {
            imm: u32::from_be(imm),
        },
    );
}

unsafe extern "C" fn wr_send_inv(qp: *mut ibv_qp_ex, rkey: u32) {
    push("ibv_wr_send_inv", qp, SendOp::SendWithInv { rkey });
}

unsafe extern "C" fn wr_rdma_write(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    push("ibv_wr_rdma_write", qp, SendOp::Write { remote_addr, rkey });
}

unsafe extern "C" fn wr_rdma_write_imm(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm: u32) {
    push(
        "ibv_wr_rdma_write_imm",
        qp,
        SendOp::WriteWithImm {
            remote_addr,
            rkey,
            imm: u32::from_be(imm),
        },
    );
}

unsafe extern "C" fn wr_rdma_read(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    push("ibv_wr_rdma_read", qp, SendOp::Read { remote_addr, rkey });
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    push(
        "ibv_wr_atomic_cmp_swp",
        qp,
        SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        },
    );
}

unsafe extern "C" fn wr_atomic_fetch_add(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    push(
        "ibv_wr_atomic_fetch_add",
        qp,
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        },
    );
}

unsafe extern "C" fn wr_set_sge(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    last("ibv_wr_set_sge", qp, |r, _| {
        r.wr.sg_list = vec![Sge { addr, length, lkey }];
    });
}

unsafe extern "C" fn wr_set_sge_list(qp: *mut ibv_qp_ex, num_sge: size_t, list: *const ibv_sge) {
    let sges = c_int::try_from(num_sge)
        .map_err(|_| libc::EINVAL)
        .and_then(|n| crate::post::sges(list, n));
    with_batch("ibv_wr_set_sge_list", qp, |_, b| {
        match (sges, b.reqs.last_mut()) {
            (Ok(s), Some(r)) => r.wr.sg_list = s,
            (Err(e), _) => b.err = e,
            (_, None) => b.err = libc::EINVAL,
        }
    });
}

fn set_inline(r: &mut SendRequest, copies: &mut Vec<Vec<u8>>, parts: &[(*const u8, usize)]) {
    let mut data = Vec::new();
    for &(p, len) in parts {
        if len > 0 && !p.is_null() {
            // SAFETY: the program passes `len` readable bytes at `p`.
            data.extend_from_slice(unsafe { std::slice::from_raw_parts(p, len) });
        }
    }
    r.inline = true;
    r.wr.sg_list = vec![Sge {
        addr: data.as_ptr() as u64,
        length: u32::try_from(data.len()).unwrap_or(u32::MAX),
        lkey: 0,
    }];
    // The Vec's heap buffer does not move when the Vec itself is moved.
    copies.push(data);
}

unsafe extern "C" fn wr_set_inline_data(qp: *mut ibv_qp_ex, addr: *mut c_void, length: size_t) {
    last("ibv_wr_set_inline_data", qp, |r, c| {
        set_inline(r, c, &[(addr.cast::<u8>().cast_const(), length)]);
    });
}

unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut ibv_qp_ex,
    num_buf: size_t,
    list: *const ibv_data_buf,
) {
    last("ibv_wr_set_inline_data_list", qp, |r, c| {
        let bufs = if list.is_null() || num_buf == 0 {
            &[][..]
        } else {
            // SAFETY: the program's array holds num_buf entries.
            unsafe { std::slice::from_raw_parts(list, num_buf) }
        };
        let parts: Vec<_> = bufs
            .iter()
            .map(|d| (d.addr.cast::<u8>().cast_const(), d.length))
            .collect();
        set_inline(r, c, &parts);
    });
}

unsafe extern "C" fn wr_set_ud_addr(
    qp: *mut ibv_qp_ex,
    ah: *mut ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    guard::void("ibv_wr_set_ud_addr", || {
        let Ok((ctx, q)) = qp_of(qp.cast()) else {
            return;
        };
        let h = ah_handle(ctx, ah);
        let mut b = q.batch.lock().unwrap_or_else(|p| p.into_inner());
        match (h, b.reqs.last_mut()) {
            (Ok(h), Some(r)) => {
                r.wr.ud = Some(UdDest {
                    ah: AddressHandle(h),
                    remote_qpn,
                    remote_qkey,
                })
            }
            (Err(e), _) => b.err = e,
            (_, None) => b.err = libc::EINVAL,
        }
    });
}

unsafe extern "C" fn wr_bind_mw(
    qp: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    let op = match (crate::qp::qp_of(qp.cast()), info.is_null()) {
        (Ok((ctx, _)), false) => crate::mw::bind_wr(
            ctx,
            &ibv_send_wr_bind_mw {
                mw,
                rkey,
                // SAFETY: non-NULL bind info from the caller.
                bind_info: unsafe { *info },
            },
        ),
        _ => Err(libc::EINVAL),
    };
    match op {
        Ok(op) => push("ibv_wr_bind_mw", qp, op),
        Err(e) => with_batch("ibv_wr_bind_mw", qp, |_, b| b.err = e),
    }
}

unsafe extern "C" fn wr_local_inv(qp: *mut ibv_qp_ex, rkey: u32) {
    push("ibv_wr_local_inv", qp, SendOp::LocalInv { rkey });
}
