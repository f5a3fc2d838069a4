//! Completion queues: the CQ table with `max_cq` and `max_cqe`, each CQ's
//! completions, size and arming, and how many CQs are armed (an
//! application may be blocked on their channel, so the progress thread
//! does not nap while any is).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rdmakit_proto::Wc;
use rustc_hash::FxHashMap;

use crate::attr::Limits;
use crate::errno::{Errno, Origin, Result};
use crate::registry::Kind;
use crate::{lock, read, write};

use super::admit::{Admission, Limit};
use super::channel::{Channel, Channels};
use super::err;

/// The CQ table.
#[derive(Debug)]
pub(super) struct Cqs {
    // Looked up per poll: FxHash, not SipHash (the keys are the device's
    // own numbers, nothing to defend against).
    map: RwLock<CqMap>,
    /// CQs armed (`ibv_req_notify_cq`) and not yet notified.
    armed: AtomicUsize,
    limit: Limit,
    max_cqe: u32,
}

#[derive(Debug)]
struct CqMap {
    cqs: FxHashMap<u32, Arc<Cq>>,
    next: u32,
}

/// A completion queue.
#[derive(Debug)]
pub(super) struct Cq {
    id: u32,
    /// Entries it holds (`ibv_resize_cq` changes it).
    cap: AtomicUsize,
    queue: Mutex<VecDeque<Wc>>,
    /// `queue.len()`, stored under its lock after every change: an empty
    /// busy poll reads it instead of taking the lock.
    ready: AtomicUsize,
    overrun: AtomicBool,
    armed: AtomicBool,
    channel: Option<Arc<Channel>>,
    /// QPs completing into it.
    users: AtomicUsize,
}

/// What became of a completion added to a CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pushed {
    /// Queued (and the CQ's channel notified if it was armed).
    Queued,
    /// Lost: the CQ is full. `first`: its first overrun.
    Lost {
        /// The CQ had not overrun before.
        first: bool,
    },
}

impl Cqs {
    /// An empty table enforcing `max_cq` and `max_cqe`.
    pub(super) fn new(limits: &Limits) -> Cqs {
        Cqs {
            map: RwLock::new(CqMap {
                cqs: FxHashMap::default(),
                next: 1,
            }),
            armed: AtomicUsize::new(0),
            limit: Limit::new("max_cq", limits.max_cq),
            max_cqe: limits.max_cqe,
        }
    }

    /// `ibv_create_cq` with room for `cqe` completions, notifying
    /// `channel` (of `channels`).
    pub(super) fn create(
        &self,
        adm: &Admission,
        channels: &Channels,
        cqe: u32,
        channel: Option<u32>,
    ) -> Result<u32> {
        const V: &str = "ibv_create_cq";
        self.check_cqe(V, cqe)?;
        let channel = match channel {
            None => None,
            Some(c) => Some(channels.get(c).ok_or_else(|| {
                err(
                    V,
                    Errno::EINVAL,
                    Origin::Kernel,
                    "no such completion channel",
                )
            })?),
        };
        let mut m = write(&self.map);
        adm.check(V, m.cqs.len(), self.limit)?;
        let id = m.next;
        m.next = m.next.wrapping_add(1).max(1);
        adm.register(V, Kind::Cq, id, self.limit)?;
        m.cqs.insert(
            id,
            Arc::new(Cq {
                id,
                cap: AtomicUsize::new(cqe as usize),
                queue: Mutex::new(VecDeque::new()),
                ready: AtomicUsize::new(0),
                overrun: AtomicBool::new(false),
                armed: AtomicBool::new(false),
                channel,
                users: AtomicUsize::new(0),
            }),
        );
        Ok(id)
    }

    /// `ibv_destroy_cq`: `EINVAL` for an unknown CQ, `EBUSY` while a QP
    /// uses it.
    pub(super) fn destroy(&self, adm: &Admission, cq: u32) -> Result<()> {
        const V: &str = "ibv_destroy_cq";
        let mut m = write(&self.map);
        match m.cqs.get(&cq) {
            None => Err(err(V, Errno::EINVAL, Origin::Kernel, "no such CQ")),
            Some(c) if c.users.load(Ordering::Acquire) > 0 => {
                Err(err(V, Errno::EBUSY, Origin::Kernel, "QPs still use the CQ"))
            }
            Some(c) => {
                if c.armed.swap(false, Ordering::AcqRel) {
                    self.armed.fetch_sub(1, Ordering::AcqRel);
                }
                m.cqs.remove(&cq);
                adm.unregister(Kind::Cq, cq);
                Ok(())
            }
        }
    }

