//! Port counters over the PMA: every port of a [`Subnet`] that has a LID,
//! read the way perfquery reads one port, in batches.
//!
//! Which ports ([`targets`]): a CA's (or router's) port by its own LID; a
//! switch's ports by the switch's LID (its port 0) and the port number.
//! Ports that are Down are left out, as is anything without a LID (a subnet
//! with no SM yet).
//!
//! What is read ([`read`]), three batches through the MAD layer's window:
//! 1. ClassPortInfo once per LID: whether its PMA has PortCountersExtended;
//! 2. PortCounters of every port, and PortCountersExtended where supported;
//! 3. only when asked ([`Options::reset`]): a Set of PortCounters with
//!    CounterSelect all ones (and CounterSelect2's PortXmitWait bit), and of
//!    PortCountersExtended where supported, which clears them after they
//!    were read (perfquery's `-r`).
//!
//! The result is plain data ([`Counters`], JSON schema
//! `rdmakit.fabric.counters/v1`): per port its node, port number, LID and two
//! maps of counters by the names perfquery prints, one per attribute:
//! `counters` (PortCounters, `perfquery LID PORT`; QP1Dropped is read where
//! IBTA puts it, while perfquery 44 prints VL15Dropped's value under that
//! name) and `extended`
//! (PortCountersExtended, `perfquery -x LID PORT`; absent when the PMA has
//! none). PortCounters' counters stop at all ones: `saturated` names the
//! ones that did. A port that did not answer is in `unread` with the error.
//!
//! ```json
//! {"schema": "rdmakit.fabric.counters/v1", "reset": false, "mads": 190,
//!  "ports": [{"node_guid": "0x0000000000200000", "node_desc": "leaf1",
//!             "kind": "Switch", "port": 1, "lid": 2,
//!             "counters": {"LinkDownedCounter": 0, "SymbolErrorCounter": 12, ...},
//!             "extended": {"PortXmitData": 4896, ...},
//!             "saturated": []}],
//!  "unread": []}
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use comfy_table::{presets, CellAlignment, ContentArrangement, Table};
use rdmakit_umad::MadError;
use rdmakit_wire::mad::pma::{self, attr, class_port_info, port_counters, port_counters_ext};
use rdmakit_wire::mad::Attribute;
use serde::{Deserialize, Serialize};

use crate::names;
use crate::topology::{NodeKind, Subnet};

/// The JSON schema name of [`Counters`].
pub const SCHEMA: &str = "rdmakit.fabric.counters/v1";

/// The error counters of PortCounters (everything but the data and packet
/// counters), in perfquery's order: what the default table shows.
pub const ERROR_COUNTERS: [&str; 14] = [
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "LinkDownedCounter",
    "PortRcvErrors",
    "PortRcvRemotePhysicalErrors",
    "PortRcvSwitchRelayErrors",
    "PortXmitDiscards",
    "PortXmitConstraintErrors",
    "PortRcvConstraintErrors",
    "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors",
    "QP1Dropped",
    "VL15Dropped",
    "PortXmitWait",
];

/// One PMA request: what to ask of port `port` behind LID `lid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmaRequest {
    /// The destination LID.
    pub lid: u16,
    /// The port (PortSelect; 0 for ClassPortInfo).
    pub port: u8,
    /// What to ask.
    pub kind: PmaKind,
}

/// The PMA requests counters makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmaKind {
    /// Get ClassPortInfo.
    ClassPortInfo,
    /// Get PortCounters.
    PortCounters,
    /// Get PortCountersExtended.
    PortCountersExtended,
    /// Set PortCounters with every CounterSelect bit: clears them.
    ResetPortCounters,
    /// Set PortCountersExtended with every CounterSelect bit.
    ResetPortCountersExtended,
}

