//! The device side of the same-host data path ([`crate::cma`]): which QPs
//! use it, and what the tools report about it.

use super::{Device, Shared};
use crate::cma::SoftTransport;

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
}

impl Shared {
    /// Whether an RC QP's large messages may go as same-host requests: the
    /// device's transport is `auto` and the QP's packets go through a
    /// same-host ring to its peer (`on_ring`, decided when the AV is set):
    /// a request travels nowhere else, as a receiver takes one only from
    /// the ring of the process the kernel identified.
    pub(super) fn same_host_path(&self, on_ring: bool) -> bool {
        on_ring && self.transport == SoftTransport::Auto
    }
}

impl Device {
    /// How this device moves packets and RC data to a peer on this host:
    /// `Udp` for a device configured `Auto` that could not listen for rings
    /// (its user's directory refused or not writable), so `devinfo -v` says
    /// what is really in use.
    pub fn soft_transport(&self) -> SoftTransport {
        self.sh.transport
    }

    /// Why the last same-host ring this context tried to hand over, or was
    /// offered, did not come about (None: none failed, or no rings).
    pub fn ring_miss(&self) -> Option<String> {
        self.sh.net.rings().and_then(|r| r.last_miss())
    }

    /// The data path QP `qpn` used: same-host once it sent or executed a
    /// same-host request and was never declined; `None` for an unknown QP.
    pub fn qp_data_path(&self, qpn: u32) -> Option<DataPath> {
        let s = self.qp_stats(qpn)?;
        let used = s.same_host_sent + s.same_host_executed > 0;
        Some(if used && s.same_host_fallbacks == 0 {
            DataPath::SameHost
        } else {
            DataPath::Udp
        })
    }
}
