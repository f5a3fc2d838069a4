//! The data-path ops of `ibv_context`: `ibv_post_send`, `ibv_post_recv`,
//! `ibv_post_srq_recv` (inline functions in verbs.h that call these).

use std::cell::Cell;

use libc::c_int;
use rdmakit_ibverbs_abi::{consts::*, convert, *};
use rdmakit_soft::proto::{AddressHandle, RecvWr, SendOp, Sge, UdDest};
use rdmakit_soft::SendRequest;

use crate::device::Ctx;
use crate::guard::{self, Res};
use crate::mem::ah_handle;
use crate::qp::{qp_of, srq_of, Qp};

/// Reads `num_sge` SGEs from a C list.
pub(crate) fn sges(list: *const ibv_sge, num: c_int) -> Res<Vec<Sge>> {
    sges_reusing(list, num, &mut Vec::new())
}

/// [`sges`] into one of the `spare` lists (emptied, capacity kept) when
/// there is one.
fn sges_reusing(list: *const ibv_sge, num: c_int, spare: &mut Vec<Vec<Sge>>) -> Res<Vec<Sge>> {
    let n = usize::try_from(num).map_err(|_| libc::EINVAL)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    if list.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's array holds num_sge entries.
    let s = unsafe { std::slice::from_raw_parts(list, n) };
    let mut v = spare.pop().unwrap_or_default();
    v.extend(s.iter().map(Sge::from));
    Ok(v)
}

/// What the post verbs reuse on a thread from one call to the next: the
/// request list, the C WR each request came from, and emptied SGE lists.
/// A warm post allocates nothing; before, each post made three
/// allocations (~600 instructions of a 1 KiB `ibv_rc_pingpong` round's
/// ~10,000 per side, on its critical path).
#[derive(Default)]
struct Scratch {
    sends: Vec<SendRequest>,
    recvs: Vec<RecvWr>,
    /// The C WR of each request, as an address (one list for both kinds).
    wrs: Vec<usize>,
    sgls: Vec<Vec<Sge>>,
}

/// Spare SGE lists kept per thread; a post of more WRs than this frees
/// the rest.
const SPARE_SGLS: usize = 64;

impl Scratch {
    /// Empties the lists, keeping the SGE lists for the next post.
    fn recycle(&mut self) {
        let sgls = self
            .sends
            .drain(..)
            .map(|r| r.wr.sg_list)
            .chain(self.recvs.drain(..).map(|r| r.sg_list));
        for mut v in sgls {
            if self.sgls.len() < SPARE_SGLS && v.capacity() > 0 {
                v.clear();
                self.sgls.push(v);
            }
        }
        self.wrs.clear();
    }
}

thread_local! {
    static SCRATCH: Cell<Scratch> = const {
        Cell::new(Scratch {
            sends: Vec::new(),
            recvs: Vec::new(),
            wrs: Vec::new(),
            sgls: Vec::new(),
        })
    };
}

/// Runs `f` with this thread's [`Scratch`], taken out for the call and put
/// back after it (a fresh one while the thread exits; a panic in `f` only
/// loses the spare lists).
fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    let mut sc = SCRATCH.try_with(Cell::take).unwrap_or_default();
    let r = f(&mut sc);
    sc.recycle();
    let _ = SCRATCH.try_with(|c| c.set(sc));
    r
}

/// The operation of a C send WR (`wr.*` read according to the opcode).
pub(crate) fn op(ctx: &Ctx, w: &ibv_send_wr) -> Res<SendOp> {
    if let Some(op) = convert::send_op_from_c(w.opcode, w.imm_data, &w.wr) {
        return Ok(op);
    }
    match w.opcode {
        // SAFETY: a bind request carries the `bind_mw` member.
        IBV_WR_BIND_MW => crate::mw::bind_wr(ctx, unsafe { &w.ext.bind_mw }),
        IBV_WR_TSO => Err(guard::unsupported("TSO")),
        IBV_WR_ATOMIC_WRITE => Err(guard::unsupported("atomic write")),
        _ => Err(libc::EINVAL),
    }
}

/// Builds the device's request from flags and parts.
pub(crate) use rdmakit_ibverbs_abi::convert::send_request_from_c as request;

