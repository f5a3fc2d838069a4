//! Asynchronous events (`ibv_get_async_event`): the device's queue of
//! them, the descriptor that is readable while one waits, and whether the
//! device is closing (every blocked waiter, here and on the completion
//! channels, then returns).

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use rdmakit_types::device::AsyncEvent;

use crate::errno::{Errno, Origin, Result};
use crate::lock;

use super::{drain_eventfd, err};

/// The async event queue.
#[derive(Debug)]
pub(super) struct AsyncEvents {
    queue: Mutex<VecDeque<AsyncEvent>>,
    cv: Condvar,
    /// Readable while an event is pending (`ibv_context.async_fd`).
    efd: OwnedFd,
    /// The device is being closed: blocked `get_cq_event` /
    /// `get_async_event` callers return.
    closing: AtomicBool,
}

impl AsyncEvents {
    /// An empty queue.
    ///
    /// # Errors
    /// When no eventfd can be had (as `ibv_open_device`).
    pub(super) fn new() -> Result<AsyncEvents> {
        let efd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .map_err(|e| {
            err(
                "ibv_open_device",
                Errno(e.raw_os_error()),
                Origin::Kernel,
                "eventfd for async events failed",
            )
        })?;
        Ok(AsyncEvents {
            queue: Mutex::new(VecDeque::new()),
            cv: Condvar::new(),
            efd,
            closing: AtomicBool::new(false),
        })
    }

    /// Queues an event.
    pub(super) fn raise(&self, e: AsyncEvent) {
        let mut q = lock(&self.queue);
        q.push_back(e);
        let _ = rustix::io::write(self.efd.as_fd(), &1u64.to_ne_bytes());
        drop(q);
        self.cv.notify_all();
    }

    /// The next event, waiting up to `timeout`; None at once when the
    /// device is closing.
    pub(super) fn next(&self, timeout: Duration) -> Option<AsyncEvent> {
        let deadline = std::time::Instant::now() + timeout;
        let mut q = lock(&self.queue);
        loop {
            if let Some(e) = q.pop_front() {
                if q.is_empty() {
                    drain_eventfd(self.efd.as_fd());
                }
                return Some(e);
            }
            if self.closing() {
                return None;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return None;
            }
            q = self
                .cv
                .wait_timeout(q, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The descriptor readable while an event is pending.
    pub(super) fn fd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }

    /// The device is closing: waiters return.
    pub(super) fn close(&self) {
        self.closing.store(true, Ordering::Release);
        let _q = lock(&self.queue);
        self.cv.notify_all();
    }

    /// Whether the device is closing.
    pub(super) fn closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }
}
