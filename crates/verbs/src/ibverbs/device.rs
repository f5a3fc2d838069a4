//! One open libibverbs device: [`DeviceOps`] over an `ibv_context`.
//!
//! Handles are this crate's `u32`s: QPs are their QP number, MRs their
//! lkey, every other object a per-device counter. A table maps them to the
//! library's pointers. Creation and destruction take the table's write
//! lock; every other call takes its read lock for the whole call, so an
//! object cannot be destroyed while a call uses its pointer.

use std::collections::HashMap;
use std::ffi::c_int;
use std::os::fd::RawFd;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use libc::c_void;
use rdmakit_ibverbs_abi::consts::*;
use rdmakit_ibverbs_abi::*;
use rdmakit_proto::{Access, AttrMask, QpAttr, RecvWr, Wc};
use rdmakit_types::{
    AsyncEvent, Av, DeviceAttr, Gid, GidEntry, GidType, LinkLayer, PortAttr, QpInit, SendRequest,
};

use super::convert;
use super::library::{clear_errno, errno_or, status_errno, verb_error, Library};
use crate::error::{Errno, Error, Layer, Result};
use crate::provider::DeviceOps;

/// What the table keeps of a QP.
pub(super) struct QpRec {
    pub(super) qp: *mut ibv_qp,
    pub(super) init: QpInit,
}

/// Handle → pointer tables of one device.
#[derive(Default)]
pub(super) struct Tables {
    next: u32,
    pub(super) pds: HashMap<u32, *mut ibv_pd>,
    pub(super) mrs: HashMap<u32, *mut ibv_mr>,
    pub(super) chans: HashMap<u32, *mut ibv_comp_channel>,
    pub(super) cqs: HashMap<u32, *mut ibv_cq>,
    pub(super) qps: HashMap<u32, QpRec>,
    pub(super) srqs: HashMap<u32, *mut ibv_srq>,
    pub(super) ahs: HashMap<u32, *mut ibv_ah>,
}

// SAFETY: the pointers are owned by this device and used only under its
// lock; libibverbs objects may be used from any thread.
unsafe impl Send for Tables {}
// SAFETY: as above; shared access only reads the maps.
unsafe impl Sync for Tables {}

impl Tables {
    fn handle(&mut self) -> u32 {
        self.next = self.next.wrapping_add(1).max(1);
        self.next
    }
}

/// The error for a handle the table does not know: application layer.
pub(super) fn no_such(verb: &'static str, what: &str, h: u32) -> Error {
    Error::application(verb, Errno::EINVAL, format!("no {what} with handle {h:#x}"))
}

/// An open device of a loaded libibverbs.
pub struct IbvDevice {
    pub(super) lib: Arc<Library>,
    pub(super) ctx: *mut ibv_context,
    name: String,
    node_type: c_int,
    transport: c_int,
    pub(super) t: RwLock<Tables>,
}

// SAFETY: the context is used through libibverbs' thread-safe entry points;
// the tables are behind a lock.
unsafe impl Send for IbvDevice {}
// SAFETY: as above.
unsafe impl Sync for IbvDevice {}

impl std::fmt::Debug for IbvDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IbvDevice")
            .field("name", &self.name)
            .field("library", &self.lib.path())
            .finish()
    }
}

/// Sets `O_NONBLOCK` on `fd` (the comp channel and async fds are read only
/// after `poll` says so; non-blocking keeps a lost race from blocking).
fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on an fd the library owns, changing only its flags.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
    }
}

/// Waits until `fd` is readable or `deadline` passes; true when readable.
fn wait_readable(fd: RawFd, deadline: Option<Instant>) -> bool {
    let ms = match deadline {
        None => -1,
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            c_int::try_from(left.as_millis().max(1)).unwrap_or(c_int::MAX)
        }
    };
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n > 0
}

