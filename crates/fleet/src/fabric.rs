//! The InfiniBand fabric beside the fleet: a saved `rdmakit fabric discover
//! --json --routes` (and saved counters) tells, for a node the fleet report
//! names, which switch port its HCA port is cabled to and what that switch's
//! error counters say ([`Fabric::attachments`]); and, for a pair the pairwise
//! matrix finds slow, which switch ports and inter-switch cables the pair's
//! traffic crosses and which of their counters moved ([`Fabric::route_note`]).
//!
//! Nodes are tied to the subnet by GUID: an inventory port's `port_guid`
//! (GID 0's interface id) names a CA port; failing that, the device's
//! `node_guid` names a CA and the port number its port. The pairwise matrix
//! carries no GUIDs: its nodes are found by the CA's NodeDescription, whose
//! first word the kernel sets to the host name (`n05 mlx5_0`).
//!
//! The files are outside input: read bounded ([`rdmakit_host::bounded`],
//! 64 MiB a JSON document), parsed into the fabric's types, and used only to
//! name ports; nothing in them is acted on.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use rdmakit_doctor::inventory::Inventory;
use rdmakit_fabric::counters::Counters;
use rdmakit_fabric::route::{self, FabricFile};
use rdmakit_fabric::{NodeKind, PortRef, Subnet};
use rdmakit_host::bounded::{read_named, Cap};
use serde::{Deserialize, Serialize};

/// A saved fabric and up to two counter snapshots (before and after).
#[derive(Clone, Debug)]
pub struct Fabric {
    /// The discovery (with the LFTs when saved with `--routes`).
    pub file: FabricFile,
    /// The counters given, oldest first: none, the counters now, or before
    /// and after.
    pub counters: Vec<Counters>,
}

/// Where a node's HCA port meets the fabric.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    /// The device (`mlx5_0`).
    pub device: String,
    /// Its port number.
    pub port: u32,
    /// The port's GUID in the subnet, `0x` and 16 hex digits.
    pub port_guid: String,
    /// Its LID.
    pub lid: u16,
    /// The switch its cable reaches (NodeDescription).
    pub switch: String,
    /// The switch's GUID.
    pub switch_guid: String,
    /// The switch's port.
    pub switch_port: u8,
    /// That switch port's error counters that are not 0 (the last
    /// counters given; growth when two were given).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// The same switch's ports to other switches whose error counters are
    /// not 0: the uplinks this node's traffic leaves by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uplinks: Vec<Uplink>,
}

/// A switch's port to another switch, with its error counters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Uplink {
    /// The port.
    pub port: u8,
    /// The switch at the other end.
    pub peer: String,
    /// Its port.
    pub peer_port: u8,
    /// The error counters not 0.
    pub errors: BTreeMap<String, u64>,
}

/// What the fabric says about one direction of a pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouteNote {
    /// The requester.
    pub from: String,
    /// The responder.
    pub to: String,
    /// The switches crossed, each with its in and out port:
    /// `leaf1[1→5] → spine2[1→3] → leaf3[5→1]`; None when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The switch ports crossed: `leaf1 port 1`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switch_ports: Vec<String>,
    /// The inter-switch cables crossed: `leaf1[5] → spine2[1]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub isls: Vec<String>,
    /// The error counters of those ports that moved between the two
    /// snapshots (`leaf3 port 1 SymbolErrorCounter +100`), or, with one
    /// snapshot, that are not 0 (`... SymbolErrorCounter 100`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<String>,
    /// Why there is no route (a node not in the subnet, no LFTs, a hole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RouteNote {
    /// One line: `n1 → n5: route leaf1[1→5] → spine2[1→3] → leaf3[5→1];
    /// leaf3 port 1 SymbolErrorCounter +100`.
    pub fn line(&self) -> String {
        let mut s = format!("{} → {}: ", self.from, self.to);
        match (&self.route, &self.error) {
            (Some(r), _) => {
                let _ = write!(s, "route {r}");
            }
            (None, Some(e)) => {
                let _ = write!(s, "no route: {e}");
            }
            (None, None) => s.push_str("no route"),
        }
        if !self.counters.is_empty() {
            let _ = write!(s, "; {}", self.counters.join(", "));
        }
        s
    }
}

