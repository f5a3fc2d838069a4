//! The Slurm health check's run (`rdmakit doctor --slurm-health-check`, slurmd's
//! `HealthCheckProgram` or `Prolog`): the doctor's verdict on this node within a
//! deadline (`rdmakit_doctor::health`), then the one action [`super::health`]
//! decides, carried out with scontrol.
//!
//! slurmd runs it with every capability: it keeps what reading the host (and
//! `--probe`) needs while the doctor runs, and none once scontrol runs. The node
//! is `SLURMD_NODENAME`, else the checked node's host name; scontrol gets a PATH
//! and the slurm.conf the running slurmd uses ([`super::env`]), found among the
//! processes the check runs under.

use std::time::Duration;

use rdmakit_doctor::health::{NodeCheck, Unknown, Verdict};
use rdmakit_host::privilege;

use super::env::{self, find_slurm_conf};
use super::health::{self, Action};
use super::run::Commands;

/// The exit status when rdmakit could not check or could not act (the node's
/// Slurm state is then unknown).
pub const FAILED: u8 = 2;

/// One run of the health check.
pub struct HealthCheck {
    /// The doctor's check of this node (no probes unless asked).
    pub check: NodeCheck,
    /// How long the check may take before the node counts as hung (Slurm kills
    /// the program at 60 s).
    pub timeout: Duration,
    /// Say what would be done, change nothing in Slurm.
    pub dry_run: bool,
    /// What the health check's own environment holds, read at the edge.
    pub env: SlurmEnv,
}

/// The variables of the health check's own environment it uses (slurmd gives a
/// HealthCheckProgram none, a Prolog a few).
#[derive(Clone, Debug, Default)]
pub struct SlurmEnv {
    pub path: Option<String>,
    pub slurm_conf: Option<String>,
    pub slurmd_nodename: Option<String>,
}

impl SlurmEnv {
    /// `PATH`, `SLURM_CONF` and `SLURMD_NODENAME` of this process, read by
    /// the caller at its edge.
    pub fn from_env() -> SlurmEnv {
        let env = |k: &str| std::env::var(k).ok();
        SlurmEnv {
            path: env("PATH"),
            slurm_conf: env("SLURM_CONF"),
            slurmd_nodename: env("SLURMD_NODENAME"),
        }
    }
}

/// Runs the health check; every line it has to say goes to `out`, as
/// "rdmakit health check NODE: WHAT". Returns the exit status: 0 healthy, 1
/// unhealthy (drained unless held), 2 the checks or scontrol could not run.
pub fn run(hc: HealthCheck, out: &mut dyn FnMut(&str)) -> u8 {
    let kept = privilege::keep_only(privilege::DOCTOR);
    let health = hc.check.within(hc.timeout.max(Duration::from_secs(1)));
    let id = health.node.clone().unwrap_or_default();
    let node = env::node_name(
        hc.env.slurmd_nodename.as_deref(),
        id.hostname.as_deref().unwrap_or_default(),
    );
    let mut say = |what: &str| out(&format!("rdmakit health check {node}: {what}"));
    if let Err(e) = kept {
        say(&format!("note: could not drop capabilities: {e}"));
    }
    // The environment for scontrol: Slurm gives a HealthCheckProgram none.
    let path = env::path_for(hc.env.path.as_deref());
    let conf = find_slurm_conf(hc.env.slurm_conf.as_deref(), &id.ancestors, |p| p.is_file());
    let mut cmds = Commands::health_check(vec![("PATH".into(), path)]);
    if let Some(c) = &conf {
        cmds.env
            .push(("SLURM_CONF".into(), c.path.display().to_string()));
    }
    let verdict = health.verdict;
    if let Verdict::Unknown(Unknown::Failed(e)) = &verdict {
        say(&format!("error: could not run the checks: {e}"));
        return FAILED;
    }
    // What follows (scontrol) needs no capability: drop them all.
    if let Err(e) = privilege::drop_all() {
        say(&format!("note: could not drop capabilities: {e}"));
    }
    let state = match cmds.show_node(&node) {
        Ok(st) => st,
        Err(e) => {
            let conf_note = match &conf {
                Some(c) => format!("SLURM_CONF={} ({})", c.path.display(), c.how),
                None => "no slurm.conf found; scontrol used its default".into(),
            };
            say(&format!("error: {e} [{conf_note}]"));
            if let Some(reason) = health::reason(&verdict) {
                say(&format!("unhealthy, not drained: {reason}"));
            }
            return FAILED;
        }
    };
    let action = health::decide(&verdict, &state);
    let line = action.line(&state, hc.dry_run);
    let done = match (&action, hc.dry_run) {
        (Action::Drain { reason }, false) => cmds.drain(&node, reason),
        (Action::Resume, false) => cmds.resume(&node),
        _ => Ok(()),
    };
    match done {
        Ok(()) => {
            say(&line);
            health::exit_code(&verdict)
        }
        Err(e) => {
            say(&format!("error: {e}"));
            FAILED
        }
    }
}
