//! A drop-in `librdmacm.so.1` whose connection manager runs in the process,
//! over rdmakit's software RoCEv2 NIC.
//!
//! rdma-core's librdmacm is a thin client of the kernel's `rdma_ucm`, which
//! runs rdma_cm and the IB CM and sends CM MADs on QP1. With no RDMA in the
//! kernel, this library does both in user space: the sans-IO engine of
//! `rdmakit-cm` ([`rdmakit_cm::rdma::RdmaCm`]) under one lock, fed by an agent
//! thread with the MADs the soft NIC receives on QP1 and with time, sending
//! its MADs through QP1 — on the wire exactly what Linux sends for RoCEv2,
//! so the soft NIC connects to kernel rxe both ways.
//!
//! The C ABI is rdma-core 44's: every exported symbol and version node of
//! Debian 12's librdmacm.so.1 (tests/symbols.rs compares them), the structs
//! of `<rdma/rdma_cma.h>` ([`abi`], tests/layout.rs compares them); the
//! convenience verbs of `<rdma/rdma_verbs.h>` are inline functions over the
//! `rdma_cm_id` fields this library fills in (`send_cq`, `recv_cq`, `pd`,
//! ...). QPs, CQs and PDs are created through the libibverbs.so.1 the
//! process loaded, which must be rdmakit's (it gives this library QP1 and the
//! device's address through private `rdmakit_*` entry points).
//!
//! What runs where, and what differs from Linux, is in docs/rdmacm.md.
//! No panic crosses the C boundary ([`guard`]).

#![deny(unsafe_op_in_unsafe_fn)]
#![allow(clippy::missing_safety_doc)]

pub mod abi;
mod addr;
mod addrinfo;
mod channel;
mod exports;
mod guard;
mod id;
mod qp;
mod rsocket;
mod state;
mod verbs;