impl IbvDevice {
    /// Opens `dev` (from the library's device list, still alive).
    ///
    /// # Safety
    /// `dev` is an entry of a device list of `lib` that is not freed yet.
    pub(super) unsafe fn open(
        lib: Arc<Library>,
        dev: *mut ibv_device,
        name: String,
    ) -> Result<Self> {
        clear_errno();
        // SAFETY: per this function's contract.
        let ctx = unsafe { (lib.f.open_device)(dev) };
        if ctx.is_null() {
            let e = errno_or(Errno::ENODEV);
            return Err(verb_error(
                "ibv_open_device",
                e,
                if e == Errno(libc::EACCES) || e == Errno::EPERM {
                    Layer::Application
                } else {
                    Layer::Kernel
                },
                format!("opening {name} (/dev/infiniband/uverbs* of {name})"),
            ));
        }
        // SAFETY: `dev` is alive; the context was just opened.
        let (node_type, transport) = unsafe { ((*dev).node_type, (*dev).transport_type) };
        // SAFETY: a live context.
        set_nonblocking(unsafe { (*ctx).async_fd });
        Ok(IbvDevice {
            lib,
            ctx,
            name,
            node_type,
            transport,
            t: RwLock::new(Tables::default()),
        })
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, Tables> {
        self.t.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Tables> {
        self.t.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The `verbs_context` op at `offset` when the context is extended and
    /// its `sz` covers it (`verbs_get_ctx_op`).
    fn vctx(&self) -> Option<*mut verbs_context> {
        // SAFETY: a live context; abi_compat tells whether it is embedded in
        // a verbs_context, whose `sz` is then readable.
        unsafe {
            if (*self.ctx).abi_compat != ABI_IS_EXTENDED {
                return None;
            }
            Some(verbs_context_of(self.ctx))
        }
    }

    fn ext_query_port(&self) -> Option<ctx_fn::QueryPort> {
        let v = self.vctx()?;
        let off = core::mem::offset_of!(verbs_context, query_port);
        // SAFETY: `v` is a live verbs_context (checked by vctx).
        unsafe {
            if (*v).sz < VERBS_CONTEXT_SZ - off {
                return None;
            }
            (*v).query_port
        }
    }

    fn raw_port(&self, port: u8) -> Result<ibv_port_attr> {
        let mut a = ibv_port_attr::default();
        let rc = if let Some(q) = self.ext_query_port() {
            // SAFETY: live context, a full-size attribute struct.
            unsafe {
                q(
                    self.ctx,
                    port,
                    &mut a,
                    core::mem::size_of::<ibv_port_attr>(),
                )
            }
        } else {
            let q = self
                .lib
                .f
                .query_port
                .ok_or_else(|| self.lib.missing("ibv_query_port"))?;
            // SAFETY: the compat entry point writes at most 48 of our 52 bytes.
            unsafe { q(self.ctx, port, &mut a) }
        };
        if rc != 0 {
            return Err(verb_error(
                "ibv_query_port",
                status_errno(rc),
                Layer::Kernel,
                format!("port {port} of {}", self.name),
            ));
        }
        Ok(a)
    }

    /// The valid entries of a port's GID table: (index, entry).
    /// The address vector that reaches `av.dgid` from `port` (attributes
    /// `pa`) through a GRH with `av.traffic_class`, sent from the GID entry
    /// that matches it.
    fn grh_ah_attr(&self, port: u8, pa: &ibv_port_attr, av: Av) -> ibv_ah_attr {
        let dgid = av.dgid;
        let table = self.gid_table(port, u32::try_from(pa.gid_tbl_len).unwrap_or(0));
        ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ibv_gid { raw: dgid.0 },
                flow_label: 0,
                sgid_index: convert::sgid_index_for(&table, &dgid),
                hop_limit: 64,
                traffic_class: av.traffic_class,
            },
            is_global: 1,
            port_num: port,
            ..ibv_ah_attr::default()
        }
    }

    pub(super) fn gid_table(&self, port: u8, len: u32) -> Vec<(u32, GidEntry)> {
        if let Some(f) = self.lib.f.query_gid_table {
            // Every port's entries, so room for all of them.
            let cap = usize::try_from(len).unwrap_or(0).max(1) * 4;
            let mut v = vec![ibv_gid_entry::default(); cap];
            // SAFETY: `v` has room for `cap` entries of the size passed.
            let n = unsafe {
                f(
                    self.ctx,
                    v.as_mut_ptr(),
                    cap,
                    0,
                    core::mem::size_of::<ibv_gid_entry>(),
                )
            };
            if let Ok(n) = usize::try_from(n) {
                return v
                    .into_iter()
                    .take(n)
                    .filter(|e| e.port_num == u32::from(port))
                    .map(|e| {
                        (
                            e.gid_index,
                            GidEntry {
                                gid: Gid(e.gid.raw),
                                gid_type: convert::gid_type_from_c(e.gid_type),
                            },
                        )
                    })
                    .collect();
            }
        }
        (0..len)
            .filter_map(|i| {
                let e = self.gid_entry(port, i).ok()?;
                (!e.gid.is_zero()).then_some((i, e))
            })
            .collect()
    }

    /// One GID with its type (`ibv_query_gid_ex`, else `ibv_query_gid`
    /// with the type RoCE v2).
    fn gid_entry(&self, port: u8, index: u32) -> Result<GidEntry> {
        if let Some(f) = self.lib.f.query_gid_ex {
            let mut e = ibv_gid_entry::default();
            // SAFETY: live context, one entry of the size passed.
            let rc = unsafe {
                f(
                    self.ctx,
                    u32::from(port),
                    index,
                    &mut e,
                    0,
                    core::mem::size_of::<ibv_gid_entry>(),
                )
            };
            if rc == 0 {
                return Ok(GidEntry {
                    gid: Gid(e.gid.raw),
                    gid_type: convert::gid_type_from_c(e.gid_type),
                });
            }
        }
        Ok(GidEntry {
            gid: self.query_gid(port, index)?,
            gid_type: GidType::RoceV2,
        })
    }

    /// The QP `qpn`, with the read lock that keeps it alive.
    pub(super) fn qp_ptr(
        &self,
        verb: &'static str,
        qpn: u32,
    ) -> Result<(RwLockReadGuard<'_, Tables>, *mut ibv_qp)> {
        self.ptr_of(|t| t.qps.get(&qpn).map(|r| r.qp), verb, "QP", qpn)
    }

    fn ptr_of<T>(
        &self,
        map: impl FnOnce(&Tables) -> Option<*mut T>,
        verb: &'static str,
        what: &str,
        h: u32,
    ) -> Result<(RwLockReadGuard<'_, Tables>, *mut T)> {
        let g = self.read();
        let p = map(&g).ok_or_else(|| no_such(verb, what, h))?;
        Ok((g, p))
    }
}

/// Destroys every object in `objs` with `destroy`, when the library has it.
///
/// # Safety
/// Every object is live and destroyed nowhere else.
unsafe fn destroy_all<T>(
    objs: impl Iterator<Item = *mut T>,
    destroy: Option<unsafe extern "C" fn(*mut T) -> c_int>,
) {
    if let Some(d) = destroy {
        for p in objs {
            // SAFETY: per the contract.
            unsafe { d(p) };
        }
    }
}

impl Drop for IbvDevice {
    fn drop(&mut self) {
        let t = std::mem::take(self.t.get_mut().unwrap_or_else(|e| e.into_inner()));
        let f = &self.lib.f;
        // SAFETY: every pointer is a live object of this context, destroyed
        // once, children before parents; then the context is closed.
        unsafe {
            destroy_all(t.qps.values().map(|r| r.qp), f.destroy_qp);
            destroy_all(t.srqs.values().copied(), f.destroy_srq);
            destroy_all(t.ahs.values().copied(), f.destroy_ah);
            destroy_all(t.mrs.values().copied(), f.dereg_mr);
            destroy_all(t.cqs.values().copied(), f.destroy_cq);
            destroy_all(t.chans.values().copied(), f.destroy_comp_channel);
            destroy_all(t.pds.values().copied(), f.dealloc_pd);
            (f.close_device)(self.ctx);
        }
    }
}

/// Calls a pointer-returning constructor and turns NULL into an error.
macro_rules! create {
    ($self:ident, $f:ident, $verb:literal, $what:expr, $($arg:expr),*) => {{
        let f = $self.lib.f.$f.ok_or_else(|| $self.lib.missing($verb))?;
        clear_errno();
        // SAFETY: the arguments are live objects of this context and
        // attribute structs that outlive the call.
        let p = unsafe { f($($arg),*) };
        if p.is_null() {
            return Err(verb_error($verb, errno_or(Errno::EINVAL), Layer::Kernel, $what));
        }
        p
    }};
}

/// Calls a status-returning destructor/modifier and turns non-zero into an error.
macro_rules! status {
    ($self:ident, $f:ident, $verb:literal, $what:expr, $($arg:expr),*) => {{
        let f = $self.lib.f.$f.ok_or_else(|| $self.lib.missing($verb))?;
        // SAFETY: as in `create!`.
        let rc = unsafe { f($($arg),*) };
        if rc != 0 {
            return Err(verb_error($verb, status_errno(rc), Layer::Kernel, $what));
        }
    }};
}

/// Looks `key` up in the table, calls the destroy verb on the object and
/// forgets it (`table.map(f)`: the pointer is `f` of the entry).
macro_rules! destroy {
    ($self:ident, $table:ident, $f:ident, $verb:literal, $what:literal, $key:expr) => {
        destroy!($self, $table.map(|r| *r), $f, $verb, $what, $key)
    };
    ($self:ident, $table:ident.map($get:expr), $f:ident, $verb:literal, $what:literal, $key:expr) => {{
        let key = $key;
        let mut t = $self.write();
        let p = t
            .$table
            .get(&key)
            .map($get)
            .ok_or_else(|| no_such($verb, $what, key))?;
        status!($self, $f, $verb, format!(concat!($what, " {:#x}"), key), p);
        t.$table.remove(&key);
        Ok(())
    }};
}

impl DeviceOps for IbvDevice {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn query_device(&self) -> Result<DeviceAttr> {
        let f = self
            .lib
            .f
            .query_device
            .ok_or_else(|| self.lib.missing("ibv_query_device"))?;
        // SAFETY: ibv_device_attr is plain old data; all-zero is valid.
        let mut a: ibv_device_attr = unsafe { core::mem::zeroed() };
        // SAFETY: live context, a full-size attribute struct.
        let rc = unsafe { f(self.ctx, &mut a) };
        if rc != 0 {
            return Err(verb_error(
                "ibv_query_device",
                status_errno(rc),
                Layer::Kernel,
                format!("device {}", self.name),
            ));
        }
        // SAFETY: a live context.
        let vectors = unsafe { (*self.ctx).num_comp_vectors };
        Ok(DeviceAttr {
            num_comp_vectors: u32::try_from(vectors).unwrap_or(0),
            node_type: u32::try_from(self.node_type).unwrap_or(u32::MAX),
            transport: u32::try_from(self.transport).unwrap_or(u32::MAX),
            ..DeviceAttr::from(&a)
        })
    }

