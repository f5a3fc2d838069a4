//! The placeholders: each original identifier maps to one placeholder of the same
//! kind, the same everywhere in a bundle, and never to another original.
//!
//! | kind | placeholder | kept as it is |
//! |---|---|---|
//! | MAC | `00:00:5e:00:53:NN` (RFC 7042's documentation range), then `02:00:5e:NN:NN:NN` | all-zero, broadcast, multicast |
//! | GUID / EUI-64 | the EUI-64 of the MAC's placeholder when the GUID is a MAC's EUI-64 (`ff:fe` in the middle, as rxe's node GUID and link-local GIDs are), else `0000:5eef:10NN:NNNN` (RFC 7042's EUI-64 documentation range) | 0, all-ones |
//! | IPv4 | `198.18.N.H` / `198.19.N.H` (RFC 2544's benchmarking range): each /24 gets its own, the host byte stays | 0.0.0.0, 127/8, multicast, 240/4, netmasks, the broadcast |
//! | IPv6, GID | IPv4-mapped: the IPv4's placeholder; link-local: the prefix stays, the interface id maps as a GUID; else the /64 prefix becomes `2001:db8:0:N::/64` and the interface id maps as a GUID | `::`, `::1`, multicast |
//! | host name | `hostN`, and `hostN.example.invalid` for a full name | `localhost`, `(none)` |
//! | serial (DMI, VPD, `serial`) | `SN000…N` of the same length (VPD fields keep their size) | empty and placeholder texts (`Not Specified`, ...) |
//! | board id | `board-N` | |

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Every identifier seen, then every placeholder given.
#[derive(Debug, Default)]
pub(crate) struct Maps {
    /// Originals, collected before any placeholder is given, so that no
    /// placeholder is also an original (which would make the mapping ambiguous).
    seen_macs: BTreeSet<[u8; 6]>,
    seen_guids: BTreeSet<u64>,
    seen_v4_nets: BTreeSet<[u8; 3]>,
    seen_v6_nets: BTreeSet<[u8; 8]>,
    macs: BTreeMap<[u8; 6], [u8; 6]>,
    guids: BTreeMap<u64, u64>,
    v4_nets: BTreeMap<[u8; 3], [u8; 3]>,
    v6_nets: BTreeMap<[u8; 8], [u8; 8]>,
    /// Host names, serials, board ids: whole words replaced in text.
    words: BTreeMap<String, (WordKind, String)>,
    next_word: BTreeMap<WordKind, usize>,
    /// The last placeholder number given per kind: they only grow, so no two
    /// originals share a placeholder.
    next_mac: u32,
    next_guid: u64,
    next_v4: u32,
    next_v6: u32,
}

/// What a replaced word is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum WordKind {
    Host,
    Serial,
    Board,
}

/// How many identifiers of each kind a bundle held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub hostnames: usize,
    pub macs: usize,
    pub guids: usize,
    pub ipv4: usize,
    pub ipv6_prefixes: usize,
    pub serials: usize,
    pub board_ids: usize,
}

/// "3 host names, 2 MAC addresses, ...": every kind, for the user.
impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} host names, {} MAC addresses, {} GUIDs, {} IPv4 subnets, {} IPv6 prefixes, \
             {} serials, {} board ids",
            self.hostnames,
            self.macs,
            self.guids,
            self.ipv4,
            self.ipv6_prefixes,
            self.serials,
            self.board_ids
        )
    }
}

/// Values that name nothing (firmware fills DMI with them).
const NOT_IDENTIFIERS: &[&str] = &[
    "",
    "0",
    "none",
    "(none)",
    "localhost",
    "localhost.localdomain",
    "not specified",
    "not applicable",
    "n/a",
    "na",
    "default string",
    "to be filled by o.e.m.",
    "system serial number",
    "chassis serial number",
    "base board serial number",
    "0123456789",
    "unknown",
];

impl Maps {
    // --- discovery ---------------------------------------------------------

    pub fn see_mac(&mut self, m: [u8; 6]) {
        if mac_is_identifier(m) {
            self.seen_macs.insert(m);
        }
    }

    pub fn see_guid(&mut self, g: u64) {
        if g != 0 && g != u64::MAX {
            self.seen_guids.insert(g);
            if let Some(m) = eui64_mac(g) {
                self.see_mac(m);
            }
        }
    }

    pub fn see_v4(&mut self, a: [u8; 4]) {
        if v4_is_identifier(a) {
            self.seen_v4_nets.insert([a[0], a[1], a[2]]);
        }
    }

