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
use rdmakit_types::{AsyncEvent, Av, DeviceAttr, Gid, PortAttr, QpInit, SendRequest};

use crate::buf::OwnedMem;
use crate::error::{Error, Layer, Result};
use crate::provider::{DeviceOps, Provider, SoftProvider};

mod ah;
mod context;
mod cq;
mod mr;
mod pd;
mod qp;
mod srq;
pub use ah::Ah;
pub use context::Context;
pub use cq::{CompChannel, Cq};
pub use mr::{Mr, MrBuf, RemoteBuf};
pub use pd::Pd;
pub use qp::{ConnectOpts, Endpoint, InitQp, Qp, QpBuilder, RtrQp};
pub use srq::Srq;

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
