//! `rdmakit soft status|reclaim`: the soft NIC's device-wide resource
//! registry (see docs/soft-nic.md, "Resource registry").
//!
//! `status` lists every registered object per owner with the owner's state
//! (alive / zombie / dead). `reclaim` is the counterpart of restarting
//! openibd after an application died holding QPs: it removes the records of
//! dead owners, refuses those of zombies (the parent may still reap them)
//! and of live processes, names them and exits 1.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Context as _;
use rdmakit_soft::registry::{self, Kind, OwnerState, Record, Registry};
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

fn record_json(r: &Record) -> Value {
    json!({
        "kind": r.kind.as_str(),
        "handle": r.handle,
        "pid": r.pid,
        "start_time": r.start_time,
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
            "{name}: {} object(s) in {}\n",
            recs.len(),
            reg.dir().display()
        ));
        for ((pid, start), rs) in by_owner(&recs) {
            let state = registry::owner_state(pid, start);
            out.push_str(&format!(
                "  pid {pid:<8} {:<7} {}\n",
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
        for ((pid, _), rs) in by_owner(&rc.freed) {
            out.push_str(&format!(
                "{name}: {verb} {} of dead pid {pid}\n",
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
        devs.push(json!({
            "name": name,
            "dir": reg.dir().display().to_string(),
            "dry_run": dry_run,
            "freed": rc.freed.iter().map(record_json).collect::<Vec<_>>(),
            "refused_zombie": rc.zombie.iter().map(record_json).collect::<Vec<_>>(),
            "refused_alive": rc.live.iter().map(record_json).collect::<Vec<_>>(),
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
