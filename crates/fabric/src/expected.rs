//! The operator's statement of the cabling, and what differs from it.
//!
//! An [`Expected`] topology is a set of cables, each between two ports
//! named by their node ([`NodeKey`]: its description, or its GUID) and port
//! number. It is read from either
//! - a topology file (ibnetdiscover's output or an ibsim net file; see
//!   [`crate::ibnetdiscover`]): every cable in it, each node named by its
//!   description when no other node in the file has that description, else
//!   by its GUID; or
//! - a cable list, one cable per line, `#` starting a comment:
//!
//! ```text
//! # spine-leaf cables
//! "spine1"[1]   "leaf1"[5]
//! "spine2"[1]   "leaf1"[6]
//! 0x0002c90300a1b2c3[1]  "leaf1"[1]   # host-01, named by node GUID
//! ```
//!
//! [`compare`] matches it with a found [`Subnet`]: a found node is named by
//! its GUID when the expected topology names that GUID, else by its
//! description. Cables in both are fine; the rest are reported as
//! [`CablingDiff`]s: two cables whose far ends were exchanged as one
//! [`CablingDiff::Swapped`], a port whose cable goes elsewhere as
//! [`CablingDiff::Miswired`], then what is left as [`CablingDiff::Missing`]
//! and [`CablingDiff::Extra`]. Every found cable the statement does not name
//! is extra, so a cable list should name every cable (or be compared with
//! a subnet cut to what it covers). Nodes whose descriptions are not unique
//! in the fabric should be named by GUID.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;

use crate::format::ibnetdiscover::{self, ParseError, MAX_BYTES};
use crate::names::parse_guid;
use crate::topology::Subnet;

/// The most cables a cable list holds.
pub const MAX_CABLES: usize = 100_000;

/// How a port's node is named.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeKey {
    /// By its NodeDescription.
    Desc(String),
    /// By its node GUID.
    Guid(u64),
}

/// One end of a cable: a node and a port number.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct End {
    /// The node.
    pub node: NodeKey,
    /// The port number.
    pub port: u8,
}

/// A cable between two ends, the lower end first.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cable {
    /// One end.
    pub a: End,
    /// The other end.
    pub b: End,
}

/// The cabling an operator expects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expected {
    cables: BTreeSet<Cable>,
}

/// One way the found cabling differs from the expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CablingDiff {
    /// An expected cable that is not there (neither end is cabled
    /// elsewhere, or its ends' other cables are reported on their own).
    Missing {
        /// One end.
        a: End,
        /// The other.
        b: End,
    },
    /// A found cable that was not expected.
    Extra {
        /// One end.
        a: End,
        /// The other.
        b: End,
    },
    /// A port cabled to another peer than expected: `expected.0` and
    /// `found.0` are the same port.
    Miswired {
        /// The expected cable, the shared port first.
        expected: (End, End),
        /// The found cable, the shared port first.
        found: (End, End),
    },
    /// Two expected cables whose far ends were exchanged: `first` is
    /// `(x, y)` and `second` is `(z, w)`, and `(x, w)` and `(z, y)` were found.
    Swapped {
        /// One expected cable.
        first: (End, End),
        /// The other.
        second: (End, End),
    },
}

impl Expected {
    /// Every cable of a topology, each node named by its description when
    /// that is unique in the subnet (and not empty), else by its GUID.
    pub fn from_subnet(subnet: &Subnet) -> Expected {
        let mut count: HashMap<&str, usize> = HashMap::new();
        for n in subnet.nodes() {
            *count.entry(n.desc.as_str()).or_default() += 1;
        }
        let key = |guid: u64| match subnet.node(guid) {
            Some(n) if !n.desc.is_empty() && count.get(n.desc.as_str()) == Some(&1) => {
                NodeKey::Desc(n.desc.clone())
            }
            _ => NodeKey::Guid(guid),
        };
        let cables = subnet.links().map(|l| cable_of(&l, &key)).collect();
        Expected { cables }
    }

    /// Reads a cable list, or a topology file (a file whose first line that
    /// is not blank or a comment starts with neither `"` nor `0x`).
    ///
    /// # Errors
    /// The topology parser's errors, or for a cable list
    /// [`ParseError::TooLarge`] past 16 MiB and [`ParseError::Line`] for a
    /// malformed line, a port in two cables, a cable from a port to itself
    /// and more than [`MAX_CABLES`] cables.
    pub fn parse(text: &str) -> Result<Expected, ParseError> {
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'));
        match first {
            Some(l) if l.starts_with('"') || l.starts_with("0x") || l.starts_with("0X") => {
                Expected::parse_cable_list(text)
            }
            _ => Ok(Expected::from_subnet(&ibnetdiscover::parse(text)?)),
        }
    }

