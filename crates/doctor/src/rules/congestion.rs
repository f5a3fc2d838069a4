//! Hardware layer, RoCE congestion control judged by mlx5's `hw_counters`
//! (docs/roce-qos.md, "Congestion counters"): a CNP storm (RDK-N014) and
//! loss the congestion loop never saw (RDK-N015). RDK-N009 lists the same
//! counters' rates as information and owns the two loop faults it names
//! (`rp_cnp_ignored` growing, marked packets without CNPs); these rules
//! never report those again.
//!
//! **RDK-N014, CNP storm.** CNPs sent (`np_cnp_sent`) or handled
//! (`rp_cnp_handled`) since a baseline of known age, as a share of the
//! packets the port received or sent in the same interval (PMA
//! `port_rcv_packets` / `port_xmit_packets`). Above
//! [`Config::cnp_storm_pct`](crate::checks::Config::cnp_storm_pct) (1 %
//! by default) the loop is cutting rates most of the time. Why 1 %: the
//! notification point sends at most one CNP per flow per CNP interval (50 µs
//! in DCQCN's reference implementation); a flow of 4096-byte packets at
//! 25 Gb/s sends about 38 packets in that interval, so a flow that is
//! marked in *every* interval gets CNPs on about 2.6 % of its packets (at
//! 100 Gb/s, 0.66 %). A sustained 1 % therefore means congestion in most
//! intervals for most flows — standing queues, not the bursts DCQCN
//! exists for. Without packet counters (or when they did not move) the
//! share is taken of the port's line rate in 4096-byte packets (25 Gb/s:
//! 762,939 packets/s, so 7,629 CNPs/s); without either it is not judged.
//!
//! **RDK-N015, loss without congestion control.** Retransmission-class
//! counters (`out_of_sequence`, `packet_seq_err`, `local_ack_timeout_err`,
//! `duplicate_request`, `implied_nak_seq_err`) above RDK-H011's thresholds
//! while neither `np_cnp_sent` nor `rp_cnp_handled` moved: with a baseline,
//! their growth since it (a warning); without one, the totals since the
//! driver loaded with both CNP counters at 0 in total — the loop never ran
//! at all since then (info, as totals say nothing about now). Marked
//! packets or ignored CNPs growing are RDK-N009's findings: then this rule
//! stays silent. Not judged on a port without both CNP counters (rxe,
//! kernels before 4.12) or when they read "N/A" or garbage (RDK-H009).
//!
//! **The soft NIC.** Its published device-wide counters (port 1 of each of
//! `HostFacts::soft_devices`) have the same names and are judged the same
//! way, without Ethernet facts (no netdev, no rate: a CNP share needs its
//! packet counters, which it always publishes).

use rdmakit_host::model::{Attr, Device, Port};
use rdmakit_host::parse::sysfs::Counter;

use super::ethernet::no_roce;
use super::ethernet_counters::{grouped, rate as per_s, Delta};
use crate::checks::{Ctx, Outcome};
use crate::codes::{Code, Severity};
use crate::counters::{Baseline, BaselinePort};
use crate::finding::{Evidence, Finding};

/// The default of [`crate::checks::Config::cnp_storm_pct`]: CNPs above
/// this percentage of the port's packets make a storm (see the module doc).
pub const CNP_STORM_PCT: f64 = 1.0;

/// The packet size the line-rate fallback counts in: RoCE's largest MTU.
const LINE_RATE_PACKET: f64 = 4096.0;

/// The counters of the congestion loop (mlx5's names, roce-qos.md §4).
pub const CC_COUNTERS: [&str; 4] = [
    "np_ecn_marked_roce_packets",
    "np_cnp_sent",
    "rp_cnp_handled",
    "rp_cnp_ignored",
];

/// The retransmission-class counters RDK-N015 reads and the growth above
/// which each counts (RDK-H011's: 100 for sequence errors and duplicates,
/// 10 for ACK timeouts).
pub const LOSS_COUNTERS: [(&str, u64); 5] = [
    ("out_of_sequence", 100),
    ("packet_seq_err", 100),
    ("local_ack_timeout_err", 10),
    ("duplicate_request", 100),
    ("implied_nak_seq_err", 100),
];

