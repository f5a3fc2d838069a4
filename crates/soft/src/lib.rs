//! `rdmakit-soft`: the software RDMA NIC.
//!
//! A userspace device with the semantics of a real NIC and its driver:
//! device and port attributes ([`attr`]), PD/MR/CQ/QP/SRQ/AH tables with
//! device limits and the errno Linux's rxe returns when one is exceeded
//! (docs/soft-nic.md has the table), per-queue descriptor rings where taking
//! a descriptor and "DMA-mapping" its buffers happen under one lock
//! ([`ring`]), registered memory reached through validated accesses only
//! ([`dma`]; besides it only the cross-memory copy ([`cma`]) and the
//! same-host rings' shared mapping (`net::shm`) touch raw pointers;
//! elsewhere `unsafe` only forwards documented contracts), a progress
//! thread per device that runs the passive side of WRITE/READ/atomics while
//! the application does nothing, and a RoCEv2-over-UDP driver ([`net`]) on
//! port 4791.
//!
//! The API is handle-based, like a driver's: objects are `u32` handles
//! (QPNs for QPs, keys for MRs). `rdmakit-verbs` wraps it in safe,
//! reference-counted objects.
//!
//! ```
//! use rdmakit_soft::{Device, DeviceConfig};
//! let dev = Device::open(DeviceConfig::default()).unwrap();
//! // The host's first non-loopback address (its "eth0"), or 127.0.0.1.
//! assert_eq!(dev.addr(), rdmakit_soft::net::host_device_addr());
//! let pd = dev.alloc_pd().unwrap();
//! let cq = dev.create_cq(16, None).unwrap();
//! assert_eq!(dev.resource_counts().cq, 1);
//! dev.destroy_cq(cq).unwrap();
//! dev.dealloc_pd(pd).unwrap();
//! ```
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod attr;
pub mod cma;
mod device;
pub mod devnode;
pub mod dma;
pub mod errno;
pub mod faults;
pub mod install;
pub mod net;
pub mod registry;
pub mod ring;
pub mod userdir;

pub use attr::{Av, DeviceAttr, Gid, Limits, PortAttr, ROCEV2_GID_INDEX};
pub use cma::SoftTransport;
pub use device::{
    flush_held_acks, parse_cc, AsyncEvent, Counters, DataPath, Device, DeviceConfig, GsiMad,
    PostFailure, QpInit, ResourceCounts, SendRequest, CC_VAR, GSI_QPN, LOOPBACK_LID,
    TRANSPORT_COUNTERS,
};
pub use errno::{Errno, Origin, SoftError};
pub use rdmakit_proto as proto;
pub use rdmakit_types as types;

/// A mutex's guard, poisoned or not: a panicking thread leaves the device's
/// tables as consistent as any step of theirs (every critical section is
/// one table update), and the next call must still answer.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// [`lock`] for an `RwLock` read.
pub(crate) fn read<T>(m: &std::sync::RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|e| e.into_inner())
}

/// [`lock`] for an `RwLock` write.
pub(crate) fn write<T>(m: &std::sync::RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|e| e.into_inner())
}
