//! `rdmakit doctor`: run every check and report.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use rdmakit_doctor::checks::Config;
use rdmakit_doctor::codes::{Code, Severity};
use rdmakit_doctor::render::{self, HumanOptions};
use rdmakit_doctor::report::Report;
use rdmakit_host::collect::collect;

use super::{Opened, SourceArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,
    /// Print the report as JSON (schema rdmakit.doctor/v1, see docs/json-schema.md).
    #[arg(long)]
    json: bool,
    /// Show every evidence line, every next command and every check's status.
    #[arg(short, long)]
    verbose: bool,
    /// Exit 1 when a finding at or above this severity is found: error, warning, info, never.
    #[arg(long, value_name = "LEVEL", default_value = "error")]
    fail_on: String,
    /// List the checks and the codes they emit, then exit.
    #[arg(long)]
    list_checks: bool,
    /// The port rate the fabric should run at, in Gb/s (e.g. 100, 200, 400).
    #[arg(long, value_name = "GBPS")]
    expect_rate: Option<f64>,
    /// The netdev RDMA traffic should use (for the RoCE GID index recommendation).
    #[arg(long, value_name = "IF")]
    netdev: Option<String>,
    /// Warn when RLIMIT_MEMLOCK is below this many bytes (suffixes K, M, G).
    #[arg(long, value_name = "BYTES", default_value = "64M")]
    memlock_min: String,
    /// Override a code's severity, e.g. --severity RDK-H008=warning (repeatable).
    #[arg(long, value_name = "CODE=LEVEL")]
    severity: Vec<String>,
}

/// Parses "64M", "8388608", "1G", "512K".
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&s[..s.len() - 1], 1 << 20),
        Some('g' | 'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num
        .parse()
        .with_context(|| format!("{s:?} is not a size (e.g. 64M, 8388608)"))?;
    n.checked_mul(mult).context("size too large")
}

/// Validated settings (the second step of argument parsing).
struct Settings {
    cfg: Config,
    fail_on: Option<Severity>,
}

fn settings(a: &Args) -> anyhow::Result<Settings> {
    let mut cfg = Config {
        expect_rate_gbps: a.expect_rate,
        netdev: a.netdev.clone(),
        memlock_warn: parse_size(&a.memlock_min).context("--memlock-min")?,
        ..Config::default()
    };
    if let Some(r) = a.expect_rate {
        if !(r.is_finite() && r > 0.0) {
            bail!("--expect-rate {r}: must be a positive number of Gb/s");
        }
    }
    for o in &a.severity {
        let Some((code, level)) = o.split_once('=') else {
            bail!("--severity {o:?}: expected CODE=LEVEL, e.g. RDK-H008=warning");
        };
        let c = Code::lookup(code).with_context(|| {
            format!("--severity: unknown code {code:?} (rdmakit doctor --list-checks)")
        })?;
        let l = Severity::parse(level).with_context(|| {
            format!("--severity: unknown level {level:?} (info, warning, error)")
        })?;
        cfg.overrides.insert(c, l);
    }
    let fail_on = match a.fail_on.to_ascii_lowercase().as_str() {
        "never" | "none" => None,
        other => Some(Severity::parse(other).with_context(|| {
            format!("--fail-on {other:?}: expected error, warning, info or never")
        })?),
    };
    Ok(Settings { cfg, fail_on })
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if a.list_checks {
        anstream::stdout().write_all(render::list_checks().as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let s = settings(&a)?;
    let (opened, opts) = a.source.open()?;
    let facts = collect(opened.source(), &opts);
    let from_dir = a
        .source
        .from
        .as_deref()
        .is_some_and(|p| std::path::Path::new(p).is_dir());
    if let Opened::Bundle(b, _) = &opened {
        // A capture directory holds only what it captured; a bundle should hold all.
        if b.misses() > 0 && !from_dir {
            eprintln!(
                "rdmakit: note: the bundle had no answer for {} questions (recorded by another \
                 rdmakit version or a partial capture); those facts count as absent",
                b.misses()
            );
        }
    }
    let tool = format!("rdmakit {}", env!("CARGO_PKG_VERSION"));
    let report = Report::build(&facts, &s.cfg, &tool, opened.label());
    let mut out = anstream::stdout();
    if a.json {
        writeln!(out, "{}", render::json(&report))?;
    } else {
        let opts = HumanOptions {
            verbose: a.verbose,
            ..HumanOptions::default()
        };
        out.write_all(render::human(&report, opts).as_bytes())?;
    }
    let failed = s.fail_on.is_some_and(|l| report.fails(l));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
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
}
