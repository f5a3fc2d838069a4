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
use rdmakit_soft::{
    AsyncEvent, DeviceAttr, DeviceConfig, Errno, Gid, PortAttr, QpInit, SendRequest,
};

use crate::buf::OwnedMem;
use crate::error::{Error, Layer, Result};
use crate::provider::{DeviceOps, Provider, SoftProvider};

/// Names of the devices of the default provider (`RDMAKIT_PROVIDER`: real
/// devices through libibverbs when it has any, else the soft NIC; see
/// [`crate::ibverbs::select`]).
///
/// # Errors
/// Provider errors.
pub fn devices() -> Result<Vec<String>> {
    crate::ibverbs::select::devices()
}

/// Opens device `name` of the default provider (a soft NIC's address is
/// `RDMAKIT_SOFT_ADDR`, else the shared loopback device address 127.0.0.1).
///
/// # Errors
/// `ENODEV` (library layer) when no provider has such a device; the
/// provider's open error.
pub fn open_device(name: &str) -> Result<Arc<Context>> {
    crate::ibverbs::select::open_device(name)
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

/// Builder of a QP (`struct ibv_qp_init_attr`).
#[derive(Debug)]
pub struct QpBuilder {
    pd: Arc<Pd>,
    qp_type: QpType,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    srq: Option<Arc<Srq>>,
    max_send_wr: u32,
    max_recv_wr: u32,
    max_send_sge: u32,
    max_recv_sge: u32,
    max_inline_data: u32,
    sq_sig_all: bool,
}

#[allow(missing_docs)]
impl QpBuilder {
    pub fn max_send_wr(mut self, n: u32) -> Self {
        self.max_send_wr = n;
        self
    }
    pub fn max_recv_wr(mut self, n: u32) -> Self {
        self.max_recv_wr = n;
        self
    }
    pub fn max_send_sge(mut self, n: u32) -> Self {
        self.max_send_sge = n;
        self
    }
    pub fn max_recv_sge(mut self, n: u32) -> Self {
        self.max_recv_sge = n;
        self
    }
    pub fn max_inline_data(mut self, n: u32) -> Self {
        self.max_inline_data = n;
        self
    }
    pub fn sq_sig_all(mut self, on: bool) -> Self {
        self.sq_sig_all = on;
        self
    }
    pub fn recv_cq(mut self, cq: &Arc<Cq>) -> Self {
        self.recv_cq = Arc::clone(cq);
        self
    }
    pub fn srq(mut self, srq: &Arc<Srq>) -> Self {
        self.srq = Some(Arc::clone(srq));
        self
    }

    /// `ibv_create_qp`: a QP in RESET.
    ///
    /// # Errors
    /// `EINVAL` for capabilities above the device limits or when `max_qp`
    /// is reached.
    pub fn build(self) -> Result<Qp> {
        let init = QpInit {
            qp_type: self.qp_type,
            pd: self.pd.handle,
            send_cq: self.send_cq.handle,
            recv_cq: self.recv_cq.handle,
            srq: self.srq.as_ref().map(|s| s.handle),
            max_send_wr: self.max_send_wr,
            max_recv_wr: self.max_recv_wr,
            max_send_sge: self.max_send_sge,
            max_recv_sge: self.max_recv_sge,
            max_inline_data: self.max_inline_data,
            sq_sig_all: self.sq_sig_all,
        };
        let qpn = self.pd.ctx.ops.create_qp(&init)?;
        Ok(Qp {
            pd: self.pd,
            _send_cq: self.send_cq,
            _recv_cq: self.recv_cq,
            _srq: self.srq,
            qpn,
            qp_type: self.qp_type,
        })
    }
}

/// A queue pair.
#[derive(Debug)]
pub struct Qp {
    pd: Arc<Pd>,
    _send_cq: Arc<Cq>,
    _recv_cq: Arc<Cq>,
    _srq: Option<Arc<Srq>>,
    qpn: u32,
    qp_type: QpType,
}

impl Drop for Qp {
    fn drop(&mut self) {
        let _ = self.pd.ctx.ops.destroy_qp(self.qpn);
    }
}

/// What a peer needs to connect to a QP (exchanged out of band).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// QP number.
    pub qpn: u32,
    /// Port GID (RoCEv2, IPv4-mapped).
    pub gid: Gid,
    /// First PSN the QP sends.
    pub psn: u32,
}