/// A RoCE port the facts hold, with its device and its netdev's name
/// ("IF" when unknown, for the commands; None for the soft NIC's, which
/// has none), the soft NIC's after the kernel's.
fn roce_ports<'a>(cx: &'a Ctx) -> Vec<(&'a Device, &'a Port, Option<&'a str>)> {
    let kernel = cx.facts.ethernet.ports.iter().filter_map(|p| {
        let d = cx.facts.devices.iter().find(|d| d.name == p.device)?;
        let port = d.ports.iter().find(|x| x.num == p.port)?;
        Some((d, port, Some(p.netdev.as_deref().unwrap_or("IF"))))
    });
    let soft = cx
        .facts
        .soft_devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p, None)));
    kernel.chain(soft).collect()
}

/// [`no_roce`], unless the soft NIC published counters: its ports are
/// judged without Ethernet facts.
fn nothing_to_judge(cx: &Ctx) -> Option<Outcome> {
    match cx.facts.soft_devices.is_empty() {
        true => no_roce(cx),
        false => None,
    }
}

/// The command that shows a port's congestion counters: `rdma statistic`
/// for a kernel port, `rdmakit stat` for the soft NIC's.
fn stat_command(d: &Device, p: &Port, soft: bool, grep: &str) -> String {
    match soft {
        true => format!("rdmakit stat {}/{}", d.name, p.num),
        false => format!(
            "rdma statistic show link {}/{} | grep -E '{grep}'",
            d.name, p.num
        ),
    }
}

/// A counter's value: absent, "N/A" and garbage are `None`.
fn value(a: Option<&Attr<Counter>>) -> Option<u64> {
    a?.get()?.value()
}

/// The baseline's record of this port, unless it is another device.
fn base_port<'a>(b: &'a Baseline, d: &Device, p: &Port) -> Option<&'a BaselinePort> {
    let bp = b.ports.get(&format!("{}/{}", d.name, p.num))?;
    match (bp.node_guid, d.node_guid.get()) {
        (Some(then), Some(now)) if then != *now => None,
        _ => Some(bp),
    }
}

/// `name`'s delta at this port (hw_counters, else counters), when it reads
/// now and — with `bp` — in the baseline.
fn delta(p: &Port, bp: Option<&BaselinePort>, name: &str) -> Option<Delta> {
    let now = value(p.hw_counters.get(name)).or_else(|| value(p.counters.get(name)))?;
    let was = match bp {
        Some(bp) => Some(*bp.counters.get(name)?),
        None => None,
    };
    Some(Delta {
        name: name.to_string(),
        now,
        was,
    })
}

/// The attribute a counter was read from (hw_counters, else counters).
fn attr<'a>(p: &'a Port, name: &str) -> Option<&'a Attr<Counter>> {
    p.hw_counters.get(name).or_else(|| p.counters.get(name))
}

/// The counter now, and in the baseline, as evidence.
fn evidence(p: &Port, bp: Option<&BaselinePort>, d: &Delta) -> Vec<Evidence> {
    let mut v = Vec::new();
    if let Some(a) = attr(p, &d.name) {
        v.push(Evidence::of(a));
    }
    if let (Some(w), Some(path)) = (d.was, bp.and_then(|bp| bp.paths.get(&d.name))) {
        v.push(Evidence::new(format!("baseline {path}"), w.to_string()));
    }
    v
}

