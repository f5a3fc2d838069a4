//! `rdmakit explain`: what a finding code, an errno, a verb failing with an errno, or a
//! work completion status means — the layer at fault, the likely causes in order, the
//! checks to run next, and related codes.
//!
//! Finding codes explain themselves with their page (`findings/<CODE>.md` of this crate,
//! compiled into [`crate::codes`]); errnos, verb/errno pairs and work completion statuses come from
//! the static tables in [`errno`], [`verbs`] and [`wc`].

use serde::Serialize;

use crate::codes::{self, Code, Layer};

pub mod errno;
pub mod findings;
pub mod text;
pub mod verbs;
pub mod wc;

pub use text::render_human;

/// The knowledge for one errno, verb/errno pair or work completion status.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub layer: Layer,
    pub summary: &'static str,
    /// Most likely first.
    pub causes: &'static [&'static str],
    pub checks: &'static [&'static str],
    pub related: &'static [&'static str],
}

/// What the user asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    Code(Code),
    Errno(i32),
    /// `errno` 0 means "the verb failed without an errno" (an empty device list, a
    /// negative `ibv_poll_cq`), or just the verb, to list its known failures.
    VerbErrno {
        verb: String,
        errno: i32,
    },
    WcStatus(u32),
}

#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// Not a code, errno, verb:errno or status; `suggestions` are close
    /// matches (possibly none).
    #[error("explain {input}: no such code, errno or status{}", try_these(.suggestions))]
    Unknown {
        input: String,
        suggestions: Vec<String>,
    },
}

fn try_these(s: &[String]) -> String {
    match s {
        [] => "; rdmakit explain takes a finding code (RDK-K003, ib-umad-missing), an errno \
               (ENOSPC, 28), a verb and errno (ibv_create_qp:ENOSPC) or a work completion \
               status (wc:12, RETRY_EXC_ERR)"
            .to_string(),
        [one] => format!("; did you mean {one}?"),
        more => format!("; did you mean one of {}?", more.join(", ")),
    }
}

/// What `rdmakit explain` prints of `e`: its JSON, a finding code's page as
/// its Markdown source (`raw`), or [`render_human`] for `width` columns.
pub fn output(e: &Explanation, as_json: bool, raw: bool, width: u16) -> String {
    match (as_json, raw, e.page) {
        (true, _, _) => serde_json::to_string_pretty(e).unwrap_or_default() + "\n",
        (false, true, Some(page)) => page.to_string(),
        _ => render_human(e, width),
    }
}

/// The answer, as data. `render_human` prints it; `--json` serializes it.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The query in canonical form: "RDK-K003", "ENOSPC", "ibv_create_qp:ENOSPC", "wc:12".
    pub query: String,
    /// "finding" | "errno" | "verb-errno" | "wc-status".
    pub kind: &'static str,
    pub title: String,
    #[serde(serialize_with = "crate::codes::layer_serde::opt")]
    pub layer: Option<Layer>,
    pub summary: String,
    /// Likely causes, most likely first.
    pub causes: Vec<String>,
    /// Commands to run next.
    pub checks: Vec<String>,
    /// Related finding codes, errnos ("ENOMEM"), verb pairs and statuses ("wc:12").
    pub related: Vec<String>,
    /// The markdown page, for finding codes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<&'static str>,
}

/// Parses what the user typed after `rdmakit explain`:
///
/// - a finding code or its name: "RDK-K003", "K003", "ib-umad-missing";
/// - an errno: "ENOSPC", "enospc", "-ENOSPC", "28", "-28", or its message
///   ("No space left on device"); a bare number is always an errno;
/// - a verb and an errno: "ibv_create_qp:ENOSPC", "create_qp ENOSPC", "ibv_reg_mr:12",
///   or a known verb alone ("ibv_get_device_list");
/// - a work completion status: "wc:12", "WC_RETRY_EXC_ERR", "RETRY_EXC_ERR",
///   "IBV_WC_RETRY_EXC_ERR", the text `ibv_wc_status_str()` prints, or a pasted
///   "Failed status transport retry counter exceeded (12) ..." line.
pub fn parse_query(s: &str) -> Result<Query, ExplainError> {
    let t = s.trim();
    if t.is_empty() || t.len() > 256 {
        return Err(unknown(t));
    }
    if let Some(c) = Code::lookup(t) {
        return Ok(Query::Code(c));
    }
    if let Some(n) = parse_wc(t) {
        return Ok(Query::WcStatus(n));
    }
    if WC_PREFIXES
        .iter()
        .any(|p| t.to_ascii_lowercase().starts_with(p))
    {
        return Err(unknown(t)); // "wc:99": a status, but not one that exists
    }
    if let Some(n) = parse_errno(t) {
        return Ok(Query::Errno(n));
    }
    if let Some(q) = parse_verb(t) {
        return Ok(q);
    }
    Err(unknown(t))
}

