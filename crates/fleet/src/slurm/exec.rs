//! Runs one Slurm client command (scontrol, sinfo) to completion within bounds:
//! a deadline (the command is killed when it passes), a cap on what it may print
//! (more is an error, not a bigger buffer), and — for the health check, which runs
//! as root — only a program that no one but root (or the caller) could have
//! replaced.
//!
//! slurmctld answers `scontrol show node` in milliseconds; a controller that does
//! not answer makes scontrol retry for `MessageTimeout` (10 s by default) per
//! attempt, and Slurm kills a HealthCheckProgram after 60 s. So the health check
//! gives each command a deadline well inside that budget and says which command
//! ran out of time, rather than being killed with nothing said.

use std::io::Read;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::SlurmError;

/// How much of a command's stderr is kept for its error message (the rest is read
/// and dropped, so the command never blocks on a full pipe).
pub const MAX_STDERR: usize = 16 << 10;

/// Bounds for one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The command is killed when it has not exited by then.
    pub timeout: Duration,
    /// More stdout than this is an error (the command is killed).
    pub max_stdout: usize,
}

/// What a command printed, once it exited with status 0.
#[derive(Debug)]
pub(crate) struct Ran {
    pub stdout: Vec<u8>,
}

/// Runs `cmd` (stdin, stdout and stderr are set here) within `limits`; `shown` names
/// it in errors.
///
/// # Errors
/// It could not start, did not exit in time (killed), printed more than
/// `max_stdout`, or exited with a status other than 0 (its stderr in the error).
pub(crate) fn run(mut cmd: Command, shown: &str, limits: Limits) -> Result<Ran, SlurmError> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| SlurmError::Spawn {
            cmd: shown.to_string(),
            err,
        })?;
    let mut out = child
        .stdout
        .take()
        .map(|s| std::thread::spawn(move || read_capped(s, limits.max_stdout)));
    let err = child
        .stderr
        .take()
        .map(|s| std::thread::spawn(move || read_capped(s, MAX_STDERR)));
    let too_large = || SlurmError::TooLarge {
        cmd: shown.to_string(),
        max: limits.max_stdout,
    };
    let timed_out = || SlurmError::TimedOut {
        cmd: shown.to_string(),
        secs: limits.timeout.as_secs_f64(),
    };
    let deadline = Instant::now() + limits.timeout;
    // stdout once its reader ended (at EOF, or at the cap: then the command is
    // killed at once rather than waited for).
    let mut stdout: Option<(Vec<u8>, bool)> = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => {
                kill(&mut child);
                return Err(SlurmError::Io {
                    what: format!("{shown}: waiting for it"),
                    source: e,
                });
            }
        }
        if out.as_ref().is_some_and(JoinHandle::is_finished) {
            stdout = join(out.take(), deadline);
            if stdout.as_ref().is_some_and(|(_, over)| *over) {
                kill(&mut child);
                return Err(too_large());
            }
        }
        if Instant::now() >= deadline {
            kill(&mut child);
            return Err(timed_out());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // The command exited; a grandchild holding its pipes open must not hold us:
    // the readers end at EOF or at their cap, or we stop waiting at the deadline.
    if out.is_some() {
        stdout = join(out, deadline);
    }
    let stderr = join(err, deadline);
    let Some((stdout, over)) = stdout else {
        return Err(timed_out());
    };
    if over {
        return Err(too_large());
    }
    if !status.success() {
        let stderr = stderr.map(|(b, _)| b).unwrap_or_default();
        return Err(SlurmError::Failed {
            cmd: shown.to_string(),
            status: status.to_string(),
            stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
        });
    }
    Ok(Ran { stdout })
}

