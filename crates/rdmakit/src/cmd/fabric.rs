//! `rdmakit fabric discover` and `rdmakit fabric counters`: the InfiniBand
//! subnet through a local umad port (`rdmakit_fabric::live`; docs/fabric.md).
//! Here, the flags and printing.

use rdmakit_fabric::live::{self, DiscoverForm};
use rdmakit_vocab::exit::Exit;

#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// Walk the subnet with directed-route SMPs from a local port, like ibnetdiscover: nodes, ports, links.
    Discover {
        /// Print the discovery as JSON (the subnet, schema rdmakit.fabric/v1, and what did not answer).
        #[arg(long, conflicts_with = "topology")]
        json: bool,
        /// Print ibnetdiscover's topology format.
        #[arg(long)]
        topology: bool,
        #[command(flatten)]
        port: PortArgs,
    },
    /// Read every port's PMA counters (PortCounters, PortCountersExtended), like perfquery on each.
    Counters {
        /// Print JSON (schema rdmakit.fabric.counters/v1).
        #[arg(long)]
        json: bool,
        /// Every port and every counter; without it, the ports with an error counter not 0.
        #[arg(long, conflicts_with = "json")]
        all: bool,
        /// Clear every counter read after reading it (like perfquery -r).
        #[arg(long)]
        reset: bool,
        #[command(flatten)]
        port: PortArgs,
    },
}

/// The local port the MADs leave by.
#[derive(clap::Args, Debug)]
pub struct PortArgs {
    /// The CA (as ibstat names it: mlx5_0); default: the first with an Active port.
    #[arg(long, value_name = "NAME")]
    ca: Option<String>,
    /// The CA's port; default: its first Active port.
    #[arg(long, value_name = "N")]
    port: Option<u8>,
}

pub fn run(a: Args) -> anyhow::Result<Exit> {
    let said = match a {
        Args::Discover {
            json,
            topology,
            port,
        } => {
            let form = match (json, topology) {
                (true, _) => DiscoverForm::Json,
                (_, true) => DiscoverForm::Topology,
                _ => DiscoverForm::Summary,
            };
            live::discover_command(port.ca.as_deref(), port.port, form)?
        }
        Args::Counters {
            json,
            all,
            reset,
            port,
        } => live::counters_command(port.ca.as_deref(), port.port, json, all, reset)?,
    };
    print!("{}", said.out);
    eprint!("{}", said.err);
    Ok(said.exit)
}
