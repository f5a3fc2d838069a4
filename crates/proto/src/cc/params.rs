//! DCQCN parameters under mlx5's names, in mlx5's units, with mlx5's
//! firmware defaults (ConnectX-5/6 `mlxconfig q`), a setter by name that
//! refuses out-of-range values, and the listing a device exposes like
//! mlx5's `cc_params` files.
//!
//! Rates: mlx5's rate files are whole Mb/s, too coarse for a 10 Mb/s
//! bottleneck (the default additive step, 5 Mb/s, is half of it). A
//! [`Rate`] is kept in kb/s; the names and the unit a value is written in
//! stay mlx5's (Mb/s), and a rate may be written with up to three decimals
//! (`"0.25"` = 250 kb/s). A whole number reads and writes exactly as on
//! mlx5.

use core::fmt;

/// A rate in kb/s (1/1000 of mlx5's Mb/s unit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(u64);

impl Rate {
    /// Zero (for `rp_max_rate`: the line rate).
    pub const ZERO: Rate = Rate(0);

    /// `kbps` kb/s.
    pub const fn from_kbps(kbps: u64) -> Rate {
        Rate(kbps)
    }

    /// `mbps` Mb/s.
    pub const fn from_mbps(mbps: u64) -> Rate {
        Rate(mbps.saturating_mul(1000))
    }

    /// The rate in kb/s.
    pub const fn kbps(self) -> u64 {
        self.0
    }

    /// The rate in bits per second.
    pub const fn bps(self) -> u64 {
        self.0.saturating_mul(1000)
    }
}

/// Mb/s with up to three decimals, as the setter reads it.
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / 1000, self.0 % 1000);
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            let s = format!("{frac:03}");
            write!(f, "{whole}.{}", s.trim_end_matches('0'))
        }
    }
}

/// Why [`Params::set`] refused a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// No parameter has this name.
    #[error("no congestion control parameter named {name:?}")]
    UnknownName {
        /// The name given.
        name: String,
    },
    /// The value is not a number in the parameter's unit, or out of range.
    #[error("{name}: {value:?} is outside {range}")]
    OutOfRange {
        /// The parameter.
        name: &'static str,
        /// The value given.
        value: String,
        /// The values it takes, with the unit.
        range: &'static str,
    },
}

/// The DCQCN parameters of a device (mlx5's `cc_params`), shared by its
/// QPs. Field names are mlx5's debugfs names; the doc of each gives the
/// unit, the mlx5 firmware default and the range [`Params::set`] accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// On every CNP the target rate becomes the current rate (bool; 0).
    pub rp_clamp_tgt_rate: bool,
    /// On a CNP the target rate becomes the current rate if the timer
    /// raised the rate since the last CNP (bool; 1).
    pub rp_clamp_tgt_rate_ati: bool,
    /// Time between rate increases without a CNP (µs; 300; 1..=1000000).
    pub rp_time_reset: u32,
    /// Bytes sent between rate increases without a CNP (bytes, 0 = off;
    /// 32767; 0..=1000000000).
    pub rp_byte_reset: u32,
    /// Increase events before fast recovery gives way to additive and
    /// hyper increase, F (0..=31; 1).
    pub rp_threshold: u32,
    /// Rate above which the QP is no longer limited (Mb/s, 0 = line rate;
    /// 0; 0..=1000000).
    pub rp_max_rate: Rate,
    /// Additive increase step (Mb/s; 5; 0..=1000000).
    pub rp_ai_rate: Rate,
    /// Hyper increase step (Mb/s; 50; 0..=1000000).
    pub rp_hai_rate: Rate,
    /// log2 of the cut's divisor: a CNP cuts the rate by α/2^gd with α in
    /// 1/1024 (11 = the paper's α/2; 11; 0..=15).
    pub rp_gd: u32,
    /// One cut leaves at least this share of the rate (%; 50; 1..=100).
    pub rp_min_dec_fac: u32,
    /// The rate never goes below this (Mb/s; 1; 0.001..=1000000).
    pub rp_min_rate: Rate,
    /// Rate set on the first CNP of an unthrottled QP, 0 = cut as usual
    /// (Mb/s; 0; 0..=1000000).
    pub rp_rate_to_set_on_first_cnp: Rate,
    /// α gain G: per α period α := α·G/1024, plus 1024−G if a CNP came
    /// (1/1024; 1019; 0..=1023).
    pub rp_dce_tcp_g: u32,
    /// α period (µs; 1; 1..=131071).
    pub rp_dce_tcp_rtt: u32,
    /// Least time between two cuts of one QP (µs; 4; 0..=1000000).
    pub rp_rate_reduce_monitor_period: u32,
    /// α on the first CNP (1/1024; 1023; 0..=1023).
    pub rp_initial_alpha_value: u32,
    /// Least time between two CNPs a QP sends (µs; 4; 0..=1000000).
    pub np_min_time_between_cnps: u32,
    /// DSCP of CNPs (0..=63; 48).
    pub np_cnp_dscp: u8,
    /// 802.1p priority of CNPs (0..=7; 6; the soft NIC sends untagged
    /// frames: kept for the listing).
    pub np_cnp_prio: u8,
    /// Reaction point enabled per priority, bit P = priority P (MLNX_OFED's
    /// `ecn/roce_rp/enable/P`; all on).
    pub rp_enable: u8,
    /// Notification point enabled per priority (`ecn/roce_np/enable/P`;
    /// all on).
    pub np_enable: u8,
}