fn unknown(t: &str) -> ExplainError {
    ExplainError::Unknown {
        input: t.to_string(),
        suggestions: suggestions(t),
    }
}

const WC_PREFIXES: [&str; 5] = ["wc:", "wc=", "wc ", "wc_status:", "status:"];

/// "wc:12", "wc 12", "wc=RETRY_EXC_ERR", status names and texts, "Failed status <text> (<n>)".
fn parse_wc(t: &str) -> Option<u32> {
    let lower = t.to_ascii_lowercase();
    for p in WC_PREFIXES {
        if let Some(rest) = lower.strip_prefix(p) {
            let rest = rest.trim();
            if let Ok(n) = rest.parse::<u32>() {
                return wc::by_num(n).map(|w| w.num);
            }
            return wc::by_name(rest).map(|w| w.num);
        }
    }
    if let Some(rest) = lower.strip_prefix("failed status ") {
        // ibv_rc_pingpong & co: "Failed status <ibv_wc_status_str> (<n>) for wr_id <id>"
        if let Some(open) = rest.find(" (") {
            if let Some(w) = wc::by_name(&rest[..open]) {
                return Some(w.num);
            }
            let num: String = rest[open + 2..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            return num.parse::<u32>().ok().and_then(wc::by_num).map(|w| w.num);
        }
    }
    wc::by_name(t).map(|w| w.num)
}

/// An errno name or number; a leading '-' (kernel style) is ignored.
fn parse_errno(t: &str) -> Option<i32> {
    let u = t
        .strip_prefix('-')
        .or_else(|| t.strip_prefix('+'))
        .unwrap_or(t)
        .trim();
    if !u.is_empty() && u.bytes().all(|b| b.is_ascii_digit()) {
        return u.parse::<i32>().ok().filter(|n| (0..=4095).contains(n));
    }
    errno::number(u).or_else(|| errno::by_message(t))
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && s.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
}

fn parse_verb(t: &str) -> Option<Query> {
    let sep = t
        .char_indices()
        .find(|(_, c)| *c == ':' || *c == '=' || c.is_whitespace());
    let (verb, rest) = match sep {
        Some((i, c)) => (&t[..i], Some(t[i + c.len_utf8()..].trim())),
        None => (t, None),
    };
    let verb = verb.trim();
    if !is_ident(verb) {
        return None;
    }
    match rest {
        None | Some("") => verbs::canonical(verb).map(|v| Query::VerbErrno {
            verb: v.to_string(),
            errno: 0,
        }),
        Some(e) => {
            let n = parse_errno(e)?;
            let v = verbs::canonical(verb)
                .map(str::to_string)
                .unwrap_or_else(|| verb.to_ascii_lowercase());
            Some(Query::VerbErrno { verb: v, errno: n })
        }
    }
}

fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

fn errno_label(n: i32) -> String {
    match errno::name(n) {
        Some(name) => name.to_string(),
        None => format!("errno {n}"),
    }
}

/// Answers a query. Never panics, whatever the query holds.
pub fn explain(q: &Query) -> Explanation {
    match q {
        Query::Code(c) => explain_code(*c),
        Query::Errno(n) => explain_errno(*n, true),
        Query::VerbErrno { verb, errno } => explain_verb(verb, *errno),
        Query::WcStatus(n) => explain_wc(*n),
    }
}

fn explain_code(c: Code) -> Explanation {
    let info = c.info();
    let (causes, checks) = findings::digest(c);
    let mut summary = section(info.page, "What it means")
        .map(first_paragraph)
        .unwrap_or_default();
    if summary.is_empty() {
        summary = info.title.to_string();
    }
    Explanation {
        query: info.code.to_string(),
        kind: "finding",
        title: info.title.to_string(),
        layer: Some(info.layer),
        summary,
        causes: strings(causes),
        checks: strings(checks),
        related: page_related(info.page, info.code),
        page: Some(info.page),
    }
}

/// The text of a `## name` section of a page, without its heading.
fn section<'a>(page: &'a str, name: &str) -> Option<&'a str> {
    let head = format!("## {name}");
    let start = page.find(&head)? + head.len();
    let body = &page[start..];
    let end = body.find("\n## ").unwrap_or(body.len());
    Some(body[..end].trim())
}

