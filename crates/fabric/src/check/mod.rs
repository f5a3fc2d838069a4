//! The fabric's judgement: pure functions from what was read about a subnet
//! to the doctor's [`Finding`]s (codes `RDK-F001` …, layer `fabric`).
//!
//! [`run`] takes [`Facts`] — the topology ([`Subnet`]), and, when they were
//! read, the PMA counters ([`CounterSnapshot`]: [`crate::counters::Counters`]
//! and the time they were read) with an earlier snapshot as a
//! baseline, the subnet manager's answers ([`SmFacts`]), the operator's
//! expected cabling ([`Expected`]) and the GUID conflicts discovery met
//! ([`GuidConflict`]) — and a [`Config`] (thresholds, severity overrides),
//! and returns every finding, most severe first. Each finding names the
//! node's description, its GUID, the port and the value read in its
//! evidence, says what to do, and gives the infiniband-diags command to run
//! next (`iblinkinfo`, `perfquery -x LID PORT`, `ibqueryerrors`, `sminfo`,
//! `ibportstate LID PORT`, `ibnetdiscover`).
//!
//! What is judged, by area (docs/fabric.md lists every code with its
//! thresholds and where each came from):
//! - links ([`links`]): a width or speed below what both ends support and
//!   enable (F001, F002); a port Down, Polling or Disabled where the expected
//!   topology has a cable (F003);
//! - counters ([`counters`]): LinkDowned (F004), physical link errors (F005),
//!   discards and forwarding errors (F006) against infiniband-diags'
//!   thresholds, on totals or, with a baseline, on the growth since it with
//!   its rate per second; saturated counters (F007);
//! - the subnet manager ([`sm`]): none MASTER (F008), several (F009), a
//!   MASTER below a STANDBY's priority (F010), ports disagreeing on the SM
//!   LID (F011), an activity count that does not move (F012);
//! - identity ([`identity`]): duplicate GUIDs (F013), active ports without a
//!   LID (F014), duplicate LIDs (F015);
//! - cabling ([`cabling`]): each [`crate::CablingDiff`] (F016 … F018), a swap
//!   said once and a node that is not there at all said once.
//!
//! One cause said once: the same code with the same cause on several ports
//! of one node (the same counter over threshold on 40 ports of a switch) is
//! one finding for the node, listing the ports and each port's evidence
//! ([`group`]); findings of one code whose messages say the same thing on
//! several nodes are grouped again by the doctor's renderer
//! (`rdmakit_doctor::group`).
//!
//! Promises: no I/O, no clock (a snapshot carries the time it was read), no
//! panic on any input; the same facts give the same findings.
//!
//! ```
//! use rdmakit_fabric::{check, fat_tree, ibnetdiscover};
//! use rdmakit_types::{Speed, Width};
//!
//! // A generated net file: cabled as planned, but no SM has given LIDs yet.
//! let net = fat_tree(2, 4, 4, 1, Width::X4, Speed::Qdr).unwrap();
//! let subnet = ibnetdiscover::parse(&net).unwrap();
//! let planned = rdmakit_fabric::Expected::parse(&net).unwrap();
//! let facts = check::Facts::new(&subnet).expected(&planned);
//! let findings = check::run(&facts, &check::Config::default());
//! assert_eq!(findings.len(), 1, "{findings:?}");
//! assert_eq!(findings[0].code.as_str(), "RDK-F014");
//! assert!(findings[0].message.contains("none of the 22 ports that are up has a LID"));
//! ```

pub mod cabling;
pub mod counters;
pub mod flags;
pub mod group;
pub mod identity;
pub mod links;
pub mod sm;

use std::collections::BTreeMap;

use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::finding::Finding;

use crate::expected::Expected;
use crate::topology::{Node, Subnet};

pub use counters::{CounterSnapshot, Threshold, THRESHOLDS};
pub use identity::GuidConflict;
pub use sm::{SmAnswer, SmFacts, SmInfo, SmState};

/// Everything a check can judge; only the topology is required.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    /// The subnet as found.
    pub subnet: &'a Subnet,
    /// The PMA counters read now.
    pub counters: Option<&'a CounterSnapshot>,
    /// The counters read earlier: growth and rates are judged instead of
    /// totals.
    pub baseline: Option<&'a CounterSnapshot>,
    /// The subnet manager's answers.
    pub sm: Option<&'a SmFacts>,
    /// The operator's expected cabling.
    pub expected: Option<&'a Expected>,
    /// Node GUIDs that discovery found on two different nodes (a
    /// [`Subnet`] cannot hold both).
    pub conflicts: &'a [GuidConflict],
}