    /// Reads a cable list (see the module's documentation).
    ///
    /// # Errors
    /// As [`Expected::parse`] for a cable list.
    pub fn parse_cable_list(text: &str) -> Result<Expected, ParseError> {
        if text.len() > MAX_BYTES {
            return Err(ParseError::TooLarge {
                size: text.len(),
                max: MAX_BYTES,
            });
        }
        let mut cables = BTreeSet::new();
        let mut seen: HashMap<End, usize> = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |message: String| ParseError::Line { line, message };
            let l = strip_comment(raw).trim();
            if l.is_empty() {
                continue;
            }
            if cables.len() >= MAX_CABLES {
                return Err(err(format!("more than {MAX_CABLES} cables")));
            }
            let (a, rest) = end(l).map_err(err)?;
            let (b, rest) = end(rest.trim_start()).map_err(err)?;
            if !rest.trim().is_empty() {
                return Err(err(format!(
                    "unexpected {:?} after the second port",
                    rest.trim()
                )));
            }
            if a == b {
                return Err(err(format!("a cable from {a} to itself")));
            }
            for e in [&a, &b] {
                if let Some(prev) = seen.insert(e.clone(), line) {
                    return Err(err(format!("{e} is already in the cable on line {prev}")));
                }
            }
            cables.insert(Cable::new(a, b));
        }
        Ok(Expected { cables })
    }

    /// The cables, in order.
    pub fn cables(&self) -> impl Iterator<Item = &Cable> {
        self.cables.iter()
    }
}

/// What differs between the expected cabling and a found subnet: swaps,
/// then miswired ports, then missing and extra cables, each in order.
pub fn compare(expected: &Expected, found: &Subnet) -> Vec<CablingDiff> {
    let by_guid: HashSet<u64> = expected
        .cables
        .iter()
        .flat_map(|c| [&c.a.node, &c.b.node])
        .filter_map(|k| match k {
            NodeKey::Guid(g) => Some(*g),
            NodeKey::Desc(_) => None,
        })
        .collect();
    let key = |guid: u64| match found.node(guid) {
        Some(n) if !by_guid.contains(&guid) => NodeKey::Desc(n.desc.clone()),
        _ => NodeKey::Guid(guid),
    };
    let found_cables: BTreeSet<Cable> = found.links().map(|l| cable_of(&l, &key)).collect();
    let missing: Vec<&Cable> = expected.cables.difference(&found_cables).collect();
    let extra: Vec<&Cable> = found_cables.difference(&expected.cables).collect();
    Matcher::new(missing, extra).run()
}

/// Pairs missing and extra cables that share ports.
struct Matcher<'a> {
    missing: Vec<&'a Cable>,
    extra: Vec<&'a Cable>,
    /// A port's missing (expected) cable and extra (found) cable, by index.
    missing_at: BTreeMap<&'a End, usize>,
    extra_at: BTreeMap<&'a End, usize>,
    used_missing: Vec<bool>,
    used_extra: Vec<bool>,
}

