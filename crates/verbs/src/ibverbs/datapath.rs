//! The data path: `ibv_post_send`, `ibv_post_recv`, `ibv_post_srq_recv`,
//! `ibv_poll_cq` and `ibv_req_notify_cq` are static inline functions in
//! verbs.h, not exported symbols. Like the C helpers, they call through the
//! context's ops table: `qp->context->ops.post_send(qp, wr, &bad_wr)`.

use std::ffi::c_int;

use rdmakit_ibverbs_abi::*;
use rdmakit_proto::{RecvWr, Sge, Wc};
use rdmakit_types::SendRequest;

use super::device::{no_such, IbvDevice};
use super::library::strerror;
use crate::error::{Errno, Error, Layer, Result};

/// The ops table of the context an object belongs to.
///
/// # Safety
/// `ctx` is a live context.
unsafe fn ops(ctx: *mut ibv_context) -> ibv_context_ops {
    // SAFETY: per the contract.
    unsafe { (*ctx).ops }
}

fn missing_op(verb: &'static str) -> Error {
    Error {
        verb,
        errno: Errno::EOPNOTSUPP,
        layer: Layer::Library,
        detail: "the provider left this op of ibv_context.ops NULL".into(),
        bad_wr: None,
    }
}

fn post_error(verb: &'static str, rc: c_int, index: usize, what: String) -> Error {
    let errno = if rc > 0 {
        Errno(rc)
    } else if rc < 0 {
        Errno(-rc)
    } else {
        Errno::EINVAL
    };
    Error {
        verb,
        errno,
        layer: Layer::Library,
        detail: format!("{what}: {}", strerror(errno)),
        bad_wr: Some(index),
    }
}

fn sges(list: &[Sge]) -> Vec<ibv_sge> {
    list.iter().map(ibv_sge::from).collect()
}

/// A WR's `sg_list` and `num_sge` for the SGE array `s` (NULL when empty).
fn sg_parts(s: &mut [ibv_sge]) -> (*mut ibv_sge, c_int) {
    let list = if s.is_empty() {
        core::ptr::null_mut()
    } else {
        s.as_mut_ptr()
    };
    (list, c_int::try_from(s.len()).unwrap_or(c_int::MAX))
}

/// `ibv_recv_wr`s for `wrs`, linked; the SGE arrays live in the second vector.
fn recv_list(wrs: &[RecvWr]) -> (Vec<ibv_recv_wr>, Vec<Vec<ibv_sge>>) {
    let mut sg: Vec<Vec<ibv_sge>> = wrs.iter().map(|w| sges(&w.sg_list)).collect();
    let mut list: Vec<ibv_recv_wr> = wrs
        .iter()
        .zip(sg.iter_mut())
        .map(|(w, s)| {
            let (sg_list, num_sge) = sg_parts(s);
            ibv_recv_wr {
                wr_id: w.wr_id,
                next: core::ptr::null_mut(),
                sg_list,
                num_sge,
            }
        })
        .collect();
    link(&mut list, |w, n| w.next = n);
    (list, sg)
}

/// Points each element's `next` at the following one (the last at NULL).
fn link<T>(list: &mut [T], set: impl Fn(&mut T, *mut T)) {
    let base = list.as_mut_ptr();
    let n = list.len();
    for (i, w) in list.iter_mut().enumerate() {
        let next = if i + 1 < n {
            // SAFETY: i + 1 < n: inside the slice.
            unsafe { base.add(i + 1) }
        } else {
            core::ptr::null_mut()
        };
        set(w, next);
    }
}

/// The index of `bad` in the list starting at `base` (libibverbs' `bad_wr`),
/// or 0 when the provider did not set it.
fn index_of<T>(base: *const T, bad: *const T, len: usize) -> usize {
    if bad.is_null() {
        return 0;
    }
    let off = (bad as usize).wrapping_sub(base as usize) / core::mem::size_of::<T>().max(1);
    off.min(len.saturating_sub(1))
}

/// A provider op that posts a linked list of `W` to an `O`.
type PostOp<O, W> = unsafe extern "C" fn(*mut O, *mut W, *mut *mut W) -> c_int;

