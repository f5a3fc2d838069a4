//! `rdmakit soft status|reclaim|leaky`, the soft NIC's resource registry
//! (`rdmakit_res::registry`; docs/soft-nic.md, "Resource registry"), and
//! `rdmakit shim install DIR`, the drop-in libraries (`rdmakit_soft::install`).

use std::path::PathBuf;

use rdmakit_res::registry;
use rdmakit_soft::install;
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

#[derive(clap::Subcommand, Debug)]
pub enum ShimArgs {
    /// Put libibverbs.so.1, librdmacm.so.1 and the libmlx5.so.1 / libefa.so.1 links in DIR.
    Install {
        /// Target directory (created if missing).
        dir: PathBuf,
        /// The built library (default: libibverbs.so next to this binary, or $RDMAKIT_SHIM_LIB).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn shim(a: ShimArgs) -> anyhow::Result<Exit> {
    let ShimArgs::Install { dir, from, json } = a;
    let shim_lib = std::env::var_os("RDMAKIT_SHIM_LIB");
    let lib =
        install::locate(from, shim_lib, std::env::current_exe()).map_err(anyhow::Error::msg)?;
    let name = install::node_name(std::env::var("RDMAKIT_SOFT_NAME").ok());
    let i = install::install(&lib, &dir, Some(&name)).map_err(anyhow::Error::msg)?;
    match json {
        true => println!("{}", rdmakit_res::install::json(&i)),
        false => print!("{}", i.text()),
    }
    Ok(Exit::Ok)
}
