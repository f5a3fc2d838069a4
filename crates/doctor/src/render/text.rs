//! Text that fits a terminal: word wrapping with a hanging indent, for prose,
//! for `path = value` evidence, and for shell commands (continued with ` \`, never
//! broken inside quotes, so a wrapped command still pastes into a shell).
//!
//! Widths count characters; styles (ANSI escapes) are passed apart from the text
//! they decorate, so they never count. A single word longer than a line's room —
//! a path, a URL — stays whole on a line of its own.

/// The number of columns `s` takes (one per character; no escapes in `s`).
pub fn cols(s: &str) -> usize {
    s.chars().count()
}

/// Appends `text` wrapped to `width` columns: the first line starts with
/// `lead` (which takes `lead_cols` columns once its styles are stripped), the
/// following lines with `indent` spaces.
pub fn wrap(
    out: &mut String,
    lead: &str,
    lead_cols: usize,
    indent: usize,
    text: &str,
    width: usize,
) {
    wrap_tokens(out, lead, lead_cols, indent, &words(text), width, "");
}

/// [`wrap`] for a shell command: breaks only at spaces outside quotes, and
/// ends every line but the last with ` \`.
pub fn wrap_command(
    out: &mut String,
    lead: &str,
    lead_cols: usize,
    indent: usize,
    cmd: &str,
    width: usize,
) {
    wrap_tokens(
        out,
        lead,
        lead_cols,
        indent,
        &shell_words(cmd),
        width,
        " \\",
    );
}

/// The words of `text`, split at single spaces: a run of spaces inside a line
/// is kept (as empty words between), so a line that fits reads as written.
fn words(text: &str) -> Vec<String> {
    text.split(' ').map(str::to_string).collect()
}

/// The words of a shell command: split at spaces outside '…' and "…".
fn shell_words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in cmd.chars() {
        match (quote, c) {
            (None, ' ') => out.push(std::mem::take(&mut cur)),
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.push(c);
            }
            (Some(q), c) if c == q => {
                quote = None;
                cur.push(c);
            }
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn wrap_tokens(
    out: &mut String,
    lead: &str,
    lead_cols: usize,
    indent: usize,
    words: &[String],
    width: usize,
    cont: &str,
) {
    let total = lead_cols + cols(&words.join(" "));
    if total <= width {
        out.push_str(lead);
        out.push_str(&words.join(" "));
        out.push('\n');
        return;
    }
    let pad = " ".repeat(indent);
    let mut line = String::from(lead);
    let mut used = lead_cols;
    let mut empty = true;
    let mut pending_space = 0usize;
    for w in words {
        if w.is_empty() {
            // A run of spaces: kept while the line goes on, dropped at a break.
            pending_space += 1;
            continue;
        }
        let gap = if empty { 0 } else { 1 + pending_space };
        pending_space = 0;
        if !empty && used + gap + cols(w) + cols(cont) > width {
            line.push_str(cont);
            out.push_str(line.trim_end_matches(' '));
            out.push('\n');
            line = pad.clone();
            used = indent;
            empty = true;
        }
        if !empty {
            line.push_str(&" ".repeat(gap));
            used += gap;
        }
        line.push_str(w);
        used += cols(w);
        empty = false;
    }
    out.push_str(line.trim_end_matches(' '));
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_wraps_with_a_hanging_indent_and_long_words_stay_whole() {
        let mut s = String::new();
        wrap(&mut s, "fix  ", 5, 5, "reseat the cable on both ends", 16);
        assert_eq!(s, "fix  reseat the\n     cable on\n     both ends\n");
        let mut s = String::new();
        wrap(
            &mut s,
            "- ",
            2,
            2,
            "see /sys/class/infiniband/mlx5_0/ports/1 now",
            20,
        );
        assert_eq!(s, "- see\n  /sys/class/infiniband/mlx5_0/ports/1\n  now\n");
        let mut s = String::new();
        wrap(&mut s, "", 0, 0, "45:  0  0  PCI-MSI", 80);
        assert_eq!(s, "45:  0  0  PCI-MSI\n");
    }

    #[test]
    fn commands_break_outside_quotes_and_continue_with_a_backslash() {
        let mut s = String::new();
        wrap_command(&mut s, "$ ", 2, 4, "grep -E 'a b c' /var/log/x", 16);
        assert_eq!(s, "$ grep -E \\\n    'a b c' \\\n    /var/log/x\n");
    }
}