impl PmaRequest {
    /// The MAD this request is, with transaction ID `tid`.
    pub fn mad(&self, tid: u64) -> pma::Repr {
        match self.kind {
            PmaKind::ClassPortInfo => pma::Repr::get(attr::CLASS_PORT_INFO, 0, tid),
            PmaKind::PortCounters => pma::Repr::get(attr::PORT_COUNTERS, self.port, tid),
            PmaKind::PortCountersExtended => {
                pma::Repr::get(attr::PORT_COUNTERS_EXTENDED, self.port, tid)
            }
            PmaKind::ResetPortCounters => {
                pma::Repr::reset_port_counters(self.port, port_counters::select::ALL, 0x01, tid)
            }
            PmaKind::ResetPortCountersExtended => {
                pma::Repr::reset(attr::PORT_COUNTERS_EXTENDED, self.port, 0x00ff, tid)
            }
        }
    }
}

/// Where the counters' PMA requests go. `send_many` sends every request and
/// returns the 192 bytes of PMA data of each reply, in the order asked.
pub trait Pma {
    /// The replies' PMA data, one result per request, in order.
    fn send_many(&mut self, requests: &[PmaRequest]) -> Vec<Result<[u8; 192], MadError>>;
}

/// What [`read`] does besides reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Clear every counter of each port after reading it.
    pub reset: bool,
}

/// The counters of a subnet's ports; see the module's documentation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// [`SCHEMA`].
    pub schema: String,
    /// True when the counters were cleared after they were read.
    pub reset: bool,
    /// PMA requests sent.
    pub mads: u64,
    /// The ports read, in the subnet's order.
    pub ports: Vec<PortCounters>,
    /// The ports (or requests) that got no answer.
    pub unread: Vec<Unread>,
}

/// One port's counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortCounters {
    /// The node's GUID.
    #[serde(with = "names::guid")]
    pub node_guid: u64,
    /// The node's description.
    pub node_desc: String,
    /// Switch, CA or router.
    pub kind: NodeKind,
    /// The port number.
    pub port: u8,
    /// The LID the requests went to (a switch's port 0 LID).
    pub lid: u16,
    /// PortCounters by perfquery's names (18 counters).
    pub counters: BTreeMap<String, u64>,
    /// PortCountersExtended by `perfquery -x`'s names (8 counters, 64 bits;
    /// 22 when ClassPortInfo has IsAdditionalPortCountersExtendedSupported:
    /// the error counters too, which then do not saturate); None when the
    /// PMA has none or it was not read.
    pub extended: Option<BTreeMap<String, u64>>,
    /// The counters of `counters` that read all ones (they stopped).
    pub saturated: Vec<String>,
}

/// A request that got no answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unread {
    /// The node's GUID.
    #[serde(with = "names::guid")]
    pub node_guid: u64,
    /// The node's description.
    pub node_desc: String,
    /// The port (0 for ClassPortInfo).
    pub port: u8,
    /// The LID asked.
    pub lid: u16,
    /// The attribute: `ClassPortInfo`, `PortCounters`, ...
    pub what: String,
    /// Why, with the layer to look at.
    pub error: String,
}

/// A port to read: its node and the LID and port number to ask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The node's GUID.
    pub node_guid: u64,
    /// The node's description.
    pub node_desc: String,
    /// Its kind.
    pub kind: NodeKind,
    /// The LID to ask.
    pub lid: u16,
    /// The port number.
    pub port: u8,
}

impl PortCounters {
    /// A counter by name: PortCountersExtended's 64-bit value when read,
    /// else PortCounters'.
    pub fn value(&self, name: &str) -> Option<u64> {
        self.extended
            .as_ref()
            .and_then(|e| e.get(name))
            .or_else(|| self.counters.get(name))
            .copied()
    }

    /// The error counters ([`ERROR_COUNTERS`]) that are not 0, by
    /// [`PortCounters::value`].
    pub fn errors(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        ERROR_COUNTERS
            .iter()
            .filter_map(|n| Some((*n, self.value(n)?)))
            .filter(|(_, v)| *v != 0)
    }
}

impl Counters {
    /// True when every request was answered.
    pub fn complete(&self) -> bool {
        self.unread.is_empty()
    }
}

