//! Runs Slurm's commands — sinfo, scontrol, srun — for the sweep and the health
//! check. The only module of [`crate::slurm`] that does I/O; what it reads goes to
//! the pure parsers next to it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::frame::TASK_SCRIPT;
use super::node::{parse_show_node, NodeState};
use super::step::{Next, Step, Stream};
use super::sweep::{Collector, End, NodeResult, Outcome};
use super::SlurmError;

/// How to run Slurm's commands: the environment they get on top of ours, and the
/// bounds on each (docs/slurm.md).
#[derive(Debug, Clone)]
pub struct Commands {
    /// Variables set for every command (PATH, SLURM_CONF for the health check).
    pub env: Vec<(String, String)>,
    /// Each sinfo / scontrol is killed after this long (srun has the sweep's own
    /// timeout).
    pub timeout: Duration,
    /// Run a command only from a file and directory that no one but root (or
    /// `euid`) can write, found on the `PATH` in [`Commands::env`] (the health
    /// check, which runs as root). Without it the commands are found as usual.
    pub trusted_only: Option<u32>,
}

impl Default for Commands {
    fn default() -> Commands {
        Commands {
            env: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            trusted_only: None,
        }
    }
}

impl Commands {
    /// The health check's: `env` for every command, each scontrol killed after
    /// [`HEALTH_CHECK_TIMEOUT`] (show, then update, fit in Slurm's 60 s with the
    /// doctor's deadline), and, when running as root, scontrol only from a file
    /// and directory only root can write.
    pub fn health_check(env: Vec<(String, String)>) -> Commands {
        let euid = rustix::process::geteuid().as_raw();
        Commands {
            env,
            timeout: HEALTH_CHECK_TIMEOUT,
            trusted_only: (euid == 0).then_some(euid),
        }
    }
}

/// How long each of the health check's scontrol calls may take.
pub const HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a sinfo / scontrol may take by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The most `scontrol show node -o NODE` may print: one node's line is about 1 KiB.
pub const MAX_ONE_NODE: usize = 256 << 10;

/// The most any other sinfo / scontrol answer may be (every node of a large
/// cluster: about 1 KiB per node).
pub const MAX_LISTING: usize = 64 << 20;

impl Commands {
    fn command(&self, prog: &str) -> Result<Command, SlurmError> {
        let program = match self.trusted_only {
            Some(euid) => {
                let path = self
                    .env
                    .iter()
                    .rev()
                    .find(|(k, _)| k == "PATH")
                    .map_or(super::env::SYSTEM_PATH, |(_, v)| v.as_str());
                super::exec::resolve(prog, path, true, euid)?
            }
            None => prog.into(),
        };
        let mut c = Command::new(program);
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c.stdin(Stdio::null());
        Ok(c)
    }

    /// Runs `prog args` to completion within [`Commands::timeout`], printing at most
    /// `max` bytes; its stdout on success.
    fn output(&self, prog: &str, args: &[&str], max: usize) -> Result<String, SlurmError> {
        let cmd = shown(prog, args);
        let mut c = self.command(prog)?;
        c.args(args);
        let limits = super::exec::Limits {
            timeout: self.timeout,
            max_stdout: max,
        };
        let ran = super::exec::run(c, &cmd, limits)?;
        Ok(String::from_utf8_lossy(&ran.stdout).into_owned())
    }

    /// `scontrol show node -o NAME`: one node's state and reason (one node, so
    /// slurmctld sends one line; `sinfo --json` would send every node's, and
    /// Slurm 22.05's `-n` does not narrow it).
    ///
    /// # Errors
    /// scontrol failed (unknown node, controller unreachable), timed out, printed
    /// garbage, or listed the node more than once.
    pub fn show_node(&self, name: &str) -> Result<NodeState, SlurmError> {
        let text = self.output("scontrol", &["show", "node", "-o", name], MAX_ONE_NODE)?;
        let mut found = parse_show_node(&text)?
            .into_iter()
            .filter(|n| n.name == name);
        let first = found
            .next()
            .ok_or_else(|| SlurmError::Input(format!("scontrol show node {name}: not listed")))?;
        if found.next().is_some() {
            return Err(SlurmError::Input(format!(
                "scontrol show node {name}: listed more than once; not acting on an \
                 ambiguous state"
            )));
        }
        Ok(first)
    }

