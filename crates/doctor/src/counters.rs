//! Port counters that mean trouble: the IBA PortCounters error fields (their widths,
//! so a pegged counter is recognised as saturated, and ibqueryerrors' thresholds), the
//! drivers' transport counters (retransmissions, timeouts, exhausted retries), and the
//! [`Baseline`] an earlier collection gives, so growth is judged instead of totals.
//!
//! Pure data and arithmetic, but for [`Baseline::load`], which replays the earlier
//! bundle; the checks that use it are in [`crate::rules::counters`].

use std::collections::BTreeMap;

use serde::Serialize;

use rdmakit_host::collect::collect;
use rdmakit_host::model::{Device, HostFacts};
use rdmakit_host::open::{OpenError, SourceSpec};

/// One PortCounters error field as the kernel exposes it in `ports/<n>/counters/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCounter {
    /// The sysfs file name.
    pub name: &'static str,
    /// The field's width in the PortCounters attribute (rdma-core libibmad fields.c:
    /// SymbolErrorCounter 16, LinkErrorRecoveryCounter 8, ...): the kernel reads the
    /// field and prints it, so the value stops at `2^bits - 1`.
    pub bits: u8,
    /// Above this many the port is reported: infiniband-diags' `etc/error_thresholds`
    /// sample (the values `ibqueryerrors -t` suggests).
    pub threshold: u64,
    /// What one count means.
    pub what: &'static str,
    /// A physical-link counter (cable, transceiver, connector) rather than a congestion
    /// or configuration one; it decides the remedy.
    pub link: bool,
}

impl ErrorCounter {
    /// The largest value the field holds.
    pub fn max(&self) -> u64 {
        (1u64 << self.bits) - 1
    }
}

const fn ec(
    name: &'static str,
    bits: u8,
    threshold: u64,
    what: &'static str,
    link: bool,
) -> ErrorCounter {
    ErrorCounter {
        name,
        bits,
        threshold,
        what,
        link,
    }
}

/// The PortCounters error fields, in the attribute's order.
pub const ERROR_COUNTERS: &[ErrorCounter] = &[
    ec(
        "symbol_error",
        16,
        10,
        "symbol errors on the physical lanes",
        true,
    ),
    ec(
        "link_error_recovery",
        8,
        10,
        "link retrains after errors",
        true,
    ),
    ec("link_downed", 8, 10, "times the link went down", true),
    ec(
        "port_rcv_errors",
        16,
        10,
        "received packets with errors",
        true,
    ),
    ec(
        "port_rcv_remote_physical_errors",
        16,
        100,
        "packets the sender marked bad",
        true,
    ),
    ec(
        "port_rcv_switch_relay_errors",
        16,
        100,
        "packets the port could not relay",
        false,
    ),
    ec(
        "port_xmit_discards",
        16,
        100,
        "outbound packets discarded",
        false,
    ),
    ec(
        "port_xmit_constraint_errors",
        8,
        100,
        "packets not sent for a partition or constraint",
        false,
    ),
    ec(
        "port_rcv_constraint_errors",
        8,
        100,
        "packets dropped for a partition or constraint",
        false,
    ),
    ec(
        "local_link_integrity_errors",
        4,
        10,
        "bursts of local physical errors",
        true,
    ),
    ec(
        "excessive_buffer_overrun_errors",
        4,
        10,
        "receive buffer overruns",
        false,
    ),
    ec(
        "VL15_dropped",
        16,
        100,
        "subnet management packets dropped",
        false,
    ),
];

/// A driver transport counter in `ports/<n>/hw_counters/` (mlx5's and rxe's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportCounter {
    pub name: &'static str,
    /// Growth since a baseline above this is a warning (0: any growth).
    pub threshold: u64,
    pub what: &'static str,
    /// Each count is a QP that went to the error state.
    pub fatal: bool,
}

const fn tc(
    name: &'static str,
    threshold: u64,
    what: &'static str,
    fatal: bool,
) -> TransportCounter {
    TransportCounter {
        name,
        threshold,
        what,
        fatal,
    }
}

/// Transport counters: retransmissions, timeouts and exhausted retries. Congestion
/// control's counters (np_cnp_sent, rp_cnp_handled, ...) are not here on purpose.
pub const TRANSPORT_COUNTERS: &[TransportCounter] = &[
    tc(
        "out_of_sequence",
        100,
        "packets that arrived after a PSN gap",
        false,
    ),
    tc(
        "packet_seq_err",
        100,
        "PSN sequence-error NAKs received",
        false,
    ),
    tc(
        "local_ack_timeout_err",
        10,
        "ACK timeouts followed by a retransmission",
        false,
    ),
    tc(
        "rnr_nak_retry_err",
        0,
        "QPs failed: RNR retries exhausted",
        true,
    ),
    tc(
        "req_rnr_retries_exceeded",
        0,
        "QPs failed: RNR retries exhausted",
        true,
    ),
    tc(
        "req_transport_retries_exceeded",
        0,
        "QPs failed: transport retries exhausted",
        true,
    ),
    // rdma_rxe
    tc(
        "out_of_seq_request",
        100,
        "requests that arrived after a PSN gap",
        false,
    ),
    tc(
        "rcvd_seq_err",
        100,
        "PSN sequence-error NAKs received",
        false,
    ),
    tc(
        "completer_retry_err",
        10,
        "retransmissions after a timeout or NAK",
        false,
    ),
    tc(
        "retry_exceeded_err",
        0,
        "QPs failed: transport retries exhausted",
        true,
    ),
    tc(
        "retry_rnr_exceeded_err",
        0,
        "QPs failed: RNR retries exhausted",
        true,
    ),
];

