//! What each end's counters moved during a pairwise test: pauses,
//! discards, CNPs, sequence errors, retransmissions. An agent reads its
//! own before and after the test (the soft NIC: its transport counters;
//! a real device: the port's `hw_counters` and the netdev's `ethtool -S`
//! pause and discard counters) and keeps only those that moved, bounded;
//! the coordinator takes a peer's report as untrusted input (the bounds
//! are checked as it is parsed) and cites the largest in its verdicts.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use rdmakit_host::bounded::{read_named, Cap};

/// Most counters one end reports for one test.
pub const MAX_COUNTERS: usize = 32;

/// Longest counter name, bytes.
pub const MAX_NAME: usize = 64;

/// Counters a verdict cites per end.
pub const CITED: usize = 3;

/// The `hw_counters` of a real device's port that explain a slow pair.
/// mlx5's names: retransmission-class, the congestion loop's, receive
/// buffer drops (docs/roce-qos.md, "Congestion counters").
pub const HW_COUNTERS: [&str; 10] = [
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "duplicate_request",
    "implied_nak_seq_err",
    "np_ecn_marked_roce_packets",
    "np_cnp_sent",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    "out_of_buffer",
];

/// Counter deltas of one end, name → how much it moved (never 0): at most
/// [`MAX_COUNTERS`], names of at most [`MAX_NAME`] bytes of
/// `[A-Za-z0-9_.:-]`. Deserializing refuses anything else (a peer's
/// report), so a value of this type keeps its bounds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "BTreeMap<String, u64>", into = "BTreeMap<String, u64>")]
pub struct Deltas(BTreeMap<String, u64>);

impl TryFrom<BTreeMap<String, u64>> for Deltas {
    type Error = String;

    fn try_from(m: BTreeMap<String, u64>) -> Result<Deltas, String> {
        if m.len() > MAX_COUNTERS {
            return Err(format!("{} counters (at most {MAX_COUNTERS})", m.len()));
        }
        if let Some(n) = m.keys().find(|n| !name_ok(n)) {
            return Err(format!(
                "a counter name of {} bytes that is not 1 to {MAX_NAME} of [A-Za-z0-9_.:-]",
                n.len()
            ));
        }
        Ok(Deltas(m.into_iter().filter(|&(_, v)| v > 0).collect()))
    }
}

impl From<Deltas> for BTreeMap<String, u64> {
    fn from(d: Deltas) -> BTreeMap<String, u64> {
        d.0
    }
}

/// Whether `d` is a device name safe to join to a sysfs path (no `/`,
/// not `.` or `..`).
pub fn name_is_safe(d: &str) -> bool {
    name_ok(d) && d != "." && d != ".."
}

/// Whether `n` may name a counter.
fn name_ok(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= MAX_NAME
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

impl Deltas {
    /// The counters that moved between `before` and `after` (names in
    /// `after`; one missing from `before` counts from 0, one that went
    /// back — a reset — is left out), the largest [`MAX_COUNTERS`] with
    /// valid names.
    pub fn between<'a>(
        before: &BTreeMap<String, u64>,
        after: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Deltas {
        Deltas::largest(after.into_iter().filter_map(|(n, v)| {
            let d = v.checked_sub(before.get(n).copied().unwrap_or(0))?;
            Some((n, d))
        }))
    }

    /// The largest [`MAX_COUNTERS`] non-zero `(name, delta)`s with valid
    /// names (a repeated name: the larger).
    pub fn largest<'a>(it: impl IntoIterator<Item = (&'a str, u64)>) -> Deltas {
        let mut m: BTreeMap<String, u64> = BTreeMap::new();
        for (n, d) in it {
            if d > 0 && name_ok(n) {
                let e = m.entry(n.to_string()).or_default();
                *e = (*e).max(d);
            }
        }
        let mut v: Vec<(String, u64)> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v.truncate(MAX_COUNTERS);
        Deltas(v.into_iter().collect())
    }

    /// Both tests' of a cell (bandwidth and latency) added up, still
    /// bounded.
    pub fn sum(&self, o: &Deltas) -> Deltas {
        let mut m = self.0.clone();
        for (n, &d) in &o.0 {
            let e = m.entry(n.clone()).or_default();
            *e = e.saturating_add(d);
        }
        Deltas::largest(m.iter().map(|(n, &d)| (n.as_str(), d)))
    }

    /// Nothing moved.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// By name.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.0.get(name).copied()
    }

    /// Name and delta, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(n, &d)| (n.as_str(), d))
    }

    /// The `k` that moved most, largest first (pause durations, in
    /// microseconds, weigh as their count of microseconds).
    pub fn top(&self, k: usize) -> Vec<(&str, u64)> {
        let mut v: Vec<(&str, u64)> = self.iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        v.truncate(k);
        v
    }

    /// The [`CITED`] largest as a verdict cites them:
    /// `n5 rx_prio3_pause_duration +2.1 s, n5 out_of_sequence +4,312`.
    pub fn cite(&self, node: &str) -> Vec<String> {
        self.top(CITED)
            .into_iter()
            .map(|(n, d)| format!("{node} {n} {}", show(n, d)))
            .collect()
    }
}

