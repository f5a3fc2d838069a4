//! `rdmakit soft status|reclaim|leaky`: the soft NIC's device-wide resource
//! registry (see docs/soft-nic.md, "Resource registry").
//!
//! `status` lists every user's registered objects per owner (read-only) with
//! the owner's state (alive / zombie / dead) and, for objects of a dead owner,
//! who keeps them (the process holding the context, or the leaky driver), and
//! what the registry ignored (forged records, FIFOs, links, refused
//! directories) with the path and why. `reclaim` is the counterpart of
//! restarting openibd after an application died holding QPs on a leaky
//! device: it removes the records of contexts nobody holds — in this user's
//! registry, and as root in every user's — refuses those of live processes,
//! of contexts a forked child still holds and of zombies, names them and
//! exits 1. `leaky on|off` sets the device option that keeps dead processes'
//! objects: root's applies to every user's processes, a user's to its own.

use std::process::ExitCode;

use anyhow::Context as _;
use rdmakit_soft::registry::{self, Registry};
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

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    match a {
        Args::Status { device, json } => status(device, json),
        Args::Leaky { state, device } => {
            let reg = Registry::open(&device)
                .with_context(|| format!("resource registry of {device}"))?;
            let on = state == "on";
            reg.set_leaky(on)
                .with_context(|| format!("writing {}", reg.dir().join(".options").display()))?;
            println!(
                "{}",
                rdmakit_res::registry::leaky_note(&device, on, reg.uid() == 0)
            );
            Ok(Exit::Ok.into())
        }
        Args::Reclaim {
            device,
            dry_run,
            json,
        } => reclaim(device, dry_run, json),
    }
}

fn names(device: Option<String>) -> Vec<String> {
    match device {
        Some(d) => vec![d],
        None => registry::device_names(),
    }
}

fn status(device: Option<String>, as_json: bool) -> anyhow::Result<ExitCode> {
    let names = names(device);
    if names.is_empty() && !as_json {
        println!(
            "no soft device registry under {}",
            registry::base().display()
        );
        return Ok(Exit::Ok.into());
    }
    let r = rdmakit_res::registry::status_of(&names).map_err(anyhow::Error::msg)?;
    show(&r, as_json)?;
    Ok(Exit::Ok.into())
}

fn reclaim(device: Option<String>, dry_run: bool, as_json: bool) -> anyhow::Result<ExitCode> {
    let r =
        rdmakit_res::registry::reclaim_of(&names(device), dry_run).map_err(anyhow::Error::msg)?;
    show(&r, as_json)?;
    for d in &r {
        eprint!("{}", d.err);
    }
    Ok(if r.iter().any(|d| d.refused) {
        Exit::Found.into()
    } else {
        Exit::Ok.into()
    })
}

/// Every device's part, as one JSON object or as text.
fn show(r: &[rdmakit_res::registry::Rendered], as_json: bool) -> anyhow::Result<()> {
    if as_json {
        println!("{}", rdmakit_res::registry::devices_json(r));
    } else {
        for d in r {
            print!("{}", d.text);
        }
    }
    Ok(())
}
