//! The commands that open devices through the chosen verbs provider
//! (`--provider`, `RDMAKIT_PROVIDER`): `rdmakit devinfo`, ibv_devinfo's output
//! (`rdmakit_verbs::devinfo`; with `--from` or `--root`, what the source
//! recorded: `rdmakit_res::devinfo`), and `rdmakit verbs-test`, the verbs
//! crate's conformance suite on one device (`rdmakit_verbs::ibverbs::suite`).

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use rdmakit_res::devinfo::recorded;
use rdmakit_verbs::devinfo::{output, query_all};
use rdmakit_verbs::ibverbs::suite;
use rdmakit_vocab::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this device (default: every device).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    dev: Option<String>,
    /// Only this port of the device(s).
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    port: Option<u8>,
    /// Print every attribute (ibv_devinfo -v).
    #[arg(short, long)]
    verbose: bool,
    /// Print JSON with the same fields.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    source: super::ReplayArgs,
}

impl Args {
    /// It replays a source (--from, --root) instead of opening devices.
    pub fn replays(&self) -> bool {
        !self.source.live()
    }
}

pub fn devinfo(a: Args, provider: rdmakit_verbs::ProviderSetting) -> anyhow::Result<Exit> {
    let mut out = std::io::stdout().lock();
    if a.replays() {
        let (opened, opts) = a.source.open(None, None)?;
        let facts = rdmakit_host::collect::collect(opened.source(), &opts);
        let (dev, port) = (a.dev.as_deref(), a.port);
        let r =
            recorded(&facts, opened.label(), dev, port, a.verbose).map_err(anyhow::Error::msg)?;
        eprint!("{}", r.stderr(opened.label()));
        out.write_all(r.stdout(a.json).as_bytes())?;
        return Ok(r.exit());
    }
    let provider = provider.context("listing RDMA devices")?;
    let infos = query_all(provider, a.dev.as_deref(), a.port).map_err(anyhow::Error::msg)?;
    out.write_all(output(&infos, a.verbose, a.json).as_bytes())?;
    Ok(Exit::Ok)
}

#[derive(clap::Args, Debug)]
pub struct VerbsTestArgs {
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

pub fn verbs_test(
    a: VerbsTestArgs,
    choice: rdmakit_verbs::ProviderSetting,
) -> anyhow::Result<Exit> {
    let choice = choice.context("choosing a verbs provider")?;
    let timeout = Duration::from_secs(a.timeout.max(1));
    let r = suite::run_device(choice, a.dev.as_deref(), timeout, a.filter.as_deref())
        .map_err(anyhow::Error::msg)?;
    print!("{}", r.output(a.json));
    Ok(r.exit())
}
