//! From the command line's options and collected facts to one report: the
//! options validated into [`Settings`], then [`assemble`] — the checks, the
//! `--baseline` note, and the active probes asked for (the soft NIC, or the
//! host's devices through rdma-core's libibverbs).
//!
//! The caller (the CLI, an edge) reads the environment and passes what it
//! found: the soft NIC's provider and names, the libibverbs to load.

use rdmakit_host::model::HostFacts;
use rdmakit_host::parse::proc::Limit;
use rdmakit_verbs::ibverbs::IbverbsProvider;
use rdmakit_verbs::{Context, SoftProvider};

use crate::checks::Config;
use crate::codes::{Code, Severity};
use crate::probes::{self, ProbeConfig, ProbeReport, SOFT_LABEL};
use crate::report::Report;

/// The doctor's options as given on the command line, before validation.
#[derive(Clone, Debug)]
pub struct RawOptions<'a> {
    /// `--expect-rate`, Gb/s.
    pub expect_rate: Option<f64>,
    /// `--netdev`.
    pub netdev: Option<&'a str>,
    /// `--memlock-min`, a size such as `64M`.
    pub memlock_min: &'a str,
    /// `--usage-warn`, percent.
    pub usage_warn: f64,
    /// `--usage-error`, percent.
    pub usage_error: f64,
    /// `--cnp-storm-pct`, percent (RDK-N014).
    pub cnp_storm_pct: f64,
    /// `--severity CODE=LEVEL`, each.
    pub severity: &'a [String],
    /// `--fail-on`: error, warning, info or never.
    pub fail_on: &'a str,
}

/// Validated settings: the checks' configuration and the exit threshold.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The checks' configuration.
    pub cfg: Config,
    /// Exit 1 on a finding at or above this severity (`None`: never).
    pub fail_on: Option<Severity>,
}

impl Settings {
    /// Validates `raw`.
    ///
    /// # Errors
    /// A message naming the flag, as the CLI prints it.
    pub fn parse(raw: &RawOptions) -> Result<Settings, String> {
        let mut cfg = Config {
            expect_rate_gbps: raw.expect_rate,
            netdev: raw.netdev.map(str::to_string),
            memlock_warn: parse_size(raw.memlock_min).map_err(|e| format!("--memlock-min {e}"))?,
            usage_warn_pct: raw.usage_warn,
            usage_error_pct: raw.usage_error,
            cnp_storm_pct: raw.cnp_storm_pct,
            ..Config::default()
        };
        let c = raw.cnp_storm_pct;
        if !(c.is_finite() && c > 0.0 && c <= 100.0) {
            return Err(format!(
                "--cnp-storm-pct {c}: must be a percent above 0 and at most 100"
            ));
        }
        let (warn, error) = (raw.usage_warn, raw.usage_error);
        if !(warn > 0.0 && warn <= error && error <= 100.0) {
            return Err(format!(
                "--usage-warn {warn} / --usage-error {error}: need 0 < warn <= error <= 100"
            ));
        }
        if let Some(r) = raw.expect_rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(format!(
                    "--expect-rate {r}: must be a positive number of Gb/s"
                ));
            }
        }
        for o in raw.severity {
            let Some((code, level)) = o.split_once('=') else {
                return Err(format!(
                    "--severity {o}: expected CODE=LEVEL, e.g. RDK-H008=warning"
                ));
            };
            let c = Code::lookup(code).ok_or_else(|| {
                format!("--severity {o}: unknown code {code} (rdmakit doctor --list-checks)")
            })?;
            let l = Severity::parse(level).ok_or_else(|| {
                format!("--severity {o}: unknown level {level} (info, warning, error)")
            })?;
            cfg.overrides.insert(c, l);
        }
        let fail_on = match raw.fail_on.to_ascii_lowercase().as_str() {
            "never" | "none" => None,
            other => Some(Severity::parse(other).ok_or_else(|| {
                format!("--fail-on {other}: expected error, warning, info or never")
            })?),
        };
        Ok(Settings { cfg, fail_on })
    }
}

/// Parses "64M", "8388608", "1G", "512K".
///
/// # Errors
/// Not a number with an optional K/M/G suffix, or more than `u64` holds.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&s[..s.len() - 1], 1 << 20),
        Some('g' | 'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s}: not a size in bytes (e.g. 64M, 8388608)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s}: larger than 16 EiB"))
}