    fn query_port(&self, port: u8) -> Result<PortAttr> {
        let a = self.raw_port(port)?;
        let len = u32::try_from(a.gid_tbl_len).unwrap_or(0);
        let mut gids = vec![
            GidEntry {
                gid: Gid::default(),
                gid_type: if a.link_layer == IBV_LINK_LAYER_ETHERNET {
                    GidType::RoceV2
                } else {
                    GidType::RoceV1
                },
            };
            usize::try_from(len).unwrap_or(0)
        ];
        for (i, e) in self.gid_table(port, len) {
            if let Some(slot) = gids.get_mut(usize::try_from(i).unwrap_or(usize::MAX)) {
                *slot = e;
            }
        }
        let pkeys = (0..a.pkey_tbl_len)
            .map(|i| self.query_pkey(port, i).unwrap_or(0))
            .collect();
        Ok(PortAttr {
            gids,
            pkeys,
            ..PortAttr::from(&a)
        })
    }

    fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        let f = self
            .lib
            .f
            .query_gid
            .ok_or_else(|| self.lib.missing("ibv_query_gid"))?;
        let mut g = ibv_gid::default();
        let i = c_int::try_from(index).map_err(|_| {
            Error::application("ibv_query_gid", Errno::EINVAL, "GID index too large")
        })?;
        // SAFETY: live context, one GID.
        let rc = unsafe { f(self.ctx, port, i, &mut g) };
        if rc != 0 {
            return Err(verb_error(
                "ibv_query_gid",
                status_errno(rc),
                Layer::Kernel,
                format!("GID {index} of port {port}"),
            ));
        }
        Ok(Gid(g.raw))
    }

