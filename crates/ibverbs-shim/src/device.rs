//! Devices and contexts: list, open, close, query, async events, and the
//! object table every context keeps.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::{Mutex, MutexGuard, OnceLock, RwLock};
use std::time::Duration;

use libc::{c_char, c_int, size_t};
use rdmakit_ibverbs_abi::{self as abi, consts::*, *};
use rdmakit_soft::{AsyncEvent, Device, DeviceConfig};

use crate::cq::Cq;
use crate::guard::{self, nonnull, put_cstr, Res};
use crate::mem::{Ah, Channel, Mr, Pd};
use crate::mw::Mw;
use crate::qp::{Qp, Srq};

/// The soft NIC's device as libibverbs lists it. One per process.
#[repr(C)]
pub(crate) struct ShimDevice {
    pub dev: ibv_device,
    pub name: String,
}

struct DevPtr(*mut ShimDevice);
// SAFETY: the device is written once, then only read.
unsafe impl Send for DevPtr {}
// SAFETY: as above.
unsafe impl Sync for DevPtr {}

fn device() -> *mut ShimDevice {
    static DEV: OnceLock<DevPtr> = OnceLock::new();
    DEV.get_or_init(|| {
        let name = std::env::var("RDMAKIT_SOFT_NAME")
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "soft0".to_string());
        // SAFETY: ibv_device is plain data; all-zero is a valid value.
        let mut dev: ibv_device = unsafe { std::mem::zeroed() };
        dev.node_type = IBV_NODE_CA;
        dev.transport_type = IBV_TRANSPORT_IB;
        put_cstr(&mut dev.name, &name);
        // The node programs such as UCX stat before they use a device
        // (`rdmakit shim install` creates it, see rdmakit_soft::devnode).
        let node = rdmakit_soft::devnode::dev_name(&name);
        put_cstr(&mut dev.dev_name, &node);
        put_cstr(
            &mut dev.dev_path,
            &format!("/sys/class/infiniband_verbs/{node}"),
        );
        put_cstr(
            &mut dev.ibdev_path,
            &format!("/sys/class/infiniband/{name}"),
        );
        DevPtr(Box::into_raw(Box::new(ShimDevice { dev, name })))
    })
    .0
}

/// Every object a context handed out, alive or destroyed.
pub(crate) enum Obj {
    Pd(Box<Pd>),
    Mr(Box<Mr>),
    Ah(Box<Ah>),
    Channel(Box<Channel>),
    Cq(Box<Cq>),
    Qp(Box<Qp>),
    Srq(Box<Srq>),
    Mw(Box<Mw>),
}

#[derive(Default)]
pub(crate) struct Objects {
    /// Live objects by address.
    pub live: HashMap<usize, Obj>,
    /// Destroyed objects, freed with the context (a racing or repeated
    /// call on one then fails with EINVAL instead of touching freed memory).
    pub dead: Vec<Obj>,
    /// QPN → QP, soft CQ handle → CQ, soft SRQ handle → SRQ (for events).
    pub qps: HashMap<u32, usize>,
    pub cqs: HashMap<u32, usize>,
    pub srqs: HashMap<u32, usize>,
}

// SAFETY: the raw pointers inside objects point at memory owned by the same
// table or by the application; the table is only reached under its mutex.
unsafe impl Send for Objects {}

/// A context: the `verbs_context` C programs see, and the soft device
/// behind it. `vctx` comes first so an `ibv_context *` leads back here.
#[repr(C)]
pub(crate) struct Ctx {
    pub vctx: verbs_context,
    pub dev: Device,
    pub objs: Mutex<Objects>,
    /// Threads inside a blocking verb (`ibv_get_cq_event`,
    /// `ibv_get_async_event`); `ibv_close_device` wakes them and waits for
    /// them to leave before the memory goes.
    pub waiters: std::sync::atomic::AtomicUsize,
}

/// Counts a thread inside a blocking verb of `ctx` (see `Ctx::waiters`).
pub(crate) struct Waiting<'a>(&'a Ctx);

