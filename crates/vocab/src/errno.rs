//! Linux errno numbers (x86_64 and the generic table aarch64 shares), their names
//! as glibc's `strerrorname_np` gives them and their messages as `strerror` prints
//! them in the C locale.
//!
//! Where two names share a number (`EWOULDBLOCK`/`EAGAIN`, `EDEADLOCK`/`EDEADLK`,
//! `ENOTSUP`/`EOPNOTSUPP`), [`name`] returns the one glibc returns and [`number`]
//! accepts both. 41 and 58 are unassigned on Linux: they have no name and no
//! message, as in glibc ("Unknown error 41").

use std::borrow::Cow;

/// `(number, name, strerror message)` for every errno Linux assigns, in number order.
///
/// Generated from glibc 2.36's `strerrorname_np` and `strerror` for 1..=133.
pub const ERRNOS: &[(i32, &str, &str)] = &[
    (1, "EPERM", "Operation not permitted"),
    (2, "ENOENT", "No such file or directory"),
    (3, "ESRCH", "No such process"),
    (4, "EINTR", "Interrupted system call"),
    (5, "EIO", "Input/output error"),
    (6, "ENXIO", "No such device or address"),
    (7, "E2BIG", "Argument list too long"),
    (8, "ENOEXEC", "Exec format error"),
    (9, "EBADF", "Bad file descriptor"),
    (10, "ECHILD", "No child processes"),
    (11, "EAGAIN", "Resource temporarily unavailable"),
    (12, "ENOMEM", "Cannot allocate memory"),
    (13, "EACCES", "Permission denied"),
    (14, "EFAULT", "Bad address"),
    (15, "ENOTBLK", "Block device required"),
    (16, "EBUSY", "Device or resource busy"),
    (17, "EEXIST", "File exists"),
    (18, "EXDEV", "Invalid cross-device link"),
    (19, "ENODEV", "No such device"),
    (20, "ENOTDIR", "Not a directory"),
    (21, "EISDIR", "Is a directory"),
    (22, "EINVAL", "Invalid argument"),
    (23, "ENFILE", "Too many open files in system"),
    (24, "EMFILE", "Too many open files"),
    (25, "ENOTTY", "Inappropriate ioctl for device"),
    (26, "ETXTBSY", "Text file busy"),
    (27, "EFBIG", "File too large"),
    (28, "ENOSPC", "No space left on device"),
    (29, "ESPIPE", "Illegal seek"),
    (30, "EROFS", "Read-only file system"),
    (31, "EMLINK", "Too many links"),
    (32, "EPIPE", "Broken pipe"),
    (33, "EDOM", "Numerical argument out of domain"),
    (34, "ERANGE", "Numerical result out of range"),
    (35, "EDEADLK", "Resource deadlock avoided"),
    (36, "ENAMETOOLONG", "File name too long"),
    (37, "ENOLCK", "No locks available"),
    (38, "ENOSYS", "Function not implemented"),
    (39, "ENOTEMPTY", "Directory not empty"),
    (40, "ELOOP", "Too many levels of symbolic links"),
    (42, "ENOMSG", "No message of desired type"),
    (43, "EIDRM", "Identifier removed"),
    (44, "ECHRNG", "Channel number out of range"),
    (45, "EL2NSYNC", "Level 2 not synchronized"),
    (46, "EL3HLT", "Level 3 halted"),
    (47, "EL3RST", "Level 3 reset"),
    (48, "ELNRNG", "Link number out of range"),
    (49, "EUNATCH", "Protocol driver not attached"),
    (50, "ENOCSI", "No CSI structure available"),
    (51, "EL2HLT", "Level 2 halted"),
    (52, "EBADE", "Invalid exchange"),
    (53, "EBADR", "Invalid request descriptor"),
    (54, "EXFULL", "Exchange full"),
    (55, "ENOANO", "No anode"),
    (56, "EBADRQC", "Invalid request code"),
    (57, "EBADSLT", "Invalid slot"),
    (59, "EBFONT", "Bad font file format"),
    (60, "ENOSTR", "Device not a stream"),
    (61, "ENODATA", "No data available"),
    (62, "ETIME", "Timer expired"),
    (63, "ENOSR", "Out of streams resources"),
    (64, "ENONET", "Machine is not on the network"),
    (65, "ENOPKG", "Package not installed"),
    (66, "EREMOTE", "Object is remote"),
    (67, "ENOLINK", "Link has been severed"),
    (68, "EADV", "Advertise error"),
    (69, "ESRMNT", "Srmount error"),
    (70, "ECOMM", "Communication error on send"),
    (71, "EPROTO", "Protocol error"),
    (72, "EMULTIHOP", "Multihop attempted"),
    (73, "EDOTDOT", "RFS specific error"),
    (74, "EBADMSG", "Bad message"),
    (75, "EOVERFLOW", "Value too large for defined data type"),
    (76, "ENOTUNIQ", "Name not unique on network"),
    (77, "EBADFD", "File descriptor in bad state"),
    (78, "EREMCHG", "Remote address changed"),
    (79, "ELIBACC", "Can not access a needed shared library"),
    (80, "ELIBBAD", "Accessing a corrupted shared library"),
    (81, "ELIBSCN", ".lib section in a.out corrupted"),
    (
        82,
        "ELIBMAX",
        "Attempting to link in too many shared libraries",
    ),
    (83, "ELIBEXEC", "Cannot exec a shared library directly"),
    (
        84,
        "EILSEQ",
        "Invalid or incomplete multibyte or wide character",
    ),
    (
        85,
        "ERESTART",
        "Interrupted system call should be restarted",
    ),
    (86, "ESTRPIPE", "Streams pipe error"),
    (87, "EUSERS", "Too many users"),
    (88, "ENOTSOCK", "Socket operation on non-socket"),
    (89, "EDESTADDRREQ", "Destination address required"),
    (90, "EMSGSIZE", "Message too long"),
    (91, "EPROTOTYPE", "Protocol wrong type for socket"),
    (92, "ENOPROTOOPT", "Protocol not available"),
    (93, "EPROTONOSUPPORT", "Protocol not supported"),
    (94, "ESOCKTNOSUPPORT", "Socket type not supported"),
    (95, "EOPNOTSUPP", "Operation not supported"),
    (96, "EPFNOSUPPORT", "Protocol family not supported"),
    (
        97,
        "EAFNOSUPPORT",
        "Address family not supported by protocol",
    ),
    (98, "EADDRINUSE", "Address already in use"),
    (99, "EADDRNOTAVAIL", "Cannot assign requested address"),
    (100, "ENETDOWN", "Network is down"),
    (101, "ENETUNREACH", "Network is unreachable"),
    (102, "ENETRESET", "Network dropped connection on reset"),
    (103, "ECONNABORTED", "Software caused connection abort"),
    (104, "ECONNRESET", "Connection reset by peer"),
    (105, "ENOBUFS", "No buffer space available"),
    (106, "EISCONN", "Transport endpoint is already connected"),
    (107, "ENOTCONN", "Transport endpoint is not connected"),
    (
        108,
        "ESHUTDOWN",
        "Cannot send after transport endpoint shutdown",
    ),
    (109, "ETOOMANYREFS", "Too many references: cannot splice"),
    (110, "ETIMEDOUT", "Connection timed out"),
    (111, "ECONNREFUSED", "Connection refused"),
    (112, "EHOSTDOWN", "Host is down"),
    (113, "EHOSTUNREACH", "No route to host"),
    (114, "EALREADY", "Operation already in progress"),
    (115, "EINPROGRESS", "Operation now in progress"),
    (116, "ESTALE", "Stale file handle"),
    (117, "EUCLEAN", "Structure needs cleaning"),
    (118, "ENOTNAM", "Not a XENIX named type file"),
    (119, "ENAVAIL", "No XENIX semaphores available"),
    (120, "EISNAM", "Is a named type file"),
    (121, "EREMOTEIO", "Remote I/O error"),
    (122, "EDQUOT", "Disk quota exceeded"),
    (123, "ENOMEDIUM", "No medium found"),
    (124, "EMEDIUMTYPE", "Wrong medium type"),
    (125, "ECANCELED", "Operation canceled"),
    (126, "ENOKEY", "Required key not available"),
    (127, "EKEYEXPIRED", "Key has expired"),
    (128, "EKEYREVOKED", "Key has been revoked"),
    (129, "EKEYREJECTED", "Key was rejected by service"),
    (130, "EOWNERDEAD", "Owner died"),
    (131, "ENOTRECOVERABLE", "State not recoverable"),
    (132, "ERFKILL", "Operation not possible due to RF-kill"),
    (133, "EHWPOISON", "Memory page has hardware error"),
];

