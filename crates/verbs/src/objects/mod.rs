//! The verbs objects: context, PD, MR, CQ, completion channel, QP, SRQ, AH.
//! Every object holds an `Arc` of its parent, so parents outlive children;
//! dropping an object destroys it (errors on destroy are ignored in `Drop`).

use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmakit_proto::{
    modify_is_ok, Access, AddressHandle, AttrMask, Mtu, QpAttr, QpState, QpType, RecvWr, SendOp,
    SendWr, Sge, UdDest, Wc,
};
use rdmakit_soft::{DeviceConfig, Errno};
use rdmakit_types::{AsyncEvent, DeviceAttr, Gid, PortAttr, QpInit, SendRequest};

use crate::buf::OwnedMem;
use crate::error::{Error, Layer, Result};
use crate::provider::{DeviceOps, Provider, SoftProvider};

mod qp;
pub use qp::{ConnectOpts, Endpoint, InitQp, Qp, QpBuilder, RtrQp};

/// Names of the devices of the provider `choice` selects (auto: real
/// devices through libibverbs when it has any, else the soft NIC; see
/// [`crate::ibverbs::select`]).
///
/// # Errors
/// Provider errors.
pub fn devices(choice: crate::ProviderChoice) -> Result<Vec<String>> {
    crate::ibverbs::select::devices(choice)
}

/// Opens device `name` of the provider `choice` selects (a soft NIC's
/// address is `RDMAKIT_SOFT_ADDR`, else the host device's, shared by every
/// process: the host's first non-loopback address, or 127.0.0.1).
///
/// # Errors
/// `ENODEV` (library layer) when no provider has such a device; the
/// provider's open error.
pub fn open_device(choice: crate::ProviderChoice, name: &str) -> Result<Arc<Context>> {
    crate::ibverbs::select::open_device(choice, name)
}

/// An open device (`struct ibv_context`).
pub struct Context {
    ops: Arc<dyn DeviceOps>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("name", &self.ops.name())
            .finish()
    }
}

impl Context {
    /// Opens `name` through `provider`.
    ///
    /// # Errors
    /// The provider's open error.
    pub fn open(provider: &dyn Provider, name: &str) -> Result<Arc<Context>> {
        Ok(Arc::new(Context {
            ops: provider.open(name)?,
        }))
    }

    /// Opens a soft NIC with `config` (address auto-picked unless set).
    ///
    /// # Errors
    /// Binding the UDP socket failed.
    pub fn open_soft(config: DeviceConfig) -> Result<Arc<Context>> {
        let p = SoftProvider { config };
        let name = p
            .device_names()?
            .into_iter()
            .next()
            .unwrap_or_else(|| "soft0".into());
        Context::open(&p, &name)
    }

    /// The provider operations (for tools that need the raw handles).
    pub fn ops(&self) -> &dyn DeviceOps {
        &*self.ops
    }

    /// The soft device, when this context is one.
    pub fn soft(&self) -> Option<&rdmakit_soft::Device> {
        self.ops.as_soft()
    }

    /// Device name.
    pub fn name(&self) -> String {
        self.ops.name()
    }

    /// `ibv_query_device`.
    ///
    /// # Errors
    /// Provider errors.
    pub fn query_device(&self) -> Result<DeviceAttr> {
        self.ops.query_device()
    }

