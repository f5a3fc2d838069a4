//! Identity: GUIDs two nodes or ports share (RDK-F013), active ports with
//! no LID (RDK-F014) and LIDs two ports share (RDK-F015).
//!
//! A [`Subnet`] cannot hold two nodes with one node GUID (discovery would
//! take the second for the first), so discovery reports what it met as
//! [`GuidConflict`]s — from the model's own refusal
//! ([`GuidConflict::from_model_error`]) or from a node whose answers
//! changed between two routes. Port GUIDs are checked in the subnet: the
//! ports of one switch share its port 0 GUID; any other sharing is a
//! conflict.
//!
//! A port needs a LID once it is Active; ibnetdiscover does not print the
//! state, so a cabled port of unknown state counts as up. When no port of
//! the subnet has a LID the subnet manager never assigned any, which is
//! said once.

use std::collections::BTreeMap;

use rdmakit_doctor::codes::Code;
use rdmakit_doctor::finding::{Evidence, Finding};
use rdmakit_types::PortState;
use serde::{Deserialize, Serialize};

use super::group::Draft;
use super::{at, explain, node_name};
use crate::topology::{ModelError, Node, NodeKind, Port, Subnet};

/// A node GUID that discovery found on two different nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuidConflict {
    /// The GUID.
    #[serde(with = "crate::names::guid")]
    pub guid: u64,
    /// The description of the node found first.
    pub first: String,
    /// The description of the other.
    pub second: String,
}

impl GuidConflict {
    /// The conflict the model refused a node for.
    pub fn from_model_error(e: &ModelError) -> Option<GuidConflict> {
        match e {
            ModelError::DuplicateGuid {
                guid,
                first,
                second,
            } => Some(GuidConflict {
                guid: *guid,
                first: first.clone(),
                second: second.clone(),
            }),
            _ => None,
        }
    }
}

/// The drafts for GUIDs and LIDs.
pub(crate) fn check(s: &Subnet, conflicts: &[GuidConflict]) -> Vec<Draft> {
    let mut out = Vec::new();
    for c in conflicts {
        let f = Finding::new(
            Code::F013,
            format!("GUID {:#018x}", c.guid),
            format!(
                "GUID {:#018x}: two nodes have this node GUID: {:?} and {:?}",
                c.guid, c.first, c.second
            ),
        )
        .evidence(Evidence::new(
            format!("NodeInfo.NodeGUID {:#018x}", c.guid),
            format!("{:?} and {:?}", c.first, c.second),
        ));
        out.push(Draft::alone(guid_next(f)));
    }
    out.extend(port_guids(s));
    out.extend(lid_zero(s));
    out.extend(lid_overlaps(s));
    out
}

fn guid_next(f: Finding) -> Finding {
    f.remedy(
        "GUIDs come from the adapter's or switch's firmware (or a VM's configuration): two \
         alike are a cloned VM, a reflashed card or a firmware fault; give one a new GUID \
         (firmware tools, the hypervisor) — until then the SM routes to only one of them",
    )
    .next("ibnetdiscover")
    .next(explain(Code::F013))
}

/// Port GUIDs on more than one node.
fn port_guids(s: &Subnet) -> Vec<Draft> {
    let mut by: BTreeMap<u64, Vec<(&Node, u8)>> = BTreeMap::new();
    for n in s.nodes() {
        let mut mine: Vec<(u64, u8)> = n.ports.iter().map(|p| (p.guid, p.num)).collect();
        if let Some(p0) = n.port0 {
            mine.push((p0.guid, 0));
        }
        mine.sort_unstable();
        mine.dedup_by_key(|(g, _)| *g);
        for (g, num) in mine {
            by.entry(g).or_default().push((n, num));
        }
    }
    let mut out = Vec::new();
    for (guid, mut owners) in by.into_iter().filter(|(_, v)| v.len() > 1) {
        owners.sort_by_key(|(n, p)| (n.guid, *p));
        let names: Vec<String> = owners
            .iter()
            .map(|(n, p)| format!("{} port {p}", node_name(n)))
            .collect();
        let mut f = Finding::new(
            Code::F013,
            format!("GUID {guid:#018x}"),
            format!(
                "GUID {guid:#018x}: {} ports have this port GUID: {}",
                owners.len(),
                names.join(", ")
            ),
        );
        for (n, p) in &owners {
            f = f.evidence(Evidence::new(
                format!("{} PortGUID", at(n, *p)),
                format!("{guid:#018x}"),
            ));
        }
        out.push(Draft::alone(guid_next(f)));
    }
    out
}

/// True when the port is, or by what is known looks, up.
fn up(p: &Port) -> bool {
    match p.state {
        Some(s) => s == PortState::Active,
        None => p.remote.is_some(),
    }
}