/// Alternative names and the number they stand for (`ENOTSUP` = `EOPNOTSUPP`).
pub const ALIASES: &[(&str, i32)] = &[("EWOULDBLOCK", 11), ("EDEADLOCK", 35), ("ENOTSUP", 95)];

/// The highest errno number Linux assigns (`EHWPOISON`).
pub const MAX: i32 = 133;

const fn entry(errno: i32) -> Option<&'static (i32, &'static str, &'static str)> {
    let mut i = 0;
    while i < ERRNOS.len() {
        if ERRNOS[i].0 == errno {
            return Some(&ERRNOS[i]);
        }
        i += 1;
    }
    None
}

/// The symbolic name of an errno ("EINVAL"), or `None` for a number Linux does not assign.
pub const fn name(errno: i32) -> Option<&'static str> {
    match entry(errno) {
        Some(e) => Some(e.1),
        None => None,
    }
}

/// The errno number for a name such as "EINVAL", "einval" or an alias ("ENOTSUP").
pub fn number(name: &str) -> Option<i32> {
    ERRNOS
        .iter()
        .find(|(_, s, _)| s.eq_ignore_ascii_case(name))
        .map(|(n, _, _)| *n)
        .or_else(|| {
            ALIASES
                .iter()
                .find(|(s, _)| s.eq_ignore_ascii_case(name))
                .map(|(_, n)| *n)
        })
}

