//! The device's counters across processes: each open context publishes its
//! own, and a user's closed or dead contexts are folded into that user's
//! cumulative file, so the soft NIC's counters are device-wide and outlive
//! the processes that counted them, as a real NIC's `hw_counters` do.
//!
//! In a user's directory of a device (`crate::userdir`, mode 0755):
//!
//! - `hw-<pid>-<start_time>-<instance>` (mode 0644): one context's counters,
//!   rewritten whole (temporary name, then `renameat`) by its progress thread
//!   at most about once a second when they changed, and once more at close;
//! - `.hw_counters` (mode 0644): the sum of the user's contexts folded so far,
//!   and which contexts the last folds took (`folded=<pid>-<start>-<instance>`,
//!   at most [`MAX_FOLDED`]), so a context is never added twice: a reader
//!   skips a context file the cumulative file names, and a fold that died
//!   between writing the sum and removing the context files removes them
//!   next time without adding them again.
//!
//! A context's file is folded, under the user's `.lock`, once nobody holds
//! its context any more (closed, exited, killed; a forked child that inherited
//! the context keeps it unfolded until it goes), by the owner's next sweep
//! (`Registry::attach`, create, reclaim, or the closing device itself).
//!
//! Reading trusts each file only as its user's own account of its numbers:
//! opened as every registry entry is (no links, no blocking, a regular file of
//! the directory's user) and at most [`MAX_COUNTERS_BYTES`]; only the names in
//! [`NAMES`] count (others are skipped, so a newer rdmakit may add some),
//! each once, plain decimal `u64`; sums saturate. A context file naming a live
//! process of another user is forged: ignored and reported, as records are.
//! At most `MAX_ENTRIES` entries are read per directory.

use std::collections::{BTreeSet, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags};

use super::proc::{check_owner, read_fd, Owner, OwnerState};
use super::record::{parse_name, Ctx, Name};
use super::scan::{self, CtxState, Scan};
use crate::userdir::{Refused, UserDir};
use crate::TRANSPORT_COUNTERS;

/// The most bytes a counters file may have (one is about 400).
pub const MAX_COUNTERS_BYTES: usize = 4096;

/// The most contexts one fold takes, and so the most `folded=` lines in
/// the cumulative file; the rest wait for the next fold.
pub const MAX_FOLDED: usize = 64;

/// The user's cumulative file in its directory of a device.
pub const CUMULATIVE: &str = ".hw_counters";

/// The counters published, in [`Values`]' order: the port's packets
/// ([`PORT_COUNTERS`]) and then the transport counters
/// ([`crate::TRANSPORT_COUNTERS`]): [`rdmakit_types::soft_counters::ALL`],
/// the list host facts read them back by.
pub const NAMES: [&str; PORT_COUNTERS.len() + TRANSPORT_COUNTERS.len()] =
    rdmakit_types::soft_counters::ALL;

/// Of [`NAMES`], those in a port's `counters/` directory on a real device
/// (the rest are `hw_counters`).
pub const PORT_COUNTERS: [&str; 2] = rdmakit_types::soft_counters::PORT;

/// One value per name of [`NAMES`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Values(pub [u64; NAMES.len()]);

impl Values {
    /// `self + o`, each saturating.
    pub fn saturating_add(self, o: &Values) -> Values {
        Values(std::array::from_fn(|i| self.0[i].saturating_add(o.0[i])))
    }

    /// `(name, value)` pairs in [`NAMES`]' order.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        NAMES.iter().copied().zip(self.0.iter().copied())
    }

    /// The value of `name`, if it is one of [`NAMES`].
    pub fn get(&self, name: &str) -> Option<u64> {
        NAMES.iter().position(|n| *n == name).map(|i| self.0[i])
    }

    /// Any value above zero.
    pub fn any(&self) -> bool {
        self.0.iter().any(|v| *v > 0)
    }

    /// The text of a counters file (what [`parse`] reads back), with
    /// `folded` lines after the values.
    pub fn emit(&self, folded: &[Ctx]) -> String {
        let mut s: String = self.named().map(|(n, v)| format!("{n}={v}\n")).collect();
        for c in folded {
            s.push_str(&format!(
                "folded={}-{}-{}\n",
                c.pid, c.start_time, c.instance
            ));
        }
        s
    }
}

/// A counters file's content.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The values (a name the file lacks is 0).
    pub values: Values,
    /// The contexts the cumulative file says it holds.
    pub folded: Vec<Ctx>,
}