    /// `scontrol show node -o`: every node.
    ///
    /// # Errors
    /// scontrol failed or printed garbage.
    pub fn show_nodes(&self) -> Result<Vec<NodeState>, SlurmError> {
        Ok(parse_show_node(&self.output(
            "scontrol",
            &["show", "node", "-o"],
            MAX_LISTING,
        )?)?)
    }

    /// `scontrol update NodeName=NODE State=DRAIN Reason=REASON`.
    ///
    /// # Errors
    /// scontrol refused (not authorized, unknown node) or could not run.
    pub fn drain(&self, node: &str, reason: &str) -> Result<(), SlurmError> {
        self.output(
            "scontrol",
            &[
                "update",
                &format!("NodeName={node}"),
                "State=DRAIN",
                &format!("Reason={reason}"),
            ],
            MAX_ONE_NODE,
        )
        .map(|_| ())
    }

    /// `scontrol update NodeName=NODE State=RESUME`.
    ///
    /// # Errors
    /// As [`Commands::drain`].
    pub fn resume(&self, node: &str) -> Result<(), SlurmError> {
        self.output(
            "scontrol",
            &["update", &format!("NodeName={node}"), "State=RESUME"],
            MAX_ONE_NODE,
        )
        .map(|_| ())
    }

    /// `scontrol show hostnames LIST`: `n[1-3],gpu7` → n1 n2 n3 gpu7.
    ///
    /// # Errors
    /// scontrol failed (a malformed list).
    pub fn hostnames(&self, list: &str) -> Result<Vec<String>, SlurmError> {
        Ok(dedup(
            self.output("scontrol", &["show", "hostnames", list], MAX_LISTING)?
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        ))
    }

    /// The nodes of `partition`, or of the default partition.
    ///
    /// # Errors
    /// sinfo failed, or there is no default partition.
    pub fn partition_nodes(&self, partition: Option<&str>) -> Result<Vec<String>, SlurmError> {
        let mut args = vec!["-h", "-N", "-o", "%N %P"];
        if let Some(p) = partition {
            args.extend(["-p", p]);
        }
        let text = self.output("sinfo", &args, MAX_LISTING)?;
        let names = text.lines().filter_map(|l| {
            let (node, part) = l.trim().split_once(' ')?;
            // sinfo marks the default partition with '*'.
            (partition.is_some() || part.ends_with('*')).then(|| node.to_string())
        });
        let names = dedup(names);
        if names.is_empty() {
            return Err(SlurmError::Input(match partition {
                Some(p) => format!("sinfo: partition {p:?} has no nodes"),
                None => "sinfo: no default partition (pass --partition or --nodelist)".into(),
            }));
        }
        Ok(names)
    }
}

fn dedup(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names.filter(|n| seen.insert(n.clone())).collect()
}

fn shown(prog: &str, args: &[&str]) -> String {
    let mut s = prog.to_string();
    for a in args {
        s.push(' ');
        if a.contains(' ') || a.is_empty() {
            s.push_str(&format!("{a:?}"));
        } else {
            s.push_str(a);
        }
    }
    s
}

/// What a sweep is asked to do.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    pub partition: Option<String>,
    /// A Slurm hostlist (`n[1-12]`, `gpu1,gpu7`).
    pub nodelist: Option<String>,
    /// The rdmakit program on the nodes (same path everywhere, or a name on PATH).
    pub rdmakit: String,
    /// Extra doctor arguments (after `doctor --frame`).
    pub doctor_args: Vec<String>,
    /// Also bring back each node's bundle.
    pub bundles: bool,
    pub timeout: Duration,
}

/// The doctor's arguments on every node: the user's, without active probes
/// unless they ask for them or against them (`--probe`, `--no-probe`).
pub fn doctor_args(user: &[String]) -> Vec<String> {
    let mut v = user.to_vec();
    if !v.iter().any(|d| d == "--probe" || d == "--no-probe") {
        v.insert(0, "--no-probe".into());
    }
    v
}

/// The nodes a sweep will run on, those it cannot, and the srun command.
#[derive(Debug, Clone)]
pub struct Plan {
    pub run: Vec<String>,
    /// Nodes Slurm cannot start a step on (down, drained, ...): missing, with why.
    pub unusable: Vec<NodeResult>,
    pub argv: Vec<String>,
}