/// The ports [`read`] asks about: every port that is not Down and has a LID
/// (a CA's own, a switch's port 0's), in the subnet's order.
pub fn targets(subnet: &Subnet) -> Vec<Target> {
    let mut out = Vec::new();
    for n in subnet.nodes() {
        for p in &n.ports {
            let lid = n.lid_of(p);
            let down = p.state.is_some_and(|s| s == rdmakit_types::PortState::Down);
            if lid != 0 && p.num != 0 && !down {
                out.push(Target {
                    node_guid: n.guid,
                    node_desc: n.desc.clone(),
                    kind: n.kind,
                    lid,
                    port: p.num,
                });
            }
        }
    }
    out
}

/// Reads the counters of `targets` through `pma` (and clears them after
/// when `opts.reset`).
pub fn read(pma: &mut dyn Pma, targets: &[Target], opts: &Options) -> Counters {
    let mut out = Counters {
        schema: SCHEMA.to_string(),
        reset: opts.reset,
        mads: 0,
        ports: Vec::new(),
        unread: Vec::new(),
    };
    // 1. ClassPortInfo once per LID.
    let lids: Vec<&Target> = {
        let mut seen = BTreeSet::new();
        targets.iter().filter(|t| seen.insert(t.lid)).collect()
    };
    let reqs: Vec<PmaRequest> = lids
        .iter()
        .map(|t| PmaRequest {
            lid: t.lid,
            port: 0,
            kind: PmaKind::ClassPortInfo,
        })
        .collect();
    // Per LID: PortCountersExtended there, and its 64-bit error counters.
    let mut extended: BTreeMap<u16, (bool, bool)> = BTreeMap::new();
    let mut dead: BTreeSet<u16> = BTreeSet::new();
    for (t, r) in lids.iter().zip(send(pma, &reqs, &mut out.mads)) {
        match r.and_then(|d| parse::<class_port_info::Repr>(&d)) {
            Ok(cpi) => {
                let ext = cpi.has_extended_counters();
                let additional = ext && cpi.has_additional_extended_counters();
                extended.insert(t.lid, (ext, additional));
            }
            Err(e) => {
                out.unread.push(unread(t, 0, "ClassPortInfo", &e));
                dead.insert(t.lid);
            }
        }
    }

    // 2. PortCounters, and PortCountersExtended where there is one.
    let live: Vec<&Target> = targets.iter().filter(|t| !dead.contains(&t.lid)).collect();
    let mut reqs = Vec::new();
    for t in &live {
        reqs.push(request(t, PmaKind::PortCounters));
        if extended.get(&t.lid).is_some_and(|e| e.0) {
            reqs.push(request(t, PmaKind::PortCountersExtended));
        }
    }
    let mut replies = send(pma, &reqs, &mut out.mads).into_iter();
    for t in &live {
        let pc = replies
            .next()
            .unwrap_or(Err(MadError::Invalid("no reply")))
            .and_then(|d| parse::<port_counters::Repr>(&d));
        let (has_ext, additional) = extended.get(&t.lid).copied().unwrap_or_default();
        let ext = has_ext.then(|| {
            replies
                .next()
                .unwrap_or(Err(MadError::Invalid("no reply")))
                .and_then(|d| parse::<port_counters_ext::Repr>(&d))
        });
        let pc = match pc {
            Ok(pc) => pc,
            Err(e) => {
                out.unread.push(unread(t, t.port, "PortCounters", &e));
                continue;
            }
        };
        let ext = match ext {
            Some(Ok(x)) => Some(x),
            Some(Err(e)) => {
                out.unread
                    .push(unread(t, t.port, "PortCountersExtended", &e));
                None
            }
            None => None,
        };
        out.ports.push(port_of(t, &pc, ext.as_ref(), additional));
    }

    // 3. The reset, only when asked, only of what was read.
    if opts.reset {
        let mut reqs = Vec::new();
        for p in &out.ports {
            let t = Target {
                node_guid: p.node_guid,
                node_desc: p.node_desc.clone(),
                kind: p.kind,
                lid: p.lid,
                port: p.port,
            };
            reqs.push((t.clone(), request(&t, PmaKind::ResetPortCounters)));
            if p.extended.is_some() {
                reqs.push((t.clone(), request(&t, PmaKind::ResetPortCountersExtended)));
            }
        }
        let only: Vec<PmaRequest> = reqs.iter().map(|r| r.1).collect();
        for ((t, r), reply) in reqs.iter().zip(send(pma, &only, &mut out.mads)) {
            if let Err(e) = reply {
                let what = match r.kind {
                    PmaKind::ResetPortCountersExtended => "reset PortCountersExtended",
                    _ => "reset PortCounters",
                };
                out.unread.push(unread(t, t.port, what, &e));
            }
        }
    }
    out
}

