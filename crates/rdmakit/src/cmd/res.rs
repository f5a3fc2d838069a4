//! `rdmakit dev`, `link`, `stat [qp]` and `res [KIND]`: every device's ports,
//! counters and tracked RDMA objects — the kernel's (RDMA netlink) and, for
//! `res` on the live host, the rdmakit soft NIC's (its registry) — as `rdma`
//! prints them, plus whether each owner is still alive. The views and their
//! rows are the rdmakit-res library's (`rdmakit_res::view`); what they share
//! here is loading the facts and printing the rows.

use rdmakit_vocab::exit::Exit;
use std::io::Write as _;

use rdmakit_host::netlink;
use rdmakit_res::view::View;
use rdmakit_verbs::SoftProvider;

use super::ReplayArgs;

/// `rdmakit dev`: the RDMA devices, as `rdma dev` prints them.
#[derive(clap::Args, Debug)]
pub struct DevArgs {
    /// Only this device.
    #[arg(value_name = "DEV")]
    dev: Option<String>,
    #[command(flatten)]
    out: RowsArgs,
}

/// `rdmakit link`: the ports of every RDMA device, as `rdma link` prints them.
#[derive(clap::Args, Debug)]
pub struct LinkArgs {
    /// Only this device, or this port (DEV/PORT).
    #[arg(value_name = "DEV[/PORT]")]
    link: Option<String>,
    #[command(flatten)]
    out: RowsArgs,
}

/// `rdmakit stat [qp]`: per-port hardware counters (`rdma statistic`) and bound
/// QP counters (`rdma statistic qp`).
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

/// `rdmakit res [qp|cq|mr|pd|ctx|srq|cm_id]`: tracked objects, as `rdma
/// resource show` prints them.
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
    for n in &shown.notes {
        eprintln!("rdmakit: note: {n}");
    }
    for m in &shown.missing {
        eprintln!("rdmakit: {m}");
    }
    anstream::stdout().write_all(shown.stdout(out.json).as_bytes())?;
    Ok(shown.exit())
}
