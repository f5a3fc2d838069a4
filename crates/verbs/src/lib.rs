//! `rdmakit-verbs`: the safe Verbs API.
//!
//! The objects of libibverbs — [`Context`] (device), [`Pd`], [`Mr`] /
//! [`MrBuf`], [`Cq`] with [`CompChannel`], [`Qp`] (RC, UC, UD), [`Srq`],
//! [`Ah`] — over a [`Provider`]: the built-in software NIC
//! ([`SoftProvider`], crate `rdmakit-soft`) today, rdma-core's libibverbs
//! loaded at run time later. Objects hold an `Arc` of their parent, so a
//! parent is destroyed only after its children; dropping destroys.
//!
//! * Bring-up is typed — [`Qp::into_init`] → [`InitQp::connect`] (with the
//!   peer's [`Endpoint`]) → [`RtrQp::ready_to_send`] — while [`Qp::modify`]
//!   stays available and is validated like the kernel's
//!   `ib_modify_qp_is_ok` before it reaches the provider.
//! * Data-path calls whose buffers must outlive the call are `unsafe` with a
//!   documented contract ([`Pd::reg_mr`], [`Qp::post_send`]); owned
//!   registered buffers ([`MrBuf`], [`Pd::alloc_buf`]) make the common path
//!   safe ([`Qp::send`], [`Qp::write`], [`Qp::read`], [`Qp::fetch_add`], ...).
//! * Every error is one [`Error`] carrying the verb, the errno and the stack
//!   [`Layer`] (application / library / kernel / hardware).
//!
//! Loopback RC between two contexts of the soft device in one process (one
//! device address, 127.0.0.1; QPNs tell the contexts apart):
//!
//! ```
//! use std::time::Duration;
//! use rdmakit_verbs::{Access, ConnectOpts, Context, DeviceConfig, QpType, WcStatus};
//!
//! let t = Duration::from_secs(5);
//! let a = Context::open_soft(DeviceConfig::default()).unwrap();
//! let b = Context::open_soft(DeviceConfig::default()).unwrap();
//! let (pa, pb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
//! let (ca, cb) = (a.create_cq(64, None).unwrap(), b.create_cq(64, None).unwrap());
//! let qa = pa.qp_builder(QpType::Rc, &ca).build().unwrap().into_init(ConnectOpts::default()).unwrap();
//! let qb = pb.qp_builder(QpType::Rc, &cb).build().unwrap().into_init(ConnectOpts::default()).unwrap();
//! let (ea, eb) = (qa.endpoint().unwrap(), qb.endpoint().unwrap());
//! let qa = qa.connect(&eb).unwrap().ready_to_send().unwrap();
//! let qb = qb.connect(&ea).unwrap().ready_to_send().unwrap();
//!
//! let buf_a = pa.alloc_buf(4096, Access::all()).unwrap();
//! let buf_b = pb.alloc_buf(4096, Access::all()).unwrap();
//! buf_a.write(0, b"hello, rdma").unwrap();
//! qb.recv(1, &buf_b, 0..64).unwrap();
//! qa.send(2, &buf_a, 0..11).unwrap();
//! assert_eq!(cb.wait(1, t).unwrap()[0].byte_len, 11);
//! assert_eq!(buf_b.to_vec(0..11).unwrap(), b"hello, rdma");
//!
//! // One-sided: B's CPU does nothing, its progress thread serves the WRITE.
//! qa.write(3, &buf_a, 0..5, buf_b.remote(100)).unwrap();
//! let wcs = ca.wait(2, t).unwrap();
//! assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
//! assert_eq!(buf_b.to_vec(100..105).unwrap(), b"hello");
//! ```
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod buf;
pub mod devinfo;
mod error;
pub mod ibverbs;
mod objects;
mod provider;

pub use error::{Errno, Error, Layer, Result};
pub use ibverbs::select::{default_provider, Choice as ProviderChoice};
pub use ibverbs::IbverbsProvider;
pub use objects::{
    devices, open_device, Ah, CompChannel, ConnectOpts, Context, Cq, Endpoint, InitQp, Mr, MrBuf,
    Pd, Qp, QpBuilder, RemoteBuf, RtrQp, Srq,
};
pub use provider::{DeviceOps, Provider, SoftOps, SoftProvider};
pub use rdmakit_proto::{
    Access, AttrMask, Mtu, QpAttr, QpState, QpType, RecvWr, SendOp, SendWr, Sge, Stats, UdDest, Wc,
    WcOpcode, WcStatus,
};
pub use rdmakit_soft::{DeviceConfig, Limits};

/// The provider chosen at an edge (`--provider`, else `RDMAKIT_PROVIDER`),
/// or why that choice is bad — an error only for a command that opens a
/// device through it.
pub type ProviderSetting = Result<ProviderChoice>;
pub use rdmakit_types::{
    guid_str, AsyncEvent, Av, DeviceAttr, Gid, GidEntry, GidType, LinkLayer, PortAttr, PortState,
    QpInit, SendRequest, Speed, Width,
};
