//! The subnet manager: none answering as MASTER (RDK-F008), more than one
//! MASTER (RDK-F009), a MASTER whose priority is below a STANDBY's
//! (RDK-F010), ports whose PortInfo names different SM LIDs (RDK-F011), and
//! a MASTER whose activity count does not move between two reads
//! (RDK-F012).
//!
//! [`SmFacts`] is what a reader gathers: each SMInfo query (where it went
//! and what came back, or that nothing did), optionally a second round of
//! the same queries read later, and the SM LID each port's PortInfo names.
//! A live reader sends SMInfo Gets (LID-routed to the SM LID the ports name,
//! or to every CA) through umad; [`SmAnswer::from_sminfo`] reads what
//! unmodified `sminfo` prints instead.

use std::collections::{BTreeMap, BTreeSet};

use rdmakit_doctor::codes::Code;
use rdmakit_doctor::finding::{Evidence, Finding};
use serde::{Deserialize, Serialize};

use super::group::Draft;
use super::{at, explain, node_name};
use crate::topology::{PortRef, Subnet};

/// What was read about the subnet managers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmFacts {
    /// Each SMInfo query and its answer.
    pub answers: Vec<SmAnswer>,
    /// The same queries, read later (for the activity count); empty when
    /// read once.
    pub later: Vec<SmAnswer>,
    /// The SM LID (PortInfo's MasterSMLID) each port names.
    pub port_sm_lids: Vec<(PortRef, u16)>,
}

/// One SMInfo query: the LID it went to and the answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmAnswer {
    /// The LID the SMInfo Get was sent to.
    pub lid: u16,
    /// What came back.
    pub reply: SmReply,
}

/// The answer to an SMInfo query.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SmReply {
    /// The SMInfo attribute.
    Info(SmInfo),
    /// No answer, or an error status: what the reader said.
    Failed(String),
}

/// The SMInfo attribute's fields a check reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmInfo {
    /// The SM's port GUID.
    #[serde(with = "crate::names::guid")]
    pub guid: u64,
    /// ActCount: moves while the SM works.
    pub act_count: u32,
    /// Priority (0 to 15; the highest wins the election).
    pub priority: u8,
    /// SMState.
    pub state: SmState,
}

/// SMInfo's SMState.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SmState {
    /// 0: not active.
    NotActive,
    /// 1: discovering.
    Discovering,
    /// 2: standby.
    Standby,
    /// 3: master.
    Master,
    /// Any other code.
    Unknown(u8),
}

impl SmState {
    /// The state of an SMState code.
    pub fn from_code(code: u8) -> SmState {
        match code {
            0 => SmState::NotActive,
            1 => SmState::Discovering,
            2 => SmState::Standby,
            3 => SmState::Master,
            c => SmState::Unknown(c),
        }
    }

    /// The name sminfo prints (`SMINFO_MASTER`).
    pub fn name(self) -> &'static str {
        match self {
            SmState::NotActive => "SMINFO_NOTACT",
            SmState::Discovering => "SMINFO_DISCOVER",
            SmState::Standby => "SMINFO_STANDBY",
            SmState::Master => "SMINFO_MASTER",
            SmState::Unknown(_) => "SMINFO_STATE_UNKNOWN",
        }
    }
}

/// The most characters of a reader's error kept in an answer.
const MAX_ERROR: usize = 200;