/// The first paragraph (and the list it introduces, if it ends with ':'), in one line.
fn first_paragraph(s: &str) -> String {
    let mut paras = s.split("\n\n");
    let mut out = paras
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if out.ends_with(':') {
        if let Some(next) = paras.next() {
            out.push(' ');
            out.push_str(&next.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    out
}

/// Codes ("RDK-K001") and `rdmakit explain X` targets named in the page's Related section.
fn page_related(page: &str, own: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Some(rel) = section(page, "Related") else {
        return out;
    };
    let mut push = |s: String| {
        if s != own && !out.contains(&s) {
            out.push(s);
        }
    };
    for word in rel.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')') {
        let w = word.trim_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '-'));
        if w.len() == 8 && w.starts_with("RDK-") && Code::lookup(w).is_some() {
            push(w.to_string());
        }
    }
    let mut rest = rel;
    while let Some(i) = rest.find("rdmakit explain ") {
        rest = &rest[i + "rdmakit explain ".len()..];
        let target: String = rest
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '`')
            .collect();
        if !target.is_empty() {
            push(target);
        }
    }
    out
}

fn wc_hint(n: i32) -> Option<String> {
    let w = u32::try_from(n).ok().and_then(wc::by_num)?;
    Some(format!(
        "If this number is a work completion status rather than an errno, see `rdmakit explain wc:{}` (= IBV_WC_{}, \"{}\").",
        w.num, w.name, w.text
    ))
}

/// `wc_hint_wanted`: mention the work completion status with the same number (bare numbers only).
fn explain_errno(n: i32, wc_hint_wanted: bool) -> Explanation {
    let label = errno_label(n);
    let message = errno::message(n).unwrap_or("unknown error");
    let kb = errno::name(n).and_then(errno::kb);
    let mut e = match kb {
        Some(k) => Explanation {
            query: label.clone(),
            kind: "errno",
            title: format!("{label} ({n}): {message}"),
            layer: Some(k.entry.layer),
            summary: k.entry.summary.to_string(),
            causes: strings(k.entry.causes),
            checks: strings(k.entry.checks),
            related: strings(k.entry.related),
            page: None,
        },
        None if n == 0 => Explanation {
            query: "errno 0".into(),
            kind: "errno",
            title: "0: success".into(),
            layer: None,
            summary: "0 is not an error: the call succeeded.".into(),
            causes: vec!["A caller printed errno although the call returned success (errno is only meaningful after a failure)".into()],
            checks: vec!["check the verb's return value first; ibv_post_send/ibv_post_recv return the error code directly".into()],
            related: vec![],
            page: None,
        },
        None => Explanation {
            query: label.clone(),
            kind: "errno",
            title: format!("{label} ({n}): {message}"),
            layer: None,
            summary: format!("rdmakit has no RDMA-specific knowledge of {label}; the C library calls it \"{message}\"."),
            causes: vec!["Not one of the errnos RDMA calls usually return: look at the call that returned it and its documentation".into()],
            checks: vec![
                "rdmakit doctor   # checks every layer on this host".into(),
                "dmesg | tail -30".into(),
            ],
            related: vec![],
            page: None,
        },
    };
    if let Some(h) = wc_hint(n).filter(|_| wc_hint_wanted) {
        e.summary = format!("{} {h}", e.summary);
        if let Some(w) = u32::try_from(n).ok().and_then(wc::by_num) {
            e.related.push(format!("wc:{}", w.num));
        }
    }
    e
}

