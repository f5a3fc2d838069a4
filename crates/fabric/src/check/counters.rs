//! Port counters that mean trouble, read through the PMA (perfquery's
//! names): LinkDowned (RDK-F004), physical link errors (RDK-F005), discards
//! and forwarding errors (RDK-F006), each against a [`Threshold`]; and
//! counters that stopped at all ones (RDK-F007).
//!
//! Thresholds ([`THRESHOLDS`]) are the values infiniband-diags ships in
//! `etc/error_thresholds` (installed as
//! `/etc/infiniband-diags/error_thresholds`, every line commented out: the
//! values ibqueryerrors' `--threshold-file` documents). ibqueryerrors itself,
//! with that file as shipped, compares each counter with a threshold table
//! that starts all zero (`exceeds_threshold`: `val > thres`), so it lists
//! any non-zero count; the file's values are the ones an operator turns on
//! and the ones the doctor uses for a host's own port (RDK-H010).
//!
//! Without a baseline the totals are judged (counts since the counters were
//! last cleared, which may be months). With a baseline — an earlier
//! [`CounterSnapshot`] of the same ports with its time — the growth since it
//! is judged against the same thresholds, and given with its rate per
//! second; LinkDownedCounter and LinkErrorRecoveryCounter are reported on
//! any growth (a link that went down or retrained between two reads), and
//! LinkDowned growth of [`super::Config::flap_error`] or more is an error (a
//! flapping link). A counter that went down since the baseline was cleared
//! in between: its value now is the growth.
//!
//! A counter that reads all ones for its width in PortCounters (wire's
//! `pma::port_counters::COUNTERS`: 4, 8, 16 or 32 bits) has saturated: it
//! stays there until cleared, so neither its total nor its growth means
//! anything. It is reported as such (RDK-F007) instead of against its
//! threshold. Values above the 32-bit maximum come from the extended
//! counters and are never taken for saturated.

use std::collections::{BTreeMap, HashMap};

use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::finding::{Evidence, Finding};
use rdmakit_wire::mad::pma::port_counters;
use serde::{Deserialize, Serialize};

use super::group::Draft;
use super::{at, explain, node_name, Config};
use crate::counters::{Counters, PortCounters, SCHEMA};
use crate::topology::{PortRef, Subnet};

/// The most bytes [`CounterSnapshot::from_json`] reads.
pub const MAX_JSON_BYTES: usize = 256 << 20;

/// Every port's PMA counters as read at one time: what `rdmakit fabric
/// counters --json` prints ([`Counters`], schema
/// `rdmakit.fabric.counters/v1`) and when it was read. `rdmakit fabric
/// check --save FILE` writes one; a `counters --json` output reads as one
/// without a time (growth is then judged without rates).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CounterSnapshot {
    /// When the counters were read, in seconds since the UNIX epoch; None
    /// when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<f64>,
    /// The counters.
    #[serde(flatten)]
    pub counters: Counters,
}

/// What a counter's count points at, and so its code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// LinkDownedCounter (RDK-F004).
    LinkDowned,
    /// The physical link: cable, transceiver, connector (RDK-F005).
    Link,
    /// Discards, relay and constraint errors, VL15 drops and transmit wait:
    /// congestion, routing, partitions (RDK-F006).
    Forwarding,
}

impl Kind {
    /// The finding code of the kind.
    pub fn code(self) -> Code {
        match self {
            Kind::LinkDowned => Code::F004,
            Kind::Link => Code::F005,
            Kind::Forwarding => Code::F006,
        }
    }
}

/// When a counter is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threshold {
    /// perfquery's name of the counter.
    pub counter: &'static str,
    /// Totals above this are reported.
    pub total: u64,
    /// Growth since a baseline above this is reported.
    pub growth: u64,
    /// What a count points at.
    pub kind: Kind,
}

const fn t(counter: &'static str, total: u64, growth: u64, kind: Kind) -> Threshold {
    Threshold {
        counter,
        total,
        growth,
        kind,
    }
}

