//! Identifiers in text: addresses and GUIDs by their shape, host names, serials
//! and board ids as whole words, and the hex forms of `/proc/net` files.
//!
//! A token is a maximal run of hex digits, `:`, `.` and `x`, with leading and
//! trailing separators trimmed, that no letter, digit or `_` touches (so
//! `v1.2.3.4` and `5.8-1.0.1.1` are versions, not addresses). Shapes:
//! dotted IPv4; six (MAC), eight (EUI-64) or twenty (IPoIB hardware address)
//! two-digit hex groups; four four-digit groups (a GUID as sysfs prints it); an
//! IPv6 address or GID, full or compressed; `0x` and 16 hex digits (a GUID as
//! ibstat prints it: replaced only when the GUID is known from elsewhere, since
//! kernel logs print addresses that way too).

use std::net::Ipv6Addr;

use super::map::Maps;

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    V4([u8; 4]),
    Mac([u8; 6]),
    /// Eight two-digit groups.
    Eui([u8; 8]),
    /// IPoIB: 4 bytes of flags and QPN, then the port's GID.
    Ipoib([u8; 20]),
    Guid4(u64),
    Hex0x(u64),
    V6 {
        addr: Ipv6Addr,
        full: bool,
    },
}

/// Calls `f` on every identifier-shaped token of `text` (discovery).
pub(crate) fn each_token(text: &str, mut f: impl FnMut(Shape)) {
    let _ = rewrite_tokens(text, |s| {
        f(s);
        None
    });
}

/// `text` with every token `f` answers for replaced by that answer.
pub(crate) fn rewrite_tokens(text: &str, mut f: impl FnMut(Shape) -> Option<String>) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if !is_run(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_run(b[i]) {
            i += 1;
        }
        let (mut s, mut e) = (start, i);
        while s < e && matches!(b[s], b':' | b'.') && !(b[s] == b':' && b.get(s + 1) == Some(&b':'))
        {
            s += 1;
        }
        // Try the token as it is, then without trailing separators ("15." ending a
        // sentence), longest first: "fe80::" must keep its "::".
        let mut done = false;
        while s < e && !done {
            let before = s.checked_sub(1).map(|k| b[k]);
            let after = b.get(e).copied();
            if !touches_word(before) && !touches_word(after) {
                let shape = classify(&text[s..e]).filter(|sh| {
                    // "so.1.14.44.0", "1.2.3.4.5": part of a longer dotted name.
                    !(matches!(sh, Shape::V4(_))
                        && (before == Some(b'.')
                            || (after == Some(b'.')
                                && b.get(e + 1).is_some_and(u8::is_ascii_alphanumeric))))
                });
                if let Some(shape) = shape {
                    if let Some(rep) = f(shape) {
                        out.push_str(&text[copied..s]);
                        out.push_str(&match_case(&text[s..e], rep));
                        copied = e;
                    }
                    done = true;
                }
            }
            if !done && matches!(b[e - 1], b'.' | b':') {
                e -= 1;
            } else {
                break;
            }
        }
    }
    out.push_str(&text[copied..]);
    out
}

fn is_run(c: u8) -> bool {
    c.is_ascii_hexdigit() || matches!(c, b':' | b'.' | b'x' | b'X')
}

