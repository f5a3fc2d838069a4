//! The words every rdmakit layer shares, written once: Linux errno names and
//! messages ([`errno`]), the stack [`Layer`] a failure belongs to, and the names
//! and texts of work-completion statuses ([`wc`]).
//!
//! The crate has no dependencies and calls no C library: every table is written
//! out, so a bundle recorded on one machine reads the same on any other.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod errno;
mod layer;
pub mod wc;

pub use layer::Layer;
