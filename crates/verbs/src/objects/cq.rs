//! Completion queues and completion channels.

use super::*;

/// A completion channel: blocking waits, and a file descriptor for poll/epoll.
#[derive(Debug)]
pub struct CompChannel {
    pub(super) ctx: Arc<Context>,
    pub(super) handle: u32,
}

impl Drop for CompChannel {
    fn drop(&mut self) {
        let _ = self.ctx.ops.destroy_comp_channel(self.handle);
    }
}

impl CompChannel {
    /// `ibv_get_cq_event`: waits for a notification; returns the CQ handle.
    ///
    /// # Errors
    /// `ETIMEDOUT` (library layer) when `timeout` passed without an event.
    pub fn get_cq_event(&self, timeout: Option<Duration>) -> Result<u32> {
        self.ctx.ops.get_cq_event(self.handle, timeout)
    }
}

impl AsRawFd for CompChannel {
    /// Readable while a CQ event is pending; -1 if the provider has none.
    fn as_raw_fd(&self) -> RawFd {
        self.ctx.ops.comp_channel_fd(self.handle).unwrap_or(-1)
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct Cq {
    pub(super) ctx: Arc<Context>,
    pub(super) handle: u32,
    pub(super) _channel: Option<Arc<CompChannel>>,
}

impl Drop for Cq {
    fn drop(&mut self) {
        let _ = self.ctx.ops.destroy_cq(self.handle);
    }
}

impl Cq {
    /// The provider handle (what [`CompChannel::get_cq_event`] returns).
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// `ibv_poll_cq`: up to `max` completions.
    ///
    /// # Errors
    /// Provider errors.
    pub fn poll(&self, max: usize) -> Result<Vec<Wc>> {
        let mut v = Vec::new();
        self.ctx.ops.poll_cq(self.handle, &mut v, max)?;
        Ok(v)
    }

    /// `ibv_poll_cq` appending to `out`; returns how many were added.
    ///
    /// # Errors
    /// Provider errors.
    pub fn poll_into(&self, out: &mut Vec<Wc>, max: usize) -> Result<usize> {
        self.ctx.ops.poll_cq(self.handle, out, max)
    }

    /// Busy-polls until `n` completions arrived or `timeout` passed.
    ///
    /// # Errors
    /// `ETIMEDOUT` (library layer) with fewer than `n` completions.
    pub fn wait(&self, n: usize, timeout: Duration) -> Result<Vec<Wc>> {
        let start = Instant::now();
        let mut v = Vec::with_capacity(n);
        loop {
            let want = n - v.len();
            self.ctx.ops.poll_cq(self.handle, &mut v, want)?;
            if v.len() >= n {
                return Ok(v);
            }
            if start.elapsed() >= timeout {
                return Err(Error {
                    verb: "ibv_poll_cq",
                    errno: Errno::ETIMEDOUT,
                    layer: Layer::Library,
                    detail: format!("{} of {n} completions after {timeout:?}: {v:?}", v.len()),
                    bad_wr: None,
                });
            }
            std::thread::yield_now();
        }
    }

    /// Event mode: returns up to `max` completions, sleeping on the CQ's
    /// completion channel (arm, re-poll, `ibv_get_cq_event`) while it is empty.
    ///
    /// # Errors
    /// `EINVAL` when the CQ has no completion channel; `ETIMEDOUT` (library
    /// layer) when nothing arrived within `timeout`.
    pub fn wait_event(&self, max: usize, timeout: Duration) -> Result<Vec<Wc>> {
        let deadline = Instant::now() + timeout;
        let Some(ch) = &self._channel else {
            return Err(Error::application(
                "ibv_req_notify_cq",
                Errno::EINVAL,
                "CQ has no completion channel",
            ));
        };
        loop {
            let v = self.poll(max)?;
            if !v.is_empty() {
                return Ok(v);
            }
            self.req_notify(false)?;
            // A completion that landed between the poll and the arm.
            let v = self.poll(max)?;
            if !v.is_empty() {
                return Ok(v);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            ch.get_cq_event(Some(left))?;
        }
    }

    /// `ibv_req_notify_cq`.
    ///
    /// # Errors
    /// `EINVAL` when the CQ has no completion channel.
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        self.ctx.ops.req_notify_cq(self.handle, solicited_only)
    }
}
