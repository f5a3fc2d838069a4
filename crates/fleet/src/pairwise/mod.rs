//! The pairwise fabric matrix: find the bad node, or the bad link between
//! two nodes, by measuring RDMA bandwidth and latency between every pair.
//!
//! - [`agent`]: the long-running test agent (one per node), serving only a
//!   coordinator that proves the run's token ([`auth`], [`protocol`]).
//! - [`coordinator`]: connects to the agents, runs the rounds of
//!   [`schedule`] (the circle method: N−1 rounds of N/2 disjoint pairs),
//!   judges the matrix with [`localize`], re-measures suspects, and returns
//!   a [`report::PairwiseReport`] (`rdmakit.pairwise/v1`), rendered by
//!   [`render`].
//! - [`slurm`]: the agents as one Slurm job step.
//! - [`link`]: the path MTU an agent's link carries.
//! - [`cause`]: a slow pair congested (CNPs, ECN marks) or lossy without
//!   ECN (retransmissions, no CNP), by its ends' counters.
//!
//! ```no_run
//! use rdmakit_fleet::pairwise::{auth::Token, coordinator};
//! let token = Token::new(b"0123456789abcdef0123456789abcdef")?;
//! let agents = vec!["10.0.0.11:18516".parse()?, "10.0.0.12:18516".parse()?];
//! let report = coordinator::run(&coordinator::PairwiseConfig::new(agents, token), &|_| {})?;
//! println!("{}", serde_json::to_string_pretty(&report)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod agent;
pub mod auth;
pub mod cause;
pub mod confirm;
pub mod coordinator;
pub mod deltas;
pub mod gate;
pub mod link;
pub mod localize;
pub mod logtext;
pub mod options;
pub mod privilege;
pub mod protocol;
pub mod render;
pub mod report;
pub mod schedule;
pub mod slurm;