impl<'a> Matcher<'a> {
    fn new(missing: Vec<&'a Cable>, extra: Vec<&'a Cable>) -> Matcher<'a> {
        let mut missing_at = BTreeMap::new();
        for (i, c) in missing.iter().enumerate() {
            missing_at.insert(&c.a, i);
            missing_at.insert(&c.b, i);
        }
        let mut extra_at = BTreeMap::new();
        for (i, c) in extra.iter().enumerate() {
            extra_at.insert(&c.a, i);
            extra_at.insert(&c.b, i);
        }
        Matcher {
            used_missing: vec![false; missing.len()],
            used_extra: vec![false; extra.len()],
            missing,
            extra,
            missing_at,
            extra_at,
        }
    }

    fn run(mut self) -> Vec<CablingDiff> {
        let mut out = Vec::new();
        // Swaps: expected (x, y) and (z, w), found (x, w) and (z, y).
        for i in 0..self.missing.len() {
            if self.used_missing[i] {
                continue;
            }
            let m1 = self.missing[i];
            for (x, y) in [(&m1.a, &m1.b), (&m1.b, &m1.a)] {
                if let Some(d) = self.swap(i, x, y) {
                    out.push(d);
                    break;
                }
            }
        }
        // Miswired: expected (x, y), found (x, c).
        for i in 0..self.missing.len() {
            if self.used_missing[i] {
                continue;
            }
            let m = self.missing[i];
            for (x, y) in [(&m.a, &m.b), (&m.b, &m.a)] {
                let Some(&e) = self.extra_at.get(x) else {
                    continue;
                };
                if self.used_extra[e] {
                    continue;
                }
                let c = self.extra[e].other(x);
                self.used_missing[i] = true;
                self.used_extra[e] = true;
                out.push(CablingDiff::Miswired {
                    expected: (x.clone(), y.clone()),
                    found: (x.clone(), c.clone()),
                });
                break;
            }
        }
        for (i, m) in self.missing.iter().enumerate() {
            if !self.used_missing[i] {
                out.push(CablingDiff::Missing {
                    a: m.a.clone(),
                    b: m.b.clone(),
                });
            }
        }
        for (i, e) in self.extra.iter().enumerate() {
            if !self.used_extra[i] {
                out.push(CablingDiff::Extra {
                    a: e.a.clone(),
                    b: e.b.clone(),
                });
            }
        }
        out
    }

    fn swap(&mut self, i: usize, x: &'a End, y: &'a End) -> Option<CablingDiff> {
        let e1 = *self.extra_at.get(x)?;
        let w = self.extra[e1].other(x);
        let m2 = *self.missing_at.get(w)?;
        let z = self.missing[m2].other(w);
        let e2 = *self.extra_at.get(z)?;
        let free = !self.used_extra[e1] && !self.used_extra[e2] && !self.used_missing[m2];
        if m2 == i || e1 == e2 || !free || self.extra[e2].other(z) != y {
            return None;
        }
        self.used_missing[i] = true;
        self.used_missing[m2] = true;
        self.used_extra[e1] = true;
        self.used_extra[e2] = true;
        Some(CablingDiff::Swapped {
            first: (x.clone(), y.clone()),
            second: (z.clone(), w.clone()),
        })
    }
}

impl Cable {
    /// The cable between two ends, the lower end first.
    pub fn new(x: End, y: End) -> Cable {
        if x <= y {
            Cable { a: x, b: y }
        } else {
            Cable { a: y, b: x }
        }
    }

    /// The end that is not `e` (`a` when `e` is neither).
    fn other(&self, e: &End) -> &End {
        if &self.a == e {
            &self.b
        } else {
            &self.a
        }
    }
}

/// `"desc"[N]` or `0xGUID[N]` at the start of `s`, and the rest.
fn end(s: &str) -> Result<(End, &str), String> {
    let (node, rest) = if let Some(q) = s.strip_prefix('"') {
        let close = q
            .find('"')
            .ok_or("a description without its closing quote")?;
        if close == 0 {
            return Err("an empty description".into());
        }
        (NodeKey::Desc(q[..close].to_string()), &q[close + 1..])
    } else {
        let stop = s
            .find('[')
            .ok_or_else(|| format!("no [port] in {:?}", short(s)))?;
        let g = parse_guid(s[..stop].trim()).ok_or_else(|| {
            format!(
                "{:?} is neither a quoted description nor a 0x GUID",
                short(&s[..stop])
            )
        })?;
        (NodeKey::Guid(g), &s[stop..])
    };
    let rest = rest
        .strip_prefix('[')
        .ok_or_else(|| format!("no [port] after {}", key_text(&node)))?;
    let close = rest.find(']').ok_or("a [port without its ']'")?;
    let port: u8 = rest[..close]
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("port {:?} is not 1 to 255", short(&rest[..close])))?;
    Ok((End { node, port }, &rest[close + 1..]))
}

/// The line without a `#` comment (a `#` inside quotes is text).
fn strip_comment(l: &str) -> &str {
    let mut quoted = false;
    for (i, c) in l.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return &l[..i],
            _ => {}
        }
    }
    l
}

fn short(s: &str) -> &str {
    match s.char_indices().nth(60) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn key_text(k: &NodeKey) -> String {
    match k {
        NodeKey::Desc(d) => format!("{d:?}"),
        NodeKey::Guid(g) => format!("{g:#018x}"),
    }
}

impl fmt::Display for End {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", key_text(&self.node), self.port)
    }
}

