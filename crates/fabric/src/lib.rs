//! The InfiniBand subnet of rdmakit: the topology model ([`Subnet`],
//! [`Node`], [`Port`]), ibnetdiscover's topology format read and written (the
//! reader also takes ibsim's net format), the operator's expected cabling and
//! its comparison with what was found, a fat-tree generator for ibsim,
//! discovery, PMA counters and forwarding tables over MADs, routes, the
//! check's findings and the picture.
//!
//! Only [`live`] and `route`'s `live` part do I/O, through
//! rdmakit-umad: discovery, counters and routes are written against small
//! traits (`discover::Smp`, `counters::Pma`), so fakes test them, and the
//! rest is pure: no I/O, no clock. Every parser bounds its input
//! (16 MiB, 100,000 nodes or cables), reports errors with their line number
//! and never panics.
//!
//! ```
//! use rdmakit_fabric::{expected, fat_tree, ibnetdiscover};
//! use rdmakit_types::{Speed, Width};
//!
//! let net = fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).unwrap();
//! let subnet = ibnetdiscover::parse(&net).unwrap();
//! assert_eq!(subnet.nodes().len(), 22);
//! assert_eq!(subnet.links().count(), 16 + 8);
//! let exp = expected::Expected::from_subnet(&subnet);
//! assert!(expected::compare(&exp, &subnet).is_empty());
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod check;
#[cfg(feature = "cli")]
pub mod cli;
pub mod counters;
pub mod discover;
pub mod expected;
pub mod format;
pub mod generate;
pub mod live;
mod names;
pub mod route;
pub mod topology;
pub mod view;

pub use expected::{compare, CablingDiff, Expected};
pub use format::ibnetdiscover;
pub use generate::fat_tree;
pub use topology::{
    Link, LinkSpeeds, LinkWidths, ModelError, Node, NodeKind, Origin, Port, Port0, PortRef, Subnet,
    SCHEMA,
};
