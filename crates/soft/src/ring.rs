//! Per-queue descriptor rings: a DMA descriptor taken and mapped under a spinlock.
//!
//! A ring has a fixed number of descriptors (the queue depth). Posting a work
//! request takes one free descriptor and "DMA-maps" the request's buffers
//! (key lookup, bounds, rights through the MR table) under **one** short lock;
//! if the mapping fails the descriptor goes back to the free pool before the
//! lock is dropped, so a failed post never leaks a descriptor. Mapped
//! descriptors wait in the ring until the engine fetches them (the doorbell);
//! a fetched descriptor stays owned by the engine until its work request
//! completes, then it is freed.
//!
//! Invariant, checked by [`Ring::check`] and the tests:
//! `free + posted + in_engine == capacity` at every instant.

use std::collections::VecDeque;

/// Why taking and mapping a descriptor failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapFailure<E> {
    /// No free descriptor (the queue is full).
    Full,
    /// The mapping was refused (`E` says why); the descriptor was returned.
    Refused(E),
    /// An injected fault made the mapping fail (the device's fault plan,
    /// [`crate::faults`]); the descriptor was returned.
    Injected,
}

/// Counters of one ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Descriptors ever taken.
    pub taken: u64,
    /// Mappings that failed (refused or injected) and returned their descriptor.
    pub returned_on_failure: u64,
    /// Of those, failures produced by fault injection.
    pub injected: u64,
    /// Descriptors freed after their work request completed (or was discarded).
    pub completed: u64,
    /// Capacity.
    pub capacity: u64,
    /// Free now.
    pub free: u64,
    /// Mapped, waiting for the engine.
    pub posted: u64,
    /// Owned by the engine.
    pub in_engine: u64,
}

impl RingStats {
    /// True when no descriptor is unaccounted for:
    /// `free + posted + in_engine == capacity` and
    /// `taken == returned_on_failure + completed + posted + in_engine`.
    pub fn no_leak(&self) -> bool {
        self.free + self.posted + self.in_engine == self.capacity
            && self.taken
                == self.returned_on_failure + self.completed + self.posted + self.in_engine
    }
}

/// A descriptor ring of capacity `cap` holding mapped descriptors `T`.
#[derive(Debug)]
pub struct Ring<T> {
    cap: usize,
    free: usize,
    posted: VecDeque<T>,
    in_engine: usize,
    stats: RingStats,
    /// Emptied scatter/gather lists of completed WRs (handed back by the
    /// engine), reused by the next posts: no allocation per posted WR.
    spare_sgls: Vec<Vec<rdmakit_proto::Sge>>,
}

impl<T> Ring<T> {
    /// A ring of `cap` free descriptors.
    pub fn new(cap: usize) -> Ring<T> {
        Ring {
            cap,
            free: cap,
            posted: VecDeque::with_capacity(cap.min(4096)),
            in_engine: 0,
            stats: RingStats::default(),
            spare_sgls: Vec::new(),
        }
    }

    /// An empty scatter/gather list to build the next descriptor's WR in:
    /// a spare one when the ring holds one (see [`Ring::keep_sgl`]).
    pub(crate) fn sgl(&mut self) -> Vec<rdmakit_proto::Sge> {
        self.spare_sgls.pop().unwrap_or_default()
    }

    /// Keeps an emptied scatter/gather list for [`Ring::sgl`] (up to the
    /// ring's capacity of them).
    pub(crate) fn keep_sgl(&mut self, sgl: Vec<rdmakit_proto::Sge>) {
        if self.spare_sgls.len() < self.cap && sgl.is_empty() {
            self.spare_sgls.push(sgl);
        }
    }

    /// Takes a free descriptor and maps it with `map` — unless `inject`
    /// says the mapping fails (asked once a descriptor was taken, so a
    /// full ring consumes no fault); on success the mapped
    /// descriptor is posted (doorbell). On any failure the descriptor is
    /// returned before this returns. The caller holds the ring's lock for
    /// the whole call: take + map + post (or return) is one critical section.
    ///
    /// # Errors
    /// [`MapFailure`]; the ring is then unchanged except for its counters.
    pub fn take_and_map<E>(
        &mut self,
        inject: impl FnOnce() -> bool,
        map: impl FnOnce() -> Result<T, E>,
    ) -> Result<(), MapFailure<E>> {
        if self.free == 0 {
            return Err(MapFailure::Full);
        }
        self.free -= 1;
        self.stats.taken += 1;
        let mapped = if inject() {
            Err(MapFailure::Injected)
        } else {
            map().map_err(MapFailure::Refused)
        };
        match mapped {
            Ok(d) => {
                self.posted.push_back(d);
                Ok(())
            }
            Err(e) => {
                // A failed mapping puts the descriptor back.
                self.free += 1;
                self.stats.returned_on_failure += 1;
                if matches!(e, MapFailure::Injected) {
                    self.stats.injected += 1;
                }
                Err(e)
            }
        }
    }