impl fmt::Display for CablingDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CablingDiff::Missing { a, b } => write!(f, "missing cable {a} - {b}"),
            CablingDiff::Extra { a, b } => write!(f, "unexpected cable {a} - {b}"),
            CablingDiff::Miswired { expected, found } => write!(
                f,
                "{} goes to {}, expected {}",
                expected.0, found.1, expected.1
            ),
            CablingDiff::Swapped { first, second } => write!(
                f,
                "cables swapped: {} goes to {} and {} to {}; expected {} - {} and {} - {}",
                first.0, second.1, second.0, first.1, first.0, first.1, second.0, second.1
            ),
        }
    }
}

/// A found cable, its ends named by `key`.
fn cable_of(l: &crate::topology::Link, key: &impl Fn(u64) -> NodeKey) -> Cable {
    let end = |r: &crate::topology::PortRef| End {
        node: key(r.guid),
        port: r.port,
    };
    Cable::new(end(&l.a), end(&l.b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str, p: u8) -> End {
        End {
            node: NodeKey::Desc(s.into()),
            port: p,
        }
    }

    #[test]
    fn cable_list_lines_comments_and_guids() {
        let e = Expected::parse(
            "# cables\n\"S1\"[7]  \"S2\"[7]  # inter-switch\n\n0x10[1] \"S#1\"[1]\n",
        )
        .unwrap();
        let c: Vec<&Cable> = e.cables().collect();
        assert_eq!(c.len(), 2);
        // Ordered by end: "S#1" sorts before "S1".
        assert_eq!(c[1], &Cable::new(d("S1", 7), d("S2", 7)));
        assert_eq!(
            c[0],
            &Cable::new(
                End {
                    node: NodeKey::Guid(0x10),
                    port: 1
                },
                d("S#1", 1)
            )
        );
    }

    #[test]
    fn cable_list_errors_name_their_line() {
        let bad = |t: &str| Expected::parse_cable_list(t).unwrap_err().to_string();
        assert_eq!(
            bad("\"A\"[1] \"B\"[1]\n\"A\"[1] \"C\"[2]\n"),
            "line 2: \"A\"[1] is already in the cable on line 1"
        );
        assert!(bad("\"A\"[0] \"B\"[1]").starts_with("line 1: port \"0\""));
        assert!(
            bad("\"A\"[1]").starts_with("line 1: no [port]"),
            "{}",
            bad("\"A\"[1]")
        );
        assert!(bad("\"A\"[1] \"B\"[1] x").contains("unexpected \"x\""));
        assert!(bad("\"A\"[1] \"A\"[1]").contains("to itself"));
        assert!(bad("0xzz[1] \"A\"[1]").contains("neither"));
    }

    #[test]
    fn a_swap_is_one_diff_and_a_moved_cable_is_miswired() {
        // Expected h1-l1, h2-l2 as a net file, found with the two swapped.
        let exp = Expected::parse(
            "Hca 1 \"h1\"\n[1] \"sw\"[1]\n\nHca 1 \"h2\"\n[1] \"sw\"[2]\n\nSwitch 4 \"sw\"\n",
        )
        .unwrap();
        let found = ibnetdiscover::parse(
            "Hca 1 \"h1\"\n[1] \"sw\"[2]\n\nHca 1 \"h2\"\n[1] \"sw\"[1]\n\nSwitch 4 \"sw\"\n",
        )
        .unwrap();
        let diffs = compare(&exp, &found);
        assert_eq!(
            diffs,
            [CablingDiff::Swapped {
                first: (d("h1", 1), d("sw", 1)),
                second: (d("h2", 1), d("sw", 2)),
            }]
        );
        // h2 moved from sw[2] to sw[3]: one miswired port.
        let found = ibnetdiscover::parse(
            "Hca 1 \"h1\"\n[1] \"sw\"[1]\n\nHca 1 \"h2\"\n[1] \"sw\"[3]\n\nSwitch 4 \"sw\"\n",
        )
        .unwrap();
        let diffs = compare(&exp, &found);
        assert_eq!(
            diffs,
            [CablingDiff::Miswired {
                expected: (d("h2", 1), d("sw", 2)),
                found: (d("h2", 1), d("sw", 3)),
            }]
        );
        assert_eq!(
            diffs[0].to_string(),
            "\"h2\"[1] goes to \"sw\"[3], expected \"sw\"[2]"
        );
    }
}
