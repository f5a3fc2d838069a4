//! Pure parsers for the text of the commands [`super::EthQuery`] is answered
//! with: `ethtool -S`, `ethtool -a`, `ethtool --show-fec` ([`ethtool`]) and
//! iproute2's `dcb` or MLNX_OFED's `mlnx_qos -i IF` ([`dcb`], both into one
//! [`dcb::Dcb`]). Module EEPROM dumps are [`super::optics`].
//!
//! Promises, for every function here: no I/O; text beyond [`MAX_TEXT`] bytes is
//! ignored; no input panics (property-tested with arbitrary text); a line that
//! cannot be what its command prints is a [`TextError`] naming the command, the
//! line number and the line; lines a newer tool might add and this parser does
//! not know are skipped (kept in `unknown` where the result has one), not
//! rejected.
//!
//! ```
//! use rdmakit_host::ethernet::parse::ethtool;
//!
//! let stats = ethtool::stats("NIC statistics:\n     rx_prio3_pause: 17\n     [0]: rx_bytes: 9\n").unwrap();
//! assert_eq!(stats, vec![("rx_prio3_pause".to_string(), 17), ("[0]: rx_bytes".to_string(), 9)]);
//! ```

pub mod dcb;
pub mod ethtool;

/// Text beyond this many bytes is ignored.
pub const MAX_TEXT: usize = 4 * 1024 * 1024;

/// A line that cannot be what the command prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{command} output, line {line}: {reason}: {text:?}")]
pub struct TextError {
    /// The command whose output was being read (`"ethtool -S"`).
    pub command: &'static str,
    /// 1-based line number (0 when the whole output is at fault).
    pub line: usize,
    /// The line, cut to 80 characters.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl TextError {
    pub(crate) fn new(
        command: &'static str,
        line: usize,
        text: &str,
        reason: &'static str,
    ) -> TextError {
        TextError {
            command,
            line,
            text: text.chars().take(80).collect(),
            reason,
        }
    }
}

/// `text` cut to [`MAX_TEXT`] bytes at a character boundary, with its lines
/// numbered from 1.
pub(crate) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut end = text.len().min(MAX_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].lines().enumerate().map(|(i, l)| (i + 1, l))
}

/// `on`/`off` (and `n/a`, printed by netlink ethtool for an absent attribute).
pub(crate) fn on_off(value: &str) -> Option<Option<bool>> {
    match value {
        "on" => Some(Some(true)),
        "off" => Some(Some(false)),
        "n/a" => Some(None),
        _ => None,
    }
}