/// The probe configuration for this host: its RLIMIT_MEMLOCK (none for
/// root, whose CAP_IPC_LOCK ignores it).
pub fn probe_config(facts: &HostFacts) -> ProbeConfig {
    let root = facts.identity.as_ref().is_some_and(|i| i.euid == 0);
    let memlock_limit = match facts.memlock.effective() {
        Some((Limit::Bytes(b), _)) if !root => Some(b),
        _ => None,
    };
    ProbeConfig {
        memlock_limit,
        ..ProbeConfig::default()
    }
}

/// What [`assemble`] checks and probes, and what the caller's edge read.
pub struct Assembly<'a> {
    /// `--device`: only this soft NIC, its checklist being its probes.
    pub device: Option<&'a str>,
    /// `--probe`.
    pub probe: bool,
    /// `--no-probe`.
    pub no_probe: bool,
    /// Probe by default on a live host without RDMA devices (the soft NIC).
    pub auto_probe: bool,
    /// The facts are the live host's (not a bundle or another root).
    pub live: bool,
    /// `--from` or `--root`, naming the inventory.
    pub input: Option<&'a str>,
    /// Where the facts came from (`Opened::label`).
    pub source_label: &'a str,
    /// The tool, e.g. "rdmakit 0.1.0".
    pub tool: &'a str,
    /// The soft NIC's provider as the environment configures it.
    pub soft: &'a rdmakit_verbs::Result<SoftProvider>,
    /// The soft NIC's device names.
    pub soft_names: &'a [String],
    /// The libibverbs to load for host devices (a path or a name).
    pub library: &'a str,
}

/// Opens soft NIC `name` and runs the probes on it.
fn probe_soft(
    soft: &rdmakit_verbs::Result<SoftProvider>,
    name: &str,
    cfg: &ProbeConfig,
) -> Result<ProbeReport, String> {
    let ctx = soft
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|p| Context::open(p, name))
        .map_err(|e| format!("opening {name}: {e}"))?;
    Ok(probes::run(&ctx, cfg))
}

/// The active probes on the host's own devices, through rdma-core's
/// libibverbs (the rdma-core provider): one probe report per device that
/// opens; a library that does not load is RDK-L001, a device that does not
/// open a note (the device and provider rules say why).
fn probe_host(
    mut report: Report,
    names: &[String],
    library: &str,
    cfg: &ProbeConfig,
    dcfg: &Config,
) -> Report {
    let p = match IbverbsProvider::load_from(library) {
        Ok(p) => p,
        Err(e) => return probes::with_library_load_error(report, library, &e.to_string(), dcfg),
    };
    for name in names {
        match Context::open(&p, name) {
            Ok(ctx) => report = report.with_probes(probes::run(&ctx, cfg), dcfg),
            Err(e) => report.notes.push(format!(
                "--probe: {name} could not be opened through {}: {e}",
                p.library().path()
            )),
        }
    }
    report
}