fn touches_word(c: Option<u8>) -> bool {
    c.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// Upper-case hex in, upper-case hex out.
fn match_case(original: &str, rep: String) -> String {
    let upper = original
        .bytes()
        .any(|c| c.is_ascii_uppercase() && c != b'X');
    if upper {
        rep.to_ascii_uppercase()
    } else {
        rep
    }
}

pub(crate) fn classify(t: &str) -> Option<Shape> {
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return (hex.len() == 16 && hex.bytes().all(|c| c.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(hex, 16).ok().map(Shape::Hex0x))
            .flatten();
    }
    if t.contains(['x', 'X']) {
        return None;
    }
    if t.contains('.') && !t.contains(':') {
        let parts: Vec<&str> = t.split('.').collect();
        if parts.len() != 4 {
            return None;
        }
        let mut a = [0u8; 4];
        for (k, p) in parts.iter().enumerate() {
            if p.is_empty() || p.len() > 3 || !p.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            a[k] = p.parse().ok()?;
        }
        return Some(Shape::V4(a));
    }
    let groups: Vec<&str> = t.split(':').collect();
    let all_len = |n: usize| groups.iter().all(|g| g.len() == n);
    let hexes = || {
        groups
            .iter()
            .all(|g| g.bytes().all(|c| c.is_ascii_hexdigit()))
    };
    if all_len(2) && hexes() {
        let bytes: Vec<u8> = groups
            .iter()
            .filter_map(|g| u8::from_str_radix(g, 16).ok())
            .collect();
        return match bytes.len() {
            6 => bytes.try_into().ok().map(Shape::Mac),
            8 => bytes.try_into().ok().map(Shape::Eui),
            20 => bytes.try_into().ok().map(Shape::Ipoib),
            _ => None,
        };
    }
    if groups.len() == 4 && all_len(4) && hexes() {
        return u64::from_str_radix(&groups.concat(), 16)
            .ok()
            .map(Shape::Guid4);
    }
    if groups.len() >= 3 {
        if let Ok(addr) = t.parse::<Ipv6Addr>() {
            let full = groups.len() == 8 && all_len(4);
            return Some(Shape::V6 { addr, full });
        }
    }
    None
}

/// Registers every identifier of `text` in `maps`.
pub(crate) fn discover(text: &str, maps: &mut Maps) {
    each_token(text, |s| match s {
        Shape::V4(a) => maps.see_v4(a),
        Shape::Mac(m) => maps.see_mac(m),
        Shape::Eui(e) => maps.see_guid(u64::from_be_bytes(e)),
        Shape::Ipoib(h) => maps.see_v6(gid_of(&h)),
        Shape::Guid4(g) => maps.see_guid(g),
        Shape::Hex0x(_) => {}
        Shape::V6 { addr, .. } => maps.see_v6(addr),
    });
}

/// `text` with every identifier replaced by its placeholder.
pub(crate) fn redact(text: &str, maps: &mut Maps) -> String {
    let shaped = rewrite_tokens(text, |s| {
        let rep = match s {
            Shape::V4(a) => {
                let p = maps.v4(a);
                (p != a).then(|| format!("{}.{}.{}.{}", p[0], p[1], p[2], p[3]))
            }
            Shape::Mac(m) => {
                let p = maps.mac(m);
                (p != m).then(|| hex_groups(&p, 1))
            }
            Shape::Eui(e) => {
                let g = u64::from_be_bytes(e);
                let p = maps.guid(g);
                (p != g).then(|| hex_groups(&p.to_be_bytes(), 1))
            }
            Shape::Ipoib(h) => {
                let gid = gid_of(&h);
                let p = maps.v6(gid);
                (p != gid).then(|| {
                    let mut out = h;
                    out[4..].copy_from_slice(&p.octets());
                    hex_groups(&out, 1)
                })
            }
            Shape::Guid4(g) => {
                let p = maps.guid(g);
                (p != g).then(|| hex_groups(&p.to_be_bytes(), 2))
            }
            Shape::Hex0x(g) => maps
                .is_known_guid(g)
                .then(|| format!("0x{:016x}", maps.guid(g))),
            Shape::V6 { addr, full } => {
                let p = maps.v6(addr);
                (p != addr).then(|| {
                    if full {
                        hex_groups(&p.octets(), 2)
                    } else {
                        p.to_string()
                    }
                })
            }
        };
        rep
    });
    replace_words(&shaped, maps)
}

fn gid_of(h: &[u8; 20]) -> Ipv6Addr {
    let mut g = [0u8; 16];
    g.copy_from_slice(&h[4..]);
    Ipv6Addr::from(g)
}

/// Bytes as hex groups of `per` bytes joined by `:`.
fn hex_groups(b: &[u8], per: usize) -> String {
    b.chunks(per)
        .map(|c| c.iter().map(|x| format!("{x:02x}")).collect::<String>())
        .collect::<Vec<_>>()
        .join(":")
}

/// Every known word (host name, serial, board id) replaced where it stands as a
/// word of its own: no letter, digit, `_` or `-` on either side.
pub(crate) fn replace_words(text: &str, maps: &Maps) -> String {
    let mut s = text.to_string();
    for (word, rep) in maps.words() {
        if !s.contains(word) {
            continue;
        }
        let mut out = String::with_capacity(s.len());
        let mut rest = s.as_str();
        let mut prev: Option<u8> = None;
        while let Some(at) = rest.find(word) {
            let before = if at > 0 {
                Some(rest.as_bytes()[at - 1])
            } else {
                prev
            };
            let after = rest.as_bytes().get(at + word.len()).copied();
            let edge = |c: Option<u8>| !touches_word(c);
            out.push_str(&rest[..at]);
            if edge(before) && edge(after) {
                out.push_str(rep);
            } else {
                out.push_str(word);
            }
            prev = word.as_bytes().last().copied();
            rest = &rest[at + word.len()..];
        }
        out.push_str(rest);
        s = out;
    }
    s
}

/// `/proc/net` files print addresses as hex: IPv4 as one little-endian word
/// (`route`, `tcp`, `udp`: `0F02000A` is 10.0.2.15), IPv6 as 32 digits (network
/// order in `if_inet6` and `ipv6_route`, four little-endian words in `tcp6`), MACs
/// as 12 digits (`dev_mcast`). Words of exactly those lengths are replaced when
/// they decode to a known address.
pub(crate) fn proc_net_hex(text: &str, maps: &mut Maps, discover_only: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let mut rest = line;
        let mut col = 0;
        while !rest.is_empty() {
            let start = rest.len() - rest.trim_start().len();
            out.push_str(&rest[..start]);
            rest = &rest[start..];
            let end = rest
                .find(|c: char| c.is_whitespace() || c == ':')
                .unwrap_or(rest.len());
            let word = &rest[..end];
            // Header words (Destination, local_address) are not hex: no header
            // needs skipping.
            let rep = hex_word(word, col, maps, discover_only);
            out.push_str(rep.as_deref().unwrap_or(word));
            rest = &rest[end..];
            if let Some(r) = rest.strip_prefix(':') {
                out.push(':');
                rest = r;
            }
            col += 1;
        }
    }
    out
}