/// Posts the linked `list` to `obj` (`what` `num`, as errors name it)
/// through the ops-table entry `f`; an error names the work request the
/// provider refused (`bad_wr`).
///
/// # Safety
/// `obj` is a live object of `f`'s kind; the list, its SGE arrays and any
/// inline data stay valid and readable for the call.
unsafe fn post_list<O, W>(
    verb: &'static str,
    f: Option<PostOp<O, W>>,
    obj: *mut O,
    list: &mut [W],
    what: &str,
    num: u32,
) -> Result<()> {
    let f = f.ok_or_else(|| missing_op(verb))?;
    let mut bad: *mut W = core::ptr::null_mut();
    // SAFETY: per the contract.
    let rc = unsafe { f(obj, list.as_mut_ptr(), &mut bad) };
    if rc == 0 {
        return Ok(());
    }
    let i = index_of(list.as_ptr(), bad, list.len());
    Err(post_error(
        verb,
        rc,
        i,
        format!("{what} {num:#x}, {} work requests", list.len()),
    ))
}

impl IbvDevice {
    pub(super) fn poll_cq_impl(&self, cq: u32, out: &mut Vec<Wc>, max: usize) -> Result<usize> {
        let t = self.read();
        let p = *t
            .cqs
            .get(&cq)
            .ok_or_else(|| no_such("ibv_poll_cq", "CQ", cq))?;
        // SAFETY: a live CQ of this context.
        let poll = unsafe { ops((*p).context) }
            .poll_cq
            .ok_or_else(|| missing_op("ibv_poll_cq"))?;
        let mut buf = [ibv_wc::default(); 32];
        let mut total = 0;
        while total < max {
            let want = (max - total).min(buf.len());
            // SAFETY: a live CQ; `buf` has room for `want` entries.
            let n = unsafe { poll(p, want as c_int, buf.as_mut_ptr()) };
            if n < 0 {
                return Err(Error {
                    verb: "ibv_poll_cq",
                    errno: Errno::EIO,
                    layer: Layer::Library,
                    detail: format!("the provider's poll_cq returned {n} for CQ {cq:#x}"),
                    bad_wr: None,
                });
            }
            let n = usize::try_from(n).unwrap_or(0).min(want);
            out.extend(buf[..n].iter().map(Wc::from));
            total += n;
            if n < want {
                break;
            }
        }
        Ok(total)
    }

    pub(super) fn req_notify_impl(&self, cq: u32, solicited_only: bool) -> Result<()> {
        let t = self.read();
        let p = *t
            .cqs
            .get(&cq)
            .ok_or_else(|| no_such("ibv_req_notify_cq", "CQ", cq))?;
        // SAFETY: a live CQ.
        if unsafe { (*p).channel }.is_null() {
            return Err(Error::application(
                "ibv_req_notify_cq",
                Errno::EINVAL,
                "CQ has no completion channel",
            ));
        }
        // SAFETY: a live CQ of this context.
        let f = unsafe { ops((*p).context) }
            .req_notify_cq
            .ok_or_else(|| missing_op("ibv_req_notify_cq"))?;
        // SAFETY: a live CQ.
        let rc = unsafe { f(p, c_int::from(solicited_only)) };
        if rc != 0 {
            return Err(post_error(
                "ibv_req_notify_cq",
                rc,
                0,
                format!("CQ {cq:#x}"),
            ))
            .map_err(|e| Error { bad_wr: None, ..e });
        }
        Ok(())
    }