/// Picks the nodes and builds the srun command.
///
/// # Errors
/// sinfo / scontrol failed, or no node was selected.
pub fn plan(cmds: &Commands, spec: &SweepSpec) -> Result<Plan, SlurmError> {
    let names = match &spec.nodelist {
        Some(l) => cmds.hostnames(l)?,
        None => cmds.partition_nodes(spec.partition.as_deref())?,
    };
    if names.is_empty() {
        return Err(SlurmError::Input("no nodes selected".into()));
    }
    let states = cmds.show_nodes()?;
    let mut run = Vec::new();
    let mut unusable = Vec::new();
    for n in &names {
        match states.iter().find(|s| &s.name == n) {
            None => unusable.push(NodeResult::missing(n, "slurm: no such node")),
            Some(s) => match s.unusable() {
                Some(why) => unusable.push(NodeResult::missing(n, why)),
                None => run.push(n.clone()),
            },
        }
    }
    let argv = srun_argv(spec, &run);
    Ok(Plan {
        run,
        unusable,
        argv,
    })
}

/// `srun ... sh -c TASK_SCRIPT sh RDMAKIT doctor --frame ...` for these nodes.
pub fn srun_argv(spec: &SweepSpec, nodes: &[String]) -> Vec<String> {
    let n = nodes.len();
    // Slurm's own limit, in minutes, a little past ours: Slurm cleans up if we die.
    let minutes = spec.timeout.as_secs().div_ceil(60) + 1;
    let mut v: Vec<String> = vec![
        "srun".into(),
        "--job-name=rdmakit-sweep".into(),
        format!("--nodes={n}"),
        format!("--ntasks={n}"),
        "--ntasks-per-node=1".into(),
        format!("--nodelist={}", nodes.join(",")),
    ];
    if let Some(p) = &spec.partition {
        v.push(format!("--partition={p}"));
    }
    v.extend([
        "--label".into(),
        "--kill-on-bad-exit=0".into(),
        "--no-kill".into(),
        "--chdir=/".into(),
        format!("--time={minutes}"),
        "/bin/sh".into(),
        "-c".into(),
        TASK_SCRIPT.into(),
        "rdmakit-sweep".into(),
        spec.rdmakit.clone(),
        "doctor".into(),
        "--frame".into(),
    ]);
    if spec.bundles {
        v.push("--frame-bundle".into());
    }
    v.extend(spec.doctor_args.iter().cloned());
    v
}

/// What the sweep saw while it ran (for a progress bar).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Reports complete so far, of `total`.
    Progress { reported: usize, total: usize },
    /// A message of srun's own ("job 12 queued and waiting for resources").
    Srun(String),
    /// The timeout fired; srun is being stopped.
    TimedOut,
    /// [`sweep`]: the plan is made; this many nodes will run.
    Planned(usize),
    /// [`sweep`]: srun is done; the report is being filed.
    Ran,
}

/// A finished sweep: every node's result (the unusable ones first, in plan order
/// otherwise) and everything srun printed.
#[derive(Debug)]
pub struct SweepRun {
    pub results: Vec<NodeResult>,
    pub argv: Vec<String>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub end: End,
    pub elapsed: Duration,
    /// When the last report arrived, from the start (None: no report).
    pub last_report: Option<Duration>,
}

impl SweepRun {
    /// The sweep's closing line: nodes reported, when, how it ended, and
    /// where its evidence is.
    pub fn summary(&self, dir: &Path) -> String {
        let total = self.results.len();
        let reported = self.results.iter().filter(|r| r.is_reported()).count();
        let last = self
            .last_report
            .map(|d| format!(", the last {:.1} s after srun started", d.as_secs_f64()))
            .unwrap_or_default();
        let end = match self.end {
            End::TimedOut(s) => format!("; stopped by the {s:.0} s timeout"),
            End::Exited(_) => String::new(),
        };
        format!(
            "Sweep: {reported} of {total} nodes reported in {:.1} s{last}{end}; evidence in {}",
            self.elapsed.as_secs_f64(),
            dir.display()
        )
    }
}