/// Posts `reqs`; on failure returns the index of the first request not
/// posted and its errno.
pub(crate) fn post(ctx: &Ctx, q: &Qp, reqs: &[SendRequest]) -> Result<(), (usize, c_int)> {
    // SAFETY: inline SGEs point at memory the program guarantees readable
    // for the duration of the post (the ibv_post_send contract), or at the
    // batch's own copies for ibv_wr_set_inline_data.
    unsafe { ctx.dev.post_send(q.qpn, reqs) }.map_err(|f| (f.index, guard::soft(f.error)))
}

/// The frame of the three posts: runs `body` inside [`guard::int`] with the
/// WR to blame on failure (the one being read, or the first not posted),
/// and stores that WR in `*bad_wr` when the post fails.
fn post_list<W>(
    verb: &'static str,
    wr: *mut W,
    bad_wr: *mut *mut W,
    body: impl FnOnce(&mut *mut W) -> Res<()>,
) -> c_int {
    let mut failed = wr;
    let r = guard::int(verb, || {
        body(&mut failed)?;
        failed = std::ptr::null_mut();
        Ok(())
    });
    if r != 0 && !bad_wr.is_null() {
        // SAFETY: the caller passes a writable pointer slot.
        unsafe { *bad_wr = failed };
    }
    r
}

pub(crate) unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    post_list("ibv_post_send", wr, bad_wr, |failed| {
        let (ctx, q) = qp_of(qp)?;
        with_scratch(|sc| {
            let mut cur = wr;
            while !cur.is_null() {
                // SAFETY: a linked list of WRs from the caller.
                let w = unsafe { &*cur };
                *failed = cur;
                let ud = if q.qp_type == rdmakit_soft::proto::QpType::Ud {
                    // SAFETY: UD WRs carry the `ud` member.
                    let u = unsafe { w.wr.ud };
                    Some(UdDest {
                        ah: AddressHandle(ah_handle(ctx, u.ah)?),
                        remote_qpn: u.remote_qpn,
                        remote_qkey: u.remote_qkey,
                    })
                } else {
                    None
                };
                let op = op(ctx, w)?;
                let sg_list = sges_reusing(w.sg_list, w.num_sge, &mut sc.sgls)?;
                sc.sends
                    .push(request(w.wr_id, op, sg_list, w.send_flags, ud));
                sc.wrs.push(cur as usize);
                cur = w.next;
            }
            post(ctx, q, &sc.sends).map_err(|(i, e)| {
                *failed = sc.wrs[i] as *mut ibv_send_wr;
                e
            })
        })
    })
}

/// Reads a C list of receive WRs into `sc.recvs` (and their addresses
/// into `sc.wrs`), leaving the one being read in `*failed`.
fn recv_list(sc: &mut Scratch, wr: *mut ibv_recv_wr, failed: &mut *mut ibv_recv_wr) -> Res<()> {
    let mut cur = wr;
    while !cur.is_null() {
        *failed = cur;
        // SAFETY: a linked list of WRs from the caller.
        let w = unsafe { &*cur };
        let sg_list = sges_reusing(w.sg_list, w.num_sge, &mut sc.sgls)?;
        sc.recvs.push(RecvWr {
            wr_id: w.wr_id,
            sg_list,
        });
        sc.wrs.push(cur as usize);
        cur = w.next;
    }
    Ok(())
}

pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    post_list("ibv_post_recv", wr, bad_wr, |failed| {
        let (ctx, q) = qp_of(qp)?;
        with_scratch(|sc| {
            recv_list(sc, wr, failed)?;
            ctx.dev.post_recv(q.qpn, &sc.recvs).map_err(|f| {
                *failed = sc.wrs[f.index] as *mut ibv_recv_wr;
                guard::soft(f.error)
            })
        })
    })
}

pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    post_list("ibv_post_srq_recv", wr, bad_wr, |failed| {
        let (ctx, s) = srq_of(srq)?;
        with_scratch(|sc| {
            recv_list(sc, wr, failed)?;
            ctx.dev.post_srq_recv(s.srq.handle, &sc.recvs).map_err(|f| {
                *failed = sc.wrs[f.index] as *mut ibv_recv_wr;
                guard::soft(f.error)
            })
        })
    })
}