    pub fn see_v6(&mut self, a: Ipv6Addr) {
        match v6_kind(&a) {
            V6::Keep => {}
            V6::V4(v4) => self.see_v4(v4),
            V6::LinkLocal(iid) => self.see_guid(iid),
            V6::Global(net, iid) => {
                self.seen_v6_nets.insert(net);
                self.see_guid(iid);
            }
        }
    }

    /// A host name (the full name and its first label are both replaced).
    pub fn see_word(&mut self, kind: WordKind, value: &str) {
        let v = value.trim();
        if v.chars().count() < 2 || NOT_IDENTIFIERS.contains(&v.to_ascii_lowercase().as_str()) {
            return;
        }
        if self.words.contains_key(v) {
            return;
        }
        let n = {
            let c = self.next_word.entry(kind).or_insert(0);
            *c += 1;
            *c
        };
        match kind {
            WordKind::Host => {
                let short = v.split('.').next().unwrap_or(v);
                let short_ph = match self.words.get(short) {
                    Some((_, p)) => p.clone(),
                    None => format!("host{n}"),
                };
                if short != v {
                    self.words
                        .insert(v.to_string(), (kind, format!("{short_ph}.example.invalid")));
                }
                if short.chars().count() >= 2 {
                    self.words
                        .entry(short.to_string())
                        .or_insert((kind, short_ph));
                }
            }
            WordKind::Serial => {
                self.words
                    .insert(v.to_string(), (kind, same_length_serial(v.len(), n)));
            }
            WordKind::Board => {
                self.words
                    .insert(v.to_string(), (kind, format!("board-{n}")));
            }
        }
    }

    // --- placeholders --------------------------------------------------------

    pub fn mac(&mut self, m: [u8; 6]) -> [u8; 6] {
        if !mac_is_identifier(m) {
            return m;
        }
        if let Some(p) = self.macs.get(&m) {
            return *p;
        }
        let p = loop {
            self.next_mac += 1;
            let n = self.next_mac;
            let cand = if n < 256 {
                [0x00, 0x00, 0x5e, 0x00, 0x53, n as u8]
            } else {
                [0x02, 0x00, 0x5e, (n >> 16) as u8, (n >> 8) as u8, n as u8]
            };
            if !self.seen_macs.contains(&cand) {
                break cand;
            }
        };
        self.macs.insert(m, p);
        p
    }

    pub fn guid(&mut self, g: u64) -> u64 {
        if g == 0 || g == u64::MAX {
            return g;
        }
        if let Some(p) = self.guids.get(&g) {
            return *p;
        }
        let p = match eui64_mac(g) {
            Some(m) => eui64(self.mac(m)),
            None => loop {
                self.next_guid += 1;
                let cand = 0x0000_5eef_1000_0000 | (self.next_guid & 0xff_ffff);
                if !self.seen_guids.contains(&cand) {
                    break cand;
                }
            },
        };
        self.guids.insert(g, p);
        p
    }

    pub fn v4(&mut self, a: [u8; 4]) -> [u8; 4] {
        if !v4_is_identifier(a) {
            return a;
        }
        let net = [a[0], a[1], a[2]];
        let p = match self.v4_nets.get(&net) {
            Some(p) => *p,
            None => {
                let p = loop {
                    let n = self.next_v4;
                    self.next_v4 += 1;
                    // 198.18.0.0/15 holds 512 /24s; past that they repeat (a
                    // bundle of one host has a handful).
                    let cand = [198, 18 + ((n >> 8) & 1) as u8, n as u8];
                    if !self.seen_v4_nets.contains(&cand) || n >= 512 {
                        break cand;
                    }
                };
                self.v4_nets.insert(net, p);
                p
            }
        };
        [p[0], p[1], p[2], a[3]]
    }