impl SmAnswer {
    /// What unmodified `sminfo` printed: its answer line (`sminfo: sm lid 1
    /// sm guid 0x100001, activity count 122 priority 0 state 3
    /// SMINFO_MASTER`) on stdout, or a failure with what it said on stderr.
    pub fn from_sminfo<'a>(stdout: &'a str, stderr: &'a str) -> SmAnswer {
        let line = stdout.lines().find(|l| l.contains("sm lid"));
        match line.and_then(parse_sminfo_line) {
            Some(a) => a,
            None => {
                // sminfo says why on stdout (`sminfo: iberror: failed:
                // query`), libibmad how on stderr's last line (`mad_rpc:
                // _do_madrpc failed; dport (Lid 1)`).
                let last = |t: &'a str| t.lines().map(str::trim).rfind(|l| !l.is_empty());
                let why = stdout
                    .lines()
                    .map(str::trim)
                    .find(|l| l.contains("iberror"));
                let said = match (why, last(stderr)) {
                    (Some(w), Some(h)) => format!("{w} ({h})"),
                    (Some(w), None) => w.to_string(),
                    (None, Some(h)) => h.to_string(),
                    (None, None) => last(stdout).unwrap_or("").to_string(),
                };
                let said: String = said.chars().take(MAX_ERROR).collect();
                SmAnswer {
                    lid: 0,
                    reply: SmReply::Failed(if said.is_empty() {
                        "sminfo printed nothing".into()
                    } else {
                        said
                    }),
                }
            }
        }
    }
}

/// `sm lid 1 sm guid 0x100001, activity count 122 priority 0 state 3 ...`.
fn parse_sminfo_line(l: &str) -> Option<SmAnswer> {
    let words: Vec<&str> = l
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let after = |a: &str, b: &str| {
        words
            .windows(3)
            .find(|w| w[0] == a && w[1] == b)
            .map(|w| w[2])
    };
    let lid = after("sm", "lid")?.parse().ok()?;
    let guid = crate::names::parse_guid(after("sm", "guid")?)?;
    let act_count = after("activity", "count")?.parse().ok()?;
    let at = |k: &str| {
        words
            .windows(2)
            .find(|w| w[0] == k)
            .and_then(|w| w[1].parse::<u8>().ok())
    };
    Some(SmAnswer {
        lid,
        reply: SmReply::Info(SmInfo {
            guid,
            act_count,
            priority: at("priority")?,
            state: SmState::from_code(at("state")?),
        }),
    })
}

/// The drafts for the subnet manager facts.
pub(crate) fn check(sm: &SmFacts, s: &Subnet) -> Vec<Draft> {
    let mut out = Vec::new();
    let infos: Vec<(u16, SmInfo)> = sm
        .answers
        .iter()
        .filter_map(|a| match a.reply {
            SmReply::Info(i) => Some((a.lid, i)),
            SmReply::Failed(_) => None,
        })
        .collect();
    let mut masters: BTreeMap<u64, (u16, SmInfo)> = BTreeMap::new();
    for &(lid, i) in &infos {
        if i.state == SmState::Master {
            masters.entry(i.guid).or_insert((lid, i));
        }
    }
    if !sm.answers.is_empty() && masters.is_empty() {
        out.push(Draft::alone(none(sm, s)));
    }
    if masters.len() > 1 {
        let list: Vec<String> = masters.values().map(|(l, i)| who(s, *l, i)).collect();
        let mut f = Finding::new(
            Code::F009,
            "subnet manager",
            format!(
                "subnet manager: {} subnet managers answer as MASTER: {}",
                masters.len(),
                list.join("; ")
            ),
        );
        for (l, i) in masters.values() {
            f = f.evidence(info_evidence(*l, i));
        }
        out.push(Draft::alone(
            f.remedy(
                "Two masters mean two subnets that cannot see each other (a split fabric) or \
                 SMs configured with different subnet prefixes or keys: find why they do not \
                 see each other, and leave one MASTER (stop the extra SM)",
            )
            .next("sminfo")
            .next("ibnetdiscover")
            .next(explain(Code::F009)),
        ));
    }
    for (ml, m) in masters.values() {
        for &(sl, st) in &infos {
            if st.state == SmState::Standby && st.priority > m.priority {
                let f = Finding::new(
                    Code::F010,
                    "subnet manager",
                    format!(
                        "subnet manager: the MASTER {} has priority {}, below the STANDBY {} \
                         with priority {}",
                        who(s, *ml, m),
                        m.priority,
                        who(s, sl, &st),
                        st.priority
                    ),
                )
                .evidence(info_evidence(*ml, m))
                .evidence(info_evidence(sl, &st))
                .remedy(
                    "The SM meant to be master did not take over (handover failed, or it came \
                     up later with the same priority rules); set the priorities as intended \
                     (opensm -p / sm_priority) and restart or hand over the SM",
                )
                .next(format!("sminfo {sl}"))
                .next(format!("sminfo {ml}"))
                .next(explain(Code::F010));
                out.push(Draft::alone(f));
            }
        }
    }
    out.extend(sm_lids(sm, s));
    out.extend(not_sweeping(sm, s, &masters));
    out
}

