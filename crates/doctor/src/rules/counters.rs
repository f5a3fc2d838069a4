//! Hardware layer: port error counters (RDK-H010) and transport counters (RDK-H011),
//! absolute or, with a [`Baseline`], as growth since it; the soft NIC's published
//! device-wide counters (`HostFacts::soft_devices`, its port 1) are judged too.

use super::hardware::no_devices;
use super::{counted_since, port_subject};
use crate::checks::{Ctx, Outcome};
use crate::codes::{Code, Severity};
use crate::counters::{judge, Baseline, BaselinePort, Reading, ERROR_COUNTERS, TRANSPORT_COUNTERS};
use crate::finding::{Evidence, Finding};
use rdmakit_host::model::{Attr, Device, DeviceKind, Port};
use rdmakit_host::parse::sysfs::Counter;

/// The baseline's record of a port, or why there is none to compare with.
enum Base<'a> {
    /// No `--baseline` was given.
    None,
    Port(&'a Baseline, &'a BaselinePort),
    /// A baseline was given but cannot be used for this port (said in the message).
    Unusable(String),
}

fn base<'a>(b: Option<&'a Baseline>, d: &Device, p: &Port) -> Base<'a> {
    let Some(b) = b else { return Base::None };
    let Some(bp) = b.ports.get(&format!("{}/{}", d.name, p.num)) else {
        return Base::Unusable(format!(
            "{} port {} is not in the baseline: absolute values",
            d.name, p.num
        ));
    };
    match (bp.node_guid, d.node_guid.get()) {
        (Some(then), Some(now)) if then != *now => Base::Unusable(format!(
            "the baseline's {} has node GUID {then:016x}, this one {now:016x}: another \
             device, absolute values",
            d.name
        )),
        _ => Base::Port(b, bp),
    }
}

/// What a counter check could read across the ports.
#[derive(Default)]
struct Read {
    /// Some counter held a value.
    any: bool,
    /// Some driver printed "N/A".
    na: bool,
}

/// A counter's value, or `None` when it is absent, "N/A" or garbage (garbage is
/// RDK-H009's); notes in `r` what was read.
fn value(a: Option<&Attr<Counter>>, r: &mut Read) -> Option<u64> {
    match a?.get()? {
        Counter::Value(v) => {
            r.any = true;
            Some(*v)
        }
        Counter::Unavailable(_) => {
            r.na = true;
            None
        }
    }
}

/// Judges every port (with its baseline record) and collects the findings;
/// `dir` names the counters when no port had one to read.
fn each_port(
    cx: &Ctx,
    dir: &str,
    mut judge: impl FnMut(&Device, &Port, Base, &mut Read) -> Option<Finding>,
) -> Outcome {
    // The soft NIC's devices have no sysfs: their published counters are
    // judged even on a host whose kernel has no RDMA device.
    if cx.facts.soft_devices.is_empty() {
        if let Some(o) = no_devices(cx) {
            return o;
        }
    }
    let mut out = Vec::new();
    let mut r = Read::default();
    for d in cx.facts.devices.iter().chain(&cx.facts.soft_devices) {
        for p in &d.ports {
            let b = base(cx.cfg.baseline.as_ref(), d, p);
            out.extend(judge(d, p, b, &mut r));
        }
    }
    if !r.any {
        return nothing_read(cx, r.na, dir);
    }
    Outcome::Findings(out)
}

/// Why a counter check found nothing to read.
fn nothing_read(cx: &Ctx, na: bool, dir: &str) -> Outcome {
    if na {
        return Outcome::NotApplicable(format!(
            "every port's {dir} reads \"N/A\" (no performance-management agent)"
        ));
    }
    if cx
        .facts
        .devices
        .iter()
        .all(|d| d.kind == DeviceKind::Software)
    {
        return Outcome::NotApplicable(format!("software devices only: no {dir} of this kind"));
    }
    Outcome::NotChecked(format!("no port has {dir} in the source"))
}