/// The C library's message for an errno ("Invalid argument"), or `None` for a
/// number Linux does not assign.
pub const fn message(errno: i32) -> Option<&'static str> {
    match entry(errno) {
        Some(e) => Some(e.2),
        None => None,
    }
}

/// The message for an errno, or "unknown errno N" for a number Linux does not assign.
pub fn strerror(errno: i32) -> Cow<'static, str> {
    match message(errno) {
        Some(m) => Cow::Borrowed(m),
        None => Cow::Owned(format!("unknown errno {errno}")),
    }
}

/// The errno whose message is `s` ("No space left on device", any case), for
/// pasted `perror` output.
pub fn by_message(s: &str) -> Option<i32> {
    let t = s.trim();
    ERRNOS
        .iter()
        .find(|(_, _, m)| m.eq_ignore_ascii_case(t))
        .map(|(n, _, _)| *n)
}

/// Every errno name, canonical names in number order and then the aliases.
pub fn all_names() -> impl Iterator<Item = &'static str> {
    ERRNOS
        .iter()
        .map(|(_, s, _)| *s)
        .chain(ALIASES.iter().map(|(s, _)| *s))
}

/// An `io::Error` as rdmakit prints it: `ENOENT (No such file or directory)` —
/// the errno's name, then its message — instead of Rust's `No such file or
/// directory (os error 2)`. An error without an errno prints its own text.
pub fn io_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => os_text(n),
        None => plain(&e.to_string()),
    }
}

/// `ENAME (message)` for an errno, `errno N (unknown errno N)` for a number
/// Linux does not assign.
pub fn os_text(errno: i32) -> String {
    match (name(errno), message(errno)) {
        (Some(n), Some(m)) => format!("{n} ({m})"),
        _ => format!("errno {errno} ({})", strerror(errno)),
    }
}

