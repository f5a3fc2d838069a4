//! Prometheus exposition of what rdmakit knows about a host.
//!
//! - [`text`]: the Prometheus text format (version 0.0.4): families with HELP and TYPE
//!   lines, escaped label values, stable ordering.
//! - [`expo`]: host facts and the doctor's report → families. Names already exported by
//!   node_exporter's infiniband collector keep its names, labels and units
//!   (`node_infiniband_*`; `port_*_data` counted in 4-byte words become bytes); what it
//!   lacks is under `rdmakit_` (hw_counters, unavailable counters, netlink resources,
//!   doctor findings and check status, collection time).
//!   in the families of a real device's counters, as its port 1.
//! - [`fabric`]: the whole InfiniBand fabric from one local port (`rdmakit metrics
//!   --fabric`): every port's PMA counters under node_exporter's names prefixed
//!   `rdmakit_fabric_`, link states, widths and speeds, node counts.
//! - [`export`]: where `rdmakit metrics` puts the exposition (served, a textfile,
//!   stdout).
//! - [`http`]: the HTTP/1.1 exporter (hyper on a one-thread tokio runtime; GET/HEAD
//!   /metrics; 400/404/405/431/503 for everything else), whose connection slots no
//!   idle or slow client can hold, and whose concurrent scrapes share collections.

pub mod expo;
pub mod export;
pub mod fabric;
pub mod http;
pub mod text;
pub mod textfile;

pub use expo::{render, scrape, Options};
