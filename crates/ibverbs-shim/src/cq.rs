//! Completion queues: classic (`ibv_poll_cq` through the ops table) and
//! extended (`ibv_start_poll` / `ibv_wc_read_*` through `ibv_cq_ex`).

use std::cell::RefCell;
use std::sync::Mutex;
use std::time::Duration;

use libc::{c_int, c_uint, c_void};
use rdmakit_ibverbs_abi::{consts::*, *};
use rdmakit_soft::proto::{Wc, WcOpcode};

use crate::device::{Ctx, Obj};
use crate::guard::{self, nonnull, Res};
use crate::mem::Channel;

/// A CQ. `ex` comes first: a plain `ibv_cq *` is its prefix.
#[repr(C)]
pub(crate) struct Cq {
    pub ex: ibv_cq_ex,
    pub handle: u32,
    pub channel: *mut Channel,
    /// The entry an extended poll is looking at.
    pub cur: Mutex<Option<Wc>>,
}

thread_local! {
    static BUF: RefCell<Vec<Wc>> = const { RefCell::new(Vec::new()) };
}

/// The context and CQ behind a live `ibv_cq *`.
pub(crate) fn cq_of<'a>(cq: *mut ibv_cq) -> Res<(&'a Ctx, &'a Cq)> {
    nonnull(cq)?;
    // SAFETY: non-NULL; the context is validated before use.
    let ctx = Ctx::from_ptr(unsafe { (*cq).context })?;
    if !ctx.is_live(cq) {
        return Err(libc::EINVAL);
    }
    // SAFETY: a live CQ of ours: the ibv_cq is the prefix of a Cq.
    Ok((ctx, unsafe { &*cq.cast::<Cq>() }))
}

fn create(
    ctx: &Ctx,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    wc_flags: u64,
) -> Res<*mut Cq> {
    let cqe = u32::try_from(cqe).map_err(|_| libc::EINVAL)?;
    if cqe == 0 {
        return Err(libc::EINVAL);
    }
    let ch = if channel.is_null() {
        None
    } else {
        if !ctx.is_live(channel) {
            return Err(libc::EINVAL);
        }
        // SAFETY: a live channel of this context.
        Some(unsafe { &mut *channel.cast::<Channel>() })
    };
    if wc_flags & !(IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) != 0 {
        return Err(guard::unsupported("these ibv_create_cq_ex wc_flags"));
    }
    let h = ctx
        .dev
        .create_cq(cqe, ch.as_ref().map(|c| c.handle))
        .map_err(guard::soft)?;
    // SAFETY: ibv_cq_ex is pointers, Options, integers and pthread
    // objects: valid when zeroed.
    let mut ex: ibv_cq_ex = unsafe { std::mem::zeroed() };
    ex.context = ctx.ibv();
    ex.channel = channel;
    ex.cq_context = cq_context;
    ex.handle = h;
    ex.cqe = c_int::try_from(cqe).unwrap_or(c_int::MAX);
    ex.start_poll = Some(start_poll);
    ex.next_poll = Some(next_poll);
    ex.end_poll = Some(end_poll);
    ex.read_opcode = Some(read_opcode);
    ex.read_vendor_err = Some(read_vendor_err);
    ex.read_byte_len = Some(read_byte_len);
    ex.read_imm_data = Some(read_imm_data);
    ex.read_qp_num = Some(read_qp_num);
    ex.read_src_qp = Some(read_src_qp);
    ex.read_wc_flags = Some(read_wc_flags);
    ex.read_slid = Some(read_zero32);
    ex.read_sl = Some(read_sl);
    ex.read_dlid_path_bits = Some(read_zero8);
    ex.read_completion_ts = Some(read_ts);
    let chp = match ch {
        Some(c) => {
            c.ch.refcnt += 1;
            c as *mut Channel
        }
        None => std::ptr::null_mut(),
    };
    let b = Box::new(Cq {
        ex,
        handle: h,
        channel: chp,
        cur: Mutex::new(None),
    });
    let addr = ctx.insert(Obj::Cq(b));
    ctx.objs().cqs.insert(h, addr);
    Ok(addr as *mut Cq)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    guard::ptr("ibv_create_cq", || {
        let ctx = Ctx::from_ptr(context)?;
        check_comp_vector(ctx, comp_vector as u32, "ibv_create_cq")?;
        Ok(create(ctx, cqe, cq_context, channel, IBV_WC_STANDARD_FLAGS)?.cast())
    })
}

pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    guard::ptr("ibv_create_cq_ex", || {
        let ctx = Ctx::from_ptr(context)?;
        nonnull(attr)?;
        // SAFETY: non-NULL attributes from the caller.
        let a = unsafe { &*attr };
        const V: &str = "ibv_create_cq_ex";
        if a.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0 {
            return Err(guard::refuse(libc::EINVAL, V, "unknown comp_mask bits"));
        }
        if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0 {
            return Err(guard::unsupported(
                "parent domains (IBV_CQ_INIT_ATTR_MASK_PD)",
            ));
        }
        if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 && a.flags != 0 {
            // rxe: "if (attr->flags) return -EOPNOTSUPP".
            return Err(guard::refuse(
                libc::EOPNOTSUPP,
                V,
                "CQ creation flags (single-threaded, ignore overrun)",
            ));
        }
        check_comp_vector(ctx, a.comp_vector, V)?;
        let cqe = c_int::try_from(a.cqe)
            .map_err(|_| guard::refuse(libc::EINVAL, V, "cqe above max_cqe"))?;
        Ok(create(ctx, cqe, a.cq_context, a.channel, a.wc_flags)?.cast())
    })
}

/// The kernel's check: a completion vector below `num_comp_vectors`.
fn check_comp_vector(ctx: &Ctx, v: u32, verb: &str) -> Res<()> {
    let n = ctx.dev.attr().num_comp_vectors;
    if v >= n {
        return Err(guard::refuse(
            libc::EINVAL,
            verb,
            &format!("comp_vector {v} not below num_comp_vectors {n}"),
        ));
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    guard::int("ibv_destroy_cq", || {
        let (ctx, c) = cq_of(cq)?;
        ctx.retire(cq, || ctx.dev.destroy_cq(c.handle).map_err(guard::soft))?;
        ctx.objs().cqs.remove(&c.handle);
        if !c.channel.is_null() {
            // SAFETY: the channel cannot be destroyed while refcnt > 0.
            unsafe { (*c.channel).ch.refcnt -= 1 };
        }
        Ok(())
    })
}

/// `ibv_resize_cq@IBVERBS_1.1`: as rxe, the size asked for (`cq->cqe`).
#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    guard::int("ibv_resize_cq", || {
        let (ctx, c) = cq_of(cq)?;
        let n = u32::try_from(cqe)
            .map_err(|_| guard::refuse(libc::EINVAL, "ibv_resize_cq", "negative cqe"))?;
        let got = ctx.dev.resize_cq(c.handle, n).map_err(guard::soft)?;
        // SAFETY: a live CQ; `cqe` is informative for the program, written
        // as libibverbs writes it after a successful resize.
        unsafe { (*cq).cqe = c_int::try_from(got).unwrap_or(c_int::MAX) };
        Ok(())
    })
}

/// Fills one `ibv_wc` from a soft completion.
pub(crate) fn to_ibv(w: &Wc) -> ibv_wc {
    ibv_wc {
        sl: sl(w),
        ..ibv_wc::from(w)
    }
}

/// On RoCE the `sl` of a UD receive is the packet's network header type
/// (mlx5's CQE, read so by UCX: 2 = IPv4, 1 = IPv6, 0 = RoCE v1 GRH); the
/// soft NIC's RoCEv2 packets are IPv4.
fn sl(w: &Wc) -> u8 {
    if w.grh {
        2
    } else {
        0
    }
}

pub(crate) unsafe extern "C" fn poll_cq(
    cq: *mut ibv_cq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
    guard::count("ibv_poll_cq", || {
        let (ctx, c) = cq_of(cq)?;
        let n = usize::try_from(num_entries).map_err(|_| libc::EINVAL)?;
        if n > 0 {
            nonnull(wc)?;
        }
        BUF.with(|b| {
            let mut b = b.borrow_mut();
            b.clear();
            let got = ctx.dev.poll_cq(c.handle, &mut b, n).map_err(guard::soft)?;
            for (i, w) in b.iter().take(got.min(n)).enumerate() {
                // SAFETY: the caller's array has num_entries slots; i < n.
                unsafe { *wc.add(i) = to_ibv(w) };
            }
            Ok(c_int::try_from(got.min(n)).unwrap_or(0))
        })
    })
}

