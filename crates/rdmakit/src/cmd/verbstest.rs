//! `rdmakit verbs-test`: the verbs crate's provider-independent suite
//! (loopback RC/UC/UD/SRQ/channel/inline/error cases with data checks) on
//! one device of the chosen provider (`--provider`, `RDMAKIT_PROVIDER`):
//! two contexts on the same device talk to each other.

use std::time::Duration;

use anyhow::Context as _;
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

pub fn run(a: Args, choice: super::ProviderSetting) -> anyhow::Result<Exit> {
    let choice = choice.context("choosing a verbs provider")?;
    let timeout = Duration::from_secs(a.timeout.max(1));
    let r = suite::run_device(choice, a.dev.as_deref(), timeout, a.filter.as_deref())
        .map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", suite::json(&r.device, r.kind, &r.results));
    } else {
        print!("{}", suite::text(&r.device, r.kind, &r.results));
    }
    Ok(if r.results.iter().all(|c| c.passed) {
        Exit::Ok
    } else {
        Exit::Found
    })
}
