//! `rdmakit monitor`: prints RDMA device events (register, unregister, netdev
//! attach/detach, rename) as the kernel announces them, until Ctrl-C. Live only.

use std::io::Write as _;
use std::process::ExitCode;

use rdmakit_host::netlink::{self, monitor::Monitor};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// One JSON object per line instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let mut mon = match Monitor::open() {
        Ok(m) => m,
        Err(e) => {
            eprintln!(
                "rdmakit: monitor: kernel layer: cannot subscribe to RDMA events on \
                 NETLINK_RDMA: {}",
                netlink::describe(e)
            );
            return Ok(ExitCode::from(2));
        }
    };
    // Kernels that announce events say so in their SYS reply; on others the
    // subscription works but stays silent forever: say so instead of hanging
    // without a word.
    let live = rdmakit_host::source::LiveSource::host();
    if let Ok(sys) = netlink::exchange(&live, &netlink::requests::sys()).and_then(|m| {
        m.first()
            .map(|a| netlink::views::sys(a))
            .transpose()
            .map_err(Into::into)
    }) {
        if sys.is_some_and(|s| s.monitor_mode.is_none()) {
            eprintln!(
                "rdmakit: monitor: kernel layer: this kernel does not announce RDMA device \
                 events (its RDMA_NLDEV_CMD_SYS_GET reply has no MONITOR_MODE attribute, which \
                 kernels with RDMA monitoring send); expect no output. Poll with 'rdmakit dev' \
                 and 'rdmakit link' instead."
            );
        }
    }
    let mut out = anstream::stdout();
    loop {
        let events = match mon.wait_events() {
            Ok(v) => v,
            Err(e) if e.0 == 4 => continue, // EINTR
            Err(e) => {
                eprintln!("rdmakit: monitor: recv: {}", netlink::describe(e));
                return Ok(ExitCode::from(2));
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