/// Parses a counters file. Pure; never panics.
///
/// # Errors
/// Why `bytes` is not a counters file: too large, not text, a line that is
/// not `key=value`, a known name twice, a value that is not a `u64`, more
/// than [`MAX_FOLDED`] `folded` lines or one that names no context.
pub fn parse(bytes: &[u8]) -> Result<Parsed, String> {
    if bytes.len() > MAX_COUNTERS_BYTES {
        return Err(format!(
            "{} bytes, more than the {MAX_COUNTERS_BYTES} a counters file may have",
            bytes.len()
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let mut out = Parsed::default();
    let mut seen = [false; NAMES.len()];
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("line {} is not key=value", n + 1))?;
        if k == "folded" {
            if out.folded.len() == MAX_FOLDED {
                return Err(format!("more than {MAX_FOLDED} folded contexts"));
            }
            match parse_name(format!("hw-{v}").as_bytes()) {
                Name::Counters(c) => out.folded.push(c),
                _ => return Err(format!("line {}: folded names no context", n + 1)),
            }
            continue;
        }
        let Some(i) = NAMES.iter().position(|name| *name == k) else {
            continue;
        };
        if std::mem::replace(&mut seen[i], true) {
            return Err(format!("{k} given twice"));
        }
        out.values.0[i] = number(v).ok_or_else(|| format!("{k} is not a u64"))?;
    }
    Ok(out)
}

/// Plain decimal digits, as a `u64` (no sign, no spaces).
fn number(v: &str) -> Option<u64> {
    (!v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit()))
        .then(|| v.parse().ok())
        .flatten()
}

/// One context's published counters, as a reader found them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextCounters {
    /// Its context.
    pub ctx: Ctx,
    /// Its owner's state (dead: closed or gone, not folded yet).
    pub owner: OwnerState,
    /// Its values.
    pub values: Values,
}

/// One user's counters of a device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserCounters {
    /// The user.
    pub uid: u32,
    /// Its total: folded contexts and those not folded yet.
    pub total: Values,
    /// What its cumulative file holds (contexts folded so far).
    pub folded: Values,
    /// Its contexts' files not folded yet (live ones and some just closed).
    pub contexts: Vec<ContextCounters>,
    /// Its directory of the device.
    pub dir: PathBuf,
}

/// A device's counters summed over every user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// The device name.
    pub name: String,
    /// Every user's, summed (saturating).
    pub total: Values,
    /// Each user's, by uid (users with a directory of the device).
    pub users: Vec<UserCounters>,
    /// Directories refused and entries ignored, with why.
    pub ignored: Vec<Refused>,
}

/// [`read_in`] under the registry base.
///
/// # Errors
/// As [`read_in`].
pub fn read(name: &str) -> io::Result<DeviceCounters> {
    read_in(&super::base(), name)
}

/// Every user's counters of device `name` under `base`, read-only.
///
/// # Errors
/// `name` cannot name a directory, or the base cannot be listed.
pub fn read_in(base: &Path, name: &str) -> io::Result<DeviceCounters> {
    super::check_device_name(name)?;
    let (users, refused) = UserDir::all_in(base)?;
    let mut out = DeviceCounters {
        name: name.to_string(),
        ignored: refused,
        ..DeviceCounters::default()
    };
    for u in users {
        match u.existing_subdir(name) {
            Ok(Some(d)) => {
                let (uc, ignored) = read_user(&d);
                out.total = out.total.saturating_add(&uc.total);
                out.users.push(uc);
                out.ignored.extend(ignored);
            }
            Ok(None) => {}
            Err(e) => out.ignored.push(Refused {
                path: u.path().join(name),
                why: e.to_string(),
            }),
        }
    }
    out.users.sort_by_key(|u| u.uid);
    Ok(out)
}

