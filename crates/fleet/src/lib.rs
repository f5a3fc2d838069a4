//! The doctor across a cluster: aggregates many nodes' reports and says which nodes
//! are not like the others.
//!
//! Inputs ([`input::load`]) are any mix of per-node `rdmakit collect` bundles (or
//! directories of them), capture directories, `rdmakit doctor --json` files and JSON
//! lines (one doctor report per line, as a sweep prints them); a caller that already
//! holds the lines (a Slurm sweep reading srun's output) builds
//! [`node::NodeReport`]s directly ([`node::NodeReport::from_doctor_json`],
//! [`node::NodeReport::missing`]). [`report::analyze`] turns node reports into a
//! [`report::FleetReport`]: each node's status (`ok`, `warning`, `error`,
//! `missing`) and reasons, its own findings grouped by code across nodes, cohorts of
//! comparable hardware ([`cohort`]), categorical drift within a cohort ([`drift`]),
//! robust numeric outliers ([`outlier`], by the statistics of [`stats`]), and the changes since a previous sweep or
//! against an expected inventory ([`baseline`]). [`render`] prints it for people or
//! as JSON (schema `rdmakit.fleet/v1`, docs/fleet.md).
//!
//! [`slurm`] runs it on Slurm (docs/slurm.md): the sweep (one doctor per node as one
//! job step, srun's own output as the transport, every node reported or `missing`
//! with the reason) and the health check's drain / resume decisions for
//! `HealthCheckProgram` and `Prolog`, as pure functions of node states, findings and
//! srun's lines.
//!
//! Promises: no I/O outside [`input`] (which only reads the files it is given and
//! replays bundles through the doctor; it never touches the host) and
//! [`slurm::run`], [`slurm::exec`] and [`slurm::check`] (which run Slurm's commands
//! within bounds, and the doctor under its deadline: host facts are read only
//! through the doctor and `rdmakit_host::Source`); bad input is an
//! error entry naming it, never a panic, and never drops the rest; the same inputs
//! give the same report whatever their order of arrival (nodes are sorted by name,
//! cohorts by size).
//!
//! ```
//! use rdmakit_fleet::node::NodeReport;
//! use rdmakit_fleet::report::{analyze, Options, Status};
//! let line = r#"{"schema":"rdmakit.doctor/v1","findings":[],"inventory":{"hostname":"n1"}}"#;
//! let node = NodeReport::from_doctor_json(line, "sweep.jsonl:1").unwrap();
//! let gone = NodeReport::missing("n2", "sweep", "no output from srun");
//! let r = analyze(vec![node, gone], vec![], vec![], &Options::default());
//! assert_eq!(r.nodes[1].status, Status::Missing);
//! assert_eq!(r.summary.exit_code, 1);
//! ```

/// This rdmakit, as reports name the tool that made them.
pub const TOOL: &str = concat!("rdmakit ", env!("CARGO_PKG_VERSION"));
pub mod baseline;
#[cfg(feature = "cli")]
pub mod cli;
pub mod cohort;
pub mod drift;
pub mod fabric;
pub mod input;
pub mod node;
pub mod outlier;
pub mod pairwise;
pub mod render;
pub mod report;
pub mod slurm;
pub mod stats;
pub mod unique;
