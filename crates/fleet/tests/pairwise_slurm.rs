//! The agents' job step against a stand-in srun (a shell script): one srun
//! with the token in its environment only, READY lines read from its
//! stdout among other output, a step that fails or comes up short reported
//! with what it said, and a lingering step signalled when stopped. (The
//! namespaced end-to-end run is in crates/rdmakit/tests/fleet_pairwise_netns.rs.)

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rdmakit_fleet::pairwise::auth::Token;
use rdmakit_fleet::pairwise::slurm::{AgentStep, SlurmConfig};
use rdmakit_fleet::slurm::SlurmError;

fn launch(c: &SlurmConfig) -> Result<AgentStep, SlurmError> {
    AgentStep::launch(c, &token())
}

/// The stand-in srun, written so that no test's fork can make it "busy"
/// (see `rdmakit_testkit::write_script`).
fn fake(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("srun");
    rdmakit_testkit::write_script(&p, &format!("#!/bin/bash\n{body}\n"));
    p
}

fn cfg(srun: PathBuf) -> SlurmConfig {
    let mut c = SlurmConfig::new("/opt/rdmakit/bin/rdmakit".into());
    c.srun = srun;
    c.ready_timeout = Duration::from_secs(10);
    c
}

fn token() -> Token {
    Token::new(b"slurm-step-token-0123456789").unwrap()
}

/// Prints what srun would carry back from three agents, mixed with other
/// output, then waits like a running step; TERM ends it.
const THREE: &str = r#"
echo "$@" > "$D/argv"
printf '%s' "$RDMAKIT_FLEET_TOKEN" > "$D/token"
trap 'echo term > "$D/term"; exit 143' TERM
echo "srun: job 42 queued and waiting for resources"
for r in 2 0 1; do
  echo "{\"agent\":\"ready\",\"name\":\"n$((r+1))\",\"addr\":\"10.250.0.$((11+r)):18516\",\"rank\":$r,\"ntasks\":3}"
done
while true; do sleep 0.1; done
"#;

#[test]
fn one_step_token_in_env_ready_lines_parsed_then_stopped() {
    let d = tempfile::tempdir().unwrap();
    let body = format!("D={}\n{THREE}", d.path().display());
    let mut step = launch(&cfg(fake(d.path(), &body))).unwrap();
    let names: Vec<&str> = step.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["n1", "n2", "n3"], "sorted by rank");
    assert_eq!(step.agents[1].addr, "10.250.0.12:18516".parse().unwrap());
    let argv = std::fs::read_to_string(d.path().join("argv")).unwrap();
    assert!(argv.starts_with("--ntasks-per-node=1 "), "{argv}");
    assert!(
        argv.contains("/opt/rdmakit/bin/rdmakit fleet agent --listen 0.0.0.0:18516 --once"),
        "{argv}"
    );
    assert!(
        !argv.contains("slurm-step-token"),
        "the token is on srun's command line: {argv}"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("token")).unwrap(),
        "slurm-step-token-0123456789"
    );
    // It lingers: stop signals it after the grace.
    let t = Instant::now();
    let status = step.stop(Duration::from_millis(300));
    assert!(t.elapsed() < Duration::from_secs(5), "{status}");
    assert!(
        d.path().join("term").exists(),
        "srun was not sent SIGTERM ({status})"
    );
}

#[test]
fn a_failing_srun_is_reported_with_what_it_said() {
    let d = tempfile::tempdir().unwrap();
    let srun = fake(
        d.path(),
        "echo 'srun: error: Unable to allocate resources: Invalid partition name specified'; exit 1",
    );
    let Err(e) = launch(&cfg(srun)) else {
        panic!("a failing srun launched")
    };
    assert!(matches!(e, SlurmError::StepExited { ready: 0, .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("exit status: 1"), "{msg}");
    assert!(msg.contains("Invalid partition name"), "{msg}");
}

#[test]
fn a_step_that_comes_up_short_times_out_naming_the_count() {
    let d = tempfile::tempdir().unwrap();
    let srun = fake(
        d.path(),
        r#"echo '{"agent":"ready","name":"n1","addr":"10.0.0.1:18516","rank":0,"ntasks":2}'
echo 'garbage {"agent":'
while true; do sleep 0.1; done"#,
    );
    let mut c = cfg(srun);
    c.ready_timeout = Duration::from_millis(800);
    let Err(e) = launch(&c) else {
        panic!("launched with one of two agents")
    };
    let msg = e.to_string();
    assert!(msg.starts_with("1 of 2 agents ready"), "{msg}");
    assert!(msg.contains("garbage"), "{msg}");
}

#[test]
fn a_missing_srun_is_named() {
    let Err(e) = launch(&cfg("/nonexistent/srun".into())) else {
        panic!("launched nothing")
    };
    assert!(e.to_string().contains("/nonexistent/srun"), "{e}");
}
