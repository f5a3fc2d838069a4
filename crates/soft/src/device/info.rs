//! What the device reports: its counters, its live objects, a failed post
//! and the data path a QP took.

use std::sync::atomic::{AtomicU64, Ordering};

use rdmakit_proto::MemError;

use super::err;
use crate::errno::{Errno, Origin, SoftError};
use crate::faults::FaultCounts;
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
    /// RNR NAKs received (mlx5's `rnr_nak_retry_err`), summed over the QPs.
    pub rnr_naks_received: u64,
    /// RoCEv2 packets received marked Congestion Experienced (mlx5's
    /// `np_ecn_marked_roce_packets`), summed over the QPs.
    pub np_ecn_marked_roce_packets: u64,
    /// CNPs sent for CE-marked packets (`np_cnp_sent`), summed over the QPs.
    pub np_cnp_sent: u64,
    /// CNPs that lowered a QP's rate (`rp_cnp_handled`), summed over the QPs.
    pub rp_cnp_handled: u64,
    /// CNPs received and ignored: the reaction point off for the QP's
    /// priority, the QP not connected, or the CNP not from its peer
    /// (`rp_cnp_ignored`), summed over the QPs.
    pub rp_cnp_ignored: u64,
    /// Faults injected by the device's fault plan, by kind
    /// (`RDMAKIT_SOFT_FAULTS`, [`crate::faults`]); all 0 without one.
    pub faults: FaultCounts,
}

/// The names [`Counters::transport`] gives the counters summed over the
/// QPs, in its order ([`rdmakit_types::soft_counters::TRANSPORT`]).
pub const TRANSPORT_COUNTERS: [&str; QpSums::LEN] = rdmakit_types::soft_counters::TRANSPORT;

impl Counters {
    /// The transport and congestion counters summed over the QPs, by
    /// name ([`TRANSPORT_COUNTERS`]): what `rdmakit stat` and a pairwise
    /// test report of the soft NIC, as `hw_counters` of a real device.
    pub fn transport(&self) -> [(&'static str, u64); QpSums::LEN] {
        let v = [
            self.retransmitted_packets,
            self.ack_timeouts,
            self.out_of_sequence,
            self.seq_err_naks_received,
            self.duplicate_requests,
            self.rnr_naks_received,
            self.np_ecn_marked_roce_packets,
            self.np_cnp_sent,
            self.rp_cnp_handled,
            self.rp_cnp_ignored,
        ];
        std::array::from_fn(|i| (TRANSPORT_COUNTERS[i], v[i]))
    }

    /// What a context publishes for the device-wide counters
    /// ([`crate::registry::counters`]): the packets sent and received, then
    /// [`Counters::transport`], in [`crate::registry::counters::NAMES`]' order.
    pub fn published(&self) -> crate::registry::counters::Values {
        let mut v = [0u64; crate::registry::counters::NAMES.len()];
        v[0] = self.tx_packets;
        v[1] = self.rx_packets;
        for (i, (_, x)) in self.transport().into_iter().enumerate() {
            v[2 + i] = x;
        }
        crate::registry::counters::Values(v)
    }
}

/// The transport counters of QPs, summed, in [`TRANSPORT_COUNTERS`]'
/// order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpSums([u64; QpSums::LEN]);

impl QpSums {
    /// How many counters.
    pub const LEN: usize = 10;

    /// One QP's.
    pub(super) fn of(s: &rdmakit_proto::Stats) -> QpSums {
        QpSums([
            s.retransmitted,
            s.timeouts,
            s.naks_sent[0],
            s.seq_err_naks_received,
            s.duplicates,
            s.rnr_naks_received,
            s.np_ecn_marked_roce_packets,
            s.np_cnp_sent,
            s.rp_cnp_handled,
            s.rp_cnp_ignored,
        ])
    }

    /// `self` plus `o`.
    pub(super) fn add(self, o: QpSums) -> QpSums {
        QpSums(std::array::from_fn(|i| self.0[i].saturating_add(o.0[i])))
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
            retransmitted_packets: q.0[0],
            ack_timeouts: q.0[1],
            out_of_sequence: q.0[2],
            seq_err_naks_received: q.0[3],
            duplicate_requests: q.0[4],
            rnr_naks_received: q.0[5],
            np_ecn_marked_roce_packets: q.0[6],
            np_cnp_sent: q.0[7],
            rp_cnp_handled: q.0[8],
            rp_cnp_ignored: q.0[9],
            faults: FaultCounts::default(),
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
