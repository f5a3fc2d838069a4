//! Explanations for a terminal: a finding code's page (Markdown, as
//! crates/doctor/findings holds it) rendered — headings in bold, `code` and **emphasis**
//! styled without their marks, lists with bullets and hanging indents, tables
//! aligned, code blocks indented — and the errno / verb / status entries laid out
//! the same way, all wrapped to the terminal's width. Styles are ANSI; the
//! caller's writer strips them for NO_COLOR and pipes, leaving plain text.

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};

use super::Explanation;

const BOLD: Style = Style::new().bold();
const HEADING: Style = Style::new().bold().underline();
const CODE: Style = AnsiColor::Cyan.on_default();
const EMPH: Style = Style::new().italic();

/// One word as printed: its styled text and the columns it takes.
#[derive(Debug, Clone)]
struct Word {
    styled: String,
    cols: usize,
}

/// The explanation as text for a terminal, `width` columns wide.
pub fn render_human(e: &Explanation, width: u16) -> String {
    let width = usize::from(width.max(40));
    if let Some(page) = e.page {
        return markdown(page, width);
    }
    let mut s = String::new();
    paragraph(&mut s, &styled(&e.title, BOLD), "", 0, 0, width);
    let layer = e.layer.map_or("unknown", |l| l.as_str());
    let _ = writeln!(s, "kind: {}   layer: {layer}\n", e.kind);
    paragraph(&mut s, &inline(&e.summary), "", 0, 0, width);
    if !e.causes.is_empty() {
        let _ = writeln!(s, "\n{BOLD}Likely causes{BOLD:#} (most likely first):");
        for (i, c) in e.causes.iter().enumerate() {
            let lead = format!("  {}. ", i + 1);
            let n = lead.len();
            paragraph(&mut s, &inline(c), &lead, n, n, width);
        }
    }
    if !e.checks.is_empty() {
        let _ = writeln!(s, "\n{BOLD}Checks to run next{BOLD:#}:");
        for c in &e.checks {
            // Commands as written: a shell line is not reflowed.
            let _ = writeln!(s, "  $ {c}");
        }
    }
    if !e.related.is_empty() {
        s.push('\n');
        let lead = format!("{BOLD}Related{BOLD:#}: ");
        paragraph(&mut s, &inline(&e.related.join(", ")), &lead, 9, 2, width);
    }
    s
}

/// `text` as words all in `style`.
fn styled(text: &str, style: Style) -> Vec<Word> {
    text.split(' ')
        .filter(|w| !w.is_empty())
        .map(|w| Word {
            styled: format!("{style}{w}{style:#}"),
            cols: w.chars().count(),
        })
        .collect()
}

/// A Markdown page as terminal text (the subset the finding pages use).
pub fn markdown(page: &str, width: usize) -> String {
    let mut out = String::new();
    let lines: Vec<&str> = page.lines().collect();
    let mut i = 0;
    let mut para: Vec<&str> = Vec::new();
    let flush = |out: &mut String, para: &mut Vec<&str>| {
        if !para.is_empty() {
            paragraph(out, &inline(&para.join(" ")), "", 0, 0, width);
            para.clear();
        }
    };
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_start();
        if t.starts_with("```") {
            flush(&mut out, &mut para);
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                let _ = writeln!(out, "    {CODE}{}{CODE:#}", lines[i]);
                i += 1;
            }
            i += 1;
            continue;
        }
        if let Some(h) = t.strip_prefix("# ") {
            flush(&mut out, &mut para);
            paragraph(&mut out, &styled(&plain(h), HEADING), "", 0, 0, width);
        } else if let Some(h) = t.strip_prefix("## ") {
            flush(&mut out, &mut para);
            paragraph(&mut out, &styled(&plain(h), BOLD), "", 0, 0, width);
        } else if t.starts_with('|') {
            flush(&mut out, &mut para);
            let start = i;
            while i < lines.len() && lines[i].trim_start().starts_with('|') {
                i += 1;
            }
            table(&mut out, &lines[start..i], width);
            continue;
        } else if let Some((marker, rest)) = list_item(t) {
            flush(&mut out, &mut para);
            // The item and its continuation lines (indented, not a new item).
            let mut item = vec![rest];
            while i + 1 < lines.len() {
                let next = lines[i + 1];
                let nt = next.trim_start();
                if nt.is_empty() || list_item(nt).is_some() || !next.starts_with(' ') {
                    break;
                }
                item.push(nt);
                i += 1;
            }
            let indent = if line.starts_with(' ') { 4 } else { 2 };
            let lead = format!("{}{marker} ", " ".repeat(indent));
            let n = lead.chars().count();
            paragraph(&mut out, &inline(&item.join(" ")), &lead, n, n, width);
        } else if t.is_empty() {
            flush(&mut out, &mut para);
            if !out.is_empty() && !out.ends_with("\n\n") {
                out.push('\n');
            }
        } else {
            para.push(t);
        }
        i += 1;
    }
    flush(&mut out, &mut para);
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// "- x" / "* x" → ("•", "x"); "3. x" → ("3.", "x").
fn list_item(t: &str) -> Option<(String, &str)> {
    if let Some(r) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
        return Some(("•".to_string(), r));
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && digits < 4 {
        if let Some(r) = t[digits..].strip_prefix(". ") {
            return Some((t[..=digits].to_string(), r));
        }
    }
    None
}