    fn query_pkey(&self, port: u8, index: u16) -> Result<u16> {
        let f = self
            .lib
            .f
            .query_pkey
            .ok_or_else(|| self.lib.missing("ibv_query_pkey"))?;
        let mut k: u16 = 0;
        // SAFETY: live context, one P_Key.
        let rc = unsafe { f(self.ctx, port, c_int::from(index), &mut k) };
        if rc != 0 {
            return Err(verb_error(
                "ibv_query_pkey",
                status_errno(rc),
                Layer::Kernel,
                format!("P_Key {index} of port {port}"),
            ));
        }
        // The library hands it over in network order.
        Ok(u16::from_be(k))
    }

    fn alloc_pd(&self) -> Result<u32> {
        let p = create!(
            self,
            alloc_pd,
            "ibv_alloc_pd",
            format!("on {}", self.name),
            self.ctx
        );
        let mut t = self.write();
        let h = t.handle();
        t.pds.insert(h, p);
        Ok(h)
    }

    fn dealloc_pd(&self, pd: u32) -> Result<()> {
        destroy!(self, pds, dealloc_pd, "ibv_dealloc_pd", "PD", pd)
    }

    unsafe fn reg_mr(&self, pd: u32, ptr: *mut u8, len: usize, access: Access) -> Result<u32> {
        let mut t = self.write();
        let p = *t
            .pds
            .get(&pd)
            .ok_or_else(|| no_such("ibv_reg_mr", "PD", pd))?;
        let acc = c_int::try_from(access.0).unwrap_or(c_int::MAX);
        let f = self
            .lib
            .f
            .reg_mr
            .ok_or_else(|| self.lib.missing("ibv_reg_mr"))?;
        clear_errno();
        // SAFETY: the caller keeps the buffer valid until dereg_mr.
        let mr = unsafe { f(p, ptr.cast::<c_void>(), len, acc) };
        if mr.is_null() {
            let e = errno_or(Errno::EINVAL);
            // ENOMEM / EFAULT from pinning: RLIMIT_MEMLOCK or a bad range,
            // the application's to fix.
            let layer = if e == Errno::ENOMEM || e == Errno::EFAULT || e == Errno::EPERM {
                Layer::Application
            } else {
                Layer::Kernel
            };
            return Err(verb_error(
                "ibv_reg_mr",
                e,
                layer,
                format!("{len} bytes at {ptr:p}, access {access:?}"),
            ));
        }
        // SAFETY: a live MR.
        let lkey = unsafe { (*mr).lkey };
        t.mrs.insert(lkey, mr);
        Ok(lkey)
    }