fn hex_word(w: &str, col: usize, maps: &mut Maps, discover_only: bool) -> Option<String> {
    if !w.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let upper = w.bytes().any(|c| c.is_ascii_uppercase());
    let fmt = |s: String| if upper { s.to_ascii_uppercase() } else { s };
    match w.len() {
        8 => {
            let v = u32::from_str_radix(w, 16).ok()?;
            let a = v.to_le_bytes();
            // Masks (route's 8th column) are not addresses: see_v4 keeps them.
            if discover_only {
                if col <= 3 {
                    maps.see_v4(a);
                }
                return None;
            }
            if !maps.is_known_v4(a) {
                return None;
            }
            let p = maps.v4(a);
            Some(fmt(format!("{:08x}", u32::from_le_bytes(p))))
        }
        32 => {
            let v = u128::from_str_radix(w, 16).ok()?;
            let net = Ipv6Addr::from(v);
            let words = Ipv6Addr::from(le_words(v));
            if discover_only {
                // Which order a file uses is not known here: only the one that
                // looks like an address counts.
                if !net.is_unspecified()
                    && (net.segments()[0] & 0xffc0 == 0xfe80
                        || net.segments()[0] & 0xe000 == 0x2000)
                {
                    maps.see_v6(net);
                } else if words.to_ipv4_mapped().is_some()
                    || words.segments()[0] & 0xffc0 == 0xfe80
                    || words.segments()[0] & 0xe000 == 0x2000
                {
                    maps.see_v6(words);
                }
                return None;
            }
            if maps.is_known_v6(net) {
                let p = maps.v6(net);
                return (p != net).then(|| fmt(format!("{:032x}", u128::from(p))));
            }
            if maps.is_known_v6(words) {
                let p = maps.v6(words);
                return (p != words).then(|| fmt(format!("{:032x}", le_words(u128::from(p)))));
            }
            None
        }
        12 => {
            let v = u64::from_str_radix(w, 16).ok()?;
            let b = v.to_be_bytes();
            let m = [b[2], b[3], b[4], b[5], b[6], b[7]];
            if discover_only || !maps.is_known_mac(m) {
                return None;
            }
            let p = maps.mac(m);
            (p != m).then(|| fmt(p.iter().map(|x| format!("{x:02x}")).collect()))
        }
        _ => None,
    }
}