impl Attachment {
    /// `n05 mlx5_0/1 ↔ leaf2 port 3`, then its errors and its uplinks'.
    pub fn describe(&self, node: &str) -> String {
        let mut s = format!(
            "{node} {}/{} ↔ {} port {}",
            self.device, self.port, self.switch, self.switch_port
        );
        if !self.errors.is_empty() {
            let _ = write!(s, " ({})", show(&self.errors, ""));
        }
        for u in &self.uplinks {
            let _ = write!(
                s,
                "; {} port {} → {}[{}]: {}",
                self.switch,
                u.port,
                u.peer,
                u.peer_port,
                show(&u.errors, "")
            );
        }
        s
    }
}

fn show(m: &BTreeMap<String, u64>, sign: &str) -> String {
    m.iter()
        .map(|(k, v)| format!("{k} {sign}{v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `0x` and 16 hex digits.
fn hex(g: u64) -> String {
    format!("{g:#018x}")
}

/// A GUID as sysfs (`0002:c903:0010:9c82`) or the fabric (`0x...`) writes
/// it.
pub fn parse_guid(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    // sysfs: four groups of four hex digits.
    if t.contains(':') && (t.split(':').count() != 4 || t.split(':').any(|g| g.len() != 4)) {
        return None;
    }
    let digits: String = t.chars().filter(|&c| c != ':').collect();
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(&digits, 16).ok()
}

impl Fabric {
    /// Reads `--fabric FILE` and each `--fabric-counters FILE` (at most
    /// two: before and after), bounded.
    ///
    /// # Errors
    /// A file unreadable, too large, not UTF-8 or not of its kind, or more
    /// than two counter files; the message names the flag and the file.
    pub fn read(path: &str, counters: &[String]) -> Result<Fabric, String> {
        if counters.len() > 2 {
            return Err(format!(
                "--fabric-counters: {} files; give one (the counters now) or two (before and after)",
                counters.len()
            ));
        }
        let text = |flag: &str, p: &str| -> Result<String, String> {
            let bytes =
                read_named(Path::new(p), Cap::DOCUMENT).map_err(|e| format!("{flag} {e}"))?;
            String::from_utf8(bytes).map_err(|e| format!("{flag} {p}: {e}"))
        };
        let file = FabricFile::from_json(&text("--fabric", path)?)
            .map_err(|e| format!("--fabric {path}: {e}"))?;
        let mut read = Vec::new();
        for p in counters {
            let c = route::counters_from_json(&text("--fabric-counters", p)?)
                .map_err(|e| format!("--fabric-counters {p}: {e}"))?;
            read.push(c);
        }
        Ok(Fabric {
            file,
            counters: read,
        })
    }

    fn subnet(&self) -> &Subnet {
        &self.file.subnet
    }

    /// The error counters of a port to show: growth between the two
    /// snapshots, or the nonzero totals of the one; and the sign to print.
    fn errors(&self, at: PortRef) -> (BTreeMap<String, u64>, &'static str) {
        match self.counters.as_slice() {
            [before, after] => (route::port_moved(before, after, at), "+"),
            [now] => (route::port_errors(now, at), ""),
            _ => (BTreeMap::new(), ""),
        }
    }

    /// Where each InfiniBand port of a node's inventory meets the fabric:
    /// its port GUID (or its device's node GUID and port number) found
    /// among the subnet's CA ports, and the switch port its cable reaches.
    pub fn attachments(&self, inv: &Inventory) -> Vec<Attachment> {
        let s = self.subnet();
        let mut out = Vec::new();
        for d in &inv.devices {
            let node_guid = d.node_guid.as_deref().and_then(parse_guid);
            for p in &d.ports {
                let by_port = p.port_guid.as_deref().and_then(parse_guid).and_then(|g| {
                    s.nodes()
                        .iter()
                        .filter(|n| n.kind != NodeKind::Switch)
                        .find_map(|n| n.ports.iter().find(|q| q.guid == g).map(|q| (n, q)))
                });
                let by_node = || {
                    let n = s.node(node_guid?)?;
                    let q = n.port(u8::try_from(p.num).ok()?)?;
                    (n.kind != NodeKind::Switch).then_some((n, q))
                };
                let Some((_, q)) = by_port.or_else(by_node) else {
                    continue;
                };
                let Some(sw) = q.remote else { continue };
                let Some(swn) = s.node(sw.guid) else { continue };
                let (errors, _) = self.errors(sw);
                let uplinks = swn
                    .ports
                    .iter()
                    .filter_map(|up| {
                        let peer = up.remote?;
                        let pn = s.node(peer.guid)?;
                        if pn.kind != NodeKind::Switch {
                            return None;
                        }
                        let at = PortRef {
                            guid: swn.guid,
                            port: up.num,
                        };
                        let (errors, _) = self.errors(at);
                        (!errors.is_empty()).then(|| Uplink {
                            port: up.num,
                            peer: pn.desc.clone(),
                            peer_port: peer.port,
                            errors,
                        })
                    })
                    .collect();
                out.push(Attachment {
                    device: d.name.clone(),
                    port: p.num,
                    port_guid: hex(q.guid),
                    lid: q.lid,
                    switch: swn.desc.clone(),
                    switch_guid: hex(swn.guid),
                    switch_port: sw.port,
                    errors,
                    uplinks,
                });
            }
        }
        out
    }

    /// The LID of a pairwise node: the CA port whose node's description is
    /// the name, or starts with the name and a space (`n05 mlx5_0`; with
    /// several, the one naming `device`).
    pub fn lid_of_name(&self, name: &str, device: &str) -> Result<u16, String> {
        let cas: Vec<_> = self
            .subnet()
            .nodes()
            .iter()
            .filter(|n| n.kind == NodeKind::Ca)
            .filter(|n| {
                n.desc == name
                    || n.desc
                        .strip_prefix(name)
                        .is_some_and(|rest| rest.starts_with(' '))
            })
            .collect();
        let pick = match cas.as_slice() {
            [] => return Err(format!("no CA of the fabric is described as {name:?}")),
            [one] => *one,
            many => many
                .iter()
                .find(|n| n.desc.split_whitespace().nth(1) == Some(device))
                .copied()
                .ok_or_else(|| {
                    format!(
                        "{} CAs of the fabric are described as {name:?}, none with {device:?}",
                        many.len()
                    )
                })?,
        };
        pick.ports
            .iter()
            .find(|p| p.lid != 0)
            .map(|p| p.lid)
            .ok_or_else(|| format!("{:?} has no LID in the fabric", pick.desc))
    }

    /// The route from one pairwise node to another and the counters of the
    /// ports on it.
    pub fn route_note(&self, from: (&str, &str), to: (&str, &str)) -> RouteNote {
        let mut note = RouteNote {
            from: from.0.to_string(),
            to: to.0.to_string(),
            route: None,
            switch_ports: Vec::new(),
            isls: Vec::new(),
            counters: Vec::new(),
            error: None,
        };
        let lids = self
            .lid_of_name(from.0, from.1)
            .and_then(|a| Ok((a, self.lid_of_name(to.0, to.1)?)));
        let r = lids.and_then(|(a, b)| match &self.file.lfts {
            None => Err(
                "the fabric file has no forwarding tables (save it with fabric discover --routes)"
                    .to_string(),
            ),
            Some(_) => self.file.route(a, b).map_err(|e| e.to_string()),
        });
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                note.error = Some(e);
                return note;
            }
        };
        note.route = Some(route::compact(&r));
        let desc = |g: u64| {
            self.subnet()
                .node(g)
                .map_or_else(|| hex(g), |n| n.desc.clone())
        };
        for h in &r.hops {
            for p in [h.in_port, h.out_port] {
                if p != 0 {
                    note.switch_ports.push(format!("{} port {p}", h.desc));
                }
            }
        }
        note.isls = r
            .isls()
            .iter()
            .map(|i| {
                format!(
                    "{}[{}] → {}[{}]",
                    desc(i.from.guid),
                    i.from.port,
                    desc(i.to.guid),
                    i.to.port
                )
            })
            .collect();
        for at in r.ports() {
            let (errors, sign) = self.errors(at);
            for (k, v) in errors {
                note.counters
                    .push(format!("{} port {} {k} {sign}{v}", desc(at.guid), at.port));
            }
        }
        note
    }
}

/// Ties a fleet report to the fabric: every node that needs attention and
/// has an inventory gets its [`Attachment`]s; a note says how many were
/// found and names those that were not.
pub fn tie(report: &mut crate::report::FleetReport, fabric: &Fabric) {
    let mut found = 0;
    let mut lost = Vec::new();
    let mut asked = 0;
    for n in report
        .nodes
        .iter_mut()
        .filter(|n| n.status != crate::report::Status::Ok)
    {
        let Some(inv) = &n.inventory else { continue };
        asked += 1;
        n.fabric = fabric.attachments(inv);
        match n.fabric.is_empty() {
            true => lost.push(n.name.clone()),
            false => found += 1,
        }
    }
    let mut note =
        format!("fabric: {found} of {asked} nodes needing attention found in the subnet by GUID");
    if !lost.is_empty() {
        let shown: Vec<&str> = lost.iter().take(5).map(String::as_str).collect();
        let _ = write!(
            note,
            "; not found: {}{}",
            shown.join(", "),
            if lost.len() > 5 { ", ..." } else { "" }
        );
    }
    report.notes.push(note);
}

/// `report` as `rdmakit fleet pairwise` shows it: with its faults' routes
/// ([`route_pairwise`]) when a fabric is given, else as it is.
pub fn with_routes<'a>(
    report: &'a crate::pairwise::report::PairwiseReport,
    fabric: Option<&Fabric>,
) -> std::borrow::Cow<'a, crate::pairwise::report::PairwiseReport> {
    match fabric {
        Some(f) => {
            let mut r = report.clone();
            route_pairwise(&mut r, f);
            std::borrow::Cow::Owned(r)
        }
        None => std::borrow::Cow::Borrowed(report),
    }
}

