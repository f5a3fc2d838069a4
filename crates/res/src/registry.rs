//! `rdmakit soft status` and `rdmakit soft reclaim` as text and JSON: a soft
//! device's registered objects per owner — every user's, read-only — with the
//! owner's state (alive / zombie / dead) and who keeps a dead owner's objects
//! (the process holding the context, or the leaky driver); what the registry
//! ignored (forged records, FIFOs, links, refused directories) with the path
//! and why; what a reclaim freed and what it refused, and why. And `rdmakit
//! soft leaky on|off`. The command prints what [`status_command`],
//! [`reclaim_command`] and [`leaky_command`] say (see docs/soft-nic.md,
//! "Resource registry").
//!
//! `reclaim` is the counterpart of restarting openibd after an application
//! died holding QPs on a leaky device: it removes the records of contexts
//! nobody holds — in this user's registry, and as root in every user's —
//! refuses those of live processes, of contexts a forked child still holds
//! and of zombies, names them and exits 1. `leaky on|off` sets the device
//! option that keeps dead processes' objects: root's applies to every user's
//! processes, a user's to its own.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use rdmakit_soft::registry::{self, Holding, Kind, OwnerState, Reclaim, Record, Survey};
use rdmakit_soft::userdir::{euid, Refused};
use rdmakit_vocab::exit::Exit;
use serde_json::{json, Value};

/// One device's part of a status or reclaim: human lines, lines for stderr
/// (refusals, ignored entries), its JSON object, and whether anything was
/// refused.
#[derive(Debug, Default)]
pub struct Rendered {
    /// Lines for stdout.
    pub text: String,
    /// Lines for stderr (a reclaim's refusals and what it left alone).
    pub err: String,
    /// The device's JSON object.
    pub json: Value,
    /// A reclaim refused some objects (exit 1).
    pub refused: bool,
}

/// Objects grouped by owner (uid, pid, start time), in uid then pid order.
fn by_owner(recs: &[Record]) -> BTreeMap<(u32, u32, u64), Vec<&Record>> {
    let mut m: BTreeMap<(u32, u32, u64), Vec<&Record>> = BTreeMap::new();
    for r in recs {
        m.entry((r.uid, r.pid, r.start_time)).or_default().push(r);
    }
    m
}

/// The most handles listed per kind in a summary (the count is exact).
const SHOWN_HANDLES: usize = 32;

/// `qp 3 (17 18 19), cq 1 (1)`; past 32 handles of a kind,
/// the rest is `…`.
pub fn summary(recs: &[&Record]) -> String {
    let mut parts = Vec::new();
    for k in Kind::ALL {
        let hs: Vec<String> = recs
            .iter()
            .filter(|r| r.kind == k)
            .map(|r| r.handle.to_string())
            .collect();
        if !hs.is_empty() {
            let more = if hs.len() > SHOWN_HANDLES { " …" } else { "" };
            let shown = &hs[..hs.len().min(SHOWN_HANDLES)];
            parts.push(format!("{k} {} ({}{more})", hs.len(), shown.join(" ")));
        }
    }
    parts.join(", ")
}

/// ` (uid N)` for another user's objects, nothing for the reader's own.
fn of_uid(uid: u32, me: u32) -> String {
    if uid == me {
        String::new()
    } else {
        format!(" (uid {uid})")
    }
}

/// The processes holding the contexts of `recs`' inherited objects, read
/// in one pass over `/proc`.
fn holders(recs: &[Record]) -> HashMap<PathBuf, Vec<(u32, String)>> {
    let ctxs: BTreeSet<PathBuf> = recs
        .iter()
        .filter(|r| r.holding == Holding::Inherited)
        .map(Record::context_path)
        .collect();
    registry::holders_many(&ctxs.into_iter().collect::<Vec<_>>())
}

/// Who keeps a dead owner's objects: the holder of their context (from
/// `held`), or the leaky driver (root's option, or their user's own).
fn kept_by(recs: &[&Record], held: &HashMap<PathBuf, Vec<(u32, String)>>) -> String {
    let Some(r) = recs.first() else {
        return String::new();
    };
    match r.holding {
        Holding::Inherited => match held.get(&r.context_path()) {
            Some(h) if !h.is_empty() => {
                let who: Vec<String> = h.iter().map(|(p, fd)| format!("pid {p} ({fd})")).collect();
                format!(" — context held by {}", who.join(", "))
            }
            _ => " — context held by another process".to_string(),
        },
        Holding::Nobody | Holding::Unknown if r.leaky && r.counts => {
            " — kept by the leaky driver until reclaim".to_string()
        }
        Holding::Nobody | Holding::Unknown if r.leaky => format!(
            " — kept by uid {}'s own leaky option until reclaim; they count for uid {} only",
            r.uid, r.uid
        ),
        _ => String::new(),
    }
}

