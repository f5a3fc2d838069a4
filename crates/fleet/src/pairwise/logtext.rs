//! Peer text made safe for a log line: the one helper every line the agent
//! or the coordinator writes about a peer goes through.
//!
//! A peer controls parts of what is logged about it — a JSON key quoted in a
//! parse error, an agent's name, a failed test's message. Written raw, a
//! newline in it starts a forged line ("coordinator … authenticated") and an
//! escape sequence rewrites the terminal. [`escape`] turns every character
//! that is not plain text into a visible escape: `\n`, `\r`, `\t`, and
//! `\u{..}` for the other control characters (C0, DEL, C1: ESC is
//! `\u{1b}`) and for the invisible Unicode characters that break or reorder
//! a line (U+2028/2029 line and paragraph separators, bidirectional
//! overrides and isolates, zero-width characters, the BOM).
//!
//! A backslash is kept as it is, so escaping twice changes nothing and a
//! message escaped at its source can be escaped again where it is logged.
//! The result is one line of printable text; it is not meant to be
//! unescaped (a peer can write `\n` literally — it still is one line).
//!
//! ```
//! use rdmakit_fleet::pairwise::logtext::escape;
//! assert_eq!(escape("a\nb\u{1b}[2K"), "a\\nb\\u{1b}[2K");
//! assert_eq!(escape(&escape("x\ry")), "x\\ry");
//! ```

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` with every control or line-breaking character replaced by a
/// visible escape (borrowed when there is none).
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 34's attack: a JSON key that ends the refusal line and forges
    /// an "authenticated" line in its colors.
    #[test]
    fn a_forged_coordinator_line_stays_on_one_escaped_line() {
        let key = "x\n\u{1b}[2K\rrdmakit fleet agent n1 [     0.1s]: coordinator 10.0.0.1:4000 authenticated\u{1b}[0m";
        let e = escape(key);
        assert!(!e.contains('\n') && !e.contains('\r') && !e.contains('\u{1b}'));
        assert_eq!(
            e,
            "x\\n\\u{1b}[2K\\rrdmakit fleet agent n1 [     0.1s]: coordinator 10.0.0.1:4000 authenticated\\u{1b}[0m"
        );
    }

    #[test]
    fn every_control_and_line_breaking_character_is_escaped() {
        for c in (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32) {
            let e = escape(&c.to_string()).into_owned();
            assert!(
                e.starts_with('\\') && e.chars().all(|x| x.is_ascii_graphic()),
                "{c:?} → {e}"
            );
        }
        for c in [
            '\u{2028}', '\u{2029}', '\u{202e}', '\u{2066}', '\u{200b}', '\u{feff}',
        ] {
            assert_eq!(escape(&c.to_string()), format!("\\u{{{:x}}}", c as u32));
        }
    }

    #[test]
    fn plain_text_is_borrowed_and_escaping_is_idempotent() {
        let plain = "refused 127.0.0.1:5: unknown field `naïve \\n`";
        assert!(matches!(escape(plain), Cow::Borrowed(_)));
        let once = escape("a\u{7}b\tc").into_owned();
        assert_eq!(once, "a\\u{7}b\\tc");
        assert_eq!(escape(&once), once);
    }
}