impl<'a> Facts<'a> {
    /// Facts with only the topology.
    pub fn new(subnet: &'a Subnet) -> Facts<'a> {
        Facts {
            subnet,
            counters: None,
            baseline: None,
            sm: None,
            expected: None,
            conflicts: &[],
        }
    }

    /// With the counters read now.
    pub fn counters(mut self, c: &'a CounterSnapshot) -> Facts<'a> {
        self.counters = Some(c);
        self
    }

    /// With an earlier reading of the counters.
    pub fn baseline(mut self, b: &'a CounterSnapshot) -> Facts<'a> {
        self.baseline = Some(b);
        self
    }

    /// With the subnet manager's answers.
    pub fn sm(mut self, sm: &'a SmFacts) -> Facts<'a> {
        self.sm = Some(sm);
        self
    }

    /// With the expected cabling.
    pub fn expected(mut self, e: &'a Expected) -> Facts<'a> {
        self.expected = Some(e);
        self
    }

    /// With the GUID conflicts discovery met.
    pub fn conflicts(mut self, c: &'a [GuidConflict]) -> Facts<'a> {
        self.conflicts = c;
        self
    }
}

/// What the operator told the check to expect.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Above these totals (and, with a baseline, growths) a counter is
    /// reported; by perfquery's counter name. Starts as [`THRESHOLDS`].
    pub thresholds: BTreeMap<String, Threshold>,
    /// LinkDowned growth since the baseline from which the finding is an
    /// error (a flapping link); below it a warning.
    pub flap_error: u64,
    /// Per-code severity overrides.
    pub overrides: BTreeMap<Code, Severity>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            thresholds: THRESHOLDS
                .iter()
                .map(|t| (t.counter.to_string(), *t))
                .collect(),
            flap_error: 3,
            overrides: BTreeMap::new(),
        }
    }
}

/// The most bytes [`Config::read_error_thresholds`] reads.
pub const MAX_THRESHOLD_BYTES: usize = 64 << 10;

/// A threshold file could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    /// Past [`MAX_THRESHOLD_BYTES`].
    #[error("the threshold file is {0} bytes, more than {MAX_THRESHOLD_BYTES}")]
    TooLarge(usize),
    /// A line that is not `Name=value` with a known counter and a number.
    #[error("line {line}: {message}")]
    Line {
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

impl Config {
    /// Sets thresholds from text in infiniband-diags' `error_thresholds`
    /// format (what `ibqueryerrors --threshold-file` reads): `Name=value`
    /// lines, `#` comment lines, blank lines; values in decimal or `0x`
    /// hex, as `strtoul` with base 0 reads them. A value sets the counter's
    /// threshold on totals and on growth, except that any growth of
    /// LinkDownedCounter and LinkErrorRecoveryCounter stays a finding.
    ///
    /// # Errors
    /// [`ThresholdError::TooLarge`] past [`MAX_THRESHOLD_BYTES`];
    /// [`ThresholdError::Line`] for a counter the check does not judge or a
    /// value that is not a number (the config is then unchanged).
    pub fn read_error_thresholds(&mut self, text: &str) -> Result<(), ThresholdError> {
        if text.len() > MAX_THRESHOLD_BYTES {
            return Err(ThresholdError::TooLarge(text.len()));
        }
        let mut next = self.thresholds.clone();
        for (i, raw) in text.lines().enumerate() {
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let err = |message: String| ThresholdError::Line {
                line: i + 1,
                message,
            };
            let (name, value) = l
                .split_once('=')
                .ok_or_else(|| err(format!("{l:?} is not Name=value")))?;
            let (name, value) = (name.trim(), value.trim());
            let v = match value
                .strip_prefix("0x")
                .or_else(|| value.strip_prefix("0X"))
            {
                Some(h) => u64::from_str_radix(h, 16),
                None => value.parse(),
            }
            .map_err(|_| err(format!("{value:?} is not a number")))?;
            let t = next
                .get_mut(name)
                .ok_or_else(|| err(format!("{name:?} is not a counter the check judges")))?;
            t.total = v;
            let any_growth =
                t.kind == counters::Kind::LinkDowned || t.counter == "LinkErrorRecoveryCounter";
            if !any_growth {
                t.growth = v;
            }
        }
        self.thresholds = next;
        Ok(())
    }
}

/// Every finding the facts give, most severe first, then by code and
/// subject.
pub fn run(facts: &Facts, cfg: &Config) -> Vec<Finding> {
    let mut drafts = Vec::new();
    drafts.extend(links::check(facts));
    if let Some(now) = facts.counters {
        drafts.extend(counters::check(now, facts.baseline, facts.subnet, cfg));
    }
    if let Some(sm) = facts.sm {
        drafts.extend(sm::check(sm, facts.subnet));
    }
    drafts.extend(identity::check(facts.subnet, facts.conflicts));
    if let Some(e) = facts.expected {
        drafts.extend(cabling::check(e, facts.subnet));
    }
    let mut out = group::merge(drafts);
    for f in &mut out {
        if let Some(s) = cfg.overrides.get(&f.code) {
            f.severity = *s;
        }
    }
    out.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.code.cmp(&b.code))
            .then(a.subject.cmp(&b.subject))
    });
    out
}

/// A node as findings name it: its description, or its GUID when it has
/// none.
pub(crate) fn node_name(n: &Node) -> String {
    if n.desc.trim().is_empty() {
        format!("{:#018x}", n.guid)
    } else {
        n.desc.clone()
    }
}

/// `leaf1 (0x0000000000200000) port 3`: where a value was read.
pub(crate) fn at(n: &Node, port: u8) -> String {
    format!("{} ({:#018x}) port {port}", node_name(n), n.guid)
}

/// `rdmakit explain CODE`.
pub(crate) fn explain(code: Code) -> String {
    format!("rdmakit explain {}", code.as_str())
}
