//! The provider abstraction: what a device implementation must offer.
//!
//! Handle-based, like a driver (and like libibverbs' own provider ops): every
//! object is a `u32` handle the provider interprets (a QPN for QPs, the key
//! for MRs). A libibverbs provider loaded with dlopen maps handles to its
//! `ibv_*` pointers in a table; the soft NIC's handles are its own.
//! `unsafe` methods carry the same contracts as the soft device's.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

use rdmakit_proto::{Access, AttrMask, QpAttr, RecvWr, Wc};
use rdmakit_soft::DeviceConfig;
use rdmakit_types::{AsyncEvent, Av, DeviceAttr, Gid, PortAttr, QpInit, SendRequest};

use crate::error::Result;

/// Something that lists and opens devices.
pub trait Provider: Send + Sync {
    /// `"soft"`, `"ibverbs"`, ...
    fn kind(&self) -> &'static str;
    /// Names of the devices this provider can open (`ibv_get_device_list`).
    ///
    /// # Errors
    /// Provider-specific (e.g. the library layer is missing).
    fn device_names(&self) -> Result<Vec<String>>;
    /// Opens a device (`ibv_open_device`).
    ///
    /// # Errors
    /// Provider-specific.
    fn open(&self, name: &str) -> Result<Arc<dyn DeviceOps>>;
}

/// The operations of one open device.
#[allow(missing_docs)]
pub trait DeviceOps: Send + Sync {
    fn name(&self) -> String;
    fn query_device(&self) -> Result<DeviceAttr>;
    fn query_port(&self, port: u8) -> Result<PortAttr>;
    fn query_gid(&self, port: u8, index: u32) -> Result<Gid>;
    fn query_pkey(&self, port: u8, index: u16) -> Result<u16>;
    fn alloc_pd(&self) -> Result<u32>;
    fn dealloc_pd(&self, pd: u32) -> Result<()>;
    /// # Safety
    /// The buffer stays valid until `dereg_mr` returned and no Rust
    /// reference to bytes the NIC may write exists meanwhile.
    unsafe fn reg_mr(&self, pd: u32, ptr: *mut u8, len: usize, access: Access) -> Result<u32>;
    fn dereg_mr(&self, key: u32) -> Result<()>;
    /// The remote key of MR `key` (the handle `reg_mr` returned, its lkey)
    /// when the device gives it another value; `None`: the same.
    fn mr_rkey(&self, key: u32) -> Option<u32> {
        let _ = key;
        None
    }
    fn create_comp_channel(&self) -> Result<u32>;
    fn destroy_comp_channel(&self, ch: u32) -> Result<()>;
    fn comp_channel_fd(&self, ch: u32) -> Option<RawFd>;
    fn get_cq_event(&self, ch: u32, timeout: Option<Duration>) -> Result<u32>;
    fn create_cq(&self, cqe: u32, channel: Option<u32>) -> Result<u32>;
    fn destroy_cq(&self, cq: u32) -> Result<()>;
    fn poll_cq(&self, cq: u32, out: &mut Vec<Wc>, max: usize) -> Result<usize>;
    fn req_notify_cq(&self, cq: u32, solicited_only: bool) -> Result<()>;
    fn create_qp(&self, init: &QpInit) -> Result<u32>;
    fn modify_qp(&self, qpn: u32, attr: &QpAttr, mask: AttrMask, av: Option<Av>) -> Result<()>;
    fn query_qp(&self, qpn: u32) -> Result<(QpAttr, QpInit)>;
    fn destroy_qp(&self, qpn: u32) -> Result<()>;
    /// # Safety
    /// Inline requests' SGE ranges must be readable for the call.
    unsafe fn post_send(&self, qpn: u32, reqs: &[SendRequest]) -> Result<()>;
    fn post_recv(&self, qpn: u32, wrs: &[RecvWr]) -> Result<()>;
    fn create_srq(&self, pd: u32, max_wr: u32, max_sge: u32, srq_limit: u32) -> Result<u32>;
    fn modify_srq_limit(&self, srq: u32, limit: u32) -> Result<()>;
    fn destroy_srq(&self, srq: u32) -> Result<()>;
    fn post_srq_recv(&self, srq: u32, wrs: &[RecvWr]) -> Result<()>;
    fn create_ah(&self, pd: u32, av: Av) -> Result<u32>;
    fn destroy_ah(&self, ah: u32) -> Result<()>;
    fn get_async_event(&self, timeout: Duration) -> Option<AsyncEvent>;
    /// The soft device behind this handle, if it is one (fault injection,
    /// ring counters).
    fn as_soft(&self) -> Option<&rdmakit_soft::Device> {
        None
    }
}

/// The built-in software NIC as a provider. Lists one device (its
/// configured name, default `soft0`); each `open` creates a context of it
/// (all contexts of the loopback device share its one address, 127.0.0.1,
/// and are told apart by QPN).
#[derive(Clone, Debug, Default)]
pub struct SoftProvider {
    /// Configuration of devices it opens.
    pub config: DeviceConfig,
}

impl SoftProvider {
    /// The soft NIC as the environment configures it
    /// ([`DeviceConfig::from_env`]); for the edges (the CLI, provider
    /// selection by name).
    ///
    /// # Errors
    /// As [`DeviceConfig::from_env`].
    pub fn from_env() -> Result<SoftProvider> {
        Ok(SoftProvider {
            config: DeviceConfig::from_env()?,
        })
    }

    /// The soft NIC's device names as the environment names it
    /// (`RDMAKIT_SOFT_NAME`, else soft0), whatever provider the tools
    /// default to and whatever else the environment says of it; for the
    /// edges.
    pub fn names_from_env() -> Vec<String> {
        let p = SoftProvider {
            config: DeviceConfig {
                name: std::env::var("RDMAKIT_SOFT_NAME").ok(),
                ..DeviceConfig::default()
            },
        };
        p.device_names().unwrap_or_default()
    }
}

