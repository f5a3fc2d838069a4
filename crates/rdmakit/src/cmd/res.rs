//! `rdmakit dev`, `link`, `stat [qp]`, `res [KIND]` and `monitor`: the
//! `rdma`-style views of every device (`rdmakit_res::view`, the kernel's and,
//! for `res` on the live host, the soft NIC's objects) and its events
//! (`rdmakit_res::kernel::monitor`); here, loading the facts and printing.

use std::io::Write as _;

use rdmakit_host::netlink;
use rdmakit_res::kernel::{self, Said};
use rdmakit_res::view::View;
use rdmakit_verbs::SoftProvider;
use rdmakit_vocab::exit::Exit;

use super::ReplayArgs;

#[derive(clap::Args, Debug)]
pub struct DevArgs {
    /// Only this device.
    #[arg(value_name = "DEV")]
    dev: Option<String>,
    #[command(flatten)]
    out: RowsArgs,
}

#[derive(clap::Args, Debug)]
pub struct LinkArgs {
    /// Only this device, or this port (DEV/PORT).
    #[arg(value_name = "DEV[/PORT]")]
    link: Option<String>,
    #[command(flatten)]
    out: RowsArgs,
}

#[derive(clap::Args, Debug)]
pub struct StatArgs {
    /// "qp" for QP counters; without it, the port counters.
    #[arg(value_name = "OBJECT")]
    object: Option<String>,
    /// Only this device or port (DEV or DEV/PORT).
    #[arg(value_name = "DEV[/PORT]")]
    link: Option<String>,
    #[command(flatten)]
    out: RowsArgs,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// qp, cq, mr, pd, ctx, srq or cm_id; without it, the per-device summary.
    #[arg(value_name = "KIND")]
    kind: Option<String>,
    /// Only this device.
    #[arg(value_name = "DEV")]
    dev: Option<String>,
    /// Only the objects this process owns (`rdma res show qp pid N`); without a KIND,
    /// its count of each kind per device.
    #[arg(long, value_name = "PID")]
    pid: Option<u32>,
    #[command(flatten)]
    out: RowsArgs,
}

/// What `dev`, `link`, `stat` and `res` share: the output form and where the
/// facts come from.
#[derive(clap::Args, Debug)]
pub(crate) struct RowsArgs {
    /// JSON with the keys `rdma -j` prints for the same command (`res` adds
    /// "owner-state").
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub source: ReplayArgs,
}

pub fn dev(a: DevArgs) -> anyhow::Result<Exit> {
    show(View::dev(a.dev.as_deref()), &a.out)
}

pub fn link(a: LinkArgs) -> anyhow::Result<Exit> {
    show(View::link(a.link.as_deref()), &a.out)
}

pub fn stat(a: StatArgs) -> anyhow::Result<Exit> {
    show(View::stat(a.object.as_deref(), a.link.clone()), &a.out)
}

pub fn run(a: Args) -> anyhow::Result<Exit> {
    show(View::res(a.kind.as_deref(), a.dev.clone(), a.pid), &a.out)
}

/// Loads the source's netlink facts (a source without them still loads: the
/// views say so), prints what the reader should know and what could not be
/// read (stderr), then the rows; exit 0, or 3 when something was missing.
fn show(view: Result<View, String>, out: &RowsArgs) -> anyhow::Result<Exit> {
    let view = view.map_err(anyhow::Error::msg)?;
    let (opened, _) = out.source.open(None, None)?;
    let f = netlink::rdma_netlink(opened.source());
    // The soft NIC's registry is this host's: listed live only.
    let soft = match view.lists_soft() && out.source.live() {
        true => rdmakit_res::soft::read(&SoftProvider::names_from_env()),
        false => Vec::new(),
    };
    let shown = view
        .rows(&f, opened.label(), &soft)
        .map_err(anyhow::Error::msg)?;
    eprint!("{}", shown.stderr());
    anstream::stdout().write_all(shown.stdout(out.json).as_bytes())?;
    Ok(shown.exit())
}

#[derive(clap::Args, Debug)]
pub struct MonitorArgs {
    /// One JSON object per line instead of text.
    #[arg(long)]
    json: bool,
}

pub fn monitor(a: MonitorArgs) -> anyhow::Result<Exit> {
    let mut out = anstream::stdout();
    let exit = kernel::monitor(a.json, &mut |s| match s {
        Said::Event(line) => writeln!(out, "{line}"),
        Said::Batch => out.flush(),
        Said::Note(line) => writeln!(std::io::stderr(), "rdmakit: monitor: {line}"),
    })?;
    Ok(exit)
}
