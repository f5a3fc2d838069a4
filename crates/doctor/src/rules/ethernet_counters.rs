//! Hardware layer, the Ethernet beneath RoCE, by its counters: pause time
//! (RDK-N007), drops (RDK-N008), congestion notifications (RDK-N009), FEC
//! (RDK-N012) and link-down events (RDK-N013) — as rates since a baseline (`--baseline`) where one is given,
//! else totals since the driver loaded.

use rdmakit_host::ethernet::EthLink;

use super::ethernet::no_roce;
use crate::checks::{Ctx, Outcome};
use crate::codes::{Code, Severity};
use crate::counters::Baseline;
use crate::finding::{Evidence, Finding};

/// A counter of a link: its value now, the baseline's, and the growth.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Delta {
    pub name: String,
    pub now: u64,
    pub was: Option<u64>,
}

impl Delta {
    /// What it counted since the baseline (all of `now` after a reset or
    /// without one).
    pub fn growth(&self) -> u64 {
        match self.was {
            Some(w) if self.now >= w => self.now - w,
            _ => self.now,
        }
    }

    /// "+4,312 (431/s)" with a baseline of known age, "+4,312" without its
    /// age, "4,312 in all" without a baseline.
    pub fn shown(&self, age: Option<u64>) -> String {
        let g = self.growth();
        match (self.was, age) {
            (Some(_), Some(a)) if a > 0 => {
                format!("+{} ({}/s)", grouped(g), rate(g as f64 / a as f64))
            }
            (Some(_), _) => format!("+{}", grouped(g)),
            (None, _) => format!("{} in all", grouped(g)),
        }
    }
}

/// 4312 → "4,312".
pub(crate) fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate per second as a report shows it: "12,000", "7.5", "0.250".
pub(super) fn rate(r: f64) -> String {
    if r >= 100.0 {
        grouped(r.round() as u64)
    } else if r >= 1.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.3}")
    }
}

/// The link's statistics in the baseline, when it has them.
fn was<'a>(
    b: Option<&'a Baseline>,
    l: &EthLink,
) -> Option<&'a std::collections::BTreeMap<String, u64>> {
    b?.links.get(&l.name)
}