impl Endpoint {
    /// `qpn:psn:gid` in hex, e.g. `11:abcdef:00000000000000000000ffff7f010203`.
    pub fn to_wire(&self) -> String {
        let g: String = self.gid.0.iter().map(|b| format!("{b:02x}")).collect();
        format!("{:x}:{:x}:{g}", self.qpn, self.psn)
    }

    /// Parses [`Endpoint::to_wire`].
    ///
    /// # Errors
    /// `EINVAL` (application layer) for malformed text.
    pub fn from_wire(s: &str) -> Result<Endpoint> {
        let bad = || {
            Error::application(
                "Endpoint::from_wire",
                Errno::EINVAL,
                format!("malformed endpoint {s:?}"),
            )
        };
        let mut it = s.trim().split(':');
        let qpn = u32::from_str_radix(it.next().ok_or_else(bad)?, 16).map_err(|_| bad())?;
        let psn = u32::from_str_radix(it.next().ok_or_else(bad)?, 16).map_err(|_| bad())?;
        let g = it.next().ok_or_else(bad)?;
        if g.len() != 32 || it.next().is_some() {
            return Err(bad());
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(g.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
                .map_err(|_| bad())?;
        }
        Ok(Endpoint {
            qpn,
            gid: Gid(gid),
            psn,
        })
    }
}

/// Connection parameters of the typed bring-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectOpts {
    /// Rights granted to remote peers (RC/UC).
    pub access: Access,
    /// Path MTU (RC/UC).
    pub path_mtu: Mtu,
    /// Local ACK timeout exponent (RC).
    pub timeout: u8,
    /// Transport retries (RC).
    pub retry_cnt: u8,
    /// RNR retries (RC).
    pub rnr_retry: u8,
    /// RNR NAK timer code (RC).
    pub min_rnr_timer: u8,
    /// Outstanding READ/atomics as requester and responder (RC).
    pub rd_atomic: u8,
    /// Q_Key (UD).
    pub qkey: u32,
}

impl Default for ConnectOpts {
    fn default() -> ConnectOpts {
        ConnectOpts {
            access: Access::all(),
            path_mtu: Mtu::Mtu1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            rd_atomic: 16,
            qkey: 0x1111_1111,
        }
    }
}

fn random_psn() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    (h.finish() as u32) & 0x00ff_ffff
}

/// A QP in INIT, produced by [`Qp::into_init`]: hand out its
/// [`InitQp::endpoint`], then [`InitQp::connect`].
#[derive(Debug)]
pub struct InitQp {
    qp: Qp,
    psn: u32,
    opts: ConnectOpts,
}

/// A QP in RTR: [`RtrQp::ready_to_send`] completes the bring-up.
#[derive(Debug)]
pub struct RtrQp {
    qp: Qp,
    psn: u32,
    opts: ConnectOpts,
}

impl InitQp {
    /// The QP.
    pub fn qp(&self) -> &Qp {
        &self.qp
    }

    /// What the peer needs: QPN, GID (port 1, index 0), first send PSN.
    ///
    /// # Errors
    /// `ibv_query_gid` errors.
    pub fn endpoint(&self) -> Result<Endpoint> {
        Ok(Endpoint {
            qpn: self.qp.qpn,
            gid: self
                .qp
                .pd
                .ctx
                .query_gid(1, u32::from(rdmakit_soft::ROCEV2_GID_INDEX))?,
            psn: self.psn,
        })
    }

    /// INIT → RTR towards `remote` (RC/UC: AV, path MTU, dest QPN, RQ PSN,
    /// RC: rd_atomic and RNR timer; UD: state only).
    ///
    /// # Errors
    /// `ibv_modify_qp` errors.
    pub fn connect(self, remote: &Endpoint) -> Result<RtrQp> {
        let o = self.opts;
        let mut a = QpAttr {
            qp_state: QpState::Rtr,
            ..QpAttr::default()
        };
        let mask = match self.qp.qp_type {
            QpType::Ud => AttrMask::STATE,
            t => {
                a.path_mtu = o.path_mtu;
                a.dest_qp_num = remote.qpn;
                a.rq_psn = remote.psn;
                let base = AttrMask::STATE
                    | AttrMask::AV
                    | AttrMask::PATH_MTU
                    | AttrMask::DEST_QPN
                    | AttrMask::RQ_PSN;
                if t == QpType::Rc {
                    a.max_dest_rd_atomic = o.rd_atomic;
                    a.min_rnr_timer = o.min_rnr_timer;
                    base | AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER
                } else {
                    base
                }
            }
        };
        let av = (self.qp.qp_type != QpType::Ud).then_some(remote.gid);
        self.qp.modify(&a, mask, av)?;
        Ok(RtrQp {
            qp: self.qp,
            psn: self.psn,
            opts: self.opts,
        })
    }
}

