//! Files under `/proc` (and the few one-line values the collector records about its
//! own process): modules, interrupts, IRQ affinity, resource limits, kernel release
//! and config, command line, identity.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::sysfs::{cpulist, strip, CpuSet};
use super::{lossy, ParseError, Result};

/// One line of `/proc/modules`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    /// Module name (`ib_core`).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Reference count (0 when the kernel has no module unloading and prints `-`).
    pub refcnt: u32,
    /// Modules that use this one (the `used by` column without `-` and without the
    /// bracketed markers `[permanent]` / `[unsafe]`).
    pub used_by: Vec<String>,
    /// `Live`, `Loading` or `Unloading` (empty when missing).
    pub state: String,
}

/// `/proc/interrupts`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interrupts {
    /// The header's CPU columns (`"CPU0"`, `"CPU1"`, ...; offline CPUs are absent).
    pub cpus: Vec<String>,
    /// Every line after the header, in file order.
    pub lines: Vec<IrqLine>,
}

impl Interrupts {
    /// The numbered lines (real IRQs), without the NMI/LOC/... summary lines.
    pub fn irqs(&self) -> impl Iterator<Item = &IrqLine> {
        self.lines.iter().filter(|line| line.number.is_some())
    }

    /// The line of IRQ `number`.
    pub fn irq(&self, number: u32) -> Option<&IrqLine> {
        self.lines.iter().find(|line| line.number == Some(number))
    }

    /// CPU numbers of the count columns, from the header (`"CPU3"` → 3).
    pub fn cpu_numbers(&self) -> Vec<Option<u32>> {
        self.cpus
            .iter()
            .map(|c| c.strip_prefix("CPU").and_then(|n| n.parse().ok()))
            .collect()
    }
}

/// One line of `/proc/interrupts`.
///
/// Numbered lines look like one of (by kernel age, newest first):
/// ```text
///  42:  0  12  IR-PCI-MSIX-0000:3b:00.0    0-edge      mlx5_comp0@pci:0000:3b:00.0
///  24:  0   0  PCI-MSI 49152-edge      virtio0-config
///  11: 16  17  GICv3  27 Level     arch_timer
///  88:  3   0  xen-dyn    -event     xenbus
///  67:  5   0  IR-PCI-MSI-edge      mlx5_async@pci:0000:3b:00.0
/// ```
/// Summary lines (`NMI:`, `LOC:`, `ERR:`) carry only counts (possibly fewer than
/// CPUs) and a description, which is kept in `actions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqLine {
    /// The label before the colon: `"24"` or `"NMI"`.
    pub irq: String,
    /// The label as a number, for real IRQ lines.
    pub number: Option<u32>,
    /// Per-CPU counts, in header order (fewer than CPUs for `ERR:` / `MIS:`).
    pub counts: Vec<u64>,
    /// The interrupt chip: `"PCI-MSI"`, `"IR-PCI-MSI"`, `"PCI-MSIX-0000:3b:00.0"`,
    /// `"IO-APIC"`. When an old kernel printed the trigger joined to the chip
    /// (`"IR-PCI-MSI-edge"`), the trigger is split off into `hwirq` (`"-edge"`).
    /// Empty on summary lines.
    pub chip: String,
    /// The hardware IRQ and trigger column as printed: `"49152-edge"`, `"0-edge"`,
    /// `"27 Level"`, `"-event"`; empty when absent.
    pub hwirq: String,
    /// The handler names as printed (`"mlx5_comp3@pci:0000:3b:00.0"`, several are
    /// joined by `", "`); on summary lines, the description.
    pub actions: String,
}

impl IrqLine {
    /// Sum of the per-CPU counts (saturating).
    pub fn total(&self) -> u64 {
        self.counts
            .iter()
            .fold(0u64, |acc, c| acc.saturating_add(*c))
    }

    /// The hardware IRQ number, when printed (`"49152-edge"` → 49152).
    pub fn hwirq_number(&self) -> Option<u64> {
        let digits: &str = self
            .hwirq
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap_or("");
        digits.parse().ok()
    }

    /// The trigger / flow name: `"edge"`, `"fasteoi"`, `"Level"`, `"msi-x"`.
    pub fn trigger(&self) -> Option<&str> {
        for word in self.hwirq.split_whitespace() {
            if word == "Level" || word == "Edge" {
                return Some(word);
            }
            if let Some((_, name)) = word.split_once('-') {
                if !name.is_empty() {
                    return Some(name);
                }
            }
        }
        None
    }

    /// The handler names (`actions` split at `", "`).
    pub fn action_names(&self) -> Vec<&str> {
        self.actions
            .split(", ")
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect()
    }

    /// An MSI or MSI-X vector (by chip or, on Xen, by flow name).
    pub fn is_msi(&self) -> bool {
        self.chip.to_ascii_uppercase().contains("MSI")
            || self.trigger().is_some_and(|t| t.starts_with("msi"))
    }

