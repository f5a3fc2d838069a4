//! Errno values (Linux numbering) and the soft device's error type.

use core::fmt;

/// A Linux errno value.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

#[allow(missing_docs)]
impl Errno {
    pub const EPERM: Errno = Errno(1);
    pub const ENOENT: Errno = Errno(2);
    pub const EINTR: Errno = Errno(4);
    pub const EIO: Errno = Errno(5);
    pub const EAGAIN: Errno = Errno(11);
    pub const ENOMEM: Errno = Errno(12);
    pub const EFAULT: Errno = Errno(14);
    pub const EBUSY: Errno = Errno(16);
    pub const ENODEV: Errno = Errno(19);
    pub const EINVAL: Errno = Errno(22);
    pub const ENOSPC: Errno = Errno(28);
    pub const ENOSYS: Errno = Errno(38);
    pub const EOPNOTSUPP: Errno = Errno(95);
    pub const EADDRINUSE: Errno = Errno(98);
    pub const EADDRNOTAVAIL: Errno = Errno(99);
    pub const ETIMEDOUT: Errno = Errno(110);

    /// The symbolic name (`"EINVAL"`, from [`rdmakit_vocab::errno`]), or `"E?"`
    /// for a number Linux does not assign.
    pub const fn name(self) -> &'static str {
        match rdmakit_vocab::errno::name(self.0) {
            Some(n) => n,
            None => "E?",
        }
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// Where in a real stack the failure would have surfaced: the one [`Layer`]
/// of [`rdmakit_vocab`]. The soft device reports `Library` (rdma-core's librxe:
/// post_send/post_recv argument checks, device open), `Kernel` (rxe_verbs.c:
/// resource tables, limits, modify_qp) or `Hardware` (DMA mapping, the wire).
///
/// [`Layer`]: rdmakit_vocab::Layer
pub use rdmakit_vocab::Layer as Origin;

/// A failed soft-device call: the verb, the errno a real driver returns and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{verb}: {errno}: {detail}")]
pub struct SoftError {
    /// The verb (`"ibv_create_qp"`).
    pub verb: &'static str,
    /// The errno.
    pub errno: Errno,
    /// Which layer of a real stack reports this.
    pub origin: Origin,
    /// Human-readable reason.
    pub detail: String,
}

impl SoftError {
    pub(crate) fn new(
        verb: &'static str,
        errno: Errno,
        origin: Origin,
        detail: impl Into<String>,
    ) -> SoftError {
        SoftError {
            verb,
            errno,
            origin,
            detail: detail.into(),
        }
    }
}

/// Result alias of the soft device.
pub type Result<T> = core::result::Result<T, SoftError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_full_table() {
        assert_eq!(Errno::EINVAL.name(), "EINVAL");
        assert_eq!(format!("{:?}", Errno::ENOSPC), "ENOSPC(28)");
        assert_eq!(Errno::EINTR.to_string(), "EINTR (4)");
        assert_eq!(Errno(105).name(), "ENOBUFS");
        assert_eq!(Errno(41).to_string(), "E? (41)");
        assert_eq!(Errno(-1).name(), "E?");
    }
}
