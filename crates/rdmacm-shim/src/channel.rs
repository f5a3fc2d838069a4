//! Event channels and events: `rdma_create_event_channel`,
//! `rdma_get_cm_event`, `rdma_ack_cm_event`.
//!
//! A channel's fd is an eventfd that is readable exactly while events wait
//! (applications poll it, or set it non-blocking and get `EAGAIN`). Events
//! are queued by the connection manager (state.rs) and handed out in order.

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard, OnceLock};

use libc::c_int;

use crate::abi::{rdma_cm_event, rdma_event_channel};
use crate::guard::Res;
use crate::id::IdPriv;

/// Event types as `enum rdma_cm_event_type` numbers them.
pub(crate) mod kind {
    pub const ADDR_RESOLVED: u32 = 0;
    pub const ADDR_ERROR: u32 = 1;
    pub const ROUTE_RESOLVED: u32 = 2;
    pub const ROUTE_ERROR: u32 = 3;
    pub const CONNECT_REQUEST: u32 = 4;
    pub const CONNECT_RESPONSE: u32 = 5;
    pub const CONNECT_ERROR: u32 = 6;
    pub const UNREACHABLE: u32 = 7;
    pub const REJECTED: u32 = 8;
    pub const ESTABLISHED: u32 = 9;
    pub const DISCONNECTED: u32 = 10;
    pub const DEVICE_REMOVAL: u32 = 11;
    pub const MULTICAST_JOIN: u32 = 12;
    pub const MULTICAST_ERROR: u32 = 13;
    pub const ADDR_CHANGE: u32 = 14;
    pub const TIMEWAIT_EXIT: u32 = 15;
}

/// An event as the application sees it, with room for its private data
/// (librdmacm's `struct cma_event`; in rdmakit "cma" names cross-memory attach,
/// the same-host path of wire, proto and soft).
#[repr(C)]
pub(crate) struct CmEvent {
    pub event: rdma_cm_event,
    pub data: [u8; 256],
    pub id_priv: *mut IdPriv,
}

/// A channel: the C struct first, so `rdma_event_channel *` leads back here.
#[repr(C)]
pub(crate) struct Channel {
    pub ch: rdma_event_channel,
    queue: Mutex<VecDeque<Box<CmEvent>>>,
}

// SAFETY: the raw pointers inside queued events are only dereferenced under
// the connection manager's lock or by the application that owns them.
unsafe impl Send for Channel {}
// SAFETY: the queue is behind a mutex; `ch.fd` never changes.
unsafe impl Sync for Channel {}

fn live() -> MutexGuard<'static, HashSet<usize>> {
    static SET: OnceLock<Mutex<HashSet<usize>>> = OnceLock::new();
    SET.get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