/// The counters of an earlier collection of the same host (`rdmakit doctor --baseline`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Baseline {
    /// Where it came from, e.g. "bundle before.json.gz".
    pub source: String,
    /// Seconds from the baseline's collection to this one, when both times are known.
    pub age_secs: Option<u64>,
    /// By "device/port".
    pub ports: BTreeMap<String, BaselinePort>,
    /// The Ethernet statistics (`ethtool -S`) of each netdev beneath a RoCE
    /// port, by netdev; the FEC statistics' blocks as `fec:NAME`.
    pub links: BTreeMap<String, BTreeMap<String, u64>>,
}

/// One port of the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselinePort {
    /// The device's node GUID then, to tell another device of the same name.
    pub node_guid: Option<u64>,
    /// Counter name (from counters/ and hw_counters/) → value; counters that read
    /// "N/A" or garbage are left out.
    pub counters: BTreeMap<String, u64>,
    /// Counter name → the path it was read from.
    pub paths: BTreeMap<String, String>,
}

/// Why a `--baseline` bundle cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// It does not open (each message names `--baseline` and the path).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// It holds no port.
    #[error("--baseline {0}: holds no RDMA port, so there are no counters to compare with")]
    NoPort(String),
}

impl Baseline {
    /// The port counters of the bundle or capture directory at `path` (an
    /// earlier `rdmakit collect` of the same host), with its age when
    /// `now_unix` — the time of the collection it is compared with — and the
    /// bundle's own time are both known.
    ///
    /// # Errors
    /// The bundle does not open, or holds no RDMA port.
    pub fn load(path: &str, now_unix: Option<u64>) -> Result<Baseline, BaselineError> {
        let spec = SourceSpec {
            from: Some(path.to_string()),
            from_flag: "--baseline",
            ..SourceSpec::default()
        };
        // A bundle answers device limits and soft counters from its records:
        // nothing is asked live.
        let (opened, opts) = spec.open(|s| s)?;
        let facts = collect(opened.source(), &opts);
        if all_devices(&facts).all(|d| d.ports.is_empty()) {
            return Err(BaselineError::NoPort(path.to_string()));
        }
        let age = match (opened.recorded_unix(), now_unix) {
            (Some(t), Some(n)) if n >= t => Some(n - t),
            _ => None,
        };
        Ok(Baseline::from_facts(&facts, opened.label(), age))
    }

    /// The counters of every port in `facts`, the soft NIC's (`soft0/1`) too.
    pub fn from_facts(facts: &HostFacts, source: &str, age_secs: Option<u64>) -> Baseline {
        let mut ports = BTreeMap::new();
        for d in all_devices(facts) {
            for p in &d.ports {
                let mut counters = BTreeMap::new();
                let mut paths = BTreeMap::new();
                for (k, a) in p.counters.iter().chain(p.hw_counters.iter()) {
                    if let Some(v) = a.get().and_then(|c| c.value()) {
                        counters.insert(k.clone(), v);
                        paths.insert(k.clone(), a.path.clone());
                    }
                }
                ports.insert(
                    format!("{}/{}", d.name, p.num),
                    BaselinePort {
                        node_guid: d.node_guid.get().copied(),
                        counters,
                        paths,
                    },
                );
            }
        }
        let mut links = BTreeMap::new();
        for l in &facts.ethernet.links {
            let mut m: BTreeMap<String, u64> = l
                .stats
                .get()
                .map(|v| v.iter().cloned().collect())
                .unwrap_or_default();
            if let Some(f) = l.fec.get() {
                if let Some(v) = f.uncorrectable_blocks() {
                    m.insert("fec:uncorrectable_blocks".into(), v);
                }
                if let Some(v) = f.corrected_blocks() {
                    m.insert("fec:corrected_blocks".into(), v);
                }
            }
            if !m.is_empty() {
                links.insert(l.name.clone(), m);
            }
        }
        Baseline {
            source: source.to_string(),
            age_secs,
            ports,
            links,
        }
    }

    /// "bundle before.json.gz, 2 h 5 min earlier".
    pub fn describe(&self) -> String {
        match self.age_secs {
            Some(s) => format!("{}, {} earlier", self.source, human_duration(s)),
            None => self.source.clone(),
        }
    }
}

/// The kernel's devices, then the soft NIC's that published counters.
fn all_devices(facts: &HostFacts) -> impl Iterator<Item = &Device> {
    facts.devices.iter().chain(&facts.soft_devices)
}