pub fn errors(cx: &Ctx) -> Outcome {
    each_port(cx, "PMA error counters (counters/)", |d, p, b, r| {
        let mut parts = Vec::new();
        // The same readings in a few words each, for one-line forms.
        let mut brief = Vec::new();
        let mut evidence = Vec::new();
        let (mut sev, mut link, mut saturated) = (Severity::Warning, false, false);
        for c in ERROR_COUNTERS {
            let a = p.counters.get(c.name);
            let Some(now) = value(a, r) else {
                continue;
            };
            let (was, was_path) = match &b {
                Base::Port(_, bp) => (
                    bp.counters.get(c.name).copied(),
                    bp.paths.get(c.name).cloned(),
                ),
                _ => (None, None),
            };
            let reading = judge(c, now, was);
            brief.push(match &reading {
                Reading::Saturated { .. } => format!("{} {now} saturated", c.name),
                Reading::Over {
                    count,
                    since_baseline: true,
                    reset: false,
                    ..
                } => format!("{} +{count}", c.name),
                Reading::Over { count, .. } => format!("{} {count}", c.name),
                Reading::Quiet => String::new(),
            });
            let part = match reading {
                Reading::Quiet => continue,
                Reading::Saturated { was: Some(w) } if w == c.max() => format!(
                    "{} {now} (saturated at the baseline and now: growth unknown until it \
                     is cleared)",
                    c.name
                ),
                Reading::Saturated { was } => {
                    saturated = true;
                    if c.bits >= 8 {
                        sev = Severity::Error;
                    }
                    match was {
                        Some(w) => format!(
                            "{} {now} (saturated since the baseline's {w}: the {}-bit counter \
                             stopped at its maximum, at least +{})",
                            c.name,
                            c.bits,
                            now - w
                        ),
                        None => format!(
                            "{} {now} (saturated: the {}-bit counter stopped at its maximum)",
                            c.name, c.bits
                        ),
                    }
                }
                Reading::Over {
                    count,
                    since_baseline: false,
                    ..
                } => format!("{} {count} (> {})", c.name, c.threshold),
                Reading::Over {
                    count, reset: true, ..
                } => format!(
                    "{} {count} since it was cleared after the baseline (> {})",
                    c.name, c.threshold
                ),
                Reading::Over { count, .. } => {
                    format!("{} +{count} (> {})", c.name, c.threshold)
                }
            };
            link |= c.link;
            parts.push(part);
            if let Some(a) = a {
                evidence.push(Evidence::of(a));
            }
            if let (Some(w), Some(path)) = (was, was_path) {
                evidence.push(Evidence::new(format!("baseline {path}"), w.to_string()));
            }
        }
        if parts.is_empty() {
            return None;
        }
        let since = match &b {
            Base::Port(bl, _) => format!("since the baseline ({})", bl.describe()),
            Base::Unusable(why) => format!("since they were last cleared ({why})"),
            Base::None => "since they were last cleared".to_string(),
        };
        let mut remedy = if link {
            "A physical-link fault: reseat, clean or replace the cable and transceiver on \
             both ends, check the peer switch port's counters, and move the cable to \
             another port to tell cable from port."
                .to_string()
        } else {
            "Congestion, credit or configuration trouble: check the switch, the subnet \
             manager's log and the partition configuration."
                .to_string()
        };
        if saturated {
            remedy.push_str(
                " A saturated counter no longer counts: clear the counters after the fix \
                 (perfquery -x -R) so new errors show.",
            );
        }
        if matches!(b, Base::None) {
            remedy.push_str(
                " Record a baseline (rdmakit collect) and compare later runs with \
                 rdmakit doctor --baseline to see whether the errors still grow.",
            );
        }
        brief.retain(|b| !b.is_empty());
        let mut fd = Finding::new(
            Code::H010,
            port_subject(d, p),
            format!("error counters {since}: {}", parts.join(", ")),
        )
        .brief(brief.join(", "))
        .severity(sev)
        .remedy(remedy)
        .next(format!("perfquery -x -C {} -P {}", d.name, p.num))
        .next("ibqueryerrors; iblinkinfo");
        fd.evidence = evidence;
        Some(fd)
    })
}

pub fn transport(cx: &Ctx) -> Outcome {
    each_port(cx, "transport counters (hw_counters/)", |d, p, b, r| {
        let mut parts = Vec::new();
        let mut evidence = Vec::new();
        let mut fatal = false;
        for c in TRANSPORT_COUNTERS {
            let a = p.hw_counters.get(c.name);
            let Some(now) = value(a, r) else {
                continue;
            };
            // With a baseline, a counter it lacks has nothing to grow from.
            let (was, was_path) = match &b {
                Base::Port(_, bp) => match bp.counters.get(c.name) {
                    Some(&w) => (Some(w), bp.paths.get(c.name)),
                    None => continue,
                },
                _ => (None, None),
            };
            let part = match c.judge(now, was) {
                Reading::Quiet | Reading::Saturated { .. } => continue,
                Reading::Over {
                    count,
                    since_baseline: false,
                    ..
                } => format!("{} {count}", c.name),
                Reading::Over {
                    count, reset: true, ..
                } => format!(
                    "{} {count} since the driver reset it after the baseline (> {})",
                    c.name, c.threshold
                ),
                Reading::Over { count, .. } => format!("{} +{count} (> {})", c.name, c.threshold),
            };
            let then = was
                .zip(was_path)
                .map(|(w, path)| Evidence::new(format!("baseline {path}"), w.to_string()));
            fatal |= c.fatal;
            parts.push(part);
            if let Some(a) = a {
                evidence.push(Evidence::of(a));
            }
            evidence.extend(then);
        }
        if parts.is_empty() {
            return None;
        }
        let subject = port_subject(d, p);
        // "name value" or "name +growth" of each part, for one-line forms.
        let brief: Vec<&str> = parts
            .iter()
            .map(|p| p.split(" (").next().unwrap_or(p))
            .map(|p| p.split(" since ").next().unwrap_or(p))
            .collect();
        let brief = brief.join(", ");
        let mut fd = match &b {
            Base::Port(bl, _) => Finding::new(
                Code::H011,
                subject,
                format!(
                    "transport counters since the baseline ({}): {}",
                    bl.describe(),
                    parts.join(", ")
                ),
            )
            .severity(Severity::Warning),
            Base::Unusable(why) => Finding::new(
                Code::H011,
                subject,
                format!(
                    "transport counters {} ({why}): {}",
                    counted_since(d),
                    parts.join(", ")
                ),
            ),
            Base::None => Finding::new(
                Code::H011,
                subject,
                format!(
                    "transport counters {}: {}; whether they still grow needs a \
                     baseline (--baseline)",
                    counted_since(d),
                    parts.join(", ")
                ),
            ),
        };
        let mut remedy = String::from(
            "Retransmissions hide packet loss: on RoCE check PFC/ECN on the NICs and every \
             switch in the path; on any fabric fix link errors first (RDK-H010).",
        );
        if fatal {
            remedy.push_str(
                " Exhausted retries failed QPs (the application saw RETRY_EXC_ERR or \
                 RNR_RETRY_EXC_ERR): for RNR, the receiver posts receives too slowly.",
            );
        }
        fd = fd
            .brief(brief)
            .remedy(remedy)
            .next("rdmakit collect -o before.json.gz; rdmakit doctor --baseline before.json.gz")
            .next("rdmakit explain wc:RETRY_EXC_ERR");
        fd.evidence = evidence;
        Some(fd)
    })
}
