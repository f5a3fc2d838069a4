//! `rdmakit soft status|reclaim|leaky`: the soft NIC's device-wide resource
//! registry (`rdmakit_res::registry` says what each does; docs/soft-nic.md,
//! "Resource registry").

use rdmakit_res::registry;
use rdmakit_vocab::exit::Exit;

#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// Objects registered per soft device and owner, with the owner's state (alive/zombie/dead).
    Status {
        /// Only this device (default: every device with a registry).
        #[arg(short = 'd', long, value_name = "NAME")]
        device: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Make the device a leaky driver (on) — dead processes' objects stay until reclaim — or not (off).
    Leaky {
        /// `on` or `off`.
        #[arg(value_parser = ["on", "off"])]
        state: String,
        /// The device (default soft0).
        #[arg(short = 'd', long, value_name = "NAME", default_value = "soft0")]
        device: String,
    },
    /// Free objects left by dead processes (what restarting openibd does for a real NIC).
    Reclaim {
        /// Only this device (default: every device with a registry).
        #[arg(short = 'd', long, value_name = "NAME")]
        device: Option<String>,
        /// Say what would be freed without freeing it.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(a: Args) -> anyhow::Result<Exit> {
    let said = match a {
        Args::Status { device, json } => registry::status_command(device, json),
        Args::Leaky { state, device } => Ok(registry::leaky_command(&device, state == "on")?),
        Args::Reclaim {
            device,
            dry_run,
            json,
        } => registry::reclaim_command(device, dry_run, json),
    }
    .map_err(anyhow::Error::msg)?;
    print!("{}", said.out);
    eprint!("{}", said.err);
    Ok(said.exit)
}
