//! The layout rule of a crate whose parts own their state (issue 36): a
//! type's inherent `impl` blocks live in the file that defines it, so no
//! other file reaches into its private fields, and no source file is over
//! a size. Other files use a type through its methods.
//!
//! The check reads the sources as text: a line that defines a `struct`,
//! `enum` or `union` names a type; an `impl` header without `for` is an
//! inherent impl of the type its path ends in. A type defined in several
//! files (two modules may each have a `Table`) may be implemented in any
//! of them. Trait impls may live anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every breach of the rule under `src`: files over `max_lines` lines, and
/// inherent impls outside the file that defines their type. Empty when the
/// crate keeps it.
///
/// # Panics
/// When `src` cannot be read.
pub fn violations(src: &Path, max_lines: usize) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut defined: BTreeMap<String, BTreeSet<PathBuf>> = BTreeMap::new();
    let mut implemented: Vec<(String, PathBuf, usize)> = Vec::new();
    let mut out = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        let rel = f.strip_prefix(src).unwrap_or(f).to_path_buf();
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() > max_lines {
            out.push(format!(
                "{}: {} lines, more than {max_lines}",
                rel.display(),
                lines.len()
            ));
        }
        for (i, line) in lines.iter().enumerate() {
            if let Some(name) = defined_type(line) {
                defined.entry(name).or_default().insert(rel.clone());
            }
            if let Some(name) = inherent_impl(&lines[i..]) {
                implemented.push((name, rel.clone(), i + 1));
            }
        }
    }
    for (name, file, line) in implemented {
        // A type this crate does not define (a foreign one cannot have an
        // inherent impl here anyway) or one defined in this very file.
        let Some(homes) = defined.get(&name) else {
            continue;
        };
        if !homes.contains(&file) {
            let homes: Vec<String> = homes.iter().map(|h| h.display().to_string()).collect();
            out.push(format!(
                "{}:{line}: `impl {name}` outside the file that defines it ({})",
                file.display(),
                homes.join(", ")
            ));
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `line` without a leading visibility (`pub`, `pub(crate)`, ...).
fn strip_visibility(line: &str) -> &str {
    let t = line.trim_start();
    let Some(rest) = t.strip_prefix("pub") else {
        return t;
    };
    let rest = if rest.starts_with('(') {
        match rest.find(')') {
            Some(end) => &rest[end + 1..],
            None => return t,
        }
    } else {
        rest
    };
    if rest.starts_with(char::is_whitespace) {
        rest.trim_start()
    } else {
        t
    }
}

fn ident(s: &str) -> Option<String> {
    let name: String = s
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The type a line defines, if it defines one.
fn defined_type(line: &str) -> Option<String> {
    let t = strip_visibility(line);
    ["struct ", "enum ", "union "]
        .iter()
        .find_map(|kw| t.strip_prefix(kw))
        .and_then(ident)
}

/// The type an inherent impl starting at `lines[0]` is for, if one does.
fn inherent_impl(lines: &[&str]) -> Option<String> {
    let first = lines.first()?.trim_start();
    let rest = first.strip_prefix("impl")?;
    if !(rest.starts_with('<') || rest.starts_with(char::is_whitespace)) {
        return None;
    }
    // The header, up to its body (rustfmt may break a long one).
    let mut header = String::new();
    for l in lines.iter().take(8) {
        header.push_str(l);
        header.push(' ');
        if l.contains('{') || l.contains(';') {
            break;
        }
    }
    let header = header.split('{').next().unwrap_or("");
    if header.split_whitespace().any(|w| w == "for") {
        return None;
    }
    // Skip the impl's own generics, then read the type's path.
    let mut s = header.trim_start().strip_prefix("impl")?.trim_start();
    if s.starts_with('<') {
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in s.char_indices() {
            match c {
                '<' => depth += 1,
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        s = s[end? + 1..].trim_start();
    }
    let path: String = s
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    path.rsplit("::").next().and_then(ident)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_read_as_rustfmt_writes_them() {
        assert_eq!(defined_type("pub(super) struct Qps {"), Some("Qps".into()));
        assert_eq!(defined_type("    pub enum State {"), Some("State".into()));
        assert_eq!(
            defined_type("struct PdGuard<'a>(X);"),
            Some("PdGuard".into())
        );
        assert_eq!(defined_type("// struct Not"), None);
        assert_eq!(inherent_impl(&["impl Cm {"]), Some("Cm".into()));
        assert_eq!(
            inherent_impl(&["impl PdGuard<'_> {"]),
            Some("PdGuard".into())
        );
        assert_eq!(
            inherent_impl(&["impl<T: Clone> super::Ring<T>", "where", "{"]),
            Some("Ring".into())
        );
        assert_eq!(inherent_impl(&["impl Memory for EngineMem<'_> {"]), None);
        assert_eq!(
            inherent_impl(&["impl<'a> core::fmt::Debug", "    for Big<'a>", "{"]),
            None
        );
        assert_eq!(inherent_impl(&["/// impl Cm in two files"]), None);
        assert_eq!(inherent_impl(&["implements {"]), None);
    }

    #[test]
    fn an_impl_away_from_its_type_and_a_long_file_are_reported() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("a.rs"),
            "pub struct A { x: u8 }\nimpl A {\n}\n",
        )
        .unwrap();
        std::fs::create_dir(d.path().join("b")).unwrap();
        std::fs::write(
            d.path().join("b/mod.rs"),
            "use super::A;\nimpl A {\n}\nimpl Clone for A { }\n",
        )
        .unwrap();
        let v = violations(d.path(), 3);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v[0].starts_with("b/mod.rs: 4 lines"), "{v:?}");
        assert!(v[1].starts_with("b/mod.rs:2: `impl A`"), "{v:?}");
        assert!(violations(d.path(), 10).len() == 1);
    }
}
