//! The agents as one Slurm job step: `srun --ntasks-per-node=1 rdmakit
//! fleet agent --once ...` started by the coordinator (rank 0 of the
//! allocation, or the submitting host), with the run's token in the step's
//! environment — never on a command line. Each agent prints one READY line
//! (JSON) on stdout once it listens; srun's own output carries it back, so
//! no shared file system is needed. When the coordinator is done it closes
//! its connections (each `--once` agent exits), then waits for srun, and
//! signals it if the step lingers. The step is run by [`crate::slurm::step`],
//! as the sweep's is.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::auth::Token;
use crate::slurm::step::{Next, Step};
use crate::slurm::SlurmError;

/// The environment variable that carries the token.
pub const TOKEN_ENV: &str = "RDMAKIT_FLEET_TOKEN";

/// What an agent prints on stdout once it listens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    /// Always `"ready"`.
    pub agent: String,
    /// Its name.
    pub name: String,
    /// The address coordinators reach it at.
    pub addr: SocketAddr,
    /// `SLURM_PROCID`, under Slurm.
    pub rank: Option<u32>,
    /// `SLURM_NTASKS`, under Slurm: how many READY lines to expect.
    pub ntasks: Option<u32>,
}

impl Ready {
    /// The READY line of agent `name` reachable at `addr`, with its Slurm rank
    /// and task count from `env` (`SLURM_PROCID`, `SLURM_NTASKS`; the caller
    /// reads the environment).
    pub fn new(name: &str, addr: SocketAddr, env: &dyn Fn(&str) -> Option<String>) -> Ready {
        let number = |k: &str| env(k).and_then(|v| v.parse().ok());
        Ready {
            agent: "ready".into(),
            name: name.to_string(),
            addr,
            rank: number("SLURM_PROCID"),
            ntasks: number("SLURM_NTASKS"),
        }
    }

    /// The line an agent prints.
    pub fn line(&self) -> String {
        // A plain struct: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| unreachable!("READY line: {e}"))
    }

    /// Parses a READY line (None for any other output).
    pub fn parse(line: &str) -> Option<Ready> {
        let r: Ready = serde_json::from_str(line.trim()).ok()?;
        (r.agent == "ready").then_some(r)
    }
}

/// How to start the step.
#[derive(Clone, Debug)]
pub struct SlurmConfig {
    /// The srun program.
    pub srun: PathBuf,
    /// The rdmakit binary the nodes run (the same path on every node).
    pub program: PathBuf,
    /// `-N`: how many nodes (None: the allocation's).
    pub nodes: Option<u32>,
    /// `-p`.
    pub partition: Option<String>,
    /// `-w`.
    pub nodelist: Option<String>,
    /// The agents' TCP port.
    pub port: u16,
    /// More agent arguments (`-d DEV`, `--max-test-seconds S`).
    pub agent_args: Vec<String>,
    /// The agents exit after this long without a request.
    pub idle_timeout: Duration,
    /// How long to wait for every READY line.
    pub ready_timeout: Duration,
}

impl SlurmConfig {
    /// Defaults: `srun` from PATH, agents on port 18516.
    pub fn new(program: PathBuf) -> SlurmConfig {
        SlurmConfig {
            srun: "srun".into(),
            program,
            nodes: None,
            partition: None,
            nodelist: None,
            port: 18516,
            agent_args: Vec::new(),
            idle_timeout: Duration::from_secs(300),
            ready_timeout: Duration::from_secs(60),
        }
    }

    /// srun's arguments (the token is not among them).
    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            "--ntasks-per-node=1".to_string(),
            "--unbuffered".into(),
            "--job-name=rdmakit-pairwise".into(),
        ];
        if let Some(n) = self.nodes {
            a.push(format!("--nodes={n}"));
        }
        if let Some(p) = &self.partition {
            a.push(format!("--partition={p}"));
        }
        if let Some(w) = &self.nodelist {
            a.push(format!("--nodelist={w}"));
        }
        a.push(self.program.to_string_lossy().into_owned());
        a.extend(
            [
                "fleet",
                "agent",
                "--listen",
                &format!("0.0.0.0:{}", self.port),
                "--once",
                "--announce",
                "--idle-timeout",
                &self.idle_timeout.as_secs().max(1).to_string(),
            ]
            .map(String::from),
        );
        a.extend(self.agent_args.iter().cloned());
        a
    }
}

/// A running step of agents. Dropping it stops the step.
pub struct AgentStep {
    step: Step,
    /// The agents, by rank when known.
    pub agents: Vec<Ready>,
}

