//! `rdmakit devinfo`: device and port attributes, line-compatible with
//! rdma-core's `ibv_devinfo`, of the chosen provider's devices
//! (`rdmakit_verbs::devinfo`); with `--from BUNDLE` (or `--root DIR`) the
//! attributes the source recorded instead, naming the ones it did not
//! (`rdmakit_res::devinfo`).

use std::io::Write as _;

use anyhow::Context as _;
use rdmakit_res::devinfo::recorded;
use rdmakit_verbs::devinfo::{output, query_all};
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

pub fn run(a: Args, provider: super::ProviderSetting) -> anyhow::Result<Exit> {
    let mut out = std::io::stdout().lock();
    if a.replays() {
        let (opened, opts) = a.source.open(None, None)?;
        let facts = rdmakit_host::collect::collect(opened.source(), &opts);
        let (dev, port) = (a.dev.as_deref(), a.port);
        let r =
            recorded(&facts, opened.label(), dev, port, a.verbose).map_err(anyhow::Error::msg)?;
        for line in r.stderr(opened.label()) {
            eprintln!("rdmakit: {line}");
        }
        out.write_all(r.stdout(a.json).as_bytes())?;
        return Ok(r.exit());
    }
    let provider = provider.context("listing RDMA devices")?;
    let infos = query_all(provider, a.dev.as_deref(), a.port).map_err(anyhow::Error::msg)?;
    out.write_all(output(&infos, a.verbose, a.json).as_bytes())?;
    Ok(Exit::Ok)
}
