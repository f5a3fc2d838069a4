//! Slurm: sweeps over srun and the health check (docs/slurm.md).
//!
//! - [`node`]: a node's state from `scontrol show node -o`.
//! - [`health`]: drain / resume / leave, and the drain reason, from findings.
//! - [`env`]: the environment the health check gives scontrol (Slurm gives it none).
//! - [`frame`]: how a node's report travels over srun's output.
//! - [`sweep`]: srun's output → one result per node (reported, or missing and why).
//! - [`watch`]: a deadline on the doctor, naming the read it hung in.
//! - [`run`]: runs sinfo / scontrol / srun; [`exec`]: one command within a deadline
//!   and a size cap, from a file only root can replace (the modules that run commands).

pub mod env;
pub mod exec;
pub mod frame;
pub mod health;
pub mod node;
pub mod run;
pub mod sweep;
pub mod watch;
