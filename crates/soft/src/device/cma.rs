//! The device side of the same-host data path ([`crate::cma`]): which QPs
//! use it, and what the tools report about it.

use std::net::Ipv4Addr;

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
    /// Whether a peer at `ip` (QP `dqpn`) is a soft device of this host
    /// that the same-host path may reach: the path is on here, and the
    /// peer's endpoint is a loopback address (a private `127.77.s.t`
    /// endpoint or 127.0.0.0/8) or this host's device address. Decided per
    /// QP when the AV is set (INIT → RTR).
    pub(super) fn same_host_peer(&self, ip: Ipv4Addr, dqpn: u32) -> bool {
        let on = super::read(&self.mem).same_host().enabled();
        on && (self.net.route(ip, dqpn).ip().is_loopback()
            || ip == self.net.addr()
            || ip == crate::net::host_device_addr())
    }
}

impl Device {
    /// How this device moves packets and RC data to a peer on this host:
    /// `Cma` for a device configured `Auto` that could not leave its ring
    /// marker (the ring directory not writable), so `devinfo -v` says what
    /// is really in use.
    pub fn soft_transport(&self) -> SoftTransport {
        if !super::read(&self.sh.mem).same_host().enabled() {
            SoftTransport::Udp
        } else if self.sh.net.rings().is_some() {
            SoftTransport::Auto
        } else {
            SoftTransport::Cma
        }
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