impl Default for Params {
    fn default() -> Params {
        Params::mlx5()
    }
}

/// How a parameter's value is written and which values it takes.
#[derive(Clone, Copy)]
enum Kind {
    /// A whole number in `lo..=hi`.
    Int(u64, u64),
    /// A rate in Mb/s with up to three decimals, in `lo..=hi` kb/s.
    Rate(u64, u64),
}

/// Every parameter: name, kind, the range as the error states it. The
/// per-priority enables follow as `rp_enable_P` / `np_enable_P`.
const TABLE: [(&str, Kind, &str); 20] = [
    ("rp_clamp_tgt_rate", Kind::Int(0, 1), "0..=1"),
    ("rp_clamp_tgt_rate_ati", Kind::Int(0, 1), "0..=1"),
    ("rp_time_reset", Kind::Int(1, 1_000_000), "1..=1000000 µs"),
    (
        "rp_byte_reset",
        Kind::Int(0, 1_000_000_000),
        "0..=1000000000 bytes",
    ),
    ("rp_threshold", Kind::Int(0, 31), "0..=31"),
    (
        "rp_max_rate",
        Kind::Rate(0, 1_000_000_000),
        "0..=1000000 Mb/s (step 0.001)",
    ),
    (
        "rp_ai_rate",
        Kind::Rate(0, 1_000_000_000),
        "0..=1000000 Mb/s (step 0.001)",
    ),
    (
        "rp_hai_rate",
        Kind::Rate(0, 1_000_000_000),
        "0..=1000000 Mb/s (step 0.001)",
    ),
    ("rp_gd", Kind::Int(0, 15), "0..=15"),
    ("rp_min_dec_fac", Kind::Int(1, 100), "1..=100 %"),
    (
        "rp_min_rate",
        Kind::Rate(1, 1_000_000_000),
        "0.001..=1000000 Mb/s (step 0.001)",
    ),
    (
        "rp_rate_to_set_on_first_cnp",
        Kind::Rate(0, 1_000_000_000),
        "0..=1000000 Mb/s (step 0.001)",
    ),
    ("rp_dce_tcp_g", Kind::Int(0, 1023), "0..=1023"),
    ("rp_dce_tcp_rtt", Kind::Int(1, 131_071), "1..=131071 µs"),
    (
        "rp_rate_reduce_monitor_period",
        Kind::Int(0, 1_000_000),
        "0..=1000000 µs",
    ),
    ("rp_initial_alpha_value", Kind::Int(0, 1023), "0..=1023"),
    (
        "np_min_time_between_cnps",
        Kind::Int(0, 1_000_000),
        "0..=1000000 µs",
    ),
    ("np_cnp_dscp", Kind::Int(0, 63), "0..=63"),
    ("np_cnp_prio", Kind::Int(0, 7), "0..=7"),
    // The per-priority enables (rp_enable_P, np_enable_P) share this entry.
    ("enable", Kind::Int(0, 1), "0..=1"),
];

