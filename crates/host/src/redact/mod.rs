//! `rdmakit collect --redact`: a bundle that can be attached to a public ticket.
//!
//! Host names, GUIDs (node, system image, port; GIDs), serials (board ids, PCI VPD
//! and Device Serial Numbers, DMI serials and UUIDs, `serial` attributes, the
//! boot id), MAC
//! addresses and IP addresses are replaced wherever they occur — file contents
//! (the kernel log, sysfs values, `/proc/net` files in their hex forms), binary
//! answers (RDMA netlink replies, VPD, PCI config space), paths, directory
//! entries, link targets and the bundle's header — by placeholders of the same
//! kind ([`map`] lists them). The same original always becomes the same
//! placeholder within a bundle, and a placeholder keeps what the doctor reasons
//! about: an IPv4-mapped GID stays IPv4-mapped, a link-local one link-local, a
//! node GUID made from a MAC stays that MAC's EUI-64, hosts of one /24 stay in
//! one /24, binary answers keep their length. So `rdmakit doctor --from` the
//! redacted bundle reaches the same findings as from the original.
//!
//! It works in two passes: every record is read for identifiers first (so that no
//! placeholder is chosen that is itself an original), then every record is
//! rewritten. Nothing is kept of the mapping.
//!
//! ```
//! use rdmakit_host::bundle::Bundle;
//! use rdmakit_host::source::{Answer, Op};
//! let mut b = Bundle::new(Bundle::header_now("doc", Default::default()), Default::default());
//! b.set(Op::Read, "/proc/sys/kernel/hostname", Answer::Data(b"node17\n".to_vec()));
//! b.set(Op::Read, "/sys/class/net/eth0/address", Answer::Data(b"52:54:00:12:34:56\n".to_vec()));
//! let r = rdmakit_host::redact::redact(&b);
//! let json = String::from_utf8(r.bundle.to_json()).unwrap();
//! assert!(!json.contains("node17") && !json.contains("52:54:00:12:34:56"));
//! assert!(json.contains("host1") && json.contains("00:00:5e:00:53:01"));
//! assert_eq!((r.counts.hostnames, r.counts.macs), (1, 1));
//! ```

mod binary;
mod map;
mod text;

use std::collections::BTreeMap;

pub use map::Counts;
use map::{Maps, WordKind};

use crate::bundle::Bundle;
use crate::source::{Answer, Entry, Op};

/// A redacted bundle and how many identifiers of each kind it replaced.
#[derive(Debug)]
pub struct Redacted {
    pub bundle: Bundle,
    pub counts: Counts,
}

/// Files whose whole content is a serial number or asset identifier.
const SERIAL_FILES: &[&str] = &[
    "serial",
    "serial_number",
    "product_serial",
    "board_serial",
    "chassis_serial",
    "product_uuid",
    "board_asset_tag",
    "chassis_asset_tag",
    // /proc/sys/kernel/random/boot_id: names one boot of one host.
    "boot_id",
];

/// Package databases: versions, not addresses.
const PACKAGE_DBS: &[&str] = &["/var/lib/dpkg/", "/var/lib/rpm/"];

/// Files whose whole content is the host's name.
const HOSTNAME_FILES: &[&str] = &["/proc/sys/kernel/hostname", "/etc/hostname"];