fn explain_verb(verb: &str, n: i32) -> Explanation {
    let ename = if n == 0 { Some("") } else { errno::name(n) };
    if let Some(hit) = ename.and_then(|en| verbs::find(verb, en)) {
        let query = if hit.errno.is_empty() {
            hit.verb.to_string()
        } else {
            format!("{}:{}", hit.verb, hit.errno)
        };
        let mut related = strings(hit.entry.related);
        for other in verbs::of_verb(hit.verb) {
            let label = if other.errno.is_empty() {
                other.verb.to_string()
            } else {
                format!("{}:{}", other.verb, other.errno)
            };
            if other.errno != hit.errno && !related.contains(&label) {
                related.push(label);
            }
        }
        return Explanation {
            query,
            kind: "verb-errno",
            title: hit.title.to_string(),
            layer: Some(hit.entry.layer),
            summary: hit.entry.summary.to_string(),
            causes: strings(hit.entry.causes),
            checks: strings(hit.entry.checks),
            related,
            page: None,
        };
    }
    let known: Vec<&verbs::VerbErrno> = verbs::of_verb(verb).collect();
    let pairs: Vec<String> = known
        .iter()
        .map(|k| {
            if k.errno.is_empty() {
                k.verb.to_string()
            } else {
                format!("{}:{}", k.verb, k.errno)
            }
        })
        .collect();
    if n == 0 {
        // A known verb alone, with no entry of its own: list what is known about it.
        let name = known.first().map_or(verb, |k| k.verb);
        return Explanation {
            query: name.to_string(),
            kind: "verb-errno",
            title: format!("How {name} fails"),
            layer: known.first().map(|k| k.entry.layer),
            summary: format!(
                "{name} fails in these known ways; ask about one with `rdmakit explain {name}:ERRNO`."
            ),
            causes: known
                .iter()
                .map(|k| {
                    let what = k.entry.summary.split(". ").next().unwrap_or(k.entry.summary).trim_end_matches('.');
                    let errno = if k.errno.is_empty() { "no errno" } else { k.errno };
                    format!("{errno} ({} layer): {what}", k.entry.layer.as_str())
                })
                .collect(),
            checks: pairs.iter().map(|p| format!("rdmakit explain {p}")).collect(),
            related: pairs,
            page: None,
        };
    }
    // Fall back to the errno's general meaning, saying so.
    let mut e = explain_errno(n, false);
    let note = if known.is_empty() {
        format!(
            "rdmakit has no entry for the verb {verb}; this is the general meaning of {}.",
            errno_label(n)
        )
    } else {
        format!(
            "rdmakit has no entry for {} failing with {}; this is the general meaning of the errno (known for this verb: {}).",
            known[0].verb,
            errno_label(n),
            pairs.join(", ")
        )
    };
    e.summary = format!("{note} {}", e.summary);
    e.query = format!("{verb}:{}", errno_label(n));
    for p in pairs {
        if !e.related.contains(&p) {
            e.related.push(p);
        }
    }
    e
}

fn explain_wc(n: u32) -> Explanation {
    match wc::by_num(n) {
        Some(w) => Explanation {
            query: format!("wc:{}", w.num),
            kind: "wc-status",
            title: format!("IBV_WC_{} ({}): {}", w.name, w.num, w.text),
            layer: Some(w.entry.layer),
            summary: w.entry.summary.to_string(),
            causes: strings(w.entry.causes),
            checks: strings(w.entry.checks),
            related: strings(w.entry.related),
            page: None,
        },
        None => Explanation {
            query: format!("wc:{n}"),
            kind: "wc-status",
            title: format!("work completion status {n}: unknown"),
            layer: None,
            summary: format!(
                "{n} is not a status of enum ibv_wc_status (0..={}); ibv_wc_status_str() prints \"unknown\" for it.",
                wc::WC_STATUSES.len() - 1
            ),
            causes: vec!["The completion was read from uninitialized memory (only the first n entries ibv_poll_cq returned are valid), or a library/provider mismatch".into()],
            checks: vec!["print the return value of ibv_poll_cq and only inspect that many entries".into()],
            related: vec![],
            page: None,
        },
    }
}

/// Everything `parse_query` accepts by name, for suggestions.
fn vocabulary() -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for c in codes::ALL {
        v.push(c.info().code.to_string());
        v.push(c.info().name.to_string());
    }
    v.extend(errno::all_names().map(str::to_string));
    for w in wc::WC_STATUSES {
        v.push(w.name.to_string());
        v.push(format!("wc:{}", w.num));
    }
    for e in verbs::VERB_ERRNOS {
        if e.errno.is_empty() {
            v.push(e.verb.to_string());
        } else {
            v.push(format!("{}:{}", e.verb, e.errno));
        }
    }
    v.sort();
    v.dedup();
    v
}