/// The thresholds, in PortCounters' order: totals from infiniband-diags'
/// `etc/error_thresholds`; growth the same but for LinkDownedCounter and
/// LinkErrorRecoveryCounter (any growth).
pub const THRESHOLDS: [Threshold; 13] = [
    t("SymbolErrorCounter", 10, 10, Kind::Link),
    t("LinkErrorRecoveryCounter", 10, 0, Kind::Link),
    t("LinkDownedCounter", 10, 0, Kind::LinkDowned),
    t("PortRcvErrors", 10, 10, Kind::Link),
    t("PortRcvRemotePhysicalErrors", 100, 100, Kind::Link),
    t("PortRcvSwitchRelayErrors", 100, 100, Kind::Forwarding),
    t("PortXmitDiscards", 100, 100, Kind::Forwarding),
    t("PortXmitConstraintErrors", 100, 100, Kind::Forwarding),
    t("PortRcvConstraintErrors", 100, 100, Kind::Forwarding),
    t("LocalLinkIntegrityErrors", 10, 10, Kind::Link),
    t("ExcessiveBufferOverrunErrors", 10, 10, Kind::Link),
    t("VL15Dropped", 100, 100, Kind::Forwarding),
    t("PortXmitWait", 1000, 1000, Kind::Forwarding),
];

/// A snapshot file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Past [`MAX_JSON_BYTES`].
    #[error("the counters file is {size} bytes, more than {max}")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// Not the JSON of a snapshot.
    #[error("not a counters snapshot ({SCHEMA}): {0}")]
    Json(#[from] serde_json::Error),
    /// Another schema.
    #[error("schema {0:?} is not {SCHEMA:?}")]
    Schema(String),
}

impl CounterSnapshot {
    /// The counters read at `taken_at` (seconds since the UNIX epoch).
    pub fn new(counters: Counters, taken_at: Option<f64>) -> CounterSnapshot {
        CounterSnapshot {
            taken_at: taken_at.filter(|t| t.is_finite()),
            counters,
        }
    }