    fn dereg_mr(&self, key: u32) -> Result<()> {
        destroy!(self, mrs, dereg_mr, "ibv_dereg_mr", "lkey", key)
    }

    fn mr_rkey(&self, key: u32) -> Option<u32> {
        let t = self.read();
        // SAFETY: a live MR (under the read lock).
        t.mrs.get(&key).map(|&m| unsafe { (*m).rkey })
    }

    fn create_comp_channel(&self) -> Result<u32> {
        let p = create!(
            self,
            create_comp_channel,
            "ibv_create_comp_channel",
            format!("on {}", self.name),
            self.ctx
        );
        // SAFETY: a live channel.
        set_nonblocking(unsafe { (*p).fd });
        let mut t = self.write();
        let h = t.handle();
        t.chans.insert(h, p);
        Ok(h)
    }

    fn destroy_comp_channel(&self, ch: u32) -> Result<()> {
        destroy!(
            self,
            chans,
            destroy_comp_channel,
            "ibv_destroy_comp_channel",
            "channel",
            ch
        )
    }

    fn comp_channel_fd(&self, ch: u32) -> Option<RawFd> {
        let t = self.read();
        // SAFETY: a live channel (under the read lock).
        t.chans.get(&ch).map(|&p| unsafe { (*p).fd })
    }

