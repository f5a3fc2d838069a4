//! One srun job step, started and read line by line: the sweep's doctors
//! ([`super::run::execute`]) and the pairwise agents
//! ([`crate::pairwise::slurm::AgentStep`]) are both an srun whose output is the
//! transport. Lines arrive as they are printed, each cut at [`MAX_LINE`] (srun
//! relays at most 1024 bytes a message, on a line of its own, so a longer "line"
//! is never held whole); stopping is SIGTERM (srun passes it to the tasks), then
//! SIGKILL when srun ignores it.

use std::io::{BufRead as _, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::SlurmError;

/// Longest line read from srun at once (its own lines are under 1.1 KB).
pub const MAX_LINE: u64 = 1 << 20;

/// Which of srun's outputs a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One line as srun printed it, its newline included (a line cut at
/// [`MAX_LINE`] has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub stream: Stream,
    pub bytes: Vec<u8>,
}

impl Line {
    /// The line as text, without its line ending (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes)
            .trim_end_matches(['\n', '\r'])
            .to_string()
    }
}

/// What waiting for a line gave.
#[derive(Debug)]
pub enum Next {
    Line(Line),
    /// Nothing by the deadline.
    Timeout,
    /// Every output srun had is closed: it has ended (or is ending).
    Closed,
}

/// A running srun and the threads reading its output.
pub struct Step {
    child: Option<Child>,
    lines: mpsc::Receiver<Line>,
    readers: Vec<JoinHandle<()>>,
}

impl Step {
    /// Starts `cmd` (its program named `shown` in errors) with stdin from
    /// /dev/null and stdout read here; stderr is read too with `read_stderr`,
    /// else left to ours.
    ///
    /// # Errors
    /// srun could not be started ([`SlurmError::Spawn`]).
    pub fn spawn(mut cmd: Command, shown: &str, read_stderr: bool) -> Result<Step, SlurmError> {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped());
        cmd.stderr(if read_stderr {
            Stdio::piped()
        } else {
            Stdio::inherit()
        });
        let mut child = cmd.spawn().map_err(|err| SlurmError::Spawn {
            cmd: shown.to_string(),
            err,
        })?;
        let (tx, lines) = mpsc::channel();
        let readers = [
            child
                .stdout
                .take()
                .map(|s| reader(s, Stream::Stdout, tx.clone())),
            child
                .stderr
                .take()
                .map(|s| reader(s, Stream::Stderr, tx.clone())),
        ]
        .into_iter()
        .flatten()
        .collect();
        Ok(Step {
            child: Some(child),
            lines,
            readers,
        })
    }

    /// The next line, waiting until `deadline` at the most.
    pub fn next_line(&self, deadline: Instant) -> Next {
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(wait) {
            Ok(l) => Next::Line(l),
            Err(mpsc::RecvTimeoutError::Timeout) => Next::Timeout,
            Err(mpsc::RecvTimeoutError::Disconnected) => Next::Closed,
        }
    }

    /// srun's exit status if it has exited (and is reaped: later calls say
    /// None).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        let st = self.child.as_mut()?.try_wait().ok()??;
        self.child = None;
        Some(st)
    }

    /// Sends SIGTERM: srun passes it to the step's tasks and ends.
    pub fn terminate(&self) {
        if let Some(c) = &self.child {
            if let Some(pid) = rustix::process::Pid::from_raw(c.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::Term);
            }
        }
    }

    /// Sends SIGKILL.
    pub fn kill(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
        }
    }

    /// Waits for srun and its readers (for once every output is closed).
    pub fn wait(&mut self) -> Option<ExitStatus> {
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        self.child.take()?.wait().ok()
    }

    /// Waits up to `grace` for srun to end by itself; then SIGTERM, `kill_after`
    /// more, then SIGKILL. Returns how it ended, for a person.
    pub fn stop(&mut self, grace: Duration, kill_after: Duration) -> String {
        let Some(mut c) = self.child.take() else {
            return "already reaped".into();
        };
        let t = Instant::now();
        let mut signalled = false;
        loop {
            match c.try_wait() {
                Ok(Some(st)) => return st.to_string(),
                Ok(None) => {}
                Err(e) => return format!("wait: {e}"),
            }
            if !signalled && t.elapsed() > grace {
                if let Some(pid) = rustix::process::Pid::from_raw(c.id() as i32) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::Term);
                }
                signalled = true;
            }
            if t.elapsed() > grace + kill_after {
                let _ = c.kill();
                return match c.wait() {
                    Ok(st) => format!("{st} (killed)"),
                    Err(e) => format!("wait: {e}"),
                };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn reader(s: impl Read + Send + 'static, stream: Stream, tx: mpsc::Sender<Line>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = BufReader::new(s);
        loop {
            let mut bytes = Vec::new();
            match (&mut r).take(MAX_LINE).read_until(b'\n', &mut bytes) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx.send(Line { stream, bytes }).is_err() {
                        break;
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn lines_from_both_outputs_then_closed() {
        let mut s = Step::spawn(sh("echo out; echo err >&2; printf 'no end'"), "sh", true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        while let Next::Line(l) = s.next_line(deadline) {
            got.push((l.stream, l.text()));
        }
        got.sort_by_key(|(s, _)| *s == Stream::Stderr);
        assert_eq!(
            got,
            [
                (Stream::Stdout, "out".to_string()),
                (Stream::Stdout, "no end".to_string()),
                (Stream::Stderr, "err".to_string()),
            ]
        );
        assert!(s.wait().is_some_and(|st| st.success()));
    }

    #[test]
    fn a_line_without_end_is_cut() {
        let s = Step::spawn(sh("head -c 1200000 /dev/zero"), "sh", false).unwrap();
        let Next::Line(l) = s.next_line(Instant::now() + Duration::from_secs(10)) else {
            panic!("no line")
        };
        assert_eq!(l.bytes.len() as u64, MAX_LINE);
    }

    #[test]
    fn stop_terminates_a_step_that_lingers() {
        let mut s = Step::spawn(sh("sleep 30"), "sh", false).unwrap();
        let t = Instant::now();
        let how = s.stop(Duration::from_millis(100), Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(5), "{how}");
        assert!(how.contains("signal: 15"), "{how}");
        assert_eq!(s.stop(Duration::ZERO, Duration::ZERO), "already reaped");
    }

    #[test]
    fn a_missing_program_is_named() {
        let Err(e) = Step::spawn(
            Command::new("/nonexistent/srun"),
            "/nonexistent/srun",
            false,
        ) else {
            panic!("spawned nothing")
        };
        assert!(
            e.to_string()
                .starts_with("/nonexistent/srun: cannot run it"),
            "{e}"
        );
    }
}
