//! `rdmakit-proto`: the sans-IO RoCEv2 transport engine.
//!
//! One [`Qp`] is the requester, responder and completer of one RC, UC or UD
//! queue pair. It does no I/O, reads no clock and spawns nothing: the caller
//! feeds packets ([`Qp::handle_packet`]), time ([`Qp::handle_timeout`]) and
//! work requests ([`Qp::post_send`], [`Qp::post_recv`]) in, and polls packets
//! ([`Qp::poll_transmit`]), completions ([`Qp::poll_completion`]) and the next
//! deadline ([`Qp::poll_timeout`]) out — the quinn-proto shape. Registered
//! memory is reached only through the [`Memory`] trait, which validates key,
//! protection domain, bounds and rights before any byte moves.
//!
//! Promises: deterministic (same inputs, same outputs), never panics on a
//! packet from the network, never writes outside memory that [`Memory`]
//! validated, `#![forbid(unsafe_code)]`.
//!
//! [`sim`] is a deterministic network of engines (virtual clock, latency,
//! seeded loss / reordering / duplication / corruption) used by the tests.
//!
//! ```
//! use rdmakit_proto::sim::{LinkConfig, Network};
//! use rdmakit_proto::{Access, Pd, QpType, RecvWr, SendOp, SendWr, Sge, WcStatus};
//!
//! let mut net = Network::new(LinkConfig::default(), 1);
//! let (a, b) = net.connected_pair(QpType::Rc);
//! let (alk, _) = net.node_mut(a).mem.register(Pd(1), 0x1000, 64, Access::all());
//! let (blk, _) = net.node_mut(b).mem.register(Pd(1), 0x2000, 64, Access::all());
//! net.node_mut(a).mem.region_mut(alk).unwrap().data[..5].copy_from_slice(b"hello");
//! net.qp_mut(b).post_recv(RecvWr { wr_id: 7, sg_list: vec![Sge { addr: 0x2000, length: 64, lkey: blk }] }).unwrap();
//! net.qp_mut(a).post_send(SendWr::new(1, SendOp::Send, vec![Sge { addr: 0x1000, length: 5, lkey: alk }])).unwrap();
//! net.run_until_idle();
//! let wcs = net.take_completions(b);
//! assert_eq!(wcs[0].status, WcStatus::Success);
//! assert_eq!(wcs[0].byte_len, 5);
//! assert_eq!(&net.node(b).mem.region(blk).unwrap().data[..5], b"hello");
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
mod engine;
pub mod mem;
pub mod psn;
pub mod sim;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod time;

pub use engine::{
    Answer, Arrival, DropCounts, ModifyError, PostError, Qp, QpConfig, Stats, Transmit,
    DEFAULT_LINE_RATE, ECT0, GRH_LEN, MAX_HEADER_LEN,
};
pub use mem::{
    AtomicOp, Extent, Key, MemError, MemResult, MemTable, Memory, Pd, PeerCopy, PeerDir, PeerError,
};
pub use psn::Psn;
pub use qp::{
    modify_is_ok, required_mask, Access, AddressHandle, AttrMask, Mtu, QpAttr, QpState, QpType,
};
/// QP states, attributes and the modify-QP table (in `rdmakit-types`).
pub use rdmakit_types::qp;
/// Work requests and completions (in `rdmakit-types`).
pub use rdmakit_types::wr;
pub use time::{local_ack_timeout, rnr_timer, Clock, Instant, LazyClock};
pub use wr::{MwBind, RecvWr, SendOp, SendWr, Sge, UdDest, Wc, WcOpcode, WcStatus};