    /// A legacy INTx line routed through an IO-APIC (by chip, or Xen's
    /// `ioapic-*` flow).
    pub fn is_io_apic(&self) -> bool {
        self.chip.to_ascii_uppercase().contains("IO-APIC")
            || self.trigger().is_some_and(|t| t.starts_with("ioapic"))
    }

    /// A legacy INTx line: IO-APIC (also Xen's `ioapic-*` flows) or the old
    /// XT-PIC.
    pub fn is_legacy_intx(&self) -> bool {
        self.is_io_apic() || self.chip.to_ascii_uppercase().contains("XT-PIC")
    }

    /// The PCI address the line belongs to: from an `@pci:<BDF>` handler name
    /// (mlx5's `mlx5_comp0@pci:0000:3b:00.0`) or from a per-device MSI chip
    /// (`PCI-MSIX-0000:3b:00.0`).
    pub fn pci_address(&self) -> Option<&str> {
        if let Some((_, after)) = self.actions.split_once("@pci:") {
            let bdf = after
                .split(|c: char| c == ',' || c.is_whitespace())
                .next()
                .unwrap_or("");
            if !bdf.is_empty() {
                return Some(bdf);
            }
        }
        for marker in ["MSIX-", "MSI-"] {
            if let Some((_, bdf)) = self.chip.split_once(marker) {
                if bdf.contains(':') {
                    return Some(bdf);
                }
            }
        }
        None
    }
}

/// One resource limit value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Limit {
    /// `unlimited` (or RLIM_INFINITY printed as a number).
    Unlimited,
    /// A finite limit, in the limit's unit (bytes for locked memory).
    Bytes(u64),
}

impl Limit {
    /// The finite value, `None` when unlimited.
    pub fn bytes(&self) -> Option<u64> {
        match self {
            Limit::Unlimited => None,
            Limit::Bytes(n) => Some(*n),
        }
    }

    /// The limit allows at least `n`.
    pub fn allows(&self, n: u64) -> bool {
        match self {
            Limit::Unlimited => true,
            Limit::Bytes(limit) => *limit >= n,
        }
    }
}

/// `/proc/<pid>/limits`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `Max locked memory`, soft limit (bytes).
    pub memlock_soft: Option<Limit>,
    /// `Max locked memory`, hard limit (bytes).
    pub memlock_hard: Option<Limit>,
    /// `Max open files`, soft limit.
    pub nofile_soft: Option<Limit>,
    /// `Max open files`, hard limit.
    pub nofile_hard: Option<Limit>,
    /// Every row: name (`"Max locked memory"`) → (soft, hard).
    pub all: BTreeMap<String, (Limit, Limit)>,
}

/// A kernel release such as `6.1.0-57-amd64`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelRelease {
    /// `6`
    pub major: u32,
    /// `1`
    pub minor: u32,
    /// `0` (0 when the release has only two numbers, e.g. `6.8-rc1`)
    pub patch: u32,
    /// The release as read.
    pub raw: String,
}

impl KernelRelease {
    /// `(major, minor, patch)`, for comparisons.
    pub fn version(&self) -> (u32, u32, u32) {
        (self.major, self.minor, self.patch)
    }
}

/// The user and groups of a process, as the collector records them:
/// `"uid=0 euid=0 gid=0 egid=0 groups=0,1"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Real user id.
    pub uid: u32,
    /// Effective user id.
    pub euid: u32,
    /// Real group id.
    pub gid: u32,
    /// Effective group id.
    pub egid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

/// Parses `/proc/modules`, skipping lines that do not parse (see
/// [`modules_checked`] to get them).
pub fn modules(bytes: &[u8]) -> Vec<Module> {
    modules_checked(bytes).0
}

/// Parses `/proc/modules`: the modules, and the lines that did not parse.
pub fn modules_checked(bytes: &[u8]) -> (Vec<Module>, Vec<String>) {
    let text = lossy(bytes);
    let mut modules = Vec::new();
    let mut bad = Vec::new();
    for line in text.lines() {
        let line = strip(line);
        if line.trim().is_empty() {
            continue;
        }
        match module_line(line) {
            Some(module) => modules.push(module),
            None => bad.push(line.to_string()),
        }
    }
    (modules, bad)
}

/// Parses `/proc/interrupts`. Lines that do not have a `label:` are skipped.
///
/// # Errors
/// When the first non-empty line is not the `CPU0 CPU1 ...` header.
pub fn interrupts(bytes: &[u8]) -> Result<Interrupts> {
    let text = lossy(bytes);
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().unwrap_or("");
    let cpus: Vec<String> = header.split_whitespace().map(str::to_string).collect();
    if cpus.is_empty() || !cpus.iter().all(|c| c.starts_with("CPU")) {
        return Err(ParseError::new("/proc/interrupts header", header));
    }
    let lines = lines
        .filter_map(|l| irq_line(strip(l), cpus.len()))
        .collect();
    Ok(Interrupts { cpus, lines })
}

/// Parses `/proc/irq/<n>/smp_affinity_list` (or `effective_affinity_list`): a CPU
/// list.
///
/// # Errors
/// As [`cpulist`].
pub fn affinity_list(s: &str) -> Result<CpuSet> {
    cpulist(s)
}