impl Channel {
    /// A new channel with its eventfd.
    pub(crate) fn create() -> Res<*mut Channel> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EMFILE));
        }
        let c = Box::into_raw(Box::new(Channel {
            ch: rdma_event_channel { fd },
            queue: Mutex::new(VecDeque::new()),
        }));
        live().insert(c as usize);
        Ok(c)
    }

    /// The channel behind `ch`, if it is one of ours and not destroyed.
    pub(crate) fn from_ptr<'a>(ch: *mut rdma_event_channel) -> Res<&'a Channel> {
        if ch.is_null() || !live().contains(&(ch as usize)) {
            return Err(libc::EINVAL);
        }
        // SAFETY: live channels are valid until rdma_destroy_event_channel.
        Ok(unsafe { &*ch.cast::<Channel>() })
    }

    /// Destroys a channel (its queued events are freed).
    ///
    /// # Safety
    /// `c` is a live channel nobody uses any more.
    pub(crate) unsafe fn destroy(c: *mut Channel) {
        if !live().remove(&(c as usize)) {
            return;
        }
        // SAFETY: created by Box::into_raw in `create`, removed from the set
        // above so no one else frees it.
        let b = unsafe { Box::from_raw(c) };
        // SAFETY: our eventfd.
        unsafe { libc::close(b.ch.fd) };
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Box<CmEvent>>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an event and makes the fd readable.
    pub(crate) fn push(&self, ev: Box<CmEvent>) {
        let mut q = self.lock();
        q.push_back(ev);
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes to our eventfd.
        unsafe { libc::write(self.ch.fd, one.as_ptr().cast(), 8) };
    }

    /// Takes the next event; `None` when the queue is empty. The fd stops
    /// polling readable when the last event is taken.
    fn pop(&self) -> Option<Box<CmEvent>> {
        let mut q = self.lock();
        let ev = q.pop_front()?;
        if q.is_empty() {
            self.drain_fd();
        }
        Some(ev)
    }

    fn drain_fd(&self) {
        let mut b = [0u8; 8];
        // Every queued event wrote to the eventfd, so it is non-zero now
        // and this read does not block.
        // SAFETY: reading 8 bytes from our eventfd into a local buffer.
        unsafe { libc::read(self.ch.fd, b.as_mut_ptr().cast(), 8) };
    }

    /// Removes the queued events of `id` (a destroyed ID's events are never
    /// reported) and returns how many.
    pub(crate) fn purge(&self, id: *mut IdPriv) -> usize {
        let mut q = self.lock();
        let before = q.len();
        q.retain(|e| e.id_priv != id && e.event.listen_id != id.cast());
        let n = before - q.len();
        if n > 0 && q.is_empty() {
            self.drain_fd();
        }
        n
    }

    /// Moves the queued events of `id` to `to` (`rdma_migrate_id`).
    pub(crate) fn move_events(&self, id: *mut IdPriv, to: &Channel) {
        let moved: Vec<Box<CmEvent>> = {
            let mut q = self.lock();
            let (mine, rest): (VecDeque<_>, VecDeque<_>) =
                q.drain(..).partition(|e| e.id_priv == id);
            *q = rest;
            if q.is_empty() && !mine.is_empty() {
                self.drain_fd();
            }
            mine.into_iter().collect()
        };
        for e in moved {
            to.push(e);
        }
    }

    /// Waits for the next event: blocks in `poll` unless the fd is
    /// non-blocking, where an empty queue is `EAGAIN`.
    pub(crate) fn wait(&self) -> Res<Box<CmEvent>> {
        loop {
            if let Some(e) = self.pop() {
                return Ok(e);
            }
            // SAFETY: fcntl on our fd.
            let fl = unsafe { libc::fcntl(self.ch.fd, libc::F_GETFL) };
            if fl >= 0 && fl & libc::O_NONBLOCK != 0 {
                return Err(libc::EAGAIN);
            }
            let mut p = libc::pollfd {
                fd: self.ch.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd on the stack.
            let r = unsafe { libc::poll(&mut p, 1, -1) };
            if r < 0 {
                let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                if e != libc::EINTR {
                    return Err(e);
                }
            }
        }
    }
}

/// `rdma_event_str`.
pub(crate) fn event_str(e: u32) -> &'static std::ffi::CStr {
    match e {
        kind::ADDR_RESOLVED => c"RDMA_CM_EVENT_ADDR_RESOLVED",
        kind::ADDR_ERROR => c"RDMA_CM_EVENT_ADDR_ERROR",
        kind::ROUTE_RESOLVED => c"RDMA_CM_EVENT_ROUTE_RESOLVED",
        kind::ROUTE_ERROR => c"RDMA_CM_EVENT_ROUTE_ERROR",
        kind::CONNECT_REQUEST => c"RDMA_CM_EVENT_CONNECT_REQUEST",
        kind::CONNECT_RESPONSE => c"RDMA_CM_EVENT_CONNECT_RESPONSE",
        kind::CONNECT_ERROR => c"RDMA_CM_EVENT_CONNECT_ERROR",
        kind::UNREACHABLE => c"RDMA_CM_EVENT_UNREACHABLE",
        kind::REJECTED => c"RDMA_CM_EVENT_REJECTED",
        kind::ESTABLISHED => c"RDMA_CM_EVENT_ESTABLISHED",
        kind::DISCONNECTED => c"RDMA_CM_EVENT_DISCONNECTED",
        kind::DEVICE_REMOVAL => c"RDMA_CM_EVENT_DEVICE_REMOVAL",
        kind::MULTICAST_JOIN => c"RDMA_CM_EVENT_MULTICAST_JOIN",
        kind::MULTICAST_ERROR => c"RDMA_CM_EVENT_MULTICAST_ERROR",
        kind::ADDR_CHANGE => c"RDMA_CM_EVENT_ADDR_CHANGE",
        kind::TIMEWAIT_EXIT => c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
        _ => c"UNKNOWN EVENT",
    }
}

/// `fd` of a channel, for tests of the polling contract.
#[allow(dead_code)]
pub(crate) fn fd_of(c: &Channel) -> c_int {
    c.ch.fd
}
