//! One report per node name.
//!
//! A node's report can arrive more than once: the same sweep given twice, a
//! bundle beside the capture it came from, two hosts cloned with one
//! `/etc/hostname` — or one report repeated fifty thousand times by someone who
//! wants the fleet report to run out of memory or to outvote the other nodes of
//! a cohort. So every name counts once: the report read last is kept (inputs in
//! the order given, a directory's files by name, a file's lines in order — a
//! sweep appends, so the last is the newest), and the name becomes one
//! [`Duplicate`] that lists where it appeared, reported once on the kept node.
//!
//! [`Unique::push`] is constant time (a hash map from name to slot), and a
//! duplicate costs one origin string: reading N reports is linear in N however
//! many share a name.

use std::collections::HashMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::node::NodeReport;

/// The most distinct node names a fleet report takes (its inputs and a
/// `--baseline` each): twice the largest clusters in service (Frontier has
/// 9,408 nodes), and what keeps the analysis within 500 MB: about 7 KB a node
/// even with one device each (measured: 50,000 distinct nodes, 446 MB with
/// `--json`; 50,000 more in a baseline, 735 MB).
pub const MAX_NODES: usize = 20_000;

/// A list of at most [`MAX_NODES`] items, refused while it is parsed (a
/// previous fleet report's `nodes[]`).
pub(crate) fn at_most_max_nodes<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct AtMost<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for AtMost<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {MAX_NODES} nodes")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(x) = seq.next_element()? {
                if out.len() == MAX_NODES {
                    return Err(serde::de::Error::custom(format_args!(
                        "over {MAX_NODES} nodes (the cap for fleets)"
                    )));
                }
                out.push(x);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(AtMost(std::marker::PhantomData))
}

/// A node name that more than one report carried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Duplicate {
    pub name: String,
    /// Every input (or `FILE:LINE`) that carried the name, in reading order;
    /// the last is the one used.
    pub origins: Vec<String>,
    /// Always empty: reports of one name are no longer kept apart under other
    /// names (`NAME#2`); kept so readers of rdmakit.fleet/v1 still find it.
    #[serde(default)]
    pub renamed: Vec<String>,
    /// The report used: the last of `origins`.
    #[serde(default)]
    pub used: String,
    /// How many reports carried the name (`origins.len()`).
    #[serde(default)]
    pub count: usize,
}

impl Duplicate {
    /// "node17 appears in 50000 inputs (a.jsonl:1, a.jsonl:2, a.jsonl:3 and
    /// 49996 more); the last read, a.jsonl:50000, was used": a few origins, so
    /// the message stays one line however many there are.
    pub fn message(&self) -> String {
        const SHOWN: usize = 3;
        let others = &self.origins[..self.origins.len().saturating_sub(1)];
        let mut listed = others
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if others.len() > SHOWN {
            listed.push_str(&format!(" and {} more", others.len() - SHOWN));
        }
        format!(
            "{} appears in {} inputs ({listed}); the last read, {}, was used",
            self.name, self.count, self.used
        )
    }
}

/// Node reports with one per name, in order of each name's first appearance.
#[derive(Debug, Default)]
pub struct Unique {
    nodes: Vec<NodeReport>,
    /// The origins each node's name appeared in (parallel to `nodes`).
    origins: Vec<Vec<String>>,
    at: HashMap<String, usize>,
}

impl Unique {
    pub fn new() -> Unique {
        Unique::default()
    }

    /// Adds a report; one of a name already seen replaces it (the later one
    /// wins) and the name's origins grow by one.
    pub fn push(&mut self, n: NodeReport) {
        self.push_seen(n, Vec::new());
    }

    /// Adds every report of `other`, after this one's (its reports are later).
    pub fn extend(&mut self, other: Unique) {
        for (n, mut origins) in other.nodes.into_iter().zip(other.origins) {
            // `other` recorded the node's own origin last; `push_seen` adds it again.
            origins.pop();
            self.push_seen(n, origins);
        }
    }

    fn push_seen(&mut self, n: NodeReport, earlier: Vec<String>) {
        match self.at.get(&n.name) {
            Some(&i) => {
                self.origins[i].extend(earlier);
                self.origins[i].push(n.origin.clone());
                self.nodes[i] = n;
            }
            None => {
                let mut origins = earlier;
                origins.push(n.origin.clone());
                self.at.insert(n.name.clone(), self.nodes.len());
                self.origins.push(origins);
                self.nodes.push(n);
            }
        }
    }

    /// How many distinct names.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when `name` has been seen.
    pub fn contains(&self, name: &str) -> bool {
        self.at.contains_key(name)
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The reports, one per name, and the names that came more than once
    /// (sorted by name).
    pub fn into_parts(self) -> (Vec<NodeReport>, Vec<Duplicate>) {
        let mut dups: Vec<Duplicate> = self
            .nodes
            .iter()
            .zip(self.origins)
            .filter(|(_, o)| o.len() > 1)
            .map(|(n, origins)| Duplicate {
                name: n.name.clone(),
                used: n.origin.clone(),
                count: origins.len(),
                origins,
                renamed: Vec::new(),
            })
            .collect();
        dups.sort_by(|a, b| crate::report::natural_cmp(&a.name, &b.name));
        (self.nodes, dups)
    }
}

impl FromIterator<NodeReport> for Unique {
    fn from_iter<I: IntoIterator<Item = NodeReport>>(iter: I) -> Unique {
        let mut u = Unique::new();
        for n in iter {
            u.push(n);
        }
        u
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, origin: &str) -> NodeReport {
        NodeReport::missing(name, origin, "test")
    }

    #[test]
    fn the_last_report_of_a_name_is_kept_and_the_name_listed_once() {
        let mut a: Unique = [node("n1", "a:1"), node("n2", "a:2"), node("n1", "a:3")]
            .into_iter()
            .collect();
        let b: Unique = [node("n1", "b:1"), node("n3", "b:2")].into_iter().collect();
        a.extend(b);
        assert_eq!(a.len(), 3);
        let (nodes, dups) = a.into_parts();
        let names: Vec<(&str, &str)> = nodes
            .iter()
            .map(|n| (n.name.as_str(), n.origin.as_str()))
            .collect();
        assert_eq!(names, [("n1", "b:1"), ("n2", "a:2"), ("n3", "b:2")]);
        assert_eq!(dups.len(), 1);
        assert_eq!(dups[0].origins, ["a:1", "a:3", "b:1"]);
        assert_eq!(dups[0].used, "b:1");
        assert_eq!(dups[0].count, 3);
        assert_eq!(
            dups[0].message(),
            "n1 appears in 3 inputs (a:1, a:3); the last read, b:1, was used"
        );
    }

    #[test]
    fn fifty_thousand_copies_make_one_node_and_a_one_line_message() {
        let u: Unique = (1..=50_000)
            .map(|i| node("node17", &format!("sweep.jsonl:{i}")))
            .collect();
        let (nodes, dups) = u.into_parts();
        assert_eq!(nodes.len(), 1);
        assert_eq!(
            dups[0].message(),
            "node17 appears in 50000 inputs (sweep.jsonl:1, sweep.jsonl:2, sweep.jsonl:3 and \
             49996 more); the last read, sweep.jsonl:50000, was used"
        );
    }
}
