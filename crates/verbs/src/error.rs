//! The one error type of the Verbs API: verb, errno and stack layer.

pub use rdmakit_soft::Errno;

/// The layer of the RDMA stack a failure belongs to (layered fault
/// localization): where to look next. One enum for the whole stack, from
/// [`rdmakit_vocab`]; it prints as "application", "library", "kernel" or "hardware".
pub use rdmakit_vocab::Layer;

/// A failed verb: the one error type of this crate.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{verb} failed with {errno} ({layer} layer): {detail}{}", bad_wr_text(*.bad_wr))]
pub struct Error {
    /// The verb, named as in libibverbs (`"ibv_create_qp"`).
    pub verb: &'static str,
    /// The errno.
    pub errno: Errno,
    /// The layer that reported it.
    pub layer: Layer,
    /// Why, in words.
    pub detail: String,
    /// For a post of a list: index of the first work request not posted
    /// (libibverbs' `bad_wr`).
    pub bad_wr: Option<usize>,
}

fn bad_wr_text(i: Option<usize>) -> String {
    i.map(|i| format!(" (work request {i} of the list)"))
        .unwrap_or_default()
}

impl Error {
    /// An error of the application layer (bad arguments caught by this crate).
    pub fn application(verb: &'static str, errno: Errno, detail: impl Into<String>) -> Error {
        Error {
            verb,
            errno,
            layer: Layer::Application,
            detail: detail.into(),
            bad_wr: None,
        }
    }
}

impl From<rdmakit_soft::SoftError> for Error {
    fn from(e: rdmakit_soft::SoftError) -> Error {
        Error {
            verb: e.verb,
            errno: e.errno,
            // soft's `Origin` is the same `Layer`.
            layer: e.origin,
            detail: e.detail,
            bad_wr: None,
        }
    }
}

/// Result alias.
pub type Result<T> = core::result::Result<T, Error>;

impl From<rdmakit_soft::PostFailure> for Error {
    fn from(f: rdmakit_soft::PostFailure) -> Error {
        Error {
            bad_wr: Some(f.index),
            ..Error::from(f.error)
        }
    }
}