fn request(t: &Target, kind: PmaKind) -> PmaRequest {
    PmaRequest {
        lid: t.lid,
        port: t.port,
        kind,
    }
}

fn send(
    pma: &mut dyn Pma,
    reqs: &[PmaRequest],
    mads: &mut u64,
) -> Vec<Result<[u8; 192], MadError>> {
    if reqs.is_empty() {
        return Vec::new();
    }
    *mads += reqs.len() as u64;
    let mut r = pma.send_many(reqs);
    r.resize_with(reqs.len(), || {
        Err(MadError::Invalid("no reply returned for this request"))
    });
    r
}

fn parse<A: Attribute>(data: &[u8; 192]) -> Result<A, MadError> {
    A::from_data(data).map_err(|_| MadError::Invalid("the reply's attribute does not parse"))
}

fn unread(t: &Target, port: u8, what: &str, e: &MadError) -> Unread {
    Unread {
        node_guid: t.node_guid,
        node_desc: t.node_desc.clone(),
        port,
        lid: t.lid,
        what: what.to_string(),
        error: e.to_string(),
    }
}

fn port_of(
    t: &Target,
    pc: &port_counters::Repr,
    ext: Option<&port_counters_ext::Repr>,
    additional: bool,
) -> PortCounters {
    let attribute = pc.counters();
    PortCounters {
        node_guid: t.node_guid,
        node_desc: t.node_desc.clone(),
        kind: t.kind,
        port: t.port,
        lid: t.lid,
        counters: attribute
            .iter()
            .map(|(c, v)| (c.name.to_string(), *v))
            .collect(),
        extended: ext.map(|x| {
            let more = match additional {
                true => x.additional_counters().to_vec(),
                false => Vec::new(),
            };
            x.counters()
                .iter()
                .chain(&more)
                .map(|(c, v)| (c.name.to_string(), *v))
                .collect()
        }),
        saturated: attribute
            .iter()
            .filter(|(c, v)| c.is_saturated(*v))
            .map(|(c, _)| c.name.to_string())
            .collect(),
    }
}

