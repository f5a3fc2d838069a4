//! Errno numbers and names, as Linux x86_64/aarch64 define them.
//!
//! A bundle records read errors as numbers *and* names so a bundle taken on one
//! machine reads the same everywhere; rules and reports print the name.

/// `(number, name, one-line meaning)` for the errnos that matter to RDMA tools.
pub const ERRNOS: &[(i32, &str, &str)] = &[
    (1, "EPERM", "Operation not permitted"),
    (2, "ENOENT", "No such file or directory"),
    (3, "ESRCH", "No such process"),
    (4, "EINTR", "Interrupted system call"),
    (5, "EIO", "Input/output error"),
    (6, "ENXIO", "No such device or address"),
    (7, "E2BIG", "Argument list too long"),
    (9, "EBADF", "Bad file descriptor"),
    (11, "EAGAIN", "Resource temporarily unavailable"),
    (12, "ENOMEM", "Cannot allocate memory"),
    (13, "EACCES", "Permission denied"),
    (14, "EFAULT", "Bad address"),
    (16, "EBUSY", "Device or resource busy"),
    (17, "EEXIST", "File exists"),
    (19, "ENODEV", "No such device"),
    (20, "ENOTDIR", "Not a directory"),
    (21, "EISDIR", "Is a directory"),
    (22, "EINVAL", "Invalid argument"),
    (23, "ENFILE", "Too many open files in system"),
    (24, "EMFILE", "Too many open files"),
    (28, "ENOSPC", "No space left on device"),
    (32, "EPIPE", "Broken pipe"),
    (34, "ERANGE", "Numerical result out of range"),
    (38, "ENOSYS", "Function not implemented"),
    (40, "ELOOP", "Too many levels of symbolic links"),
    (61, "ENODATA", "No data available"),
    (62, "ETIME", "Timer expired"),
    (71, "EPROTO", "Protocol error"),
    (90, "EMSGSIZE", "Message too long"),
    (93, "EPROTONOSUPPORT", "Protocol not supported"),
    (95, "EOPNOTSUPP", "Operation not supported"),
    (
        97,
        "EAFNOSUPPORT",
        "Address family not supported by protocol",
    ),
    (98, "EADDRINUSE", "Address already in use"),
    (99, "EADDRNOTAVAIL", "Cannot assign requested address"),
    (100, "ENETDOWN", "Network is down"),
    (101, "ENETUNREACH", "Network is unreachable"),
    (103, "ECONNABORTED", "Software caused connection abort"),
    (104, "ECONNRESET", "Connection reset by peer"),
    (110, "ETIMEDOUT", "Connection timed out"),
    (111, "ECONNREFUSED", "Connection refused"),
    (113, "EHOSTUNREACH", "No route to host"),
    (125, "ECANCELED", "Operation canceled"),
    (130, "EOWNERDEAD", "Owner died"),
];

/// The symbolic name of an errno ("EINVAL"), or `None` for numbers not in [`ERRNOS`].
pub fn name(errno: i32) -> Option<&'static str> {
    ERRNOS
        .iter()
        .find(|(n, _, _)| *n == errno)
        .map(|(_, s, _)| *s)
}

/// The errno number for a name such as "EINVAL" or "einval".
pub fn number(name: &str) -> Option<i32> {
    ERRNOS
        .iter()
        .find(|(_, s, _)| s.eq_ignore_ascii_case(name))
        .map(|(n, _, _)| *n)
}

/// The C library's message for an errno ("Invalid argument").
pub fn message(errno: i32) -> Option<&'static str> {
    ERRNOS
        .iter()
        .find(|(n, _, _)| *n == errno)
        .map(|(_, _, m)| *m)
}

/// "EINVAL" for known numbers, "errno 4242" otherwise.
pub fn display(errno: i32) -> String {
    match name(errno) {
        Some(n) => n.to_string(),
        None => format!("errno {errno}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_are_unique() {
        for (i, (n, s, _)) in ERRNOS.iter().enumerate() {
            for (m, t, _) in &ERRNOS[i + 1..] {
                assert_ne!(n, m, "{s} and {t} share a number");
                assert_ne!(s, t);
            }
        }
    }

    #[test]
    fn round_trip() {
        assert_eq!(number("enospc"), Some(28));
        assert_eq!(name(28), Some("ENOSPC"));
        assert_eq!(display(4242), "errno 4242");
    }
}
