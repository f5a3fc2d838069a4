//! The words every rdmakit layer shares, written once: Linux errno names and
//! messages ([`errno`]), the stack [`Layer`] a failure belongs to, the names
//! and texts of work-completion statuses ([`wc`]), the exit statuses every
//! subcommand shares ([`exit`]), and how long work says where it is
//! ([`progress`]).
//!
//! The crate has no dependencies and calls no C library: every table is written
//! out, so a bundle recorded on one machine reads the same on any other.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod errno;
pub mod exit;
mod layer;
pub mod progress;
pub mod wc;

pub use layer::Layer;