/// A delta as a verdict shows it: `+4,312`; a pause duration (the
/// drivers count microseconds) as `+2.1 s`.
pub fn show(name: &str, d: u64) -> String {
    if name.ends_with("_pause_duration") {
        return format!("+{:.1} s", d as f64 / 1e6);
    }
    let digits = d.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("+{out}")
}

/// Whether an `ethtool -S` counter is one a slow pair is explained by:
/// pauses (and their duration), discards, buffer exhaustion.
pub fn ethtool_kept(name: &str) -> bool {
    name.ends_with("_pause_duration")
        || name.ends_with("_pause")
        || name.contains("discard")
        || name.contains("out_of_buffer")
}

/// A real device's counters now: port `port`'s [`HW_COUNTERS`] under
/// `root` (`/sys/class/infiniband/DEV`) and `ifname`'s `ethtool -S`
/// counters that [`ethtool_kept`] keeps. Reading changes nothing; what
/// cannot be read is left out.
pub fn read_real(root: &Path, port: u32, ifname: Option<&str>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let dir = root
        .join("ports")
        .join(port.to_string())
        .join("hw_counters");
    // A sysfs attribute is at most a page; the cap keeps a bind-mounted or
    // replaced file from being read whole.
    const ATTR: Cap = Cap::new(4096, "hw_counters attributes");
    for name in HW_COUNTERS {
        let v = read_named(&dir.join(name), ATTR)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| t.trim().parse::<u64>().ok());
        if let Some(v) = v {
            m.insert(name.to_string(), v);
        }
    }
    if let Some(ifname) = ifname {
        use rdmakit_host::ethernet::{live, parse::ethtool, EthQuery};
        let text = live::answer(&EthQuery::Stats(ifname.to_string()))
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        if let Some(Ok(stats)) = text.as_deref().map(ethtool::stats) {
            for (n, v) in stats {
                if ethtool_kept(&n) && name_ok(&n) && !m.contains_key(&n) {
                    m.insert(n, v);
                }
            }
        }
    }
    m
}