impl<'a> Waiting<'a> {
    pub(crate) fn new(ctx: &'a Ctx) -> Waiting<'a> {
        ctx.waiters
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Waiting(ctx)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0
            .waiters
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The open contexts, checked by every verb (poll_cq and post_send
/// included): a read lock and an FxHash lookup, not a mutex and SipHash.
fn live_contexts() -> &'static RwLock<HashSet<usize>> {
    static SET: OnceLock<RwLock<HashSet<usize>>> = OnceLock::new();
    SET.get_or_init(|| RwLock::new(HashSet::default()))
}

fn context_is_open(addr: usize) -> bool {
    live_contexts()
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&addr)
}

fn set_context_open(addr: usize, open: bool) {
    let mut s = live_contexts().write().unwrap_or_else(|p| p.into_inner());
    if open {
        s.insert(addr);
    } else {
        s.remove(&addr);
    }
}

impl Ctx {
    /// The context behind `ctx`, if it is one of ours and open.
    pub(crate) fn from_ptr<'a>(ctx: *mut ibv_context) -> Res<&'a Ctx> {
        nonnull(ctx)?;
        // SAFETY: every context we hand out is the `context` field of a
        // `verbs_context` at the start of a live `Ctx`; the address check
        // below refuses anything else before it is dereferenced.
        let c = unsafe { abi::verbs_context_of(ctx) }.cast::<Ctx>();
        if !context_is_open(c as usize) {
            return Err(libc::EINVAL);
        }
        // SAFETY: checked just above; contexts live until ibv_close_device.
        Ok(unsafe { &*c })
    }

    pub(crate) fn objs(&self) -> MutexGuard<'_, Objects> {
        self.objs.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn ibv(&self) -> *mut ibv_context {
        std::ptr::addr_of!(self.vctx.context).cast_mut()
    }

    /// Records a new object and returns its address.
    pub(crate) fn insert(&self, o: Obj) -> usize {
        let addr = match &o {
            Obj::Pd(b) => &**b as *const Pd as usize,
            Obj::Mr(b) => &**b as *const Mr as usize,
            Obj::Ah(b) => &**b as *const Ah as usize,
            Obj::Channel(b) => &**b as *const Channel as usize,
            Obj::Cq(b) => &**b as *const Cq as usize,
            Obj::Qp(b) => &**b as *const Qp as usize,
            Obj::Srq(b) => &**b as *const Srq as usize,
            Obj::Mw(b) => &**b as *const Mw as usize,
        };
        self.objs().live.insert(addr, o);
        addr
    }

    /// True while `p` is a live object of this context.
    pub(crate) fn is_live<T>(&self, p: *const T) -> bool {
        self.objs().live.contains_key(&(p as usize))
    }

    /// Moves a live object to the dead list after `destroy` succeeded.
    pub(crate) fn retire<T>(&self, p: *const T, destroy: impl FnOnce() -> Res<()>) -> Res<()> {
        let mut o = self.objs();
        if !o.live.contains_key(&(p as usize)) {
            return Err(libc::EINVAL);
        }
        destroy()?;
        if let Some(obj) = o.live.remove(&(p as usize)) {
            o.dead.push(obj);
        }
        Ok(())
    }
}

// ---- device list ---------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    guard::ptr("ibv_get_device_list", || {
        // SAFETY: calloc of two pointers; checked for NULL.
        let list = unsafe { libc::calloc(2, std::mem::size_of::<*mut ibv_device>()) }
            .cast::<*mut ibv_device>();
        if list.is_null() {
            return Err(libc::ENOMEM);
        }
        // SAFETY: list has room for two pointers (the second stays NULL).
        unsafe { *list = device().cast() };
        if !num_devices.is_null() {
            // SAFETY: the caller passes a writable int or NULL.
            unsafe { *num_devices = 1 };
        }
        Ok(list)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    if !list.is_null() {
        // SAFETY: allocated by calloc in ibv_get_device_list.
        unsafe { libc::free(list.cast()) };
    }
}

fn shim_device<'a>(dev: *mut ibv_device) -> Res<&'a ShimDevice> {
    if dev.is_null() || dev != device().cast() {
        return Err(libc::EINVAL);
    }
    // SAFETY: it is our one device, never freed.
    Ok(unsafe { &*dev.cast::<ShimDevice>() })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    match shim_device(dev) {
        // SAFETY: `name` is NUL-terminated by put_cstr.
        Ok(d) => d.dev.name.as_ptr(),
        Err(e) => {
            guard::set_errno(e);
            std::ptr::null()
        }
    }
}

/// The device's node GUID, known before any open (rxe derives it from the
/// netdev's MAC; the soft NIC from its address, as `ibv_query_device`).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    let guid = shim_device(dev).and_then(|d| {
        let cfg = DeviceConfig {
            name: Some(d.name.clone()),
            ..DeviceConfig::from_env().map_err(guard::soft)?
        };
        cfg.device_addr().map_err(guard::soft)
    });
    match guid {
        Ok(a) => rdmakit_soft::attr::guid_for(a).to_be(),
        Err(e) => {
            guard::set_errno(e);
            0
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    match shim_device(dev) {
        Ok(_) => 0,
        Err(_) => -1,
    }
}

// ---- open / close --------------------------------------------------------

/// Registers (once) an exit hook that sends the ACKs the soft NIC held back
/// for a busy-polling thread: a program that exits right after its last
/// completion, without destroying its QPs, still lets its peer's last send
/// complete, as a real NIC's ACK would.
fn at_exit_flush() {
    extern "C" fn flush() {
        rdmakit_soft::flush_held_acks();
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `flush` is a plain extern "C" fn with no arguments; a
        // failed registration only loses the hook.
        unsafe {
            libc::atexit(flush);
        }
    });
}