    pub fn v6(&mut self, a: Ipv6Addr) -> Ipv6Addr {
        let o = a.octets();
        match v6_kind(&a) {
            V6::Keep => a,
            V6::V4(v4) => Ipv4Addr::from(self.v4(v4)).to_ipv6_mapped(),
            V6::LinkLocal(iid) => {
                let mut out = o;
                out[8..].copy_from_slice(&self.guid(iid).to_be_bytes());
                Ipv6Addr::from(out)
            }
            V6::Global(net, iid) => {
                let p = match self.v6_nets.get(&net) {
                    Some(p) => *p,
                    None => {
                        let p = loop {
                            self.next_v6 += 1;
                            let mut cand = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0];
                            cand[4..].copy_from_slice(&self.next_v6.to_be_bytes());
                            if !self.seen_v6_nets.contains(&cand) {
                                break cand;
                            }
                        };
                        self.v6_nets.insert(net, p);
                        p
                    }
                };
                let mut out = [0u8; 16];
                out[..8].copy_from_slice(&p);
                let iid = if iid == 0 { 0 } else { self.guid(iid) };
                out[8..].copy_from_slice(&iid.to_be_bytes());
                Ipv6Addr::from(out)
            }
        }
    }

    /// The placeholder of a known word, longest words first (a full host name
    /// before its first label).
    pub fn words(&self) -> Vec<(&str, &str)> {
        let mut w: Vec<(&str, &str)> = self
            .words
            .iter()
            .map(|(k, (_, v))| (k.as_str(), v.as_str()))
            .collect();
        w.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
        w
    }

    /// The known MACs, GUIDs and IPv6 addresses' originals with their
    /// placeholders, for the byte-level pass over binary answers.
    pub fn byte_pairs(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        for m in self.seen_macs.clone() {
            out.push((m.to_vec(), self.mac(m).to_vec()));
        }
        for g in self.seen_guids.clone() {
            let p = self.guid(g);
            out.push((g.to_be_bytes().to_vec(), p.to_be_bytes().to_vec()));
            out.push((g.to_le_bytes().to_vec(), p.to_le_bytes().to_vec()));
        }
        out
    }

    pub fn is_known_guid(&self, g: u64) -> bool {
        self.seen_guids.contains(&g)
    }

    pub fn is_known_mac(&self, m: [u8; 6]) -> bool {
        self.seen_macs.contains(&m)
    }

    pub fn is_known_v6(&self, a: Ipv6Addr) -> bool {
        match v6_kind(&a) {
            V6::Keep => false,
            V6::V4(v4) => self.is_known_v4(v4),
            V6::LinkLocal(iid) => self.seen_guids.contains(&iid),
            V6::Global(net, _) => self.seen_v6_nets.contains(&net),
        }
    }

    pub fn is_known_v4(&self, a: [u8; 4]) -> bool {
        v4_is_identifier(a) && self.seen_v4_nets.contains(&[a[0], a[1], a[2]])
    }

    pub fn counts(&self) -> Counts {
        let words = |k: WordKind| self.words.values().filter(|(kind, _)| *kind == k).count();
        Counts {
            hostnames: self.next_word.get(&WordKind::Host).copied().unwrap_or(0),
            macs: self.seen_macs.len(),
            guids: self.seen_guids.len(),
            ipv4: self.seen_v4_nets.len(),
            ipv6_prefixes: self.seen_v6_nets.len(),
            serials: words(WordKind::Serial),
            board_ids: words(WordKind::Board),
        }
    }
}

fn mac_is_identifier(m: [u8; 6]) -> bool {
    m != [0; 6] && m != [0xff; 6] && m[0] & 1 == 0
}

fn v4_is_identifier(a: [u8; 4]) -> bool {
    let ip = Ipv4Addr::from(a);
    let bits = u32::from_be_bytes(a);
    let netmask = bits.leading_ones() + bits.trailing_zeros() == 32;
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || ip.is_broadcast()
        || a[0] >= 240
        || (netmask && a[0] == 255))
}

/// The MAC an EUI-64 (a GUID with `ff:fe` in its middle) was made from.
fn eui64_mac(g: u64) -> Option<[u8; 6]> {
    let b = g.to_be_bytes();
    (b[3] == 0xff && b[4] == 0xfe).then_some([b[0] ^ 0x02, b[1], b[2], b[5], b[6], b[7]])
}