/// The counters as a table, one row per port, perfquery's names as columns:
/// by default only the ports with an error counter that is not 0 and only
/// those counters; with `all`, every port and every counter (the data
/// counters from PortCountersExtended when read). A summary line follows,
/// then what could not be read.
pub fn render(c: &Counters, all: bool) -> String {
    let rows: Vec<&PortCounters> = c
        .ports
        .iter()
        .filter(|p| all || p.errors().next().is_some())
        .collect();
    let columns: Vec<String> = if all {
        let mut v: Vec<String> = port_counters::COUNTERS
            .iter()
            .map(|c| c.name.to_string())
            .collect();
        for x in port_counters_ext::COUNTERS {
            if c.ports.iter().any(|p| p.extended.is_some()) && !v.iter().any(|n| n == x.name) {
                v.push(x.name.to_string());
            }
        }
        v
    } else {
        ERROR_COUNTERS
            .iter()
            .filter(|n| rows.iter().any(|p| p.value(n).is_some_and(|v| v != 0)))
            .map(|n| n.to_string())
            .collect()
    };
    let mut s = String::new();
    if !rows.is_empty() {
        let mut t = Table::new();
        t.load_preset(presets::NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled);
        let mut header = vec!["Node".to_string(), "Port".into(), "LID".into()];
        header.extend(columns.iter().cloned());
        t.set_header(header);
        for p in &rows {
            let mut row = vec![p.node_desc.clone(), p.port.to_string(), p.lid.to_string()];
            for col in &columns {
                let v = p.value(col).map_or("-".to_string(), |v| v.to_string());
                let sat = p.saturated.iter().any(|n| n == col);
                row.push(if sat { format!("{v} (saturated)") } else { v });
            }
            t.add_row(row);
        }
        for i in 1..columns.len() + 3 {
            if let Some(col) = t.column_mut(i) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
        let _ = writeln!(s, "{}", trimmed(&t));
    }
    let with_errors = c
        .ports
        .iter()
        .filter(|p| p.errors().next().is_some())
        .count();
    let _ = writeln!(
        s,
        "{} ports read, {with_errors} with error counters not 0{}",
        c.ports.len(),
        if c.reset {
            "; every counter read was cleared"
        } else {
            ""
        }
    );
    for u in &c.unread {
        let _ = writeln!(
            s,
            "not read: {} of {:?} port {} (LID {}): {}",
            u.what, u.node_desc, u.port, u.lid, u.error
        );
    }
    s
}

/// The table's lines without the padding comfy-table leaves at their ends.
fn trimmed(t: &Table) -> String {
    let lines: Vec<String> = t.lines().map(|l| l.trim_end().to_string()).collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PMA that answers from a table: (lid, port) → PortCounters data;
    /// LIDs in `silent` time out; ClassPortInfo says ExtendedWidth.
    struct Table1 {
        set: BTreeMap<(u16, u8), port_counters::Repr>,
        silent: BTreeSet<u16>,
        sent: Vec<PmaRequest>,
        /// ClassPortInfo has IsAdditionalPortCountersExtendedSupported.
        additional: bool,
    }

    impl Pma for Table1 {
        fn send_many(&mut self, reqs: &[PmaRequest]) -> Vec<Result<[u8; 192], MadError>> {
            self.sent.extend_from_slice(reqs);
            reqs.iter()
                .map(|r| {
                    if self.silent.contains(&r.lid) {
                        return Err(MadError::Timeout {
                            attempts: 4,
                            timeout_ms: 200,
                        });
                    }
                    let mut d = [0u8; 192];
                    match r.kind {
                        PmaKind::ClassPortInfo => class_port_info::Repr {
                            capability_mask: class_port_info::CAP_EXTENDED_WIDTH,
                            capability_mask2: match self.additional {
                                true => class_port_info::CAP2_ADDITIONAL_PORT_COUNTERS_EXTENDED,
                                false => 0,
                            },
                            ..Default::default()
                        }
                        .to_data(&mut d),
                        PmaKind::PortCounters => self
                            .set
                            .get(&(r.lid, r.port))
                            .copied()
                            .unwrap_or_default()
                            .to_data(&mut d),
                        PmaKind::PortCountersExtended => port_counters_ext::Repr {
                            port_xmit_data: 1 << 40,
                            symbol_error_counter: 1 << 33,
                            ..Default::default()
                        }
                        .to_data(&mut d),
                        _ => Ok(()),
                    }
                    .unwrap();
                    Ok(d)
                })
                .collect()
        }
    }

    fn subnet() -> Subnet {
        let mut s = crate::ibnetdiscover::parse(&rdmakit_testkit::ibsim::dumbbell()).unwrap();
        // LIDs as opensm gives them on the dumbbell, ports Active.
        let lids = [
            ("H1", 1),
            ("S1", 2),
            ("S2", 3),
            ("H2", 4),
            ("H3", 5),
            ("H4", 6),
        ];
        for (d, lid) in lids {
            let g = s.nodes_by_desc(d).next().unwrap().guid;
            let n = s.node_mut(g).unwrap();
            match n.port0.as_mut() {
                Some(p0) => p0.lid = lid,
                None => n.ports[0].lid = lid,
            }
            for p in &mut n.ports {
                p.state = Some(rdmakit_types::PortState::Active);
            }
        }
        s
    }

    #[test]
    fn switch_ports_go_to_the_switch_lid_and_errors_are_picked_out() {
        let s = subnet();
        let t = targets(&s);
        // 4 hosts, 4 cabled ports on each switch.
        assert_eq!(t.len(), 12);
        assert!(t.iter().any(|t| (t.lid, t.port) == (2, 7)));
        let mut pma = Table1 {
            set: BTreeMap::from([(
                (2, 7),
                port_counters::Repr {
                    symbol_error_counter: 77,
                    link_downed_counter: 255,
                    port_xmit_data: 4896,
                    ..Default::default()
                },
            )]),
            silent: BTreeSet::from([6]),
            sent: Vec::new(),
            additional: false,
        };
        let c = read(&mut pma, &t, &Options::default());
        assert_eq!(c.ports.len(), 11);
        assert_eq!(c.unread.len(), 1);
        assert_eq!(
            (c.unread[0].lid, c.unread[0].what.as_str()),
            (6, "ClassPortInfo")
        );
        let p = c.ports.iter().find(|p| (p.lid, p.port) == (2, 7)).unwrap();
        assert_eq!(p.counters["SymbolErrorCounter"], 77);
        assert_eq!(p.counters.len(), 18);
        assert_eq!(p.saturated, ["LinkDownedCounter"]);
        assert_eq!(p.value("PortXmitData"), Some(1 << 40), "extended wins");
        assert_eq!(
            p.errors().collect::<Vec<_>>(),
            [("SymbolErrorCounter", 77), ("LinkDownedCounter", 255)]
        );
        // One ClassPortInfo per LID, no reset unless asked.
        let cpi = pma
            .sent
            .iter()
            .filter(|r| r.kind == PmaKind::ClassPortInfo)
            .count();
        assert_eq!(cpi, 6);
        assert!(!pma
            .sent
            .iter()
            .any(|r| r.kind == PmaKind::ResetPortCounters));
        let text = render(&c, false);
        assert!(
            text.contains("SymbolErrorCounter") && text.contains("255 (saturated)"),
            "{text}"
        );
        assert!(!text.contains("PortXmitData"), "{text}");
        assert!(
            text.contains("11 ports read, 1 with error counters not 0"),
            "{text}"
        );
        assert!(text.contains("not read: ClassPortInfo of \"H4\""), "{text}");
        let json = serde_json::to_string(&c).unwrap();
        let back: Counters = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn reset_is_sent_only_when_asked_and_clears_everything() {
        let s = subnet();
        let mut pma = Table1 {
            set: BTreeMap::new(),
            silent: BTreeSet::new(),
            sent: Vec::new(),
            additional: false,
        };
        let c = read(&mut pma, &targets(&s), &Options { reset: true });
        assert!(c.reset && c.complete());
        let resets: Vec<&PmaRequest> = pma
            .sent
            .iter()
            .filter(|r| r.kind == PmaKind::ResetPortCounters)
            .collect();
        assert_eq!(resets.len(), 12);
        let mad = resets[0].mad(1).to_bytes();
        assert_eq!(
            (mad[3], &mad[66..68], mad[82]),
            (0x02, &[0xff, 0xff][..], 0x01)
        );
    }

    #[test]
    fn additional_extended_counters_are_read_as_64_bits_where_offered() {
        let s = subnet();
        let mut pma = Table1 {
            set: BTreeMap::from([(
                (2, 7),
                port_counters::Repr {
                    symbol_error_counter: 0xffff,
                    ..Default::default()
                },
            )]),
            silent: BTreeSet::new(),
            sent: Vec::new(),
            additional: true,
        };
        let c = read(&mut pma, &targets(&s), &Options::default());
        let p = c.ports.iter().find(|p| (p.lid, p.port) == (2, 7)).unwrap();
        assert_eq!(p.counters["SymbolErrorCounter"], 0xffff);
        assert_eq!(p.saturated, ["SymbolErrorCounter"]);
        assert_eq!(p.extended.as_ref().unwrap().len(), 22);
        assert_eq!(p.value("SymbolErrorCounter"), Some(1 << 33));
        assert!(p.errors().any(|e| e == ("SymbolErrorCounter", 1 << 33)));
    }
}
