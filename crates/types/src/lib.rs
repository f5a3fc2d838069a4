//! The provider-neutral Verbs types of rdmakit: what `ibv_query_device` and
//! `ibv_query_port` report ([`DeviceAttr`], [`PortAttr`], [`Gid`], [`GidType`],
//! [`LinkLayer`], the link's [`Width`] and [`Speed`]), QP
//! creation parameters and attributes ([`QpInit`], [`QpAttr`]), work
//! requests ([`SendWr`], [`RecvWr`], [`SendRequest`]), completions ([`Wc`])
//! and asynchronous events ([`AsyncEvent`]).
//!
//! Every layer above speaks these: the sans-IO engine (`proto`), the
//! software NIC (`soft`), the safe Verbs API and its rdma-core provider
//! (`verbs`), and the C ABI (`ibverbs-abi` converts them to and from
//! rdma-core's structs, once). No dependencies.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod attr;
pub mod device;
pub mod link;
pub mod qp;
pub mod raw;
pub mod soft_counters;
pub mod wr;

pub use attr::{
    guid_str, phys_state_name, port_state_name, transport_name, Av, DeviceAttr, Gid, GidEntry,
    GidType, LinkLayer, PortAttr, PortState,
};
pub use device::{AsyncEvent, QpInit, SendRequest};
pub use link::{Speed, Width};
pub use qp::{
    modify_is_ok, required_mask, Access, AddressHandle, AttrMask, Mtu, QpAttr, QpState, QpType,
};
pub use raw::InvalidValue;
pub use wr::{MwBind, RecvWr, SendOp, SendWr, Sge, UdDest, Wc, WcOpcode, WcStatus};
