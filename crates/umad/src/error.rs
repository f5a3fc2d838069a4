//! Errors: [`Error`] for a failed libibumad call (the verb, the errno and
//! the stack layer), [`MadError`] for one request of a transaction.

use rdmakit_vocab::errno::os_text;
pub use rdmakit_vocab::Layer;

/// A failed libibumad call: the verb, the errno and where to look next.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{verb} failed with {} ({layer} layer): {detail}", os_text(*errno))]
pub struct Error {
    /// The call, named as in libibumad (`"umad_open_port"`), or `"dlopen"`.
    pub verb: &'static str,
    /// The errno (positive).
    pub errno: i32,
    /// The layer to look at.
    pub layer: Layer,
    /// Why, in words, with the remedy.
    pub detail: String,
}

impl Error {
    pub(crate) fn new(
        verb: &'static str,
        errno: i32,
        layer: Layer,
        detail: impl Into<String>,
    ) -> Self {
        Error {
            verb,
            errno: errno.abs(),
            layer,
            detail: detail.into(),
        }
    }
}

/// Why one request of [`crate::Port::transact`] got no usable reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MadError {
    /// No valid reply within the policy: every attempt timed out (no
    /// reply, or the port reported the send timed out). Fabric layer.
    #[error(
        "timed out: no reply after {attempts} attempt(s) of {timeout_ms} ms (fabric layer): \
             the destination is unreachable, its agent is not answering, or the route drops MADs"
    )]
    Timeout {
        /// Attempts made (1 + retries).
        attempts: u32,
        /// The per-attempt timeout.
        timeout_ms: u64,
    },
    /// The reply's MAD status was nonzero (for a directed-route SMP, the
    /// D bit is masked off). Fabric layer: the remote agent refused.
    #[error("reply status 0x{code:04x}: {} (fabric layer)", status_text(*.0), code = .0)]
    Status(u16),
    /// The request itself is wrong (application layer), it was not sent.
    #[error("request not sent (application layer): {0}")]
    Invalid(&'static str),
    /// The port failed while the request was outstanding (send or receive).
    #[error(transparent)]
    Port(#[from] Error),
}

impl MadError {
    /// The layer to look at.
    pub fn layer(&self) -> Layer {
        match self {
            MadError::Timeout { .. } | MadError::Status(_) => Layer::Fabric,
            MadError::Invalid(_) => Layer::Application,
            MadError::Port(e) => e.layer,
        }
    }
}

/// The meaning of a MAD status (IBTA Vol 1 §13.4.7, the common bits).
pub fn status_text(status: u16) -> &'static str {
    match (status >> 2) & 0x7 {
        1 => "bad base or class version",
        2 => "method not supported",
        3 => "method/attribute combination not supported",
        7 => "invalid attribute or attribute modifier",
        0 if status & 1 != 0 => "busy",
        0 if status & 2 != 0 => "redirect required",
        0 => "class-specific error",
        _ => "reserved status code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_verb_errno_and_layer() {
        let e = Error::new("umad_open_port", -13, Layer::Application, "x");
        assert_eq!(e.errno, 13);
        let s = e.to_string();
        assert!(
            s.contains("umad_open_port") && s.contains("EACCES") && s.contains("application"),
            "{s}"
        );
        let t = MadError::Timeout {
            attempts: 4,
            timeout_ms: 200,
        };
        assert_eq!(t.layer(), Layer::Fabric);
        assert!(t.to_string().contains("4 attempt"));
        assert_eq!(
            MadError::Status(0x1c).to_string(),
            "reply status 0x001c: invalid attribute or attribute modifier (fabric layer)"
        );
        assert_eq!(MadError::Port(e).layer(), Layer::Application);
    }
}