fn eui64(m: [u8; 6]) -> u64 {
    u64::from_be_bytes([m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
}

enum V6 {
    Keep,
    V4([u8; 4]),
    LinkLocal(u64),
    Global([u8; 8], u64),
}

fn v6_kind(a: &Ipv6Addr) -> V6 {
    let o = a.octets();
    if a.is_unspecified() || a.is_loopback() || o[0] == 0xff {
        return V6::Keep;
    }
    if let Some(v4) = a.to_ipv4_mapped() {
        return V6::V4(v4.octets());
    }
    let iid = u64::from_be_bytes([o[8], o[9], o[10], o[11], o[12], o[13], o[14], o[15]]);
    if (a.segments()[0] & 0xffc0) == 0xfe80 {
        return if iid == 0 {
            V6::Keep
        } else {
            V6::LinkLocal(iid)
        };
    }
    let mut net = [0u8; 8];
    net.copy_from_slice(&o[..8]);
    V6::Global(net, iid)
}

/// `SN0…0N` of exactly `len` bytes (a VPD field keeps its size).
fn same_length_serial(len: usize, n: usize) -> String {
    let digits = n.to_string();
    if len >= digits.len() + 2 {
        format!("SN{digits:0>w$}", w = len - 2)
    } else if len >= digits.len() {
        format!("{digits:0>len$}")
    } else {
        "X".repeat(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eui64_guid_follows_its_macs_placeholder() {
        let mut m = Maps::default();
        let mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
        let guid = 0x5054_00ff_fe12_3456;
        m.see_guid(guid);
        assert_eq!(m.mac(mac), [0, 0, 0x5e, 0, 0x53, 1]);
        assert_eq!(m.guid(guid), 0x0200_5eff_fe00_5301);
        // Other GUIDs: the EUI-64 documentation range, each its own.
        assert_eq!(m.guid(0x0002_c903_0010_2030), 0x0000_5eef_1000_0001);
        assert_eq!(m.guid(0x0002_c903_0010_2031), 0x0000_5eef_1000_0002);
        assert_eq!(m.guid(0x0002_c903_0010_2030), 0x0000_5eef_1000_0001);
        assert_eq!(m.guid(0), 0);
    }

    #[test]
    fn ipv4_keeps_the_host_byte_and_the_subnet() {
        let mut m = Maps::default();
        assert_eq!(m.v4([10, 0, 2, 15]), [198, 18, 0, 15]);
        assert_eq!(m.v4([10, 0, 2, 2]), [198, 18, 0, 2]);
        assert_eq!(m.v4([10, 0, 3, 2]), [198, 18, 1, 2]);
        for keep in [
            [127, 0, 0, 1],
            [0, 0, 0, 0],
            [255, 255, 255, 0],
            [224, 0, 0, 1],
        ] {
            assert_eq!(m.v4(keep), keep);
        }
    }

    #[test]
    fn placeholders_never_are_originals() {
        let mut m = Maps::default();
        m.see_mac([0, 0, 0x5e, 0, 0x53, 1]);
        m.see_mac([0x52, 0x54, 0, 0x12, 0x34, 0x56]);
        let a = m.mac([0x52, 0x54, 0, 0x12, 0x34, 0x56]);
        let b = m.mac([0, 0, 0x5e, 0, 0x53, 1]);
        assert_ne!(a, [0, 0, 0x5e, 0, 0x53, 1]);
        assert_ne!(a, b);
    }

    #[test]
    fn gids_keep_their_kind() {
        let mut m = Maps::default();
        let ll: Ipv6Addr = "fe80::5054:ff:fe12:3456".parse().unwrap();
        assert_eq!(m.v6(ll).to_string(), "fe80::200:5eff:fe00:5301");
        let mapped: Ipv6Addr = "::ffff:10.0.2.15".parse().unwrap();
        assert_eq!(m.v6(mapped).to_string(), "::ffff:198.18.0.15");
        let global: Ipv6Addr = "2a01:4f8:1:2::15".parse().unwrap();
        assert_eq!(m.v6(global).to_string(), "2001:db8:0:1:0:5eef:1000:1");
        assert_eq!(m.v6(Ipv6Addr::UNSPECIFIED), Ipv6Addr::UNSPECIFIED);
    }

    #[test]
    fn words_hosts_serials_boards() {
        let mut m = Maps::default();
        m.see_word(WordKind::Host, "node17.cluster.example.org\n");
        m.see_word(WordKind::Serial, "MT2033X12345");
        m.see_word(WordKind::Board, "MT_0000000838");
        m.see_word(WordKind::Serial, "Not Specified");
        let w = m.words();
        assert_eq!(
            w,
            vec![
                ("node17.cluster.example.org", "host1.example.invalid"),
                ("MT_0000000838", "board-1"),
                ("MT2033X12345", "SN0000000001"),
                ("node17", "host1"),
            ]
        );
        assert_eq!(m.counts().hostnames, 1);
        assert_eq!(same_length_serial(3, 12), "012");
        assert_eq!(same_length_serial(1, 12), "X");
    }
}
