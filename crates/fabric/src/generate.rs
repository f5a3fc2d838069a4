//! Two-level fat trees in ibsim's net format, for tests and benchmarks.
//!
//! [`fat_tree`] places everything by arithmetic, so the same arguments give
//! the same file byte for byte:
//! - hosts `host-01 HCA-1` … (one single-port HCA each, numbered from 1,
//!   zero-padded to at least two digits) come first, because ibsim attaches
//!   its clients (opensm, the diagnostics) to the first node of the file;
//! - then leaves `leaf1` …, then spines `spine1` …;
//! - host `h` (from 1) is on leaf `(h - 1) / hosts_per_leaf + 1`, port
//!   `(h - 1) % hosts_per_leaf + 1`;
//! - leaf `l`'s uplink `u` (from 1) to spine `s` is leaf port
//!   `hosts_per_leaf + (s - 1) * uplinks_per_spine + u` and spine port
//!   `(l - 1) * uplinks_per_spine + u`.
//!
//! Every port line carries `w=` (the LinkWidthEnabled bit of `width`) and
//! `s=` (and `e=` for FDR, EDR and HDR: ibsim's LinkSpeedExtEnabled), so
//! ibsim brings every link up at that width and speed.
//!
//! ibsim (0.10, as Debian ships it) holds 2048 nodes, 256 switches and
//! 13,312 ports (switch ports count port 0) unless started with larger
//! `-N`, `-S` and `-P`; [`Limits::ibsim_args`] gives the flags a tree needs.
//! A node has at most 255 ports. A 30,304-node tree came up in ibsim with
//! opensm (docs/fabric.md has the measurements).

use std::fmt::Write as _;

use rdmakit_types::{Speed, Width};

/// The arguments of a fat tree cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GenerateError {
    /// A count is 0.
    #[error("{what} must be at least 1")]
    Zero {
        /// Which argument.
        what: &'static str,
    },
    /// A switch would need more than 255 ports.
    #[error("a {which} would need {ports} ports; a node has at most 255")]
    TooManyPorts {
        /// `leaf` or `spine`.
        which: &'static str,
        /// The ports it would need.
        ports: u64,
    },
    /// More than the generator makes (100,000 nodes: the parser's limit).
    #[error("{nodes} nodes; at most 100000 are generated")]
    TooManyNodes {
        /// The node count asked for.
        nodes: u64,
    },
    /// ibsim cannot enable this speed from a net file.
    #[error("ibsim's net format has no code for {0}")]
    Speed(&'static str),
}

/// What a fat tree needs of ibsim: its node, switch and port counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Nodes (hosts, leaves and spines).
    pub nodes: u64,
    /// Switches.
    pub switches: u64,
    /// Ports as ibsim counts them (a switch's port 0 included).
    pub ports: u64,
}

impl Limits {
    /// The counts of a tree (the arguments are not checked).
    pub fn of(spines: u32, leaves: u32, hosts_per_leaf: u32, uplinks_per_spine: u32) -> Limits {
        let (s, l, h, u) = (
            u64::from(spines),
            u64::from(leaves),
            u64::from(hosts_per_leaf),
            u64::from(uplinks_per_spine),
        );
        let hosts = l * h;
        Limits {
            nodes: hosts + l + s,
            switches: l + s,
            ports: hosts + l * (h + s * u + 1) + s * (l * u + 1),
        }
    }

    /// ibsim's `-N`, `-S` and `-P` flags when a count passes its defaults
    /// (2048, 256, 13312); empty when none does.
    pub fn ibsim_args(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (flag, need, default) in [
            ("-N", self.nodes, 2048),
            ("-S", self.switches, 256),
            ("-P", self.ports, 256 * 36 + 2048 * 2),
        ] {
            if need > default {
                v.push(flag.to_string());
                v.push(need.to_string());
            }
        }
        v
    }
}