    fn get_cq_event(&self, ch: u32, timeout: Option<Duration>) -> Result<u32> {
        let f = self
            .lib
            .f
            .get_cq_event
            .ok_or_else(|| self.lib.missing("ibv_get_cq_event"))?;
        let ack = self
            .lib
            .f
            .ack_cq_events
            .ok_or_else(|| self.lib.missing("ibv_ack_cq_events"))?;
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let fd = {
                let (_g, p) = self.ptr_of(
                    |t| t.chans.get(&ch).copied(),
                    "ibv_get_cq_event",
                    "channel",
                    ch,
                )?;
                let mut cq: *mut ibv_cq = core::ptr::null_mut();
                let mut cq_ctx: *mut c_void = core::ptr::null_mut();
                clear_errno();
                // SAFETY: a live channel; its fd is non-blocking, so this
                // returns at once when no event is pending.
                let rc = unsafe { f(p, &mut cq, &mut cq_ctx) };
                if rc == 0 {
                    // SAFETY: the CQ the event is for; acked at once (its
                    // destruction waits for every event to be acked).
                    unsafe { ack(cq, 1) };
                    return Ok(u32::try_from(cq_ctx as usize).unwrap_or(0));
                }
                let e = errno_or(Errno::EIO);
                if e != Errno::EAGAIN {
                    return Err(verb_error(
                        "ibv_get_cq_event",
                        e,
                        Layer::Library,
                        format!("channel {ch:#x}"),
                    ));
                }
                // SAFETY: a live channel.
                unsafe { (*p).fd }
            };
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Error {
                    verb: "ibv_get_cq_event",
                    errno: Errno::ETIMEDOUT,
                    layer: Layer::Library,
                    detail: format!("no completion event within {timeout:?}"),
                    bad_wr: None,
                });
            }
            wait_readable(fd, deadline);
        }
    }

    fn create_cq(&self, cqe: u32, channel: Option<u32>) -> Result<u32> {
        let mut t = self.write();
        let ch = match channel {
            None => core::ptr::null_mut(),
            Some(c) => *t
                .chans
                .get(&c)
                .ok_or_else(|| no_such("ibv_create_cq", "channel", c))?,
        };
        let h = t.handle();
        let n = c_int::try_from(cqe).unwrap_or(c_int::MAX);
        let p = create!(
            self,
            create_cq,
            "ibv_create_cq",
            format!("{cqe} entries"),
            self.ctx,
            n,
            h as usize as *mut c_void,
            ch,
            0
        );
        t.cqs.insert(h, p);
        Ok(h)
    }

    fn destroy_cq(&self, cq: u32) -> Result<()> {
        destroy!(self, cqs, destroy_cq, "ibv_destroy_cq", "CQ", cq)
    }

    fn poll_cq(&self, cq: u32, out: &mut Vec<Wc>, max: usize) -> Result<usize> {
        self.poll_cq_impl(cq, out, max)
    }

    fn req_notify_cq(&self, cq: u32, solicited_only: bool) -> Result<()> {
        self.req_notify_impl(cq, solicited_only)
    }

    fn create_qp(&self, init: &QpInit) -> Result<u32> {
        let mut t = self.write();
        let pd = *t
            .pds
            .get(&init.pd)
            .ok_or_else(|| no_such("ibv_create_qp", "PD", init.pd))?;
        let cq = |h: u32| {
            t.cqs
                .get(&h)
                .copied()
                .ok_or_else(|| no_such("ibv_create_qp", "CQ", h))
        };
        let (scq, rcq) = (cq(init.send_cq)?, cq(init.recv_cq)?);
        let srq = match init.srq {
            None => core::ptr::null_mut(),
            Some(s) => *t
                .srqs
                .get(&s)
                .ok_or_else(|| no_such("ibv_create_qp", "SRQ", s))?,
        };
        let mut a = ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: scq,
            recv_cq: rcq,
            srq,
            cap: ibv_qp_cap {
                max_send_wr: init.max_send_wr,
                max_recv_wr: if init.srq.is_some() {
                    0
                } else {
                    init.max_recv_wr
                },
                max_send_sge: init.max_send_sge,
                max_recv_sge: if init.srq.is_some() {
                    0
                } else {
                    init.max_recv_sge
                },
                max_inline_data: init.max_inline_data,
            },
            qp_type: convert::qp_type_to_c(init.qp_type),
            sq_sig_all: c_int::from(init.sq_sig_all),
        };
        let qp = create!(
            self,
            create_qp,
            "ibv_create_qp",
            format!("{:?} QP, caps {:?}", init.qp_type, a.cap),
            pd,
            &mut a
        );
        // SAFETY: a live QP.
        let qpn = unsafe { (*qp).qp_num };
        t.qps.insert(
            qpn,
            QpRec {
                qp,
                init: init.clone(),
            },
        );
        Ok(qpn)
    }

    fn modify_qp(&self, qpn: u32, attr: &QpAttr, mask: AttrMask, av: Option<Av>) -> Result<()> {
        let mut a = ibv_qp_attr::from(attr);
        if mask.contains(AttrMask::AV) {
            let Some(av) = av else {
                return Err(Error::application(
                    "ibv_modify_qp",
                    Errno::EINVAL,
                    "AttrMask::AV without a destination GID",
                ));
            };
            let port = if attr.port_num == 0 { 1 } else { attr.port_num };
            let pa = self.raw_port(port)?;
            if pa.link_layer != IBV_LINK_LAYER_ETHERNET {
                return Err(Error::application(
                    "ibv_modify_qp",
                    Errno::EOPNOTSUPP,
                    format!(
                        "port {port} of {} is InfiniBand: this provider connects by GID \
                         only (RoCE); an IB path needs the peer's LID",
                        self.name
                    ),
                ));
            }
            a.ah_attr = self.grh_ah_attr(port, &pa, av);
        }
        let (_g, r) = self.qp_ptr("ibv_modify_qp", qpn)?;
        let m = c_int::try_from(mask.0).unwrap_or(c_int::MAX);
        status!(
            self,
            modify_qp,
            "ibv_modify_qp",
            format!("QP {qpn:#x} to {:?}, mask {mask:?}", attr.qp_state),
            r,
            &mut a,
            m
        );
        Ok(())
    }

    fn query_qp(&self, qpn: u32) -> Result<(QpAttr, QpInit)> {
        let t = self.read();
        let r = t
            .qps
            .get(&qpn)
            .ok_or_else(|| no_such("ibv_query_qp", "QP", qpn))?;
        let mut a = ibv_qp_attr::default();
        // SAFETY: plain old data; all-zero is valid.
        let mut ia: ibv_qp_init_attr = unsafe { core::mem::zeroed() };
        let mask = (IBV_QP_STATE
            | IBV_QP_CUR_STATE
            | IBV_QP_EN_SQD_ASYNC_NOTIFY
            | IBV_QP_ACCESS_FLAGS
            | IBV_QP_PKEY_INDEX
            | IBV_QP_PORT
            | IBV_QP_QKEY
            | IBV_QP_AV
            | IBV_QP_PATH_MTU
            | IBV_QP_TIMEOUT
            | IBV_QP_RETRY_CNT
            | IBV_QP_RNR_RETRY
            | IBV_QP_RQ_PSN
            | IBV_QP_MAX_QP_RD_ATOMIC
            | IBV_QP_MIN_RNR_TIMER
            | IBV_QP_SQ_PSN
            | IBV_QP_MAX_DEST_RD_ATOMIC
            | IBV_QP_CAP
            | IBV_QP_DEST_QPN) as c_int;
        status!(
            self,
            query_qp,
            "ibv_query_qp",
            format!("QP {qpn:#x}"),
            r.qp,
            &mut a,
            mask,
            &mut ia
        );
        let attr = QpAttr::try_from(&a).map_err(|_| Error {
            verb: "ibv_query_qp",
            errno: Errno::EIO,
            layer: Layer::Kernel,
            detail: format!("QP {qpn:#x} reports state {}", a.qp_state),
            bad_wr: None,
        })?;
        let mut init = r.init.clone();
        init.max_send_wr = ia.cap.max_send_wr;
        init.max_send_sge = ia.cap.max_send_sge;
        init.max_inline_data = ia.cap.max_inline_data;
        if init.srq.is_none() {
            init.max_recv_wr = ia.cap.max_recv_wr;
            init.max_recv_sge = ia.cap.max_recv_sge;
        }
        if let Some(tp) = convert::qp_type_from_c(ia.qp_type) {
            init.qp_type = tp;
        }
        Ok((attr, init))
    }

    fn destroy_qp(&self, qpn: u32) -> Result<()> {
        destroy!(
            self,
            qps.map(|r| r.qp),
            destroy_qp,
            "ibv_destroy_qp",
            "QP",
            qpn
        )
    }

    unsafe fn post_send(&self, qpn: u32, reqs: &[SendRequest]) -> Result<()> {
        // SAFETY: forwarded from this method's contract.
        unsafe { self.post_send_impl(qpn, reqs) }
    }

    fn post_recv(&self, qpn: u32, wrs: &[RecvWr]) -> Result<()> {
        self.post_recv_impl(qpn, wrs)
    }

    fn create_srq(&self, pd: u32, max_wr: u32, max_sge: u32, srq_limit: u32) -> Result<u32> {
        let mut t = self.write();
        let p = *t
            .pds
            .get(&pd)
            .ok_or_else(|| no_such("ibv_create_srq", "PD", pd))?;
        let h = t.handle();
        let mut a = ibv_srq_init_attr {
            srq_context: h as usize as *mut c_void,
            attr: ibv_srq_attr {
                max_wr,
                max_sge,
                srq_limit,
            },
        };
        let s = create!(
            self,
            create_srq,
            "ibv_create_srq",
            format!("max_wr {max_wr}, max_sge {max_sge}"),
            p,
            &mut a
        );
        t.srqs.insert(h, s);
        Ok(h)
    }

    fn modify_srq_limit(&self, srq: u32, limit: u32) -> Result<()> {
        let (_g, p) = self.ptr_of(|t| t.srqs.get(&srq).copied(), "ibv_modify_srq", "SRQ", srq)?;
        let mut a = ibv_srq_attr {
            srq_limit: limit,
            ..ibv_srq_attr::default()
        };
        status!(
            self,
            modify_srq,
            "ibv_modify_srq",
            format!("SRQ {srq:#x} limit {limit}"),
            p,
            &mut a,
            IBV_SRQ_LIMIT as c_int
        );
        Ok(())
    }

    fn destroy_srq(&self, srq: u32) -> Result<()> {
        destroy!(self, srqs, destroy_srq, "ibv_destroy_srq", "SRQ", srq)
    }

    fn post_srq_recv(&self, srq: u32, wrs: &[RecvWr]) -> Result<()> {
        self.post_srq_recv_impl(srq, wrs)
    }

    fn create_ah(&self, pd: u32, av: Av) -> Result<u32> {
        let pa = self.raw_port(1)?;
        let mut a = self.grh_ah_attr(1, &pa, av);
        let mut t = self.write();
        let p = *t
            .pds
            .get(&pd)
            .ok_or_else(|| no_such("ibv_create_ah", "PD", pd))?;
        let ah = create!(
            self,
            create_ah,
            "ibv_create_ah",
            format!("to {}", av.dgid.to_ipv6()),
            p,
            &mut a
        );
        let h = t.handle();
        t.ahs.insert(h, ah);
        Ok(h)
    }

    fn destroy_ah(&self, ah: u32) -> Result<()> {
        destroy!(self, ahs, destroy_ah, "ibv_destroy_ah", "AH", ah)
    }

    fn get_async_event(&self, timeout: Duration) -> Option<AsyncEvent> {
        let get = self.lib.f.get_async_event?;
        let ack = self.lib.f.ack_async_event?;
        let deadline = Instant::now() + timeout;
        loop {
            // SAFETY: plain old data; all-zero is valid.
            let mut ev: ibv_async_event = unsafe { core::mem::zeroed() };
            // SAFETY: live context; its async fd is non-blocking.
            let rc = unsafe { get(self.ctx, &mut ev) };
            if rc == 0 {
                let mapped = self.map_event(&ev);
                // SAFETY: the event just returned, acked once.
                unsafe { ack(&mut ev) };
                if mapped.is_some() {
                    return mapped;
                }
                continue;
            }
            if Instant::now() >= deadline {
                return None;
            }
            // SAFETY: a live context.
            let fd = unsafe { (*self.ctx).async_fd };
            wait_readable(fd, Some(deadline));
        }
    }
}