    /// The JSON form.
    pub fn to_json(&self) -> String {
        // Strings, numbers and maps with string keys: serializing cannot
        // fail.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Reads the JSON form (or `rdmakit fabric counters --json`'s output).
    ///
    /// # Errors
    /// [`SnapshotError::TooLarge`] past [`MAX_JSON_BYTES`];
    /// [`SnapshotError::Json`] for text that is not such JSON,
    /// [`SnapshotError::Schema`] for another schema.
    pub fn from_json(text: &str) -> Result<CounterSnapshot, SnapshotError> {
        if text.len() > MAX_JSON_BYTES {
            return Err(SnapshotError::TooLarge {
                size: text.len(),
                max: MAX_JSON_BYTES,
            });
        }
        let s: CounterSnapshot = serde_json::from_str(text)?;
        if s.counters.schema != SCHEMA {
            return Err(SnapshotError::Schema(s.counters.schema));
        }
        Ok(CounterSnapshot::new(s.counters, s.taken_at))
    }

    /// The port's counters.
    pub fn port(&self, node_guid: u64, port: u8) -> Option<&PortCounters> {
        self.counters
            .ports
            .iter()
            .find(|p| p.node_guid == node_guid && p.port == port)
    }
}

/// The width in bits of a PortCounters counter, by perfquery's name.
pub fn bits(counter: &str) -> Option<u8> {
    port_counters::COUNTERS
        .iter()
        .find(|c| c.name == counter)
        .map(|c| c.bits)
}

/// True when `value` is all ones for the counter's PortCounters width.
pub fn saturated(counter: &str, value: u64) -> bool {
    match bits(counter) {
        Some(b) if b < 64 => value == (1u64 << b) - 1,
        _ => false,
    }
}

/// True when the port's PortCountersExtended carries the counter.
fn extended(p: &PortCounters, name: &str) -> bool {
    p.extended.as_ref().is_some_and(|e| e.contains_key(name))
}

/// One counter over its threshold.
struct Over {
    name: &'static str,
    /// The total, or the growth since the baseline.
    value: u64,
    limit: u64,
    /// The value at the baseline (None: totals judged).
    then: Option<u64>,
    /// The counter went down since the baseline: it was cleared.
    cleared: bool,
    rate: Option<f64>,
    now: u64,
}

/// The drafts for every port of `now`.
pub(crate) fn check(
    now: &CounterSnapshot,
    baseline: Option<&CounterSnapshot>,
    subnet: &Subnet,
    cfg: &Config,
) -> Vec<Draft> {
    let base: HashMap<(u64, u8), &PortCounters> = baseline
        .map(|b| {
            b.counters
                .ports
                .iter()
                .map(|p| ((p.node_guid, p.port), p))
                .collect()
        })
        .unwrap_or_default();
    let dt = match (baseline.and_then(|b| b.taken_at), now.taken_at) {
        (Some(t0), Some(t1)) if t1 > t0 => Some(t1 - t0),
        _ => None,
    };
    let mut out = Vec::new();
    for p in &now.counters.ports {
        let then = base.get(&(p.node_guid, p.port)).copied();
        let judged = Judged::of(p, then, baseline.is_some(), dt, cfg);
        out.extend(judged.drafts(p, subnet, cfg));
    }
    out
}

/// One port's counters, judged.
struct Judged {
    over: BTreeMap<Kind, Vec<Over>>,
    saturated: Vec<(String, u64, u8)>,
    /// A baseline was given but this port is not in it.
    not_in_baseline: bool,
    dt: Option<f64>,
}

impl Judged {
    fn of(
        p: &PortCounters,
        then: Option<&PortCounters>,
        has_baseline: bool,
        dt: Option<f64>,
        cfg: &Config,
    ) -> Judged {
        let mut j = Judged {
            over: BTreeMap::new(),
            saturated: Vec::new(),
            not_in_baseline: has_baseline && then.is_none(),
            dt,
        };
        for (name, &now) in &p.counters {
            // QP1Dropped repeats VL15Dropped's value in perfquery 44's
            // listing; a counter PortCountersExtended also carries (64 bits)
            // counts on there.
            if name != "QP1Dropped" && saturated(name, now) && !extended(p, name) {
                j.saturated
                    .push((name.clone(), now, bits(name).unwrap_or(0)));
            }
        }
        for th in THRESHOLDS {
            let th = cfg.thresholds.get(th.counter).copied().unwrap_or(th);
            let Some(now) = p.value(th.counter) else {
                continue;
            };
            if saturated(th.counter, now) && !extended(p, th.counter) {
                continue;
            }
            let before = then.and_then(|b| b.value(th.counter));
            let (value, limit, cleared) = match before {
                Some(b) if now >= b => (now - b, th.growth, false),
                Some(_) => (now, th.growth, true),
                None => (now, th.total, false),
            };
            if value > limit {
                j.over.entry(th.kind).or_default().push(Over {
                    name: th.counter,
                    value,
                    limit,
                    then: before,
                    cleared,
                    rate: before.and(dt).map(|s| value as f64 / s),
                    now,
                });
            }
        }
        j
    }

