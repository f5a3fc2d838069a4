//! The bottleneck's numbers: the qdiscs (`tc -s -j qdisc show`), the HTB
//! class (`tc -s class show`: iproute2 6.1 prints HTB classes as text even
//! with `-j`) and the marker's counters (`bpftool map lookup ... -j`), as
//! typed structs. The parsers are pure functions of the tools' output, tested
//! on real captures (tests/data/ecn/SOURCE says where they came from).

use serde::Deserialize;

/// The most output a parser accepts (tc's answer for one interface is under
/// 1 KiB; this is far above it and bounds what a broken tool can make us hold).
pub const MAX_OUTPUT: usize = 1 << 20;

/// Why a tool's output could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// More than [`MAX_OUTPUT`] bytes.
    #[error("{what}: {len} bytes of output, over the {MAX_OUTPUT}-byte bound")]
    TooLong {
        /// Which output.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// Not the JSON shape expected.
    #[error("{what}: not the JSON expected: {source}")]
    Json {
        /// Which output.
        what: &'static str,
        /// serde_json's complaint.
        source: serde_json::Error,
    },
    /// A line of text that does not read as expected.
    #[error("{what}: cannot read {line:?}")]
    Text {
        /// Which output.
        what: &'static str,
        /// The line.
        line: String,
    },
    /// Something the bottleneck must have is absent.
    #[error("{what}: no {missing}")]
    Missing {
        /// Which output.
        what: &'static str,
        /// What is absent.
        missing: String,
    },
}

/// One qdisc of `tc -s -j qdisc show`: its identity and counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct QdiscStats {
    /// `htb`, `bfifo`, `clsact` ...
    pub kind: String,
    /// `1:`, `10:` ...
    pub handle: String,
    /// `1:10` for the bfifo; absent for the root.
    #[serde(default)]
    pub parent: Option<String>,
    /// Bytes dequeued (sent on), Ethernet header included.
    pub bytes: u64,
    /// Packets dequeued.
    pub packets: u64,
    /// Packets dropped (for the bfifo: tail drops).
    pub drops: u64,
    /// Times the shaper held a packet back (HTB).
    pub overlimits: u64,
    /// Requeues.
    #[serde(default)]
    pub requeues: u64,
    /// Bytes queued now.
    pub backlog: u64,
    /// Packets queued now.
    pub qlen: u64,
}

/// One HTB class of `tc -s class show`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// `1:10`.
    pub classid: String,
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped.
    pub drops: u64,
    /// Times the class was over its rate.
    pub overlimits: u64,
    /// Bytes queued now (tc rounds large values to Kb/Mb in text).
    pub backlog_bytes: u64,
    /// Packets queued now.
    pub backlog_packets: u64,
    /// Packets sent at the class's own rate (`lended`).
    pub lended: u64,
    /// Packets sent on borrowed rate (`borrowed`).
    pub borrowed: u64,
}

/// The marker's counters (struct vq of crates/testkit/bpf/ecn_vq.bpf.c).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct MarkerStats {
    /// Every packet through the router's egress hook toward the receiver.
    pub seen: u64,
    /// ECT(0)/ECT(1) packets rewritten to CE.
    pub marked: u64,
    /// Rewrites the kernel refused (should stay 0).
    pub mark_failed: u64,
    /// Packets the model would have tail-dropped (the bfifo's drops, as the
    /// model sees them).
    pub model_drops: u64,
    /// Not-ECT IPv4 packets that came while over K (never touched).
    pub notect_over: u64,
    /// IPv4 packets that arrived already CE (never touched).
    pub ce_in: u64,
    /// The model's backlog in bytes after the last packet.
    pub backlog: u64,
    /// Its largest value so far.
    pub peak_backlog: u64,
    /// Bytes each sender offered to the bottleneck (dropped or not), by the
    /// third byte of its address (sender i is 10.77.i.2: index i).
    #[serde(default)]
    pub src_bytes: [u64; 8],
    /// Packets each sender offered, indexed as `src_bytes`.
    #[serde(default)]
    pub src_packets: [u64; 8],
}

