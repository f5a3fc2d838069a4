//! What the device reports: its counters, its live objects, a failed post
//! and the data path a QP took.

use std::sync::atomic::{AtomicU64, Ordering};

use rdmakit_proto::MemError;

use super::err;
use crate::errno::{Errno, Origin, SoftError};
use crate::net::shm::Rings;
use crate::ring::MapFailure;

/// A failed post: which request and why (`bad_wr`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("work request {index}: {error}")]
pub struct PostFailure {
    /// Index of the first request not posted.
    pub index: usize,
    /// Why.
    pub error: SoftError,
}

/// Device-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets received and handed to a QP.
    pub rx_packets: u64,
    /// Datagrams dropped for a bad ICRC.
    pub rx_icrc_errors: u64,
    /// Datagrams for a QPN that does not exist.
    pub rx_unknown_qp: u64,
    /// Datagrams too short for a BTH + ICRC.
    pub rx_malformed: u64,
    /// Socket send failures.
    pub tx_errors: u64,
    /// Completions lost to CQ overrun.
    pub cq_overruns: u64,
    /// Descriptor mappings that failed as a device fault (injected): the
    /// soft NIC's "DMA mapping error" lines in dmesg.
    pub dma_map_errors: u64,
    /// Packets written into same-host rings (`RDMAKIT_SOFT_TRANSPORT=auto`,
    /// the default; counted in `tx_packets` too).
    pub ring_tx_packets: u64,
    /// Packets taken from same-host rings (counted in `rx_packets` too
    /// when a QP took them).
    pub ring_rx_packets: u64,
    /// Ring pushes that found the receiving context's progress thread
    /// asleep: each owed it a wake-up datagram (one per receiver and
    /// transmit pass).
    pub ring_wakeups: u64,
    /// Rings other contexts offered this one and it refused (another
    /// user's process, a bad hello, a pidfd naming another process, a ring
    /// that is not one).
    pub ring_refused: u64,
    /// Same-host requests dropped: they came in a UDP datagram (they are
    /// taken only from same-host rings) or on a ring that is not the QP's
    /// peer's.
    pub rx_same_host_refused: u64,
    /// Packets taken from the UDP socket and handed to a QP (counted in
    /// `rx_packets` too): with same-host rings, what did not come by them.
    pub rx_socket_packets: u64,
    /// Request packets sent again, summed over the device's QPs (live and
    /// destroyed): the engine's `retransmitted`.
    pub retransmitted_packets: u64,
    /// Local ACK timeouts that led to a retry (rxe's and mlx5's
    /// `local_ack_timeout_err`), summed over the QPs.
    pub ack_timeouts: u64,
    /// Requests received out of sequence: PSN sequence error NAKs sent
    /// (mlx5's `out_of_sequence`), summed over the QPs.
    pub out_of_sequence: u64,
    /// PSN sequence error NAKs received (mlx5's `packet_seq_err`), summed
    /// over the QPs.
    pub seq_err_naks_received: u64,
    /// Duplicate requests received (rxe's `duplicate_request`), summed
    /// over the QPs.
    pub duplicate_requests: u64,
}

impl Counters {
    /// The transport counters summed over the QPs, by name (what a
    /// pairwise test reports of the soft NIC, as `hw_counters` of a real
    /// device).
    pub fn transport(&self) -> [(&'static str, u64); 5] {
        [
            ("retransmitted_packets", self.retransmitted_packets),
            ("ack_timeouts", self.ack_timeouts),
            ("out_of_sequence", self.out_of_sequence),
            ("seq_err_naks_received", self.seq_err_naks_received),
            ("duplicate_requests", self.duplicate_requests),
        ]
    }
}

/// The transport counters of QPs, summed: [`Counters::transport`]'s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct QpSums {
    pub(super) retransmitted: u64,
    pub(super) timeouts: u64,
    pub(super) out_of_sequence: u64,
    pub(super) seq_err_naks_received: u64,
    pub(super) duplicates: u64,
}

impl QpSums {
    /// One QP's.
    pub(super) fn of(s: &rdmakit_proto::Stats) -> QpSums {
        QpSums {
            retransmitted: s.retransmitted,
            timeouts: s.timeouts,
            out_of_sequence: s.naks_sent[0],
            seq_err_naks_received: s.seq_err_naks_received,
            duplicates: s.duplicates,
        }
    }

    /// `self` plus `o`.
    pub(super) fn add(self, o: QpSums) -> QpSums {
        QpSums {
            retransmitted: self.retransmitted.saturating_add(o.retransmitted),
            timeouts: self.timeouts.saturating_add(o.timeouts),
            out_of_sequence: self.out_of_sequence.saturating_add(o.out_of_sequence),
            seq_err_naks_received: self
                .seq_err_naks_received
                .saturating_add(o.seq_err_naks_received),
            duplicates: self.duplicates.saturating_add(o.duplicates),
        }
    }
}