    fn drafts(&self, p: &PortCounters, subnet: &Subnet, cfg: &Config) -> Vec<Draft> {
        let node = subnet.node(p.node_guid);
        let name = node.map_or_else(
            || {
                if p.node_desc.trim().is_empty() {
                    format!("{:#018x}", p.node_guid)
                } else {
                    p.node_desc.clone()
                }
            },
            node_name,
        );
        let place = node.map_or_else(
            || format!("{name} ({:#018x}) port {}", p.node_guid, p.port),
            |n| at(n, p.port),
        );
        let subject = format!("{name} port {}", p.port);
        let peer = node
            .and_then(|n| n.port(p.port))
            .and_then(|q| q.remote)
            .map(|r| peer_text(subnet, r));
        let since = match (
            self.dt,
            self.over.values().flatten().any(|o| o.then.is_some()),
        ) {
            (Some(s), true) => format!(" since the baseline {} earlier", secs(s)),
            (None, true) => " since the baseline".to_string(),
            _ if self.not_in_baseline => " (the port is not in the baseline: totals)".into(),
            _ => String::new(),
        };
        let mut out = Vec::new();
        for (kind, overs) in &self.over {
            let code = kind.code();
            let listed: Vec<String> = overs.iter().map(over_text).collect();
            let names: Vec<&str> = overs.iter().map(|o| o.name).collect();
            let grew = overs.iter().any(|o| o.then.is_some());
            let what = match (kind, grew) {
                (Kind::LinkDowned, true) => "the link went down",
                (Kind::LinkDowned, false) => "the link went down more often than the threshold",
                (Kind::Link, true) => "physical link errors grew past the thresholds",
                (Kind::Link, false) => "physical link errors above the thresholds",
                (Kind::Forwarding, true) => "discarded or held packets grew past the thresholds",
                (Kind::Forwarding, false) => "discarded or held packets above the thresholds",
            };
            let cause = format!("{what}{since}: {}", names.join(", "));
            let message = format!("{subject}: {cause} ({})", listed.join(", "));
            let mut f = Finding::new(code, subject.clone(), message);
            if *kind == Kind::LinkDowned && grew && overs.iter().any(|o| o.value >= cfg.flap_error)
            {
                f = f.severity(Severity::Error);
            }
            for o in overs {
                f = f.evidence(Evidence::new(
                    format!("{place} PortCounters.{}", o.name),
                    evidence_value(o),
                ));
            }
            if let Some(peer) = &peer {
                f = f.evidence(Evidence::new(format!("{place} peer"), peer.clone()));
            }
            f = f
                .remedy(remedy(*kind))
                .next(format!("perfquery -x {} {}", p.lid, p.port))
                .next(match kind {
                    Kind::Forwarding => "ibqueryerrors --details".to_string(),
                    _ => "iblinkinfo".to_string(),
                })
                .next("ibqueryerrors")
                .next(explain(code));
            let value = listed.join(", ");
            out.push(Draft::port(
                f,
                (p.node_guid, name.clone()),
                p.port,
                cause,
                value,
            ));
        }
        if !self.saturated.is_empty() {
            let names: Vec<&str> = self.saturated.iter().map(|s| s.0.as_str()).collect();
            let values: Vec<String> = self
                .saturated
                .iter()
                .map(|(n, v, b)| format!("{n} {v}, all ones for {b} bits"))
                .collect();
            let cause = format!(
                "{} stopped counting: reset it with perfquery -R after reading",
                names.join(", ")
            );
            let message = format!("{subject}: {cause} ({})", values.join("; "));
            let mut f = Finding::new(Code::F007, subject.clone(), message);
            for (n, v, _) in &self.saturated {
                f = f.evidence(Evidence::new(
                    format!("{place} PortCounters.{n}"),
                    v.to_string(),
                ));
            }
            f = f
                .remedy(
                    "Read the port's counters (perfquery -x), then clear them (perfquery -R LID \
                     PORT) so they count again; judge the port by the growth since (rdmakit \
                     fabric check --baseline)",
                )
                .next(format!("perfquery -x {} {}", p.lid, p.port))
                .next(format!("perfquery -R {} {}", p.lid, p.port))
                .next(explain(Code::F007));
            out.push(Draft::port(
                f,
                (p.node_guid, name.clone()),
                p.port,
                cause,
                values.join("; "),
            ));
        }
        out
    }
}

/// `SymbolErrorCounter 100 > 10` or `SymbolErrorCounter +100 (1.67/s) > 10`.
fn over_text(o: &Over) -> String {
    match (o.then, o.cleared) {
        (None, _) => format!("{} {} > {}", o.name, o.value, o.limit),
        (Some(_), cleared) => {
            let rate = o.rate.map_or(String::new(), |r| format!(", {}/s", rate(r)));
            let cleared = if cleared { ", cleared in between" } else { "" };
            format!("{} +{}{rate}{cleared} > {}", o.name, o.value, o.limit)
        }
    }
}

/// The evidence's value: the reading, and with a baseline what it was.
fn evidence_value(o: &Over) -> String {
    match o.then {
        None => o.now.to_string(),
        Some(b) => {
            let rate = o.rate.map_or(String::new(), |r| format!(", {}/s", rate(r)));
            format!("{} (baseline {b}, +{}{rate})", o.now, o.value)
        }
    }
}

fn remedy(kind: Kind) -> &'static str {
    match kind {
        Kind::LinkDowned => {
            "Look at both ends of the cable: reseat or replace the cable and its \
             transceivers, check the switch port's log; clear the counters \
             (perfquery -R) and watch whether the link goes down again"
        }
        Kind::Link => {
            "Suspect the cable, a transceiver or a connector at either end: reseat or \
             replace them, then clear the counters (perfquery -R) and see whether the \
             errors come back (rdmakit fabric check --baseline)"
        }
        Kind::Forwarding => {
            "Look for congestion (PortXmitWait, discards on the ports feeding one \
             destination), routes that lead nowhere (switch relay errors) and partition \
             membership (constraint errors); VL15 drops point at the subnet manager's traffic"
        }
    }
}