/// How long srun may take to stop its step after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Runs the plan's srun; reads its output as it comes; stops it (SIGTERM, then
/// SIGKILL after 10 s) when `timeout` passes.
///
/// # Errors
/// srun could not be started.
pub fn execute(
    cmds: &Commands,
    plan: Plan,
    timeout: Duration,
    on_event: &mut dyn FnMut(Event),
) -> Result<SweepRun, SlurmError> {
    let t0 = Instant::now();
    let mut results = plan.unusable;
    if plan.run.is_empty() {
        return Ok(SweepRun {
            results,
            argv: plan.argv,
            stdout: Vec::new(),
            stderr: Vec::new(),
            end: End::Exited(None),
            elapsed: t0.elapsed(),
            last_report: None,
        });
    }
    let mut srun = cmds.command(&plan.argv[0])?;
    srun.args(&plan.argv[1..]);
    let mut step = Step::spawn(srun, "srun", true)?;
    let total = plan.run.len();
    let mut c = Collector::new();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let deadline = t0 + timeout;
    let mut stop: Option<Instant> = None;
    let mut reported = 0;
    let mut last_report = None;
    on_event(Event::Progress { reported, total });
    loop {
        let now = Instant::now();
        let wait_until = match stop {
            None => deadline,
            Some(at) => at + STOP_GRACE,
        };
        if now >= wait_until {
            if stop.is_none() {
                on_event(Event::TimedOut);
                c.stop();
                step.terminate();
                stop = Some(now);
                continue;
            }
            // srun ignored SIGTERM for STOP_GRACE: kill it; the readers end.
            step.kill();
            stop = Some(now + Duration::from_secs(3600));
            continue;
        }
        let line = match step.next_line(wait_until) {
            Next::Line(l) => l,
            Next::Timeout => continue,
            Next::Closed => break,
        };
        let text = line.text();
        if line.stream == Stream::Stdout {
            out.extend_from_slice(&line.bytes);
            c.stdout_line(&text);
            if c.reports() != reported {
                reported = c.reports();
                last_report = Some(t0.elapsed());
                on_event(Event::Progress { reported, total });
            }
        } else {
            err.extend_from_slice(&line.bytes);
            let before = c.srun_messages().len();
            c.stderr_line(&text);
            if let Some(m) = c.srun_messages().get(before) {
                on_event(Event::Srun(m.clone()));
            }
        }
    }
    let status = step.wait().and_then(|s| s.code());
    let end = match stop {
        Some(_) => End::TimedOut(timeout.as_secs_f64()),
        None => End::Exited(status),
    };
    results.extend(c.finish(&plan.run, end));
    Ok(SweepRun {
        results,
        argv: plan.argv,
        stdout: out,
        stderr: err,
        end,
        elapsed: t0.elapsed(),
        last_report,
    })
}

/// Writes a sweep's evidence under `dir`: `srun.out` and `srun.err` (the raw lines),
/// `reports.jsonl` (one doctor report per line, for `rdmakit fleet report`),
/// `sweep.json` (every node's outcome, the command, the timing), and
/// `bundles/NODE.json.gz` with `--bundles`.
///
/// # Errors
/// A file could not be written (named in the error).
pub fn write_dir(dir: &Path, run: &SweepRun) -> Result<(), SlurmError> {
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |source| SlurmError::Io { what, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let put = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).map_err(io(&p))
    };
    put("srun.out", &run.stdout)?;
    put("srun.err", &run.stderr)?;
    let mut jsonl = String::new();
    for r in &run.results {
        if let Outcome::Reported { line, .. } = &r.outcome {
            jsonl.push_str(line);
            jsonl.push('\n');
        }
    }
    put("reports.jsonl", jsonl.as_bytes())?;
    put("sweep.json", summary_json(run).as_bytes())?;
    let with_bundles: Vec<_> = run
        .results
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Reported {
                bundle: Some(b), ..
            } => Some((r.node.as_str(), b)),
            _ => None,
        })
        .collect();
    if !with_bundles.is_empty() {
        let bdir = dir.join("bundles");
        std::fs::create_dir_all(&bdir).map_err(io(&bdir))?;
        for (node, json) in with_bundles {
            let p = bdir.join(format!("{}.json.gz", file_safe(node)));
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(json).map_err(io(&p))?;
            let bytes = gz.finish().map_err(io(&p))?;
            std::fs::write(&p, bytes).map_err(io(&p))?;
        }
    }
    Ok(())
}

