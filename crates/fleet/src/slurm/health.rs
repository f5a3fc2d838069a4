//! The Slurm health check's decisions (`rdmakit doctor --slurm-health-check`, run
//! as `HealthCheckProgram` or `Prolog`): pure functions from the doctor's verdict
//! on the node (`rdmakit_doctor::health::Verdict`) and the node's Slurm state to
//! one action — drain, resume, or leave alone. [`super::check`] runs them.
//!
//! The rules (docs/slurm.md):
//! - An unhealthy node (a finding at or above `--fail-on`, or a doctor that hung:
//!   a job would hang there too) is
//!   drained with a reason that starts with [`REASON_PREFIX`] and names the codes —
//!   but only a node nobody else holds ([`held`]): no reason but rdmakit's, a base
//!   state of `IDLE`, `MIXED` or `ALLOCATED`, and no flag but the harmless ones
//!   ([`FREE_FLAGS`]; `DRAIN` only under rdmakit's own reason). A node that is
//!   `DOWN`, `FAIL`, in maintenance, rebooting, powered down, not responding, drained
//!   by anyone else (with or without a reason), or that carries any reason not
//!   rdmakit's is left as it is: `scontrol update State=DRAIN Reason=..` would
//!   replace the administrator's reason. A flag this code does not know counts as a
//!   hold. A node rdmakit drained earlier gets the new reason when the findings
//!   changed.
//! - A healthy node is resumed only when rdmakit drained it (the reason starts with
//!   [`REASON_PREFIX`]) and it is `IDLE+DRAIN` and nothing else: never a node an
//!   administrator drained, never one with jobs on it (`MIXED`, `ALLOCATED`,
//!   `COMPLETING`), never one that is down, not responding, in maintenance,
//!   rebooting or powered down.

use rdmakit_doctor::finding::Finding;
use rdmakit_doctor::health::{Unknown, Verdict};
use rdmakit_doctor::oneline::{self, Unit};

use super::node::NodeState;

/// Every drain reason rdmakit writes starts with this; it resumes only those.
pub const REASON_PREFIX: &str = "rdmakit:";

/// Longest reason rdmakit writes (sinfo and `scontrol show node` stay readable).
pub const MAX_REASON: usize = 160;

/// Base states an unhealthy node may be drained from (jobs or not).
pub const FREE_BASES: &[&str] = &["IDLE", "MIXED", "ALLOCATED"];

/// State flags that say nothing about who holds the node: jobs finishing, a
/// reservation for users' jobs, the scheduler's plans, cloud and dynamic nodes.
/// Every other flag (`DRAIN` under another's reason, `FAIL`, `MAINT`/`MAINTENANCE`,
/// `REBOOT_*`, `POWER*`, `NOT_RESPONDING`, `INVALID_REG`, anything new) is a hold.
pub const FREE_FLAGS: &[&str] = &[
    "COMPLETING",
    "RESERVED",
    "PLANNED",
    "CLOUD",
    "DYNAMIC_NORM",
    "PERFCTRS",
];

/// What to do with the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `scontrol update NodeName=.. State=DRAIN Reason=..`.
    Drain { reason: String },
    /// `scontrol update NodeName=.. State=RESUME`.
    Resume,
    /// Nothing to change; `why` says why (for the log).
    Leave { why: String },
}

impl Action {
    /// The health check's log line for this action on `node` (its state
    /// before): what was done, or with `dry_run` what would be done.
    pub fn line(&self, node: &NodeState, dry_run: bool) -> String {
        match (self, dry_run) {
            (Action::Leave { why }, _) => why.clone(),
            (Action::Drain { reason }, true) => {
                format!("would drain ({}): {reason}", node.state_text())
            }
            (Action::Resume, true) => "would resume (healthy; drained by rdmakit)".into(),
            (Action::Drain { reason }, false) => format!("drained: {reason}"),
            (Action::Resume, false) => {
                let was = node.reason.as_ref().map(|r| r.text.as_str()).unwrap_or("");
                format!("resumed (healthy; was drained: {was})")
            }
        }
    }
}

/// True when rdmakit wrote this drain reason.
pub fn is_ours(reason: &str) -> bool {
    reason.trim_start().starts_with(REASON_PREFIX)
}