    /// `ibv_query_port`.
    ///
    /// # Errors
    /// `EINVAL` for a port that does not exist.
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        self.ops.query_port(port)
    }

    /// `ibv_query_gid`.
    ///
    /// # Errors
    /// `EINVAL` for a bad port or index.
    pub fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        self.ops.query_gid(port, index)
    }

    /// `ibv_query_pkey`.
    ///
    /// # Errors
    /// `EINVAL` for a bad port or index.
    pub fn query_pkey(&self, port: u8, index: u16) -> Result<u16> {
        self.ops.query_pkey(port, index)
    }

    /// `ibv_alloc_pd`.
    ///
    /// # Errors
    /// `EINVAL` when `max_pd` is reached.
    pub fn alloc_pd(self: &Arc<Self>) -> Result<Arc<Pd>> {
        let handle = self.ops.alloc_pd()?;
        Ok(Arc::new(Pd {
            ctx: Arc::clone(self),
            handle,
        }))
    }

    /// `ibv_create_comp_channel`.
    ///
    /// # Errors
    /// Provider errors.
    pub fn create_comp_channel(self: &Arc<Self>) -> Result<Arc<CompChannel>> {
        let handle = self.ops.create_comp_channel()?;
        Ok(Arc::new(CompChannel {
            ctx: Arc::clone(self),
            handle,
        }))
    }

    /// `ibv_create_cq` with room for `cqe` completions.
    ///
    /// # Errors
    /// `EINVAL` for `cqe` outside `1..=max_cqe` or when `max_cq` is reached.
    pub fn create_cq(
        self: &Arc<Self>,
        cqe: u32,
        channel: Option<&Arc<CompChannel>>,
    ) -> Result<Arc<Cq>> {
        let handle = self.ops.create_cq(cqe, channel.map(|c| c.handle))?;
        Ok(Arc::new(Cq {
            ctx: Arc::clone(self),
            handle,
            _channel: channel.cloned(),
        }))
    }

    /// `ibv_get_async_event` with a timeout.
    pub fn get_async_event(&self, timeout: Duration) -> Option<AsyncEvent> {
        self.ops.get_async_event(timeout)
    }
}

/// A protection domain.
#[derive(Debug)]
pub struct Pd {
    ctx: Arc<Context>,
    handle: u32,
}

impl Drop for Pd {
    fn drop(&mut self) {
        let _ = self.ctx.ops.dealloc_pd(self.handle);
    }
}

impl Pd {
    /// The device.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The provider handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// `ibv_reg_mr` of application memory.
    ///
    /// # Safety
    /// `[ptr, ptr + len)` must stay valid for reads and writes until the
    /// returned [`Mr`] is dropped, and while it is registered the
    /// application must not hold Rust references (`&[u8]`, `&mut [u8]`) to
    /// bytes the NIC may write (local receives/READs, remote WRITEs and
    /// atomics): synchronise through completions, or use [`Pd::alloc_buf`].
    ///
    /// # Errors
    /// `EINVAL` for bad access flags, a zero length or when `max_mr` is reached.
    pub unsafe fn reg_mr(self: &Arc<Self>, ptr: *mut u8, len: usize, access: Access) -> Result<Mr> {
        // SAFETY: forwarded from this function's contract.
        let key = unsafe { self.ctx.ops.reg_mr(self.handle, ptr, len, access) }?;
        Ok(Mr {
            pd: Arc::clone(self),
            key,
            rkey: self.ctx.ops.mr_rkey(key).unwrap_or(key),
            addr: ptr as u64,
            len,
            registered: true,
        })
    }

    /// Allocates `len` zeroed, page-aligned bytes and registers them: a
    /// safe, owned registered buffer.
    ///
    /// # Errors
    /// `ENOMEM` (application layer) when the allocation fails; `ibv_reg_mr`'s errors.
    pub fn alloc_buf(self: &Arc<Self>, len: usize, access: Access) -> Result<MrBuf> {
        let mem = OwnedMem::new(len).ok_or_else(|| {
            Error::application(
                "ibv_reg_mr",
                Errno::ENOMEM,
                format!("cannot allocate {len} bytes"),
            )
        })?;
        // SAFETY: `mem` is owned by the returned MrBuf, which frees it only
        // after the MR was deregistered (and never when that failed);
        // OwnedMem never creates references to its bytes (raw copies only).
        let mr = unsafe { self.reg_mr(mem.ptr(), mem.len(), access) }?;
        Ok(MrBuf { mr, mem })
    }

    /// `ibv_create_ah` to a RoCEv2 GID.
    ///
    /// # Errors
    /// `EINVAL` for a GID that is not IPv4-mapped or when `max_ah` is reached.
    pub fn create_ah(self: &Arc<Self>, dgid: Gid) -> Result<Arc<Ah>> {
        let handle = self.ctx.ops.create_ah(self.handle, dgid)?;
        Ok(Arc::new(Ah {
            pd: Arc::clone(self),
            handle,
            dgid,
        }))
    }

