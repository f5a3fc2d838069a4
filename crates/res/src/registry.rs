//! `rdmakit soft status` and `rdmakit soft reclaim` as text and JSON: a soft
//! device's registered objects per owner, with the owner's state (alive /
//! zombie / dead) and who keeps a dead owner's objects (the process holding
//! the context, or the leaky driver); what a reclaim freed and what it
//! refused, and why. The command reads the registry and prints these.

use std::collections::BTreeMap;
use std::path::Path;

use rdmakit_soft::registry::{self, Holding, Kind, OwnerState, Reclaim, Record};
use serde_json::{json, Value};

/// One device's part of a status or reclaim: human lines, lines for stderr
/// (refusals), its JSON object, and whether anything was refused.
#[derive(Debug, Default)]
pub struct Rendered {
    /// Lines for stdout.
    pub text: String,
    /// Lines for stderr (a reclaim's refusals).
    pub err: String,
    /// The device's JSON object.
    pub json: Value,
    /// A reclaim refused some objects (exit 1).
    pub refused: bool,
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
pub fn summary(recs: &[&Record]) -> String {
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

/// `soft status` of each device in `names`, read from its registry.
///
/// # Errors
/// A registry that cannot be opened or read.
pub fn status_of(names: &[String]) -> Result<Vec<Rendered>, String> {
    names
        .iter()
        .map(|name| {
            let reg = open(name)?;
            let recs = reg
                .list()
                .map_err(|e| format!("reading {}: {e}", reg.dir().display()))?;
            Ok(status(name, reg.dir(), reg.device_leaky(), &recs))
        })
        .collect()
}

/// `soft reclaim` on each device in `names` (`dry_run`: say what would be
/// freed).
///
/// # Errors
/// A registry that cannot be opened, or the reclaim failing.
pub fn reclaim_of(names: &[String], dry_run: bool) -> Result<Vec<Rendered>, String> {
    names
        .iter()
        .map(|name| {
            let reg = open(name)?;
            let rc = reg
                .reclaim(dry_run)
                .map_err(|e| format!("reclaiming in {}: {e}", reg.dir().display()))?;
            Ok(reclaim(name, reg.dir(), dry_run, &rc))
        })
        .collect()
}

fn open(name: &str) -> Result<registry::Registry, String> {
    registry::Registry::open(name).map_err(|e| format!("resource registry of {name}: {e}"))
}

/// `soft status` for device `name` whose registry is `dir` (`leaky`: the
/// device option) holding `recs`.
pub fn status(name: &str, dir: &Path, leaky: bool, recs: &[Record]) -> Rendered {
    let mut text = format!(
        "{name}: {} object(s) in {}{}\n",
        recs.len(),
        dir.display(),
        if leaky {
            " (leaky driver: dead processes' objects stay until reclaim)"
        } else {
            ""
        }
    );
    let mut owners = Vec::new();
    for ((pid, start), rs) in by_owner(recs) {
        let state = registry::owner_state(pid, start);
        let kept = if state == OwnerState::Alive {
            String::new()
        } else {
            kept_by(&rs)
        };
        text.push_str(&format!(
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
    Rendered {
        text,
        json: json!({
            "name": name,
            "dir": dir.display().to_string(),
            "leaky": leaky,
            "objects": recs.len(),
            "owners": owners,
        }),
        ..Rendered::default()
    }
}

/// `soft reclaim` of device `name` (registry `dir`): what `rc` freed (or, on
/// a dry run, would free) and what it refused, with the reason.
pub fn reclaim(name: &str, dir: &Path, dry_run: bool, rc: &Reclaim) -> Rendered {
    let mut out = Rendered::default();
    let verb = if dry_run { "would free" } else { "freed" };
    for ((pid, start), rs) in by_owner(&rc.freed) {
        let state = registry::owner_state(pid, start);
        out.text.push_str(&format!(
            "{name}: {verb} {} of {state} pid {pid}\n",
            summary(&rs)
        ));
    }
    if rc.freed.is_empty() {
        out.text.push_str(&format!("{name}: nothing to reclaim\n"));
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
            out.refused = true;
            out.err.push_str(&format!(
                "{name}: refused to reclaim {} of pid {pid} ({state}: {why})\n",
                summary(&rs)
            ));
        }
    }
    for ((pid, start), rs) in by_owner(&rc.inherited) {
        out.refused = true;
        let state = registry::owner_state(pid, start);
        out.err.push_str(&format!(
            "{name}: refused to reclaim {} of pid {pid} ({state}: its context is still held{}; \
             end that process to free them)\n",
            summary(&rs),
            kept_by(&rs).trim_start_matches(" — context held")
        ));
    }
    out.json = json!({
        "name": name,
        "dir": dir.display().to_string(),
        "dry_run": dry_run,
        "freed": rc.freed.iter().map(record_json).collect::<Vec<_>>(),
        "refused_zombie": rc.zombie.iter().map(record_json).collect::<Vec<_>>(),
        "refused_alive": rc.live.iter().map(record_json).collect::<Vec<_>>(),
        "refused_inherited": rc.inherited.iter().map(record_json).collect::<Vec<_>>(),
    });
    out
}

/// What `rdmakit soft leaky on|off` says it set for `device`.
pub fn leaky_note(device: &str, on: bool) -> String {
    let what = if on {
        "leaky driver: objects of processes that exit or die without destroying them \
         stay until 'rdmakit soft reclaim' (for processes that open it from now on)"
    } else {
        "objects go with the last holder of their context, as the kernel's do"
    };
    format!("{device}: {what}")
}

/// The JSON document of `rdmakit soft status|reclaim --json`: `{"devices": [...]}`,
/// pretty-printed.
pub fn devices_json(r: &[Rendered]) -> String {
    let devs: Vec<&Value> = r.iter().map(|d| &d.json).collect();
    serde_json::to_string_pretty(&json!({ "devices": devs }))
        .unwrap_or_else(|e| json!({ "error": e.to_string() }).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn leaky_notes_say_what_was_set() {
        assert_eq!(
            leaky_note("soft0", false),
            "soft0: objects go with the last holder of their context, as the kernel's do"
        );
        assert!(leaky_note("soft1", true).starts_with("soft1: leaky driver: objects of processes"));
        assert!(leaky_note("soft1", true).ends_with("(for processes that open it from now on)"));
    }

    #[test]
    fn devices_json_wraps_each_devices_object() {
        let r = [Rendered {
            json: json!({ "device": "soft0" }),
            ..Rendered::default()
        }];
        assert_eq!(
            devices_json(&r),
            "{\n  \"devices\": [\n    {\n      \"device\": \"soft0\"\n    }\n  ]\n}"
        );
        assert_eq!(devices_json(&[]), "{\n  \"devices\": []\n}");
    }

    fn rec(kind: Kind, handle: u32, pid: u32, holding: Holding) -> Record {
        Record {
            kind,
            handle,
            pid,
            start_time: 1,
            instance: 0,
            created_at: 0,
            limit: 0,
            leaky: holding == Holding::Nobody,
            holding,
            path: PathBuf::from(format!("/reg/{kind}-{pid}-{handle}")),
        }
    }

    /// pid 0 and u32::MAX never name a live process with start time 1.
    #[test]
    fn status_groups_per_owner_and_names_the_keeper() {
        let recs = [
            rec(Kind::Qp, 17, u32::MAX - 1, Holding::Nobody),
            rec(Kind::Qp, 18, u32::MAX - 1, Holding::Nobody),
            rec(Kind::Cq, 1, u32::MAX - 1, Holding::Nobody),
        ];
        let r = status("soft9", Path::new("/reg"), true, &recs);
        assert!(
            r.text
                .starts_with("soft9: 3 object(s) in /reg (leaky driver"),
            "{}",
            r.text
        );
        assert!(r.text.contains("qp 2 (17 18), cq 1 (1)"), "{}", r.text);
        assert!(
            r.text.contains("kept by the leaky driver until reclaim"),
            "{}",
            r.text
        );
        assert_eq!(r.json["objects"], 3);
        assert_eq!(r.json["owners"][0]["objects"].as_array().unwrap().len(), 3);
        assert!(!r.refused);
    }

    #[test]
    fn reclaim_says_what_it_freed_and_refuses_live_owners() {
        let me = std::process::id();
        let rc = Reclaim {
            freed: vec![rec(Kind::Qp, 5, u32::MAX - 1, Holding::Nobody)],
            live: vec![rec(Kind::Pd, 2, me, Holding::Owner)],
            ..Reclaim::default()
        };
        let r = reclaim("soft9", Path::new("/reg"), true, &rc);
        assert!(
            r.text.contains("soft9: would free qp 1 (5) of"),
            "{}",
            r.text
        );
        assert!(
            r.err
                .contains(&format!("refused to reclaim pd 1 (2) of pid {me}")),
            "{}",
            r.err
        );
        assert!(r.refused);
        assert_eq!(r.json["dry_run"], true);
        let empty = reclaim("soft9", Path::new("/reg"), false, &Reclaim::default());
        assert_eq!(empty.text, "soft9: nothing to reclaim\n");
        assert!(!empty.refused);
    }
}