impl RtrQp {
    /// The QP.
    pub fn qp(&self) -> &Qp {
        &self.qp
    }

    /// RTR → RTS: the QP can send.
    ///
    /// # Errors
    /// `ibv_modify_qp` errors.
    pub fn ready_to_send(self) -> Result<Qp> {
        let o = self.opts;
        let mut a = QpAttr {
            qp_state: QpState::Rts,
            sq_psn: self.psn,
            ..QpAttr::default()
        };
        let mut mask = AttrMask::STATE | AttrMask::SQ_PSN;
        if self.qp.qp_type == QpType::Rc {
            a.timeout = o.timeout;
            a.retry_cnt = o.retry_cnt;
            a.rnr_retry = o.rnr_retry;
            a.max_rd_atomic = o.rd_atomic;
            mask = mask
                | AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
                | AttrMask::MAX_QP_RD_ATOMIC;
        }
        self.qp.modify(&a, mask, None)?;
        Ok(self.qp)
    }
}

impl Qp {
    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Transport.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The PD.
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// RESET → INIT with `opts` (access flags for RC/UC, Q_Key for UD);
    /// starts the typed bring-up.
    ///
    /// # Errors
    /// `ibv_modify_qp` errors (the QP is destroyed with `self`).
    pub fn into_init(self, opts: ConnectOpts) -> Result<InitQp> {
        let a = QpAttr {
            qp_state: QpState::Init,
            qp_access_flags: opts.access,
            qkey: opts.qkey,
            port_num: 1,
            pkey_index: 0,
            ..QpAttr::default()
        };
        let mask = AttrMask::STATE
            | AttrMask::PKEY_INDEX
            | AttrMask::PORT
            | if self.qp_type == QpType::Ud {
                AttrMask::QKEY
            } else {
                AttrMask::ACCESS_FLAGS
            };
        self.modify(&a, mask, None)?;
        Ok(InitQp {
            qp: self,
            psn: random_psn(),
            opts,
        })
    }

    /// `ibv_modify_qp`, validated like `ib_modify_qp_is_ok` first. `av` is
    /// the destination GID for `AttrMask::AV`.
    ///
    /// # Errors
    /// `EINVAL` (kernel layer) for a transition or mask the table refuses,
    /// or the provider's error.
    pub fn modify(&self, attr: &QpAttr, mask: AttrMask, av: Option<Gid>) -> Result<()> {
        let (cur_attr, _) = self.pd.ctx.ops.query_qp(self.qpn)?;
        let cur = cur_attr.qp_state;
        let next = if mask.contains(AttrMask::STATE) {
            attr.qp_state
        } else {
            cur
        };
        if !modify_is_ok(cur, next, self.qp_type, mask) {
            return Err(Error {
                verb: "ibv_modify_qp",
                errno: Errno::EINVAL,
                layer: Layer::Kernel,
                detail: format!(
                    "ib_modify_qp_is_ok refused {:?} QP {cur:?} -> {next:?} with mask {mask:?}",
                    self.qp_type
                ),
                bad_wr: None,
            });
        }
        if mask.contains(AttrMask::AV) && av.is_none() {
            return Err(Error::application(
                "ibv_modify_qp",
                Errno::EINVAL,
                "AttrMask::AV without a destination GID",
            ));
        }
        self.pd.ctx.ops.modify_qp(self.qpn, attr, mask, av)
    }

    /// `ibv_query_qp`.
    ///
    /// # Errors
    /// Provider errors.
    pub fn query(&self) -> Result<(QpAttr, QpInit)> {
        self.pd.ctx.ops.query_qp(self.qpn)
    }

    /// Current state.
    ///
    /// # Errors
    /// Provider errors.
    pub fn state(&self) -> Result<QpState> {
        Ok(self.query()?.0.qp_state)
    }