/// One user's directory of a device: its context files first, then its
/// cumulative file, whose `folded` contexts are not counted again (a fold
/// between the two reads is counted once).
fn read_user(d: &UserDir) -> (UserCounters, Vec<Refused>) {
    let mut s = Scan::default();
    let mut uc = UserCounters {
        uid: d.uid(),
        dir: d.path().to_path_buf(),
        ..UserCounters::default()
    };
    let names = match scan::names(d) {
        Ok((n, more)) => {
            if more {
                s.ignore(
                    d.path().to_path_buf(),
                    format!(
                        "holds more than {} entries: the rest were not read",
                        scan::MAX_ENTRIES
                    ),
                );
            }
            n
        }
        Err(e) => {
            s.ignore(d.path().to_path_buf(), format!("cannot be listed: {e}"));
            return (uc, s.into_ignored(d));
        }
    };
    for n in names {
        let Name::Counters(c) = parse_name(&n) else {
            continue;
        };
        let file = c.counters_name();
        let path = d.path().join(&file);
        let p = match read_file(d, &file) {
            Ok(Some(p)) => p,
            Ok(None) => continue,
            Err(why) => {
                s.ignore(path, why);
                continue;
            }
        };
        let owner = match check_owner(c.pid, c.start_time, d.uid()) {
            Owner::State(st) => st,
            Owner::Foreign(u) => {
                s.ignore(
                    path,
                    format!(
                        "names pid {}, a live process of uid {u}, in the directory of uid {}: \
                         forged",
                        c.pid,
                        d.uid()
                    ),
                );
                continue;
            }
        };
        uc.contexts.push(ContextCounters {
            ctx: c,
            owner,
            values: p.values,
        });
    }
    match read_file(d, CUMULATIVE) {
        Ok(Some(p)) => {
            let folded: BTreeSet<Ctx> = p.folded.into_iter().collect();
            uc.contexts.retain(|c| !folded.contains(&c.ctx));
            uc.folded = p.values;
        }
        Ok(None) => {}
        Err(why) => s.ignore(d.path().join(CUMULATIVE), why),
    }
    uc.contexts.sort_by_key(|c| c.ctx);
    uc.total = uc
        .contexts
        .iter()
        .fold(uc.folded, |t, c| t.saturating_add(&c.values));
    (uc, s.into_ignored(d))
}

/// A counters file of `d`'s user: `Ok(None)` when gone.
fn read_file(d: &UserDir, name: &str) -> Result<Option<Parsed>, String> {
    let Some(f) = scan::open_checked(d, name, MAX_COUNTERS_BYTES)? else {
        return Ok(None);
    };
    let b = read_fd(&f, MAX_COUNTERS_BYTES)
        .map_err(|e| format!("cannot be read: {e}"))?
        .ok_or_else(|| format!("grew past {MAX_COUNTERS_BYTES} bytes while read"))?;
    parse(&b)
        .map(Some)
        .map_err(|e| format!("not a counters file: {e}"))
}

/// Folds, in the user's own directory `own` (its lock held), the counters
/// files of contexts nobody holds (`s`: the directory just scanned) into
/// its cumulative file: the sum is written first (naming the contexts it
/// took), then their files are removed, so a fold cut short between the two
/// is finished by the next one without adding twice. `write` writes a file
/// whole under a temporary name (the registry's). Errors leave the files
/// for the next fold.
pub(crate) fn fold(own: &UserDir, s: &Scan, write: impl Fn(&str, &[u8]) -> io::Result<()>) {
    // Every create sweeps: with only live contexts' files (the usual case)
    // nothing more is read.
    let held: HashSet<Ctx> = s
        .contexts
        .iter()
        .filter(|(_, st)| matches!(st, CtxState::Held | CtxState::Unknown))
        .map(|(c, _)| *c)
        .collect();
    let held = |c: &Ctx| held.contains(c);
    if s.counters.iter().all(held) {
        return;
    }
    let unlink = |c: &Ctx| {
        matches!(
            rfs::unlinkat(own.fd(), c.counters_name().as_str(), AtFlags::empty()),
            Ok(()) | Err(rustix::io::Errno::NOENT)
        )
    };
    // An unreadable cumulative file of one's own is started again.
    let cum = read_file(own, CUMULATIVE)
        .ok()
        .flatten()
        .unwrap_or_default();
    let mut values = cum.values;
    // Contexts an earlier fold took whose files are still there.
    let mut kept: Vec<Ctx> = Vec::new();
    let mut took: Vec<Ctx> = Vec::new();
    for c in &s.counters {
        if cum.folded.contains(c) {
            if !unlink(c) {
                kept.push(*c);
            }
            continue;
        }
        if held(c) || kept.len() + took.len() >= MAX_FOLDED {
            continue;
        }
        // One naming another user's live process is no context of this
        // user's: left alone (readers report it as forged).
        if matches!(
            check_owner(c.pid, c.start_time, own.uid()),
            Owner::Foreign(_)
        ) {
            continue;
        }
        match read_file(own, &c.counters_name()) {
            Ok(Some(p)) => {
                values = values.saturating_add(&p.values);
                took.push(*c);
            }
            Ok(None) => {}
            // Not a counters file: nothing to add, nothing to keep.
            Err(_) => {
                let _ = unlink(c);
            }
        }
    }
    if took.is_empty() && kept.len() == cum.folded.len() {
        return;
    }
    kept.extend(&took);
    if write(CUMULATIVE, values.emit(&kept).as_bytes()).is_err() {
        return;
    }
    for c in &took {
        let _ = unlink(c);
    }
}

#[cfg(test)]
#[path = "counters_tests.rs"]
mod tests;