/// Everything the bottleneck counts, read at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bottleneck {
    /// The root HTB qdisc.
    pub htb: QdiscStats,
    /// The bfifo under the class: its `drops` are the bottleneck's losses.
    pub bfifo: QdiscStats,
    /// The HTB class at the bottleneck rate.
    pub class: ClassStats,
    /// The marker's counters; `None` when marking is off.
    pub marker: Option<MarkerStats>,
}

impl Bottleneck {
    /// The counters' growth from `before` to `self` (gauges — backlogs,
    /// queue lengths, the marker's backlog and peak — are `self`'s). For "what
    /// did this run do" on a dumbbell that carried traffic before.
    pub fn since(&self, before: &Bottleneck) -> Bottleneck {
        Bottleneck {
            htb: qdisc_since(&self.htb, &before.htb),
            bfifo: qdisc_since(&self.bfifo, &before.bfifo),
            class: ClassStats {
                classid: self.class.classid.clone(),
                bytes: self.class.bytes.saturating_sub(before.class.bytes),
                packets: self.class.packets.saturating_sub(before.class.packets),
                drops: self.class.drops.saturating_sub(before.class.drops),
                overlimits: self
                    .class
                    .overlimits
                    .saturating_sub(before.class.overlimits),
                lended: self.class.lended.saturating_sub(before.class.lended),
                borrowed: self.class.borrowed.saturating_sub(before.class.borrowed),
                ..self.class.clone()
            },
            marker: self.marker.map(|m| {
                let b = before.marker.unwrap_or_default();
                MarkerStats {
                    seen: m.seen.saturating_sub(b.seen),
                    marked: m.marked.saturating_sub(b.marked),
                    mark_failed: m.mark_failed.saturating_sub(b.mark_failed),
                    model_drops: m.model_drops.saturating_sub(b.model_drops),
                    notect_over: m.notect_over.saturating_sub(b.notect_over),
                    ce_in: m.ce_in.saturating_sub(b.ce_in),
                    src_bytes: std::array::from_fn(|i| {
                        m.src_bytes[i].saturating_sub(b.src_bytes[i])
                    }),
                    src_packets: std::array::from_fn(|i| {
                        m.src_packets[i].saturating_sub(b.src_packets[i])
                    }),
                    ..m
                }
            }),
        }
    }
}

/// One line for a test's message: `bfifo sent 3054 pkts (3182268 B),
/// dropped 591, backlog 0 B; marker seen 3645, marked 3537, model drops
/// 592, not-ECT over K 0, peak 59999 B` (or `no marker`).
impl std::fmt::Display for Bottleneck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = &self.bfifo;
        write!(
            f,
            "bfifo sent {} pkts ({} B), dropped {}, backlog {} B; ",
            q.packets, q.bytes, q.drops, q.backlog
        )?;
        match &self.marker {
            Some(m) => write!(
                f,
                "marker seen {}, marked {}, model drops {}, not-ECT over K {}, peak {} B",
                m.seen, m.marked, m.model_drops, m.notect_over, m.peak_backlog
            ),
            None => write!(f, "no marker"),
        }
    }
}

fn qdisc_since(now: &QdiscStats, before: &QdiscStats) -> QdiscStats {
    QdiscStats {
        bytes: now.bytes.saturating_sub(before.bytes),
        packets: now.packets.saturating_sub(before.packets),
        drops: now.drops.saturating_sub(before.drops),
        overlimits: now.overlimits.saturating_sub(before.overlimits),
        requeues: now.requeues.saturating_sub(before.requeues),
        ..now.clone()
    }
}

/// Parses `tc -s -j qdisc show dev IF`: every qdisc, in tc's order.
///
/// # Errors
/// Output over [`MAX_OUTPUT`] or not a JSON array of qdiscs.
pub fn parse_qdiscs(json: &str) -> Result<Vec<QdiscStats>, ParseError> {
    const WHAT: &str = "tc -s -j qdisc show";
    bounded(WHAT, json)?;
    serde_json::from_str(json).map_err(|source| ParseError::Json { what: WHAT, source })
}