/// `text` with every error Rust's `io::Error` printed into it —
/// `MESSAGE (os error N)` — said as [`io_text`] says it: `ENAME (MESSAGE)`.
/// Text without one comes back unchanged. This is the one place where an
/// error built anywhere below (a library that formatted an `io::Error` into
/// its own message) loses Rust's wording before a user reads it.
///
/// ```
/// use rdmakit_vocab::errno::plain;
/// assert_eq!(
///     plain("/x: No such file or directory (os error 2)"),
///     "/x: ENOENT (No such file or directory)"
/// );
/// assert_eq!(plain("connect: refused (os error 111)"), "connect: refused (ECONNREFUSED)");
/// assert_eq!(plain("nothing to change"), "nothing to change");
/// ```
pub fn plain(text: &str) -> String {
    const TAG: &str = "(os error ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(TAG) {
        let after = &rest[at + TAG.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let number = after[..digits].parse::<i32>().ok();
        let (Some(n), true) = (number, after[digits..].starts_with(')')) else {
            out.push_str(&rest[..at + TAG.len()]);
            rest = after;
            continue;
        };
        let before = rest[..at].strip_suffix(' ').unwrap_or(&rest[..at]);
        match message(n).and_then(|m| before.strip_suffix(m)) {
            // "No such file or directory (os error 2)" -> "ENOENT (No such file or directory)"
            Some(head) => {
                out.push_str(head);
                out.push_str(&os_text(n));
            }
            // Some other text before the number: keep it, name the errno.
            None => {
                out.push_str(before);
                out.push_str(" (");
                out.push_str(&name(n).map_or_else(|| format!("errno {n}"), str::to_string));
                out.push(')');
            }
        }
        rest = &after[digits + 1..];
    }
    out.push_str(rest);
    out
}

