//! `rdmakit collect --redact` makes a bundle fit for a public ticket.
//! On every real capture of fixtures/: the identifiers of the host — read here,
//! independently of rdmakit, from the capture's own files (sysfs values, the
//! kernel log, the commands' outputs in cmd/, the SOURCE note) — appear in no form
//! (text as sysfs, ibstat, ip and /proc/net print them; bytes in either order) in
//! the redacted bundle: not in its JSON, not in any record's decoded content, not
//! in a path. And `doctor --from` the redacted bundle finds the same codes.

mod common;

use std::io::Read as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

use common::*;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::source::Answer;

/// One identifier of the original host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Id {
    Mac([u8; 6]),
    Guid(u64),
    V4([u8; 4]),
    V6([u8; 16]),
    Text(String),
}

impl Id {
    /// Every form a reader could find it in: text forms, and byte forms.
    fn forms(&self) -> (Vec<String>, Vec<Vec<u8>>) {
        let hex = |b: &[u8], per: usize| {
            b.chunks(per)
                .map(|c| c.iter().map(|x| format!("{x:02x}")).collect::<String>())
                .collect::<Vec<_>>()
                .join(":")
        };
        match self {
            Id::Mac(m) => (vec![hex(m, 1), hex(m, 6)], vec![m.to_vec()]),
            Id::Guid(g) => (
                vec![
                    hex(&g.to_be_bytes(), 2),
                    format!("{g:016x}"),
                    hex(&g.to_be_bytes(), 1),
                ],
                vec![g.to_be_bytes().to_vec(), g.to_le_bytes().to_vec()],
            ),
            Id::V4(a) => (
                vec![
                    Ipv4Addr::from(*a).to_string(),
                    format!("{:08x}", u32::from_le_bytes(*a)),
                    format!("{:08x}", u32::from_be_bytes(*a)),
                ],
                // Four bytes are found by chance in binary data: only the text
                // forms and the netlink replies' sockaddrs (checked by the unit
                // tests) are meaningful for IPv4.
                vec![],
            ),
            Id::V6(a) => (
                vec![hex(a, 2), Ipv6Addr::from(*a).to_string(), hex(a, 16)],
                vec![a.to_vec()],
            ),
            Id::Text(t) => (vec![t.clone()], vec![]),
        }
    }
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let v: Vec<u8> = s
        .split(':')
        .map(|p| u8::from_str_radix(p, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let m: [u8; 6] = v.try_into().ok()?;
    (m != [0; 6] && m != [0xff; 6]).then_some(m)
}

fn parse_guid(s: &str) -> Option<u64> {
    let s = s.trim();
    let h = s.strip_prefix("0x").unwrap_or(s).replace(':', "");
    (h.len() == 16)
        .then(|| u64::from_str_radix(&h, 16).ok())
        .flatten()
        .filter(|g| *g != 0)
}

/// The v6 identifier and what it carries (the IPv4 of a mapped one, the GUID of
/// the interface id).
fn v6_ids(a: Ipv6Addr, out: &mut Vec<Id>) {
    if a.is_unspecified() || a.is_loopback() {
        return;
    }
    out.push(Id::V6(a.octets()));
    if let Some(v4) = a.to_ipv4_mapped() {
        out.push(Id::V4(v4.octets()));
    } else {
        let o = a.octets();
        out.push(Id::Guid(u64::from_be_bytes(o[8..].try_into().unwrap())));
    }
}

/// The host's identifiers, read from the capture directory's own files.
fn identifiers(cap: &Path) -> Vec<Id> {
    let mut out = Vec::new();
    let root = cap.join("root");
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let ft = std::fs::symlink_metadata(&p).unwrap().file_type();
            if ft.is_dir() {
                stack.push(p);
                continue;
            }
            if !ft.is_file() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap())
                .trim()
                .to_string();
            let parent = p
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            match name.as_str() {
                "node_guid" | "sys_image_guid" | "port_guid" => {
                    out.extend(parse_guid(&text).map(Id::Guid))
                }
                "address" | "perm_addr" => out.extend(parse_mac(&text).map(Id::Mac)),
                "board_id" | "serial" | "product_serial" | "board_serial" | "product_uuid" => {
                    out.push(Id::Text(text))
                }
                "hostname" if p.ends_with("proc/sys/kernel/hostname") => out.push(Id::Text(text)),
                _ if parent == "gids" => {
                    if let Ok(a) = text.parse::<Ipv6Addr>() {
                        v6_ids(a, &mut out)
                    }
                }
                _ => {}
            }
        }
    }
    // What the commands of the capture printed about the host.
    for f in [
        "cmd/ibv_devinfo-v.out",
        "cmd/ibstat.out",
        "cmd/x-ip-addr.out",
        "SOURCE",
    ] {
        let Ok(t) = std::fs::read_to_string(cap.join(f)) else {
            continue;
        };
        for line in t.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["node_guid:", g] | ["sys_image_guid:", g] => {
                    out.extend(parse_guid(g).map(Id::Guid))
                }
                ["Node", "GUID:", g] | ["Port", "GUID:", g] | ["System", "image", "GUID:", g] => {
                    out.extend(parse_guid(g).map(Id::Guid))
                }
                ["link/ether", m, ..] => out.extend(parse_mac(m).map(Id::Mac)),
                ["inet", a, ..] => {
                    let ip: Ipv4Addr = a.split('/').next().unwrap().parse().unwrap();
                    if !ip.is_loopback() {
                        out.push(Id::V4(ip.octets()));
                    }
                }
                ["inet6", a, ..] => v6_ids(a.split('/').next().unwrap().parse().unwrap(), &mut out),
                [gid, a, ..] if gid.starts_with("GID[") => {
                    if let Ok(ip) = a.trim_end_matches(',').parse::<Ipv6Addr>() {
                        v6_ids(ip, &mut out)
                    }
                }
                _ => {}
            }
            // The SOURCE notes name the VM's MAC and address.
            for word in line.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
            {
                if let Some(m) = parse_mac(word) {
                    out.push(Id::Mac(m));
                }
                if let Ok(ip) = word.split('/').next().unwrap().parse::<Ipv4Addr>() {
                    if !ip.is_loopback() && f == "SOURCE" {
                        out.push(Id::V4(ip.octets()));
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The bytes of a bundle file, its JSON, and every record's path and content.
fn everything(file: &Path) -> Vec<u8> {
    let raw = std::fs::read(file).unwrap();
    let mut json = Vec::new();
    if raw.starts_with(&[0x1f, 0x8b]) {
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut json)
            .unwrap();
    } else {
        json = raw.clone();
    }
    let b = Bundle::from_bytes("redacted", &json).unwrap();
    let mut all = raw;
    all.extend_from_slice(&json);
    all.extend_from_slice(b.header.tool.as_bytes());
    for (op, path) in b.keys() {
        all.extend_from_slice(path.as_bytes());
        all.push(b'\n');
        match b.get(op, &path) {
            Some(Answer::Data(d)) => all.extend_from_slice(d),
            Some(Answer::Link(t)) => all.extend_from_slice(t.as_bytes()),
            Some(Answer::Entries(es)) => {
                for e in es {
                    all.extend_from_slice(e.name.as_bytes());
                    all.push(b'\n');
                }
            }
            _ => {}
        }
    }
    all
}

fn contains_ci(hay: &[u8], needle: &str) -> bool {
    let hay = hay.to_ascii_lowercase();
    let n = needle.to_ascii_lowercase();
    hay.windows(n.len()).any(|w| w == n.as_bytes())
}

fn findings(bundle: &Path) -> Vec<(String, String)> {
    let o = rdmakit(&[
        "doctor",
        "--from",
        bundle.to_str().unwrap(),
        "--json",
        "--no-probe",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{}: {e}: {}", bundle.display(), text(&o.stderr)));
    let mut f: Vec<(String, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().into(),
                f["severity"].as_str().unwrap().into(),
            )
        })
        .collect();
    f.sort();
    f
}

#[test]
fn redacted_captures_hold_no_identifier_and_give_the_same_findings() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen_kinds = std::collections::HashSet::new();
    for name in [
        "healthy",
        "healthy-busy",
        "gpud-h100",
        "real-nics-procfs",
        "mlx4-saturated-edit",
    ] {
        let cap = fixtures().join(name);
        assert!(cap.join("SOURCE").is_file(), "{name}: fixture missing");
        let ids = identifiers(&cap);
        let orig = dir.path().join(format!("{name}.json"));
        let red = dir.path().join(format!("{name}-redacted.json.gz"));
        let o = rdmakit(&[
            "collect",
            "--from",
            cap.to_str().unwrap(),
            "-o",
            orig.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let o = rdmakit(&[
            "collect",
            "--from",
            cap.to_str().unwrap(),
            "--redact",
            "-o",
            red.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("rdmakit: redacted "),
            "{}",
            text(&o.stderr)
        );

        let before = everything(&orig);
        let after = everything(&red);
        let mut found_in_original = 0;
        for id in &ids {
            let (texts, bytes) = id.forms();
            let in_orig = texts.iter().any(|t| contains_ci(&before, t))
                || bytes
                    .iter()
                    .any(|b| before.windows(b.len()).any(|w| w == &b[..]));
            if !in_orig {
                continue;
            }
            found_in_original += 1;
            seen_kinds.insert(std::mem::discriminant(id));
            for t in &texts {
                assert!(
                    !contains_ci(&after, t),
                    "{name}: {id:?} is still in the bundle as {t:?}"
                );
            }
            for b in &bytes {
                assert!(
                    !after.windows(b.len()).any(|w| w == &b[..]),
                    "{name}: {id:?} is still in the bundle as bytes {b:02x?}"
                );
            }
        }
        assert!(
            found_in_original > 0,
            "{name}: no identifier of the host in its bundle?"
        );
        assert_eq!(
            findings(&orig),
            findings(&red),
            "{name}: findings differ once redacted"
        );
    }
    // The captures between them carry every kind checked: MAC, GUID, IPv4, GID, text.
    assert_eq!(seen_kinds.len(), 5, "{seen_kinds:?}");
}

/// A live collection of this machine: its host name goes, and the doctor still
/// finds what it found.
#[test]
fn a_live_redacted_bundle_loses_the_host_name() {
    let dir = tempfile::tempdir().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    let red = dir.path().join("live.json.gz");
    let o = rdmakit(&["collect", "--redact", "-o", red.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let all = everything(&red);
    let b = Bundle::from_bytes("live", &{
        let mut j = Vec::new();
        flate2::read::MultiGzDecoder::new(&std::fs::read(&red).unwrap()[..])
            .read_to_end(&mut j)
            .unwrap();
        j
    })
    .unwrap();
    let Some(Answer::Data(h)) = b.get(rdmakit_host::source::Op::Read, "/proc/sys/kernel/hostname")
    else {
        panic!("the live bundle has no host name record")
    };
    assert_eq!(String::from_utf8_lossy(h).trim(), "host1");
    if host.len() >= 4 {
        // A short name ("vm") also occurs inside other words; a longer one must be
        // gone everywhere.
        assert!(!contains_ci(&all, host), "{host} still in the live bundle");
    }
}
