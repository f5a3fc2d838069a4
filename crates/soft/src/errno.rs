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

    /// The symbolic name (`"EINVAL"`), or `"E?"` for a value not listed here.
    pub const fn name(self) -> &'static str {
        match self.0 {
            1 => "EPERM",
            2 => "ENOENT",
            5 => "EIO",
            11 => "EAGAIN",
            12 => "ENOMEM",
            14 => "EFAULT",
            16 => "EBUSY",
            19 => "ENODEV",
            22 => "EINVAL",
            28 => "ENOSPC",
            38 => "ENOSYS",
            95 => "EOPNOTSUPP",
            98 => "EADDRINUSE",
            99 => "EADDRNOTAVAIL",
            110 => "ETIMEDOUT",
            _ => "E?",
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

/// Where in a real stack the failure would have surfaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The user-space provider library (rdma-core's librxe: post_send/post_recv
    /// argument checks, device open).
    Library,
    /// The kernel driver (rxe_verbs.c: resource tables, limits, modify_qp).
    Kernel,
    /// The device itself (DMA mapping, the wire).
    Hardware,
}

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