/// Parses `/proc/<pid>/limits`.
///
/// # Errors
/// When no row has a soft and a hard value (not a limits file).
pub fn limits(bytes: &[u8]) -> Result<Limits> {
    let text = lossy(bytes);
    let mut out = Limits::default();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(first_value) = words.iter().position(|w| limit_value(w).is_some()) else {
            continue;
        };
        if first_value == 0 {
            continue;
        }
        let (Some(soft), Some(hard)) = (
            words.get(first_value).and_then(|w| limit_value(w)),
            words.get(first_value + 1).and_then(|w| limit_value(w)),
        ) else {
            continue;
        };
        let name = words.get(..first_value).unwrap_or_default().join(" ");
        match name.as_str() {
            "Max locked memory" => {
                out.memlock_soft = Some(soft);
                out.memlock_hard = Some(hard);
            }
            "Max open files" => {
                out.nofile_soft = Some(soft);
                out.nofile_hard = Some(hard);
            }
            _ => {}
        }
        out.all.insert(name, (soft, hard));
    }
    if out.all.is_empty() {
        let first = text.lines().next().unwrap_or("");
        return Err(ParseError::new("/proc/<pid>/limits", first));
    }
    Ok(out)
}

/// Parses `"SOFT HARD"`, each a number or `unlimited` (RLIM_INFINITY as a number
/// also means unlimited).
///
/// # Errors
/// Anything but exactly two such words.
pub fn rlimit_probe(s: &str) -> Result<(Limit, Limit)> {
    let text = strip(s).trim();
    let mut words = text.split_whitespace();
    match (
        words.next().and_then(limit_value),
        words.next().and_then(limit_value),
        words.next(),
    ) {
        (Some(soft), Some(hard), None) => Ok((soft, hard)),
        _ => Err(ParseError::new("rlimit", text)),
    }
}

/// Parses a kernel release (`/proc/sys/kernel/osrelease`, `uname -r`):
/// `"6.1.0-57-amd64"`, `"5.14.0-362.el9.x86_64"`, `"6.12.117+deb12-amd64"`,
/// `"6.8-rc1"`.
///
/// # Errors
/// When it does not start with `<major>.<minor>`.
pub fn kernel_release(s: &str) -> Result<KernelRelease> {
    let raw = strip(s).trim();
    let err = || ParseError::new("kernel release", raw);
    let numbers_end = raw
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(raw.len());
    let mut parts = raw[..numbers_end].split('.');
    let mut number = |required: bool| -> Result<u32> {
        match parts.next() {
            Some(p) if !p.is_empty() => p.parse::<u32>().map_err(|_| err()),
            None | Some(_) if !required => Ok(0),
            _ => Err(err()),
        }
    };
    let major = number(true)?;
    let minor = number(true)?;
    let patch = number(false)?;
    Ok(KernelRelease {
        major,
        minor,
        patch,
        raw: raw.to_string(),
    })
}

/// Parses a host name file (`/proc/sys/kernel/hostname`, `/etc/hostname`): the first
/// line that is neither empty nor a `#` comment, trimmed. Host names are at most 253
/// characters of letters, digits, `-`, `_` and `.` (RFC 1123 plus the underscores
/// real clusters use).
///
/// # Errors
/// When no such line exists or it holds other characters.
pub fn hostname(s: &str) -> Result<String> {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .ok_or_else(|| ParseError::new("host name", s))?;
    let ok = line.len() <= 253
        && line
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(ParseError::new("host name", line));
    }
    Ok(line.to_string())
}

/// Parses `/proc/sys/kernel/random/boot_id`: one word of hex digits and dashes
/// (a UUID, which the kernel draws anew at every boot).
///
/// # Errors
/// Empty, longer than 64 characters, or other characters.
pub fn boot_id(s: &str) -> Result<String> {
    let id = s.trim();
    let ok =
        !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if !ok {
        return Err(ParseError::new("boot id", id));
    }
    Ok(id.to_string())
}

/// The parent's pid from `/proc/PID/status` (its `PPid:` line).
///
/// # Errors
/// No `PPid:` line, or not a number.
pub fn status_ppid(bytes: &[u8]) -> Result<u32> {
    let text = lossy(bytes);
    text.lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| ParseError::new("PPid in /proc/PID/status", &text))
}

/// The NUL-separated strings of `/proc/PID/cmdline` or `/proc/PID/environ`
/// (empty ones dropped).
pub fn nul_separated(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// Parses a kernel config (`/proc/config.gz` after decompression, or
/// `/boot/config-*`): `CONFIG_X=value` (value as written, quotes kept) and
/// `# CONFIG_X is not set` → `"n"`. Other lines are ignored.
pub fn kernel_config(bytes: &[u8]) -> BTreeMap<String, String> {
    let text = lossy(bytes);
    let mut config = BTreeMap::new();
    for line in text.lines() {
        let line = strip(line).trim_start();
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some(name) = rest.strip_suffix(" is not set") {
                if name.starts_with("CONFIG_") && !name.contains(char::is_whitespace) {
                    config.insert(name.to_string(), "n".to_string());
                }
            }
        } else if line.starts_with("CONFIG_") {
            if let Some((name, value)) = line.split_once('=') {
                if !name.contains(char::is_whitespace) {
                    config.insert(name.to_string(), value.to_string());
                }
            }
        }
    }
    config
}