fn record_json(r: &Record) -> Value {
    json!({
        "kind": r.kind.as_str(),
        "handle": r.handle,
        "pid": r.pid,
        "uid": r.uid,
        "start_time": r.start_time,
        "holding": r.holding.as_str(),
        "leaky": r.leaky,
        "counts": r.counts,
        "created_at": r.created_at,
        "path": r.path.display().to_string(),
    })
}

fn ignored_json(i: &[Refused]) -> Value {
    i.iter()
        .map(|i| json!({ "path": i.path.display().to_string(), "why": i.why }))
        .collect()
}

/// What a `soft` subcommand prints, and how it ends.
#[derive(Debug)]
pub struct Said {
    /// For stdout.
    pub out: String,
    /// For stderr, after it (a reclaim's refusals and what it left alone).
    pub err: String,
    /// The exit status.
    pub exit: Exit,
}

/// The devices `device` names: it, or every device with a registry.
fn names(device: Option<String>) -> Vec<String> {
    match device {
        Some(d) => vec![d],
        None => registry::device_names(),
    }
}

/// Every device's part, as one JSON object or as text.
fn shown(r: &[Rendered], as_json: bool) -> String {
    match as_json {
        true => devices_json(r) + "\n",
        false => r.iter().map(|d| d.text.as_str()).collect(),
    }
}

/// `rdmakit soft status [-d NAME] [--json]`: every user's registered objects
/// per owner (read-only) with the owner's state and, for objects of a dead
/// owner, who keeps them, and what the registry ignored with the path and
/// why; a line saying there is no registry at all (not with `--json`).
///
/// # Errors
/// As [`status_of`].
pub fn status_command(device: Option<String>, as_json: bool) -> Result<Said, String> {
    let names = names(device);
    let out = if names.is_empty() && !as_json {
        format!(
            "no soft device registry under {}\n",
            registry::base().display()
        )
    } else {
        shown(&status_of(&names)?, as_json)
    };
    Ok(Said {
        out,
        err: String::new(),
        exit: Exit::Ok,
    })
}

/// `rdmakit soft reclaim [-d NAME] [--dry-run] [--json]`: exit 1 when
/// something was refused.
///
/// # Errors
/// As [`reclaim_of`].
pub fn reclaim_command(
    device: Option<String>,
    dry_run: bool,
    as_json: bool,
) -> Result<Said, String> {
    let r = reclaim_of(&names(device), dry_run)?;
    Ok(Said {
        out: shown(&r, as_json),
        err: r.iter().map(|d| d.err.as_str()).collect(),
        exit: match r.iter().any(|d| d.refused) {
            true => Exit::Found,
            false => Exit::Ok,
        },
    })
}

