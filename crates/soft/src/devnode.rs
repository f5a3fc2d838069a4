//! The device node programs probe for.
//!
//! Some programs decide whether a verbs device is usable by looking at its
//! node in `/dev/infiniband` before opening it: UCX lists a device only when
//! `/dev/infiniband/<ibv_device.dev_name>` is a character device it may read
//! and write (`uct_ib_device_is_accessible`). The soft NIC has no kernel
//! device; its drop-in libibverbs names its node `rdmakit-<device>`, and
//! [`install`] (run by `rdmakit shim install` as root) makes that name a
//! link to `/dev/null` — a character device every user may open, which the
//! soft NIC never opens itself. rdma-core's libibverbs and the doctor look
//! only at `uverbs*`, `umad*`, `issm*` and `rdma_cm` nodes, which the kernel
//! creates; this name cannot collide with them.

use std::io;
use std::path::{Path, PathBuf};

/// Where device nodes live.
pub const DIR: &str = "/dev/infiniband";

/// The node name of soft device `name` (`ibv_device.dev_name`).
pub fn dev_name(name: &str) -> String {
    format!("rdmakit-{name}")
}

/// The node's path.
pub fn path(name: &str) -> PathBuf {
    Path::new(DIR).join(dev_name(name))
}

/// What [`install`] found or did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Installed {
    /// It was already a link to `/dev/null`.
    Present,
    /// It was created.
    Created,
}

/// Makes [`path`]`(name)` a link to `/dev/null` (creating `/dev/infiniband`
/// if needed). Needs root: `/dev` belongs to root.
///
/// # Errors
/// The directory or link cannot be created (`PermissionDenied` without
/// root), or the name exists as something else (`AlreadyExists`: left as
/// it is).
pub fn install(name: &str) -> io::Result<Installed> {
    let p = path(name);
    match std::fs::read_link(&p) {
        Ok(t) if t == Path::new("/dev/null") => return Ok(Installed::Present),
        Ok(t) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and points at {}", p.display(), t.display()),
            ))
        }
        Err(_) if p.symlink_metadata().is_ok() => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a link; left as it is", p.display()),
            ))
        }
        Err(_) => {}
    }
    std::fs::create_dir_all(DIR)?;
    std::os::unix::fs::symlink("/dev/null", &p)?;
    Ok(Installed::Created)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_never_collide_with_kernel_nodes() {
        for n in ["soft0", "soft1", "x"] {
            let d = dev_name(n);
            assert!(d.starts_with("rdmakit-"));
            assert!(!["uverbs", "umad", "issm", "rdma_cm"]
                .iter()
                .any(|k| d.starts_with(k)));
        }
        assert_eq!(path("soft0"), Path::new("/dev/infiniband/rdmakit-soft0"));
    }
}