/// Reads up to `max` bytes; past that, reads on and drops (so the writer never
/// blocks), and says it overflowed.
fn read_capped(mut r: impl Read, max: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut over = false;
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                if n > room {
                    over = true;
                    // stdout past its cap ends the command (the caller kills it);
                    // stderr past its cap is dropped while the command runs on.
                    if max != MAX_STDERR {
                        break;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    (kept, over)
}

fn join(h: Option<JoinHandle<(Vec<u8>, bool)>>, deadline: Instant) -> Option<(Vec<u8>, bool)> {
    let h = h?;
    while !h.is_finished() {
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    h.join().ok()
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The program `prog` as `path` (a PATH value) finds it: the first directory
/// holding an executable regular file of that name.
///
/// With `trusted`, that file and its directory must be owned by root (or by
/// `euid`) and writable by no one else: the health check runs it as root, and a
/// file or directory another user can write is that user's program.
///
/// # Errors
/// Not found on `path`, or (with `trusted`) found where others could replace it.
pub fn resolve(prog: &str, path: &str, trusted: bool, euid: u32) -> Result<PathBuf, SlurmError> {
    let found = path
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| Path::new(d).join(prog))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
        .ok_or_else(|| SlurmError::Spawn {
            cmd: prog.to_string(),
            err: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("not found in PATH={path}"),
            ),
        })?;
    if trusted {
        let dir = found.parent().unwrap_or(Path::new("/"));
        for p in [found.as_path(), dir] {
            if let Some(why) = replaceable_by_others(p, euid) {
                return Err(SlurmError::Untrusted {
                    cmd: prog.to_string(),
                    path: found.display().to_string(),
                    why: format!("{}: {why}", p.display()),
                });
            }
        }
    }
    Ok(found)
}

/// Why someone other than root or `euid` could replace `p` (None: no one can).
/// The file itself is checked as it is (its symlink followed, as exec does).
fn replaceable_by_others(p: &Path, euid: u32) -> Option<String> {
    let m = match std::fs::metadata(p) {
        Ok(m) => m,
        Err(e) => return Some(format!("cannot stat it: {e}")),
    };
    if m.uid() != 0 && m.uid() != euid {
        return Some(format!("owned by uid {}, not root", m.uid()));
    }
    let mode = m.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Some(format!("writable by group or others (mode {mode:04o})"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", script]);
        c
    }

    const LIMITS: Limits = Limits {
        timeout: Duration::from_secs(5),
        max_stdout: 1024,
    };

    #[test]
    fn output_and_failure_with_stderr() {
        let r = run(sh("echo hello"), "sh", LIMITS).unwrap();
        assert_eq!(r.stdout, b"hello\n");
        let e = run(sh("echo nope >&2; exit 3"), "scontrol show node n1", LIMITS).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("scontrol show node n1: exit status: 3: nope"),
            "{msg}"
        );
    }

    #[test]
    fn a_command_that_hangs_is_killed_at_the_deadline() {
        let t = Instant::now();
        let limits = Limits {
            timeout: Duration::from_millis(300),
            ..LIMITS
        };
        let e = run(sh("sleep 30"), "scontrol show node n1", limits).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(matches!(e, SlurmError::TimedOut { .. }), "{e}");
        assert!(e.to_string().contains("no answer within 0.3 s"), "{e}");
    }

    #[test]
    fn a_command_that_prints_without_end_is_cut_off() {
        let t = Instant::now();
        let e = run(sh("yes"), "scontrol show node n1", LIMITS).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(matches!(e, SlurmError::TooLarge { max: 1024, .. }), "{e}");
        // Exactly the cap is fine; one byte more is not.
        let exact = run(sh("head -c 1024 /dev/zero"), "x", LIMITS).unwrap();
        assert_eq!(exact.stdout.len(), 1024);
        let e = run(sh("head -c 1025 /dev/zero"), "x", LIMITS).unwrap_err();
        assert!(matches!(e, SlurmError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn endless_stderr_does_not_block_the_command() {
        let r = run(sh("head -c 1000000 /dev/zero >&2; echo done"), "x", LIMITS).unwrap();
        assert_eq!(r.stdout, b"done\n");
    }

    #[test]
    fn a_grandchild_holding_stdout_does_not_hold_us_past_the_deadline() {
        let limits = Limits {
            timeout: Duration::from_millis(500),
            ..LIMITS
        };
        let t = Instant::now();
        let e = run(sh("(sleep 30 &) ; echo hi"), "x", limits);
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(matches!(e, Err(SlurmError::TimedOut { .. })), "{e:?}");
    }

    #[test]
    fn resolve_refuses_a_program_others_could_replace() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let prog = bin.join("scontrol");
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("/nonexistent:relative:{}", bin.display());
        let me = rustix::process::geteuid().as_raw();
        assert_eq!(resolve("scontrol", &path, true, me).unwrap(), prog);

        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o757)).unwrap();
        let e = resolve("scontrol", &path, true, me).unwrap_err();
        assert!(
            e.to_string()
                .contains("writable by group or others (mode 0757)"),
            "{e}"
        );
        assert_eq!(resolve("scontrol", &path, false, me).unwrap(), prog);

        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = resolve("scontrol", &path, true, me).unwrap_err();
        assert!(e.to_string().contains("mode 1777"), "{e}");

        // Owned by someone else (checked against another uid than ours).
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        if me == 0 {
            std::os::unix::fs::chown(&prog, Some(65534), None).unwrap();
            let e = resolve("scontrol", &path, true, me).unwrap_err();
            assert!(e.to_string().contains("owned by uid 65534"), "{e}");
        } else {
            let e = resolve("scontrol", &path, true, me + 1).unwrap_err();
            assert!(e.to_string().contains(&format!("owned by uid {me}")), "{e}");
        }

        let e = resolve("scontrol", "/nonexistent", true, me).unwrap_err();
        assert!(
            e.to_string().contains("not found in PATH=/nonexistent"),
            "{e}"
        );
    }
}
