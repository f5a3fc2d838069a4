//! Progress on stderr, only when it is a terminal: the one widget every command
//! that makes people wait draws with (collecting host facts and probing, perf's
//! run, a sweep's nodes, a pairwise run's rounds, loading a fleet's inputs). The
//! libraries report progress as events; this draws them. Shown only once `after`
//! has passed, so quick runs and pipes never see it.
//!
//! Unlike the pages, this reads the clock (the elapsed time it shows) and
//! writes to stderr: it is what a person watches while the data is made.

use std::io::IsTerminal as _;
use std::sync::mpsc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar or spinner on stderr (see the module's documentation);
/// dropping it clears it.
pub struct Progress {
    pb: Option<ProgressBar>,
    stop: Option<mpsc::Sender<()>>,
    waiter: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// A bar drawn with indicatif's `template`, `len` steps long (`None`: not
    /// known yet), shown on stderr after `after` when `wanted` and stderr is a
    /// terminal; otherwise nothing at all.
    pub fn new(template: &str, len: Option<u64>, after: Duration, wanted: bool) -> Progress {
        if !wanted || !std::io::stderr().is_terminal() {
            return Progress::hidden();
        }
        let pb = ProgressBar::with_draw_target(len, ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template(template) {
            pb.set_style(style.progress_chars("=> "));
        }
        let (tx, rx) = mpsc::channel::<()>();
        let shown = pb.clone();
        let waiter = std::thread::spawn(move || {
            if rx.recv_timeout(after) == Err(mpsc::RecvTimeoutError::Timeout) {
                shown.set_draw_target(ProgressDrawTarget::stderr());
                shown.enable_steady_tick(Duration::from_millis(120));
            }
        });
        Progress {
            pb: Some(pb),
            stop: Some(tx),
            waiter: Some(waiter),
        }
    }

    /// Nothing drawn: a place holder until the work's length is known.
    pub fn hidden() -> Progress {
        Progress {
            pb: None,
            stop: None,
            waiter: None,
        }
    }

    /// "⠋ collecting host facts (3s)", after a second: work of unknown length.
    pub fn spinner(msg: &str) -> Progress {
        let p = Progress::new(
            "{spinner} {msg} ({elapsed})",
            None,
            Duration::from_secs(1),
            true,
        );
        p.message(msg);
        p
    }

    /// Changes the message (the phase under way).
    pub fn message(&self, msg: impl Into<String>) {
        if let Some(pb) = &self.pb {
            pb.set_message(msg.into());
        }
    }

    /// Changes the prefix (a counter beside the message).
    pub fn prefix(&self, p: impl Into<String>) {
        if let Some(pb) = &self.pb {
            pb.set_prefix(p.into());
        }
    }

    /// Moves to step `n` of `len` (which `len` changes when given).
    pub fn position(&self, n: u64, len: Option<u64>) {
        if let Some(pb) = &self.pb {
            if let Some(l) = len {
                pb.set_length(l);
            }
            pb.set_position(n);
        }
    }
}

impl rdmakit_vocab::progress::Meter for Progress {
    fn message(&self, msg: String) {
        Progress::message(self, msg);
    }

    fn prefix(&self, prefix: String) {
        Progress::prefix(self, prefix);
    }

    fn position(&self, n: u64, len: Option<u64>) {
        Progress::position(self, n, len);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(w) = self.waiter.take() {
            let _ = w.join();
        }
        if let Some(pb) = &self.pb {
            pb.finish_and_clear();
        }
    }
}