/// Why `soft leaky` changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum LeakyError {
    /// The device's registry could not be opened.
    #[error("resource registry of {device}")]
    Open {
        /// The device.
        device: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The option file could not be written.
    #[error("writing {}", path.display())]
    Write {
        /// `DIR/.options`.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// `rdmakit soft leaky on|off -d NAME`: sets the option (root's for every
/// user's processes, a user's for its own) and says what was set.
///
/// # Errors
/// [`LeakyError`].
pub fn leaky_command(device: &str, on: bool) -> Result<Said, LeakyError> {
    let reg = registry::Registry::open(device).map_err(|source| LeakyError::Open {
        device: device.to_string(),
        source,
    })?;
    reg.set_leaky(on).map_err(|source| LeakyError::Write {
        path: reg.dir().join(".options"),
        source,
    })?;
    Ok(Said {
        out: leaky_note(device, on, reg.uid() == 0) + "\n",
        err: String::new(),
        exit: Exit::Ok,
    })
}

/// `soft status` of each device in `names`, read from every user's
/// registry (nothing is created or changed).
///
/// # Errors
/// A registry base that cannot be read.
pub fn status_of(names: &[String]) -> Result<Vec<Rendered>, String> {
    names
        .iter()
        .map(|name| {
            let s =
                registry::survey(name).map_err(|e| format!("resource registry of {name}: {e}"))?;
            Ok(status(&s))
        })
        .collect()
}

/// `soft reclaim` on each device in `names` (`dry_run`: say what would be
/// freed): in this user's registry, and as root in every user's.
///
/// # Errors
/// A registry that cannot be opened, or the reclaim failing.
pub fn reclaim_of(names: &[String], dry_run: bool) -> Result<Vec<Rendered>, String> {
    names
        .iter()
        .map(|name| {
            let reg = registry::Registry::open(name)
                .map_err(|e| format!("resource registry of {name}: {e}"))?;
            let rc = reg
                .reclaim(dry_run)
                .map_err(|e| format!("reclaiming in {}: {e}", reg.dir().display()))?;
            Ok(reclaim(name, reg.dir(), dry_run, &rc))
        })
        .collect()
}

/// `soft status` of one device's [`Survey`].
pub fn status(s: &Survey) -> Rendered {
    let me = euid();
    let name = &s.name;
    let dirs: Vec<String> = s.dirs.iter().map(|d| d.display().to_string()).collect();
    let place = if dirs.is_empty() {
        format!("no registry under {}", s.base.display())
    } else {
        dirs.join(", ")
    };
    let leaky = if s.root_leaky {
        " (leaky driver by root's option: dead processes' objects stay until reclaim)"
    } else if s.own_leaky {
        " (leaky driver for your processes: their objects stay until reclaim)"
    } else {
        ""
    };
    let mut text = format!("{name}: {} object(s) in {place}{leaky}\n", s.records.len());
    let mut owners = Vec::new();
    let held = holders(&s.records);
    for ((uid, pid, start), rs) in by_owner(&s.records) {
        let state = registry::owner_state(pid, start);
        let kept = if state == OwnerState::Alive {
            String::new()
        } else {
            kept_by(&rs, &held)
        };
        text.push_str(&format!(
            "  pid {pid:<8} {:<7} {}{}{kept}\n",
            state.as_str(),
            summary(&rs),
            of_uid(uid, me)
        ));
        owners.push(json!({
            "pid": pid,
            "uid": uid,
            "start_time": start,
            "state": state.as_str(),
            "objects": rs.iter().map(|r| record_json(r)).collect::<Vec<_>>(),
        }));
    }
    for i in &s.ignored {
        text.push_str(&format!("  ignored {}: {}\n", i.path.display(), i.why));
    }
    Rendered {
        text,
        json: json!({
            "name": name,
            "base": s.base.display().to_string(),
            "dirs": dirs,
            "leaky": s.root_leaky || s.own_leaky,
            "root_leaky": s.root_leaky,
            "objects": s.records.len(),
            "owners": owners,
            "ignored": ignored_json(&s.ignored),
        }),
        ..Rendered::default()
    }
}

/// `soft reclaim` of device `name` (this user's registry `dir`): what `rc`
/// freed (or, on a dry run, would free) and what it refused, with the
/// reason; what it left alone (not records), with why.
pub fn reclaim(name: &str, dir: &Path, dry_run: bool, rc: &Reclaim) -> Rendered {
    let me = euid();
    let mut out = Rendered::default();
    let verb = if dry_run { "would free" } else { "freed" };
    for ((uid, pid, start), rs) in by_owner(&rc.freed) {
        let state = registry::owner_state(pid, start);
        out.text.push_str(&format!(
            "{name}: {verb} {} of {state} pid {pid}{}\n",
            summary(&rs),
            of_uid(uid, me)
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
        for ((uid, pid, _), rs) in by_owner(list) {
            out.refused = true;
            out.err.push_str(&format!(
                "{name}: refused to reclaim {} of pid {pid}{} ({state}: {why})\n",
                summary(&rs),
                of_uid(uid, me)
            ));
        }
    }
    let held = holders(&rc.inherited);
    for ((uid, pid, start), rs) in by_owner(&rc.inherited) {
        out.refused = true;
        let state = registry::owner_state(pid, start);
        out.err.push_str(&format!(
            "{name}: refused to reclaim {} of pid {pid}{} ({state}: its context is still held{}; \
             end that process to free them)\n",
            summary(&rs),
            of_uid(uid, me),
            kept_by(&rs, &held).trim_start_matches(" — context held")
        ));
    }
    for i in &rc.ignored {
        out.err.push_str(&format!(
            "{name}: left alone {}: {}\n",
            i.path.display(),
            i.why
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
        "ignored": ignored_json(&rc.ignored),
    });
    out
}

/// What `rdmakit soft leaky on|off` says it set for `device`; `root`: root
/// set it, for every user's processes (a driver property), else a user for
/// its own.
pub fn leaky_note(device: &str, on: bool, root: bool) -> String {
    let what = if on {
        "leaky driver: objects of processes that exit or die without destroying them \
         stay until 'rdmakit soft reclaim'"
    } else {
        "objects go with the last holder of their context, as the kernel's do"
    };
    let whom = if root {
        "for every user's processes that open it from now on: root's option"
    } else {
        "for your processes that open it from now on; root's option applies to every user"
    };
    format!("{device}: {what} ({whom})")
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
    fn leaky_notes_say_what_was_set_and_for_whom() {
        assert_eq!(
            leaky_note("soft0", false, true),
            "soft0: objects go with the last holder of their context, as the kernel's do \
             (for every user's processes that open it from now on: root's option)"
        );
        let n = leaky_note("soft1", true, false);
        assert!(
            n.starts_with("soft1: leaky driver: objects of processes"),
            "{n}"
        );
        assert!(
            n.ends_with("(for your processes that open it from now on; root's option applies to every user)"),
            "{n}"
        );
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
            uid: euid(),
            owner: OwnerState::Dead,
            counts: true,
            path: PathBuf::from(format!("/reg/{kind}-{pid}-1-0-{handle}")),
        }
    }

    fn survey(records: Vec<Record>, ignored: Vec<Refused>) -> Survey {
        Survey {
            name: "soft9".into(),
            base: PathBuf::from("/b"),
            dirs: vec![PathBuf::from("/b/rdmakit-soft.0/soft9")],
            records,
            ignored,
            root_leaky: true,
            own_leaky: false,
        }
    }

    /// pid 0 and u32::MAX never name a live process with start time 1.
    #[test]
    fn status_groups_per_owner_and_names_the_keeper() {
        let mut other = rec(Kind::Qp, 20, u32::MAX - 2, Holding::Nobody);
        other.uid = euid().wrapping_add(1);
        other.counts = false;
        let recs = vec![
            rec(Kind::Qp, 17, u32::MAX - 1, Holding::Nobody),
            rec(Kind::Qp, 18, u32::MAX - 1, Holding::Nobody),
            rec(Kind::Cq, 1, u32::MAX - 1, Holding::Nobody),
            other,
        ];
        let fifo = Refused {
            path: PathBuf::from("/b/rdmakit-soft.7/soft9/qp-1-2-3-4"),
            why: "not a regular file (a FIFO)".into(),
        };
        let r = status(&survey(recs, vec![fifo]));
        assert!(
            r.text.starts_with(
                "soft9: 4 object(s) in /b/rdmakit-soft.0/soft9 (leaky driver by root's option"
            ),
            "{}",
            r.text
        );
        assert!(
            r.text
                .contains("qp 2 (17 18), cq 1 (1) — kept by the leaky driver until reclaim\n"),
            "{}",
            r.text
        );
        assert!(
            r.text.contains(&format!(
                "qp 1 (20) (uid {}) — kept by uid {}'s own leaky option until reclaim; they \
                 count for uid {} only\n",
                other_uid(),
                other_uid(),
                other_uid()
            )),
            "{}",
            r.text
        );
        assert!(
            r.text.ends_with(
                "  ignored /b/rdmakit-soft.7/soft9/qp-1-2-3-4: not a regular file (a FIFO)\n"
            ),
            "{}",
            r.text
        );
        assert_eq!(r.json["objects"], 4);
        assert_eq!(r.json["owners"][0]["objects"].as_array().unwrap().len(), 3);
        assert_eq!(r.json["ignored"][0]["why"], "not a regular file (a FIFO)");
        assert!(!r.refused);
    }

    fn other_uid() -> u32 {
        euid().wrapping_add(1)
    }

    #[test]
    fn a_summary_lists_at_most_32_handles_per_kind() {
        let recs: Vec<Record> = (0..40)
            .map(|h| rec(Kind::Qp, h, u32::MAX - 1, Holding::Nobody))
            .collect();
        let refs: Vec<&Record> = recs.iter().collect();
        let s = summary(&refs);
        assert!(s.starts_with("qp 40 (0 1 2 "), "{s}");
        assert!(s.ends_with(" 30 31 …)"), "{s}");
    }

    #[test]
    fn reclaim_says_what_it_freed_and_refuses_live_owners() {
        let me = std::process::id();
        let rc = Reclaim {
            freed: vec![rec(Kind::Qp, 5, u32::MAX - 1, Holding::Nobody)],
            live: vec![rec(Kind::Pd, 2, me, Holding::Owner)],
            ignored: vec![Refused {
                path: PathBuf::from("/reg/junk"),
                why: "not a name rdmakit writes".into(),
            }],
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
                .contains(&format!("refused to reclaim pd 1 (2) of pid {me} (")),
            "{}",
            r.err
        );
        assert!(
            r.err
                .contains("soft9: left alone /reg/junk: not a name rdmakit writes"),
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