const ENABLES: [&str; 16] = [
    "rp_enable_0",
    "rp_enable_1",
    "rp_enable_2",
    "rp_enable_3",
    "rp_enable_4",
    "rp_enable_5",
    "rp_enable_6",
    "rp_enable_7",
    "np_enable_0",
    "np_enable_1",
    "np_enable_2",
    "np_enable_3",
    "np_enable_4",
    "np_enable_5",
    "np_enable_6",
    "np_enable_7",
];

impl Params {
    /// mlx5's firmware defaults (reference: a ConnectX-5 and a ConnectX-6
    /// Lx `mlxconfig q`), CC on for every priority.
    pub fn mlx5() -> Params {
        Params {
            rp_clamp_tgt_rate: false,
            rp_clamp_tgt_rate_ati: true,
            rp_time_reset: 300,
            rp_byte_reset: 32767,
            rp_threshold: 1,
            rp_max_rate: Rate::ZERO,
            rp_ai_rate: Rate::from_mbps(5),
            rp_hai_rate: Rate::from_mbps(50),
            rp_gd: 11,
            rp_min_dec_fac: 50,
            rp_min_rate: Rate::from_mbps(1),
            rp_rate_to_set_on_first_cnp: Rate::ZERO,
            rp_dce_tcp_g: 1019,
            rp_dce_tcp_rtt: 1,
            rp_rate_reduce_monitor_period: 4,
            rp_initial_alpha_value: 1023,
            np_min_time_between_cnps: 4,
            np_cnp_dscp: 48,
            np_cnp_prio: 6,
            rp_enable: 0xff,
            np_enable: 0xff,
        }
    }

    /// A profile for a bottleneck of `rate`, far below the 25-100 Gb/s
    /// links mlx5's defaults are tuned for (docs/soft-nic.md "Congestion
    /// control" has the reasoning and the simulated figures). The rate
    /// knobs are fractions of `rate` (additive and hyper steps 1 %, floor
    /// 5 %, first CNP 50 %); the time knobs are multiples of one packet's
    /// time at `rate` (1024-byte MTU, ~1100 bytes on the wire; 880 µs at
    /// 10 Mb/s): a CNP at most every 2, α updated every 10 with gain
    /// 1/64, a cut at most every 20 (about the loop delay once a queue
    /// holds 20 packets), an increase every 10. The target clamps on
    /// every cut, as in the DCQCN paper, and the first CNP's α is 1/4.
    /// The ceiling (`rp_max_rate`) is `rate` itself: NICs whose line
    /// rate is the bottleneck port's, as on a fabric of one speed. With
    /// the line rate 2,500 times the bottleneck, fast recovery toward the
    /// first CNP's target (the line rate) left the cut rate after one
    /// quiet `rp_time_reset`, a line-rate burst that overflowed the queue
    /// and took a second of cuts to undo.
    pub fn for_bottleneck(rate: Rate) -> Params {
        let c = rate.kbps().max(1);
        // One packet (1024 B payload, ~1100 B on the wire) at `rate`, µs.
        // Capped so that every time below stays in its range.
        let pkt = u32::try_from((1100 * 8 * 1000 / c).clamp(1, 50_000)).unwrap_or(50_000);
        Params {
            rp_clamp_tgt_rate: true,
            rp_max_rate: Rate::from_kbps(c),
            rp_time_reset: 10 * pkt,
            rp_threshold: 5,
            rp_ai_rate: Rate::from_kbps(c / 100),
            rp_hai_rate: Rate::from_kbps(c / 100),
            rp_min_rate: Rate::from_kbps((c / 20).max(1)),
            rp_rate_to_set_on_first_cnp: Rate::from_kbps((c / 2).max(1)),
            rp_dce_tcp_g: 1008,
            rp_dce_tcp_rtt: (10 * pkt).min(131_071),
            rp_rate_reduce_monitor_period: 20 * pkt,
            rp_initial_alpha_value: 256,
            np_min_time_between_cnps: 2 * pkt,
            ..Params::mlx5()
        }
    }

    /// Whether the reaction point runs for QPs of priority `prio` (0..=7;
    /// false above).
    pub fn rp_enabled(&self, prio: u8) -> bool {
        prio < 8 && self.rp_enable & (1 << prio) != 0
    }