impl Provider for SoftProvider {
    fn kind(&self) -> &'static str {
        "soft"
    }
    fn device_names(&self) -> Result<Vec<String>> {
        let name = self
            .config
            .name
            .clone()
            .unwrap_or_else(|| "soft0".to_string());
        Ok(vec![name])
    }
    fn open(&self, name: &str) -> Result<Arc<dyn DeviceOps>> {
        let mut cfg = self.config.clone();
        cfg.name = Some(name.to_string());
        Ok(Arc::new(SoftOps(rdmakit_soft::Device::open(cfg)?)))
    }
}

/// [`DeviceOps`] of a soft device.
#[derive(Debug)]
pub struct SoftOps(pub rdmakit_soft::Device);

impl DeviceOps for SoftOps {
    fn name(&self) -> String {
        self.0.name().to_string()
    }
    fn query_device(&self) -> Result<DeviceAttr> {
        Ok(self.0.attr().clone())
    }
    fn query_port(&self, port: u8) -> Result<PortAttr> {
        Ok(self.0.port_attr(port)?)
    }
    fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        Ok(self.0.gid(port, index)?)
    }
    fn query_pkey(&self, port: u8, index: u16) -> Result<u16> {
        Ok(self.0.pkey(port, index)?)
    }
    fn alloc_pd(&self) -> Result<u32> {
        Ok(self.0.alloc_pd()?)
    }
    fn dealloc_pd(&self, pd: u32) -> Result<()> {
        Ok(self.0.dealloc_pd(pd)?)
    }
    unsafe fn reg_mr(&self, pd: u32, ptr: *mut u8, len: usize, access: Access) -> Result<u32> {
        // SAFETY: forwarded from this method's contract.
        Ok(unsafe { self.0.reg_mr(pd, ptr, len, access) }?)
    }
    fn dereg_mr(&self, key: u32) -> Result<()> {
        Ok(self.0.dereg_mr(key)?)
    }
    fn create_comp_channel(&self) -> Result<u32> {
        Ok(self.0.create_comp_channel()?)
    }
    fn destroy_comp_channel(&self, ch: u32) -> Result<()> {
        Ok(self.0.destroy_comp_channel(ch)?)
    }
    fn comp_channel_fd(&self, ch: u32) -> Option<RawFd> {
        self.0.comp_channel_fd(ch)
    }
    fn get_cq_event(&self, ch: u32, timeout: Option<Duration>) -> Result<u32> {
        Ok(self.0.get_cq_event(ch, timeout)?)
    }
    fn create_cq(&self, cqe: u32, channel: Option<u32>) -> Result<u32> {
        Ok(self.0.create_cq(cqe, channel)?)
    }
    fn destroy_cq(&self, cq: u32) -> Result<()> {
        Ok(self.0.destroy_cq(cq)?)
    }
    fn poll_cq(&self, cq: u32, out: &mut Vec<Wc>, max: usize) -> Result<usize> {
        Ok(self.0.poll_cq(cq, out, max)?)
    }
    fn req_notify_cq(&self, cq: u32, solicited_only: bool) -> Result<()> {
        Ok(self.0.req_notify_cq(cq, solicited_only)?)
    }
    fn create_qp(&self, init: &QpInit) -> Result<u32> {
        Ok(self.0.create_qp(init)?)
    }
    fn modify_qp(&self, qpn: u32, attr: &QpAttr, mask: AttrMask, av: Option<Av>) -> Result<()> {
        Ok(self.0.modify_qp(qpn, attr, mask, av)?)
    }
    fn query_qp(&self, qpn: u32) -> Result<(QpAttr, QpInit)> {
        Ok(self.0.query_qp(qpn)?)
    }
    fn destroy_qp(&self, qpn: u32) -> Result<()> {
        Ok(self.0.destroy_qp(qpn)?)
    }
    unsafe fn post_send(&self, qpn: u32, reqs: &[SendRequest]) -> Result<()> {
        // SAFETY: forwarded from this method's contract.
        Ok(unsafe { self.0.post_send(qpn, reqs) }?)
    }
    fn post_recv(&self, qpn: u32, wrs: &[RecvWr]) -> Result<()> {
        Ok(self.0.post_recv(qpn, wrs)?)
    }
    fn create_srq(&self, pd: u32, max_wr: u32, max_sge: u32, srq_limit: u32) -> Result<u32> {
        Ok(self.0.create_srq(pd, max_wr, max_sge, srq_limit)?)
    }
    fn modify_srq_limit(&self, srq: u32, limit: u32) -> Result<()> {
        Ok(self.0.arm_srq(srq, limit)?)
    }
    fn destroy_srq(&self, srq: u32) -> Result<()> {
        Ok(self.0.destroy_srq(srq)?)
    }
    fn post_srq_recv(&self, srq: u32, wrs: &[RecvWr]) -> Result<()> {
        Ok(self.0.post_srq_recv(srq, wrs)?)
    }
    fn create_ah(&self, pd: u32, av: Av) -> Result<u32> {
        Ok(self.0.create_ah(pd, av)?)
    }
    fn destroy_ah(&self, ah: u32) -> Result<()> {
        Ok(self.0.destroy_ah(ah)?)
    }
    fn get_async_event(&self, timeout: Duration) -> Option<AsyncEvent> {
        self.0.get_async_event(timeout)
    }
    fn as_soft(&self) -> Option<&rdmakit_soft::Device> {
        Some(&self.0)
    }
}