/// `rdmakit fleet sweep` as the command line gives it.
#[derive(Debug, Clone)]
pub struct SweepRequest {
    /// `-p`: the partition (default: the default partition's nodes).
    pub partition: Option<String>,
    /// `-w`: the nodes, a Slurm hostlist.
    pub nodelist: Option<String>,
    /// `-o DIR`: where to keep the evidence (default:
    /// `./rdmakit-sweep-<unix time>`).
    pub output: Option<PathBuf>,
    /// `--bundles`: bring back each node's bundle too.
    pub bundles: bool,
    /// `--timeout`, seconds to wait for every report (at least 1).
    pub timeout: u64,
    /// `--rdmakit`: rdmakit's path on the nodes (default: the caller's own).
    pub rdmakit: Option<String>,
    /// The doctor's arguments for every node (after `--`).
    pub doctor_args: Vec<String>,
}

/// Why a sweep was not made.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// `--timeout 0`.
    #[error("--timeout must be at least 1 second")]
    Timeout,
    /// The caller's own path, the default `--rdmakit`, is unknown.
    #[error("finding this binary's path (pass --rdmakit PATH)")]
    Program(#[source] std::io::Error),
    /// `--baseline` or `--expect` could not be read.
    #[error("{0}")]
    Options(String),
    /// Slurm's commands failed, or the evidence could not be filed.
    #[error(transparent)]
    Slurm(#[from] SlurmError),
}

/// A sweep done and filed: the fleet report, its JSON as filed in
/// `fleet.json`, and the lines that say where the evidence is.
#[derive(Debug)]
pub struct Swept {
    /// Every node, reported or missing.
    pub report: crate::report::FleetReport,
    /// The report's JSON.
    pub json: String,
    /// What was swept and where it was filed ([`SweepRun::summary`]).
    pub summary: String,
}

/// Runs `req`: checks its flags, reads the report's options (`options`, the
/// caller's `--baseline` and `--expect`, before any sweep: a bad file should
/// not cost one), plans, runs srun with [`Commands::default`] telling `on`
/// how it goes, files the evidence under the output directory
/// ([`write_report`]). `program` is the caller's own path, the default
/// `--rdmakit`.
///
/// # Errors
/// [`SweepError`].
pub fn sweep(
    req: &SweepRequest,
    options: &dyn Fn() -> Result<crate::report::Options, String>,
    program: &dyn Fn() -> std::io::Result<PathBuf>,
    on: &mut dyn FnMut(Event),
) -> Result<Swept, SweepError> {
    if req.timeout == 0 {
        return Err(SweepError::Timeout);
    }
    let rdmakit = match &req.rdmakit {
        Some(p) => p.clone(),
        None => program()
            .map_err(SweepError::Program)?
            .display()
            .to_string(),
    };
    let spec = SweepSpec {
        partition: req.partition.clone(),
        nodelist: req.nodelist.clone(),
        rdmakit,
        doctor_args: doctor_args(&req.doctor_args),
        bundles: req.bundles,
        timeout: Duration::from_secs(req.timeout),
    };
    let opts = options().map_err(SweepError::Options)?;
    let cmds = Commands::default();
    let plan = plan(&cmds, &spec)?;
    let dir = req.output.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from(format!("rdmakit-sweep-{t}"))
    });
    on(Event::Planned(plan.run.len()));
    let swept = execute(&cmds, plan, spec.timeout, on)?;
    on(Event::Ran);
    let (report, json) = write_report(&dir, &swept, &opts)?;
    Ok(Swept {
        report,
        json,
        summary: swept.summary(&dir),
    })
}

/// Files a finished sweep under `dir` ([`write_dir`]) with its fleet report —
/// every node, reported or missing — as `fleet.json` (what `rdmakit fleet report
/// --baseline` reads next time). Returns the report and that JSON, rendered once.
///
/// # Errors
/// A file could not be written (named in the error).
pub fn write_report(
    dir: &Path,
    run: &SweepRun,
    opts: &crate::report::Options,
) -> Result<(crate::report::FleetReport, String), SlurmError> {
    let nodes = super::sweep::node_reports(&run.results);
    let report = crate::report::analyze(nodes, vec![], vec![], opts);
    write_dir(dir, run)?;
    let json = crate::render::json(&report);
    let p = dir.join("fleet.json");
    std::fs::write(&p, format!("{json}\n")).map_err(|source| SlurmError::Io {
        what: p.display().to_string(),
        source,
    })?;
    Ok((report, json))
}