/// The drain reason for `v`, or None when it does not call for one: the
/// failing findings ([`drain_reason`]), or a doctor that did not finish —
/// `reading` is the read it was blocked in, when known (a hung sysfs read means a
/// stuck driver or firmware, and a job would hang there too).
pub fn reason(v: &Verdict) -> Option<String> {
    match v {
        Verdict::Healthy | Verdict::Unknown(Unknown::Failed(_)) => None,
        Verdict::Unhealthy { failing } => Some(drain_reason(&failing.iter().collect::<Vec<_>>())),
        Verdict::Unknown(Unknown::Hung { limit, reading }) => {
            let what = match reading {
                Some(p) => format!("reading {p}"),
                None => "collecting host facts".to_string(),
            };
            Some(clip(&format!(
                "{REASON_PREFIX} doctor hung: no answer in {} s {what}",
                limit.as_secs()
            )))
        }
    }
}

/// `rdmakit: RDK-H002 rxe0 port 1 is DOWN (physical state Disabled) (+1 more)
/// (+RDK-K006, RDK-A004)`: the worst finding's code, device and port, what is
/// wrong, then how many more of its code and the other codes (each once), on one
/// line within [`MAX_REASON`] characters. What does not fit is dropped as whole
/// clauses and words, never cut inside a word (`rdmakit_doctor::oneline`).
pub fn drain_reason(failing: &[&Finding]) -> String {
    let Some(first) = failing.first() else {
        return format!("{REASON_PREFIX} unhealthy");
    };
    let mut others: Vec<&str> = Vec::new();
    for f in &failing[1..] {
        let c = f.code.as_str();
        if c != first.code.as_str() && !others.contains(&c) {
            others.push(c);
        }
    }
    let same_code = failing[1..].iter().filter(|f| f.code == first.code).count();
    let mut tail = Vec::new();
    if same_code > 0 {
        tail.push(format!("(+{same_code} more)"));
    }
    // At most a third of the reason for the other codes: the rest is the first
    // finding's.
    if !others.is_empty() {
        let mut shown = others.len();
        let list = loop {
            let mut l = others[..shown].join(", ");
            if shown < others.len() {
                l.push_str(&format!(" and {} more", others.len() - shown));
            }
            if shown <= 1 || l.chars().count() + 3 <= MAX_REASON / 3 {
                break l;
            }
            shown -= 1;
        };
        tail.push(format!("(+{list})"));
    }
    oneline::finding_line(
        &format!("{REASON_PREFIX} "),
        first,
        &tail.join(" "),
        MAX_REASON,
        Unit::Chars,
    )
}

/// Why rdmakit must not drain this node, or None when it may: someone else's
/// reason, a state an administrator or Slurm set (see the module doc).
pub fn held(node: &NodeState) -> Option<String> {
    let state = node.state_text();
    match &node.reason {
        Some(r) if !is_ours(&r.text) => {
            let what = if node.drained() { "drained" } else { "held" };
            return Some(format!("{what} by {} ({:?}, {state})", who(node), r.text));
        }
        None if node.drained() => return Some(format!("drained without a reason ({state})")),
        _ => {}
    }
    if !FREE_BASES.contains(&node.base.as_str()) {
        return Some(format!("{state}, a state rdmakit does not override"));
    }
    let hold: Vec<&str> = node
        .flags
        .iter()
        .map(String::as_str)
        .filter(|f| *f != "DRAIN" && !FREE_FLAGS.contains(f))
        .collect();
    if !hold.is_empty() {
        return Some(format!(
            "{state} ({}), a state rdmakit does not override",
            hold.join(", ")
        ));
    }
    None
}

/// The one action for a node in state `node` given the checks' verdict.
pub fn decide(v: &Verdict, node: &NodeState) -> Action {
    let current = node.reason.as_ref().map(|r| r.text.as_str());
    if let Verdict::Unknown(Unknown::Failed(why)) = v {
        return Action::Leave {
            why: format!("not checked ({why}): left as it is"),
        };
    }
    match reason(v) {
        Some(reason) => {
            if let Some(why) = held(node) {
                return Action::Leave {
                    why: format!(
                        "unhealthy, but {why}: left alone, that state and reason are kept"
                    ),
                };
            }
            match current {
                Some(cur) if node.drained() && cur == reason => Action::Leave {
                    why: "already drained by rdmakit for this reason".into(),
                },
                _ => Action::Drain { reason },
            }
        }
        None => {
            if !node.drained() {
                return Action::Leave {
                    why: "healthy; not drained".into(),
                };
            }
            match current {
                Some(cur) if is_ours(cur) => {
                    let extra: Vec<&str> = node
                        .flags
                        .iter()
                        .map(String::as_str)
                        .filter(|f| *f != "DRAIN")
                        .collect();
                    if node.base == "IDLE" && extra.is_empty() {
                        Action::Resume
                    } else {
                        Action::Leave {
                            why: format!(
                                "healthy and drained by rdmakit, but {}: not resumed \
                                 (only IDLE+DRAIN is)",
                                node.state_text()
                            ),
                        }
                    }
                }
                Some(cur) => Action::Leave {
                    why: format!(
                        "healthy, but drained by {} ({cur:?}): not rdmakit's drain, left alone",
                        who(node)
                    ),
                },
                None => Action::Leave {
                    why: "healthy, but drained without a reason: not rdmakit's drain, left alone"
                        .into(),
                },
            }
        }
    }
}