/// "45 s", "12 min", "2 h 5 min", "3 d 4 h".
pub fn human_duration(s: u64) -> String {
    match s {
        0..=89 => format!("{s} s"),
        90..=5399 => format!("{} min", (s + 30) / 60),
        5400..=172_799 => {
            let m = (s + 30) / 60;
            format!("{} h {} min", m / 60, m % 60)
        }
        _ => {
            let h = (s + 1800) / 3600;
            format!("{} d {} h", h / 24, h % 24)
        }
    }
}

/// How one error counter reads against its threshold (and the baseline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// Nothing to report.
    Quiet,
    /// Above the threshold: the value (absolute), or the growth since the baseline.
    Over {
        count: u64,
        since_baseline: bool,
        reset: bool,
    },
    /// At the field's maximum now; `was`: the baseline value, if there is one.
    Saturated { was: Option<u64> },
}

/// Judges an error counter's value `now`, with the baseline's value `was` if known.
pub fn judge(c: &ErrorCounter, now: u64, was: Option<u64>) -> Reading {
    if now == c.max() {
        return Reading::Saturated { was };
    }
    over(now, was, c.threshold)
}

impl TransportCounter {
    /// Judges the counter's value `now`, with the baseline's value `was` if known:
    /// growth above the threshold since it, or without one any count at all (the
    /// driver has counted since it loaded; whether that still grows takes a
    /// baseline). Never [`Reading::Saturated`]: the drivers' counters are 64-bit.
    pub fn judge(&self, now: u64, was: Option<u64>) -> Reading {
        over(now, was, if was.is_some() { self.threshold } else { 0 })
    }
}

/// [`Reading::Over`] when what the counter counted — since `was` when there is a
/// baseline, else all of `now` — is above `threshold`.
fn over(now: u64, was: Option<u64>, threshold: u64) -> Reading {
    let (count, reset) = match was {
        None => (now, false),
        Some(w) if now >= w => (now - w, false),
        // Lower than before: cleared in between; `now` counts since the clearing.
        Some(_) => (now, true),
    };
    if count > threshold {
        Reading::Over {
            count,
            since_baseline: was.is_some(),
            reset,
        }
    } else {
        Reading::Quiet
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by(name: &str) -> &'static ErrorCounter {
        ERROR_COUNTERS.iter().find(|c| c.name == name).unwrap()
    }

    #[test]
    fn widths_are_the_iba_fields() {
        assert_eq!(by("symbol_error").max(), 65535);
        assert_eq!(by("link_downed").max(), 255);
        assert_eq!(by("link_error_recovery").max(), 255);
        assert_eq!(by("port_rcv_errors").max(), 65535);
        assert_eq!(by("excessive_buffer_overrun_errors").max(), 15);
        assert_eq!(by("local_link_integrity_errors").max(), 15);
    }

    #[test]
    fn thresholds_are_exclusive_and_saturation_wins() {
        let s = by("symbol_error");
        assert_eq!(judge(s, 10, None), Reading::Quiet);
        assert_eq!(
            judge(s, 11, None),
            Reading::Over {
                count: 11,
                since_baseline: false,
                reset: false
            }
        );
        assert_eq!(judge(s, 65535, None), Reading::Saturated { was: None });
        // Wider than the field (an extended counter): a number, never "saturated".
        assert!(matches!(judge(s, 70000, None), Reading::Over { .. }));
    }

    #[test]
    fn baseline_growth_and_reset() {
        let s = by("symbol_error");
        assert_eq!(judge(s, 5000, Some(4995)), Reading::Quiet);
        assert_eq!(
            judge(s, 5000, Some(4000)),
            Reading::Over {
                count: 1000,
                since_baseline: true,
                reset: false
            }
        );
        assert_eq!(
            judge(s, 50, Some(4000)),
            Reading::Over {
                count: 50,
                since_baseline: true,
                reset: true
            }
        );
        assert_eq!(
            judge(s, 65535, Some(65535)),
            Reading::Saturated { was: Some(65535) }
        );
    }

    #[test]
    fn transport_counters_any_count_alone_growth_past_a_baseline() {
        let c = TRANSPORT_COUNTERS
            .iter()
            .find(|c| c.name == "local_ack_timeout_err")
            .unwrap();
        assert_eq!(c.judge(0, None), Reading::Quiet);
        let over = |count, since_baseline, reset| Reading::Over {
            count,
            since_baseline,
            reset,
        };
        assert_eq!(c.judge(3, None), over(3, false, false));
        assert_eq!(c.judge(110, Some(100)), Reading::Quiet);
        assert_eq!(c.judge(111, Some(100)), over(11, true, false));
        assert_eq!(c.judge(12, Some(100)), over(12, true, true));
        assert_eq!(c.judge(u64::MAX, None), over(u64::MAX, false, false));
    }

    #[test]
    fn durations() {
        assert_eq!(human_duration(45), "45 s");
        assert_eq!(human_duration(600), "10 min");
        assert_eq!(human_duration(7500), "2 h 5 min");
        assert_eq!(human_duration(3 * 86400 + 4 * 3600), "3 d 4 h");
    }
}
