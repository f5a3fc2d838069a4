//! `rdma monitor`: a live NETLINK_RDMA socket joined to RDMA_NL_GROUP_NOTIFY.
//!
//! The only I/O in this module tree besides [`crate::source::LiveSource`]: events are
//! not a question a bundle can answer, so monitoring is live only.

use crate::source::Errno;

use super::consts::{cmd, nldev, NETLINK_RDMA, RDMA_NL_GROUP_NOTIFY};
use super::msg::{self, Body};
use super::views::{self, Event};
use super::NlError;

/// A socket subscribed to RDMA device events.
pub struct Monitor {
    sock: netlink_sys::Socket,
    buf: Vec<u8>,
}

fn errno(e: &std::io::Error) -> Errno {
    Errno(e.raw_os_error().unwrap_or(Errno::EIO.0))
}

/// Whether the kernel behind `src` announces device events: its
/// RDMA_NLDEV_CMD_SYS_GET reply carries the MONITOR_MODE attribute, which kernels
/// with RDMA monitoring send (on others a subscription works but stays silent).
/// `None` when the question is not answered.
pub fn announces(src: &dyn crate::source::Source) -> Option<bool> {
    let replies = super::exchange(src, &super::requests::sys()).ok()?;
    let sys = views::sys(replies.first()?).ok()?;
    Some(sys.monitor_mode.is_some())
}

impl Monitor {
    /// Opens NETLINK_RDMA and joins the notify group.
    ///
    /// # Errors
    /// EPROTONOSUPPORT when the kernel has no RDMA netlink; the errno of bind or
    /// setsockopt(NETLINK_ADD_MEMBERSHIP) otherwise (older kernels have no group 4:
    /// joining still works, but no event ever arrives).
    pub fn open() -> Result<Monitor, Errno> {
        let mut sock = netlink_sys::Socket::new(NETLINK_RDMA as isize).map_err(|e| errno(&e))?;
        sock.bind_auto().map_err(|e| errno(&e))?;
        sock.add_membership(RDMA_NL_GROUP_NOTIFY)
            .map_err(|e| errno(&e))?;
        Ok(Monitor {
            sock,
            buf: vec![0; 1 << 16],
        })
    }

    /// Blocks until the next datagram and returns its events (a malformed one is an
    /// `Err` in the list; reading goes on).
    ///
    /// # Errors
    /// The errno of recv(2).
    pub fn wait_events(&mut self) -> Result<Vec<Result<Event, NlError>>, Errno> {
        let n = self
            .sock
            .recv(&mut &mut self.buf[..], 0)
            .map_err(|e| errno(&e))?;
        Ok(decode(&self.buf[..n]))
    }
}

/// Decodes one datagram of the notify group.
pub fn decode(dgram: &[u8]) -> Vec<Result<Event, NlError>> {
    match msg::parse_messages(dgram) {
        Err(e) => vec![Err(NlError::Malformed(e))],
        Ok(msgs) => msgs
            .into_iter()
            .filter_map(|m| match m.body {
                Body::Data(p) if m.kind == nldev(cmd::MONITOR) => Some(
                    msg::parse_attrs(&p)
                        .and_then(|a| views::event(&a))
                        .map_err(NlError::Malformed),
                ),
                _ => None,
            })
            .collect(),
    }
}