/// The health check's exit status: 0 healthy, 1 unhealthy or hung (a Prolog that
/// exits 1 keeps the job off the node; Slurm keeps rdmakit's drain reason), 2 the
/// checks could not run (rdmakit could not act either: the caller's too).
pub fn exit_code(v: &Verdict) -> u8 {
    match v {
        Verdict::Healthy => 0,
        Verdict::Unhealthy { .. } | Verdict::Unknown(Unknown::Hung { .. }) => 1,
        Verdict::Unknown(Unknown::Failed(_)) => 2,
    }
}

fn who(node: &NodeState) -> String {
    node.reason
        .as_ref()
        .and_then(|r| r.user.clone())
        .unwrap_or_else(|| "someone else".into())
}

fn clip(s: &str) -> String {
    let s = oneline::one_line(s);
    if s.chars().count() <= MAX_REASON {
        s
    } else {
        let cut: String = s.chars().take(MAX_REASON - 3).collect();
        format!("{}...", cut.trim_end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::slurm::node::parse_show_node;
    use rdmakit_doctor::codes::{Code, Severity};

    fn verdict(fs: &[Finding], fail_on: Option<Severity>) -> Verdict {
        Verdict::of(fs, fail_on)
    }

    fn hung(secs: u64, reading: Option<&str>) -> Verdict {
        Verdict::Unknown(Unknown::Hung {
            limit: Duration::from_secs(secs),
            reading: reading.map(str::to_string),
        })
    }

    fn f(code: Code, subject: &str, msg: &str) -> Finding {
        Finding::new(code, subject, msg)
    }

    fn state(s: &str) -> NodeState {
        parse_show_node(s).unwrap().remove(0)
    }

    fn port_down() -> Vec<Finding> {
        vec![f(
            Code::H002,
            "rxe0 port 1",
            "rxe0 port 1 is DOWN (physical state Disabled)",
        )]
    }

    #[test]
    fn action_lines_say_what_was_or_would_be_done() {
        let idle = state("NodeName=n3 State=IDLE");
        let drained = state("NodeName=n3 State=IDLE+DRAIN Reason=rdmakit: RDK-H002 x [root@t]");
        let drain = Action::Drain {
            reason: "rdmakit: RDK-H002 x".into(),
        };
        assert_eq!(
            drain.line(&idle, true),
            "would drain (IDLE): rdmakit: RDK-H002 x"
        );
        assert_eq!(drain.line(&idle, false), "drained: rdmakit: RDK-H002 x");
        assert_eq!(
            Action::Resume.line(&drained, true),
            "would resume (healthy; drained by rdmakit)"
        );
        assert_eq!(
            Action::Resume.line(&drained, false),
            "resumed (healthy; was drained: rdmakit: RDK-H002 x)"
        );
        assert_eq!(
            Action::Resume.line(&idle, false),
            "resumed (healthy; was drained: )"
        );
        let leave = Action::Leave {
            why: "healthy".into(),
        };
        assert_eq!(leave.line(&idle, true), "healthy");
    }

    #[test]
    fn reason_names_the_worst_finding_then_the_other_codes() {
        let fs = vec![
            f(Code::H002, "mlx5_0 port 1", "mlx5_0 port 1 is DOWN"),
            f(Code::H002, "mlx5_1 port 1", "mlx5_1 port 1 is DOWN"),
            f(Code::K006, "mlx5_2", "mlx5_2 has no uverbs device"),
            f(Code::K010, "host", "kernel log not checked"),
        ];
        let refs: Vec<&Finding> = fs.iter().collect();
        assert_eq!(
            drain_reason(&refs),
            "rdmakit: RDK-H002 mlx5_0 port 1 is DOWN (+1 more) (+RDK-K006, RDK-K010)"
        );
        // Only findings at or above --fail-on count: K010 is info.
        assert_eq!(
            reason(&verdict(&fs, Some(Severity::Error))).as_deref(),
            Some("rdmakit: RDK-H002 mlx5_0 port 1 is DOWN (+1 more) (+RDK-K006)")
        );
        assert_eq!(verdict(&fs[3..], Some(Severity::Error)), Verdict::Healthy);
        assert_eq!(verdict(&fs, None), Verdict::Healthy);
    }

    #[test]
    fn reason_is_one_line_and_clipped() {
        let long = format!("line one\nline\ttwo {}", "x".repeat(400));
        let fs = [
            f(Code::H002, "a", &long),
            f(Code::K006, "b", "m"),
            f(Code::A004, "c", "m"),
        ];
        let refs: Vec<&Finding> = fs.iter().collect();
        let r = drain_reason(&refs);
        assert!(
            r.chars().count() <= MAX_REASON,
            "{} chars",
            r.chars().count()
        );
        // The 400-character word does not fit: it goes whole, never cut.
        assert_eq!(
            r,
            "rdmakit: RDK-H002 a: line one line two ... (+RDK-K006, RDK-A004)"
        );
        assert!(!r.contains('\n') && !r.contains('\t'));
        let h = hung(30, Some(&format!("/sys/{}", "d/".repeat(200))));
        let reason = super::reason(&h).unwrap();
        assert!(reason.chars().count() <= MAX_REASON);
        assert!(reason.starts_with("rdmakit: doctor hung: no answer in 30 s reading /sys/d/"));
    }

    #[test]
    fn unhealthy_idle_node_is_drained() {
        let v = verdict(&port_down(), Some(Severity::Error));
        assert_eq!(
            decide(&v, &state("NodeName=n3 State=IDLE")),
            Action::Drain {
                reason: "rdmakit: RDK-H002 rxe0 port 1 is DOWN (physical state Disabled)".into()
            }
        );
        // Running jobs do not stop a drain: no new job lands there.
        assert!(matches!(
            decide(&v, &state("NodeName=n3 State=MIXED")),
            Action::Drain { .. }
        ));
    }

    #[test]
    fn an_administrators_drain_is_never_overwritten_or_resumed() {
        let admin = state(
            "NodeName=n2 State=IDLE+DRAIN Reason=admin: cable swap [alice@2026-12-04T16:09:06]",
        );
        let sick = verdict(&port_down(), Some(Severity::Error));
        let Action::Leave { why } = decide(&sick, &admin) else {
            panic!("admin drain touched")
        };
        assert!(
            why.contains("alice") && why.contains("admin: cable swap"),
            "{why}"
        );
        let Action::Leave { why } = decide(&Verdict::Healthy, &admin) else {
            panic!("admin drain resumed")
        };
        assert!(why.contains("not rdmakit's drain"), "{why}");
        // Slurm's own reasons are someone else's too.
        let slurm = state("NodeName=n4 State=IDLE+DRAIN Reason=Prolog error [slurm@2026-12-04]");
        assert!(matches!(
            decide(&Verdict::Healthy, &slurm),
            Action::Leave { .. }
        ));
        let no_reason = state("NodeName=n4 State=IDLE+DRAIN");
        assert!(matches!(
            decide(&Verdict::Healthy, &no_reason),
            Action::Leave { .. }
        ));
    }

    /// Issue 34 item 7: `State=DRAIN Reason=rdmakit: ..` replaced the reason of a
    /// node an administrator had set DOWN, FAIL or in maintenance. The states are
    /// as Slurm 22.05.8's `scontrol show node -o` prints them (scripts/cluster).
    #[test]
    fn an_administrators_down_fail_or_maint_is_never_drained_over() {
        let sick = verdict(&port_down(), Some(Severity::Error));
        for (line, says) in [
            (
                "NodeName=n10 State=DOWN Reason=admin: psu swap [root@2026-12-07T10:45:35]",
                "admin: psu swap",
            ),
            (
                "NodeName=n11 State=IDLE+FAIL Reason=admin: bad dimm [root@2026-12-07T10:45:35]",
                "admin: bad dimm",
            ),
            (
                "NodeName=n12 State=IDLE+MAINTENANCE+RESERVED",
                "MAINTENANCE",
            ),
            ("NodeName=n12 State=MIXED+MAINT", "MAINT"),
            ("NodeName=n9 State=DOWN", "DOWN"),
            (
                "NodeName=n9 State=DOWN+NOT_RESPONDING Reason=Not responding [slurm@t]",
                "Not responding",
            ),
            ("NodeName=n9 State=IDLE+NOT_RESPONDING", "NOT_RESPONDING"),
            (
                "NodeName=n9 State=IDLE+REBOOT_REQUESTED Reason=kernel update [bob@t]",
                "kernel update",
            ),
            ("NodeName=n9 State=IDLE+REBOOT_ISSUED", "REBOOT_ISSUED"),
            ("NodeName=n9 State=IDLE+POWERED_DOWN", "POWERED_DOWN"),
            ("NodeName=n9 State=IDLE+POWERING_UP", "POWERING_UP"),
            ("NodeName=n9 State=IDLE+INVALID_REG", "INVALID_REG"),
            ("NodeName=n9 State=FUTURE", "FUTURE"),
            ("NodeName=n9 State=UNKNOWN", "UNKNOWN"),
            ("NodeName=n9 State=IDLE+SOMETHING_NEW", "SOMETHING_NEW"),
            // Drained by someone else without a reason, or not drained but with a
            // reason that is not rdmakit's.
            ("NodeName=n9 State=IDLE+DRAIN", "without a reason"),
            (
                "NodeName=n9 State=IDLE Reason=watch this one [carol@t]",
                "watch this one",
            ),
            // rdmakit's own drain, but the node went down since: not re-drained.
            (
                "NodeName=n9 State=DOWN+DRAIN Reason=rdmakit: RDK-K006 x [root@t]",
                "DOWN+DRAIN",
            ),
        ] {
            let n = state(line);
            let Action::Leave { why } = decide(&sick, &n) else {
                panic!("{line}: drained over it")
            };
            assert!(why.contains(says), "{line}: {why}");
            assert!(held(&n).is_some(), "{line}");
            let Action::Leave { .. } = decide(&Verdict::Healthy, &n) else {
                panic!("{line}: resumed")
            };
        }
    }

    /// The same three, as the cluster tier's real slurmctld printed them.
    #[test]
    fn real_22_05_down_fail_and_maintenance_nodes_are_held() {
        let real = include_str!("../../tests/data/slurm/scontrol-show-node-o-held.txt");
        let nodes = parse_show_node(real).unwrap();
        let sick = verdict(&port_down(), Some(Severity::Error));
        let states: Vec<String> = nodes.iter().map(NodeState::state_text).collect();
        assert_eq!(states, ["DOWN", "IDLE+FAIL", "IDLE+MAINTENANCE+RESERVED"]);
        for n in &nodes {
            assert!(held(n).is_some(), "{}", n.name);
            assert!(
                matches!(decide(&sick, n), Action::Leave { .. }),
                "{}",
                n.name
            );
        }
        assert_eq!(nodes[0].reason.as_ref().unwrap().text, "admin: psu swap");
        assert_eq!(
            nodes[1].reason.as_ref().unwrap().user.as_deref(),
            Some("root")
        );
    }

    #[test]
    fn harmless_flags_do_not_stop_a_drain() {
        let sick = verdict(&port_down(), Some(Severity::Error));
        for s in [
            "IDLE",
            "MIXED",
            "ALLOCATED",
            "IDLE+COMPLETING",
            "MIXED+RESERVED",
            "IDLE+PLANNED",
            "IDLE+CLOUD",
        ] {
            let n = state(&format!("NodeName=n3 State={s}"));
            assert_eq!(held(&n), None, "{s}");
            assert!(matches!(decide(&sick, &n), Action::Drain { .. }), "{s}");
        }
        // rdmakit's own drain with an older reason gets the new one.
        let n = state("NodeName=n3 State=MIXED+DRAIN Reason=rdmakit: RDK-K006 x [root@t]");
        assert_eq!(held(&n), None);
        assert!(matches!(decide(&sick, &n), Action::Drain { .. }));
    }

    proptest::proptest! {
        /// Whatever the state: a drain only on a node nobody else holds, a resume
        /// only of rdmakit's own drain from exactly IDLE+DRAIN.
        #[test]
        fn drains_only_free_nodes_and_resumes_only_its_own(
            base in proptest::sample::select(vec![
                "IDLE", "MIXED", "ALLOCATED", "DOWN", "FUTURE", "UNKNOWN", "ERROR",
            ]),
            flags in proptest::sample::subsequence(vec![
                "DRAIN", "COMPLETING", "RESERVED", "FAIL", "MAINTENANCE", "MAINT",
                "NOT_RESPONDING", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWERED_DOWN",
                "POWERING_UP", "POWER_DOWN", "PLANNED", "INVALID_REG", "CLOUD",
            ], 0..4),
            reason in proptest::sample::select(vec![
                "", " Reason=rdmakit: RDK-H002 old [root@t]", " Reason=admin: x [alice@t]",
                " Reason=rdmakit: RDK-H002 rxe0 port 1 is DOWN (physical state Disabled) [root@t]",
            ]),
            sick in proptest::bool::ANY,
        ) {
            let mut st = base.to_string();
            for f in &flags {
                st.push('+');
                st.push_str(f);
            }
            let n = state(&format!("NodeName=n3 State={st}{reason}"));
            let ours = reason.contains("rdmakit:");
            let v = if sick { verdict(&port_down(), Some(Severity::Error)) } else { Verdict::Healthy };
            match decide(&v, &n) {
                Action::Drain { .. } => {
                    proptest::prop_assert!(sick);
                    proptest::prop_assert!(reason.is_empty() || ours, "{st}{reason}");
                    proptest::prop_assert!(FREE_BASES.contains(&base), "{st}");
                    for f in &flags {
                        proptest::prop_assert!(
                            FREE_FLAGS.contains(f) || (*f == "DRAIN" && ours),
                            "{st}{reason}"
                        );
                    }
                }
                Action::Resume => {
                    proptest::prop_assert!(!sick && ours);
                    proptest::prop_assert_eq!(st.as_str(), "IDLE+DRAIN");
                }
                Action::Leave { .. } => {}
            }
        }
    }

    #[test]
    fn rdmakits_drain_is_resumed_only_from_idle_drain() {
        let ours = "Reason=rdmakit: RDK-H002 rxe0 port 1 is DOWN [root@2026-12-04T16:09:55]";
        let idle = state(&format!("NodeName=n3 State=IDLE+DRAIN {ours}"));
        assert_eq!(decide(&Verdict::Healthy, &idle), Action::Resume);
        for s in [
            "ALLOCATED+DRAIN",
            "MIXED+DRAIN",
            "IDLE+DRAIN+COMPLETING",
            "DOWN+DRAIN",
            "IDLE+DRAIN+NOT_RESPONDING",
            "IDLE+DRAIN+MAINT",
            "IDLE+DRAIN+REBOOT_REQUESTED",
            "IDLE+DRAIN+POWERED_DOWN",
        ] {
            let n = state(&format!("NodeName=n3 State={s} {ours}"));
            let a = decide(&Verdict::Healthy, &n);
            let Action::Leave { why } = a else {
                panic!("{s}: resumed")
            };
            assert!(why.contains(s), "{s}: {why}");
        }
    }

    #[test]
    fn rdmakits_drain_gets_the_new_reason_and_the_same_one_is_not_rewritten() {
        let v = verdict(&port_down(), Some(Severity::Error));
        let same = state(
            "NodeName=n3 State=IDLE+DRAIN Reason=rdmakit: RDK-H002 rxe0 port 1 is DOWN \
             (physical state Disabled) [root@2026-12-04T16:09:55]",
        );
        assert!(matches!(decide(&v, &same), Action::Leave { .. }));
        let older = state("NodeName=n3 State=IDLE+DRAIN Reason=rdmakit: RDK-K006 x [root@t]");
        assert!(matches!(decide(&v, &older), Action::Drain { .. }));
    }

    #[test]
    fn healthy_undrained_node_is_left_and_exit_codes() {
        assert!(matches!(
            decide(&Verdict::Healthy, &state("NodeName=n1 State=IDLE")),
            Action::Leave { .. }
        ));
        assert_eq!(exit_code(&Verdict::Healthy), 0);
        assert_eq!(exit_code(&hung(1, None)), 1);
        let failed = Verdict::Unknown(Unknown::Failed("EACCES".into()));
        assert_eq!(exit_code(&failed), 2);
        assert_eq!(reason(&failed), None);
        let Action::Leave { why } = decide(&failed, &state("NodeName=n1 State=IDLE")) else {
            panic!("acted on a node it could not check")
        };
        assert!(why.starts_with("not checked (EACCES)"), "{why}");
        assert!(is_ours("rdmakit: x") && !is_ours("admin: rdmakit: x"));
    }
}