/// The root HTB and the bfifo under `classid` among `qdiscs`.
///
/// # Errors
/// When either is absent.
pub fn bottleneck_qdiscs(
    qdiscs: &[QdiscStats],
    classid: &str,
) -> Result<(QdiscStats, QdiscStats), ParseError> {
    const WHAT: &str = "tc -s -j qdisc show";
    let htb = qdiscs
        .iter()
        .find(|q| q.kind == "htb" && q.parent.is_none())
        .ok_or_else(|| ParseError::Missing {
            what: WHAT,
            missing: "root htb qdisc".into(),
        })?;
    let bfifo = qdiscs
        .iter()
        .find(|q| q.kind == "bfifo" && q.parent.as_deref() == Some(classid))
        .ok_or_else(|| ParseError::Missing {
            what: WHAT,
            missing: format!("bfifo under {classid}"),
        })?;
    Ok((htb.clone(), bfifo.clone()))
}

/// Parses `tc -s class show dev IF` (text): every HTB class, in tc's order.
/// Lines it does not know (`tokens:`, a rate estimator's) are skipped.
///
/// # Errors
/// Output over [`MAX_OUTPUT`], or a `class`, `Sent`, `backlog` or `lended`
/// line that does not read.
pub fn parse_classes(text: &str) -> Result<Vec<ClassStats>, ParseError> {
    const WHAT: &str = "tc -s class show";
    bounded(WHAT, text)?;
    let bad = |line: &str| ParseError::Text {
        what: WHAT,
        line: line.chars().take(200).collect(),
    };
    let mut out: Vec<ClassStats> = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.first().copied() {
            Some("class") => {
                if w.get(1) != Some(&"htb") {
                    continue;
                }
                let id = w.get(2).ok_or_else(|| bad(line))?;
                out.push(ClassStats {
                    classid: (*id).to_string(),
                    ..ClassStats::default()
                });
            }
            Some("Sent") => {
                let c = out.last_mut().ok_or_else(|| bad(line))?;
                // Sent B bytes P pkt (dropped D, overlimits O requeues R)
                c.bytes = num(w.get(1).copied()).ok_or_else(|| bad(line))?;
                c.packets = num(w.get(3).copied()).ok_or_else(|| bad(line))?;
                let after = |key: &str| {
                    w.iter()
                        .position(|x| x.trim_start_matches('(') == key)
                        .and_then(|i| num(w.get(i + 1).map(|s| s.trim_end_matches([',', ')']))))
                };
                c.drops = after("dropped").ok_or_else(|| bad(line))?;
                c.overlimits = after("overlimits").ok_or_else(|| bad(line))?;
            }
            Some("backlog") => {
                let c = out.last_mut().ok_or_else(|| bad(line))?;
                c.backlog_bytes = w.get(1).and_then(|s| size(s)).ok_or_else(|| bad(line))?;
                c.backlog_packets = w
                    .get(2)
                    .and_then(|s| s.strip_suffix('p'))
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| bad(line))?;
            }
            Some("lended:") => {
                let c = out.last_mut().ok_or_else(|| bad(line))?;
                c.lended = num(w.get(1).copied()).ok_or_else(|| bad(line))?;
                c.borrowed = (w.get(2) == Some(&"borrowed:"))
                    .then(|| num(w.get(3).copied()))
                    .flatten()
                    .ok_or_else(|| bad(line))?;
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Parses `bpftool map lookup id M key 0 0 0 0 -j` of the marker's map: its
/// `formatted` value (bpftool names the fields from the program's BTF).
///
/// # Errors
/// Output over [`MAX_OUTPUT`], or no `formatted.value` with the counters.
pub fn parse_marker(json: &str) -> Result<MarkerStats, ParseError> {
    const WHAT: &str = "bpftool map lookup";
    bounded(WHAT, json)?;
    #[derive(Deserialize)]
    struct Formatted {
        value: MarkerStats,
    }
    #[derive(Deserialize)]
    struct Lookup {
        formatted: Formatted,
    }
    let l: Lookup =
        serde_json::from_str(json).map_err(|source| ParseError::Json { what: WHAT, source })?;
    Ok(l.formatted.value)
}

fn bounded(what: &'static str, s: &str) -> Result<(), ParseError> {
    if s.len() > MAX_OUTPUT {
        return Err(ParseError::TooLong { what, len: s.len() });
    }
    Ok(())
}

fn num(s: Option<&str>) -> Option<u64> {
    s?.parse().ok()
}

/// tc's printed size: `58352b`, `12Kb`, `1.5Mb` (tc's units are 1024).
fn size(s: &str) -> Option<u64> {
    let s = s.strip_suffix('b')?;
    let (digits, mult) = match s.strip_suffix('K') {
        Some(d) => (d, 1024.0),
        None => match s.strip_suffix('M') {
            Some(d) => (d, 1024.0 * 1024.0),
            None => return s.parse().ok(),
        },
    };
    let v: f64 = digits.parse().ok()?;
    (0.0..1e12).contains(&v).then(|| (v * mult).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const QDISC_CONGESTED: &str = include_str!("../../tests/data/ecn/tc-qdisc-congested.json");
    const QDISC_AFTER: &str = include_str!("../../tests/data/ecn/tc-qdisc-after.json");
    const CLASS_CONGESTED: &str = include_str!("../../tests/data/ecn/tc-class-congested.txt");
    const CLASS_AFTER: &str = include_str!("../../tests/data/ecn/tc-class-after.txt");
    const MAP_CONGESTED: &str = include_str!("../../tests/data/ecn/bpftool-vq-congested.json");
    const MAP_PER_SENDER: &str = include_str!("../../tests/data/ecn/bpftool-vq-per-sender.json");

    #[test]
    fn tc_qdisc_json_of_a_congested_bottleneck() {
        let q = parse_qdiscs(QDISC_CONGESTED).unwrap();
        assert_eq!(q.len(), 3);
        let (htb, bfifo) = bottleneck_qdiscs(&q, "1:10").unwrap();
        assert_eq!((htb.kind.as_str(), htb.handle.as_str()), ("htb", "1:"));
        assert_eq!(htb.overlimits, 1754);
        assert_eq!(
            bfifo,
            QdiscStats {
                kind: "bfifo".into(),
                handle: "10:".into(),
                parent: Some("1:10".into()),
                bytes: 1_831_542,
                packets: 1767,
                drops: 1033,
                overlimits: 0,
                requeues: 0,
                backlog: 58352,
                qlen: 56,
            }
        );
        assert_eq!(q[2].kind, "clsact");
        assert_eq!(q[2].packets, 2856);
    }

    #[test]
    fn tc_qdisc_json_after_the_run_and_the_growth_since() {
        let (h0, b0) = bottleneck_qdiscs(&parse_qdiscs(QDISC_CONGESTED).unwrap(), "1:10").unwrap();
        let (h1, b1) = bottleneck_qdiscs(&parse_qdiscs(QDISC_AFTER).unwrap(), "1:10").unwrap();
        assert_eq!((b1.drops, b1.backlog, b1.qlen), (2190, 0, 0));
        let before = Bottleneck {
            htb: h0,
            bfifo: b0,
            ..Bottleneck::default()
        };
        let after = Bottleneck {
            htb: h1,
            bfifo: b1,
            ..Bottleneck::default()
        };
        let d = after.since(&before);
        assert_eq!(d.bfifo.drops, 2190 - 1033);
        assert_eq!(d.bfifo.packets, 3653 - 1767);
        assert_eq!(d.bfifo.backlog, 0, "a gauge is the later reading");
        assert_eq!(d.marker, None);
        assert_eq!(
            d.to_string(),
            "bfifo sent 1886 pkts (1965212 B), dropped 1157, backlog 0 B; no marker"
        );
    }

    #[test]
    fn tc_class_text_of_a_congested_bottleneck() {
        let c = parse_classes(CLASS_CONGESTED).unwrap();
        assert_eq!(
            c,
            vec![ClassStats {
                classid: "1:10".into(),
                bytes: 1_835_710,
                packets: 1771,
                drops: 1035,
                overlimits: 1758,
                backlog_bytes: 58352,
                backlog_packets: 56,
                lended: 1771,
                borrowed: 0,
            }]
        );
        let after = parse_classes(CLASS_AFTER).unwrap();
        assert_eq!((after[0].drops, after[0].backlog_bytes), (2190, 0));
    }

    #[test]
    fn bpftool_lookup_of_the_marker_map() {
        let m = parse_marker(MAP_CONGESTED).unwrap();
        assert_eq!(
            m,
            MarkerStats {
                seen: 3139,
                marked: 3089,
                mark_failed: 0,
                model_drops: 1148,
                notect_over: 0,
                ce_in: 0,
                backlog: 59019,
                peak_backlog: 60000,
                // Captured before the per-sender counters: they read as 0.
                src_bytes: [0; 8],
                src_packets: [0; 8],
            }
        );
    }

    /// The per-sender counters, by the third byte of the source address:
    /// senders 1 and 2 at equal rates, nothing from anyone else.
    #[test]
    fn bpftool_lookup_with_per_sender_counters() {
        let m = parse_marker(MAP_PER_SENDER).unwrap();
        assert_eq!((m.seen, m.marked, m.model_drops), (3646, 3242, 460));
        assert_eq!(m.src_packets, [0, 1823, 1823, 0, 0, 0, 0, 0]);
        assert_eq!(m.src_bytes, [0, 1899566, 1899566, 0, 0, 0, 0, 0]);
        assert_eq!(m.src_packets.iter().sum::<u64>(), m.seen);
        let before = Bottleneck {
            marker: Some(MarkerStats {
                src_bytes: [0, 1000, 0, 0, 0, 0, 0, 0],
                ..MarkerStats::default()
            }),
            ..Bottleneck::default()
        };
        let now = Bottleneck {
            marker: Some(m),
            ..Bottleneck::default()
        };
        let d = now.since(&before).marker.unwrap();
        assert_eq!(d.src_bytes[1], 1898566);
    }

    #[test]
    fn garbage_is_an_error_naming_the_output_never_a_panic() {
        for bad in ["", "{", "[{\"kind\":1}]", "null", "[[]]"] {
            let e = parse_qdiscs(bad).unwrap_err().to_string();
            assert!(e.starts_with("tc -s -j qdisc show"), "{e}");
            assert!(parse_marker(bad).is_err());
        }
        let e = bottleneck_qdiscs(&[], "1:10").unwrap_err().to_string();
        assert!(e.contains("root htb"), "{e}");
        for bad in [
            " Sent 1 bytes 1 pkt (dropped 0, overlimits 0 requeues 0)",
            "class htb 1:10 root\n Sent x bytes",
            "class htb 1:10 root\n backlog 12 0p",
            "class htb 1:10 root\n lended: 1 giants: 0",
            "class htb 1:10 root\n backlog 1e999Kb 0p",
        ] {
            assert!(parse_classes(bad).is_err(), "{bad:?}");
        }
        let huge = " ".repeat(MAX_OUTPUT + 1);
        assert!(matches!(
            parse_classes(&huge),
            Err(ParseError::TooLong { .. })
        ));
    }

    #[test]
    fn tc_sizes_in_its_units() {
        assert_eq!(size("58352b"), Some(58352));
        assert_eq!(size("12Kb"), Some(12 * 1024));
        assert_eq!(size("1.5Mb"), Some(1_572_864));
        assert_eq!(size("12"), None);
        assert_eq!(size("-1Kb"), None);
    }
}