    /// Whether the notification point runs for QPs of priority `prio`.
    pub fn np_enabled(&self, prio: u8) -> bool {
        prio < 8 && self.np_enable & (1 << prio) != 0
    }

    /// Every parameter's name, in mlx5's order, then the per-priority
    /// enables.
    pub fn names() -> impl Iterator<Item = &'static str> {
        TABLE[..TABLE.len() - 1]
            .iter()
            .map(|(n, _, _)| *n)
            .chain(ENABLES)
    }

    /// Every parameter with its value as [`Params::set`] reads it (rates
    /// in Mb/s): what a device shows as files.
    pub fn list(&self) -> Vec<(&'static str, String)> {
        Params::names()
            .map(|n| (n, self.value(n).unwrap_or_default()))
            .collect()
    }

    /// The value of parameter `name` as text, `None` for an unknown name.
    pub fn value(&self, name: &str) -> Option<String> {
        let b = |v: bool| u32::from(v).to_string();
        Some(match name {
            "rp_clamp_tgt_rate" => b(self.rp_clamp_tgt_rate),
            "rp_clamp_tgt_rate_ati" => b(self.rp_clamp_tgt_rate_ati),
            "rp_time_reset" => self.rp_time_reset.to_string(),
            "rp_byte_reset" => self.rp_byte_reset.to_string(),
            "rp_threshold" => self.rp_threshold.to_string(),
            "rp_max_rate" => self.rp_max_rate.to_string(),
            "rp_ai_rate" => self.rp_ai_rate.to_string(),
            "rp_hai_rate" => self.rp_hai_rate.to_string(),
            "rp_gd" => self.rp_gd.to_string(),
            "rp_min_dec_fac" => self.rp_min_dec_fac.to_string(),
            "rp_min_rate" => self.rp_min_rate.to_string(),
            "rp_rate_to_set_on_first_cnp" => self.rp_rate_to_set_on_first_cnp.to_string(),
            "rp_dce_tcp_g" => self.rp_dce_tcp_g.to_string(),
            "rp_dce_tcp_rtt" => self.rp_dce_tcp_rtt.to_string(),
            "rp_rate_reduce_monitor_period" => self.rp_rate_reduce_monitor_period.to_string(),
            "rp_initial_alpha_value" => self.rp_initial_alpha_value.to_string(),
            "np_min_time_between_cnps" => self.np_min_time_between_cnps.to_string(),
            "np_cnp_dscp" => self.np_cnp_dscp.to_string(),
            "np_cnp_prio" => self.np_cnp_prio.to_string(),
            _ => {
                let (rp, prio) = enable_name(name)?;
                let bits = if rp { self.rp_enable } else { self.np_enable };
                b(bits & (1 << prio) != 0)
            }
        })
    }

    /// Sets parameter `name` from text in its unit (rates in Mb/s, up to
    /// three decimals; surrounding whitespace and one trailing newline are
    /// ignored, as when a file is written with `echo`).
    ///
    /// # Errors
    /// [`ParamError::UnknownName`] for a name [`Params::names`] does not
    /// list; [`ParamError::OutOfRange`] (naming the parameter, the value
    /// and the range) for a value that is not a number of the parameter's
    /// unit or lies outside its range. `self` is unchanged on error.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ParamError> {
        let enable = enable_name(name);
        let (key, table) = match enable {
            Some(_) => ("enable", &TABLE[TABLE.len() - 1..]),
            None => (name, &TABLE[..TABLE.len() - 1]),
        };
        let Some(&(pname, kind, range)) = table.iter().find(|(n, _, _)| *n == key) else {
            return Err(ParamError::UnknownName {
                name: name.to_string(),
            });
        };
        let bad = || ParamError::OutOfRange {
            name: ENABLES
                .iter()
                .find(|e| **e == name)
                .copied()
                .unwrap_or(pname),
            value: value.to_string(),
            range,
        };
        let text = value.trim();
        let v = match kind {
            Kind::Int(lo, hi) => text
                .parse::<u64>()
                .ok()
                .filter(|v| (lo..=hi).contains(v))
                .ok_or_else(bad)?,
            Kind::Rate(lo, hi) => parse_mbps(text)
                .filter(|v| (lo..=hi).contains(v))
                .ok_or_else(bad)?,
        };
        // In range of a field no wider than u32 (the table's bounds).
        let u = u32::try_from(v).map_err(|_| bad())?;
        let r = Rate::from_kbps(v);
        match name {
            "rp_clamp_tgt_rate" => self.rp_clamp_tgt_rate = v == 1,
            "rp_clamp_tgt_rate_ati" => self.rp_clamp_tgt_rate_ati = v == 1,
            "rp_time_reset" => self.rp_time_reset = u,
            "rp_byte_reset" => self.rp_byte_reset = u,
            "rp_threshold" => self.rp_threshold = u,
            "rp_max_rate" => self.rp_max_rate = r,
            "rp_ai_rate" => self.rp_ai_rate = r,
            "rp_hai_rate" => self.rp_hai_rate = r,
            "rp_gd" => self.rp_gd = u,
            "rp_min_dec_fac" => self.rp_min_dec_fac = u,
            "rp_min_rate" => self.rp_min_rate = r,
            "rp_rate_to_set_on_first_cnp" => self.rp_rate_to_set_on_first_cnp = r,
            "rp_dce_tcp_g" => self.rp_dce_tcp_g = u,
            "rp_dce_tcp_rtt" => self.rp_dce_tcp_rtt = u,
            "rp_rate_reduce_monitor_period" => self.rp_rate_reduce_monitor_period = u,
            "rp_initial_alpha_value" => self.rp_initial_alpha_value = u,
            "np_min_time_between_cnps" => self.np_min_time_between_cnps = u,
            "np_cnp_dscp" => self.np_cnp_dscp = u as u8,
            "np_cnp_prio" => self.np_cnp_prio = u as u8,
            _ => {
                let Some((rp, prio)) = enable else {
                    return Err(bad());
                };
                let bits = if rp {
                    &mut self.rp_enable
                } else {
                    &mut self.np_enable
                };
                if v == 1 {
                    *bits |= 1 << prio;
                } else {
                    *bits &= !(1 << prio);
                }
            }
        }
        Ok(())
    }
}