/// Numbers of live objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceCounts {
    /// PDs.
    pub pd: usize,
    /// MRs.
    pub mr: usize,
    /// CQs.
    pub cq: usize,
    /// QPs.
    pub qp: usize,
    /// SRQs.
    pub srq: usize,
    /// AHs.
    pub ah: usize,
}

/// The data path a QP's large RC messages took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataPath {
    /// One cross-memory copy per message (a peer on this host).
    SameHost,
    /// Datagrams (a remote peer, `RDMAKIT_SOFT_TRANSPORT=udp`, or a peer
    /// that declined).
    Udp,
}

impl DataPath {
    /// `same-host` or `udp`, as `rdmakit perf` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            DataPath::SameHost => "same-host",
            DataPath::Udp => "udp",
        }
    }

    /// The path of a QP with engine counters `s`: same-host once it sent
    /// or executed a same-host request and was never declined.
    pub(super) fn of(s: &rdmakit_proto::Stats) -> DataPath {
        let used = s.same_host_sent + s.same_host_executed > 0;
        if used && s.same_host_fallbacks == 0 {
            DataPath::SameHost
        } else {
            DataPath::Udp
        }
    }
}

/// The device-wide counters as the data path bumps them: a plain record of
/// atomics, each bumped where its event happens. Its fields are visible to
/// the device's modules on purpose: there is no invariant between them for
/// a type to keep.
#[derive(Debug, Default)]
pub(super) struct AtomicCounters {
    pub(super) tx_packets: AtomicU64,
    pub(super) rx_packets: AtomicU64,
    pub(super) rx_icrc_errors: AtomicU64,
    pub(super) rx_unknown_qp: AtomicU64,
    pub(super) rx_malformed: AtomicU64,
    pub(super) tx_errors: AtomicU64,
    pub(super) cq_overruns: AtomicU64,
    pub(super) dma_map_errors: AtomicU64,
    pub(super) rx_same_host_refused: AtomicU64,
    pub(super) rx_socket_packets: AtomicU64,
    /// The transport counters of destroyed QPs (the live ones' are added
    /// at each snapshot): a device's counters never go back when its QPs go.
    pub(super) retired: std::sync::Mutex<QpSums>,
}

impl AtomicCounters {
    /// The counters now, with the same-host rings' own (`rings`: this
    /// context's, if it has them).
    pub(super) fn snapshot(&self, rings: Option<&Rings>, live: QpSums) -> Counters {
        let (ring_tx_packets, ring_rx_packets, ring_wakeups) =
            rings.map_or((0, 0, 0), |r| r.counts());
        let q = self.retired_now().add(live);
        Counters {
            tx_packets: self.tx_packets.load(Ordering::Relaxed),
            rx_packets: self.rx_packets.load(Ordering::Relaxed),
            rx_icrc_errors: self.rx_icrc_errors.load(Ordering::Relaxed),
            rx_unknown_qp: self.rx_unknown_qp.load(Ordering::Relaxed),
            rx_malformed: self.rx_malformed.load(Ordering::Relaxed),
            tx_errors: self.tx_errors.load(Ordering::Relaxed),
            cq_overruns: self.cq_overruns.load(Ordering::Relaxed),
            dma_map_errors: self.dma_map_errors.load(Ordering::Relaxed),
            ring_tx_packets,
            ring_rx_packets,
            ring_wakeups,
            ring_refused: rings.map_or(0, |r| r.refused()),
            rx_same_host_refused: self.rx_same_host_refused.load(Ordering::Relaxed),
            rx_socket_packets: self.rx_socket_packets.load(Ordering::Relaxed),
            retransmitted_packets: q.retransmitted,
            ack_timeouts: q.timeouts,
            out_of_sequence: q.out_of_sequence,
            seq_err_naks_received: q.seq_err_naks_received,
            duplicate_requests: q.duplicates,
        }
    }

    /// The destroyed QPs' transport counters.
    fn retired_now(&self) -> QpSums {
        *self.retired.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a destroyed QP's transport counters in the device's.
    pub(super) fn retire(&self, s: &rdmakit_proto::Stats) {
        let mut r = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        *r = r.add(QpSums::of(s));
    }

    /// The error of a descriptor mapping that failed in `verb`; an
    /// injected fault is counted as a DMA mapping error.
    pub(super) fn map_failure(&self, verb: &'static str, e: MapFailure<MemError>) -> SoftError {
        if matches!(e, MapFailure::Injected) {
            self.dma_map_errors.fetch_add(1, Ordering::Relaxed);
        }
        match e {
            MapFailure::Full => err(verb, Errno::ENOMEM, Origin::Library, "work queue full"),
            MapFailure::Injected => err(
                verb,
                Errno::ENOMEM,
                Origin::Hardware,
                "DMA mapping error (injected fault)",
            ),
            MapFailure::Refused(m) => err(
                verb,
                Errno::EINVAL,
                Origin::Hardware,
                format!("DMA mapping refused: {m}"),
            ),
        }
    }
}