#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    guard::ptr("ibv_open_device", || {
        let d = shim_device(dev)?;
        // The shim is an edge: the environment configures its soft NIC.
        let cfg = DeviceConfig {
            name: Some(d.name.clone()),
            ..DeviceConfig::from_env().map_err(guard::soft)?
        };
        let soft = Device::open(cfg).map_err(guard::soft)?;
        at_exit_flush();
        // SAFETY: verbs_context is pointers, Options of fn pointers,
        // integers and a pthread mutex: all valid when zeroed (a zeroed
        // mutex is PTHREAD_MUTEX_INITIALIZER in glibc).
        let mut vctx: verbs_context = unsafe { std::mem::zeroed() };
        vctx.sz = abi::VERBS_CONTEXT_SZ;
        vctx.query_port = Some(query_port_ex);
        vctx.query_device_ex = Some(query_device_ex);
        vctx.create_cq_ex = Some(crate::cq::create_cq_ex);
        vctx.create_qp_ex = Some(crate::qp::create_qp_ex);
        let c = &mut vctx.context;
        c.device = dev;
        c.ops.poll_cq = Some(crate::cq::poll_cq);
        c.ops.req_notify_cq = Some(crate::cq::req_notify_cq);
        c.ops.post_send = Some(crate::post::post_send);
        c.ops.post_recv = Some(crate::post::post_recv);
        c.ops.post_srq_recv = Some(crate::post::post_srq_recv);
        c.ops.alloc_mw = Some(crate::mw::alloc_mw);
        c.ops.dealloc_mw = Some(crate::mw::dealloc_mw);
        c.ops.bind_mw = Some(crate::mw::bind_mw);
        // The context's descriptor: close-on-exec, inherited by a forked
        // child — which then keeps the context's objects, as with a uverbs
        // descriptor (docs/soft-nic.md, "Resource registry").
        c.cmd_fd = soft.context_fd();
        // Blocking, as libibverbs' uverbs fd: ibv_get_async_event waits
        // unless the program sets O_NONBLOCK (then it returns EAGAIN).
        c.async_fd = soft.async_fd();
        // SAFETY: fcntl on the device's own descriptor.
        unsafe {
            let fl = libc::fcntl(c.async_fd, libc::F_GETFL);
            libc::fcntl(c.async_fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
        c.num_comp_vectors = c_int::try_from(soft.attr().num_comp_vectors).unwrap_or(1);
        c.abi_compat = abi::ABI_IS_EXTENDED;
        let ctx = Box::into_raw(Box::new(Ctx {
            vctx,
            dev: soft,
            objs: Mutex::new(Objects::default()),
            waiters: std::sync::atomic::AtomicUsize::new(0),
        }));
        set_context_open(ctx as usize, true);
        // SAFETY: just allocated.
        Ok(unsafe { (*ctx).ibv() })
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    guard::minus1("ibv_close_device", || {
        let ctx = Ctx::from_ptr(context)?;
        let addr = ctx as *const Ctx as usize;
        set_context_open(addr, false);
        if guard::debug_on() {
            // Which way the context's packets went (same-host rings or the
            // socket): the transport a run really used.
            let c = ctx.dev.counters();
            eprintln!(
                "rdmakit libibverbs: ibv_close_device {} ({}): {} packets sent, {} through \
                 same-host rings ({} woke the receiver); {} received, {} from rings, {} from the \
                 socket; refused {} rings and {} same-host requests",
                ctx.dev.name(),
                ctx.dev.soft_transport().as_str(),
                c.tx_packets,
                c.ring_tx_packets,
                c.ring_wakeups,
                c.rx_packets,
                c.ring_rx_packets,
                c.rx_socket_packets,
                c.ring_refused,
                c.rx_same_host_refused
            );
            // What the fault plan injected (RDMAKIT_SOFT_FAULTS) and what
            // the transport did about it.
            let f = c.faults;
            if f != rdmakit_soft::faults::FaultCounts::default() {
                eprintln!(
                    "rdmakit libibverbs: {} faults injected: {} dropped, {} duplicated, {} \
                     reordered, {} corrupted, {} delayed, {} CE marked, {} verbs failed; {} \
                     packets retransmitted, {} ACK timeouts, {} duplicate requests, {} \
                     out-of-sequence NAKs sent, {} ICRC errors",
                    ctx.dev.name(),
                    f.drop,
                    f.dup,
                    f.reorder,
                    f.corrupt,
                    f.delay,
                    f.ce,
                    f.fail,
                    c.retransmitted_packets,
                    c.ack_timeouts,
                    c.duplicate_requests,
                    c.out_of_sequence,
                    c.rx_icrc_errors
                );
            }
            if (f.rnr, f.nak, f.link_down, f.qp_fatal, f.device_fatal) != (0, 0, 0, 0, 0) {
                eprintln!(
                    "rdmakit libibverbs: {} faults answered: {} RNR NAKs, {} NAKs; link down {} \
                     times, {} packets lost to it; {} QPs failed, {} device failures",
                    ctx.dev.name(),
                    f.rnr,
                    f.nak,
                    f.link_down,
                    f.link_drop,
                    f.qp_fatal,
                    f.device_fatal
                );
            }
            if let Some(why) = ctx.dev.ring_miss() {
                eprintln!("rdmakit libibverbs: {why}");
            }
        }
        // A thread blocked in ibv_get_cq_event / ibv_get_async_event of this
        // context would wait for an event that can no longer come: wake it
        // (it returns -1, EIO) and let it leave before the memory goes.
        ctx.dev.wake_waiters();
        let end = std::time::Instant::now() + Duration::from_secs(2);
        while ctx.waiters.load(std::sync::atomic::Ordering::Acquire) > 0
            && std::time::Instant::now() < end
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Like closing the uverbs fd: the device drops every object left.
        // SAFETY: allocated in ibv_open_device, removed from the live set
        // above so no later call reaches it.
        drop(unsafe { Box::from_raw(addr as *mut Ctx) });
        Ok(())
    })
}

// ---- queries -------------------------------------------------------------

fn fill_device_attr(ctx: &Ctx, out: &mut ibv_device_attr) {
    let a = ctx.dev.attr();
    *out = ibv_device_attr::from(a);
    (out.vendor_id, out.vendor_part_id) =
        vendor_override().unwrap_or((a.vendor_id, a.vendor_part_id));
}

/// `RDMAKIT_SHIM_VENDOR=VENDOR_ID:PART_ID` (e.g. `0x02c9:4119`, a
/// ConnectX-5) makes the device report another identity. Programs that pick
/// code paths by device — perftest uses the `ibv_wr_*` API only on devices it
/// knows — can then be driven down those paths on the soft NIC.
fn vendor_override() -> Option<(u32, u32)> {
    static V: OnceLock<Option<(u32, u32)>> = OnceLock::new();
    *V.get_or_init(|| {
        let v = std::env::var("RDMAKIT_SHIM_VENDOR").ok()?;
        let (a, b) = v.split_once(':')?;
        let num = |s: &str| {
            let s = s.trim();
            match s.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16).ok(),
                None => s.parse().ok(),
            }
        };
        let r = (num(a)?, num(b)?);
        Some(r)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    guard::int("ibv_query_device", || {
        let ctx = Ctx::from_ptr(context)?;
        // SAFETY: the caller passes a writable ibv_device_attr.
        fill_device_attr(ctx, unsafe { &mut *nonnull(attr)? });
        Ok(())
    })
}

unsafe extern "C" fn query_device_ex(
    context: *mut ibv_context,
    _input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: size_t,
) -> c_int {
    guard::int("ibv_query_device_ex", || {
        let ctx = Ctx::from_ptr(context)?;
        nonnull(attr)?;
        if attr_size < std::mem::size_of::<ibv_device_attr>() {
            return Err(libc::EINVAL);
        }
        // SAFETY: plain data.
        let mut full: ibv_device_attr_ex = unsafe { std::mem::zeroed() };
        fill_device_attr(ctx, &mut full.orig_attr);
        full.phys_port_cnt_ex = 1;
        full.device_cap_flags_ex = ctx.dev.attr().device_cap_flags;
        let n = attr_size.min(std::mem::size_of::<ibv_device_attr_ex>());
        // SAFETY: the caller's buffer holds attr_size bytes; we write n <= that.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&full as *const ibv_device_attr_ex).cast::<u8>(),
                attr.cast::<u8>(),
                n,
            )
        };
        Ok(())
    })
}

