//! One-line forms of a finding, for the consumers that keep only a short line:
//! node-problem-detector's message (80 bytes, [`crate::npd`]) and Slurm's drain
//! reason (160 characters, shown by `sinfo -R`).
//!
//! A line leads with what an operator acts on — the code, then the device and
//! port (the finding's subject) — and then says what is wrong in as much detail
//! as fits. When the whole message does not fit, its brief form
//! ([`Finding::brief`]) stands in where the rule gave one, and detail is
//! dropped, never a part of a word: first the parenthesized asides (the last
//! one first), then trailing sentences, then clauses after `; `, then what
//! follows the last `: ` or `, ` (an explanation, a list's last item:
//! `a, b, c` → `a ...`), then trailing words. A line that had more than asides
//! dropped ends with ` ...`.
//!
//! Pure functions of their inputs; nothing here panics on any text.
//!
//! ```
//! use rdmakit_doctor::codes::Code;
//! use rdmakit_doctor::finding::Finding;
//! use rdmakit_doctor::oneline::{finding_line, Unit};
//! let f = Finding::new(Code::H002, "mlx5_0 port 1", "mlx5_0 port 1 is DOWN (physical state Disabled)");
//! assert_eq!(
//!     finding_line("", &f, "", 80, Unit::Bytes),
//!     "RDK-H002 mlx5_0 port 1 is DOWN (physical state Disabled)"
//! );
//! assert_eq!(finding_line("", &f, "", 32, Unit::Bytes), "RDK-H002 mlx5_0 port 1 is DOWN");
//! ```

use crate::finding::Finding;

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// UTF-8 bytes (node-problem-detector's `max_output_length`).
    Bytes,
    /// Characters (Slurm's reason, as `sinfo` shows it).
    Chars,
}

impl Unit {
    /// The length of `s` in this unit.
    pub fn len(self, s: &str) -> usize {
        match self {
            Unit::Bytes => s.len(),
            Unit::Chars => s.chars().count(),
        }
    }
}

/// What ends a line that had clauses or words dropped.
pub const MORE: &str = " ...";

/// The subjects that name no device: the line then leads with the code alone.
const NO_DEVICE: &[&str] = &["host", ""];

/// `lead` (e.g. `"rdmakit: "`), the finding's code and subject, what is wrong,
/// and `tail` (e.g. `" (+2 more)"`), within `max` units. The code and the subject
/// are always whole; the message is shortened as the module doc says. When even
/// the code, subject and tail do not fit, the tail goes first.
pub fn finding_line(lead: &str, f: &Finding, tail: &str, max: usize, unit: Unit) -> String {
    let subject = one_line(&f.subject);
    let message = one_line(&f.message);
    let code = f.code.as_str();
    // The subject leads. A message that starts with it ("mlx5_0 port 1 is DOWN")
    // continues the head; any other gets "subject:" before it.
    let (head, sep, body) = if NO_DEVICE.contains(&subject.as_str()) {
        (format!("{lead}{code}"), " ", message.as_str())
    } else if let Some(rest) = message
        .strip_prefix(subject.as_str())
        .filter(|r| r.is_empty() || r.starts_with([' ', ':', ',', ';']))
    {
        let body = rest.trim_start_matches([':', ',', ';', ' ']);
        let sep = &rest[..rest.len() - body.len()];
        (format!("{lead}{code} {subject}"), sep, body)
    } else {
        (format!("{lead}{code} {subject}:"), " ", message.as_str())
    };
    let tail = one_line(tail);
    let tail = if tail.is_empty() {
        String::new()
    } else {
        format!(" {tail}")
    };
    for tail in [tail.as_str(), ""] {
        let fixed = unit.len(&head) + unit.len(tail);
        if fixed > max {
            continue;
        }
        let room = max - fixed;
        let body_room = room.saturating_sub(unit.len(sep));
        // A message that does not fit whole gives way to its brief form.
        let body = match &f.brief {
            Some(b) if unit.len(body) > body_room => b.as_str(),
            _ => body,
        };
        let short = shorten_to(body, body_room, unit, false);
        return if short.is_empty() || unit.len(sep) > room {
            format!("{head}{tail}")
        } else {
            format!("{head}{sep}{short}{tail}")
        };
    }
    shorten(&head, max, unit)
}

/// `text` on one line, within `max` units: whole if it fits, else shortened as
/// the module doc says, ending with [`MORE`] once anything but an aside was
/// dropped. Only a single word longer than `max` is ever cut inside (at a
/// character boundary); empty when `max` leaves no room for a word.
pub fn shorten(text: &str, max: usize, unit: Unit) -> String {
    shorten_to(text, max, unit, true)
}

/// [`shorten`]; `cut`: whether a single word longer than `max` may be cut
/// (else the answer is empty).
fn shorten_to(text: &str, max: usize, unit: Unit, cut: bool) -> String {
    let mut s = one_line(text);
    let fits = |s: &str| unit.len(s) <= max;
    if fits(&s) {
        return s;
    }
    // 1. Asides in parentheses, the last one first.
    while let Some((open, close)) = last_aside(&s) {
        let before = s[..open].trim_end();
        let after = &s[close + 1..];
        s = format!("{before}{after}");
        if fits(&s) {
            return s;
        }
    }
    // 2. Trailing sentences, then clauses after "; ", then the last of what
    //    follows ": " or ", " (an explanation or a list item), repeatedly.
    for seps in [&[". "][..], &["; "], &[": ", ", "]] {
        while let Some(at) = last_separator(&s, seps) {
            s.truncate(at);
            let t = with_more(&s);
            if fits(&t) {
                return t;
            }
        }
    }
    // 3. Trailing words.
    let words: Vec<&str> = s.split(' ').collect();
    for n in (1..words.len()).rev() {
        let t = with_more(&words[..n].join(" "));
        if fits(&t) {
            return t;
        }
    }
    // 4. One word longer than the room: a path or a token with no break in it.
    let first = words.first().copied().unwrap_or("");
    if unit.len(first) <= max {
        return first.to_string();
    }
    if !cut {
        return String::new();
    }
    let mut end = 0;
    for (i, c) in first.char_indices() {
        let next = i + c.len_utf8();
        if unit.len(&first[..next]) > max {
            break;
        }
        end = next;
    }
    first[..end].to_string()
}