    /// `ibv_create_srq`.
    ///
    /// # Errors
    /// `EINVAL` for limits outside the device's.
    pub fn create_srq(self: &Arc<Self>, max_wr: u32, max_sge: u32) -> Result<Arc<Srq>> {
        let handle = self.ctx.ops.create_srq(self.handle, max_wr, max_sge, 0)?;
        Ok(Arc::new(Srq {
            pd: Arc::clone(self),
            handle,
        }))
    }

    /// A QP builder (`ibv_create_qp`) with both queues on `cq`.
    pub fn qp_builder(self: &Arc<Self>, qp_type: QpType, cq: &Arc<Cq>) -> QpBuilder {
        QpBuilder {
            pd: Arc::clone(self),
            qp_type,
            send_cq: Arc::clone(cq),
            recv_cq: Arc::clone(cq),
            srq: None,
            max_send_wr: 128,
            max_recv_wr: 128,
            max_send_sge: 4,
            max_recv_sge: 4,
            max_inline_data: 64,
            sq_sig_all: false,
        }
    }
}

/// A registered memory region over application memory.
#[derive(Debug)]
pub struct Mr {
    pd: Arc<Pd>,
    key: u32,
    rkey: u32,
    addr: u64,
    len: usize,
    /// False once `ibv_dereg_mr` was called (whatever it answered).
    registered: bool,
}

impl Mr {
    /// `ibv_dereg_mr`, reporting its error (dropping an `Mr` deregisters it
    /// too, but cannot say whether that worked).
    ///
    /// # Errors
    /// The provider's error: the registration may then still be live, and
    /// the memory behind it must stay valid (the caller still owns it).
    pub fn close(mut self) -> Result<()> {
        self.dereg()
    }

    /// Deregisters once; later calls do nothing.
    fn dereg(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.registered, false) {
            return Ok(());
        }
        self.pd.ctx.ops.dereg_mr(self.key)
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        let _ = self.dereg();
    }
}

/// A remote buffer: address and rkey (what peers exchange).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteBuf {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
}

impl Mr {
    /// Local key.
    pub fn lkey(&self) -> u32 {
        self.key
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// Virtual address of byte 0.
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for a zero-length region (never: registration refuses them).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The PD.
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }
    /// An SGE for `range` of this region.
    ///
    /// # Errors
    /// `EINVAL` (application layer) when `range` is outside the region.
    pub fn sge(&self, range: Range<usize>) -> Result<Sge> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::application(
                "ibv_post_send",
                Errno::EINVAL,
                format!("range {range:?} outside the {}-byte MR", self.len),
            ));
        }
        Ok(Sge {
            addr: self.addr + range.start as u64,
            length: u32::try_from(range.end - range.start).unwrap_or(u32::MAX),
            lkey: self.key,
        })
    }
    /// The remote view of byte `offset`.
    pub fn remote(&self, offset: usize) -> RemoteBuf {
        RemoteBuf {
            addr: self.addr + offset as u64,
            rkey: self.rkey,
        }
    }
}

/// An owned, registered buffer. Its bytes are reached by copies only
/// ([`MrBuf::read`], [`MrBuf::write`]), never by references, so the NIC may
/// write them at any time without undefined behaviour in safe code.
///
/// Its memory is freed only after the MR is deregistered. When
/// deregistration fails the device may still address the buffer, so the
/// memory is leaked rather than freed; [`MrBuf::close`] reports that error.
#[derive(Debug)]
pub struct MrBuf {
    mr: Mr,
    mem: OwnedMem,
}

impl Drop for MrBuf {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

impl MrBuf {
    /// Deregisters the buffer and frees its memory, reporting the error of
    /// `ibv_dereg_mr` (dropping an `MrBuf` does the same silently).
    ///
    /// # Errors
    /// The provider's error; the buffer's memory is then leaked, never
    /// freed, because the device may still DMA into it.
    pub fn close(mut self) -> Result<()> {
        self.release()
    }

