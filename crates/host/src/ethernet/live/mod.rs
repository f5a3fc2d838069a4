//! Answers [`EthQuery`] on the running kernel: ethtool's ioctl (SIOCETHTOOL)
//! and rtnetlink DCB, rendered in the text the matching command prints, so
//! one parser reads a live answer and a captured command's output alike.
//!
//! - [`ethtool`]: statistics, pause, FEC and module EEPROM through the
//!   ioctl, and their renderers ([`ethtool::render_stats`] ...).
//! - [`dcb`]: DCBX, ETS, PFC and the APP table through RTM_GETDCB, and
//!   [`dcb::render`].
//! - `ioctl`: the one place a pointer is handed to the kernel, behind a
//!   guard page; `rtnl`: one bounded rtnetlink exchange.
//!
//! Each renderer's doc is the format's definition. Only GET commands are
//! sent: nothing on the host changes. Every question is asked in the network
//! namespace of the calling thread. Everything the kernel says is bounded:
//! at most [`ethtool::MAX_STATS`] statistics of 32-byte names, at most 640
//! bytes of a known module type's EEPROM (4096 of another), at most
//! [`rtnl::MAX_REPLY`] bytes of netlink answer after at most 5 s of silence;
//! a short or malformed answer is an errno, never a panic.

pub mod dcb;
pub mod ethtool;
mod ioctl;
pub mod rtnl;

use super::EthQuery;
use crate::source::Errno;

/// The answer to `q` from the running kernel, in the text the matching command
/// prints (see the table in [`super`]).
///
/// # Errors
/// The kernel's errno: ENODEV for no such netdev, EOPNOTSUPP for a driver
/// without the operation (veth answers only [`EthQuery::Stats`]); EINVAL for
/// a name no netdev can have.
pub fn answer(q: &EthQuery) -> Result<Vec<u8>, Errno> {
    let ifname = q.ifname();
    if !super::valid_ifname(ifname) {
        return Err(Errno::EINVAL);
    }
    // SIOCETHTOOL on a name no netdev has makes the kernel try to load a
    // module of that name; asking rtnetlink first does not.
    let exists = || rtnl::netdev_exists(ifname);
    match q {
        EthQuery::Dcb(_) => dcb::read(ifname).map(|d| dcb::render(&d)),
        EthQuery::Stats(_) => exists()
            .and_then(|()| ethtool::read_stats(ifname))
            .map(|s| ethtool::render_stats(&s)),
        EthQuery::Pause(_) => exists()
            .and_then(|()| ethtool::read_pause(ifname))
            .map(|p| ethtool::render_pause(ifname, &p)),
        EthQuery::Fec(_) => exists()
            .and_then(|()| ethtool::read_fec(ifname))
            .map(|f| ethtool::render_fec(ifname, &f)),
        EthQuery::Module(_) => exists()
            .and_then(|()| ethtool::read_module(ifname))
            .map(|m| ethtool::render_module(&m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asked of rtnetlink first, so the ioctl never sees the name (and the
    /// kernel never looks for a module called after it).
    #[test]
    fn a_netdev_that_does_not_exist_is_enodev() {
        for q in EthQuery::all("rdmakitnonexis") {
            assert_eq!(answer(&q), Err(Errno::ENODEV), "{q:?}");
        }
        assert_eq!(answer(&EthQuery::Stats("a/b".into())), Err(Errno::EINVAL));
    }

    /// `lo` is in every network namespace and has no ethtool operations.
    #[test]
    fn lo_answers_errnos_not_text() {
        for q in EthQuery::all("lo") {
            assert!(answer(&q).is_err(), "{q:?}");
        }
    }
}