/// The link's counters whose name `pick` accepts, with the baseline's value.
fn deltas(b: Option<&Baseline>, l: &EthLink, pick: impl Fn(&str) -> bool) -> Vec<Delta> {
    let base = was(b, l);
    l.stats
        .get()
        .map(|v| {
            v.iter()
                .filter(|(n, _)| pick(n))
                .map(|(n, now)| Delta {
                    name: n.clone(),
                    now: *now,
                    was: base.and_then(|m| m.get(n).copied()),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The links with statistics, and why none could be read when none could
/// (or why the host has no RoCE port to judge).
fn links_with_stats<'a>(cx: &'a Ctx) -> Result<Vec<&'a EthLink>, Outcome> {
    if let Some(o) = no_roce(cx) {
        return Err(o);
    }
    let e = &cx.facts.ethernet;
    let with: Vec<&EthLink> = e.links.iter().filter(|l| l.stats.get().is_some()).collect();
    if !with.is_empty() {
        return Ok(with);
    }
    let why: Vec<String> = e
        .links
        .iter()
        .map(|l| {
            format!(
                "{}: {}",
                l.stats.path,
                super::ethernet::answer_state(&l.stats)
            )
        })
        .collect();
    if e.links.is_empty() {
        return Err(Outcome::NotApplicable(
            "no netdev beneath the RoCE ports".into(),
        ));
    }
    Err(Outcome::NotChecked(format!(
        "no statistics: {}",
        why.join("; ")
    )))
}

fn base_note(cx: &Ctx) -> String {
    match baseline(cx) {
        Some(b) => format!("since the baseline ({})", b.describe()),
        None => "since the driver loaded (no --baseline: totals, not rates)".into(),
    }
}

fn baseline<'a>(cx: &'a Ctx) -> Option<&'a Baseline> {
    cx.cfg.baseline.as_ref()
}

/// Pause duration counters (µs) of priority `p` or global.
fn is_pause_duration(n: &str) -> bool {
    n.ends_with("_pause_duration") && (n.starts_with("rx_") || n.starts_with("tx_"))
}

/// RDK-N007: pause time as a share of the elapsed time, and pause storms.
pub fn pause(cx: &Ctx) -> Outcome {
    let links = match links_with_stats(cx) {
        Ok(l) => l,
        Err(o) => return o,
    };
    let b = baseline(cx);
    let age = b.and_then(|b| b.age_secs).filter(|a| *a > 0);
    let mut out = Vec::new();
    for l in links {
        let storms = deltas(b, l, |n| {
            n.starts_with("tx_pause_storm_") && n.ends_with("_events")
        });
        for s in storms.iter().filter(|s| s.growth() > 0) {
            let sev = if s.name.contains("error") {
                Severity::Error
            } else {
                Severity::Warning
            };
            out.push(
                Finding::new(
                    Code::N007,
                    l.name.clone(),
                    format!(
                        "{}: the NIC's pause-storm protection fired: {} {} {}",
                        l.name,
                        s.name,
                        s.shown(age),
                        base_note(cx)
                    ),
                )
                .severity(sev)
                .evidence(Evidence::new(
                    l.stats.path.clone(),
                    format!("{} = {}", s.name, s.now),
                ))
                .remedy(
                    "The port sent pauses so long that the NIC stopped honouring its own PFC: a \
                     receiver here cannot drain its buffers. Check rx_out_of_buffer and \
                     rx_discards_phy, the application's receive queues and the PCIe link.",
                )
                .next(format!(
                    "ethtool -S {} | grep -E 'pause|discard|out_of_buffer'",
                    l.name
                )),
            );
        }
        // Shares of time need a baseline of known age.
        let Some(age) = age else { continue };
        for d in deltas(b, l, is_pause_duration) {
            if d.was.is_none() {
                continue;
            }
            let share = d.growth() as f64 / (age as f64 * 1e6);
            if share < 0.01 {
                continue;
            }
            let who = if d.name.starts_with("rx_") {
                "was paused by its peer"
            } else {
                "paused its peer"
            };
            let what = d
                .name
                .trim_start_matches("rx_")
                .trim_start_matches("tx_")
                .trim_end_matches("_pause_duration");
            out.push(
                Finding::new(
                    Code::N007,
                    l.name.clone(),
                    format!(
                        "{}: {what} {who} {:.1} s of the last {} s ({:.0} %)",
                        l.name,
                        d.growth() as f64 / 1e6,
                        age,
                        share * 100.0
                    ),
                )
                .severity(if share >= 0.10 {
                    Severity::Error
                } else {
                    Severity::Warning
                })
                .brief(format!("{} {} {:.0}% paused", l.name, what, share * 100.0))
                .evidence(Evidence::new(
                    l.stats.path.clone(),
                    format!("{} = {} ({} µs)", d.name, d.now, d.shown(Some(age))),
                ))
                .remedy(if d.name.starts_with("rx_") {
                    "The peer (switch port) is congested and pauses this host: check its queues \
                     and ECN marking — ECN should slow senders before PFC pauses them (RDK-N002)."
                } else {
                    "This host cannot drain its receive buffers and pauses its peer: check \
                     rx_out_of_buffer, the application's receive queues and the PCIe link \
                     (RDK-H004)."
                })
                .next(format!("ethtool -S {} | grep -E 'prio[0-9]_pause'", l.name)),
            );
        }
    }
    if b.is_none() && out.is_empty() {
        return Outcome::NotChecked(
            "pause time is judged as a share of elapsed time: it needs a baseline \
             (rdmakit collect -o before.json.gz; rdmakit doctor --baseline before.json.gz)"
                .into(),
        );
    }
    Outcome::Findings(out)
}

/// The drop counters RDK-N008 reads (mlx5's names and their kin).
fn is_drop(n: &str) -> bool {
    const EXACT: &[&str] = &[
        "rx_discards_phy",
        "tx_discards_phy",
        "rx_out_of_buffer",
        "dev_out_of_buffer",
        "rx_crc_errors_phy",
        "rx_oversize_pkts_phy",
        "rx_out_of_range_len_phy",
        "rx_buffer_passed_thres_phy",
    ];
    EXACT.contains(&n)
        || (n.starts_with("rx_prio")
            && (n.ends_with("_discards")
                || n.ends_with("_buf_discard")
                || n.ends_with("_cong_discard")))
}

/// RDK-N008: drops below RDMA, and the RDMA device's own `out_of_buffer`.
pub fn drops(cx: &Ctx) -> Outcome {
    let links = match links_with_stats(cx) {
        Ok(l) => l,
        Err(o) => return o,
    };
    let b = baseline(cx);
    let age = b.and_then(|b| b.age_secs);
    let mut out = Vec::new();
    for l in links {
        let mut moved: Vec<Delta> = deltas(b, l, is_drop)
            .into_iter()
            .filter(|d| d.growth() > 0 && (b.is_none() || d.was.is_some()))
            .collect();
        // The RDMA device's out_of_buffer of the ports over this link.
        for p in cx
            .facts
            .ethernet
            .ports
            .iter()
            .filter(|p| p.links.contains(&l.name))
        {
            let Some(dev) = cx.facts.devices.iter().find(|d| d.name == p.device) else {
                continue;
            };
            let Some(port) = dev.ports.iter().find(|x| x.num == p.port) else {
                continue;
            };
            let Some(now) = port
                .hw_counters
                .get("out_of_buffer")
                .and_then(|a| a.get())
                .and_then(|c| c.value())
            else {
                continue;
            };
            let was = b
                .and_then(|b| b.ports.get(&format!("{}/{}", p.device, p.port)))
                .and_then(|bp| bp.counters.get("out_of_buffer").copied());
            let d = Delta {
                name: format!("{}/{} out_of_buffer", p.device, p.port),
                now,
                was,
            };
            if d.growth() > 0 && (b.is_none() || was.is_some()) {
                moved.push(d);
            }
        }
        if moved.is_empty() {
            continue;
        }
        let list: Vec<String> = moved
            .iter()
            .map(|d| format!("{} {}", d.name, d.shown(age)))
            .collect();
        let mut f = Finding::new(
            Code::N008,
            l.name.clone(),
            format!("{}: {} {}", l.name, list.join(", "), base_note(cx)),
        )
        .remedy(
            "Find which: discards on a lossless priority mean PFC does not protect the traffic \
             (RDK-N001) or buffers are too small; out_of_buffer means receivers post too few \
             receive WQEs; CRC errors point at the cable or module (RDK-N010); oversize frames \
             at an MTU larger on the peer.",
        )
        .next(format!(
            "ethtool -S {} | grep -E 'discard|out_of_buffer|crc|oversize'",
            l.name
        ))
        .next(
            "rdmakit collect -o before.json.gz; sleep 10; rdmakit doctor --baseline before.json.gz",
        );
        if b.is_none() {
            // Totals since the driver loaded say nothing about now.
            f = f.severity(Severity::Info);
        }
        for d in &moved {
            f.evidence.push(Evidence::new(
                if d.name.contains("out_of_buffer") && d.name.contains('/') {
                    format!("hw_counters {}", d.name)
                } else {
                    l.stats.path.clone()
                },
                format!("{} = {}", d.name, d.now),
            ));
        }
        out.push(f);
    }
    Outcome::Findings(out)
}

/// RDK-N009: congestion notifications since the baseline.
pub fn congestion(cx: &Ctx) -> Outcome {
    if let Some(o) = no_roce(cx) {
        return o;
    }
    let Some(b) = baseline(cx) else {
        return Outcome::NotChecked(
            "congestion notifications are judged by their rates: they need a baseline".into(),
        );
    };
    let age = b.age_secs;
    const NAMES: &[&str] = &[
        "np_ecn_marked_roce_packets",
        "np_cnp_sent",
        "rp_cnp_handled",
        "rp_cnp_ignored",
    ];
    let mut out = Vec::new();
    let mut any = false;
    for p in &cx.facts.ethernet.ports {
        let key = format!("{}/{}", p.device, p.port);
        let Some(bp) = b.ports.get(&key) else {
            continue;
        };
        let Some(port) = cx
            .facts
            .devices
            .iter()
            .find(|d| d.name == p.device)
            .and_then(|d| d.ports.iter().find(|x| x.num == p.port))
        else {
            continue;
        };
        let ds: Vec<Delta> = NAMES
            .iter()
            .filter_map(|n| {
                let now = port.hw_counters.get(*n)?.get()?.value()?;
                Some(Delta {
                    name: n.to_string(),
                    now,
                    was: bp.counters.get(*n).copied(),
                })
            })
            .filter(|d| d.was.is_some())
            .collect();
        if ds.is_empty() {
            continue;
        }
        any = true;
        if ds.iter().all(|d| d.growth() == 0) {
            continue;
        }
        let g = |n: &str| ds.iter().find(|d| d.name == n).map_or(0, Delta::growth);
        let subject = format!("{} port {}", p.device, p.port);
        let list: Vec<String> = ds
            .iter()
            .map(|d| format!("{} {}", d.name, d.shown(age)))
            .collect();
        let (sev, why) = if g("rp_cnp_ignored") > 0 {
            (
                Severity::Warning,
                " — CNPs are being ignored: the reaction point is off for that priority",
            )
        } else if g("np_ecn_marked_roce_packets") > 0 && g("np_cnp_sent") == 0 {
            (
                Severity::Warning,
                " — marked packets arrive but no CNP is sent: the notification point is off",
            )
        } else {
            (Severity::Info, "")
        };
        let mut f = Finding::new(
            Code::N009,
            subject.clone(),
            format!(
                "{subject}: since the baseline ({}): {}{why}",
                b.describe(),
                list.join(", ")
            ),
        )
        .severity(sev)
        .remedy(
            "Nothing while the loop is closed. rp_cnp_ignored growing: enable the reaction \
             point (roce_rp/enable/P); marked packets without CNPs: enable the notification \
             point (roce_np/enable/P).",
        )
        .next(format!(
            "rdma statistic show link {}/{} | grep -E 'cnp|ecn'",
            p.device, p.port
        ));
        for d in &ds {
            if let Some(a) = port.hw_counters.get(&d.name) {
                f = f.attr(a);
            }
        }
        out.push(f);
    }
    if !any {
        return Outcome::NotChecked(
            "no RoCE port has congestion counters (np_cnp_sent, rp_cnp_handled) in both the \
             baseline and now"
                .into(),
        );
    }
    Outcome::Findings(out)
}

/// The FEC counters of uncorrectable errors, by driver: the ethtool FEC
/// statistics' uncorrectable blocks, else these statistics.
const FEC_UNCORRECTABLE: &[&str] = &[
    "rx_pcs_symbol_err_phy",
    "rx_fec_uncorrectable_blocks",
    "fec_uncorrectable_blocks",
    "rx_fec_uncorrectable",
];

/// RDK-N012: FEC could not correct.
pub fn fec(cx: &Ctx) -> Outcome {
    if let Some(o) = no_roce(cx) {
        return o;
    }
    let b = baseline(cx);
    let age = b.and_then(|b| b.age_secs);
    let mut out = Vec::new();
    let mut any = false;
    for l in &cx.facts.ethernet.links {
        let base = was(b, l);
        let from_fec = l
            .fec
            .get()
            .and_then(|f| f.uncorrectable_blocks())
            .map(|v| Delta {
                name: "uncorrectable_blocks".into(),
                now: v,
                was: base.and_then(|m| m.get("fec:uncorrectable_blocks").copied()),
            });
        let d = from_fec.or_else(|| {
            deltas(b, l, |n| FEC_UNCORRECTABLE.contains(&n))
                .into_iter()
                .next()
        });
        let Some(d) = d else { continue };
        any = true;
        if d.growth() == 0 || (b.is_some() && d.was.is_none()) {
            continue;
        }
        let active = l
            .fec
            .get()
            .map(|f| f.active.join(" "))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unknown".into());
        let mut f = Finding::new(
            Code::N012,
            l.name.clone(),
            format!(
                "{}: FEC could not correct: {} {} {}; active FEC {active}",
                l.name,
                d.name,
                d.shown(age),
                base_note(cx)
            ),
        )
        .evidence(Evidence::new(
            if d.name == "uncorrectable_blocks" {
                l.fec.path.clone()
            } else {
                l.stats.path.clone()
            },
            format!("{} = {}", d.name, d.now),
        ))
        .remedy(
            "Uncorrectable blocks are lost frames: check the module's readings (RDK-N010, \
             RDK-N011), clean or replace the cable and module, and match the FEC mode to the \
             switch port.",
        )
        .next(format!("ethtool --show-fec {}", l.name))
        .next(format!("ethtool -m {}", l.name));
        if b.is_none() {
            f = f.severity(Severity::Info);
        }
        out.push(f);
    }
    if !any {
        return Outcome::NotApplicable(
            "no link reports FEC statistics (ethtool --show-fec, ethtool -S)".into(),
        );
    }
    Outcome::Findings(out)
}

/// The drivers' counters of the link going down: mlx5's (counters.rst),
/// then bnxt_en's and their kin.
const LINK_DOWN: &[&str] = &["link_down_events_phy", "link_down_events"];

/// A link that went down this often since the baseline is flapping.
const FLAPPING: u64 = 3;

/// RDK-N013: the link went down. Each time, every RC QP over it stalls
/// until its retry timer expires or the link returns.
pub fn link_down(cx: &Ctx) -> Outcome {
    let links = match links_with_stats(cx) {
        Ok(l) => l,
        Err(o) => return o,
    };
    let b = baseline(cx);
    let age = b.and_then(|b| b.age_secs);
    let mut out = Vec::new();
    let mut any = false;
    for l in links {
        let Some(d) = LINK_DOWN
            .iter()
            .find_map(|n| deltas(b, l, |x| x == *n).into_iter().next())
        else {
            continue;
        };
        any = true;
        if d.growth() == 0 || (b.is_some() && d.was.is_none()) {
            continue;
        }
        let times = match d.growth() {
            1 => "once".to_string(),
            n => format!("{} times", grouped(n)),
        };
        let mut f = Finding::new(
            Code::N013,
            l.name.clone(),
            format!(
                "{}: the link went down {times} {} ({} {})",
                l.name,
                base_note(cx),
                d.name,
                d.shown(age)
            ),
        )
        .brief(format!("{} link down {times}", l.name))
        .evidence(Evidence::new(
            l.stats.path.clone(),
            format!("{} = {}", d.name, d.now),
        ))
        .remedy(
            "Each drop of the link stalls every RC QP over it (retry timeouts, then \
             IBV_WC_RETRY_EXC_ERR when it lasts). Look for the cause at both ends: the module's \
             readings (RDK-N010, RDK-N011), FEC (RDK-N012), the switch port's log, a reseated or \
             damaged cable.",
        )
        .next(format!("ip -s link show {}", l.name))
        .next(format!("ethtool -m {}", l.name))
        .next("dmesg -T | grep -iE 'link (is )?(down|up)'");
        f = match b {
            None => f.severity(Severity::Info),
            Some(_) if d.growth() >= FLAPPING => f.severity(Severity::Error),
            Some(_) => f,
        };
        out.push(f);
    }
    if !any {
        return Outcome::NotApplicable(
            "no link reports link-down events (link_down_events_phy, link_down_events)".into(),
        );
    }
    Outcome::Findings(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_show_growth_and_rate() {
        let d = Delta {
            name: "rx_discards_phy".into(),
            now: 5312,
            was: Some(1000),
        };
        assert_eq!(d.shown(Some(10)), "+4,312 (431/s)");
        assert_eq!(d.shown(None), "+4,312");
        let reset = Delta {
            was: Some(9000),
            ..d.clone()
        };
        assert_eq!(reset.growth(), 5312);
        let total = Delta { was: None, ..d };
        assert_eq!(total.shown(Some(10)), "5,312 in all");
        assert_eq!(grouped(1234567), "1,234,567");
    }

    #[test]
    fn drop_counters_are_mlx5_names() {
        for n in [
            "rx_discards_phy",
            "rx_prio3_discards",
            "rx_prio0_buf_discard",
            "rx_out_of_buffer",
        ] {
            assert!(is_drop(n), "{n}");
        }
        assert!(!is_drop("rx_prio3_packets"));
        assert!(is_pause_duration("rx_prio3_pause_duration"));
        assert!(!is_pause_duration("rx_prio3_pause"));
    }
}