    /// `ibv_resize_cq`: see [`super::Device::resize_cq`].
    pub(super) fn resize(&self, cq: u32, cqe: u32) -> Result<u32> {
        const V: &str = "ibv_resize_cq";
        let c = self
            .get(cq)
            .ok_or_else(|| err(V, Errno::EINVAL, Origin::Kernel, "no such CQ"))?;
        self.check_cqe(V, cqe)?;
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

    fn check_cqe(&self, verb: &'static str, cqe: u32) -> Result<()> {
        if cqe == 0 || cqe > self.max_cqe {
            return Err(err(
                verb,
                Errno::EINVAL,
                Origin::Kernel,
                format!("cqe {cqe} not in 1..={}", self.max_cqe),
            ));
        }
        Ok(())
    }

    /// A CQ.
    pub(super) fn get(&self, cq: u32) -> Option<Arc<Cq>> {
        read(&self.map).cqs.get(&cq).cloned()
    }

    /// `ibv_poll_cq`: moves up to `max` completions into `out`. On an
    /// empty CQ `on_empty` runs first (the busy poll: it may complete
    /// into this CQ), under the table's read guard rather than a clone
    /// of the CQ's `Arc` per call.
    pub(super) fn poll(
        &self,
        cq: u32,
        out: &mut Vec<Wc>,
        max: usize,
        on_empty: impl FnOnce(&Cq),
    ) -> Result<usize> {
        let m = read(&self.map);
        let c = m
            .cqs
            .get(&cq)
            .ok_or_else(|| err("ibv_poll_cq", Errno::EINVAL, Origin::Library, "no such CQ"))?;
        // The ready count, not the queue's lock, says whether it is empty:
        // a spinning poller takes no lock while nothing arrives.
        if !c.has_completions() {
            on_empty(c);
            if !c.has_completions() {
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

    /// `ibv_req_notify_cq`: the next completion added to the CQ signals
    /// its channel once; completions already queued count as "next"
    /// (N_NOTIFY_CQ semantics are per arm; signalling now avoids a lost
    /// wake-up). `armed` runs once the CQ is armed, before that.
    pub(super) fn req_notify(&self, cq: u32, armed: impl FnOnce()) -> Result<()> {
        const V: &str = "ibv_req_notify_cq";
        let c = self
            .get(cq)
            .ok_or_else(|| err(V, Errno::EINVAL, Origin::Library, "no such CQ"))?;
        if c.channel.is_none() {
            return Err(err(
                V,
                Errno::EINVAL,
                Origin::Library,
                "CQ has no completion channel",
            ));
        }
        if !c.armed.swap(true, Ordering::AcqRel) {
            self.armed.fetch_add(1, Ordering::AcqRel);
        }
        armed();
        if !lock(&c.queue).is_empty() {
            self.notify(&c);
        }
        Ok(())
    }

    /// Adds a completion to CQ `c` and notifies its channel if armed.
    pub(super) fn push(&self, c: &Cq, wc: Wc) -> Pushed {
        let mut q = lock(&c.queue);
        if q.len() >= c.cap.load(Ordering::Relaxed) {
            drop(q);
            let first = !c.overrun.swap(true, Ordering::AcqRel);
            return Pushed::Lost { first };
        }
        q.push_back(wc);
        c.ready.store(q.len(), Ordering::Release);
        drop(q);
        self.notify(c);
        Pushed::Queued
    }

    /// Signals an armed CQ's channel, disarming it.
    fn notify(&self, c: &Cq) {
        if !c.armed.swap(false, Ordering::AcqRel) {
            return;
        }
        self.armed.fetch_sub(1, Ordering::AcqRel);
        if let Some(ch) = &c.channel {
            ch.post(c.id);
        }
    }

    /// Whether the CQ overran (a completion was lost).
    pub(super) fn overrun(&self, cq: u32) -> bool {
        self.get(cq)
            .is_some_and(|c| c.overrun.load(Ordering::Acquire))
    }

    /// Whether a CQ uses channel `ch`.
    pub(super) fn uses_channel(&self, ch: u32) -> bool {
        read(&self.map)
            .cqs
            .values()
            .any(|c| c.channel.as_ref().is_some_and(|x| x.id() == ch))
    }

    /// CQs armed and not yet notified.
    pub(super) fn armed(&self) -> usize {
        self.armed.load(Ordering::Acquire)
    }

    /// Live CQs.
    pub(super) fn len(&self) -> usize {
        read(&self.map).cqs.len()
    }
}

impl Cq {
    /// The CQ's handle.
    pub(super) fn id(&self) -> u32 {
        self.id
    }

    /// Whether completions wait in it (no lock taken).
    pub(super) fn has_completions(&self) -> bool {
        self.ready.load(Ordering::Acquire) != 0
    }

    /// A QP completes into it from now on.
    pub(super) fn attach(&self) {
        self.users.fetch_add(1, Ordering::AcqRel);
    }

    /// A QP that completed into it is gone.
    pub(super) fn detach(&self) {
        self.users.fetch_sub(1, Ordering::AcqRel);
    }

    /// Drops QP `qpn`'s completions (it went to RESET).
    pub(super) fn purge(&self, qpn: u32) {
        let mut wcs = lock(&self.queue);
        wcs.retain(|w| w.qp_num != qpn);
        self.ready.store(wcs.len(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wc() -> Wc {
        Wc {
            wr_id: 7,
            status: rdmakit_proto::WcStatus::Success,
            opcode: rdmakit_types::wr::WcOpcode::Send,
            byte_len: 0,
            imm_data: None,
            invalidated_rkey: None,
            qp_num: 17,
            src_qp: 0,
            grh: false,
            vendor_err: 0,
        }
    }

    /// The progress thread naps only while no CQ is armed: every arm is
    /// counted once, and a notification or the CQ's destruction un-counts it.
    #[test]
    fn armed_cqs_count_what_may_block_on_a_channel() {
        let adm = Admission::new("soft-test".into(), None, Errno::EINVAL);
        let channels = Channels::new();
        let cqs = Cqs::new(&Limits::default());
        let ch = channels.create().unwrap();
        let a = cqs.create(&adm, &channels, 16, Some(ch)).unwrap();
        let b = cqs.create(&adm, &channels, 16, Some(ch)).unwrap();
        assert_eq!(cqs.armed(), 0);
        cqs.req_notify(a, || {}).unwrap();
        cqs.req_notify(a, || {}).unwrap();
        assert_eq!(cqs.armed(), 1, "arming an armed CQ again counts once");
        cqs.req_notify(b, || {}).unwrap();
        assert_eq!(cqs.armed(), 2);
        let c = cqs.get(a).unwrap();
        assert_eq!(cqs.push(&c, wc()), Pushed::Queued);
        assert_eq!(cqs.armed(), 1, "a notification disarms");
        assert_eq!(
            channels.wait(ch, Some(std::time::Duration::ZERO), || false),
            Ok(a)
        );
        drop(c);
        cqs.destroy(&adm, b).unwrap();
        assert_eq!(cqs.armed(), 0, "destroying an armed CQ disarms it");
        let mut out = Vec::new();
        assert_eq!(cqs.poll(a, &mut out, 4, |_| {}), Ok(1));
        cqs.destroy(&adm, a).unwrap();
    }

    /// A full CQ loses the completion and says so once.
    #[test]
    fn a_full_cq_overruns_once() {
        let adm = Admission::new("soft-test".into(), None, Errno::EINVAL);
        let cqs = Cqs::new(&Limits::default());
        let id = cqs.create(&adm, &Channels::new(), 1, None).unwrap();
        let c = cqs.get(id).unwrap();
        assert_eq!(cqs.push(&c, wc()), Pushed::Queued);
        assert_eq!(cqs.push(&c, wc()), Pushed::Lost { first: true });
        assert_eq!(cqs.push(&c, wc()), Pushed::Lost { first: false });
        assert!(cqs.overrun(id));
    }
}