/// Control characters and line breaks become spaces; runs of spaces collapse.
pub fn one_line(s: &str) -> String {
    s.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `s` without trailing punctuation, with [`MORE`].
fn with_more(s: &str) -> String {
    let s = s.trim_end_matches([' ', ',', ';', ':']);
    if s.is_empty() {
        return String::new();
    }
    format!("{s}{MORE}")
}

/// The byte range (open, close) of the last balanced top-level "(...)" that
/// does not start the text.
fn last_aside(s: &str) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut open = None;
    let mut last = None;
    for (i, c) in s.char_indices() {
        match c {
            '(' => {
                if depth == 0 {
                    open = Some(i);
                }
                depth += 1;
            }
            ')' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    if let Some(o) = open.take().filter(|o| *o > 0) {
                        last = Some((o, i));
                    }
                }
            }
            _ => {}
        }
    }
    last
}

/// Where the last of `seps` outside parentheses starts, after at least two
/// words (a clause is never shortened to its first word: "unknown: ...").
fn last_separator(s: &str, seps: &[&str]) -> Option<usize> {
    let mut depth = 0i32;
    let mut last = None;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth <= 0
                && s[..i].trim().contains(' ')
                && seps.iter().any(|p| s[i..].starts_with(p)) =>
            {
                last = Some(i)
            }
            _ => {}
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::Code;
    use proptest::prelude::*;

    #[test]
    fn asides_go_first_then_clauses_then_words() {
        let s = "error counters: a 1 (saturated: x), b 2 (saturated: y), c 3";
        assert_eq!(shorten(s, 100, Unit::Bytes), s);
        assert_eq!(
            shorten(s, 50, Unit::Bytes),
            "error counters: a 1 (saturated: x), b 2, c 3"
        );
        assert_eq!(shorten(s, 35, Unit::Bytes), "error counters: a 1, b 2, c 3");
        assert_eq!(shorten(s, 28, Unit::Bytes), "error counters: a 1, b 2 ...");
        assert_eq!(shorten(s, 23, Unit::Bytes), "error counters: a 1 ...");
        assert_eq!(shorten(s, 19, Unit::Bytes), "error counters ...");
        assert_eq!(shorten("unbreakable", 4, Unit::Bytes), "unbr");
        assert_eq!(shorten("éé éé", 3, Unit::Bytes), "é");
        assert_eq!(shorten("", 0, Unit::Bytes), "");
    }

    #[test]
    fn the_subject_leads_whether_or_not_the_message_names_it() {
        let down = Finding::new(Code::H002, "rxe0 port 1", "rxe0 port 1 is DOWN");
        assert_eq!(
            finding_line("rdmakit: ", &down, "(+1 more)", 160, Unit::Chars),
            "rdmakit: RDK-H002 rxe0 port 1 is DOWN (+1 more)"
        );
        let gid = Finding::new(Code::H007, "rxe0 port 1", "use GID index 1 (10.0.2.15)");
        assert_eq!(
            finding_line("", &gid, "", 80, Unit::Bytes),
            "RDK-H007 rxe0 port 1: use GID index 1 (10.0.2.15)"
        );
        let host = Finding::new(Code::K001, "host", "kernel 6.1 has no RDMA support");
        assert_eq!(
            finding_line("", &host, "", 80, Unit::Bytes),
            "RDK-K001 kernel 6.1 has no RDMA support"
        );
        // Too little room for the tail: the tail goes, the head stays whole.
        assert_eq!(
            finding_line("", &down, "(+1 more)", 22, Unit::Bytes),
            "RDK-H002 rxe0 port 1"
        );
    }

    fn words(s: &str) -> Vec<String> {
        s.split(' ')
            .map(|w| w.trim_matches(|c: char| ",;:()".contains(c)).to_string())
            .filter(|w| !w.is_empty())
            .collect()
    }

    proptest! {
        /// Any text: within the limit, and every word of the line is a whole word
        /// of the text (none cut), unless the text's first word alone is too long.
        #[test]
        fn never_over_the_limit_never_a_cut_word(
            parts in proptest::collection::vec("[a-zé_0-9]{1,12}( \\([a-z ]{1,20}\\))?", 1..12),
            seps in proptest::collection::vec(prop_oneof![Just(" "), Just(", "), Just("; "), Just(": ")], 12),
            max in 0usize..120,
        ) {
            let mut text = String::new();
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    text.push_str(seps[i]);
                }
                text.push_str(p);
            }
            for unit in [Unit::Bytes, Unit::Chars] {
                let s = shorten(&text, max, unit);
                prop_assert!(unit.len(&s) <= max, "{s:?} over {max}");
                let first = text.split(' ').next().unwrap_or("");
                if unit.len(first) <= max {
                    let all = words(&text);
                    for w in words(s.trim_end_matches(MORE)) {
                        prop_assert!(all.contains(&w), "{w:?} of {s:?} is not a word of {text:?}");
                    }
                }
            }
        }
    }
}