fn port_attr(ctx: &Ctx, port: u8) -> Res<ibv_port_attr> {
    let p = ctx.dev.port_attr(port).map_err(guard::soft)?;
    Ok(ibv_port_attr::from(&p))
}

/// `ibv_query_port@IBVERBS_1.1`: the 48-byte compat layout.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    guard::int("ibv_query_port", || {
        let ctx = Ctx::from_ptr(context)?;
        nonnull(attr)?;
        let full = port_attr(ctx, port_num)?;
        // SAFETY: the caller's buffer holds at least the compat size.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&full as *const ibv_port_attr).cast::<u8>(),
                attr.cast::<u8>(),
                COMPAT_PORT_ATTR_SIZE,
            )
        };
        Ok(())
    })
}

unsafe extern "C" fn query_port_ex(
    context: *mut ibv_context,
    port_num: u8,
    attr: *mut ibv_port_attr,
    len: size_t,
) -> c_int {
    guard::int("ibv_query_port", || {
        let ctx = Ctx::from_ptr(context)?;
        nonnull(attr)?;
        let full = port_attr(ctx, port_num)?;
        let n = len.min(std::mem::size_of::<ibv_port_attr>());
        // SAFETY: the caller's buffer holds len bytes; we write n <= len.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&full as *const ibv_port_attr).cast::<u8>(),
                attr.cast::<u8>(),
                n,
            )
        };
        Ok(())
    })
}

