//! `rdmakit verbs-test`: the verbs crate's provider-independent suite
//! (loopback RC/UC/UD/SRQ/channel/inline/error cases with data checks) on
//! one device of the chosen provider (`--provider`, `RDMAKIT_PROVIDER`):
//! two contexts on the same device talk to each other.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};
use rdmakit_verbs::ibverbs::suite;
use rdmakit_vocab::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Device (default: the first one the provider lists).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    dev: Option<String>,
    /// Only cases whose name contains this (e.g. rc, ud, srq).
    #[arg(long, value_name = "TEXT")]
    filter: Option<String>,
    /// Seconds to wait for any one completion.
    #[arg(long, value_name = "SECS", default_value_t = 20)]
    timeout: u64,
    /// One JSON object instead of lines.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args, choice: super::ProviderSetting) -> anyhow::Result<ExitCode> {
    let choice = choice.context("choosing a verbs provider")?;
    let provider = rdmakit_verbs::default_provider(choice).context("choosing a verbs provider")?;
    let dev = match a.dev {
        Some(d) => d,
        None => match provider.device_names().context("listing devices")?.first() {
            Some(d) => d.clone(),
            None => bail!("the {} provider lists no device", provider.kind()),
        },
    };
    let ca = rdmakit_verbs::open_device(choice, &dev).with_context(|| format!("opening {dev}"))?;
    let cb =
        rdmakit_verbs::open_device(choice, &dev).with_context(|| format!("opening {dev} again"))?;
    let kind = if ca.soft().is_some() {
        "soft"
    } else {
        "ibverbs"
    };
    let results = suite::run(
        &ca,
        &cb,
        Duration::from_secs(a.timeout.max(1)),
        a.filter.as_deref(),
    );
    if results.is_empty() {
        bail!(
            "--filter {}: matches no case; the cases: {}",
            a.filter.as_deref().unwrap_or_default(),
            suite::CASES.join(", ")
        );
    }
    let failed = results.iter().filter(|r| !r.passed).count();
    if a.json {
        println!("{}", suite::json(&dev, kind, &results));
    } else {
        print!("{}", suite::text(&dev, kind, &results));
    }
    Ok(if failed == 0 {
        Exit::Ok.into()
    } else {
        Exit::Found.into()
    })
}