/// RDK-F008.
fn none(sm: &SmFacts, s: &Subnet) -> Finding {
    let said: Vec<String> = sm
        .answers
        .iter()
        .map(|a| match &a.reply {
            SmReply::Info(i) => format!("{} is {}", who(s, a.lid, i), i.state.name()),
            SmReply::Failed(e) => format!("{}: {e}", to(a.lid)),
        })
        .collect();
    let mut f = Finding::new(
        Code::F008,
        "subnet manager",
        format!(
            "subnet manager: no subnet manager answers as MASTER ({})",
            said.join("; ")
        ),
    )
    .brief("no subnet manager answers as MASTER");
    for a in &sm.answers {
        f = f.evidence(match &a.reply {
            SmReply::Info(i) => info_evidence(a.lid, i),
            SmReply::Failed(e) => Evidence::new(format!("SMInfo {}", to(a.lid)), e.clone()),
        });
    }
    f.remedy(
        "Start a subnet manager (opensm, or the switch's embedded SM) and check that it is \
         MASTER; without one no new port becomes Active and no path changes are made",
    )
    .next("sminfo")
    .next("ibnetdiscover")
    .next(explain(Code::F008))
}

/// RDK-F011: the ports' SM LIDs disagree.
fn sm_lids(sm: &SmFacts, s: &Subnet) -> Option<Draft> {
    let mut by: BTreeMap<u16, Vec<PortRef>> = BTreeMap::new();
    for (p, lid) in &sm.port_sm_lids {
        by.entry(*lid).or_default().push(*p);
    }
    if by.len() < 2 {
        return None;
    }
    let most = by
        .iter()
        .max_by_key(|(lid, v)| (v.len(), std::cmp::Reverse(**lid)))
        .map(|(lid, _)| *lid)?;
    let parts: Vec<String> = by
        .iter()
        .map(|(lid, v)| {
            let ports = if *lid == most {
                String::new()
            } else {
                let names: Vec<String> = v.iter().take(4).map(|p| port_name(s, *p)).collect();
                let more = v.len().saturating_sub(4);
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                format!(" ({}{more})", names.join(", "))
            };
            format!("{} say {lid}{ports}", plural(v.len(), "port"))
        })
        .collect();
    let mut f = Finding::new(
        Code::F011,
        "subnet manager",
        format!(
            "subnet manager: ports disagree on the SM LID: {}",
            parts.join(", ")
        ),
    )
    .brief("ports disagree on the SM LID");
    for (lid, v) in &by {
        if *lid == most {
            continue;
        }
        for p in v {
            let place = match s.node(p.guid) {
                Some(n) => at(n, p.port),
                None => format!("{:#018x} port {}", p.guid, p.port),
            };
            f = f.evidence(Evidence::new(
                format!("{place} PortInfo.MasterSMLID"),
                lid.to_string(),
            ));
        }
    }
    f = f.evidence(Evidence::new(
        format!(
            "{} PortInfo.MasterSMLID",
            plural(by[&most].len(), "other port")
        ),
        most.to_string(),
    ));
    let first = by
        .iter()
        .find(|(l, _)| **l != most)
        .and_then(|(_, v)| v.first().copied());
    let mut f = f.remedy(
        "Ports that name another SM LID were configured by another SM (a second subnet, \
         a stale SM after a handover) or were never swept again; find the SM at each LID \
         with sminfo, keep one MASTER, and let it sweep (a port bounce or an SM restart)",
    );
    if let Some(p) = first {
        if let Some(n) = s.node(p.guid) {
            if let Some(port) = n.port(p.port) {
                f = f.next(format!("ibportstate {} {}", n.lid_of(port), p.port));
            }
        }
    }
    Some(Draft::alone(f.next("sminfo").next(explain(Code::F011))))
}