/// Splits a kernel command line into `(key, value)` pairs, in order. Double quotes
/// group words (`opt="a b"`) and are removed; `quiet` gives `("quiet", None)`.
pub fn cmdline(s: &str) -> Vec<(String, Option<String>)> {
    let mut params = Vec::new();
    let mut current = String::new();
    let mut in_token = false;
    let mut quoted = false;
    for c in strip(s).chars() {
        match c {
            '"' => {
                quoted = !quoted;
                in_token = true;
            }
            c if c.is_whitespace() && !quoted => {
                if in_token {
                    params.push(split_param(&current));
                    current.clear();
                    in_token = false;
                }
            }
            c => {
                current.push(c);
                in_token = true;
            }
        }
    }
    if in_token {
        params.push(split_param(&current));
    }
    params
}

/// Parses `"uid=0 euid=0 gid=0 egid=0 groups=0,1"` (keys in any order; `groups`
/// may be empty or missing).
///
/// # Errors
/// A missing or non-numeric id, or an unknown key.
pub fn identity(s: &str) -> Result<Identity> {
    let text = strip(s).trim();
    let err = || ParseError::new("identity", text);
    let (mut uid, mut euid, mut gid, mut egid) = (None, None, None, None);
    let mut groups = Vec::new();
    for word in text.split_whitespace() {
        let (key, value) = word.split_once('=').ok_or_else(err)?;
        let id = || value.parse::<u32>().map_err(|_| err());
        match key {
            "uid" => uid = Some(id()?),
            "euid" => euid = Some(id()?),
            "gid" => gid = Some(id()?),
            "egid" => egid = Some(id()?),
            "groups" => {
                groups = value
                    .split(',')
                    .filter(|g| !g.is_empty())
                    .map(|g| g.parse::<u32>().map_err(|_| err()))
                    .collect::<Result<Vec<u32>>>()?;
            }
            _ => return Err(err()),
        }
    }
    match (uid, euid, gid, egid) {
        (Some(uid), Some(euid), Some(gid), Some(egid)) => Ok(Identity {
            uid,
            euid,
            gid,
            egid,
            groups,
        }),
        _ => Err(err()),
    }
}

// ---------------------------------------------------------------------------
// helpers

fn module_line(line: &str) -> Option<Module> {
    let mut words = line.split_whitespace();
    let name = words.next()?;
    let size = words.next()?.parse::<u64>().ok()?;
    let refcnt = match words.next()? {
        "-" => 0,
        n => n.parse::<u32>().ok()?,
    };
    let used_by = words
        .next()?
        .split(',')
        .filter(|m| !m.is_empty() && *m != "-" && !m.starts_with('['))
        .map(str::to_string)
        .collect();
    let state = words.next().unwrap_or("").to_string();
    Some(Module {
        name: name.to_string(),
        size,
        refcnt,
        used_by,
        state,
    })
}

/// Flow-handler names an old kernel joined to the chip name (`IO-APIC-edge`),
/// longest first so `xen-pirq-ioapic-level` splits as `xen-pirq` + `ioapic-level`.
const JOINED_TRIGGERS: [&str; 12] = [
    "ioapic-level",
    "ioapic-edge",
    "percpu_devid",
    "msi-x",
    "fasteoi",
    "percpu",
    "simple",
    "level",
    "event",
    "edge",
    "virq",
    "ipi",
];