/// A fat tree of `spines` spines and `leaves` leaves with `hosts_per_leaf`
/// hosts on each leaf and `uplinks_per_spine` cables from every leaf to
/// every spine, every link enabled at `width` and `speed`, as ibsim's net
/// file (see the module's documentation for the placement).
///
/// # Errors
/// [`GenerateError`] when a count is 0, a switch would need more than 255
/// ports, the tree has more than 100,000 nodes, or `speed` is FDR10, NDR or
/// XDR (ibsim 0.10 cannot enable them).
pub fn fat_tree(
    spines: u32,
    leaves: u32,
    hosts_per_leaf: u32,
    uplinks_per_spine: u32,
    width: Width,
    speed: Speed,
) -> Result<String, GenerateError> {
    for (what, v) in [
        ("spines", spines),
        ("leaves", leaves),
        ("hosts_per_leaf", hosts_per_leaf),
        ("uplinks_per_spine", uplinks_per_spine),
    ] {
        if v == 0 {
            return Err(GenerateError::Zero { what });
        }
    }
    let (sp, lv, hpl, up) = (
        u64::from(spines),
        u64::from(leaves),
        u64::from(hosts_per_leaf),
        u64::from(uplinks_per_spine),
    );
    let leaf_ports = hpl + sp * up;
    let spine_ports = lv * up;
    for (which, ports) in [("leaf", leaf_ports), ("spine", spine_ports)] {
        if ports > 255 {
            return Err(GenerateError::TooManyPorts { which, ports });
        }
    }
    let nodes = Limits::of(spines, leaves, hosts_per_leaf, uplinks_per_spine).nodes;
    if nodes > 100_000 {
        return Err(GenerateError::TooManyNodes { nodes });
    }
    let opts = link_opts(width, speed)?;
    let hosts = lv * hpl;
    let pad = hosts.to_string().len().max(2);
    let host = |h: u64| format!("host-{h:0pad$} HCA-1");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# fat tree: {}, {}, {} a leaf, {} from each leaf to each spine\n",
        count(sp, "spine"),
        count(lv, "leaf"),
        count(hpl, "host"),
        count(up, "cable")
    );
    for h in 1..=hosts {
        let (l, p) = ((h - 1) / hpl + 1, (h - 1) % hpl + 1);
        let _ = writeln!(
            out,
            "Hca\t1 \"{}\"\n[1]\t\"leaf{l}\"[{p}]\t{opts}\n",
            host(h)
        );
    }
    for l in 1..=lv {
        let _ = writeln!(out, "Switch\t{leaf_ports} \"leaf{l}\"");
        for p in 1..=hpl {
            let _ = writeln!(out, "[{p}]\t\"{}\"[1]\t{opts}", host((l - 1) * hpl + p));
        }
        for s in 1..=sp {
            for u in 1..=up {
                let lp = hpl + (s - 1) * up + u;
                let spp = (l - 1) * up + u;
                let _ = writeln!(out, "[{lp}]\t\"spine{s}\"[{spp}]\t{opts}");
            }
        }
        out.push('\n');
    }
    for s in 1..=sp {
        let _ = writeln!(out, "Switch\t{spine_ports} \"spine{s}\"");
        for l in 1..=lv {
            for u in 1..=up {
                let spp = (l - 1) * up + u;
                let lp = hpl + (s - 1) * up + u;
                let _ = writeln!(out, "[{spp}]\t\"leaf{l}\"[{lp}]\t{opts}");
            }
        }
        out.push('\n');
    }
    Ok(out)
}

/// `1 spine`, `2 leaves`.
fn count(n: u64, what: &str) -> String {
    match (n, what) {
        (1, _) => format!("1 {what}"),
        (_, "leaf") => format!("{n} leaves"),
        _ => format!("{n} {what}s"),
    }
}

/// `w=2 s=4` (`e=` added for an extended speed).
fn link_opts(width: Width, speed: Speed) -> Result<String, GenerateError> {
    let (s, e) = speed
        .port_info_code()
        .filter(|&(_, e)| e <= 4)
        .ok_or(GenerateError::Speed(speed.name()))?;
    let w = width.code();
    Ok(match e {
        0 => format!("w={w} s={s}"),
        e => format!("w={w} s={s} e={e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_ibsim_flags() {
        let l = Limits::of(2, 4, 4, 1);
        assert_eq!((l.nodes, l.switches), (22, 6));
        // 16 host ports, 4 leaves of 6+1, 2 spines of 4+1.
        assert_eq!(l.ports, 16 + 28 + 10);
        assert!(l.ibsim_args().is_empty());
        let big = Limits::of(16, 64, 40, 1);
        assert_eq!(big.nodes, 2560 + 80);
        assert_eq!(
            big.ibsim_args()[..2],
            ["-N".to_string(), "2640".to_string()]
        );
    }

    #[test]
    fn bad_arguments_are_errors() {
        let t = |s, l, h, u, sp| fat_tree(s, l, h, u, Width::X4, sp);
        assert_eq!(
            t(0, 1, 1, 1, Speed::Qdr),
            Err(GenerateError::Zero { what: "spines" })
        );
        assert!(matches!(
            t(1, 300, 1, 1, Speed::Qdr),
            Err(GenerateError::TooManyPorts {
                which: "spine",
                ports: 300
            })
        ));
        assert_eq!(t(1, 1, 1, 1, Speed::Ndr), Err(GenerateError::Speed("NDR")));
        assert!(t(1, 1, 1, 1, Speed::Edr).unwrap().contains("w=2 s=4 e=2"));
    }
}