/// `rp_enable_P` → (true, P), `np_enable_P` → (false, P).
fn enable_name(name: &str) -> Option<(bool, u8)> {
    let (rp, rest) = if let Some(r) = name.strip_prefix("rp_enable_") {
        (true, r)
    } else {
        (false, name.strip_prefix("np_enable_")?)
    };
    match rest.as_bytes() {
        [d @ b'0'..=b'7'] => Some((rp, d - b'0')),
        _ => None,
    }
}

/// `"12"` → 12000 kb/s, `"0.25"` → 250, at most three decimals.
fn parse_mbps(text: &str) -> Option<u64> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() || frac.len() > 3 {
        return None;
    }
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(frac) || (text.contains('.') && frac.is_empty()) {
        return None;
    }
    let w: u64 = whole.parse().ok()?;
    let f: u64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<3}").parse().ok()?
    };
    w.checked_mul(1000)?.checked_add(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_mlx5_firmware_defaults() {
        let p = Params::default();
        let want = [
            ("rp_clamp_tgt_rate", "0"),
            ("rp_clamp_tgt_rate_ati", "1"),
            ("rp_time_reset", "300"),
            ("rp_byte_reset", "32767"),
            ("rp_threshold", "1"),
            ("rp_max_rate", "0"),
            ("rp_ai_rate", "5"),
            ("rp_hai_rate", "50"),
            ("rp_gd", "11"),
            ("rp_min_dec_fac", "50"),
            ("rp_min_rate", "1"),
            ("rp_rate_to_set_on_first_cnp", "0"),
            ("rp_dce_tcp_g", "1019"),
            ("rp_dce_tcp_rtt", "1"),
            ("rp_rate_reduce_monitor_period", "4"),
            ("rp_initial_alpha_value", "1023"),
            ("np_min_time_between_cnps", "4"),
            ("np_cnp_dscp", "48"),
            ("np_cnp_prio", "6"),
        ];
        let list = p.list();
        assert_eq!(list.len(), want.len() + 16);
        for ((n, v), (wn, wv)) in list.iter().zip(want) {
            assert_eq!((*n, v.as_str()), (wn, wv));
        }
        assert!(list[want.len()..].iter().all(|(_, v)| v == "1"));
        assert!((0..8).all(|p0| p.rp_enabled(p0) && p.np_enabled(p0)));
        assert!(!p.rp_enabled(8));
    }

    #[test]
    fn every_listed_value_sets_back_to_itself() {
        let mut p = Params::mlx5();
        p.rp_ai_rate = Rate::from_kbps(250);
        let before = p.clone();
        for (n, v) in before.list() {
            p.set(n, &v).unwrap();
        }
        assert_eq!(p, before);
    }

    #[test]
    fn rates_take_three_decimals_of_mbps() {
        let mut p = Params::mlx5();
        p.set("rp_ai_rate", "0.25\n").unwrap();
        assert_eq!(p.rp_ai_rate, Rate::from_kbps(250));
        assert_eq!(p.value("rp_ai_rate").unwrap(), "0.25");
        p.set("rp_hai_rate", "12").unwrap();
        assert_eq!(p.rp_hai_rate.kbps(), 12_000);
        for bad in ["0.0001", "1.", ".5", "-1", "1e3", "", "abc", "1000001"] {
            assert!(p.set("rp_ai_rate", bad).is_err(), "{bad:?}");
        }
        assert_eq!(p.rp_hai_rate.kbps(), 12_000);
    }

    #[test]
    fn out_of_range_names_parameter_value_and_range() {
        let mut p = Params::mlx5();
        let e = p.set("rp_dce_tcp_g", "1024").unwrap_err();
        assert_eq!(e.to_string(), "rp_dce_tcp_g: \"1024\" is outside 0..=1023");
        let e = p.set("rp_min_rate", "0").unwrap_err();
        assert!(e.to_string().contains("rp_min_rate") && e.to_string().contains("0.001"));
        let e = p.set("np_enable_3", "2").unwrap_err();
        assert!(e.to_string().starts_with("np_enable_3: \"2\""), "{e}");
        assert_eq!(
            p.set("rp_nonsense", "1"),
            Err(ParamError::UnknownName {
                name: "rp_nonsense".into()
            })
        );
        for name in ["enable", "rp_enable_8", "rp_enable_", "np_enable_01"] {
            let e = p.set(name, "1").unwrap_err();
            assert!(matches!(e, ParamError::UnknownName { .. }), "{name}: {e}");
        }
        assert_eq!(p, Params::mlx5(), "unchanged after errors");
    }

    #[test]
    fn for_bottleneck_scales_rates_by_rate_and_times_by_packet_time() {
        let p = Params::for_bottleneck(Rate::from_mbps(10));
        assert_eq!(p.rp_ai_rate, Rate::from_kbps(100));
        assert_eq!(p.rp_min_rate, Rate::from_kbps(500));
        assert_eq!(p.rp_rate_to_set_on_first_cnp, Rate::from_mbps(5));
        assert_eq!(p.rp_max_rate, Rate::from_mbps(10));
        assert_eq!((p.np_min_time_between_cnps, p.rp_time_reset), (1760, 8800));
        let q = Params::for_bottleneck(Rate::from_mbps(100));
        assert_eq!(q.rp_ai_rate, Rate::from_mbps(1));
        assert_eq!(
            q.rp_rate_reduce_monitor_period * 10,
            p.rp_rate_reduce_monitor_period
        );
        // Every value is one the setter accepts.
        let mut r = Params::mlx5();
        for (n, v) in Params::for_bottleneck(Rate::from_kbps(1)).list() {
            r.set(n, &v).unwrap();
        }
    }

    #[test]
    fn per_priority_enables_are_bits() {
        let mut p = Params::mlx5();
        p.set("rp_enable_3", "0").unwrap();
        p.set("np_enable_0", "0").unwrap();
        assert!(!p.rp_enabled(3) && p.rp_enabled(2) && p.np_enabled(3) && !p.np_enabled(0));
        assert_eq!(p.value("rp_enable_3").unwrap(), "0");
        p.set("rp_enable_3", "1").unwrap();
        assert_eq!(p.rp_enable, 0xff);
    }
}