    /// Deregisters once; on failure marks the memory leaked, so dropping
    /// `mem` afterwards keeps it.
    fn release(&mut self) -> Result<()> {
        self.mr
            .dereg()
            .inspect_err(|_| self.mem.leak())
            .map_err(|mut e| {
                e.detail = format!(
                    "{}; the {} bytes of the buffer stay allocated (leaked), since the device may \
                 still address them",
                    e.detail,
                    self.mem.len()
                );
                e
            })
    }

    /// The memory region.
    pub fn mr(&self) -> &Mr {
        &self.mr
    }
    /// Length.
    pub fn len(&self) -> usize {
        self.mem.len()
    }
    /// Always false (zero-length buffers are refused).
    pub fn is_empty(&self) -> bool {
        self.mem.len() == 0
    }
    fn check(&self, off: usize, len: usize) -> Result<()> {
        match off.checked_add(len) {
            Some(end) if end <= self.mem.len() => Ok(()),
            _ => Err(Error::application(
                "MrBuf",
                Errno::EINVAL,
                format!(
                    "{len} bytes at {off} outside the {}-byte buffer",
                    self.mem.len()
                ),
            )),
        }
    }
    /// Copies bytes out of the buffer.
    ///
    /// # Errors
    /// `EINVAL` (application layer) when the range is outside the buffer.
    pub fn read(&self, off: usize, out: &mut [u8]) -> Result<()> {
        self.check(off, out.len())?;
        self.mem.read(off, out);
        Ok(())
    }
    /// Copies bytes into the buffer.
    ///
    /// # Errors
    /// `EINVAL` (application layer) when the range is outside the buffer.
    pub fn write(&self, off: usize, data: &[u8]) -> Result<()> {
        self.check(off, data.len())?;
        self.mem.write(off, data);
        Ok(())
    }
    /// A copy of `range`.
    ///
    /// # Errors
    /// `EINVAL` (application layer) when the range is outside the buffer.
    pub fn to_vec(&self, range: Range<usize>) -> Result<Vec<u8>> {
        let mut v = vec![0; range.end.saturating_sub(range.start)];
        self.read(range.start, &mut v)?;
        Ok(v)
    }
    /// The little-endian u64 at `off` (atomics' results).
    ///
    /// # Errors
    /// `EINVAL` (application layer) when the range is outside the buffer.
    pub fn read_u64(&self, off: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(off, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    /// An SGE for `range`.
    ///
    /// # Errors
    /// `EINVAL` (application layer) when the range is outside the buffer.
    pub fn sge(&self, range: Range<usize>) -> Result<Sge> {
        self.mr.sge(range)
    }
    /// The remote view of byte `offset`.
    pub fn remote(&self, offset: usize) -> RemoteBuf {
        self.mr.remote(offset)
    }
}

/// A completion channel: blocking waits, and a file descriptor for poll/epoll.
#[derive(Debug)]
pub struct CompChannel {
    ctx: Arc<Context>,
    handle: u32,
}

impl Drop for CompChannel {
    fn drop(&mut self) {
        let _ = self.ctx.ops.destroy_comp_channel(self.handle);
    }
}

impl CompChannel {
    /// `ibv_get_cq_event`: waits for a notification; returns the CQ handle.
    ///
    /// # Errors
    /// `ETIMEDOUT` (library layer) when `timeout` passed without an event.
    pub fn get_cq_event(&self, timeout: Option<Duration>) -> Result<u32> {
        self.ctx.ops.get_cq_event(self.handle, timeout)
    }
}

impl AsRawFd for CompChannel {
    /// Readable while a CQ event is pending; -1 if the provider has none.
    fn as_raw_fd(&self) -> RawFd {
        self.ctx.ops.comp_channel_fd(self.handle).unwrap_or(-1)
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct Cq {
    ctx: Arc<Context>,
    handle: u32,
    _channel: Option<Arc<CompChannel>>,
}

impl Drop for Cq {
    fn drop(&mut self) {
        let _ = self.ctx.ops.destroy_cq(self.handle);
    }
}

impl Cq {
    /// The provider handle (what [`CompChannel::get_cq_event`] returns).
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// `ibv_poll_cq`: up to `max` completions.
    ///
    /// # Errors
    /// Provider errors.
    pub fn poll(&self, max: usize) -> Result<Vec<Wc>> {
        let mut v = Vec::new();
        self.ctx.ops.poll_cq(self.handle, &mut v, max)?;
        Ok(v)
    }

    /// `ibv_poll_cq` appending to `out`; returns how many were added.
    ///
    /// # Errors
    /// Provider errors.
    pub fn poll_into(&self, out: &mut Vec<Wc>, max: usize) -> Result<usize> {
        self.ctx.ops.poll_cq(self.handle, out, max)
    }

    /// Busy-polls until `n` completions arrived or `timeout` passed.
    ///
    /// # Errors
    /// `ETIMEDOUT` (library layer) with fewer than `n` completions.
    pub fn wait(&self, n: usize, timeout: Duration) -> Result<Vec<Wc>> {
        let start = Instant::now();
        let mut v = Vec::with_capacity(n);
        loop {
            let want = n - v.len();
            self.ctx.ops.poll_cq(self.handle, &mut v, want)?;
            if v.len() >= n {
                return Ok(v);
            }
            if start.elapsed() >= timeout {
                return Err(Error {
                    verb: "ibv_poll_cq",
                    errno: Errno::ETIMEDOUT,
                    layer: Layer::Library,
                    detail: format!("{} of {n} completions after {timeout:?}: {v:?}", v.len()),
                    bad_wr: None,
                });
            }
            std::thread::yield_now();
        }
    }

    /// Event mode: returns up to `max` completions, sleeping on the CQ's
    /// completion channel (arm, re-poll, `ibv_get_cq_event`) while it is empty.
    ///
    /// # Errors
    /// `EINVAL` when the CQ has no completion channel; `ETIMEDOUT` (library
    /// layer) when nothing arrived within `timeout`.
    pub fn wait_event(&self, max: usize, timeout: Duration) -> Result<Vec<Wc>> {
        let deadline = Instant::now() + timeout;
        let Some(ch) = &self._channel else {
            return Err(Error::application(
                "ibv_req_notify_cq",
                Errno::EINVAL,
                "CQ has no completion channel",
            ));
        };
        loop {
            let v = self.poll(max)?;
            if !v.is_empty() {
                return Ok(v);
            }
            self.req_notify(false)?;
            // A completion that landed between the poll and the arm.
            let v = self.poll(max)?;
            if !v.is_empty() {
                return Ok(v);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            ch.get_cq_event(Some(left))?;
        }
    }

    /// `ibv_req_notify_cq`.
    ///
    /// # Errors
    /// `EINVAL` when the CQ has no completion channel.
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        self.ctx.ops.req_notify_cq(self.handle, solicited_only)
    }
}

/// A shared receive queue.
#[derive(Debug)]
pub struct Srq {
    pd: Arc<Pd>,
    handle: u32,
}

impl Drop for Srq {
    fn drop(&mut self) {
        let _ = self.pd.ctx.ops.destroy_srq(self.handle);
    }
}

impl Srq {
    /// `ibv_post_srq_recv`.
    ///
    /// # Errors
    /// `EINVAL`, `ENOMEM` (full), with `bad_wr`.
    pub fn post_recv(&self, wrs: &[RecvWr]) -> Result<()> {
        self.pd.ctx.ops.post_srq_recv(self.handle, wrs)
    }

    /// `ibv_modify_srq(IBV_SRQ_LIMIT)`: arms the limit event.
    ///
    /// # Errors
    /// `EINVAL` for a limit above the SRQ's depth.
    pub fn arm_limit(&self, limit: u32) -> Result<()> {
        self.pd.ctx.ops.modify_srq_limit(self.handle, limit)
    }

    /// The provider handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
}

/// An address handle (UD destination).
#[derive(Debug)]
pub struct Ah {
    pd: Arc<Pd>,
    handle: u32,
    dgid: Gid,
}

impl Drop for Ah {
    fn drop(&mut self) {
        let _ = self.pd.ctx.ops.destroy_ah(self.handle);
    }
}

impl Ah {
    /// Destination GID.
    pub fn dgid(&self) -> Gid {
        self.dgid
    }
    /// The provider handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
}