/// The report over `facts`: the checks, plus active probes when asked
/// (`--probe`), or — when `auto_probe` — on a live host without RDMA devices
/// (the soft NIC). `phase` names the probes under way.
///
/// # Errors
/// `--device` naming no soft NIC, or with `--no-probe`; the soft NIC not
/// opening for `--device`.
pub fn assemble(
    facts: &HostFacts,
    cfg: &Config,
    a: &Assembly,
    phase: &dyn Fn(String),
) -> Result<Report, String> {
    let soft_names = a.soft_names;
    if let Some(dev) = a.device {
        if !soft_names.iter().any(|n| n == dev) {
            let host: Vec<&str> = facts.devices.iter().map(|d| d.name.as_str()).collect();
            return Err(format!(
                "--device {dev}: not a device rdmakit can check alone (soft NIC: {}; host \
                 devices {} are checked together by plain `rdmakit doctor`)",
                soft_names.join(", "),
                if host.is_empty() {
                    "(none here)".to_string()
                } else {
                    host.join(", ")
                }
            ));
        }
        if a.no_probe {
            return Err(format!(
                "--device {dev}: the soft NIC's checklist is its active probes; drop --no-probe"
            ));
        }
        phase(format!("active probes on {dev}"));
        let p = probe_soft(a.soft, dev, &probe_config(facts))?;
        let kernel = facts.kernel.release.text().map(str::to_string);
        let r = Report::for_probed_device(p, cfg, a.tool, kernel);
        return Ok(probes::with_soft_registry(
            r,
            &probes::soft_registry(dev),
            cfg,
        ));
    }
    let mut report = Report::build(facts, cfg, a.tool, a.source_label);
    if let (Some(input), Some(inv)) = (a.input, report.inventory.as_mut()) {
        inv.name_from_input(input);
    }
    if let Some(b) = &cfg.baseline {
        let shared = facts
            .devices
            .iter()
            .flat_map(|d| d.ports.iter().map(move |p| format!("{}/{}", d.name, p.num)))
            .filter(|k| b.ports.contains_key(k))
            .count();
        report.notes.push(if shared == 0 {
            format!(
                "--baseline {}: no port of this host is in it; counters were judged by \
                 their totals",
                b.describe()
            )
        } else {
            format!(
                "port counters judged by their growth since the baseline {} ({shared} \
                 port(s) in both)",
                b.describe()
            )
        });
    }
    let no_host_device = facts.devices.is_empty();
    let want = !a.no_probe && (a.probe || (a.auto_probe && a.live && no_host_device));
    if want && !a.live {
        report
            .notes
            .push("--probe: active probes need the live host; not run on a replay".into());
    } else if want && !no_host_device {
        let names: Vec<String> = facts.devices.iter().map(|d| d.name.clone()).collect();
        phase(format!("active probes on {}", names.join(", ")));
        report = probe_host(report, &names, a.library, &probe_config(facts), cfg);
    } else if want {
        match soft_names.first() {
            Some(name) => {
                phase(format!("active probes on {name}"));
                match probe_soft(a.soft, name, &probe_config(facts)) {
                    Ok(p) => {
                        report = report.with_probes(p, cfg);
                        report =
                            probes::with_soft_registry(report, &probes::soft_registry(name), cfg);
                    }
                    Err(e) => report
                        .notes
                        .push(format!("the {SOFT_LABEL} could not be probed: {e}")),
                }
            }
            None => report.notes.push("no soft NIC to probe".into()),
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("8388608").unwrap(), 8388608);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999999G").is_err());
    }

    fn raw<'a>(severity: &'a [String], fail_on: &'a str) -> RawOptions<'a> {
        RawOptions {
            expect_rate: None,
            netdev: None,
            memlock_min: "64M",
            usage_warn: 80.0,
            usage_error: 95.0,
            cnp_storm_pct: 1.0,
            severity,
            fail_on,
        }
    }

    #[test]
    fn settings_validate_each_flag_and_name_it() {
        let s = Settings::parse(&raw(&["RDK-H008=warning".into()], "never")).unwrap();
        assert_eq!(s.fail_on, None);
        assert_eq!(s.cfg.memlock_warn, 64 << 20);
        assert_eq!(s.cfg.overrides.len(), 1);
        let s = Settings::parse(&raw(&[], "Warning")).unwrap();
        assert_eq!(s.fail_on, Some(Severity::Warning));
        let e = Settings::parse(&raw(&["RDK-H008".into()], "error")).unwrap_err();
        assert!(
            e.starts_with("--severity RDK-H008: expected CODE=LEVEL"),
            "{e}"
        );
        let e = Settings::parse(&raw(&["RDK-Z999=info".into()], "error")).unwrap_err();
        assert!(
            e.starts_with("--severity RDK-Z999=info: unknown code RDK-Z999 "),
            "{e}"
        );
        let e = Settings::parse(&raw(&[], "loud")).unwrap_err();
        assert!(e.starts_with("--fail-on loud:"), "{e}");
        let mut r = raw(&[], "error");
        r.usage_warn = 99.0;
        r.usage_error = 90.0;
        let e = Settings::parse(&r).unwrap_err();
        assert_eq!(
            e,
            "--usage-warn 99 / --usage-error 90: need 0 < warn <= error <= 100"
        );
        for bad in [0.0, -1.0, 100.5, f64::NAN, f64::INFINITY] {
            r = raw(&[], "error");
            r.cnp_storm_pct = bad;
            let e = Settings::parse(&r).unwrap_err();
            assert!(e.starts_with("--cnp-storm-pct "), "{e}");
        }
        r = raw(&[], "error");
        r.cnp_storm_pct = 5.0;
        assert_eq!(Settings::parse(&r).unwrap().cfg.cnp_storm_pct, 5.0);
        r = raw(&[], "error");
        r.memlock_min = "lots";
        let e = Settings::parse(&r).unwrap_err();
        assert!(
            e == "--memlock-min lots: not a size in bytes (e.g. 64M, 8388608)",
            "{e}"
        );
        r = raw(&[], "error");
        r.expect_rate = Some(-1.0);
        assert_eq!(
            Settings::parse(&r).unwrap_err(),
            "--expect-rate -1: must be a positive number of Gb/s"
        );
    }
}