/// The netdev of a real device (`root`: `/sys/class/infiniband/DEV`):
/// the first under `device/net`, when there is one (RoCE).
pub fn netdev_of(root: &Path) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("device").join("net"))
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names.into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Deltas, serde_json::Error> {
        serde_json::from_str(s)
    }

    #[test]
    fn a_report_within_its_bounds_reads() {
        let d =
            parse(r#"{"out_of_sequence":4312,"rx_prio3_pause_duration":2100000,"x":0}"#).unwrap();
        assert_eq!(d.get("out_of_sequence"), Some(4312));
        assert_eq!(d.get("x"), None, "a zero delta is not kept");
        assert_eq!(
            d.cite("n5"),
            [
                "n5 rx_prio3_pause_duration +2.1 s",
                "n5 out_of_sequence +4,312"
            ]
        );
    }

    #[test]
    fn a_peer_report_out_of_bounds_is_refused() {
        // Not a number, negative, fractional.
        assert!(parse(r#"{"a":"12"}"#).is_err());
        assert!(parse(r#"{"a":-1}"#).is_err());
        assert!(parse(r#"{"a":1.5}"#).is_err());
        // Too many counters.
        let many: BTreeMap<String, u64> =
            (0..=MAX_COUNTERS).map(|i| (format!("c{i}"), 1)).collect();
        let e = parse(&serde_json::to_string(&many).unwrap()).unwrap_err();
        assert!(e.to_string().contains("at most 32"), "{e}");
        // A name too long, empty, or with markup or control characters.
        let long = format!(r#"{{"{}":1}}"#, "a".repeat(MAX_NAME + 1));
        assert!(parse(&long).is_err());
        assert!(parse(&format!(r#"{{"{}":1}}"#, "a".repeat(MAX_NAME))).is_ok());
        assert!(parse(r#"{"":1}"#).is_err());
        assert!(parse(r#"{"<b>x</b>":1}"#).is_err());
        assert!(parse(r#"{"a\nb":1}"#).is_err());
        assert!(parse(r#"[1,2]"#).is_err());
    }

    #[test]
    fn only_what_moved_and_the_largest_are_kept() {
        let before: BTreeMap<String, u64> = [
            ("a".to_string(), 10),
            ("b".to_string(), 5),
            ("c".to_string(), 9),
        ]
        .into();
        let d = Deltas::between(&before, [("a", 10), ("b", 7), ("c", 3), ("new", 4)]);
        assert_eq!(d.iter().collect::<Vec<_>>(), [("b", 2), ("new", 4)]);
        let big: Vec<(String, u64)> = (1..=40).map(|i| (format!("c{i}"), i)).collect();
        let d = Deltas::largest(big.iter().map(|(n, v)| (n.as_str(), *v)));
        assert_eq!(d.iter().count(), MAX_COUNTERS);
        assert_eq!(d.get("c40"), Some(40));
        assert_eq!(d.get("c8"), None);
        assert_eq!(d.top(2), [("c40", 40), ("c39", 39)]);
        let bad = Deltas::largest([("x y", 3), ("ok", 1)]);
        assert_eq!(bad.iter().collect::<Vec<_>>(), [("ok", 1)]);
    }

    #[test]
    fn both_tests_of_a_cell_add_up() {
        let a = Deltas::largest([("x", 2), ("y", 1)]);
        let b = Deltas::largest([("x", 3), ("z", u64::MAX)]);
        let s = a.sum(&b);
        assert_eq!(s.get("x"), Some(5));
        assert_eq!(s.get("z"), Some(u64::MAX));
        assert_eq!(s.sum(&s).get("z"), Some(u64::MAX));
    }

    #[test]
    fn counters_shown_and_kept() {
        assert_eq!(show("out_of_sequence", 4312), "+4,312");
        assert_eq!(show("a", 1_000_000), "+1,000,000");
        assert_eq!(show("a", 12), "+12");
        assert_eq!(show("tx_pause_duration", 250_000), "+0.2 s");
        assert!(ethtool_kept("rx_prio3_pause"));
        assert!(ethtool_kept("rx_prio3_pause_duration"));
        assert!(ethtool_kept("rx_discards_phy"));
        assert!(ethtool_kept("rx_out_of_buffer"));
        assert!(!ethtool_kept("rx_bytes"));
        assert!(!ethtool_kept("tx_pause_ctrl_phy_transitions"));
    }

    #[test]
    fn a_real_device_is_read_from_sysfs() {
        let dir = std::env::temp_dir().join(format!("rdmakit-deltas-{}", std::process::id()));
        let hw = dir.join("ports/1/hw_counters");
        std::fs::create_dir_all(&hw).unwrap();
        std::fs::write(hw.join("out_of_sequence"), "17\n").unwrap();
        std::fs::write(hw.join("np_cnp_sent"), "garbage\n").unwrap();
        std::fs::write(hw.join("rx_write_requests"), "9\n").unwrap();
        std::fs::write(hw.join("rp_cnp_ignored"), "4\n").unwrap();
        std::fs::write(hw.join("np_ecn_marked_roce_packets"), "1500\n").unwrap();
        let m = read_real(&dir, 1, None);
        assert_eq!(
            m,
            [
                ("np_ecn_marked_roce_packets".to_string(), 1500),
                ("out_of_sequence".to_string(), 17),
                ("rp_cnp_ignored".to_string(), 4),
            ]
            .into()
        );
        assert_eq!(netdev_of(&dir), None);
        std::fs::create_dir_all(dir.join("device/net/eth3")).unwrap();
        assert_eq!(netdev_of(&dir).as_deref(), Some("eth3"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