// ---- async events --------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    guard::minus1("ibv_get_async_event", || {
        let ctx = Ctx::from_ptr(context)?;
        nonnull(event)?;
        let _w = Waiting::new(ctx);
        // SAFETY: fcntl on the context's own descriptor.
        let nonblock = unsafe { libc::fcntl(ctx.vctx.context.async_fd, libc::F_GETFL) }
            & libc::O_NONBLOCK
            != 0;
        let ev = loop {
            let wait = if nonblock {
                Duration::ZERO
            } else {
                Duration::from_millis(200)
            };
            match ctx.dev.get_async_event(wait) {
                Some(ev) => break ev,
                None if nonblock => return Err(libc::EAGAIN),
                // Closed while waiting: no event can come any more.
                None if !context_is_open(ctx as *const Ctx as usize) => {
                    return Err(guard::refuse(
                        libc::EIO,
                        "ibv_get_async_event",
                        "the context was closed while waiting",
                    ))
                }
                None => {}
            }
        };
        let o = ctx.objs();
        let (element, ty) = match ev {
            AsyncEvent::CqErr { cq } => (
                ibv_async_event_element {
                    cq: o.cqs.get(&cq).copied().unwrap_or(0) as *mut ibv_cq,
                },
                IBV_EVENT_CQ_ERR,
            ),
            AsyncEvent::QpFatal { qpn } => (qp_elem(&o, qpn), IBV_EVENT_QP_FATAL),
            AsyncEvent::QpReqErr { qpn } => (qp_elem(&o, qpn), IBV_EVENT_QP_REQ_ERR),
            AsyncEvent::QpAccessErr { qpn } => (qp_elem(&o, qpn), IBV_EVENT_QP_ACCESS_ERR),
            AsyncEvent::SrqLimitReached { srq } => (
                ibv_async_event_element {
                    srq: o.srqs.get(&srq).copied().unwrap_or(0) as *mut ibv_srq,
                },
                IBV_EVENT_SRQ_LIMIT_REACHED,
            ),
            AsyncEvent::PortErr { port } => (port_elem(port), IBV_EVENT_PORT_ERR),
            AsyncEvent::PortActive { port } => (port_elem(port), IBV_EVENT_PORT_ACTIVE),
            AsyncEvent::DeviceFatal => (port_elem(0), IBV_EVENT_DEVICE_FATAL),
        };
        // SAFETY: checked non-NULL.
        unsafe {
            *event = ibv_async_event {
                element,
                event_type: ty,
            }
        };
        Ok(())
    })
}

