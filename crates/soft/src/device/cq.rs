//! Completion channels, completion queues and asynchronous events of the
//! soft device.

use super::*;

impl Device {
    // ------------------------------------------------------------------ completion channel

    /// `ibv_create_comp_channel`: returns its handle.
    ///
    /// # Errors
    /// `EMFILE`-like failures of eventfd as `ENOMEM`.
    pub fn create_comp_channel(&self) -> Result<u32> {
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
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        let id = o.next_channel;
        o.next_channel += 1;
        lock(&self.sh.channels).insert(
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

    /// `ibv_destroy_comp_channel`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown channel, `EBUSY` while a CQ uses it.
    pub fn destroy_comp_channel(&self, ch: u32) -> Result<()> {
        let used = read(&self.sh.cqs)
            .values()
            .any(|c| c.channel.as_ref().is_some_and(|x| x.id == ch));
        if used {
            return Err(err(
                "ibv_destroy_comp_channel",
                Errno::EBUSY,
                Origin::Kernel,
                "a CQ uses the channel",
            ));
        }
        let removed = lock(&self.sh.channels).remove(&ch);
        if let Some(c) = &removed {
            // A thread blocked on it returns: no event can come any more.
            c.closed.store(true, Ordering::Release);
            let _q = lock(&c.queue);
            c.cv.notify_all();
            c.ring_all();
        }
        removed.map(|_| ()).ok_or_else(|| {
            err(
                "ibv_destroy_comp_channel",
                Errno::EINVAL,
                Origin::Kernel,
                "no such channel",
            )
        })
    }

    /// The channel's file descriptor: readable while an event is pending
    /// (for poll/epoll loops). Valid until the channel is destroyed.
    pub fn comp_channel_fd(&self, ch: u32) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        lock(&self.sh.channels).get(&ch).map(|c| c.efd.as_raw_fd())
    }

    /// `ibv_get_cq_event`: waits up to `timeout` (None = forever) for a CQ
    /// notification on channel `ch`; returns the CQ handle.
    ///
    /// # Errors
    /// `EINVAL` for an unknown channel; `ETIMEDOUT` (Origin::Library) when
    /// nothing arrived in time; `EIO` when the channel is destroyed or the
    /// device closed while waiting (the event can no longer come); `EINTR`
    /// when a signal whose handler lacks `SA_RESTART` arrives while it
    /// waits forever, as the kernel's `read()` of the channel (qperf ends
    /// its ping-pong on SIGALRM that way).
    pub fn get_cq_event(&self, ch: u32, timeout: Option<Duration>) -> Result<u32> {
        let c = lock(&self.sh.channels).get(&ch).cloned().ok_or_else(|| {
            err(
                "ibv_get_cq_event",
                Errno::EINVAL,
                Origin::Library,
                "no such channel",
            )
        })?;
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
            if c.closed.load(Ordering::Acquire) || self.sh.closing.load(Ordering::Acquire) {
                return Err(err(
                    "ibv_get_cq_event",
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
                                "ibv_get_cq_event",
                                Errno::EINTR,
                                Origin::Kernel,
                                "interrupted by a signal while waiting",
                            ))
                        }
                        Err(e) => {
                            return Err(err(
                                "ibv_get_cq_event",
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
                            "ibv_get_cq_event",
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

    // ------------------------------------------------------------------ CQ

    /// `ibv_create_cq` with room for `cqe` completions.
    ///
    /// # Errors
    /// `EINVAL` for `cqe` 0 or above `max_cqe`, an unknown channel, or when
    /// `max_cq` CQs exist.
    pub fn create_cq(&self, cqe: u32, channel: Option<u32>) -> Result<u32> {
        const V: &str = "ibv_create_cq";
        if cqe == 0 || cqe > self.sh.limits.max_cqe {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                format!("cqe {cqe} not in 1..={}", self.sh.limits.max_cqe),
            ));
        }
        let ch = match channel {
            None => None,
            Some(c) => Some(lock(&self.sh.channels).get(&c).cloned().ok_or_else(|| {
                err(
                    V,
                    Errno::EINVAL,
                    Origin::Kernel,
                    "no such completion channel",
                )
            })?),
        };
        let mut og = lock(&self.sh.objs);
        let o = &mut *og;
        let mut cqs = write(&self.sh.cqs);
        if cqs.len() >= self.sh.limits.max_cq as usize {
            return Err(self.sh.exhausted(V, "max_cq", self.sh.limits.max_cq));
        }
        let id = o.next_cq;
        o.next_cq = o.next_cq.wrapping_add(1).max(1);
        self.sh
            .register(V, Kind::Cq, id, "max_cq", self.sh.limits.max_cq)?;
        cqs.insert(
            id,
            Arc::new(CqShared {
                id,
                cap: AtomicUsize::new(cqe as usize),
                queue: Mutex::new(VecDeque::new()),
                ready: AtomicUsize::new(0),
                overrun: AtomicBool::new(false),
                armed: AtomicBool::new(false),
                channel: ch,
                users: AtomicUsize::new(0),
            }),
        );
        Ok(id)
    }

    /// `ibv_destroy_cq`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ, `EBUSY` while a QP uses it.
    pub fn destroy_cq(&self, cq: u32) -> Result<()> {
        let mut cqs = write(&self.sh.cqs);
        match cqs.get(&cq) {
            None => Err(err(
                "ibv_destroy_cq",
                Errno::EINVAL,
                Origin::Kernel,
                "no such CQ",
            )),
            Some(c) if c.users.load(Ordering::Acquire) > 0 => Err(err(
                "ibv_destroy_cq",
                Errno::EBUSY,
                Origin::Kernel,
                "QPs still use the CQ",
            )),
            Some(c) => {
                if c.armed.swap(false, Ordering::AcqRel) {
                    self.sh.armed_cqs.fetch_sub(1, Ordering::AcqRel);
                }
                cqs.remove(&cq);
                self.sh.unregister(Kind::Cq, cq);
                Ok(())
            }
        }
    }

    /// `ibv_resize_cq`: the CQ holds `cqe` entries from now on; returns the
    /// new size (as requested, as rxe).
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ, `cqe` 0 or above `max_cqe`, or fewer
    /// entries than the completions waiting in it (rxe's
    /// `rxe_cq_chk_attr`).
    pub fn resize_cq(&self, cq: u32, cqe: u32) -> Result<u32> {
        const V: &str = "ibv_resize_cq";
        let c = self
            .sh
            .cq(cq)
            .ok_or_else(|| err(V, Errno::EINVAL, Origin::Kernel, "no such CQ"))?;
        if cqe == 0 || cqe > self.sh.limits.max_cqe {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                format!("cqe {cqe} not in 1..={}", self.sh.limits.max_cqe),
            ));
        }
        let q = lock(&c.queue);
        if (cqe as usize) < q.len() {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Kernel,
                format!("cqe {cqe} < {} completions waiting in the CQ", q.len()),
            ));
        }
        c.cap.store(cqe as usize, Ordering::Relaxed);
        Ok(cqe)
    }

    /// `ibv_poll_cq`: moves up to `out.len()` completions into `out`.
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ.
    pub fn poll_cq(&self, cq: u32, out: &mut Vec<Wc>, max: usize) -> Result<usize> {
        // A read guard on the table, not a clone of the CQ's Arc per call;
        // nothing below writes the CQ table.
        let cqs = read(&self.sh.cqs);
        let c = cqs
            .get(&cq)
            .ok_or_else(|| err("ibv_poll_cq", Errno::EINVAL, Origin::Library, "no such CQ"))?;
        // The ready count, not the queue's lock, says whether it is empty:
        // a spinning poller takes no lock while nothing arrives.
        if c.ready.load(Ordering::Acquire) == 0 {
            if self.sh.busy_poll {
                // A counter, not a clock read per spin: the progress thread
                // notes when it last saw it move (see `progress_loop`).
                let n = self.sh.busy_polls.load(Ordering::Relaxed);
                self.sh
                    .busy_polls
                    .store(n.wrapping_add(1), Ordering::Release);
                self.sh.flush_held_acks();
                // Stop at the first datagram that completes here: the
                // application gets its completion without another
                // `recvfrom` (or the peer's ACK) in between.
                self.sh
                    .busy_poll_network(64, || c.ready.load(Ordering::Acquire) != 0);
            }
            if c.ready.load(Ordering::Acquire) == 0 {
                return Ok(0);
            }
        }
        let mut q = lock(&c.queue);
        let n = max.min(q.len());
        if n > 0 {
            out.extend(q.drain(..n));
            c.ready.store(q.len(), Ordering::Release);
        }
        Ok(n)
    }

    /// `ibv_req_notify_cq`: the next completion added to the CQ signals its
    /// channel once. (`solicited_only` is treated as "any completion": the
    /// engine does not report the solicited bit per completion.)
    ///
    /// # Errors
    /// `EINVAL` for an unknown CQ or a CQ without channel.
    pub fn req_notify_cq(&self, cq: u32, _solicited_only: bool) -> Result<()> {
        let c = self.sh.cq(cq).ok_or_else(|| {
            err(
                "ibv_req_notify_cq",
                Errno::EINVAL,
                Origin::Library,
                "no such CQ",
            )
        })?;
        if c.channel.is_none() {
            return Err(err(
                "ibv_req_notify_cq",
                Errno::EINVAL,
                Origin::Library,
                "CQ has no completion channel",
            ));
        }
        if !c.armed.swap(true, Ordering::AcqRel) {
            self.sh.armed_cqs.fetch_add(1, Ordering::AcqRel);
        }
        // The caller may block on the channel next: the progress thread
        // stops napping on the strength of earlier busy polls and receives
        // for it (a nap would add up to 8 ms to each completion).
        if let Some(t) = self.sh.progress.get() {
            t.unpark();
        }
        // Completions already queued count as "next" (N_NOTIFY_CQ semantics
        // are per arm; signalling now avoids a lost wake-up).
        if !lock(&c.queue).is_empty() {
            self.sh.notify(&c);
        }
        Ok(())
    }

    /// Whether the CQ overran (a completion was lost).
    pub fn cq_overrun(&self, cq: u32) -> bool {
        self.sh
            .cq(cq)
            .is_some_and(|c| c.overrun.load(Ordering::Acquire))
    }

    // ------------------------------------------------------------------ async events

    /// The file descriptor of the async event queue (`ibv_context.async_fd`):
    /// readable while an event is pending, for poll/epoll loops (UCX waits
    /// on it). Valid while the device is open.
    pub fn async_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.sh.events_efd.as_raw_fd()
    }

    /// `ibv_get_async_event`: waits up to `timeout` for the next event;
    /// None at once when the device is closing ([`Device::wake_waiters`]).
    pub fn get_async_event(&self, timeout: Duration) -> Option<AsyncEvent> {
        let deadline = std::time::Instant::now() + timeout;
        let mut q = lock(&self.sh.events);
        loop {
            if let Some(e) = q.pop_front() {
                if q.is_empty() {
                    drain_eventfd(self.sh.events_efd.as_fd());
                }
                return Some(e);
            }
            if self.sh.closing.load(Ordering::Acquire) {
                return None;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return None;
            }
            q = self
                .sh
                .events_cv
                .wait_timeout(q, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Channel {
    /// Wakes every thread blocked on the channel for good (it was
    /// destroyed or its device closed): enough counts that each read
    /// returns at once.
    pub(super) fn ring_all(&self) {
        let _ = rustix::io::write(self.bell.as_fd(), &(1u64 << 32).to_ne_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceConfig;

    /// The progress thread naps only while no CQ is armed: every arm is
    /// counted once, and a notification or the CQ's destruction un-counts it.
    #[test]
    fn armed_cqs_count_what_may_block_on_a_channel() {
        let d = Device::open(DeviceConfig {
            shared_registry: false,
            ..DeviceConfig::default()
        })
        .unwrap();
        let armed = || d.sh.armed_cqs.load(Ordering::Acquire);
        let ch = d.create_comp_channel().unwrap();
        let a = d.create_cq(16, Some(ch)).unwrap();
        let b = d.create_cq(16, Some(ch)).unwrap();
        assert_eq!(armed(), 0);
        d.req_notify_cq(a, false).unwrap();
        d.req_notify_cq(a, false).unwrap();
        assert_eq!(armed(), 1, "arming an armed CQ again counts once");
        d.req_notify_cq(b, false).unwrap();
        assert_eq!(armed(), 2);
        let c = d.sh.cq(a).unwrap();
        d.sh.notify(&c);
        assert_eq!(armed(), 1, "a notification disarms");
        drop(c);
        d.destroy_cq(b).unwrap();
        assert_eq!(armed(), 0, "destroying an armed CQ disarms it");
        d.destroy_cq(a).unwrap();
    }
}
