//! `rdmakit-cm`: connection management for RDMA, sans-IO.
//!
//! Two layers, as in Linux:
//!
//! * [`ib`] — the InfiniBand communication manager (`ib_cm`): REQ, MRA, REJ,
//!   REP, RTU, DREQ, DREP, SIDR_REQ and SIDR_REP on QP1 with their retries,
//!   duplicate handling and timewait.
//! * [`rdma`] — the rdma_cm connection model on top (`rdma_cm`): IDs in port
//!   spaces, IP addresses and ports carried in the REQ's private data
//!   ([`rdmakit_wire::cm::ip`]), RoCE routes, the QP attributes a connection
//!   dictates ([`qp`]), and events with rdma_cm's semantics
//!   (`ADDR_RESOLVED` … `TIMEWAIT_EXIT`).
//!
//! No I/O, no clock, no threads: the caller feeds received MADs
//! (`handle_mad(now, ..)`) and time (`handle_timeout(now)`) in and polls
//! MADs to send, events and the next deadline out (`poll_transmit`,
//! `poll_event`, `poll_timeout`). Deterministic for a given seed.
//! `#![forbid(unsafe_code)]`; a malformed MAD is dropped, never a panic.
//!
//! ```
//! use rdmakit_cm::rdma::{ConnParam, Device, EventKind, Peer, RdmaCm, PS_TCP};
//! use rdmakit_proto::{Instant, QpType};
//! use std::net::{Ipv4Addr, SocketAddrV4};
//!
//! let dev = |a: [u8; 4]| Device::roce_v2(Ipv4Addr::from(a), 1024, 0x1122);
//! let (mut srv, mut cli) = (RdmaCm::new(dev([10, 0, 0, 1]), 1), RdmaCm::new(dev([10, 0, 0, 2]), 2));
//! let now = Instant::ZERO;
//! let l = srv.create_id(PS_TCP, QpType::Rc);
//! srv.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7174)).unwrap();
//! srv.listen(l).unwrap();
//! let c = cli.create_id(PS_TCP, QpType::Rc);
//! let server = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7174);
//! cli.resolve_addr(c, SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 40000), server,
//!                  Ok(Peer::at(rdmakit_cm::gid_of(*server.ip())))).unwrap();
//! cli.resolve_route(c).unwrap();
//! cli.connect(now, c, &ConnParam { qp_num: 0x11, ..ConnParam::default() }).unwrap();
//! // Carry the REQ to the server.
//! while let Some(t) = cli.poll_transmit() {
//!     srv.handle_mad(now, Peer::at(rdmakit_cm::gid_of(Ipv4Addr::new(10, 0, 0, 2))), &t.mad);
//! }
//! let ev = std::iter::from_fn(|| srv.poll_event()).last().unwrap();
//! assert_eq!(ev.kind, EventKind::ConnectRequest);
//! assert_eq!(ev.conn.qp_num, 0x11);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ib;
pub mod qp;
pub mod rdma;

use std::net::Ipv4Addr;

/// A port GID (on RoCEv2: an IPv4-mapped IPv6 address).
pub type Gid = [u8; 16];

/// The RoCEv2 GID of an IPv4 address (`::ffff:a.b.c.d`).
pub fn gid_of(a: Ipv4Addr) -> Gid {
    a.to_ipv6_mapped().octets()
}

/// The IPv4 address of an IPv4-mapped GID.
pub fn ipv4_of(g: &Gid) -> Option<Ipv4Addr> {
    std::net::Ipv6Addr::from(*g).to_ipv4_mapped()
}

/// Where a resolved address lives: the GID for the QP's address vector, and
/// the transport address of its connection manager (QP1). On a device with
/// one GID per process they are the same; on one whose processes share a
/// GID, `via` says which process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The peer's GID.
    pub gid: Gid,
    /// Where its QP1 is reached.
    pub via: Gid,
}

impl Peer {
    /// A peer reached at its own GID.
    pub fn at(gid: Gid) -> Peer {
        Peer { gid, via: gid }
    }
}

/// Why a CM call failed (a misuse by the caller; a bad MAD from the network
/// is dropped, never an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No such connection.
    #[error("no such connection")]
    UnknownConn,
    /// No such ID.
    #[error("no such rdma_cm ID")]
    UnknownId,
    /// The connection is not in a state that allows this.
    #[error("not allowed in CM state {0:?}")]
    State(ib::State),
    /// The ID is not in a state that allows this.
    #[error("not allowed in rdma_cm state {0:?}")]
    IdState(rdma::IdState),
    /// Someone already listens on this service.
    #[error("service already in use")]
    Busy,
    /// Too much private data for the message.
    #[error("{len} bytes of private data, at most {max} fit")]
    PrivateDataTooLong {
        /// Given.
        len: usize,
        /// Allowed.
        max: usize,
    },
    /// An argument is not valid.
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
}

impl Error {
    /// The errno Linux's rdma_cm returns for this.
    pub fn errno(&self) -> i32 {
        const EINVAL: i32 = 22;
        const EADDRINUSE: i32 = 98;
        match self {
            Error::Busy => EADDRINUSE,
            _ => EINVAL,
        }
    }
}