/// What a CNP rate is compared with.
enum Basis {
    /// The port's own packets in the same interval (counter, growth).
    Packets(&'static str, u64),
    /// Its line rate in 4096-byte packets per second (Gb/s).
    LineRate(f64),
}

/// RDK-N014: CNPs sent or handled faster than the storm threshold.
pub fn storm(cx: &Ctx) -> Outcome {
    if let Some(o) = nothing_to_judge(cx) {
        return o;
    }
    let Some(b) = cx.cfg.baseline.as_ref() else {
        return Outcome::NotChecked(
            "a CNP storm is a rate: it needs a baseline (rdmakit collect -o before.json.gz; \
             rdmakit doctor --baseline before.json.gz)"
                .into(),
        );
    };
    let Some(age) = b.age_secs.filter(|a| *a > 0) else {
        return Outcome::NotChecked(format!(
            "the baseline ({}) has no known age, so CNPs cannot be turned into a rate",
            b.source
        ));
    };
    let pct = cx.cfg.cnp_storm_pct;
    let mut out = Vec::new();
    let mut any = false;
    let mut unjudged = Vec::new();
    for (d, p, ifname) in roce_ports(cx) {
        let Some(bp) = base_port(b, d, p) else {
            continue;
        };
        let subject = format!("{} port {}", d.name, p.num);
        for (cnp, pkts) in [
            ("np_cnp_sent", "port_rcv_packets"),
            ("rp_cnp_handled", "port_xmit_packets"),
        ] {
            let Some(c) = delta(p, Some(bp), cnp) else {
                continue;
            };
            any = true;
            let g = c.growth();
            if g == 0 {
                continue;
            }
            let rate = g as f64 / age as f64;
            let pk = delta(p, Some(bp), pkts).filter(|x| x.growth() > 0);
            let gbps = p.rate.get().map(|r| r.gbps).filter(|g| *g > 0.0);
            let (basis, share) = match (&pk, gbps) {
                (Some(x), _) => (
                    Basis::Packets(pkts, x.growth()),
                    g as f64 / x.growth() as f64 * 100.0,
                ),
                (None, Some(gb)) => {
                    let pps = gb * 1e9 / 8.0 / LINE_RATE_PACKET;
                    (Basis::LineRate(gb), rate / pps * 100.0)
                }
                (None, None) => {
                    unjudged.push(format!("{subject} {cnp}"));
                    continue;
                }
            };
            if share <= pct {
                continue;
            }
            let of = match &basis {
                Basis::Packets(n, x) => format!(
                    "{share:.1} % of the {} packets the port {} ({n})",
                    grouped(*x),
                    if cnp == "np_cnp_sent" {
                        "received"
                    } else {
                        "sent"
                    }
                ),
                Basis::LineRate(gb) => format!(
                    "{share:.1} % of its {gb} Gb/s line rate in 4096-byte packets ({}/s; the \
                     port's packet counters did not move or are absent)",
                    per_s(gb * 1e9 / 8.0 / LINE_RATE_PACKET)
                ),
            };
            let (what, remedy) = if cnp == "np_cnp_sent" {
                (
                    "CNPs sent",
                    "This host receives from congested paths: the switch marks most packets \
                     bound to it. Usually incast (many senders into this one receiver: spread \
                     them, or cap their window), switch ECN thresholds too low for the link \
                     (Kmin marks shallow queues: raise it), or this host is a slow receiver \
                     (rx_out_of_buffer, pauses it sends: RDK-N007, RDK-N008, the PCIe link: \
                     RDK-H004).",
                )
            } else {
                (
                    "CNPs handled (senders slowed)",
                    "This host's senders are slowed by CNPs most of the time: they send into \
                     a congested path — a hot receiver elsewhere (incast), an oversubscribed \
                     uplink, or switch ECN thresholds too low. Find the receiver: its \
                     np_cnp_sent grows (rdmakit doctor there, or rdmakit fleet pairwise).",
                )
            };
            let mut f = Finding::new(
                Code::N014,
                subject.clone(),
                format!(
                    "{what} at {}/s since the baseline ({}): {cnp} +{} in {age} s, \
                     {of}; above the storm threshold of {pct} %",
                    per_s(rate),
                    b.describe(),
                    grouped(g),
                ),
            )
            .brief(format!("{cnp} {}/s ({share:.1} %)", per_s(rate)))
            .remedy(remedy)
            .next(stat_command(d, p, ifname.is_none(), "cnp|ecn"));
            if let Some(ifname) = ifname {
                f = f.next(format!(
                    "ethtool -S {ifname} | grep -E 'prio[0-9]_(marked|pause)|out_of_buffer'"
                ));
            }
            f = f.next("rdmakit fleet pairwise");
            f.evidence = evidence(p, Some(bp), &c);
            if let Some(x) = &pk {
                f.evidence.extend(evidence(p, Some(bp), x));
            }
            out.push(f);
        }
    }
    if !any {
        return Outcome::NotChecked(
            "no RoCE port has CNP counters (np_cnp_sent, rp_cnp_handled) in both the baseline \
             and now"
                .into(),
        );
    }
    if out.is_empty() && !unjudged.is_empty() {
        return Outcome::NotChecked(format!(
            "CNPs moved but there is nothing to compare them with (no packet counters, no \
             port rate): {}",
            unjudged.join(", ")
        ));
    }
    Outcome::Findings(out)
}

/// RDK-N015: retransmissions grow while the congestion loop never ran.
pub fn loss_without_ecn(cx: &Ctx) -> Outcome {
    if let Some(o) = nothing_to_judge(cx) {
        return o;
    }
    let b = cx.cfg.baseline.as_ref();
    let mut out = Vec::new();
    let mut any = false;
    for (d, p, ifname) in roce_ports(cx) {
        // With a baseline, growth where the port and its CNP counters are in
        // it; else the totals since the driver loaded.
        let bp = b.and_then(|b| base_port(b, d, p)).filter(|bp| {
            ["np_cnp_sent", "rp_cnp_handled"]
                .iter()
                .all(|n| bp.counters.contains_key(*n))
        });
        let cc: Vec<Delta> = CC_COUNTERS.iter().filter_map(|n| delta(p, bp, n)).collect();
        let g = |n: &str| cc.iter().find(|x| x.name == n).map(Delta::growth);
        let (Some(sent), Some(handled)) = (g("np_cnp_sent"), g("rp_cnp_handled")) else {
            continue;
        };
        any = true;
        // The loop ran, or N009 reports how it is broken (ignored CNPs,
        // marks without CNPs).
        if sent > 0
            || handled > 0
            || g("np_ecn_marked_roce_packets").unwrap_or(0) > 0
            || g("rp_cnp_ignored").unwrap_or(0) > 0
        {
            continue;
        }
        let lost: Vec<(Delta, u64)> = LOSS_COUNTERS
            .iter()
            .filter_map(|(n, t)| Some((delta(p, bp, n)?, *t)))
            .filter(|(x, t)| x.growth() > *t)
            .collect();
        if lost.is_empty() {
            continue;
        }
        let subject = format!("{} port {}", d.name, p.num);
        let list: Vec<String> = lost
            .iter()
            .map(|(x, _)| match x.was {
                Some(_) => format!("{} +{}", x.name, grouped(x.growth())),
                None => format!("{} {}", x.name, grouped(x.now)),
            })
            .collect();
        let (since, sev) = match (bp, b) {
            (Some(_), Some(b)) => (
                format!(
                    "since the baseline ({}): {}, while np_cnp_sent and rp_cnp_handled did not \
                     move",
                    b.describe(),
                    list.join(", ")
                ),
                Severity::Warning,
            ),
            _ => (
                format!(
                    "{}: {}, while np_cnp_sent and rp_cnp_handled are 0: the congestion loop \
                     never ran{}",
                    super::counted_since(d),
                    list.join(", "),
                    if b.is_some() {
                        " (the port or its CNP counters are not in the baseline)"
                    } else {
                        ""
                    }
                ),
                Severity::Info,
            ),
        };
        let mut f = Finding::new(
            Code::N015,
            subject.clone(),
            format!("packets lost without congestion control {since}"),
        )
        .severity(sev)
        .brief(format!("{}, no CNP", list.join(", ")))
        .remedy(
            "Packets are lost and retransmitted, yet no CNP was sent or handled: congestion (or \
             loss) the ECN loop never saw. Check, in this order: ECN marking on the switch \
             queue of the RoCE class (WRED/ECN profile on the traffic class); the NIC's \
             notification and reaction points (roce_np/enable/P, roce_rp/enable/P: RDK-N002, \
             RDK-N003) at both ends; whether RoCE traffic is on a lossy class (RDK-N001, \
             RDK-N006), where a full queue drops instead of pausing; link errors (RDK-H010, \
             RDK-N012) for loss that is not congestion at all.",
        )
        .next(stat_command(
            d,
            p,
            ifname.is_none(),
            "cnp|ecn|seq|timeout|duplicate",
        ));
        if let Some(ifname) = ifname {
            f = f.next(format!(
                "grep . /sys/class/net/{ifname}/ecn/roce_*/enable/*"
            ));
        }
        f = f.next(
            "rdmakit collect -o before.json.gz; sleep 60; rdmakit doctor --baseline before.json.gz",
        );
        for (x, _) in &lost {
            f.evidence.extend(evidence(p, bp, x));
        }
        for x in cc
            .iter()
            .filter(|x| x.name == "np_cnp_sent" || x.name == "rp_cnp_handled")
        {
            f.evidence.extend(evidence(p, bp, x));
        }
        out.push(f);
    }
    if !any {
        return Outcome::NotChecked(
            "no RoCE port has both CNP counters (np_cnp_sent, rp_cnp_handled) to read: the \
             driver has none, or predates them (mlx5: kernel 4.12)"
                .into(),
        );
    }
    Outcome::Findings(out)
}
