//! The C boundary: errno conventions, panic containment, diagnostics.

use std::panic::{catch_unwind, AssertUnwindSafe};

use libc::c_int;
use rdmakit_soft::SoftError;

/// A failed verb: the errno to hand back.
pub(crate) type Res<T> = Result<T, c_int>;

pub(crate) fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// Runs a verb that returns 0 or a positive errno.
pub(crate) fn int(verb: &'static str, f: impl FnOnce() -> Res<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            debug(verb, e);
            e
        }
        Err(_) => {
            eprintln!("rdmakit libibverbs: internal error in {verb} (returned EIO)");
            libc::EIO
        }
    }
}

/// Runs a verb that returns a count, or a negative errno (`ibv_poll_cq`).
pub(crate) fn count(verb: &'static str, f: impl FnOnce() -> Res<c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => {
            debug(verb, e);
            -e
        }
        Err(_) => {
            eprintln!("rdmakit libibverbs: internal error in {verb} (returned -EIO)");
            -libc::EIO
        }
    }
}

/// Runs a verb that returns 0, or -1 with errno set (`ibv_get_cq_event`,
/// `ibv_query_gid_type`, ...).
pub(crate) fn minus1(verb: &'static str, f: impl FnOnce() -> Res<()>) -> c_int {
    match int(verb, f) {
        0 => 0,
        e => {
            set_errno(e);
            -1
        }
    }
}

/// Runs a verb that returns a pointer, or NULL with errno set.
pub(crate) fn ptr<T>(verb: &'static str, f: impl FnOnce() -> Res<*mut T>) -> *mut T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            debug(verb, e);
            set_errno(e);
            std::ptr::null_mut()
        }
        Err(_) => {
            eprintln!("rdmakit libibverbs: internal error in {verb} (returned EIO)");
            set_errno(libc::EIO);
            std::ptr::null_mut()
        }
    }
}

/// Runs a verb that returns nothing (`ibv_wr_*` builders): a panic is
/// swallowed and reported.
pub(crate) fn void(verb: &'static str, f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        eprintln!("rdmakit libibverbs: internal error in {verb}");
    }
}

/// The errno of a soft-device error, reported when `RDMAKIT_SHIM_DEBUG` is set.
pub(crate) fn soft(e: SoftError) -> c_int {
    if debug_on() {
        eprintln!("rdmakit libibverbs: {e}");
    }
    e.errno.0
}

/// Tells the user, once per message, that a feature is not supported, and
/// returns `EOPNOTSUPP`.
pub(crate) fn unsupported(what: &str) -> c_int {
    eprintln!("rdmakit libibverbs: {what} is not supported by the rdmakit software NIC");
    libc::EOPNOTSUPP
}

pub(crate) fn debug_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("RDMAKIT_SHIM_DEBUG").is_some_and(|v| v != "0"))
}

/// `errno` for a request the library refuses itself, with the reason
/// printed when `RDMAKIT_SHIM_DEBUG` is set (errors from the soft NIC carry
/// theirs through [`soft`]).
pub(crate) fn refuse(errno: c_int, verb: &str, why: &str) -> c_int {
    if debug_on() {
        eprintln!(
            "rdmakit libibverbs: {verb}: {why} ({})",
            std::io::Error::from_raw_os_error(errno)
        );
    }
    errno
}

fn debug(verb: &str, e: c_int) {
    if debug_on() {
        eprintln!(
            "rdmakit libibverbs: {verb}: {}",
            std::io::Error::from_raw_os_error(e)
        );
    }
}

/// `EINVAL` unless `p` is non-NULL.
pub(crate) fn nonnull<T>(p: *mut T) -> Res<*mut T> {
    if p.is_null() {
        Err(libc::EINVAL)
    } else {
        Ok(p)
    }
}

/// Copies `s` into a C char array, NUL-terminated and truncated to fit.
pub(crate) fn put_cstr(dst: &mut [libc::c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = *b as libc::c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}