/// A 128-bit value read as four little-endian 32-bit words, and back.
fn le_words(v: u128) -> u128 {
    let b = v.to_be_bytes();
    let mut out = [0u8; 16];
    for w in 0..4 {
        for k in 0..4 {
            out[w * 4 + k] = b[w * 4 + 3 - k];
        }
    }
    u128::from_be_bytes(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes(t: &str) -> Vec<Shape> {
        let mut v = Vec::new();
        each_token(t, |s| v.push(s));
        v
    }

    #[test]
    fn shapes_and_what_is_not_one() {
        assert_eq!(
            shapes("inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0"),
            vec![Shape::V4([10, 0, 2, 15]), Shape::V4([10, 0, 2, 255])]
        );
        assert_eq!(
            shapes("link/ether 52:54:00:12:34:56 brd ff:ff:ff:ff:ff:ff"),
            vec![
                Shape::Mac([0x52, 0x54, 0, 0x12, 0x34, 0x56]),
                Shape::Mac([0xff; 6])
            ]
        );
        assert_eq!(
            shapes("node_guid:\t\t\t5054:00ff:fe12:3456"),
            vec![Shape::Guid4(0x5054_00ff_fe12_3456)]
        );
        assert!(matches!(
            shapes("GID[  1]:\t\t::ffff:10.0.2.15, RoCE v2")[..],
            [Shape::V6 { full: false, .. }]
        ));
        assert!(matches!(
            shapes("fe80:0000:0000:0000:5054:00ff:fe12:3456\n")[..],
            [Shape::V6 { full: true, .. }]
        ));
        assert_eq!(
            shapes("Node GUID: 0x0002c90300a1b2c3."),
            vec![Shape::Hex0x(0x0002_c903_00a1_b2c3)]
        );
        // Versions, times, PCI addresses, words: none.
        for t in [
            "v1.2.3.4",
            "MLNX_OFED 5.8-1.0.1.1",
            "12:34:56",
            "0000:3b:00.0",
            "fw 20.31.1014",
            "deadbeef",
            "std::vector",
            "[mem 0x00000000fe000000-0x00000000fe003fff]",
            "libibverbs.so.1.14.44.0",
            "1.2.3.4.5",
            "1.2.3.4.so",
        ] {
            let s: Vec<Shape> = shapes(t)
                .into_iter()
                .filter(|s| !matches!(s, Shape::Hex0x(_)))
                .collect();
            assert!(s.is_empty(), "{t}: {s:?}");
        }
    }

    #[test]
    fn redact_keeps_layout_case_and_punctuation() {
        let mut m = Maps::default();
        let t = "eth0: 52:54:00:12:34:56 at 10.0.2.15. GID fe80::5054:ff:fe12:3456/64 \
                 ADDR 52:54:00:12:34:56 node 5054:00FF:FE12:3456";
        discover(t, &mut m);
        assert_eq!(
            redact(t, &mut m),
            "eth0: 00:00:5e:00:53:01 at 198.18.0.15. GID fe80::200:5eff:fe00:5301/64 \
             ADDR 00:00:5e:00:53:01 node 0200:5EFF:FE00:5301"
        );
    }

    #[test]
    fn words_only_where_they_stand_alone() {
        let mut m = Maps::default();
        m.see_word(super::super::map::WordKind::Host, "vm");
        assert_eq!(
            replace_words("vm login: kvm vm.max_map_count vm-1 (vm)", &m),
            "host1 login: kvm host1.max_map_count vm-1 (host1)"
        );
    }

    #[test]
    fn proc_net_hex_forms() {
        let mut m = Maps::default();
        let route = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n\
                     eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\n\
                     eth0\t00000000\t0202000A\t0003\t0\t0\t0\t00000000\n";
        proc_net_hex(route, &mut m, true);
        assert_eq!(
            proc_net_hex(route, &mut m, false),
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n\
             eth0\t000012C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\n\
             eth0\t00000000\t020012C6\t0003\t0\t0\t0\t00000000\n"
        );
        let if6 = "fe80000000000000505400fffe123456 02 40 20 80     eth0\n";
        let mut m = Maps::default();
        proc_net_hex(if6, &mut m, true);
        assert_eq!(
            proc_net_hex(if6, &mut m, false),
            "fe8000000000000002005efffe005301 02 40 20 80     eth0\n"
        );
        // tcp6 prints four little-endian words; ::1 is no identifier.
        let tcp6 =
            "  0: 00000000000000000000000001000000:0016 0000000000000000FFFF00000F02000A:0016 01\n";
        let mut m = Maps::default();
        proc_net_hex(tcp6, &mut m, true);
        assert_eq!(
            proc_net_hex(tcp6, &mut m, false),
            "  0: 00000000000000000000000001000000:0016 0000000000000000FFFF00000F0012C6:0016 01\n"
        );
    }
}