/// RDK-F012: a MASTER whose activity count did not move.
fn not_sweeping(sm: &SmFacts, s: &Subnet, masters: &BTreeMap<u64, (u16, SmInfo)>) -> Vec<Draft> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for a in &sm.later {
        let SmReply::Info(later) = a.reply else {
            continue;
        };
        let Some((lid, first)) = masters.get(&later.guid) else {
            continue;
        };
        if later.act_count != first.act_count || !seen.insert(later.guid) {
            continue;
        }
        let f = Finding::new(
            Code::F012,
            "subnet manager",
            format!(
                "subnet manager: the MASTER {}'s activity count stayed at {} between two reads",
                who(s, *lid, first),
                first.act_count
            ),
        )
        .evidence(info_evidence(*lid, first))
        .evidence(info_evidence(a.lid, &later))
        .remedy(
            "An SM whose activity count stops is hung or no longer sweeping: new or \
             restarted ports stay in Init; look at the SM's log and restart it (or let a \
             STANDBY take over)",
        )
        .next(format!("sminfo {lid}"))
        .next(explain(Code::F012));
        out.push(Draft::alone(f));
    }
    out
}

/// `to LID 1`, or `to the SM LID` when the reader did not say.
fn to(lid: u16) -> String {
    if lid == 0 {
        "to the SM LID".to_string()
    } else {
        format!("to LID {lid}")
    }
}

/// `0x0000000000100001 (host-01 HCA-1, LID 1)`.
fn who(s: &Subnet, lid: u16, i: &SmInfo) -> String {
    let owner = s
        .nodes()
        .iter()
        .find(|n| n.ports.iter().any(|p| p.guid == i.guid) || n.guid == i.guid)
        .map(node_name)
        .or_else(|| s.by_lid(lid).map(|(n, _)| node_name(n)));
    match owner {
        Some(o) => format!("{:#018x} ({o}, LID {lid})", i.guid),
        None => format!("{:#018x} (LID {lid})", i.guid),
    }
}

fn info_evidence(lid: u16, i: &SmInfo) -> Evidence {
    Evidence::new(
        format!("SMInfo from LID {lid}"),
        format!(
            "guid {:#018x} activity count {} priority {} {}",
            i.guid,
            i.act_count,
            i.priority,
            i.state.name()
        ),
    )
}

fn port_name(s: &Subnet, p: PortRef) -> String {
    match s.node(p.guid) {
        Some(n) => format!("{} port {}", node_name(n), p.port),
        None => format!("{:#018x} port {}", p.guid, p.port),
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sminfo_output_parses_and_failures_keep_what_it_said() {
        // sminfo 44.0 against ibsim's fabric (docs/../ib-fabric-testbed).
        let a = SmAnswer::from_sminfo(
            "sminfo: sm lid 1 sm guid 0x100001, activity count 122 priority 0 state 3 SMINFO_MASTER\n",
            "",
        );
        assert_eq!(
            a,
            SmAnswer {
                lid: 1,
                reply: SmReply::Info(SmInfo {
                    guid: 0x100001,
                    act_count: 122,
                    priority: 0,
                    state: SmState::Master
                })
            }
        );
        // sminfo 44.0 with no SM: the reason on stdout, libibmad's on stderr.
        let f = SmAnswer::from_sminfo(
            "sminfo: iberror: failed: query\n",
            "ibwarn: [4599] mad_rpc: _do_madrpc failed; dport (Lid 1)\n",
        );
        assert_eq!(
            f.reply,
            SmReply::Failed(
                "sminfo: iberror: failed: query (ibwarn: [4599] mad_rpc: _do_madrpc failed; \
                 dport (Lid 1))"
                    .into()
            )
        );
        assert!(matches!(
            SmAnswer::from_sminfo("sminfo: sm lid x", "").reply,
            SmReply::Failed(_)
        ));
    }
}