/// `spine1 (0x0000000000200004) port 1`, or the GUID alone when the peer
/// node is not in the subnet.
fn peer_text(subnet: &Subnet, r: PortRef) -> String {
    match subnet.node(r.guid) {
        Some(n) => at(n, r.port),
        None => format!("{:#018x} port {}", r.guid, r.port),
    }
}

/// A rate with three significant digits or so.
fn rate(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 1.0 {
        format!("{r:.2}")
    } else {
        format!("{r:.3}")
    }
}

/// `0.4 s`, `60 s`, `15 min`, `3.0 h`.
fn secs(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.1} s")
    } else if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_name_real_counters_once() {
        for (i, t) in THRESHOLDS.iter().enumerate() {
            assert!(
                bits(t.counter).is_some(),
                "{} is not a PortCounters counter",
                t.counter
            );
            assert!(THRESHOLDS[i + 1..].iter().all(|u| u.counter != t.counter));
        }
    }

    #[test]
    fn saturation_is_all_ones_for_the_width_only() {
        assert!(saturated("LinkDownedCounter", 255));
        assert!(!saturated("LinkDownedCounter", 254));
        assert!(saturated("LocalLinkIntegrityErrors", 15));
        assert!(saturated("PortXmitData", u64::from(u32::MAX)));
        assert!(!saturated("PortXmitData", u64::from(u32::MAX) + 1));
        assert!(!saturated("NoSuchCounter", u64::MAX));
    }

    #[test]
    fn snapshot_json_round_trips_and_reads_counters_output() {
        let port = PortCounters {
            node_guid: 0x200000,
            node_desc: "leaf1".into(),
            kind: crate::NodeKind::Switch,
            port: 3,
            lid: 2,
            counters: [("SymbolErrorCounter".to_string(), 100)].into(),
            extended: None,
            saturated: Vec::new(),
        };
        let c = Counters {
            schema: SCHEMA.into(),
            reset: false,
            mads: 2,
            ports: vec![port],
            unread: Vec::new(),
        };
        let s = CounterSnapshot::new(c.clone(), Some(1_700_000_000.5));
        let text = s.to_json();
        assert!(text.contains("\"taken_at\": 1700000000.5"), "{text}");
        assert!(
            text.contains("\"node_guid\": \"0x0000000000200000\""),
            "{text}"
        );
        assert_eq!(CounterSnapshot::from_json(&text).unwrap(), s);
        // `rdmakit fabric counters --json`: no time.
        let plain = serde_json::to_string(&c).unwrap();
        assert_eq!(
            CounterSnapshot::from_json(&plain).unwrap(),
            CounterSnapshot::new(c, None)
        );
        let other = text.replace("counters/v1", "counters/v9");
        let e = CounterSnapshot::from_json(&other).unwrap_err();
        assert!(e.to_string().contains("is not"), "{e}");
        assert!(CounterSnapshot::from_json("[1, 2").is_err());
    }
}
