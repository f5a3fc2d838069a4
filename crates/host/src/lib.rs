//! Host facts for RDMA diagnosis.
//!
//! Everything rdmakit knows about a host is read through one [`source::Source`]: the
//! live host (rooted at `/` or at a captured tree), or a recorded [`bundle::Bundle`].
//! [`collect::collect`] turns a source into [`model::HostFacts`]; the parsers in
//! [`parse`] are pure functions on bytes that never panic on bad input.
//!
//! Promises: collection never writes to the host; replaying a bundle recorded by
//! [`source::Recorder`] runs the same code on the same answers and so yields the same
//! facts; a garbage value becomes an `Attr` with no value (and an entry in
//! `HostFacts::unrecognized`), never a panic.
//!
//! ```
//! use rdmakit_host::{collect::{collect, CollectOptions}, source::{LiveSource, Recorder}, bundle::Bundle};
//! let host = LiveSource::host();
//! let rec = Recorder::new(&host);
//! let facts = collect(&rec, &CollectOptions::default());
//! let bundle = Bundle::new(Bundle::header_now("doc", CollectOptions::default()), rec.into_records());
//! let again = collect(&bundle, &bundle.header.options.clone());
//! assert_eq!(facts.devices.len(), again.devices.len());
//! ```

pub mod bounded;
pub mod bundle;
pub mod capture;
pub mod collect;
pub mod errno;
pub mod ethernet;
pub mod model;
pub mod netlink;
pub mod open;
pub mod outfile;
pub mod parse;
pub mod privilege;
pub mod process;
pub mod redact;
pub mod secrets;
pub mod source;
pub mod watch;