/// Inline Markdown as words: `code`, **bold**, *emphasis* styled without their
/// marks, [text](url) as "text (url)".
fn inline(text: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut cur_cols = 0;
    let mut style = Style::new();
    let push_char = |cur: &mut String, cols: &mut usize, style: Style, c: char| {
        if style == Style::new() {
            cur.push(c);
        } else {
            let _ = write!(cur, "{style}{c}{style:#}");
        }
        *cols += 1;
    };
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut in_code = false;
    let mut bold = false;
    let mut emph = false;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '`' {
            in_code = !in_code;
        } else if !in_code && c == '*' && next == Some('*') {
            bold = !bold;
            i += 1;
        } else if !in_code
            && c == '*'
            && (emph || next.is_some_and(|n| !n.is_whitespace()))
            && text.matches('*').count() >= 2
        {
            emph = !emph;
        } else if !in_code && c == '[' {
            // [text](url) → text (url)
            let rest: String = chars[i..].iter().collect();
            if let Some(close) = rest.find("](") {
                if let Some(end) = rest[close..].find(')') {
                    let label = &rest[1..close];
                    let url = &rest[close + 2..close + end];
                    let shown = format!("{label} ({url})");
                    for (k, w) in shown.split(' ').enumerate() {
                        if k > 0 {
                            words.push(Word {
                                styled: std::mem::take(&mut cur),
                                cols: std::mem::take(&mut cur_cols),
                            });
                        }
                        for ch in w.chars() {
                            push_char(&mut cur, &mut cur_cols, style, ch);
                        }
                    }
                    i += rest[..close + end + 1].chars().count();
                    continue;
                }
            }
            push_char(&mut cur, &mut cur_cols, style, c);
        } else if c == ' ' {
            words.push(Word {
                styled: std::mem::take(&mut cur),
                cols: std::mem::take(&mut cur_cols),
            });
        } else {
            push_char(&mut cur, &mut cur_cols, style, c);
        }
        style = if in_code {
            CODE
        } else if bold {
            BOLD
        } else if emph {
            EMPH
        } else {
            Style::new()
        };
        i += 1;
    }
    words.push(Word {
        styled: cur,
        cols: cur_cols,
    });
    words.into_iter().filter(|w| w.cols > 0).collect()
}

/// Text without its inline marks or styles (headings, table cells).
fn plain(text: &str) -> String {
    text.replace("**", "").replace('`', "")
}