pub(crate) unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    guard::int("ibv_req_notify_cq", || {
        let (ctx, c) = cq_of(cq)?;
        ctx.dev
            .req_notify_cq(c.handle, solicited_only != 0)
            .map_err(guard::soft)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    guard::minus1("ibv_get_cq_event", || {
        nonnull(channel)?;
        nonnull(cq)?;
        nonnull(cq_context)?;
        // SAFETY: non-NULL; the context is validated before use.
        let ctx = Ctx::from_ptr(unsafe { (*channel).context })?;
        if !ctx.is_live(channel) {
            return Err(libc::EINVAL);
        }
        // SAFETY: live channel.
        let ch = unsafe { &*channel.cast::<Channel>() };
        let _w = crate::device::Waiting::new(ctx);
        // A non-blocking fd means "do not wait", as with a real channel.
        // SAFETY: fcntl on the channel's own descriptor.
        let nonblock = unsafe { libc::fcntl(ch.ch.fd, libc::F_GETFL) } & libc::O_NONBLOCK != 0;
        // A blocking wait sleeps in read(2) of the channel's bell (crates/soft,
        // device/cq.rs), so a signal interrupts it with EINTR, or restarts it
        // under SA_RESTART, as the kernel's read of the uverbs file does.
        let timeout = nonblock.then_some(Duration::ZERO);
        let h = match ctx.dev.get_cq_event(ch.handle, timeout) {
            Ok(h) => h,
            Err(e) if e.errno.0 == libc::ETIMEDOUT => return Err(libc::EAGAIN),
            Err(e) => return Err(guard::soft(e)),
        };
        let addr = ctx.objs().cqs.get(&h).copied().ok_or(libc::EINVAL)?;
        let c = addr as *mut Cq;
        // SAFETY: the caller's out-pointers are non-NULL; c is live.
        unsafe {
            *cq = c.cast();
            *cq_context = (*c).ex.cq_context;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    if let Ok((_, c)) = cq_of(cq) {
        let c = (c as *const Cq).cast_mut();
        // SAFETY: a live CQ; the counter is only informative here.
        unsafe {
            (*c).ex.comp_events_completed = (*c).ex.comp_events_completed.wrapping_add(nevents)
        };
    }
}

// ---- the extended polling table --------------------------------------------

fn cq_ex<'a>(cq: *mut ibv_cq_ex) -> Option<&'a Cq> {
    cq_of(cq.cast()).ok().map(|(_, c)| c)
}

fn cur<T>(cq: *mut ibv_cq_ex, f: impl FnOnce(&Wc) -> T, none: T) -> T {
    match cq_ex(cq) {
        Some(c) => c
            .cur
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(none, f),
        None => none,
    }
}

fn advance(cq: *mut ibv_cq_ex) -> c_int {
    let Ok((ctx, c)) = cq_of(cq.cast()) else {
        return libc::EINVAL;
    };
    let mut got = Vec::with_capacity(1);
    match ctx.dev.poll_cq(c.handle, &mut got, 1) {
        Ok(1) => {
            let w = got[0];
            let c = (c as *const Cq).cast_mut();
            // SAFETY: a live CQ; the extended poll API is single-consumer
            // between start_poll and end_poll.
            unsafe {
                (*c).ex.wr_id = w.wr_id;
                (*c).ex.status = w.status as u32;
                *(*c).cur.lock().unwrap_or_else(|p| p.into_inner()) = Some(w);
            }
            0
        }
        Ok(_) => libc::ENOENT,
        Err(e) => guard::soft(e),
    }
}

unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, _attr: *mut ibv_poll_cq_attr) -> c_int {
    advance(cq)
}

unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    advance(cq)
}

unsafe extern "C" fn end_poll(cq: *mut ibv_cq_ex) {
    if let Some(c) = cq_ex(cq) {
        *c.cur.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// The `ibv_wc_read_*` functions of an extended CQ: each reads one field
/// of the current completion (`none` before the first poll).
macro_rules! readers {
    ($($name:ident -> $t:ty = |$w:ident| $e:expr, $none:expr;)*) => {$(
        unsafe extern "C" fn $name(cq: *mut ibv_cq_ex) -> $t {
            cur(cq, |$w| $e, $none)
        }
    )*};
}

readers! {
    read_opcode -> u32 = |w| w.opcode as u32, WcOpcode::Send as u32;
    read_vendor_err -> u32 = |w| w.vendor_err, 0;
    read_byte_len -> u32 = |w| w.byte_len, 0;
    read_imm_data -> u32 = |w| to_ibv(w).imm_data, 0;
    read_qp_num -> u32 = |w| w.qp_num, 0;
    read_src_qp -> u32 = |w| w.src_qp, 0;
    read_wc_flags -> c_uint = |w| to_ibv(w).wc_flags, 0;
}

unsafe extern "C" fn read_zero32(_cq: *mut ibv_cq_ex) -> u32 {
    0
}

unsafe extern "C" fn read_sl(cq: *mut ibv_cq_ex) -> u8 {
    cur(cq, sl, 0)
}

unsafe extern "C" fn read_zero8(_cq: *mut ibv_cq_ex) -> u8 {
    0
}

/// Completion timestamps in nanoseconds of the monotonic clock (the soft
/// NIC has no hardware clock; perftest only needs them to be monotonic).
unsafe extern "C" fn read_ts(_cq: *mut ibv_cq_ex) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}
