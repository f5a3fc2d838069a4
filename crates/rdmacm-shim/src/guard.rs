//! The C boundary: errno conventions, panic containment, diagnostics.

use std::panic::{catch_unwind, AssertUnwindSafe};

use libc::c_int;

/// A failed call: the errno to hand back.
pub(crate) type Res<T> = Result<T, c_int>;

/// The caller's struct behind `p`; EINVAL when it is NULL.
///
/// # Safety
/// `p` is NULL or points at a live `T` nothing else touches for `'a`.
pub(crate) unsafe fn caller_mut<'a, T>(p: *mut T) -> Res<&'a mut T> {
    // SAFETY: per the contract.
    unsafe { p.as_mut() }.ok_or(libc::EINVAL)
}

pub(crate) fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

fn internal(call: &str) {
    eprintln!("rdmakit librdmacm: internal error in {call} (returned EIO)");
}

/// Runs a call that returns 0, or -1 with errno set (librdmacm's convention).
pub(crate) fn minus1(call: &'static str, f: impl FnOnce() -> Res<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            debug(call, e);
            set_errno(e);
            -1
        }
        Err(_) => {
            internal(call);
            set_errno(libc::EIO);
            -1
        }
    }
}

/// Runs a call that returns a value, or `fail` with errno set.
pub(crate) fn value<T>(call: &'static str, fail: T, f: impl FnOnce() -> Res<T>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            debug(call, e);
            set_errno(e);
            fail
        }
        Err(_) => {
            internal(call);
            set_errno(libc::EIO);
            fail
        }
    }
}

/// Runs a call that returns nothing.
pub(crate) fn void(call: &'static str, f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        eprintln!("rdmakit librdmacm: internal error in {call}");
    }
}

pub(crate) fn debug_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("RDMAKIT_SHIM_DEBUG").is_some_and(|v| v != "0"))
}

fn debug(call: &str, e: c_int) {
    if debug_on() {
        eprintln!(
            "rdmakit librdmacm: {call}: {}",
            std::io::Error::from_raw_os_error(e)
        );
    }
}

/// Prints why a call fails when `RDMAKIT_SHIM_DEBUG` is set, and returns `e`.
pub(crate) fn why(e: c_int, what: impl std::fmt::Display) -> c_int {
    if debug_on() {
        eprintln!("rdmakit librdmacm: {what}");
    }
    e
}

/// Tells the user once per feature that it is not supported.
pub(crate) fn unsupported(what: &str) -> c_int {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut g = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if g.get_or_insert_with(HashSet::new).insert(what.to_string()) {
        eprintln!("rdmakit librdmacm: {what} is not supported on the rdmakit software NIC");
    }
    libc::ENOSYS
}
