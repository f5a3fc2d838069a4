//! Errno numbers and names, as Linux x86_64/aarch64 define them: the table is
//! [`rdmakit_vocab::errno`]; this module adds the label bundles and reports print.
//!
//! A bundle records read errors as numbers *and* names so a bundle taken on one
//! machine reads the same everywhere; rules and reports print the name.

pub use rdmakit_vocab::errno::{io_text, message, name, number, os_text, plain, ERRNOS};

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
    fn round_trip() {
        assert_eq!(number("enospc"), Some(28));
        assert_eq!(name(28), Some("ENOSPC"));
        assert_eq!(display(4242), "errno 4242");
        assert_eq!(display(41), "errno 41");
        assert_eq!(message(28), Some("No space left on device"));
    }
}
