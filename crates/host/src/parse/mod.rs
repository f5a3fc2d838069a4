//! Pure parsers for the text the kernel and the packaging system expose.
//!
//! Every function here takes the bytes (or text) of one file or one value and
//! returns plain data. Nothing in this module reads a file, looks at the clock or
//! the environment, so the same input always gives the same output, whether it came
//! from the live host, a re-rooted tree or a recorded bundle.
//!
//! Promises, for every function in every submodule:
//! - **never panics**, whatever the input (fuzzed by `crates/host/fuzz` and by the
//!   property tests in `tests/parse_props.rs`);
//! - a trailing newline (and trailing NULs / whitespace) is ignored;
//! - non-UTF-8 input is read lossily (invalid sequences become U+FFFD) and then
//!   usually fails to parse, which is an [`ParseError`], not a crash;
//! - values a kernel may print in a form we do not know (a new link speed, an
//!   unknown state name) are kept as text rather than rejected.
//!
//! ```
//! use rdmakit_host::parse::sysfs;
//!
//! let rate = sysfs::rate("100 Gb/sec (4X EDR)\n").unwrap();
//! assert_eq!(rate.gbps, 100.0);
//! assert_eq!(rate.width, Some(4));
//! assert_eq!(rate.speed.as_deref(), Some("EDR"));
//!
//! let err = sysfs::u64_value("N/A (no PMA)").unwrap_err();
//! assert_eq!(err.what, "integer");
//! ```

use std::borrow::Cow;

pub mod cgroup;
pub mod cpu;
pub mod kmsg;
pub mod pci;
pub mod pkg;
pub mod proc;
pub mod soft;
pub mod sysfs;

/// Longest prefix of the offending input kept in a [`ParseError`].
pub const ERROR_VALUE_MAX_CHARS: usize = 80;

/// A value that could not be parsed: what was being parsed and (the start of) the
/// text that was there.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{what}: cannot parse {value:?}")]
pub struct ParseError {
    /// What the parser expected, e.g. `"port state"`, `"rate"`.
    pub what: &'static str,
    /// The offending text, cut to [`ERROR_VALUE_MAX_CHARS`] characters.
    pub value: String,
}

impl ParseError {
    /// Builds an error for `what`, keeping at most [`ERROR_VALUE_MAX_CHARS`]
    /// characters of `value`.
    pub fn new(what: &'static str, value: &str) -> Self {
        let value = match value.char_indices().nth(ERROR_VALUE_MAX_CHARS) {
            Some((cut, _)) => value[..cut].to_string(),
            None => value.to_string(),
        };
        ParseError { what, value }
    }
}

/// Result of a parser in this module.
pub type Result<T, E = ParseError> = std::result::Result<T, E>;

/// The bytes of a file as text: borrowed when they are valid UTF-8, otherwise with
/// each invalid sequence replaced by U+FFFD.
pub fn lossy(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_value_is_truncated_on_a_char_boundary() {
        let long = "é".repeat(200);
        let err = ParseError::new("x", &long);
        assert_eq!(err.value.chars().count(), ERROR_VALUE_MAX_CHARS);
        assert_eq!(ParseError::new("x", "short").value, "short");
    }

    #[test]
    fn error_display_names_what_and_value() {
        let err = ParseError::new("rate", "fast");
        assert_eq!(err.to_string(), "rate: cannot parse \"fast\"");
    }
}