fn file_safe(node: &str) -> String {
    node.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `sweep.json`: schema `rdmakit.sweep/v1`.
pub fn summary_json(run: &SweepRun) -> String {
    use serde_json::json;
    let nodes: Vec<_> = run
        .results
        .iter()
        .map(|r| match &r.outcome {
            Outcome::Reported { exit, bundle, .. } => json!({
                "name": r.node,
                "status": "reported",
                "exit": exit,
                "bundle": bundle.is_some(),
                "notes": r.notes,
            }),
            Outcome::Missing { reason } => json!({
                "name": r.node,
                "status": "missing",
                "reason": reason,
                "notes": r.notes,
            }),
        })
        .collect();
    let end = match run.end {
        End::Exited(code) => json!({"kind": "exited", "status": code}),
        End::TimedOut(s) => json!({"kind": "timed_out", "after_seconds": s}),
    };
    let v = json!({
        "schema": "rdmakit.sweep/v1",
        "command": run.argv,
        "elapsed_seconds": run.elapsed.as_secs_f64(),
        "last_report_seconds": run.last_report.map(|d| d.as_secs_f64()),
        "end": end,
        "nodes": nodes,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_run_no_probes_unless_asked() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            doctor_args(&v(&["--fail-on", "warning"])),
            v(&["--no-probe", "--fail-on", "warning"])
        );
        assert_eq!(doctor_args(&v(&["--probe"])), v(&["--probe"]));
        assert_eq!(doctor_args(&v(&["--no-probe"])), v(&["--no-probe"]));
    }

    #[test]
    fn the_summary_says_what_reported_when_and_how_it_ended() {
        let mut r = SweepRun {
            results: vec![],
            argv: vec![],
            stdout: vec![],
            stderr: vec![],
            end: End::TimedOut(30.0),
            elapsed: Duration::from_millis(30_120),
            last_report: Some(Duration::from_millis(2_340)),
        };
        assert_eq!(
            r.summary(Path::new("out")),
            "Sweep: 0 of 0 nodes reported in 30.1 s, the last 2.3 s after srun started; \
             stopped by the 30 s timeout; evidence in out"
        );
        (r.end, r.last_report) = (End::Exited(Some(0)), None);
        assert_eq!(
            r.summary(Path::new("d")),
            "Sweep: 0 of 0 nodes reported in 30.1 s; evidence in d"
        );
    }

    fn spec() -> SweepSpec {
        SweepSpec {
            partition: Some("gpu".into()),
            nodelist: None,
            rdmakit: "/usr/local/bin/rdmakit".into(),
            doctor_args: vec!["--no-probe".into()],
            bundles: true,
            timeout: Duration::from_secs(61),
        }
    }

    #[test]
    fn one_step_one_task_per_node_labelled() {
        let v = srun_argv(&spec(), &["n1".into(), "n2".into()]);
        let s = v.join(" ");
        for want in [
            "--nodes=2",
            "--ntasks=2",
            "--ntasks-per-node=1",
            "--nodelist=n1,n2",
            "--partition=gpu",
            "--label",
            "--kill-on-bad-exit=0",
            "--no-kill",
            "--time=3",
        ] {
            assert!(v.iter().any(|a| a == want), "{want} missing from {s}");
        }
        let tail: Vec<&str> = v
            .iter()
            .map(String::as_str)
            .skip_while(|a| *a != "/bin/sh")
            .collect();
        assert_eq!(
            tail,
            [
                "/bin/sh",
                "-c",
                TASK_SCRIPT,
                "rdmakit-sweep",
                "/usr/local/bin/rdmakit",
                "doctor",
                "--frame",
                "--frame-bundle",
                "--no-probe"
            ]
        );
    }

    #[test]
    fn the_task_script_runs_under_sh() {
        // What srun runs on each node, run here: names the node, runs the program,
        // reports its status, and passes arguments through untouched.
        let out = Command::new("/bin/sh")
            .args([
                "-c",
                TASK_SCRIPT,
                "rdmakit-sweep",
                "/bin/sh",
                "-c",
                "echo \"$1\"; exit 3",
                "x",
                "a b",
            ])
            .env("SLURMD_NODENAME", "n9")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "rdmakit-frame 1 task node=n9\na b\n\nrdmakit-frame 1 exit 3\n"
        );
    }

    #[test]
    fn shown_commands_quote_spaces() {
        assert_eq!(
            shown("scontrol", &["update", "Reason=a b"]),
            "scontrol update \"Reason=a b\""
        );
        assert_eq!(file_safe("n1/../x"), "n1_.._x");
    }
}