/// Adds to a pairwise run the routes of its faults' pairs
/// ([`crate::pairwise::report::PairwiseReport::fault_pairs`]), each
/// direction; the reverse of a pair is printed only when its path
/// differs: [`crate::pairwise::report::PairwiseReport::routed`] leaves out
/// the reverse of a route that crosses the same switch ports.
pub fn route_pairwise(r: &mut crate::pairwise::report::PairwiseReport, fabric: &Fabric) {
    let device = |name: &str| {
        r.nodes
            .iter()
            .find(|n| n.name == name)
            .map_or(String::new(), |n| n.device.clone())
    };
    let mut notes: Vec<RouteNote> = Vec::new();
    for f in &r.faults {
        for (a, b) in r.fault_pairs(f) {
            if notes.iter().any(|n| n.from == a && n.to == b) {
                continue;
            }
            notes.push(fabric.route_note((&a, &device(&a)), (&b, &device(&b))));
        }
    }
    r.routes = notes;
}

impl RouteNote {
    /// Another direction crosses the same switch ports (the reverse of a
    /// symmetric route).
    pub fn same_ports(&self, o: &RouteNote) -> bool {
        let mut x = self.switch_ports.clone();
        let mut y = o.switch_ports.clone();
        x.sort();
        y.sort();
        self.route.is_some() && o.route.is_some() && x == y
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdmakit_doctor::inventory::{InventoryDevice, InventoryPort};
    use rdmakit_fabric::counters::{PortCounters, SCHEMA};
    use rdmakit_fabric::route::fake::{assign_lids, shortest_lfts};
    use rdmakit_fabric::{fat_tree, ibnetdiscover};
    use rdmakit_types::{Speed, Width};

    fn fabric(counters: Vec<Counters>) -> Fabric {
        let net = fat_tree(2, 2, 2, 1, Width::X4, Speed::Qdr).unwrap();
        let mut s = ibnetdiscover::parse(&net).unwrap();
        assign_lids(&mut s);
        let lfts = shortest_lfts(&s);
        let text = format!(
            r#"{{"subnet": {}, "lfts": {}}}"#,
            serde_json::to_string(&s).unwrap(),
            serde_json::to_string(&lfts).unwrap()
        );
        Fabric {
            file: FabricFile::from_json(&text).unwrap(),
            counters,
        }
    }

    fn guid_of(f: &Fabric, desc: &str) -> u64 {
        f.subnet().nodes_by_desc(desc).next().unwrap().guid
    }

    fn counters(f: &Fabric, desc: &str, port: u8, symbol: u64) -> Counters {
        Counters {
            schema: SCHEMA.into(),
            reset: false,
            mads: 1,
            ports: vec![PortCounters {
                node_guid: guid_of(f, desc),
                node_desc: desc.into(),
                kind: NodeKind::Switch,
                port,
                lid: 1,
                counters: [("SymbolErrorCounter".to_string(), symbol)].into(),
                extended: None,
                saturated: Vec::new(),
            }],
            unread: Vec::new(),
        }
    }

    #[test]
    fn a_node_is_tied_to_its_switch_port_by_port_guid_or_node_guid() {
        let mut f = fabric(Vec::new());
        f.counters = vec![counters(&f, "leaf1", 3, 100)];
        let host = f
            .subnet()
            .nodes_by_desc("host-02 HCA-1")
            .next()
            .unwrap()
            .clone();
        let port_guid = host.ports[0].guid;
        let mut inv = Inventory {
            devices: vec![InventoryDevice {
                name: "mlx5_0".into(),
                ports: vec![InventoryPort {
                    num: 1,
                    port_guid: Some(format!("{port_guid:016x}")),
                    ..InventoryPort::default()
                }],
                ..InventoryDevice::default()
            }],
            ..Inventory::default()
        };
        let a = f.attachments(&inv);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].switch.as_str(), a[0].switch_port), ("leaf1", 2));
        // leaf1 port 3 is its uplink to spine1, with 100 symbol errors.
        assert_eq!(
            a[0].describe("n02"),
            "n02 mlx5_0/1 ↔ leaf1 port 2; leaf1 port 3 → spine1[1]: SymbolErrorCounter 100"
        );
        // Without a port GUID, the node GUID and the port number.
        inv.devices[0].ports[0].port_guid = None;
        inv.devices[0].node_guid = Some("0x".to_string() + &format!("{:016x}", host.guid));
        assert_eq!(f.attachments(&inv).len(), 1);
        inv.devices[0].node_guid = Some("dead:beef:0000:0001".into());
        assert!(f.attachments(&inv).is_empty());
    }

    #[test]
    fn a_route_note_names_switch_ports_cables_and_moved_counters() {
        let mut f = fabric(Vec::new());
        f.counters = vec![counters(&f, "leaf2", 3, 5), counters(&f, "leaf2", 3, 105)];
        let n = f.route_note(("host-01", "HCA-1"), ("host-04", "HCA-1"));
        assert_eq!(n.error, None);
        assert_eq!(
            n.route.as_deref(),
            Some("leaf1[1→3] → spine1[1→2] → leaf2[3→2]")
        );
        assert_eq!(n.isls.len(), 2);
        assert_eq!(n.switch_ports.len(), 6);
        assert_eq!(n.counters, ["leaf2 port 3 SymbolErrorCounter +100"]);
        assert!(
            n.line().starts_with("host-01 → host-04: route leaf1[1→3]"),
            "{}",
            n.line()
        );
        let none = f.route_note(("nobody", ""), ("host-04", "HCA-1"));
        assert!(none.error.unwrap().contains("\"nobody\""));
    }

    #[test]
    fn guids_read_in_both_spellings() {
        assert_eq!(
            parse_guid("0002:c903:0010:9c82"),
            Some(0x0002_c903_0010_9c82)
        );
        assert_eq!(
            parse_guid("0x0002c90300109c82"),
            Some(0x0002_c903_0010_9c82)
        );
        assert_eq!(parse_guid("0x"), None);
        assert_eq!(parse_guid("1:2:3:4:5:6:7:8:9"), None);
    }

    /// A link fault's two directions: a symmetric route is printed once,
    /// the reverse only when it crosses other ports or moved other
    /// counters; a slow node's cells come slowest first.
    #[test]
    fn a_reverse_route_is_printed_only_when_it_differs() {
        use crate::pairwise::report::{Fault, PairwiseReport};
        let f = fabric(Vec::new());
        let run = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../report/tests/data/6ns-slow-pair-n1-n5-2.json"
        ))
        .unwrap();
        let mut r: PairwiseReport = serde_json::from_str(&run).unwrap();
        assert_eq!(r.faults, [Fault::link("n1", "n5")]);
        let note = |from: &str, to: &str, ports: &[&str], counters: &[&str]| RouteNote {
            from: from.into(),
            to: to.into(),
            route: Some("x".into()),
            switch_ports: ports.iter().map(|p| p.to_string()).collect(),
            isls: Vec::new(),
            counters: counters.iter().map(|p| p.to_string()).collect(),
            error: None,
        };
        r.routes = vec![
            note("n1", "n5", &["leaf1 port 1", "leaf1 port 5"], &[]),
            note("n5", "n1", &["leaf1 port 5", "leaf1 port 1"], &[]),
        ];
        assert_eq!(r.routed(&r.faults[0]).len(), 1, "a mirror is left out");
        r.routes[1].switch_ports[0] = "leaf1 port 6".into();
        assert_eq!(r.routed(&r.faults[0]).len(), 2, "another path is shown");
        r.routes[1] = note(
            "n5",
            "n1",
            &["leaf1 port 5", "leaf1 port 1"],
            &["leaf1 port 5 X +1"],
        );
        assert_eq!(
            r.routed(&r.faults[0]).len(),
            2,
            "other moved counters are shown"
        );
        // Names the fabric does not know: a route note that says why.
        route_pairwise(&mut r, &f);
        assert_eq!(r.routes.len(), 2);
        assert!(r.routes[0].error.as_deref().unwrap().contains("\"n1\""));
        assert!(r.routed(&r.faults[0])[0].starts_with("n1 → n5: no route: "));
    }
}
