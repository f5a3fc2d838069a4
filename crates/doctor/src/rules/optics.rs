//! Hardware layer, the module in each Ethernet port beneath RoCE: readings
//! beyond the module's own thresholds (RDK-N010) and one lane receiving far
//! less light than its siblings (RDK-N011).

use rdmakit_host::ethernet::optics::{Levels, Module};
use rdmakit_host::ethernet::EthLink;

use super::ethernet::no_roce;
use crate::checks::{Ctx, Outcome};
use crate::codes::{Code, Severity};
use crate::finding::{Evidence, Finding};

/// A lane this far below its siblings' median (dB) is weak: half the light.
pub const WEAK_LANE_DB: f64 = 3.0;

/// Lanes darker than this (dBm) receive no light at all: a dark link, not a
/// weak lane (-30 dBm is 1 µW).
const DARK_DBM: f64 = -30.0;

/// The links whose module decoded, and why none did when none did (or why
/// the host has no RoCE port to judge).
fn modules<'a>(cx: &'a Ctx) -> Result<Vec<(&'a EthLink, &'a Module)>, Outcome> {
    if let Some(o) = no_roce(cx) {
        return Err(o);
    }
    let links = &cx.facts.ethernet.links;
    let with: Vec<_> = links
        .iter()
        .filter_map(|l| l.module.get().map(|m| (l, m)))
        .collect();
    if !with.is_empty() {
        return Ok(with);
    }
    if links.is_empty() {
        return Err(Outcome::NotApplicable(
            "no netdev beneath the RoCE ports".into(),
        ));
    }
    if !cx.facts.ethernet.optics {
        return Err(Outcome::NotChecked(format!(
            "module EEPROMs of {} not read (each read takes tens of ms under the \
             kernel's RTNL lock): rdmakit doctor --optics",
            links
                .iter()
                .map(|l| l.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let why: Vec<String> = links
        .iter()
        .map(|l| {
            format!(
                "{}: {}",
                l.module.path,
                super::ethernet::answer_state(&l.module)
            )
        })
        .collect();
    let na = links
        .iter()
        .all(|l| super::ethernet::unsupported(&l.module));
    if na {
        Err(Outcome::NotApplicable(format!(
            "no plug-in module: {}",
            why.join("; ")
        )))
    } else {
        Err(Outcome::NotChecked(format!(
            "no module EEPROM decoded: {}",
            why.join("; ")
        )))
    }
}

/// Where a reading stands against its levels: the worse crossing, if any.
fn crossing(v: f64, l: &Levels) -> Option<(Severity, &'static str, f64)> {
    if v > l.high_alarm {
        Some((Severity::Error, "high alarm", l.high_alarm))
    } else if v < l.low_alarm {
        Some((Severity::Error, "low alarm", l.low_alarm))
    } else if v > l.high_warning {
        Some((Severity::Warning, "high warning", l.high_warning))
    } else if v < l.low_warning {
        Some((Severity::Warning, "low warning", l.low_warning))
    } else {
        None
    }
}

fn dbm(mw: f64) -> String {
    if mw > 0.0 {
        format!("{:.2} dBm", 10.0 * mw.log10())
    } else {
        "-inf dBm".into()
    }
}

/// RDK-N010: readings beyond the module's own thresholds.
pub fn thresholds(cx: &Ctx) -> Outcome {
    let mods = match modules(cx) {
        Ok(m) => m,
        Err(o) => return o,
    };
    let mut out = Vec::new();
    let mut judged = false;
    for (l, m) in mods {
        let Some(t) = &m.thresholds else { continue };
        judged = true;
        let mut hits: Vec<(Severity, String)> = Vec::new();
        let mut check = |what: String, v: Option<f64>, lv: &Levels, unit: &str, mw: bool| {
            let Some(v) = v else { return };
            if let Some((sev, which, limit)) = crossing(v, lv) {
                let shown = if mw {
                    format!(
                        "{v:.4} mW ({}), {which} {limit:.4} mW ({})",
                        dbm(v),
                        dbm(limit)
                    )
                } else {
                    format!("{v:.2} {unit}, {which} {limit:.2} {unit}")
                };
                hits.push((sev, format!("{what} {shown}")));
            }
        };
        check(
            "temperature".into(),
            m.temperature_c,
            &t.temperature_c,
            "°C",
            false,
        );
        check("supply voltage".into(), m.vcc_v, &t.vcc_v, "V", false);
        for lane in &m.lanes {
            let n = lane.lane;
            check(
                format!("lane {n} Tx bias"),
                lane.tx_bias_ma,
                &t.tx_bias_ma,
                "mA",
                false,
            );
            check(
                format!("lane {n} Tx power"),
                lane.tx_power_mw,
                &t.tx_power_mw,
                "mW",
                true,
            );
            check(
                format!("lane {n} Rx power"),
                lane.rx_power_mw,
                &t.rx_power_mw,
                "mW",
                true,
            );
        }
        if hits.is_empty() {
            continue;
        }
        let sev = hits
            .iter()
            .map(|(s, _)| *s)
            .max()
            .unwrap_or(Severity::Warning);
        let list: Vec<&str> = hits.iter().map(|(_, s)| s.as_str()).collect();
        out.push(
            Finding::new(
                Code::N010,
                l.name.clone(),
                format!(
                    "{}: module {} {} (serial {}) reads beyond its own thresholds: {}",
                    l.name,
                    m.vendor,
                    m.part_number,
                    m.serial,
                    list.join("; ")
                ),
            )
            .severity(sev)
            .brief(format!("{} optics: {}", l.name, list[0]))
            .evidence(Evidence::new(l.module.path.clone(), list.join("; ")))
            .remedy(
                "Low Rx power: clean both connectors, reseat, check the far end's Tx power, \
                 replace the cable or module. High temperature: check airflow. High bias: the \
                 laser is ageing; replace the module.",
            )
            .next(format!("ethtool -m {}", l.name))
            .next(format!(
                "ethtool -S {} | grep -iE 'corrected|symbol|crc'",
                l.name
            )),
        );
    }
    if !judged {
        return Outcome::NotChecked(
            "no module's thresholds were in its EEPROM dump (SFF-8636 page 03h, CMIS page \
             02h, SFF-8472 A2h)"
                .into(),
        );
    }
    Outcome::Findings(out)
}

/// The median of `v` (sorted copy).
fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// Lanes at least [`WEAK_LANE_DB`] below the median of the others (which must
/// themselves receive light): (lane, its dBm, the others' median dBm).
pub fn weak_lanes(m: &Module) -> Vec<(u8, f64, f64)> {
    let rx: Vec<(u8, f64)> = m
        .lanes
        .iter()
        .filter_map(|l| Some((l.lane, l.rx_power_dbm?)))
        .collect();
    if rx.len() < 2 {
        return Vec::new();
    }
    rx.iter()
        .filter_map(|&(lane, d)| {
            let others: Vec<f64> = rx
                .iter()
                .filter(|(n, _)| *n != lane)
                .map(|(_, d)| *d)
                .collect();
            let med = median(&others)?;
            (med > DARK_DBM && med - d >= WEAK_LANE_DB).then_some((lane, d, med))
        })
        .collect()
}

/// RDK-N011: one lane far below its siblings.
pub fn weak_lane(cx: &Ctx) -> Outcome {
    let mods = match modules(cx) {
        Ok(m) => m,
        Err(o) => return o,
    };
    let mut out = Vec::new();
    let mut judged = false;
    for (l, m) in mods {
        if m.lanes.iter().filter(|x| x.rx_power_dbm.is_some()).count() < 2 {
            continue;
        }
        judged = true;
        for (lane, d, med) in weak_lanes(m) {
            out.push(
                Finding::new(
                    Code::N011,
                    l.name.clone(),
                    format!(
                        "{}: module lane {lane} receives {d:.2} dBm, {:.1} dB below the other \
                         lanes' median {med:.2} dBm",
                        l.name,
                        med - d
                    ),
                )
                .evidence(Evidence::new(
                    l.module.path.clone(),
                    m.lanes
                        .iter()
                        .filter_map(|x| {
                            Some(format!("lane {} Rx {:.2} dBm", x.lane, x.rx_power_dbm?))
                        })
                        .collect::<Vec<_>>()
                        .join(", "),
                ))
                .remedy(
                    "Clean and reseat both ends; swap the cable: if the weak lane follows the \
                     cable, replace it, otherwise the far-end module.",
                )
                .next(format!("ethtool -m {}", l.name)),
            );
        }
    }
    if !judged {
        return Outcome::NotApplicable("no multi-lane module with Rx power monitors".into());
    }
    Outcome::Findings(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossings_prefer_the_alarm() {
        let l = Levels {
            high_alarm: 80.0,
            low_alarm: -10.0,
            high_warning: 75.0,
            low_warning: -5.0,
        };
        assert_eq!(crossing(50.0, &l), None);
        assert_eq!(crossing(77.0, &l).map(|c| c.1), Some("high warning"));
        assert_eq!(crossing(81.0, &l).map(|c| c.1), Some("high alarm"));
        assert_eq!(crossing(-11.0, &l).map(|c| c.0), Some(Severity::Error));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[1.0, 3.0, 2.0]), Some(2.0));
        assert_eq!(median(&[1.0, 2.0]), Some(1.5));
        assert_eq!(median(&[]), None);
    }
}
