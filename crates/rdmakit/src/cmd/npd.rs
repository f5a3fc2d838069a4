//! `rdmakit doctor --npd`: the node-problem-detector custom plugin. The check runs on
//! a worker thread under a deadline; the verdict and the state file's format are
//! rdmakit_doctor::npd's (docs/npd.md).

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdmakit_doctor::checks::Config;
use rdmakit_doctor::codes::Severity;
use rdmakit_doctor::npd::{self, State, Verdict};
use rdmakit_doctor::report::Report;
use rdmakit_host::bounded::{read_tree_file, Cap};
use rdmakit_host::collect::collect;

use super::SourceArgs;

const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

pub fn run(
    source: &SourceArgs,
    cfg: &Config,
    fail_on: Option<Severity>,
    state_path: &str,
    deadline: f64,
) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        deadline.is_finite() && deadline > 0.0,
        "--npd-deadline {deadline}: must be a positive number of seconds"
    );
    let boot_id = std::fs::read_to_string(BOOT_ID)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-boot".to_string());
    let now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    // Its own state file, at a path given on the command line: a regular file
    // only (never a wait on a FIFO: the plugin must answer in time), at most 1 MiB.
    let last = read_tree_file(std::path::Path::new(state_path), Cap::STATE.bytes)
        .ok()
        .and_then(|b| State::parse(&String::from_utf8_lossy(&b)));

    let (tx, rx) = mpsc::channel();
    let source = source.clone();
    let cfg = cfg.clone();
    // The worker may stay blocked in a read of a wedged device: it is not joined,
    // the process exits without it.
    std::thread::spawn(move || {
        let r = source.open().map(|(opened, opts)| {
            let facts = collect(opened.source(), &opts);
            let tool = format!("rdmakit {}", env!("CARGO_PKG_VERSION"));
            Report::build(&facts, &cfg, &tool, opened.label())
        });
        let _ = tx.send(r);
    });
    let verdict = match rx.recv_timeout(Duration::from_secs_f64(deadline)) {
        Ok(Ok(report)) => {
            let v = npd::verdict(&report, fail_on);
            if let Err(e) = State::of(&v, &boot_id, now()).save(state_path) {
                // NPD logs stderr; the verdict stands.
                eprintln!("rdmakit: --npd-state {state_path}: {e}");
            }
            v
        }
        Ok(Err(e)) => npd::unknown(
            &format!("cannot read the host: {e:#}"),
            last.as_ref(),
            &boot_id,
            now(),
        ),
        Err(_) => npd::unknown(
            &format!("check not done in {deadline}s"),
            last.as_ref(),
            &boot_id,
            now(),
        ),
    };
    let mut out = std::io::stdout();
    writeln!(out, "{}", verdict.line())?;
    out.flush()?;
    if matches!(verdict, Verdict::Unknown(_)) {
        // Do not wait for a worker that may never return.
        std::process::exit(2);
    }
    Ok(ExitCode::from(verdict.exit_code()))
}
