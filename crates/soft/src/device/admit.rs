//! How a new object is admitted against the device's limits: its table
//! checks its own count against its [`Limit`] (rxe's pool limit), then the
//! registry counts every process's objects of that kind (live or leaked)
//! against the same limit. Either refusal is the exhaustion errno the
//! device was configured with (rxe's `EINVAL`, or mlx5's `ENOSPC`).

use crate::errno::{Errno, Origin, Result, SoftError};
use crate::registry::{Kind, Registry};

use super::err;

/// A device limit on the number of objects of one kind: its name as
/// `ibv_query_device` reports it (`max_qp`, ...) and its value.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limit {
    name: &'static str,
    max: u32,
}

impl Limit {
    /// The limit `name` of value `max`.
    pub(super) fn new(name: &'static str, max: u32) -> Limit {
        Limit { name, max }
    }
}

/// The device's admission of new objects: the exhaustion errno and the
/// registry shared with the other processes using the device.
#[derive(Debug)]
pub(super) struct Admission {
    /// The device's name, for messages.
    device: String,
    registry: Option<Registry>,
    exhaustion: Errno,
}

impl Admission {
    /// Admission for device `device`, counting across processes in
    /// `registry` (None: this process alone), refusing with `exhaustion`.
    pub(super) fn new(device: String, registry: Option<Registry>, exhaustion: Errno) -> Admission {
        Admission {
            device,
            registry,
            exhaustion,
        }
    }

    /// The registry shared with other processes, if any.
    pub(super) fn registry(&self) -> Option<&Registry> {
        self.registry.as_ref()
    }

    /// Whether one more object fits beside the `live` ones of this
    /// process: the error of a create verb past `limit` otherwise.
    pub(super) fn check(&self, verb: &'static str, live: usize, limit: Limit) -> Result<()> {
        if live >= limit.max as usize {
            return Err(self.exhausted(verb, limit.name, limit.max));
        }
        Ok(())
    }

    /// The error of a create verb past a device limit: rxe's `EINVAL`
    /// (`__rxe_add_to_pool` once num_elem > max_elem) or, in ENOSPC mode,
    /// mlx5's `ENOSPC`.
    pub(super) fn exhausted(&self, verb: &'static str, what: &str, limit: u32) -> SoftError {
        err(
            verb,
            self.exhaustion,
            Origin::Kernel,
            format!("{what} ({limit}) reached"),
        )
    }

    /// Records a new object in the shared registry; fails like the device
    /// limit when every process's objects of this kind (live or leaked)
    /// already reach `limit`.
    pub(super) fn register(
        &self,
        verb: &'static str,
        kind: Kind,
        handle: u32,
        limit: Limit,
    ) -> Result<()> {
        let Some(r) = &self.registry else {
            return Ok(());
        };
        match r.add(kind, handle, limit.max) {
            Ok(true) => Ok(()),
            Ok(false) => Err(err(
                verb,
                self.exhaustion,
                Origin::Kernel,
                format!(
                    "{} ({}) reached across all processes using {} (registry {})",
                    limit.name,
                    limit.max,
                    self.device,
                    r.dir().display()
                ),
            )),
            Err(e) => Err(err(
                verb,
                io_errno(&e),
                Origin::Library,
                format!("resource registry {}: {e}", r.dir().display()),
            )),
        }
    }

    /// Removes an object's registry record; errors are ignored (the object
    /// is gone either way, and `rdmakit soft status` shows a stale record).
    pub(super) fn unregister(&self, kind: Kind, handle: u32) {
        if let Some(r) = &self.registry {
            let _ = r.remove(kind, handle);
        }
    }

    /// Removes this context from the registry (the device closes, or its
    /// open failed).
    pub(super) fn remove_instance(&self) {
        if let Some(r) = &self.registry {
            r.remove_instance();
        }
    }
}

/// The errno of a registry error: its own, else by kind.
fn io_errno(e: &std::io::Error) -> Errno {
    use std::io::ErrorKind as K;
    match (e.raw_os_error(), e.kind()) {
        (Some(n), _) => Errno(n),
        (None, K::PermissionDenied) => Errno(13),
        (None, K::TimedOut) => Errno::ETIMEDOUT,
        (None, K::NotFound) => Errno::ENOENT,
        (None, K::InvalidInput) => Errno::EINVAL,
        _ => Errno::EIO,
    }
}

/// `ibv_open_device` failing on the registry at `path`.
pub(super) fn registry_error(e: &std::io::Error, path: &std::path::Path) -> SoftError {
    err(
        "ibv_open_device",
        io_errno(e),
        Origin::Library,
        format!(
            "the soft NIC's resource registry ({}) cannot be used: {e}",
            path.display()
        ),
    )
}