/// Up to 5 close matches for what the user typed: a name that contains it (or
/// that it contains, at four characters or more), or one within an edit
/// distance of a quarter of its length (at least 1; a swap of two neighbouring
/// characters counts 1). None when nothing is close: "FOO" is no typo of "EIO".
fn suggestions(t: &str) -> Vec<String> {
    let q: String = t.chars().take(64).collect::<String>().to_ascii_lowercase();
    let qn = q.chars().count();
    let vocab = vocabulary();
    let mut scored: Vec<(usize, String)> = Vec::new();
    for w in &vocab {
        let wl = w.to_ascii_lowercase();
        let wn = wl.chars().count();
        let contains = (qn >= 4 && wl.contains(&q)) || (wn >= 4 && q.contains(&wl));
        // A code also by its short form: "K0O3" is a typo of K003 (RDK-K003).
        let short = wl
            .strip_prefix("rdk-")
            .map_or(usize::MAX, |s| distance(&q, s));
        let d = if contains {
            0
        } else {
            distance(&q, &wl).min(short)
        };
        let limit = (qn.max(wn) / 4).max(1);
        if d <= limit && 2 * d < qn {
            scored.push((d, w.clone()));
        }
    }
    scored.sort();
    scored.into_iter().map(|(_, w)| w).take(5).collect()
}