impl AgentStep {
    /// Starts the step and waits for every agent's READY line.
    ///
    /// # Errors
    /// srun could not start ([`SlurmError::Spawn`]), ended before every agent
    /// was ready ([`SlurmError::StepExited`]), or not every agent was ready in
    /// time ([`SlurmError::StepNotReady`]).
    pub fn launch(cfg: &SlurmConfig, token: &Token) -> Result<AgentStep, SlurmError> {
        let mut srun = Command::new(&cfg.srun);
        srun.args(cfg.args()).env(TOKEN_ENV, token.to_env_value());
        let step = Step::spawn(srun, &cfg.srun.display().to_string(), false)?;
        let mut step = AgentStep {
            step,
            agents: Vec::new(),
        };
        let mut other = Vec::new();
        let start = Instant::now();
        let mut expected: Option<usize> = cfg.nodes.map(|n| n as usize);
        loop {
            if expected.is_some_and(|e| step.agents.len() >= e) {
                break;
            }
            match step
                .step
                .next_line(Instant::now() + Duration::from_millis(100))
            {
                Next::Line(line) => {
                    let line = line.text();
                    match Ready::parse(&line) {
                        Some(r) => {
                            if expected.is_none() {
                                expected = r.ntasks.map(|n| n as usize);
                            }
                            if !step.agents.iter().any(|a| a.addr == r.addr) {
                                step.agents.push(r);
                            }
                        }
                        None => other.push(line),
                    }
                }
                Next::Timeout => {}
                Next::Closed => {
                    // stdout closed: srun is gone (or going).
                    let status = step.step.stop(Duration::from_secs(2), KILL_AFTER);
                    return Err(SlurmError::StepExited {
                        status,
                        ready: step.agents.len(),
                        output: other,
                    });
                }
            }
            if let Some(st) = step.step.try_wait() {
                // Drain what it printed before it went.
                while let Next::Line(line) = step
                    .step
                    .next_line(Instant::now() + Duration::from_millis(50))
                {
                    let line = line.text();
                    if let Some(r) = Ready::parse(&line) {
                        step.agents.push(r);
                    } else {
                        other.push(line);
                    }
                }
                return Err(SlurmError::StepExited {
                    status: st.to_string(),
                    ready: step.agents.len(),
                    output: other,
                });
            }
            if start.elapsed() > cfg.ready_timeout {
                return Err(SlurmError::StepNotReady {
                    ready: step.agents.len(),
                    expected: expected.map_or("?".into(), |e| e.to_string()),
                    secs: cfg.ready_timeout.as_secs_f64(),
                    output: other,
                });
            }
        }
        step.agents.sort_by_key(|a| (a.rank, a.name.clone()));
        Ok(step)
    }

    /// Waits up to `grace` for srun to end; then SIGTERM (srun passes it
    /// to the tasks), 5 s more, then SIGKILL. Returns its exit status.
    pub fn stop(&mut self, grace: Duration) -> String {
        self.step.stop(grace, KILL_AFTER)
    }
}

/// How long the step has after SIGTERM before SIGKILL.
const KILL_AFTER: Duration = Duration::from_secs(5);

impl Drop for AgentStep {
    fn drop(&mut self) {
        let _ = self.stop(Duration::from_secs(3));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_lines_round_trip_and_noise_is_not_ready() {
        let r = Ready {
            agent: "ready".into(),
            name: "n3".into(),
            addr: "10.250.0.13:18516".parse().unwrap(),
            rank: Some(2),
            ntasks: Some(8),
        };
        assert_eq!(Ready::parse(&r.line()), Some(r));
        assert_eq!(Ready::parse("srun: job 12 queued"), None);
        assert_eq!(
            Ready::parse(
                r#"{"agent":"gone","name":"x","addr":"1.2.3.4:5","rank":null,"ntasks":null}"#
            ),
            None
        );
    }

    #[test]
    fn srun_arguments_hold_no_secret() {
        let mut c = SlurmConfig::new("/opt/rdmakit".into());
        c.nodes = Some(8);
        c.partition = Some("gpu".into());
        c.agent_args = vec!["-d".into(), "mlx5_0".into()];
        let a = c.args();
        assert_eq!(a[0], "--ntasks-per-node=1");
        assert!(a.contains(&"--nodes=8".to_string()));
        assert!(a.contains(&"--partition=gpu".to_string()));
        let prog = a.iter().position(|x| x == "/opt/rdmakit").unwrap();
        assert_eq!(
            &a[prog + 1..prog + 5],
            ["fleet", "agent", "--listen", "0.0.0.0:18516"]
        );
        assert!(a.contains(&"--once".to_string()));
        assert!(a.ends_with(&["-d".to_string(), "mlx5_0".to_string()]));
        assert!(!a.iter().any(|x| x.to_lowercase().contains("token")));
    }
}
