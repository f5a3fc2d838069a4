//! The page: skeleton, escaping, fixed number formatting, the embedded data.

use serde_json::{json, Value};

use crate::{Meta, ReportError};

/// The schema of the embedded data's envelope.
pub const SCHEMA: &str = "rdmakit.report/v1";

/// The id of the `<script type="application/json">` block that holds the data.
pub const DATA_ID: &str = "rdmakit-data";

const CSS: &str = include_str!("style.css");

/// Escapes text for HTML content and attribute values. A `/` that follows a `/`
/// is written as `&#47;`, so no text can form a protocol-relative `//` reference.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut prev_slash = false;
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '/' if prev_slash => {
                out.push_str("&#47;");
                prev_slash = false;
                continue;
            }
            _ => out.push(c),
        }
        prev_slash = c == '/';
    }
    out
}

/// A number with `digits` decimals; `-` for NaN and infinities (never `NaN` in a page).
pub(crate) fn num(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "-".to_string()
    }
}

/// The page being written: a title and the body's HTML.
pub(crate) struct Page {
    title: String,
    subtitle: String,
    body: String,
}

impl Page {
    pub(crate) fn new(title: &str, subtitle: &str) -> Page {
        Page {
            title: title.to_string(),
            subtitle: subtitle.to_string(),
            body: String::new(),
        }
    }

    /// Appends HTML written by this crate (callers escape what they insert).
    pub(crate) fn push(&mut self, html: &str) {
        self.body.push_str(html);
    }

    /// The finished document, with `data` embedded under `kind`.
    pub(crate) fn finish(
        self,
        kind: &str,
        data: Value,
        meta: &Meta,
    ) -> Result<String, ReportError> {
        let envelope = json!({
            "schema": SCHEMA,
            "kind": kind,
            "tool": meta.tool,
            "generated": meta.generated,
            "data": data,
        });
        let mut out = String::with_capacity(self.body.len() + CSS.len() + 4096);
        out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        // Nothing may be fetched: styles and SVG are inline; the data block is not run.
        out.push_str(
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
             style-src 'unsafe-inline'\">\n",
        );
        out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        out.push_str(&format!("<title>{}</title>\n", esc(&self.title)));
        out.push_str("<style>\n");
        out.push_str(CSS);
        out.push_str("</style>\n</head>\n<body>\n<header>\n");
        out.push_str(&format!("<h1>{}</h1>\n", esc(&self.title)));
        out.push_str(&format!(
            "<div class=\"sub\">{}</div>\n",
            esc(&self.subtitle)
        ));
        out.push_str("</header>\n<main>\n");
        out.push_str(&self.body);
        out.push_str("</main>\n<footer>\n");
        let mut foot = Vec::new();
        if let Some(t) = &meta.tool {
            foot.push(format!("made by {}", esc(t)));
        }
        if let Some(g) = &meta.generated {
            foot.push(format!("at {}", esc(g)));
        }
        if let Some(c) = &meta.command {
            foot.push(format!("with <code>{}</code>", esc(c)));
        }
        foot.push(format!(
            "the source data is embedded as JSON (<code>script#{DATA_ID}</code>, schema {SCHEMA})"
        ));
        out.push_str(&foot.join("; "));
        out.push_str("\n</footer>\n");
        out.push_str(&format!(
            "<script type=\"application/json\" id=\"{DATA_ID}\">{}</script>\n",
            json_for_html(&envelope)?
        ));
        out.push_str("</body>\n</html>\n");
        Ok(out)
    }
}

/// JSON that is safe inside a `<script>` element and holds no `//`: `<`, `>` and
/// `&` as `\u` escapes and every `/` as `\/` (all valid JSON; parsers read the
/// original text back).
fn json_for_html(v: &Value) -> Result<String, ReportError> {
    let s = serde_json::to_string(v)?;
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '/' => out.push_str("\\/"),
            _ => out.push(c),
        }
    }
    Ok(out)
}

/// Reads the embedded data back from a report made by this crate: the envelope
/// `{"schema", "kind", "tool", "generated", "data"}`.
///
/// # Errors
/// [`ReportError::NoData`] when the block is missing, [`ReportError::Json`] when
/// its content is not JSON.
pub fn embedded_json(html: &str) -> Result<Value, ReportError> {
    let open = format!("<script type=\"application/json\" id=\"{DATA_ID}\">");
    let start = html.find(&open).ok_or(ReportError::NoData)? + open.len();
    let len = html[start..].find("</script>").ok_or(ReportError::NoData)?;
    Ok(serde_json::from_str(&html[start..start + len])?)
}

/// `secs` since the Unix epoch as `2024-05-01 12:00:00 UTC` (for [`Meta::generated`]).
pub fn utc_timestamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_breaks_every_double_slash() {
        assert_eq!(esc("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
        for s in ["https://x", "//cdn", "a///b", "////"] {
            assert!(!esc(s).contains("//"), "{s} -> {}", esc(s));
        }
        let j = json_for_html(&json!({"u": "https://x//y</script>"})).unwrap();
        assert!(!j.contains("//") && !j.contains("</"));
        let back: Value = serde_json::from_str(&j).unwrap();
        assert_eq!(back["u"], "https://x//y</script>");
    }

    #[test]
    fn timestamps() {
        assert_eq!(utc_timestamp(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_timestamp(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_timestamp(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn numbers_are_fixed() {
        assert_eq!(num(1.0 / 3.0, 2), "0.33");
        assert_eq!(num(f64::NAN, 2), "-");
    }
}