    /// `ibv_post_send` of a list (for UD, `wr.ud.ah` is an [`Ah::handle`]).
    ///
    /// # Safety
    /// For `inline` requests each SGE's `[addr, addr + length)` must be
    /// readable for the duration of the call. For the others the SGEs name
    /// registered memory, whose lifetime the registration already covers;
    /// the application must not read bytes a READ/atomic/receive is still
    /// writing (wait for the completion).
    ///
    /// # Errors
    /// [`Error`] with `bad_wr` naming the first WR not posted.
    pub unsafe fn post_send(&self, reqs: &[SendRequest]) -> Result<()> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.pd.ctx.ops.post_send(self.qpn, reqs) }
    }

    /// `ibv_post_send` of non-inline WRs (safe: every byte they touch is in
    /// registered memory, validated by the NIC).
    ///
    /// # Errors
    /// [`Error`] with `bad_wr` naming the first WR not posted.
    pub fn post_send_wrs(&self, wrs: &[SendWr]) -> Result<()> {
        let reqs: Vec<SendRequest> = wrs
            .iter()
            .map(|w| SendRequest {
                wr: w.clone(),
                inline: false,
            })
            .collect();
        // SAFETY: no request is inline.
        unsafe { self.post_send(&reqs) }
    }

    /// `ibv_post_recv` of a list.
    ///
    /// # Errors
    /// [`Error`] with `bad_wr` naming the first WR not posted.
    pub fn post_recv(&self, wrs: &[RecvWr]) -> Result<()> {
        self.pd.ctx.ops.post_recv(self.qpn, wrs)
    }

    fn one(&self, wr_id: u64, op: SendOp, sges: Vec<Sge>, ud: Option<UdDest>) -> Result<()> {
        let mut wr = SendWr::new(wr_id, op, sges);
        wr.ud = ud;
        self.post_send_wrs(&[wr])
    }

    /// Posts a signaled SEND of `buf[range]`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn send(&self, wr_id: u64, buf: &MrBuf, range: Range<usize>) -> Result<()> {
        let s = buf.sge(range).map_err(|e| Error {
            bad_wr: Some(0),
            ..e
        })?;
        self.one(wr_id, SendOp::Send, vec![s], None)
    }

    /// Posts a signaled inline SEND of `data` (copied during the call).
    ///
    /// # Errors
    /// `EINVAL` when `data` exceeds `max_inline_data`.
    pub fn send_inline(&self, wr_id: u64, data: &[u8]) -> Result<()> {
        let sge = Sge {
            addr: data.as_ptr() as u64,
            length: u32::try_from(data.len()).unwrap_or(u32::MAX),
            lkey: 0,
        };
        let req = SendRequest {
            wr: SendWr::new(wr_id, SendOp::Send, vec![sge]),
            inline: true,
        };
        // SAFETY: the SGE covers exactly `data`, borrowed for this call.
        unsafe { self.post_send(&[req]) }
    }

    /// Posts a signaled UD SEND of `buf[range]` to `remote_qpn` via `ah`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn send_ud(
        &self,
        wr_id: u64,
        ah: &Ah,
        remote_qpn: u32,
        qkey: u32,
        buf: &MrBuf,
        range: Range<usize>,
    ) -> Result<()> {
        let s = buf.sge(range).map_err(|e| Error {
            bad_wr: Some(0),
            ..e
        })?;
        let ud = UdDest {
            ah: AddressHandle(ah.handle),
            remote_qpn,
            remote_qkey: qkey,
        };
        self.one(wr_id, SendOp::Send, vec![s], Some(ud))
    }

    /// Posts a signaled RDMA WRITE of `buf[range]` to `remote`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn write(
        &self,
        wr_id: u64,
        buf: &MrBuf,
        range: Range<usize>,
        remote: RemoteBuf,
    ) -> Result<()> {
        let s = buf.sge(range).map_err(|e| Error {
            bad_wr: Some(0),
            ..e
        })?;
        self.one(
            wr_id,
            SendOp::Write {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            },
            vec![s],
            None,
        )
    }

    /// Posts a signaled RDMA READ of `remote` into `buf[range]`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn read(
        &self,
        wr_id: u64,
        buf: &MrBuf,
        range: Range<usize>,
        remote: RemoteBuf,
    ) -> Result<()> {
        let s = buf.sge(range).map_err(|e| Error {
            bad_wr: Some(0),
            ..e
        })?;
        self.one(
            wr_id,
            SendOp::Read {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            },
            vec![s],
            None,
        )
    }

    /// Posts a fetch-and-add of `add` at `remote`; the original value lands
    /// in `buf[off..off + 8]`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn fetch_add(
        &self,
        wr_id: u64,
        buf: &MrBuf,
        off: usize,
        remote: RemoteBuf,
        add: u64,
    ) -> Result<()> {
        let s = buf.sge(off..off + 8).map_err(|e| Error {
            bad_wr: Some(0),
            ..e
        })?;
        self.one(
            wr_id,
            SendOp::FetchAdd {
                remote_addr: remote.addr,
                rkey: remote.rkey,
                add,
            },
            vec![s],
            None,
        )
    }

    /// Posts a compare-and-swap at `remote`; the original value lands in
    /// `buf[off..off + 8]`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn compare_swap(
        &self,
        wr_id: u64,
        buf: &MrBuf,
        off: usize,
        remote: RemoteBuf,
        compare: u64,
        swap: u64,
    ) -> Result<()> {
        let s = buf.sge(off..off + 8).map_err(|e| Error {
            bad_wr: Some(0),
            ..e
        })?;
        self.one(
            wr_id,
            SendOp::CompareSwap {
                remote_addr: remote.addr,
                rkey: remote.rkey,
                compare,
                swap,
            },
            vec![s],
            None,
        )
    }

    /// Posts a receive into `buf[range]`.
    ///
    /// # Errors
    /// As [`Qp::post_send`].
    pub fn recv(&self, wr_id: u64, buf: &MrBuf, range: Range<usize>) -> Result<()> {
        let s = buf.sge(range).map_err(|e| Error {
            bad_wr: Some(0),
            ..e
        })?;
        self.post_recv(&[RecvWr {
            wr_id,
            sg_list: vec![s],
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_wire_round_trip_and_malformed_text() {
        let e = Endpoint {
            qpn: 0x11,
            gid: Gid::from_ipv4(std::net::Ipv4Addr::new(127, 1, 2, 3)),
            psn: 0xabcdef,
        };
        assert_eq!(e.to_wire(), "11:abcdef:00000000000000000000ffff7f010203");
        assert_eq!(Endpoint::from_wire(&e.to_wire()).unwrap(), e);
        for bad in [
            "",
            "11",
            "11:zz:00",
            "11:1:0000",
            "11:1:00000000000000000000ffff7f010203:9",
        ] {
            let err = Endpoint::from_wire(bad).unwrap_err();
            assert_eq!(
                (err.errno, err.layer),
                (Errno::EINVAL, Layer::Application),
                "{bad}"
            );
        }
    }

    /// A buffer whose deregistration fails must not be freed: the device
    /// may still DMA into it (issue 17). The MR is deregistered behind the
    /// buffer's back, so its own `ibv_dereg_mr` fails with EINVAL.
    #[test]
    fn mrbuf_close_reports_a_failed_dereg_and_leaks_the_memory() {
        let ctx = Context::open_soft(DeviceConfig::default()).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mut buf = pd.alloc_buf(8192, Access::LOCAL_WRITE).unwrap();
        ctx.ops.dereg_mr(buf.mr().lkey()).unwrap();
        let err = buf.release().unwrap_err();
        assert_eq!((err.verb, err.errno), ("ibv_dereg_mr", Errno::EINVAL));
        assert!(err.detail.contains("8192 bytes"), "{}", err.detail);
        assert!(buf.mem.is_leaked(), "the memory must be kept, not freed");
        // Dropping afterwards neither deregisters again nor frees.
        drop(buf);

        let ok = pd.alloc_buf(4096, Access::LOCAL_WRITE).unwrap();
        ok.close().unwrap();
    }

    #[test]
    fn mr_close_reports_the_error_of_ibv_dereg_mr() {
        let ctx = Context::open_soft(DeviceConfig::default()).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mut mem = vec![0u8; 4096];
        // SAFETY: `mem` outlives the MR and no reference to it is used
        // while it is registered.
        let mr = unsafe { pd.reg_mr(mem.as_mut_ptr(), mem.len(), Access::LOCAL_WRITE) }.unwrap();
        ctx.ops.dereg_mr(mr.lkey()).unwrap();
        assert_eq!(mr.close().unwrap_err().errno, Errno::EINVAL);
    }
}
