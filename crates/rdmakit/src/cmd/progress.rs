//! A spinner on stderr for work of unknown length (collecting host facts, the
//! doctor's probes): only on a terminal, and only once the work has lasted a
//! second, so quick runs and pipes never see it.

use std::io::IsTerminal as _;
use std::sync::mpsc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Spinner {
    pb: Option<ProgressBar>,
    stop: Option<mpsc::Sender<()>>,
    waiter: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    /// Starts a spinner with `msg`; it shows after one second when stderr is a terminal.
    pub fn start(msg: &str) -> Spinner {
        if !std::io::stderr().is_terminal() {
            return Spinner {
                pb: None,
                stop: None,
                waiter: None,
            };
        }
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            pb.set_style(style);
        }
        pb.set_message(msg.to_string());
        let (tx, rx) = mpsc::channel::<()>();
        let shown = pb.clone();
        let waiter = std::thread::spawn(move || {
            if rx.recv_timeout(Duration::from_secs(1)) == Err(mpsc::RecvTimeoutError::Timeout) {
                shown.set_draw_target(ProgressDrawTarget::stderr());
                shown.enable_steady_tick(Duration::from_millis(120));
            }
        });
        Spinner {
            pb: Some(pb),
            stop: Some(tx),
            waiter: Some(waiter),
        }
    }

    /// Changes the message (the phase under way).
    pub fn set_message(&self, msg: &str) {
        if let Some(pb) = &self.pb {
            pb.set_message(msg.to_string());
        }
    }
}

impl Drop for Spinner {
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
