//! A deadline on reading a host: a read that blocks — a sysfs attribute of a driver
//! stuck in a firmware command (a task in D state), a FUSE file whose daemon never
//! answers — cannot be cancelled, so the work that reads runs on its own thread
//! ([`within`]) and the caller stops waiting when the deadline passes. [`Watched`]
//! wraps a [`Source`] and tells a [`Tracker`] which read is in progress, so the
//! caller can name the path the work hung in. The thread left behind ends with the
//! process.
//!
//! The node-health check (`rdmakit_doctor::health`) runs under it for
//! node-problem-detector and the Slurm health check, whose callers kill a check
//! that outlives their own timeout and then learn nothing.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::source::{Entry, Errno, Meta, Probe, Source};

/// What the watched work is reading now.
#[derive(Debug, Clone, Default)]
pub struct Tracker(Arc<Mutex<Option<String>>>);

impl Tracker {
    fn set(&self, what: Option<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = what;
    }

    /// The read in progress, if any.
    pub fn current(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A source that tells its [`Tracker`] which path it is reading.
pub struct Watched<'a> {
    inner: &'a dyn Source,
    tracker: Tracker,
}

impl<'a> Watched<'a> {
    pub fn new(inner: &'a dyn Source, tracker: Tracker) -> Watched<'a> {
        Watched { inner, tracker }
    }

    fn on<T>(&self, what: String, f: impl FnOnce() -> T) -> T {
        self.tracker.set(Some(what));
        let r = f();
        self.tracker.set(None);
        r
    }
}

impl Source for Watched<'_> {
    fn read(&self, path: &str) -> Result<Vec<u8>, Errno> {
        self.on(path.to_string(), || self.inner.read(path))
    }
    fn read_dir(&self, path: &str) -> Result<Vec<Entry>, Errno> {
        self.on(path.to_string(), || self.inner.read_dir(path))
    }
    fn read_link(&self, path: &str) -> Result<String, Errno> {
        self.on(path.to_string(), || self.inner.read_link(path))
    }
    fn stat(&self, path: &str) -> Result<Meta, Errno> {
        self.on(path.to_string(), || self.inner.stat(path))
    }
    fn probe(&self, probe: &Probe) -> Result<Vec<u8>, Errno> {
        self.on(format!("probe {}", probe.key()), || self.inner.probe(probe))
    }
}

/// The work did not finish in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hung {
    pub limit: Duration,
    /// The read it was blocked in, when it was in one.
    pub reading: Option<String>,
}

/// Runs `work` on its own thread and waits at most `limit` for it.
///
/// # Errors
/// [`Hung`] when `work` has not returned after `limit`; the thread is left behind
/// (it cannot be cancelled) and ends with the process.
pub fn within<T: Send + 'static>(
    limit: Duration,
    work: impl FnOnce(Tracker) -> T + Send + 'static,
) -> Result<T, Hung> {
    let tracker = Tracker::default();
    let t = tracker.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work(t));
    });
    rx.recv_timeout(limit).map_err(|_| Hung {
        limit,
        reading: tracker.current(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_work_returns_its_value() {
        assert_eq!(within(Duration::from_secs(5), |_| 7), Ok(7));
    }

    /// A source whose reads block until the test ends, as a sysfs read of a
    /// driver stuck in a firmware command does. (A FIFO no longer stands in for
    /// one: rdmakit refuses to open a FIFO in a host tree, issue 34.)
    struct Stuck(Mutex<mpsc::Receiver<()>>);

    impl Source for Stuck {
        fn read(&self, _: &str) -> Result<Vec<u8>, Errno> {
            let _ = self.0.lock().unwrap_or_else(|p| p.into_inner()).recv();
            Err(Errno::EIO)
        }
        fn read_dir(&self, _: &str) -> Result<Vec<Entry>, Errno> {
            Err(Errno::EIO)
        }
        fn read_link(&self, _: &str) -> Result<String, Errno> {
            Err(Errno::EIO)
        }
        fn stat(&self, _: &str) -> Result<Meta, Errno> {
            Err(Errno::EIO)
        }
        fn probe(&self, _: &Probe) -> Result<Vec<u8>, Errno> {
            Err(Errno::EIO)
        }
    }

    #[test]
    fn a_blocked_read_is_named() {
        let (release, blocked) = mpsc::channel::<()>();
        let src = Stuck(Mutex::new(blocked));
        let r = within(Duration::from_millis(300), move |t| {
            let w = Watched::new(&src, t);
            let _ = w.read("/sys/fw_ver");
        });
        assert_eq!(
            r,
            Err(Hung {
                limit: Duration::from_millis(300),
                reading: Some("/sys/fw_ver".into())
            })
        );
        // Unblock the thread so it does not outlive the test run needlessly.
        drop(release);
    }
}
