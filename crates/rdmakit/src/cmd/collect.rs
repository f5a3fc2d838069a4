//! `rdmakit collect`: record what the doctor reads into one bundle.

use std::path::Path;

use rdmakit_report::progress::Progress;
use rdmakit_vocab::exit::Exit;

use super::ReplayArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    source: ReplayArgs,
    /// Also record the host as this process sees it — its memlock limit and
    /// credentials, /dev/infiniband through /proc/PID/root, its network namespace,
    /// its RDMA cgroup — so `doctor --from` the bundle checks it too.
    #[arg(long, value_name = "PID")]
    pid: Option<u32>,
    /// Record FILE (journalctl -k or dmesg output; a pipe is fine) as the kernel log,
    /// instead of reading /dev/kmsg.
    #[arg(long, value_name = "FILE")]
    kernel_log: Option<String>,
    /// Where to write the bundle (gzip-compressed when the name ends in .gz).
    #[arg(short, long, value_name = "FILE")]
    output: String,
    /// Replace host names, GUIDs and GIDs, serials and board ids, MAC and IP
    /// addresses by placeholders (the same value always the same one), for a public
    /// ticket; `doctor --from` the result finds the same (docs/bundles.md).
    #[arg(long)]
    redact: bool,
}

pub fn run(a: Args) -> anyhow::Result<Exit> {
    // Run as root: keep only what reading the host and writing -o need
    // (rdmakit_host::privilege::COLLECT), so nothing collect loads or runs holds
    // more.
    if let Err(e) = rdmakit_host::privilege::keep_only(rdmakit_host::privilege::COLLECT) {
        eprintln!("rdmakit: note: could not drop capabilities: {e}");
    }
    let (opened, opts) = a.source.open(a.pid, a.kernel_log.clone())?;
    let tool = format!("rdmakit {}", env!("CARGO_PKG_VERSION"));
    // Converting a bundle or capture directory keeps every answer it has.
    let from = a.source.from.as_deref();
    let convert = from.is_some_and(|p| Path::new(p).is_dir());
    let spinner = Progress::spinner("collecting host facts");
    let mut bundle = opened.record(&opts, &tool, convert);
    drop(spinner);
    if a.redact {
        let r = rdmakit_host::redact::redact(&bundle);
        eprintln!("rdmakit: redacted {}", r.counts);
        bundle = r.bundle;
    }
    bundle
        .write(&a.output)
        .map_err(|e| anyhow::anyhow!(e.when_writing("-o", &a.output)))?;
    eprintln!("rdmakit: {}", bundle.written_note(&a.output));
    Ok(Exit::Ok)
}