/// The optimal string alignment distance: insertions, deletions, substitutions
/// and swaps of two neighbouring characters, each 1.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Text without ANSI styles.
    fn strip(s: &str) -> String {
        anstream::adapter::strip_str(s).to_string()
    }

    fn ok(s: &str) -> Explanation {
        let q = parse_query(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        let e = explain(&q);
        assert!(e.layer.is_some(), "{s}: no layer");
        assert!(!e.causes.is_empty(), "{s}: no causes");
        assert!(!e.checks.is_empty(), "{s}: no checks");
        assert!(
            !e.summary.is_empty() && !e.title.is_empty(),
            "{s}: empty text"
        );
        assert!(!render_human(&e, 80).is_empty());
        e
    }

    #[test]
    fn every_code_parses_and_explains_with_its_page() {
        for c in codes::ALL {
            let i = c.info();
            for form in [
                i.code.to_string(),
                i.code[4..].to_ascii_lowercase(),
                i.name.to_string(),
            ] {
                assert_eq!(parse_query(&form).unwrap(), Query::Code(*c), "{form}");
            }
            let e = ok(i.code);
            assert_eq!(e.kind, "finding");
            assert_eq!(e.page, Some(i.page));
            assert_eq!(
                text::markdown(i.page, 200).lines().next().map(strip),
                i.page
                    .lines()
                    .next()
                    .map(|l| l.trim_start_matches("# ").to_string())
            );
            for r in &e.related {
                assert!(r != i.code, "{} relates to itself", i.code);
            }
        }
    }

    const RDMA_ERRNOS: &[&str] = &[
        "EPERM",
        "ENOENT",
        "EIO",
        "ENXIO",
        "EAGAIN",
        "ENOMEM",
        "EACCES",
        "EFAULT",
        "EBUSY",
        "EEXIST",
        "ENODEV",
        "EINVAL",
        "ENOSPC",
        "ENOSYS",
        "EPROTONOSUPPORT",
        "EOPNOTSUPP",
        "ETIMEDOUT",
        "ECONNREFUSED",
        "ECONNRESET",
        "ENETUNREACH",
        "EHOSTUNREACH",
        "EADDRNOTAVAIL",
        "ENODATA",
        "EMSGSIZE",
        "ERANGE",
    ];

    #[test]
    fn every_listed_errno_parses_by_name_and_number() {
        for name in RDMA_ERRNOS {
            let n = errno::number(name).unwrap_or_else(|| panic!("{name} has no number"));
            assert_eq!(parse_query(name).unwrap(), Query::Errno(n));
            assert_eq!(
                parse_query(&name.to_ascii_lowercase()).unwrap(),
                Query::Errno(n)
            );
            assert_eq!(parse_query(&n.to_string()).unwrap(), Query::Errno(n));
            assert_eq!(parse_query(&format!("-{n}")).unwrap(), Query::Errno(n));
            let e = ok(name);
            assert_eq!(e.kind, "errno");
            assert_eq!(e.query, *name);
        }
        assert_eq!(
            parse_query("No space left on device").unwrap(),
            Query::Errno(28)
        );
        assert_eq!(parse_query("ENOTSUP").unwrap(), Query::Errno(95));
    }

    #[test]
    fn small_errno_numbers_point_at_the_wc_status() {
        let e = explain(&parse_query("12").unwrap());
        assert_eq!(e.query, "ENOMEM");
        assert!(e.summary.contains("rdmakit explain wc:12"), "{}", e.summary);
        assert!(e.summary.contains("RETRY_EXC_ERR"));
        assert!(e.related.contains(&"wc:12".to_string()));
        for n in 0..=22 {
            let e = explain(&Query::Errno(n));
            assert!(
                e.summary.contains(&format!("wc:{n}")),
                "errno {n}: {}",
                e.summary
            );
        }
        assert!(!explain(&Query::Errno(28)).summary.contains("wc:"));
    }

    const ISSUE_PAIRS: &[&str] = &[
        "ibv_get_device_list:ENOSYS",
        "ibv_get_device_list",
        "ibv_open_device:EACCES",
        "ibv_open_device:EPERM",
        "ibv_open_device:ENODEV",
        "ibv_open_device:ENOENT",
        "ibv_alloc_pd:ENOMEM",
        "ibv_reg_mr:ENOMEM",
        "ibv_reg_mr:EPERM",
        "ibv_reg_mr:EFAULT",
        "ibv_reg_mr:EINVAL",
        "ibv_create_cq:ENOMEM",
        "ibv_create_cq:EINVAL",
        "ibv_create_qp:ENOSYS",
        "ibv_create_qp:ENOSPC",
        "ibv_create_qp:EINVAL",
        "ibv_create_qp:ENOMEM",
        "ibv_modify_qp:EINVAL",
        "ibv_modify_qp:ETIMEDOUT",
        "ibv_post_send:ENOMEM",
        "ibv_post_send:EINVAL",
        "ibv_post_recv:ENOMEM",
        "ibv_post_recv:EINVAL",
        "ibv_poll_cq",
        "ibv_req_notify_cq",
        "ibv_create_ah:EINVAL",
        "ibv_create_ah:ETIMEDOUT",
        "rdma_resolve_addr:ETIMEDOUT",
        "rdma_resolve_addr:EADDRNOTAVAIL",
        "rdma_resolve_addr:ENODEV",
        "rdma_resolve_addr:EHOSTUNREACH",
        "rdma_resolve_route:ETIMEDOUT",
        "rdma_connect:ECONNREFUSED",
    ];

    #[test]
    fn every_listed_verb_pair_has_its_own_entry() {
        for p in ISSUE_PAIRS {
            let e = ok(p);
            assert_eq!(e.kind, "verb-errno", "{p}");
            assert_eq!(e.query, *p, "{p}");
        }
    }

    #[test]
    fn verb_spellings() {
        let want = Query::VerbErrno {
            verb: "ibv_create_qp".into(),
            errno: 28,
        };
        for s in [
            "ibv_create_qp:ENOSPC",
            "IBV_CREATE_QP:enospc",
            "create_qp:ENOSPC",
            "ibv_create_qp: ENOSPC",
            "ibv_create_qp ENOSPC",
            "ibv_create_qp:28",
            "ibv_create_qp:-28",
        ] {
            assert_eq!(parse_query(s).unwrap(), want, "{s}");
        }
        assert_eq!(
            parse_query("ibv_reg_mr:12").unwrap(),
            Query::VerbErrno {
                verb: "ibv_reg_mr".into(),
                errno: 12
            }
        );
        assert_eq!(
            parse_query("resolve_addr:ETIMEDOUT").unwrap(),
            Query::VerbErrno {
                verb: "rdma_resolve_addr".into(),
                errno: 110
            }
        );
        // The classic verb failures name their layers.
        assert_eq!(ok("ibv_create_qp:EINVAL").layer, Some(Layer::Kernel));
        assert_eq!(ok("ibv_reg_mr:ENOMEM").layer, Some(Layer::Application));
        assert_eq!(ok("ibv_create_qp:ENOSYS").layer, Some(Layer::Library));
        assert!(ok("ibv_create_qp:ENOSPC")
            .checks
            .iter()
            .any(|c| c.contains("rdma resource show qp")));
        assert!(ok("ibv_reg_mr:ENOMEM")
            .related
            .contains(&"RDK-A001".to_string()));
    }

    #[test]
    fn unknown_verb_or_pair_falls_back_to_the_errno() {
        let e = explain(&parse_query("ibv_frobnicate:ENOMEM").unwrap());
        assert_eq!(e.kind, "errno");
        assert!(e.summary.contains("no entry for the verb ibv_frobnicate"));
        assert_eq!(e.query, "ibv_frobnicate:ENOMEM");
        assert!(!e.causes.is_empty());
        let e = explain(&parse_query("ibv_reg_mr:EBUSY").unwrap());
        assert!(e.summary.contains("known for this verb"));
        assert!(e.related.contains(&"ibv_reg_mr:ENOMEM".to_string()));
        assert!(
            !e.summary.contains("wc:16"),
            "a verb:errno is never a WC status"
        );
        // A known verb alone lists its known failures.
        let e = ok("ibv_create_qp");
        assert!(e.related.contains(&"ibv_create_qp:ENOSPC".to_string()));
        // An unknown verb alone is not a query.
        assert!(parse_query("ibv_frobnicate").is_err());
    }

    /// enum ibv_wc_status in rdma-core's verbs.h.
    const WC_ENUM: &[(u32, &str)] = &[
        (0, "SUCCESS"),
        (1, "LOC_LEN_ERR"),
        (2, "LOC_QP_OP_ERR"),
        (3, "LOC_EEC_OP_ERR"),
        (4, "LOC_PROT_ERR"),
        (5, "WR_FLUSH_ERR"),
        (6, "MW_BIND_ERR"),
        (7, "BAD_RESP_ERR"),
        (8, "LOC_ACCESS_ERR"),
        (9, "REM_INV_REQ_ERR"),
        (10, "REM_ACCESS_ERR"),
        (11, "REM_OP_ERR"),
        (12, "RETRY_EXC_ERR"),
        (13, "RNR_RETRY_EXC_ERR"),
        (14, "LOC_RDD_VIOL_ERR"),
        (15, "REM_INV_RD_REQ_ERR"),
        (16, "REM_ABORT_ERR"),
        (17, "INV_EECN_ERR"),
        (18, "INV_EEC_STATE_ERR"),
        (19, "FATAL_ERR"),
        (20, "RESP_TIMEOUT_ERR"),
        (21, "GENERAL_ERR"),
        (22, "TM_ERR"),
        (23, "TM_RNDV_INCOMPLETE"),
    ];

    #[test]
    fn wc_table_matches_the_enum_and_is_unique() {
        assert_eq!(wc::WC_STATUSES.len(), WC_ENUM.len());
        for (i, (w, (n, name))) in wc::WC_STATUSES.iter().zip(WC_ENUM).enumerate() {
            assert_eq!(w.num as usize, i);
            assert_eq!((w.num, w.name), (*n, *name));
            for other in &wc::WC_STATUSES[i + 1..] {
                assert_ne!(w.num, other.num);
                assert_ne!(w.name, other.name);
                assert_ne!(w.text, other.text);
            }
        }
        assert_eq!(
            wc::by_num(12).unwrap().text,
            "transport retry counter exceeded"
        );
        assert_eq!(wc::by_num(5).unwrap().text, "Work Request Flushed Error");
    }

    #[test]
    fn wc_spellings() {
        for s in [
            "wc:12",
            "WC:12",
            "wc 12",
            "wc:RETRY_EXC_ERR",
            "RETRY_EXC_ERR",
            "retry_exc_err",
            "WC_RETRY_EXC_ERR",
            "IBV_WC_RETRY_EXC_ERR",
            "transport retry counter exceeded",
            "Failed status transport retry counter exceeded (12) for wr_id 2",
        ] {
            assert_eq!(parse_query(s).unwrap(), Query::WcStatus(12), "{s}");
        }
        for (n, _) in WC_ENUM {
            let e = ok(&format!("wc:{n}"));
            assert_eq!(e.kind, "wc-status");
        }
        let e = ok("wc:12");
        for r in ["RDK-H007", "RDK-H002", "RDK-K009"] {
            assert!(e.related.contains(&r.to_string()), "{r}");
        }
        assert!(parse_query("wc:99").is_err());
        assert_eq!(explain(&Query::WcStatus(99)).kind, "wc-status");
    }

    #[test]
    fn garbage_is_unknown_and_only_close_matches_are_suggested() {
        for (s, close) in [
            ("", false),
            ("   ", false),
            ("RDK-Z999", false),
            ("ENOSPAC", true),
            ("frobnicate", false),
            ("wc:", true),
            ("ibv_create_qp:EWHAT", true),
            ("🙂", false),
            ("K0O3", true),
            ("FOO", false),
            ("xyzzy", false),
        ] {
            match parse_query(s) {
                Err(ExplainError::Unknown { suggestions, .. }) => {
                    assert_eq!(!suggestions.is_empty(), close, "{s:?}: {suggestions:?}")
                }
                Ok(q) => panic!("{s:?} parsed as {q:?}"),
            }
        }
        let ExplainError::Unknown { suggestions, .. } = parse_query("ENOSPAC").unwrap_err();
        assert_eq!(suggestions[0], "ENOSPC");
        let ExplainError::Unknown { suggestions, .. } = parse_query("ENOSCP").unwrap_err();
        assert_eq!(suggestions, ["ENOSPC"]);
        assert_eq!(
            parse_query("FOO").unwrap_err().to_string(),
            "explain FOO: no such code, errno or status; rdmakit explain takes a finding \
             code (RDK-K003, ib-umad-missing), an errno (ENOSPC, 28), a verb and errno \
             (ibv_create_qp:ENOSPC) or a work completion status (wc:12, RETRY_EXC_ERR)"
        );
        assert_eq!(
            parse_query("ENOSCP").unwrap_err().to_string(),
            "explain ENOSCP: no such code, errno or status; did you mean ENOSPC?"
        );
        let ExplainError::Unknown { suggestions, .. } = parse_query("RETRY_EXC").unwrap_err();
        assert!(
            suggestions.contains(&"RETRY_EXC_ERR".to_string()),
            "{suggestions:?}"
        );
    }

    /// Every code, errno, verb:errno and status rdmakit can explain speaks of
    /// RDMA, never of the notes the project was written from.
    #[test]
    fn no_explanation_mentions_the_project_source() {
        let mut n = 0;
        for q in vocabulary() {
            let Ok(parsed) = parse_query(&q) else {
                continue;
            };
            let e = explain(&parsed);
            let all = format!(
                "{}{}",
                render_human(&e, 80),
                serde_json::to_string(&e).unwrap()
            )
            .to_lowercase();
            assert_eq!(
                rdmakit_testkit::words::internal_word(&all),
                None,
                "{q}: {all}"
            );
            n += 1;
        }
        assert!(n > 150, "only {n} explanations");
    }

    #[test]
    fn renders_plain_text_and_json() {
        let e = ok("ibv_create_qp:ENOSPC");
        let text = strip(&render_human(&e, 80));
        assert!(text.starts_with("ibv_create_qp failed with ENOSPC"));
        assert!(text.contains("layer: hardware"));
        assert!(text.contains("Likely causes"));
        assert!(text
            .lines()
            .all(|l| l.chars().count() <= 80 || l.starts_with("  $ ")));
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["kind"], "verb-errno");
        assert_eq!(v["layer"], "hardware");
        assert!(v.get("page").is_none());
        let v = serde_json::to_value(explain(&Query::Code(Code::K003))).unwrap();
        assert_eq!(v["layer"], "kernel");
        assert!(v["page"].as_str().unwrap().starts_with("# RDK-K003"));
    }

    #[test]
    fn explain_never_panics_on_odd_queries() {
        for q in [
            Query::Errno(-5),
            Query::Errno(i32::MAX),
            Query::Errno(i32::MIN),
            Query::Errno(0),
            Query::WcStatus(u32::MAX),
            Query::VerbErrno {
                verb: String::new(),
                errno: 0,
            },
            Query::VerbErrno {
                verb: "x".into(),
                errno: -1,
            },
        ] {
            let e = explain(&q);
            assert!(!render_human(&e, 80).is_empty());
        }
    }

    proptest! {
        #[test]
        fn parse_query_never_panics(s in ".{0,80}") {
            match parse_query(&s) {
                Ok(q) => { let _ = render_human(&explain(&q), 80); }
                Err(ExplainError::Unknown { suggestions, .. }) => prop_assert!(suggestions.len() <= 5),
            }
        }

        #[test]
        fn parse_query_never_panics_on_near_misses(prefix in "(ibv_|rdma_|wc:|RDK-|E|-)?", body in "[A-Za-z0-9_:\\- ]{0,24}") {
            let s = format!("{prefix}{body}");
            if let Ok(q) = parse_query(&s) {
                let _ = render_human(&explain(&q), 80);
            }
        }
    }
}
