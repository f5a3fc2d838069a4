//! `rdmakit monitor`: prints RDMA device events (register, unregister, netdev
//! attach/detach, rename) as the kernel announces them, until Ctrl-C. Live only.

use std::io::Write as _;
use std::process::ExitCode;

use rdmakit_host::netlink::{self, monitor::Monitor};
use rdmakit_vocab::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// One JSON object per line instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let mut mon = match Monitor::open() {
        Ok(m) => m,
        // No RDMA netlink in this kernel: nothing to subscribe to (3); any
        // other refusal is the subscription failing (2).
        Err(e) => {
            eprintln!(
                "rdmakit: monitor: kernel layer: cannot subscribe to RDMA events on \
                 NETLINK_RDMA: {}; `rdmakit doctor` checks the kernel layer",
                netlink::describe(e)
            );
            return Ok(if e.0 == 93 {
                Exit::Incomplete
            } else {
                Exit::Failed
            }
            .into());
        }
    };
    // Kernels that announce events say so in their SYS reply; on others the
    // subscription works but stays silent forever: say so instead of hanging
    // without a word.
    let live = rdmakit_host::source::LiveSource::host();
    if netlink::monitor::announces(&live) == Some(false) {
        eprintln!(
            "rdmakit: monitor: kernel layer: this kernel does not announce RDMA device \
             events (its RDMA_NLDEV_CMD_SYS_GET reply has no MONITOR_MODE attribute, which \
             kernels with RDMA monitoring send); expect no output. Poll with 'rdmakit dev' \
             and 'rdmakit link' instead."
        );
    }
    let mut out = anstream::stdout();
    loop {
        let events = match mon.wait_events() {
            Ok(v) => v,
            Err(e) if e.0 == 4 => continue, // EINTR
            Err(e) => {
                eprintln!("rdmakit: monitor: recv: {}", netlink::describe(e));
                return Ok(Exit::Failed.into());
            }
        };
        for ev in events {
            match ev {
                Ok(ev) if a.json => writeln!(out, "{}", serde_json::to_string(&ev)?)?,
                Ok(ev) => writeln!(out, "{}", rdmakit_res::kernel::event_line(&ev))?,
                Err(e) => eprintln!("rdmakit: monitor: skipped an event: {e}"),
            }
        }
        out.flush()?;
    }
}
