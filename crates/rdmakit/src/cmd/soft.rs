//! `rdmakit soft status|reclaim|leaky`: the soft NIC's device-wide resource
//! registry (see docs/soft-nic.md, "Resource registry").
//!
//! `status` lists every registered object per owner with the owner's state
//! (alive / zombie / dead) and, for objects of a dead owner, who keeps them
//! (the process holding the context, or the leaky driver). `reclaim` is the
//! counterpart of restarting openibd after an application died holding QPs
//! on a leaky device: it removes the records of contexts nobody holds,
//! refuses those of live processes, of contexts a forked child still holds
//! and of zombies, names them and exits 1. `leaky on|off` sets the device
//! option that keeps dead processes' objects.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Context as _;
use rdmakit_soft::registry::{self, Holding, Kind, OwnerState, Record, Registry};
use serde_json::{json, Value};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
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
    match a.cmd {
        Sub::Status { device, json } => status(device, json),
        Sub::Leaky { state, device } => {
            let reg = open(&device)?;
            let on = state == "on";
            reg.set_leaky(on)
                .with_context(|| format!("writing {}", reg.dir().join(".options").display()))?;
            println!(
                "{device}: {}",
                if on {
                    "leaky driver: objects of processes that exit or die without destroying them \
                     stay until 'rdmakit soft reclaim' (for processes that open it from now on)"
                } else {
                    "objects go with the last holder of their context, as the kernel's do"
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        Sub::Reclaim {
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

fn open(name: &str) -> anyhow::Result<Registry> {
    Registry::open(name).with_context(|| format!("resource registry of {name}"))
}

/// Objects grouped by owner (pid, start time), in pid order.
fn by_owner(recs: &[Record]) -> BTreeMap<(u32, u64), Vec<&Record>> {
    let mut m: BTreeMap<(u32, u64), Vec<&Record>> = BTreeMap::new();
    for r in recs {
        m.entry((r.pid, r.start_time)).or_default().push(r);
    }
    m
}

/// `qp 3 (17 18 19), cq 1 (1)`.
fn summary(recs: &[&Record]) -> String {
    let mut parts = Vec::new();
    for k in Kind::ALL {
        let hs: Vec<String> = recs
            .iter()
            .filter(|r| r.kind == k)
            .map(|r| r.handle.to_string())
            .collect();
        if !hs.is_empty() {
            parts.push(format!("{k} {} ({})", hs.len(), hs.join(" ")));
        }
    }
    parts.join(", ")
}

/// Who keeps a dead owner's objects: the holder of their context, or the
/// leaky driver.
fn kept_by(recs: &[&Record]) -> String {
    match recs.first().map(|r| r.holding) {
        Some(Holding::Inherited) => {
            let h = registry::holders(&recs[0].context_path());
            if h.is_empty() {
                " — context held by another process".to_string()
            } else {
                let who: Vec<String> = h.iter().map(|(p, fd)| format!("pid {p} ({fd})")).collect();
                format!(" — context held by {}", who.join(", "))
            }
        }
        Some(Holding::Nobody) => " — kept by the leaky driver until reclaim".to_string(),
        _ => String::new(),
    }
}

fn record_json(r: &Record) -> Value {
    json!({
        "kind": r.kind.as_str(),
        "handle": r.handle,
        "pid": r.pid,
        "start_time": r.start_time,
        "holding": r.holding.as_str(),
        "leaky": r.leaky,
        "created_at": r.created_at,
        "path": r.path.display().to_string(),
    })
}

fn status(device: Option<String>, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut devs = Vec::new();
    let mut out = String::new();
    let names = names(device);
    if names.is_empty() && !as_json {
        println!(
            "no soft device registry under {}",
            registry::root().display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    for name in names {
        let reg = open(&name)?;
        let recs = reg
            .list()
            .with_context(|| format!("reading {}", reg.dir().display()))?;
        let mut owners = Vec::new();
        out.push_str(&format!(
            "{name}: {} object(s) in {}{}\n",
            recs.len(),
            reg.dir().display(),
            if reg.device_leaky() {
                " (leaky driver: dead processes' objects stay until reclaim)"
            } else {
                ""
            }
        ));
        for ((pid, start), rs) in by_owner(&recs) {
            let state = registry::owner_state(pid, start);
            let kept = if state == OwnerState::Alive {
                String::new()
            } else {
                kept_by(&rs)
            };
            out.push_str(&format!(
                "  pid {pid:<8} {:<7} {}{kept}\n",
                state.as_str(),
                summary(&rs)
            ));
            owners.push(json!({
                "pid": pid,
                "start_time": start,
                "state": state.as_str(),
                "objects": rs.iter().map(|r| record_json(r)).collect::<Vec<_>>(),
            }));
        }
        devs.push(json!({
            "name": name,
            "dir": reg.dir().display().to_string(),
            "leaky": reg.device_leaky(),
            "objects": recs.len(),
            "owners": owners,
        }));
    }
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "devices": devs }))?
        );
    } else {
        print!("{out}");
    }
    Ok(ExitCode::SUCCESS)
}

fn reclaim(device: Option<String>, dry_run: bool, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut refused_any = false;
    let mut devs = Vec::new();
    let mut out = String::new();
    let mut err = String::new();
    let verb = if dry_run { "would free" } else { "freed" };
    for name in names(device) {
        let reg = open(&name)?;
        let rc = reg
            .reclaim(dry_run)
            .with_context(|| format!("reclaiming in {}", reg.dir().display()))?;
        for ((pid, start), rs) in by_owner(&rc.freed) {
            let state = registry::owner_state(pid, start);
            out.push_str(&format!(
                "{name}: {verb} {} of {state} pid {pid}\n",
                summary(&rs)
            ));
        }
        if rc.freed.is_empty() {
            out.push_str(&format!("{name}: nothing to reclaim\n"));
        }
        for (state, why, list) in [
            (
                OwnerState::Zombie,
                "its parent may still reap it",
                &rc.zombie,
            ),
            (OwnerState::Alive, "it still owns them", &rc.live),
        ] {
            for ((pid, _), rs) in by_owner(list) {
                refused_any = true;
                err.push_str(&format!(
                    "{name}: refused to reclaim {} of pid {pid} ({state}: {why})\n",
                    summary(&rs)
                ));
            }
        }
        for ((pid, start), rs) in by_owner(&rc.inherited) {
            refused_any = true;
            let state = registry::owner_state(pid, start);
            err.push_str(&format!(
                "{name}: refused to reclaim {} of pid {pid} ({state}: its context is still held{}; \
                 end that process to free them)\n",
                summary(&rs),
                kept_by(&rs).trim_start_matches(" — context held")
            ));
        }
        devs.push(json!({
            "name": name,
            "dir": reg.dir().display().to_string(),
            "dry_run": dry_run,
            "freed": rc.freed.iter().map(record_json).collect::<Vec<_>>(),
            "refused_zombie": rc.zombie.iter().map(record_json).collect::<Vec<_>>(),
            "refused_alive": rc.live.iter().map(record_json).collect::<Vec<_>>(),
            "refused_inherited": rc.inherited.iter().map(record_json).collect::<Vec<_>>(),
        }));
    }
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "devices": devs }))?
        );
    } else {
        print!("{out}");
    }
    eprint!("{err}");
    Ok(if refused_any {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