    /// The engine fetches the oldest posted descriptor.
    pub fn fetch(&mut self) -> Option<T> {
        let d = self.posted.pop_front()?;
        self.in_engine += 1;
        Some(d)
    }

    /// `n` descriptors owned by the engine completed: free them.
    pub fn complete(&mut self, n: usize) {
        let n = n.min(self.in_engine);
        self.in_engine -= n;
        self.free += n;
        self.stats.completed += n as u64;
    }

    /// Discards every posted descriptor (QP reset): they are freed.
    pub fn discard_posted(&mut self) {
        let n = self.posted.len();
        self.posted.clear();
        self.free += n;
        self.stats.completed += n as u64;
    }

    /// Descriptors owned by the engine.
    pub fn in_engine(&self) -> usize {
        self.in_engine
    }

    /// Posted descriptors waiting for the engine.
    pub fn posted(&self) -> usize {
        self.posted.len()
    }

    /// Capacity.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> RingStats {
        RingStats {
            capacity: self.cap as u64,
            free: self.free as u64,
            posted: self.posted.len() as u64,
            in_engine: self.in_engine as u64,
            ..self.stats
        }
    }

    /// The leak invariant holds.
    pub fn check(&self) -> bool {
        self.stats().no_leak()
    }
}

impl Ring<rdmakit_proto::RecvWr> {
    /// Posts a copy of the receive WR `wr` (its scatter/gather list built
    /// in a spare one, see [`Ring::sgl`]) as [`Ring::take_and_map`] does.
    ///
    /// # Errors
    /// As [`Ring::take_and_map`]; the mapping itself never fails (lkeys
    /// are checked when data lands, as rxe does).
    pub(crate) fn post_recv(
        &mut self,
        inject: impl FnOnce() -> bool,
        wr: &rdmakit_proto::RecvWr,
    ) -> Result<(), MapFailure<rdmakit_proto::MemError>> {
        let mut sg_list = self.sgl();
        sg_list.extend_from_slice(&wr.sg_list);
        self.take_and_map(inject, || {
            Ok(rdmakit_proto::RecvWr {
                wr_id: wr.wr_id,
                sg_list,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_scatter_lists_are_reused_up_to_the_capacity() {
        let mut r: Ring<u32> = Ring::new(2);
        assert_eq!(r.sgl().capacity(), 0, "no spare yet: a new list");
        let mut v = Vec::with_capacity(4);
        v.push(rdmakit_proto::Sge {
            addr: 1,
            length: 2,
            lkey: 3,
        });
        r.keep_sgl(v.clone());
        assert_eq!(
            r.sgl().capacity(),
            0,
            "a list still holding SGEs is not kept"
        );
        drop(v);
        // Capacity 2: the first two kept (newest first out), the rest dropped.
        for cap in [1, 2, 3] {
            r.keep_sgl(Vec::with_capacity(cap));
        }
        assert_eq!(r.sgl().capacity(), 2);
        assert_eq!(r.sgl().capacity(), 1);
        assert_eq!(r.sgl().capacity(), 0);
    }

    #[test]
    fn failed_mapping_returns_the_descriptor() {
        let no = || false;
        let mut r: Ring<u32> = Ring::new(2);
        assert_eq!(
            r.take_and_map(no, || Err::<u32, ()>(())),
            Err(MapFailure::Refused(()))
        );
        assert!(r.check());
        r.take_and_map(no, || Ok::<_, ()>(1)).unwrap();
        r.take_and_map(no, || Ok::<_, ()>(2)).unwrap();
        assert_eq!(
            r.take_and_map(
                || unreachable!("a full ring asks no fault"),
                || Ok::<_, ()>(3)
            ),
            Err(MapFailure::Full)
        );
        assert_eq!(r.fetch(), Some(1));
        r.complete(1);
        assert_eq!(
            r.take_and_map(|| true, || Ok::<_, ()>(4)),
            Err(MapFailure::Injected)
        );
        assert!(r.check());
        let s = r.stats();
        assert_eq!((s.free, s.posted, s.in_engine), (1, 1, 0));
        assert_eq!(s.injected, 1);
    }
}