/// Words of `s` with their byte offsets.
fn words_with_offsets(s: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(st)) => {
                out.push((st, &s[st..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(st) = start {
        out.push((st, &s[st..]));
    }
    out
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn irq_line(line: &str, ncpus: usize) -> Option<IrqLine> {
    let (label, rest) = line.split_once(':')?;
    let label = label.trim();
    if label.is_empty() || label.contains(char::is_whitespace) {
        return None;
    }
    let number = if all_digits(label) {
        label.parse::<u32>().ok()
    } else {
        None
    };
    let words = words_with_offsets(rest);
    let mut counts = Vec::new();
    let mut next = 0;
    while counts.len() < ncpus {
        let Some(count) = words
            .get(next)
            .filter(|(_, w)| all_digits(w))
            .and_then(|(_, w)| w.parse::<u64>().ok())
        else {
            break;
        };
        counts.push(count);
        next += 1;
    }
    let from = |index: usize| -> &str {
        words
            .get(index)
            .map(|(offset, _)| rest.get(*offset..).unwrap_or("").trim_end())
            .unwrap_or("")
    };
    let mut out = IrqLine {
        irq: label.to_string(),
        number,
        counts,
        chip: String::new(),
        hwirq: String::new(),
        actions: String::new(),
    };
    if number.is_none() {
        out.actions = from(next).to_string();
        return Some(out);
    }
    let Some((_, chip)) = words.get(next) else {
        return Some(out);
    };
    let hw_start = next + 1;
    let mut end = hw_start;
    if let Some((_, word)) = words.get(end) {
        let digits_dash = word
            .split_once('-')
            .is_some_and(|(n, t)| all_digits(n) && !t.is_empty());
        if all_digits(word) {
            end += 1;
            if words
                .get(end)
                .is_some_and(|(_, w)| *w == "Level" || *w == "Edge")
            {
                end += 1;
            }
            if words
                .get(end)
                .is_some_and(|(_, w)| w.len() > 1 && w.starts_with('-'))
            {
                end += 1;
            }
        } else if digits_dash || (word.len() > 1 && word.starts_with('-')) {
            end += 1;
        }
    }
    if end > hw_start {
        let first = words.get(hw_start).map_or(0, |(o, _)| *o);
        let last = words
            .get(end - 1)
            .map_or(first, |(o, w)| o.saturating_add(w.len()));
        out.chip = (*chip).to_string();
        out.hwirq = rest.get(first..last).unwrap_or("").to_string();
    } else {
        // An old kernel's "IR-PCI-MSI-edge": split the flow name off the chip.
        let joined = JOINED_TRIGGERS.iter().find_map(|t| {
            chip.strip_suffix(t)
                .and_then(|c| c.strip_suffix('-'))
                .filter(|c| !c.is_empty())
                .map(|c| (c, *t))
        });
        match joined {
            Some((bare, trigger)) => {
                out.chip = bare.to_string();
                out.hwirq = format!("-{trigger}");
            }
            None => out.chip = (*chip).to_string(),
        }
    }
    out.actions = from(end).to_string();
    Some(out)
}

/// A number or `unlimited`; RLIM_INFINITY (u64::MAX) is unlimited too.
fn limit_value(word: &str) -> Option<Limit> {
    if word == "unlimited" || word == "infinity" {
        return Some(Limit::Unlimited);
    }
    if !all_digits(word) {
        return None;
    }
    match word.parse::<u64>().ok()? {
        u64::MAX => Some(Limit::Unlimited),
        n => Some(Limit::Bytes(n)),
    }
}

fn split_param(token: &str) -> (String, Option<String>) {
    match token.split_once('=') {
        Some((key, value)) => (key.to_string(), Some(value.to_string())),
        None => (token.to_string(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEALTHY_INTERRUPTS: &str = include_str!("testdata/healthy-proc-interrupts.txt");
    const HEALTHY_MODULES: &str = include_str!("testdata/healthy-proc-modules.txt");
    const HEALTHY_LIMITS: &str = include_str!("testdata/healthy-proc-self-limits.txt");

    #[test]
    fn boot_id_ppid_and_nul_separated_strings() {
        // A real boot id, and the kernel's own trailing newline.
        let id = "fbcc2b86-4c9b-4d1e-9c58-0f4b2a3e5d71";
        assert_eq!(boot_id(&format!("{id}\n")).unwrap(), id);
        assert!(boot_id("").is_err());
        assert!(boot_id("not a boot id").is_err());
        assert!(boot_id(&"a".repeat(65)).is_err());
        assert_eq!(
            status_ppid(b"Name:\tx\nPPid:\t1234\nTracerPid:\t0\n").unwrap(),
            1234
        );
        assert!(status_ppid(b"garbage").is_err());
        assert_eq!(nul_separated(b"a\0b\0\0"), vec!["a", "b"]);
    }

    #[test]
    fn hostname_files() {
        assert_eq!(hostname("gpu-node17\n").unwrap(), "gpu-node17");
        assert_eq!(
            hostname("# set by cloud-init\n\n  node01.cluster.local \n").unwrap(),
            "node01.cluster.local"
        );
        assert!(hostname("").is_err());
        assert!(hostname("# only a comment\n").is_err());
        assert!(hostname("bad name with spaces").is_err());
        assert!(hostname(&"a".repeat(254)).is_err());
    }

    // --- healthy/ (Soft-RoCE VM, Debian 12 kernel 6.1) --------------------------

    #[test]
    fn healthy_proc_interrupts_header_and_lines() {
        let irqs = interrupts(HEALTHY_INTERRUPTS.as_bytes()).unwrap();
        assert_eq!(irqs.cpus, vec!["CPU0", "CPU1"]);
        assert_eq!(irqs.cpu_numbers(), vec![Some(0), Some(1)]);
        assert_eq!(irqs.lines.len(), 31);
        assert_eq!(irqs.irqs().count(), 12);
        let timer = irqs.irq(0).unwrap();
        assert_eq!(timer.counts, vec![100, 0]);
        assert_eq!(timer.chip, "IO-APIC");
        assert_eq!(timer.hwirq, "2-edge");
        assert_eq!(timer.actions, "timer");
        assert!(timer.is_io_apic() && !timer.is_msi());
        assert_eq!(timer.trigger(), Some("edge"));
        assert_eq!(timer.hwirq_number(), Some(2));
    }

    #[test]
    fn healthy_proc_interrupts_virtio_msi() {
        let irqs = interrupts(HEALTHY_INTERRUPTS.as_bytes()).unwrap();
        let line = irqs.irq(25).unwrap();
        assert_eq!(
            line,
            &IrqLine {
                irq: "25".into(),
                number: Some(25),
                counts: vec![0, 1],
                chip: "PCI-MSI".into(),
                hwirq: "49153-edge".into(),
                actions: "virtio0-input.0".into(),
            }
        );
        assert!(line.is_msi());
        assert_eq!(line.total(), 1);
        assert_eq!(line.pci_address(), None);
        let acpi = irqs.irq(9).unwrap();
        assert_eq!(acpi.hwirq, "9-fasteoi");
        assert_eq!(acpi.trigger(), Some("fasteoi"));
    }

    #[test]
    fn healthy_proc_interrupts_summary_lines() {
        let irqs = interrupts(HEALTHY_INTERRUPTS.as_bytes()).unwrap();
        let nmi = irqs.lines.iter().find(|l| l.irq == "NMI").unwrap();
        assert_eq!(nmi.number, None);
        assert_eq!(nmi.counts, vec![0, 0]);
        assert_eq!(nmi.actions, "Non-maskable interrupts");
        assert_eq!(nmi.chip, "");
        let loc = irqs.lines.iter().find(|l| l.irq == "LOC").unwrap();
        assert_eq!(loc.total(), 5396 + 5293);
        let err = irqs.lines.iter().find(|l| l.irq == "ERR").unwrap();
        assert_eq!(err.counts, vec![0]);
        assert_eq!(err.actions, "");
        let mis = irqs.lines.iter().find(|l| l.irq == "MIS").unwrap();
        assert_eq!(mis.counts, vec![0]);
    }

    #[test]
    fn healthy_proc_modules() {
        let (mods, bad) = modules_checked(HEALTHY_MODULES.as_bytes());
        assert!(bad.is_empty());
        assert_eq!(mods.len(), 22);
        let ib_core = mods.iter().find(|m| m.name == "ib_core").unwrap();
        assert_eq!(ib_core.size, 442_368);
        assert_eq!(ib_core.refcnt, 7);
        assert_eq!(
            ib_core.used_by,
            vec![
                "rdma_rxe",
                "rdma_ucm",
                "rdma_cm",
                "iw_cm",
                "ib_cm",
                "ib_umad",
                "ib_uverbs"
            ]
        );
        assert_eq!(ib_core.state, "Live");
        let umad = mods.iter().find(|m| m.name == "ib_umad").unwrap();
        assert!(umad.used_by.is_empty());
        assert_eq!(modules(HEALTHY_MODULES.as_bytes()), mods);
    }

    #[test]
    fn healthy_proc_self_limits_memlock_8mib() {
        let l = limits(HEALTHY_LIMITS.as_bytes()).unwrap();
        assert_eq!(l.memlock_soft, Some(Limit::Bytes(8_388_608)));
        assert_eq!(l.memlock_hard, Some(Limit::Bytes(8_388_608)));
        assert_eq!(l.nofile_soft, Some(Limit::Bytes(1024)));
        assert_eq!(l.nofile_hard, Some(Limit::Bytes(4096)));
        assert_eq!(
            l.all.get("Max cpu time"),
            Some(&(Limit::Unlimited, Limit::Unlimited))
        );
        assert_eq!(
            l.all.get("Max stack size"),
            Some(&(Limit::Bytes(8_388_608), Limit::Unlimited))
        );
        assert_eq!(l.all.len(), 16);
        assert!(l.memlock_soft.unwrap().allows(65_536));
        assert!(!l.memlock_soft.unwrap().allows(1 << 30));
    }

    #[test]
    fn healthy_osrelease() {
        let k = kernel_release("6.1.0-57-amd64\n").unwrap();
        assert_eq!(k.version(), (6, 1, 0));
        assert_eq!(k.raw, "6.1.0-57-amd64");
    }

    #[test]
    fn healthy_proc_cmdline() {
        let params = cmdline(
            "console=ttyS0 panic=-1 quiet loglevel=4 rdmacap.mode=multi rdmacap.ip=10.0.2.15/24 \n",
        );
        assert_eq!(params.len(), 6);
        assert_eq!(params[0], ("console".into(), Some("ttyS0".into())));
        assert_eq!(params[2], ("quiet".into(), None));
        assert_eq!(
            params[5],
            ("rdmacap.ip".into(), Some("10.0.2.15/24".into()))
        );
    }

    // --- formats from other kernels ---------------------------------------------

    #[test]
    fn interrupts_per_device_msix_chip_kernel_6_2_plus() {
        let text = "            CPU0       CPU1       CPU2       CPU3\n\
             142:          0          0         57          0  IR-PCI-MSIX-0000:3b:00.0    0-edge      mlx5_comp0@pci:0000:3b:00.0\n\
             143:          0         12          0          0  IR-PCI-MSIX-0000:3b:00.0    1-edge      mlx5_async0@pci:0000:3b:00.0, other handler\n";
        let irqs = interrupts(text.as_bytes()).unwrap();
        assert_eq!(irqs.lines.len(), 2);
        let l = &irqs.lines[0];
        assert_eq!(l.chip, "IR-PCI-MSIX-0000:3b:00.0");
        assert_eq!(l.hwirq, "0-edge");
        assert_eq!(l.actions, "mlx5_comp0@pci:0000:3b:00.0");
        assert_eq!(l.counts, vec![0, 0, 57, 0]);
        assert_eq!(l.pci_address(), Some("0000:3b:00.0"));
        assert!(l.is_msi());
        let l = &irqs.lines[1];
        assert_eq!(
            l.action_names(),
            vec!["mlx5_async0@pci:0000:3b:00.0", "other handler"]
        );
    }

    #[test]
    fn interrupts_old_kernel_chip_and_trigger_joined() {
        let text = "           CPU0       CPU1\n\
              0:        127          0   IO-APIC-edge      timer\n\
              9:          0          0   IO-APIC-fasteoi   acpi\n\
             67:       2193          0   IR-PCI-MSI-edge      mlx5_async@pci:0000:3b:00.0\n\
             70:          5          0   PCI-MSI-X      eth0-0\n";
        let irqs = interrupts(text.as_bytes()).unwrap();
        let l = irqs.irq(67).unwrap();
        assert_eq!(l.chip, "IR-PCI-MSI");
        assert_eq!(l.hwirq, "-edge");
        assert_eq!(l.trigger(), Some("edge"));
        assert_eq!(l.actions, "mlx5_async@pci:0000:3b:00.0");
        assert_eq!(l.hwirq_number(), None);
        let timer = irqs.irq(0).unwrap();
        assert_eq!(
            (timer.chip.as_str(), timer.hwirq.as_str()),
            ("IO-APIC", "-edge")
        );
        assert!(timer.is_io_apic());
        assert_eq!(irqs.irq(9).unwrap().trigger(), Some("fasteoi"));
        let msix = irqs.irq(70).unwrap();
        assert_eq!(msix.chip, "PCI-MSI-X");
        assert_eq!(msix.hwirq, "");
        assert_eq!(msix.actions, "eth0-0");
    }

    #[test]
    fn interrupts_xen_chips() {
        let text = "           CPU0       CPU1\n\
             72:       1345          0  xen-percpu    -virq      timer0\n\
             88:        345          0   xen-dyn    -event     xenbus\n\
             105:     12345          0  xen-pirq    -msi-x     mlx5_comp0@pci:0000:00:05.0\n\
             106:         3          0  xen-pirq-msi       eth0\n\
             107:         0          0  xen-pirq-ioapic-level  acpi\n";
        let irqs = interrupts(text.as_bytes()).unwrap();
        let l = irqs.irq(105).unwrap();
        assert_eq!(l.chip, "xen-pirq");
        assert_eq!(l.hwirq, "-msi-x");
        assert_eq!(l.trigger(), Some("msi-x"));
        assert!(l.is_msi());
        assert_eq!(l.pci_address(), Some("0000:00:05.0"));
        assert_eq!(irqs.irq(88).unwrap().actions, "xenbus");
        let old = irqs.irq(106).unwrap();
        assert_eq!(
            (old.chip.as_str(), old.hwirq.as_str()),
            ("xen-pirq-msi", "")
        );
        let intx = irqs.irq(107).unwrap();
        assert_eq!(intx.chip, "xen-pirq");
        assert!(intx.is_io_apic() && intx.is_legacy_intx());
        let text = "           CPU0\n  0:     100   XT-PIC-XT        timer\n";
        let pic = interrupts(text.as_bytes()).unwrap();
        assert!(pic.lines[0].is_legacy_intx() && !pic.lines[0].is_io_apic());
    }

    #[test]
    fn interrupts_arm64_gic_and_its() {
        let text = "           CPU0       CPU1\n\
              11:      16953      17030     GICv3  27 Level     arch_timer\n\
              47:          0          3   ITS-MSI 524288 Edge      mlx5_async0@pci:0000:01:00.0\n\
            IPI0:       1234       5678       Rescheduling interrupts\n\
             Err:          0\n";
        let irqs = interrupts(text.as_bytes()).unwrap();
        let l = irqs.irq(11).unwrap();
        assert_eq!((l.chip.as_str(), l.hwirq.as_str()), ("GICv3", "27 Level"));
        assert_eq!(l.trigger(), Some("Level"));
        assert_eq!(l.actions, "arch_timer");
        let l = irqs.irq(47).unwrap();
        assert_eq!(l.hwirq_number(), Some(524_288));
        assert!(l.is_msi());
        assert_eq!(irqs.lines[2].actions, "Rescheduling interrupts");
        assert_eq!(irqs.lines[3].counts, vec![0]);
    }

    #[test]
    fn interrupts_garbage() {
        assert!(interrupts(b"").is_err());
        assert!(interrupts(b"not a header\n").is_err());
        let irqs = interrupts(b"CPU0\nno colon here\n 5:\n 6: 1 2 3 chip\n").unwrap();
        assert_eq!(irqs.lines.len(), 2);
        assert_eq!(irqs.lines[0].counts, Vec::<u64>::new());
        assert_eq!(irqs.lines[1].counts, vec![1]);
        assert_eq!(irqs.lines[1].chip, "2");
        assert_eq!(irqs.lines[1].hwirq, "3");
        assert_eq!(irqs.lines[1].actions, "chip");
    }

    #[test]
    fn modules_odd_lines() {
        let text = b"nvidia 56344576 1 [permanent], Live 0x0 (POE)\n\
                     nounload 1000 - - Live 0x0\n\
                     broken\n\
                     mlx5_ib 454656 0 - Loading 0xffffffffc0a00000\n";
        let (mods, bad) = modules_checked(text);
        assert_eq!(mods.len(), 3);
        assert!(mods[0].used_by.is_empty());
        assert_eq!(mods[1].refcnt, 0);
        assert_eq!(mods[2].state, "Loading");
        assert_eq!(bad, vec!["broken"]);
    }

    #[test]
    fn limits_garbage() {
        assert!(limits(b"").is_err());
        assert!(limits(b"Limit Soft Limit Hard Limit Units\n").is_err());
        let l = limits(b"Max locked memory 65536 unlimited bytes\n").unwrap();
        assert_eq!(l.memlock_soft, Some(Limit::Bytes(65_536)));
        assert_eq!(l.memlock_hard, Some(Limit::Unlimited));
    }

    #[test]
    fn rlimit_probes() {
        assert_eq!(
            rlimit_probe("8388608 8388608\n").unwrap(),
            (Limit::Bytes(8_388_608), Limit::Bytes(8_388_608))
        );
        assert_eq!(
            rlimit_probe("unlimited unlimited").unwrap(),
            (Limit::Unlimited, Limit::Unlimited)
        );
        assert_eq!(
            rlimit_probe("65536 18446744073709551615").unwrap(),
            (Limit::Bytes(65_536), Limit::Unlimited)
        );
        assert!(rlimit_probe("65536").is_err());
        assert!(rlimit_probe("1 2 3").is_err());
        assert!(rlimit_probe("-1 -1").is_err());
    }

    #[test]
    fn kernel_releases() {
        assert_eq!(
            kernel_release("5.14.0-362.el9.x86_64").unwrap().version(),
            (5, 14, 0)
        );
        assert_eq!(
            kernel_release("6.12.117+deb12-amd64").unwrap().version(),
            (6, 12, 117)
        );
        assert_eq!(kernel_release("6.8-rc1").unwrap().version(), (6, 8, 0));
        assert_eq!(kernel_release("4.4").unwrap().version(), (4, 4, 0));
        assert!(kernel_release("").is_err());
        assert!(kernel_release("6").is_err());
        assert!(kernel_release("linux").is_err());
        assert!(kernel_release("99999999999.1").is_err());
    }

    #[test]
    fn kernel_configs() {
        let cfg = kernel_config(
            b"#\n# Automatically generated file; DO NOT EDIT.\nCONFIG_INFINIBAND=m\n\
              CONFIG_INFINIBAND_USER_ACCESS=m\n# CONFIG_INFINIBAND_EXP_LEGACY_VERBS_NEW_UAPI is not set\n\
              CONFIG_LOCALVERSION=\"\"\nCONFIG_NR_CPUS=8192\ngarbage\n",
        );
        assert_eq!(cfg.get("CONFIG_INFINIBAND").map(String::as_str), Some("m"));
        assert_eq!(
            cfg.get("CONFIG_INFINIBAND_EXP_LEGACY_VERBS_NEW_UAPI")
                .map(String::as_str),
            Some("n")
        );
        assert_eq!(
            cfg.get("CONFIG_LOCALVERSION").map(String::as_str),
            Some("\"\"")
        );
        assert_eq!(cfg.len(), 5);
    }

    #[test]
    fn cmdline_quotes() {
        let p = cmdline("root=/dev/sda1 opt=\"a b\" \"x=y z\" intel_iommu=on iommu=pt");
        assert_eq!(p[1], ("opt".into(), Some("a b".into())));
        assert_eq!(p[2], ("x".into(), Some("y z".into())));
        assert_eq!(p[4], ("iommu".into(), Some("pt".into())));
        assert!(cmdline("").is_empty());
        assert_eq!(cmdline("\"\"").len(), 1);
    }

    #[test]
    fn identities() {
        let id = identity("uid=0 euid=0 gid=0 egid=0 groups=0,1\n").unwrap();
        assert_eq!(id.groups, vec![0, 1]);
        let id = identity("uid=1000 euid=1000 gid=1000 egid=1000 groups=").unwrap();
        assert_eq!(id.uid, 1000);
        assert!(id.groups.is_empty());
        assert!(identity("uid=0").is_err());
        assert!(identity("uid=x euid=0 gid=0 egid=0").is_err());
        assert!(identity("uid=0 euid=0 gid=0 egid=0 shell=sh").is_err());
    }

    #[test]
    fn affinity_lists() {
        assert_eq!(affinity_list("0-1\n").unwrap().0, vec![0, 1]);
        assert!(affinity_list("x").is_err());
    }
}
