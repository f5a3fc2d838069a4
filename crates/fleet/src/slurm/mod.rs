//! Slurm: sweeps over srun and the health check (docs/slurm.md).
//!
//! - [`node`]: a node's state from `scontrol show node -o`.
//! - [`health`]: drain / resume / leave, and the drain reason, from the doctor's
//!   verdict on the node.
//! - [`check`]: the health check's run: the verdict within a deadline, then the
//!   action, carried out with scontrol.
//! - [`env`]: the environment the health check gives scontrol (Slurm gives it none).
//! - [`frame`]: how a node's report travels over srun's output.
//! - [`sweep`]: srun's output → one result per node (reported, or missing and why).
//! - [`run`]: runs sinfo / scontrol / srun; [`exec`]: one command within a deadline
//!   and a size cap, from a file only root can replace; [`step`]: one srun job step
//!   read line by line, for the sweep and the pairwise agents (the modules that run
//!   commands). Each says what failed as a [`SlurmError`].

pub mod check;
pub mod env;
pub mod exec;
pub mod frame;
pub mod health;
pub mod node;
pub mod run;
pub mod step;
pub mod sweep;

use node::ParseError;

/// A Slurm command that failed: sinfo, scontrol, a sweep's srun, or the pairwise
/// agents' job step.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    // The io error is in the message, not a `#[source]`: callers print this error
    // alone (the health check's one line) or with its chain, and either way it
    // should read once.
    #[error("{cmd}: cannot run it: {err} (is Slurm's client installed and on PATH?)")]
    Spawn { cmd: String, err: std::io::Error },
    #[error("{cmd}: {status}: {stderr}")]
    Failed {
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error("{0}")]
    Input(String),
    #[error("{cmd}: no answer within {secs:.1} s (killed)")]
    TimedOut { cmd: String, secs: f64 },
    #[error("{cmd}: printed more than {max} bytes (killed): not what it should print")]
    TooLarge { cmd: String, max: usize },
    #[error("{cmd}: refusing to run {path} as root: {why}")]
    Untrusted {
        cmd: String,
        path: String,
        why: String,
    },
    /// The agents' job step ended before every agent was ready.
    #[error("srun exited ({status}) after {ready} agent(s) were ready{}", tail(.output))]
    StepExited {
        /// Its exit status.
        status: String,
        /// READY lines seen.
        ready: usize,
        /// Its other stdout lines.
        output: Vec<String>,
    },
    /// Not every agent of the step was ready in time.
    #[error("{ready} of {expected} agents ready after {secs:.0} s{}", tail(.output))]
    StepNotReady {
        /// READY lines seen.
        ready: usize,
        /// READY lines expected (`?` when no agent said).
        expected: String,
        /// Seconds waited.
        secs: f64,
        /// Other stdout lines.
        output: Vec<String>,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// The last five of a step's other output lines, for its error.
fn tail(lines: &[String]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let k = lines.len().saturating_sub(5);
    format!("; its other output:\n  {}", lines[k..].join("\n  "))
}