/// The bundle with every identifier replaced (see the module doc).
pub fn redact(b: &Bundle) -> Redacted {
    let mut maps = Maps::default();
    let keys = b.keys();
    for (op, path) in &keys {
        let Some(a) = b.get(*op, path) else { continue };
        discover(*op, path, a, &mut maps);
    }
    let mut records: BTreeMap<(Op, String), Answer> = BTreeMap::new();
    let pairs = maps.byte_pairs();
    for (op, path) in &keys {
        let Some(a) = b.get(*op, path) else { continue };
        let new_path = redact_key(*op, path, &mut maps);
        let answer = redact_answer(*op, path, a, &mut maps, &pairs);
        records.insert((*op, new_path), answer);
    }
    let mut header = b.header.clone();
    header.tool = text::redact(&header.tool, &mut maps);
    if let Some(k) = &header.options.kernel_log {
        header.options.kernel_log = Some(text::redact(k, &mut maps));
    }
    Redacted {
        bundle: Bundle::new(header, records),
        counts: maps.counts(),
    }
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn is_proc_net(path: &str) -> bool {
    path.starts_with("/proc/net/")
        || path
            .strip_prefix("/proc/")
            .and_then(|r| r.split_once('/'))
            .is_some_and(|(pid, rest)| {
                (pid == "self" || pid.bytes().all(|c| c.is_ascii_digit()))
                    && rest.starts_with("net/")
            })
}

fn is_pci_config(path: &str) -> bool {
    basename(path) == "config" && path.starts_with("/sys/") && path.contains("/0000:")
}

fn is_binary(d: &[u8]) -> bool {
    d.contains(&0) || std::str::from_utf8(d).is_err()
}

fn discover(op: Op, path: &str, a: &Answer, maps: &mut Maps) {
    if op != Op::Probe {
        text::discover(path, maps);
    }
    match a {
        Answer::Data(d) => {
            if op == Op::Probe && path.starts_with("netlink:") {
                binary::discover_netlink(d, maps);
                return;
            }
            if op == Op::Read && basename(path) == "vpd" {
                binary::discover_vpd(d, maps);
                return;
            }
            if op == Op::Read && is_pci_config(path) {
                binary::discover_pci_config(d, maps);
                return;
            }
            if is_binary(d) {
                return;
            }
            let t = String::from_utf8_lossy(d);
            if op == Op::Read {
                let name = basename(path);
                if HOSTNAME_FILES.contains(&path) {
                    maps.see_word(WordKind::Host, &t);
                } else if name == "board_id" {
                    maps.see_word(WordKind::Board, &t);
                } else if SERIAL_FILES.contains(&name) {
                    maps.see_word(WordKind::Serial, &t);
                } else if name == "node_desc" {
                    // rdma-ndd writes "<host> <device>": the first word is a host name.
                    let dev = path.rsplit('/').nth(1).unwrap_or("");
                    let words: Vec<&str> = t.split_whitespace().collect();
                    if words.len() == 2 && words[1] == dev {
                        maps.see_word(WordKind::Host, words[0]);
                    }
                }
                if is_proc_net(path) {
                    text::proc_net_hex(&t, maps, true);
                }
                // Package databases are versions from end to end ("Version:
                // 1.0.1.1"): read for nothing; what is known from elsewhere is
                // still replaced there.
                if PACKAGE_DBS.iter().any(|p| path.starts_with(p)) {
                    return;
                }
            }
            text::discover(&t, maps);
        }
        Answer::Entries(es) => {
            for e in es {
                text::discover(&e.name, maps);
            }
        }
        Answer::Link(t) => text::discover(t, maps),
        Answer::Meta(_) | Answer::Err(_) => {}
    }
}

fn redact_key(op: Op, path: &str, maps: &mut Maps) -> String {
    match op {
        Op::Probe if path.starts_with("netlink:") => path.to_string(),
        _ => text::redact(path, maps),
    }
}

fn redact_answer(
    op: Op,
    path: &str,
    a: &Answer,
    maps: &mut Maps,
    pairs: &[(Vec<u8>, Vec<u8>)],
) -> Answer {
    match a {
        Answer::Data(d) => {
            let mut out = d.clone();
            if op == Op::Probe && path.starts_with("netlink:") {
                binary::redact_netlink(&mut out, maps);
            } else if op == Op::Read && basename(path) == "vpd" {
                binary::redact_vpd(&mut out, maps);
            } else if op == Op::Read && is_pci_config(path) {
                binary::redact_pci_config(&mut out, maps);
            } else if !is_binary(d) {
                let mut t = String::from_utf8_lossy(d).into_owned();
                if op == Op::Read && is_proc_net(path) {
                    t = text::proc_net_hex(&t, maps, false);
                }
                return Answer::Data(text::redact(&t, maps).into_bytes());
            }
            binary::replace_bytes(&mut out, pairs);
            Answer::Data(out)
        }
        Answer::Entries(es) => Answer::Entries(
            es.iter()
                .map(|e| Entry {
                    name: text::redact(&e.name, maps),
                    kind: e.kind,
                })
                .collect(),
        ),
        Answer::Link(t) => Answer::Link(text::redact(t, maps)),
        Answer::Meta(_) | Answer::Err(_) => a.clone(),
    }
}

#[cfg(test)]
mod tests;
