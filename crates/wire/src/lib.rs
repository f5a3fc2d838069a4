//! RoCEv2 on the wire.
//!
//! This crate is the bottom layer of rdmakit: it knows the bytes of a RoCEv2 packet
//! and nothing else (no I/O, no clock, no allocation on the packet paths).
//!
//! * Ethernet (+802.1Q VLAN), IPv4, IPv6 and UDP encapsulation.
//! * The InfiniBand transport headers: [`bth`], [`reth`], [`aeth`], [`atomic_eth`],
//!   [`atomic_ack_eth`], [`immdt`], [`ieth`], [`deth`].
//! * The [`opcode`] table for RC, UC and UD: which extension headers each opcode
//!   carries, whether it has a payload, and its FIRST/MIDDLE/LAST/ONLY position.
//! * [`roce`]: a whole transport packet (BTH + extension headers + payload + pad + ICRC,
//!   i.e. a UDP payload on port 4791) and [`frame`]: a whole Ethernet frame.
//! * [`cnp`]: the RoCEv2 congestion notification packet (opcode 0x81), built
//!   and recognised by one call each; [`roce::Kind`] parses a UDP payload that
//!   may be either a transport packet or a CNP.
//! * [`icrc`]: the invariant CRC for IPv4 and IPv6, exactly as IBTA Annex A17 and
//!   Linux rxe compute it.
//! * [`capture`]: decoding of pcap / pcapng captures into a serializable report with
//!   per-packet details, ICRC validation and protocol anomalies.
//! * [`mad`]: management datagrams: the common header and status, communication
//!   management ([`cm`]), subnet management packets ([`mad::smp`], LID-routed and
//!   directed route, with NodeInfo, PortInfo, SwitchInfo, ... ) and performance
//!   management ([`mad::pma`], PortCounters and friends with each counter's width).
//!
//! # Which type for which job
//! * Building a transport packet (the protocol engine): [`roce::Repr::new`] with
//!   an [`OpCode`] (or [`OpCode::from_parts`]), set the extension headers the
//!   opcode needs (`OpCode::info().headers` says which) and the payload, then
//!   [`roce::Repr::emit`] into `roce::Repr::buffer_len()` bytes; the pad is
//!   computed. Fill the ICRC with [`icrc::compute_parts`] / [`icrc::compute_reprs`]
//!   (you know the IP and UDP headers) or emit a whole [`frame::Datagram`] /
//!   [`frame::Repr`], which does lengths, checksums and the ICRC.
//! * Receiving: [`roce::Packet::new_checked`] then [`roce::Repr::parse`] (an unknown
//!   opcode is [`Error::Unsupported`], bad lengths [`Error::Truncated`] /
//!   [`Error::Malformed`]); check the ICRC with [`icrc::verify`] on the IP packet,
//!   or [`frame::icrc_valid`] on an Ethernet frame.
//! * Congestion notification (opcode 0x81): a notification point builds a CNP
//!   with [`cnp::Repr::new`] then [`cnp::Repr::emit_without_icrc`] (a protocol
//!   engine, whose driver appends the ICRC) or [`cnp::Repr::emit_ip`] (a whole
//!   IP packet, ICRC included); a receive path parses with
//!   [`roce::Kind::parse_without_icrc`] / [`roce::Kind::parse`], which give
//!   [`roce::Kind::Cnp`] or [`roce::Kind::Transport`].
//! * AETH syndromes: [`aeth::AethKind`] (ACK / RNR NAK / NAK with [`NakCode`]),
//!   [`aeth::rnr_timer_micros`]. PSN arithmetic modulo 2^24: [`psn`].
//! * Pretty printing: every Repr implements `Display`; a [`frame::Repr`] prints one
//!   tcpdump-like line.
//!
//! Every header follows the smoltcp shape: a zero-copy `Packet<T: AsRef<[u8]>>` view
//! (`new_unchecked`, `new_checked`, `check_len`; getters need `AsRef<[u8]>`, setters
//! `AsMut<[u8]>`) and a plain-data `Repr` with `parse`, `emit` and `buffer_len`.
//!
//! # Promises
//! * No `unsafe` code (`#![forbid(unsafe_code)]`).
//! * Never panics on input: any byte slice given to `new_checked`, `Repr::parse`,
//!   [`frame::Repr::parse`] or [`capture::decode_capture`] yields a value or an
//!   error. After `check_len` succeeds no getter panics; `emit` into a buffer of at
//!   least `buffer_len()` bytes never panics.
//! * Deterministic: the same bytes always give the same result.
//! * Byte exact: for every packet of the real Linux rxe captures in the fixtures,
//!   `emit(parse(p)) == p`, including the ICRC.
//!
//! # Example
//! ```
//! use rdmakit_wire::{frame, opcode::OpCode};
//!
//! // RC SEND_ONLY, QP 1, PSN 1, 16 payload bytes (the roce-wire.md ICRC test vector).
//! let hex = "02000000000202000000000108004502003c00014000401126ac0a0000010a000002\
//!            c12312b7002800000400ffff0000001180000100000102030405060708090a0b0c0d0e0f\
//!            e9a4e416";
//! let bytes: Vec<u8> = (0..hex.len())
//!     .step_by(2)
//!     .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
//!     .collect();
//! let repr = frame::Repr::parse(&bytes).unwrap();
//! assert_eq!(repr.roce.bth.opcode, OpCode::RC_SEND_ONLY);
//! assert_eq!(repr.roce.payload.len(), 16);
//! assert!(frame::icrc_valid(&bytes).unwrap());
//!
//! // Emitting the Repr gives back the same bytes, ICRC included.
//! let mut out = vec![0u8; repr.buffer_len()];
//! repr.emit(&mut out).unwrap();
//! assert_eq!(out, bytes);
//! println!("{repr}"); // one tcpdump-like line
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod capture;
pub mod checksum;
pub mod cm;
pub mod cma;
pub mod cnp;
pub mod deth;
pub mod ethernet;
pub mod frame;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod ipv4;
pub mod ipv6;
pub mod mad;
pub mod opcode;
pub mod psn;
pub mod reth;
pub mod roce;
pub mod udp;
mod view;
pub mod vlan;

mod field {
    pub type Field = core::ops::Range<usize>;
    pub type Rest = core::ops::RangeFrom<usize>;
}

pub use crate::aeth::{AethKind, NakCode};
pub use crate::opcode::{OpCode, Operation, Position, Transport};

/// The UDP destination port of RoCEv2.
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// Why bytes could not be read as a packet, or a Repr could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field says).
    #[error("truncated packet")]
    Truncated,
    /// A field has a value that the format forbids (bad length, version, ...).
    #[error("malformed packet")]
    Malformed,
    /// The packet is well formed but uses something this crate does not handle
    /// (IP options, fragments, an unknown BTH opcode, ...).
    #[error("unsupported packet")]
    Unsupported,
}

/// `Result<T, Error>`.
pub type Result<T> = core::result::Result<T, Error>;