impl IbvDevice {
    /// An async event in this crate's terms; `None` for the kinds
    /// [`AsyncEvent`] has no variant for (port, GID, LID changes ...).
    fn map_event(&self, ev: &ibv_async_event) -> Option<AsyncEvent> {
        // SAFETY: the union member read is the one the event type names.
        unsafe {
            match ev.event_type {
                IBV_EVENT_CQ_ERR => Some(AsyncEvent::CqErr {
                    cq: u32::try_from((*ev.element.cq).cq_context as usize).unwrap_or(0),
                }),
                IBV_EVENT_QP_FATAL => Some(AsyncEvent::QpFatal {
                    qpn: (*ev.element.qp).qp_num,
                }),
                IBV_EVENT_QP_REQ_ERR => Some(AsyncEvent::QpReqErr {
                    qpn: (*ev.element.qp).qp_num,
                }),
                IBV_EVENT_QP_ACCESS_ERR => Some(AsyncEvent::QpAccessErr {
                    qpn: (*ev.element.qp).qp_num,
                }),
                IBV_EVENT_SRQ_LIMIT_REACHED => Some(AsyncEvent::SrqLimitReached {
                    srq: u32::try_from((*ev.element.srq).srq_context as usize).unwrap_or(0),
                }),
                IBV_EVENT_PORT_ERR => Some(AsyncEvent::PortErr {
                    port: u8::try_from(ev.element.port_num).unwrap_or(0),
                }),
                IBV_EVENT_PORT_ACTIVE => Some(AsyncEvent::PortActive {
                    port: u8::try_from(ev.element.port_num).unwrap_or(0),
                }),
                IBV_EVENT_DEVICE_FATAL => Some(AsyncEvent::DeviceFatal),
                _ => None,
            }
        }
    }

    /// The link layer of port 1 (for tools deciding how to address peers).
    pub fn link_layer(&self) -> Result<LinkLayer> {
        Ok(convert::link_layer_from_c(self.raw_port(1)?.link_layer))
    }
}