fn port_elem(port: u8) -> ibv_async_event_element {
    ibv_async_event_element {
        port_num: c_int::from(port),
    }
}

fn qp_elem(o: &Objects, qpn: u32) -> ibv_async_event_element {
    ibv_async_event_element {
        qp: o.qps.get(&qpn).copied().unwrap_or(0) as *mut ibv_qp,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}

// ---- misc library calls --------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// `IBV_FORK_UNNEEDED`: the soft NIC pins nothing.
#[no_mangle]
pub unsafe extern "C" fn ibv_is_fork_initialized() -> c_int {
    2
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    c"/sys".as_ptr()
}

/// Reads `dir/file` into `buf` without its trailing newline; returns the
/// length or -1 (real sysfs files only: the soft device has none).
#[no_mangle]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: size_t,
) -> c_int {
    if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
        guard::set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: NUL-terminated strings from the caller.
    let (d, f) = unsafe {
        (
            std::ffi::CStr::from_ptr(dir).to_string_lossy().into_owned(),
            std::ffi::CStr::from_ptr(file)
                .to_string_lossy()
                .into_owned(),
        )
    };
    let Ok(mut bytes) = std::fs::read(format!("{d}/{f}")) else {
        guard::set_errno(libc::ENOENT);
        return -1;
    };
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    if bytes.len() >= size {
        return -1;
    }
    // SAFETY: buf holds `size` bytes; we write len + 1 <= size.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        *buf.add(bytes.len()) = 0;
    }
    c_int::try_from(bytes.len()).unwrap_or(-1)
}

/// `ibv_query_rt_values_ex` and friends are not provided: the inline
/// helpers see a NULL op and return EOPNOTSUPP.
#[no_mangle]
pub unsafe extern "C" fn ibv_node_type_str(t: c_int) -> *const c_char {
    match t {
        IBV_NODE_CA => c"InfiniBand channel adapter",
        IBV_NODE_SWITCH => c"InfiniBand switch",
        IBV_NODE_ROUTER => c"InfiniBand router",
        IBV_NODE_RNIC => c"iWARP NIC",
        IBV_NODE_USNIC => c"usNIC",
        IBV_NODE_USNIC_UDP => c"usNIC UDP",
        IBV_NODE_UNSPECIFIED => c"unspecified",
        _ => c"unknown",
    }
    .as_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_port_state_str(s: u32) -> *const c_char {
    match s {
        IBV_PORT_NOP => c"PORT_NOP",
        IBV_PORT_DOWN => c"PORT_DOWN",
        IBV_PORT_INIT => c"PORT_INIT",
        IBV_PORT_ARMED => c"PORT_ARMED",
        IBV_PORT_ACTIVE => c"PORT_ACTIVE",
        IBV_PORT_ACTIVE_DEFER => c"PORT_ACTIVE_DEFER",
        _ => c"invalid state",
    }
    .as_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_event_type_str(e: u32) -> *const c_char {
    const NAMES: [&std::ffi::CStr; 20] = [
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ fatal",
    ];
    NAMES
        .get(e as usize)
        .map_or(c"unknown".as_ptr(), |s| s.as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn ibv_wc_status_str(status: u32) -> *const c_char {
    rdmakit_vocab::wc::status_cstr(status).as_ptr()
}
