//! `rdmakit doctor --slurm-health-check`: Slurm's HealthCheckProgram / Prolog.
//! The decisions are `rdmakit_fleet::slurm::health`'s; this file gathers their
//! inputs (the report, within a deadline; the node's state) and carries them out.

use std::process::ExitCode;
use std::time::Duration;

use rdmakit_fleet::slurm::env::{self, find_slurm_conf};
use rdmakit_fleet::slurm::health::{self, Action, Verdict};
use rdmakit_fleet::slurm::run::Commands;
use rdmakit_host::collect::{self, collect};
use rdmakit_host::source::LiveSource;
use rdmakit_host::watch::{self, Watched};

use super::doctor::{build_report, note_bundle_misses, Args, Settings};

/// Exit status when rdmakit could not check or could not act (Slurm state unknown).
const FAILED: u8 = 2;

/// This node's Slurm name: SLURMD_NODENAME (set for Prolog and job steps), else the
/// short hostname (HealthCheckProgram gets no environment).
pub fn node_name() -> String {
    let from_env = std::env::var("SLURMD_NODENAME").ok();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    env::node_name(from_env.as_deref(), &host)
}

pub(super) fn run(a: Args, s: Settings) -> anyhow::Result<ExitCode> {
    let node = node_name();
    let say = |what: &str| println!("rdmakit health check {node}: {what}");
    // slurmd gives us every capability: the doctor keeps what reading the host
    // (and --probe) needs, and the rest of the run none (below).
    if let Err(e) = rdmakit_host::privilege::keep_only(rdmakit_host::privilege::DOCTOR) {
        say(&format!("note: could not drop capabilities: {e}"));
    }

    // The environment for scontrol: Slurm gives a HealthCheckProgram none.
    let path = env::path_for(std::env::var("PATH").ok().as_deref());
    let own_conf = std::env::var("SLURM_CONF").ok();
    let ancestors = collect::node(&LiveSource::host()).ancestors;
    let conf = find_slurm_conf(own_conf.as_deref(), &ancestors, |p| p.is_file());
    let mut cmds = Commands::health_check(vec![("PATH".into(), path)]);
    if let Some(c) = &conf {
        cmds.env
            .push(("SLURM_CONF".into(), c.path.display().to_string()));
    }

    // The fast checks, within the deadline; no active probes unless --probe.
    let limit = Duration::from_secs(a.health_timeout.max(1));
    let (a2, s2) = (a.clone(), s.clone());
    let built = watch::within(limit, move |tracker| -> anyhow::Result<Verdict> {
        let (opened, opts) = a2.source.open()?;
        let facts = collect(&Watched::new(opened.source(), tracker), &opts);
        note_bundle_misses(&a2, &opened);
        let report = build_report(&a2, &s2, &facts, &opened, false, None)?;
        Ok(health::verdict(&report.findings, s2.fail_on))
    });
    let verdict = match built {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            say(&format!("error: could not run the checks: {e:#}"));
            return Ok(ExitCode::from(FAILED));
        }
        Err(h) => health::hung(h.limit.as_secs(), h.reading.as_deref()),
    };
    // What follows (scontrol) needs no capability: drop them all.
    if let Err(e) = rdmakit_host::privilege::drop_all() {
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
            if let Verdict::Unhealthy { reason } = &verdict {
                say(&format!("unhealthy, not drained: {reason}"));
            }
            return Ok(ExitCode::from(FAILED));
        }
    };
    let action = health::decide(&verdict, &state);
    let line = action.line(&state, a.dry_run);
    let done = match (&action, a.dry_run) {
        (Action::Drain { reason }, false) => cmds.drain(&node, reason),
        (Action::Resume, false) => cmds.resume(&node),
        _ => Ok(()),
    }
    .map(|()| say(&line));
    if let Err(e) = done {
        say(&format!("error: {e}"));
        return Ok(ExitCode::from(FAILED));
    }
    Ok(ExitCode::from(health::exit_code(&verdict)))
}