/// Words wrapped to `width`: the first line after `lead` (`lead_cols` wide),
/// the others indented by `indent`. A word longer than a line stays whole.
fn paragraph(
    out: &mut String,
    words: &[Word],
    lead: &str,
    lead_cols: usize,
    indent: usize,
    width: usize,
) {
    let mut line = lead.to_string();
    let mut used = lead_cols;
    let mut empty = true;
    for w in words {
        if !empty && used + 1 + w.cols > width {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(indent);
            used = indent;
            empty = true;
        }
        if !empty {
            line.push(' ');
            used += 1;
        }
        line.push_str(&w.styled);
        used += w.cols;
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
}

/// A Markdown table, its columns aligned (the header bold, the `|---|` rule
/// left out); a table wider than `width` lists each row as "header: cell" lines.
fn table(out: &mut String, rows: &[&str], width: usize) {
    let cells = |r: &str| -> Vec<String> {
        r.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| plain(c.trim()))
            .collect()
    };
    let rows: Vec<Vec<String>> = rows
        .iter()
        .filter(|r| {
            !r.trim()
                .trim_matches('|')
                .chars()
                .all(|c| "-:| ".contains(c))
        })
        .map(|r| cells(r))
        .collect();
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut w = vec![0usize; n];
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let total = 2 + w.iter().sum::<usize>() + 2 * n.saturating_sub(1);
    // Too wide: the last column wraps in the room the others leave, when that
    // is at least 16 columns; else each row becomes "header: cell" lines.
    let last_at = total - w.last().copied().unwrap_or(0);
    if total > width && n > 1 && width >= last_at + 16 {
        for (ri, r) in rows.iter().enumerate() {
            let mut lead = String::from("  ");
            for (i, c) in r.iter().enumerate().take(n - 1) {
                let pad = w[i] - c.chars().count();
                if ri == 0 {
                    let _ = write!(lead, "{BOLD}{c}{BOLD:#}");
                } else {
                    lead.push_str(c);
                }
                lead.push_str(&" ".repeat(pad + 2));
            }
            let last = r.get(n - 1).map_or("", String::as_str);
            let words = if ri == 0 {
                styled(last, BOLD)
            } else {
                inline(last)
            };
            paragraph(out, &words, &lead, last_at, last_at, width);
        }
        return;
    }
    if total > width && rows.len() > 1 {
        for r in &rows[1..] {
            let mut first = true;
            for (h, c) in rows[0].iter().zip(r) {
                let lead = if first { "  • " } else { "    " };
                first = false;
                let words = inline(&format!("{h}: {c}"));
                paragraph(out, &words, lead, 4, 6, width);
            }
        }
        return;
    }
    for (ri, r) in rows.iter().enumerate() {
        let mut line = String::from("  ");
        for (i, c) in r.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if ri == 0 {
                let _ = write!(line, "{BOLD}{c}{BOLD:#}");
            } else {
                line.push_str(c);
            }
            if i + 1 < r.len() {
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text without ANSI styles.
    fn strip(s: &str) -> String {
        anstream::adapter::strip_str(s).to_string()
    }

    #[test]
    fn markdown_becomes_terminal_text_without_its_marks() {
        let page = "# RDK-X: a title\n\n## What it means\n\nThe `ib_umad` module is **not**\nloaded, see [docs](https://x.invalid/a).\n\n- one item that is long\n  and continues\n- two\n\n1. first\n\n```\nmodprobe ib_umad\n```\n\n| a | b |\n|---|---|\n| `x` | yy |\n";
        let text = strip(&markdown(page, 40));
        assert_eq!(
            text,
            "RDK-X: a title\n\nWhat it means\n\nThe ib_umad module is not loaded, see\ndocs (https://x.invalid/a).\n\n  • one item that is long and continues\n  • two\n\n  1. first\n\n    modprobe ib_umad\n\n  a  b\n  x  yy\n"
        );
        for marks in ["`", "**", "##", "|---"] {
            assert!(!text.contains(marks), "{marks} left in {text}");
        }
    }

    #[test]
    fn every_finding_page_renders_within_80_columns_outside_code_blocks() {
        for c in crate::codes::ALL {
            let page = c.info().page;
            let text = strip(&markdown(page, 80));
            let code: Vec<&str> = page
                .split("```")
                .skip(1)
                .step_by(2)
                .flat_map(str::lines)
                .collect();
            for l in text.lines() {
                let long = l.chars().count() > 80;
                let in_code = code.iter().any(|c| l.trim() == c.trim());
                let one_word = !l.trim().contains(' ');
                assert!(!long || in_code || one_word, "{}: {l}", c.as_str());
            }
            assert!(!text.contains("**"), "{}", c.as_str());
        }
    }
}