    /// # Safety
    /// As [`crate::DeviceOps::post_send`].
    pub(super) unsafe fn post_send_impl(&self, qpn: u32, reqs: &[SendRequest]) -> Result<()> {
        if reqs.is_empty() {
            return Ok(());
        }
        let (t, qp) = self.qp_ptr("ibv_post_send", qpn)?;
        let mut sg: Vec<Vec<ibv_sge>> = reqs.iter().map(|r| sges(&r.wr.sg_list)).collect();
        let mut list = Vec::with_capacity(reqs.len());
        for (i, (r, s)) in reqs.iter().zip(sg.iter_mut()).enumerate() {
            let (opcode, imm, mut wr) = rdmakit_ibverbs_abi::convert::send_op_to_c(&r.wr.op);
            if let Some(ud) = &r.wr.ud {
                let ah = t.ahs.get(&ud.ah.0).copied().ok_or_else(|| Error {
                    bad_wr: Some(i),
                    ..no_such("ibv_post_send", "AH", ud.ah.0)
                })?;
                wr.ud = ibv_send_wr_ud {
                    ah,
                    remote_qpn: ud.remote_qpn,
                    remote_qkey: ud.remote_qkey,
                };
            }
            let (sg_list, num_sge) = sg_parts(s);
            list.push(ibv_send_wr {
                wr_id: r.wr.wr_id,
                next: core::ptr::null_mut(),
                sg_list,
                num_sge,
                opcode,
                send_flags: rdmakit_ibverbs_abi::convert::send_flags_to_c(r),
                imm_data: imm,
                wr,
                remote_srqn: 0,
                // SAFETY: plain old data (pointers and integers); zero is valid.
                ext: unsafe { core::mem::zeroed() },
            });
        }
        link(&mut list, |w, n| w.next = n);
        // SAFETY: a live QP of this context.
        let f = unsafe { ops((*qp).context) }.post_send;
        // SAFETY: as above; the list and its SGE arrays outlive the call;
        // inline data is readable per this function's contract.
        unsafe { post_list("ibv_post_send", f, qp, &mut list, "QP", qpn) }
    }

    pub(super) fn post_recv_impl(&self, qpn: u32, wrs: &[RecvWr]) -> Result<()> {
        if wrs.is_empty() {
            return Ok(());
        }
        let (_t, qp) = self.qp_ptr("ibv_post_recv", qpn)?;
        let (mut list, _sg) = recv_list(wrs);
        // SAFETY: a live QP of this context.
        let f = unsafe { ops((*qp).context) }.post_recv;
        // SAFETY: as above; the list and SGE arrays outlive the call; the
        // SGEs name registered memory, checked by the provider.
        unsafe { post_list("ibv_post_recv", f, qp, &mut list, "QP", qpn) }
    }

    pub(super) fn post_srq_recv_impl(&self, srq: u32, wrs: &[RecvWr]) -> Result<()> {
        if wrs.is_empty() {
            return Ok(());
        }
        let t = self.read();
        let p = *t
            .srqs
            .get(&srq)
            .ok_or_else(|| no_such("ibv_post_srq_recv", "SRQ", srq))?;
        let (mut list, _sg) = recv_list(wrs);
        // SAFETY: a live SRQ of this context.
        let f = unsafe { ops((*p).context) }.post_srq_recv;
        // SAFETY: as in post_recv_impl.
        unsafe { post_list("ibv_post_srq_recv", f, p, &mut list, "SRQ", srq) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_linked_and_bad_wr_maps_back_to_an_index() {
        let wrs: Vec<RecvWr> = (0..3)
            .map(|i| RecvWr {
                wr_id: i,
                sg_list: vec![Sge {
                    addr: 0x1000 * (i + 1),
                    length: 64,
                    lkey: 5,
                }],
            })
            .collect();
        let (list, sg) = recv_list(&wrs);
        assert_eq!(list[0].next.cast_const(), &list[1] as *const ibv_recv_wr);
        assert_eq!(list[1].next.cast_const(), &list[2] as *const ibv_recv_wr);
        assert!(list[2].next.is_null());
        assert_eq!(list[2].sg_list.cast_const(), sg[2].as_ptr());
        assert_eq!((list[2].num_sge, sg[2][0].addr), (1, 0x3000));
        assert_eq!(index_of(list.as_ptr(), &list[2], 3), 2);
        assert_eq!(index_of(list.as_ptr(), core::ptr::null(), 3), 0);
        let e = post_error("ibv_post_recv", 12, 1, "x".into());
        assert_eq!(
            (e.errno, e.bad_wr, e.layer),
            (Errno::ENOMEM, Some(1), Layer::Library)
        );
    }
}