/// An error and its causes, each said once, in rdmakit's words: a cause whose
/// text is already in the message — an error type that prints its source and
/// also returns it — is not repeated ("…: No such file or directory (os error
/// 2): No such file or directory (os error 2)"), and Rust's "MESSAGE (os error
/// N)" becomes "ENAME (MESSAGE)" ([`plain`]).
pub fn said_once(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    plain(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error type that shows its source and also returns it, under a
    /// context: said once, and with the errno's name rather than Rust's wording.
    #[test]
    fn enoent_is_said_once_by_its_name() {
        #[derive(Debug)]
        struct Doubling(std::io::Error);
        impl std::fmt::Display for Doubling {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "/nonexistent: {}", self.0)
            }
        }
        impl std::error::Error for Doubling {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        #[derive(Debug)]
        struct Context(&'static str, Doubling);
        impl std::fmt::Display for Context {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Context {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.1)
            }
        }
        let e = Context(
            "--baseline x",
            Doubling(std::io::Error::from_raw_os_error(2)),
        );
        assert_eq!(
            said_once(&e),
            "--baseline x: /nonexistent: ENOENT (No such file or directory)"
        );
        assert_eq!(
            said_once(&std::io::Error::from_raw_os_error(2)),
            "ENOENT (No such file or directory)"
        );
    }

    /// The numbers Linux leaves unassigned below [`MAX`].
    const UNASSIGNED: [i32; 2] = [41, 58];

    #[test]
    fn every_assigned_number_has_a_name_and_a_message() {
        for n in 1..=MAX {
            if UNASSIGNED.contains(&n) {
                assert_eq!(name(n), None, "{n}");
                assert_eq!(message(n), None, "{n}");
                continue;
            }
            let s = name(n).unwrap_or_else(|| panic!("{n} has no name"));
            assert!(s.starts_with('E') && s.len() >= 3, "{n}: {s}");
            assert!(!message(n).unwrap_or("").is_empty(), "{n} has no message");
        }
        assert_eq!(ERRNOS.len(), MAX as usize - UNASSIGNED.len());
        assert_eq!(name(1), Some("EPERM"));
        assert_eq!(name(MAX), Some("EHWPOISON"));
        assert_eq!(message(MAX), Some("Memory page has hardware error"));
    }

    #[test]
    fn table_is_in_number_order_without_duplicates() {
        for w in ERRNOS.windows(2) {
            assert!(w[0].0 < w[1].0, "{} then {}", w[0].1, w[1].1);
        }
        for (i, (_, s, m)) in ERRNOS.iter().enumerate() {
            for (_, t, o) in &ERRNOS[i + 1..] {
                assert_ne!(s, t);
                assert_ne!(m, o, "{s} and {t} share a message");
            }
        }
    }

    #[test]
    fn name_number_name_round_trips() {
        for (n, s, m) in ERRNOS {
            assert_eq!(number(s), Some(*n), "{s}");
            assert_eq!(number(&s.to_ascii_lowercase()), Some(*n), "{s}");
            assert_eq!(name(*n), Some(*s));
            assert_eq!(by_message(m), Some(*n), "{m}");
        }
    }

    #[test]
    fn aliases_resolve_like_glibc() {
        // strerrorname_np returns the first name; both names parse to the number.
        for (alias, canonical, n) in [
            ("EWOULDBLOCK", "EAGAIN", 11),
            ("EDEADLOCK", "EDEADLK", 35),
            ("ENOTSUP", "EOPNOTSUPP", 95),
        ] {
            assert_eq!(number(alias), Some(n));
            assert_eq!(number(&alias.to_ascii_lowercase()), Some(n));
            assert_eq!(number(canonical), Some(n));
            assert_eq!(name(n), Some(canonical));
        }
        assert_eq!(message(11), Some("Resource temporarily unavailable"));
        assert_eq!(message(35), Some("Resource deadlock avoided"));
        assert_eq!(message(95), Some("Operation not supported"));
        assert_eq!(all_names().count(), ERRNOS.len() + ALIASES.len());
    }

    #[test]
    fn unknown_numbers_and_names_are_none_not_a_panic() {
        for n in [i32::MIN, -1, 0, 41, 58, MAX + 1, 4095, i32::MAX] {
            assert_eq!(name(n), None);
            assert_eq!(message(n), None);
            assert_eq!(strerror(n), format!("unknown errno {n}"));
        }
        assert_eq!(strerror(28), "No space left on device");
        assert_eq!(number("EFOO"), None);
        assert_eq!(number(""), None);
        assert_eq!(by_message("no such message"), None);
        assert_eq!(by_message("  no space left on device "), Some(28));
    }

    #[test]
    fn const_lookups_work_at_compile_time() {
        const N: Option<&str> = name(22);
        const M: Option<&str> = message(22);
        assert_eq!((N, M), (Some("EINVAL"), Some("Invalid argument")));
    }

    #[test]
    fn rust_io_wording_becomes_the_errno_name() {
        let io = std::io::Error::from_raw_os_error(111);
        assert_eq!(io_text(&io), "ECONNREFUSED (Connection refused)");
        assert_eq!(
            plain(&format!("couldn't connect to 127.0.0.1:1: {io}")),
            "couldn't connect to 127.0.0.1:1: ECONNREFUSED (Connection refused)"
        );
        let twice = format!(
            "{}: {}",
            std::io::Error::from_raw_os_error(2),
            std::io::Error::from_raw_os_error(13)
        );
        assert_eq!(
            plain(&twice),
            "ENOENT (No such file or directory): EACCES (Permission denied)"
        );
        assert_eq!(os_text(41), "errno 41 (unknown errno 41)");
        assert_eq!(plain("x (os error 41)"), "x (errno 41)");
        assert_eq!(plain("(os error )"), "(os error )");
        assert_eq!(plain("(os error 2"), "(os error 2");
        assert_eq!(
            plain("a (os error 99999999999)"),
            "a (os error 99999999999)"
        );
        assert_eq!(
            io_text(&std::io::Error::other("gone (os error 2)")),
            "gone (ENOENT)"
        );
    }
}
