//! The repository's map agrees with the code: docs/architecture.md's crate table
//! names every crate with the rdmakit crates it depends on (as each Cargo.toml says),
//! no dependency points to the same or a higher layer, and README.md's layout table
//! lists every crate.

mod common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};

/// Every crate directory with the rdmakit crates its `[dependencies]` (all targets)
/// name, without the `rdmakit-` prefix.
fn crates_from_manifests() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(repo().join("crates")).unwrap() {
        let dir = e.unwrap().path();
        let manifest = dir.join("Cargo.toml");
        if !manifest.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&manifest).unwrap();
        let doc: toml::Table = text
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        let mut deps = BTreeSet::new();
        let mut tables: Vec<&toml::Table> = Vec::new();
        if let Some(t) = doc.get("dependencies").and_then(|d| d.as_table()) {
            tables.push(t);
        }
        if let Some(targets) = doc.get("target").and_then(|t| t.as_table()) {
            for t in targets.values() {
                if let Some(d) = t.get("dependencies").and_then(|d| d.as_table()) {
                    tables.push(d);
                }
            }
        }
        for t in tables {
            for name in t.keys() {
                if let Some(short) = name.strip_prefix("rdmakit-") {
                    deps.insert(short.to_string());
                }
            }
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        out.insert(name, deps);
    }
    out
}

struct Row {
    layer: u32,
    deps: BTreeSet<String>,
}

/// The crate table of docs/architecture.md: `| `name` | layer | deps | owns |`.
fn table_from_doc() -> BTreeMap<String, Row> {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let mut out = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // ["", "`name`", "layer", "deps", "owns", ""]
        if cells.len() < 6 || !cells[1].starts_with('`') {
            continue;
        }
        let name = cells[1].trim_matches('`').to_string();
        let layer = cells[2]
            .parse()
            .unwrap_or_else(|_| panic!("docs/architecture.md: {name}: layer {:?}", cells[2]));
        let deps = if cells[3] == "—" {
            BTreeSet::new()
        } else {
            cells[3].split(',').map(|d| d.trim().to_string()).collect()
        };
        assert!(
            out.insert(name.clone(), Row { layer, deps }).is_none(),
            "docs/architecture.md lists {name} twice"
        );
    }
    out
}

#[test]
fn architecture_table_matches_the_manifests() {
    let code = crates_from_manifests();
    let doc = table_from_doc();
    assert!(code.len() >= 10, "found only {} crates", code.len());
    let code_names: BTreeSet<_> = code.keys().collect();
    let doc_names: BTreeSet<_> = doc.keys().collect();
    assert_eq!(
        code_names, doc_names,
        "docs/architecture.md's table and crates/ disagree on which crates exist"
    );
    for (name, deps) in &code {
        assert_eq!(
            deps, &doc[name].deps,
            "{name}: Cargo.toml depends on {deps:?}, docs/architecture.md says {:?}",
            doc[name].deps
        );
    }
}

#[test]
fn no_dependency_points_upward() {
    let doc = table_from_doc();
    let code = crates_from_manifests();
    for (name, deps) in &code {
        let layer = doc[name].layer;
        for d in deps {
            let dl = doc
                .get(d)
                .unwrap_or_else(|| panic!("{name} depends on {d}, which has no layer"))
                .layer;
            assert!(
                dl < layer,
                "{name} (layer {layer}) depends on {d} (layer {dl}): dependencies point downward only"
            );
        }
    }
}

#[test]
fn readme_layout_table_lists_every_crate() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let layout = readme
        .split("## Layout")
        .nth(1)
        .expect("README.md has a ## Layout section");
    let layout = layout.split("\n## ").next().unwrap();
    for name in crates_from_manifests().keys() {
        assert!(
            layout.contains(&format!("`crates/{name}`")),
            "README.md's layout table does not list crates/{name}"
        );
    }
}
