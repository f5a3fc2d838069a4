//! Layered RDMA host diagnosis.
//!
//! [`checks::run_all`] runs every rule over [`rdmakit_host::model::HostFacts`]; each
//! rule is a pure function of the facts and a [`checks::Config`], and yields
//! [`finding::Finding`]s with a stable code ([`codes::Code`]), layer, severity,
//! evidence (path → value), the commonly omitted check it catches (a hint) where
//! one applies, and a remedy. [`report::Report`] assembles them with the four-row
//! verification checklist; [`render`] turns a report into text or JSON. [`explain`] answers "what does
//! this code / errno / verb:errno / work completion status mean".
//!
//! Promises: rules never panic and never read anything themselves; the same facts
//! give the same report.
//!
//! ```
//! use rdmakit_doctor::{checks::Config, report::Report};
//! use rdmakit_host::{collect::{collect, CollectOptions}, source::LiveSource};
//! let facts = collect(&LiveSource::host(), &CollectOptions::default());
//! let report = Report::build(&facts, &Config::default(), "doc", "live host");
//! assert_eq!(report.checklist.len(), 4);
//! ```

pub mod assemble;
pub mod checks;
pub mod codes;
pub mod counters;
pub mod explain;
pub mod finding;
pub mod group;
pub mod health;
pub mod inventory;
pub mod npd;
pub mod oneline;
pub mod probes;
pub mod qos;
pub mod render;
pub mod report;
pub mod rules;
pub mod soft;
pub mod views;
