//! Completion channels: the channel table, and each channel's queue of
//! notified CQs with the descriptors an application polls or blocks on.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::errno::{Errno, Origin, Result};
use crate::lock;

use super::{drain_eventfd, err};

/// The completion-channel table.
#[derive(Debug)]
pub(super) struct Channels {
    map: Mutex<ChannelMap>,
}

#[derive(Debug)]
struct ChannelMap {
    channels: HashMap<u32, Arc<Channel>>,
    next: u32,
}

/// A completion channel.
#[derive(Debug)]
pub(super) struct Channel {
    id: u32,
    /// Notified CQs, oldest first.
    queue: Mutex<VecDeque<u32>>,
    cv: Condvar,
    /// Readable while a notification is pending (poll/epoll loops).
    efd: OwnedFd,
    /// What a blocked `ibv_get_cq_event` sleeps in, as the kernel's
    /// `read()` of the channel: a blocking semaphore eventfd, one count
    /// per event (many when the channel goes), so a signal interrupts the
    /// wait (EINTR) or restarts it (`SA_RESTART`) exactly as it would
    /// interrupt the kernel's.
    bell: OwnedFd,
    /// Destroyed (or its device closed): a waiter returns instead of
    /// waiting for an event that can no longer come.
    closed: AtomicBool,
}

impl Channels {
    /// An empty table.
    pub(super) fn new() -> Channels {
        Channels {
            map: Mutex::new(ChannelMap {
                channels: HashMap::new(),
                next: 1,
            }),
        }
    }

    /// `ibv_create_comp_channel`: returns its handle.
    pub(super) fn create(&self) -> Result<u32> {
        use rustix::event::EventfdFlags;
        let eventfd = |flags| {
            rustix::event::eventfd(0, EventfdFlags::CLOEXEC | flags).map_err(|e| {
                err(
                    "ibv_create_comp_channel",
                    Errno(e.raw_os_error()),
                    Origin::Kernel,
                    "eventfd failed",
                )
            })
        };
        let efd = eventfd(EventfdFlags::NONBLOCK)?;
        let bell = eventfd(EventfdFlags::SEMAPHORE)?;
        let mut m = lock(&self.map);
        let id = m.next;
        m.next += 1;
        m.channels.insert(
            id,
            Arc::new(Channel {
                id,
                queue: Mutex::new(VecDeque::new()),
                cv: Condvar::new(),
                efd,
                bell,
                closed: AtomicBool::new(false),
            }),
        );
        Ok(id)
    }

    /// `ibv_destroy_comp_channel` of a channel no CQ uses: a thread
    /// blocked on it returns. `EINVAL` for an unknown channel.
    pub(super) fn destroy(&self, ch: u32) -> Result<()> {
        let removed = lock(&self.map).channels.remove(&ch);
        match removed {
            Some(c) => {
                c.close();
                Ok(())
            }
            None => Err(err(
                "ibv_destroy_comp_channel",
                Errno::EINVAL,
                Origin::Kernel,
                "no such channel",
            )),
        }
    }

    /// A channel.
    pub(super) fn get(&self, ch: u32) -> Option<Arc<Channel>> {
        lock(&self.map).channels.get(&ch).cloned()
    }

    /// The channel's file descriptor: readable while an event is pending.
    pub(super) fn fd(&self, ch: u32) -> Option<RawFd> {
        lock(&self.map).channels.get(&ch).map(|c| c.efd.as_raw_fd())
    }

    /// `ibv_get_cq_event`: see [`super::Device::get_cq_event`]. `closing`
    /// says whether the device is being closed.
    pub(super) fn wait(
        &self,
        ch: u32,
        timeout: Option<Duration>,
        closing: impl Fn() -> bool,
    ) -> Result<u32> {
        const V: &str = "ibv_get_cq_event";
        let c = self
            .get(ch)
            .ok_or_else(|| err(V, Errno::EINVAL, Origin::Library, "no such channel"))?;
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut q = lock(&c.queue);
        loop {
            if let Some(cq) = q.pop_front() {
                if q.is_empty() {
                    drain_eventfd(c.efd.as_fd());
                }
                return Ok(cq);
            }
            // No verb blocks forever when its event can no longer come.
            if c.closed.load(Ordering::Acquire) || closing() {
                return Err(err(
                    V,
                    Errno::EIO,
                    Origin::Library,
                    "the completion channel was destroyed or its device closed while waiting",
                ));
            }
            match deadline {
                None => {
                    drop(q);
                    let mut b = [0u8; 8];
                    match rustix::io::read(c.bell.as_fd(), &mut b) {
                        Ok(_) => {}
                        Err(rustix::io::Errno::INTR) => {
                            return Err(err(
                                V,
                                Errno::EINTR,
                                Origin::Kernel,
                                "interrupted by a signal while waiting",
                            ))
                        }
                        Err(e) => {
                            return Err(err(
                                V,
                                Errno(e.raw_os_error()),
                                Origin::Kernel,
                                "waiting for a completion event failed",
                            ))
                        }
                    }
                    q = lock(&c.queue);
                }
                Some(d) => {
                    let now = std::time::Instant::now();
                    if now >= d {
                        return Err(err(
                            V,
                            Errno::ETIMEDOUT,
                            Origin::Library,
                            "no completion event",
                        ));
                    }
                    q =
                        c.cv.wait_timeout(q, d - now)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                }
            }
        }
    }

    /// Closes every channel (the device is closing): blocked waiters
    /// return.
    pub(super) fn close_all(&self) {
        for c in lock(&self.map).channels.values() {
            c.close();
        }
    }
}

impl Channel {
    /// The channel's handle.
    pub(super) fn id(&self) -> u32 {
        self.id
    }

    /// Queues a notification of CQ `cq` and wakes its waiters.
    pub(super) fn post(&self, cq: u32) {
        let mut q = lock(&self.queue);
        q.push_back(cq);
        let _ = rustix::io::write(self.efd.as_fd(), &1u64.to_ne_bytes());
        let _ = rustix::io::write(self.bell.as_fd(), &1u64.to_ne_bytes());
        drop(q);
        self.cv.notify_all();
    }

    /// No event can come any more (destroyed, or its device closing):
    /// every thread blocked on it returns.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _q = lock(&self.queue);
        self.cv.notify_all();
        // Enough counts that each blocked read returns at once.
        let _ = rustix::io::write(self.bell.as_fd(), &(1u64 << 32).to_ne_bytes());
    }
}