/// Up ports (a switch: its port 0) without a LID.
fn lid_zero(s: &Subnet) -> Vec<Draft> {
    let mut candidates = 0usize;
    let mut zero: Vec<(&Node, &Port)> = Vec::new();
    for n in s.nodes() {
        match n.port0 {
            Some(p0) => {
                let Some(p) = n.ports.iter().find(|p| up(p)) else {
                    continue;
                };
                candidates += 1;
                if p0.lid == 0 {
                    zero.push((n, p));
                }
            }
            None => {
                for p in n.ports.iter().filter(|p| up(p)) {
                    candidates += 1;
                    if p.lid == 0 {
                        zero.push((n, p));
                    }
                }
            }
        }
    }
    if zero.is_empty() {
        return Vec::new();
    }
    let remedy = "A port gets its LID from the subnet manager's sweep: check that an SM is \
                  MASTER (sminfo) and sweeping; a port that stays at LID 0 while others have \
                  one is not reached by the SM (a route, an M_Key, or a port stuck in Init)";
    if zero.len() == candidates && candidates > 1 {
        let mut f = Finding::new(
            Code::F014,
            "fabric",
            format!(
                "fabric: none of the {candidates} ports that are up has a LID: no subnet \
                 manager has assigned LIDs"
            ),
        )
        .brief("no port has a LID");
        for (n, p) in zero.iter().take(4) {
            f = f.evidence(Evidence::new(format!("{} LID", at(n, num(n, p))), "0"));
        }
        return vec![Draft::alone(
            f.remedy(remedy).next("sminfo").next(explain(Code::F014)),
        )];
    }
    zero.into_iter()
        .map(|(n, p)| {
            let port = num(n, p);
            let subject = format!("{} port {port}", node_name(n));
            let state = p
                .state
                .map_or("cabled, state not read".to_string(), |s| format!("{s:?}"));
            let f = Finding::new(
                Code::F014,
                subject.clone(),
                format!("{subject}: the port is up ({state}) but has LID 0"),
            )
            .evidence(Evidence::new(format!("{} LID", at(n, port)), "0"))
            .evidence(Evidence::new(format!("{} PortState", at(n, port)), state))
            .remedy(remedy)
            .next("sminfo")
            .next(format!("ibportstate -D 0 {}", p.num))
            .next(explain(Code::F014));
            Draft::port(
                f,
                (n.guid, node_name(n)),
                port,
                "ports are up but have LID 0",
                "",
            )
        })
        .collect()
}

/// The port a LID belongs to: a switch's port 0, else the port.
fn num(n: &Node, p: &Port) -> u8 {
    if n.kind == NodeKind::Switch {
        0
    } else {
        p.num
    }
}

/// LID ranges (base LID and LMC) two ports share.
fn lid_overlaps(s: &Subnet) -> Vec<Draft> {
    let mut ranges: Vec<(u32, u32, &Node, u8)> = Vec::new();
    for n in s.nodes() {
        match n.port0 {
            Some(p0) if p0.lid != 0 => ranges.push((
                u32::from(p0.lid),
                u32::from(p0.lid) + (1u32 << p0.lmc.min(7)),
                n,
                0,
            )),
            Some(_) => {}
            None => {
                for p in n.ports.iter().filter(|p| p.lid != 0) {
                    ranges.push((
                        u32::from(p.lid),
                        u32::from(p.lid) + (1u32 << p.lmc.min(7)),
                        n,
                        p.num,
                    ));
                }
            }
        }
    }
    ranges.sort_by_key(|r| (r.0, r.1, r.2.guid, r.3));
    let mut by: BTreeMap<u32, Vec<(&Node, u8)>> = BTreeMap::new();
    let mut open: Option<(u32, u32, &Node, u8)> = None;
    for r in ranges {
        match open {
            Some(o) if r.0 < o.1 => {
                let v = by.entry(r.0).or_default();
                if v.is_empty() {
                    v.push((o.2, o.3));
                }
                v.push((r.2, r.3));
                if r.1 > o.1 {
                    open = Some(r);
                }
            }
            _ => open = Some(r),
        }
    }
    by.into_iter()
        .map(|(lid, owners)| {
            let names: Vec<String> = owners
                .iter()
                .map(|(n, p)| format!("{} port {p}", node_name(n)))
                .collect();
            let mut f = Finding::new(
                Code::F015,
                format!("LID {lid}"),
                format!(
                    "LID {lid}: {} ports answer at this LID: {}",
                    owners.len(),
                    names.join(", ")
                ),
            );
            for (n, p) in &owners {
                f = f.evidence(Evidence::new(format!("{} LID", at(n, *p)), lid.to_string()));
            }
            Draft::alone(
                f.remedy(
                    "Two ports with one LID get each other's packets: usually two SMs (or an \
                     SM restarted without its LID cache) assigned them; keep one MASTER and \
                     let it reassign (opensm's guid2lid file, a re-sweep)",
                )
                .next("sminfo")
                .next("ibnetdiscover")
                .next(explain(Code::F015)),
            )
        })
        .collect()
}
