//! The Slurm health check's decisions (`rdmakit doctor --slurm-health-check`, run
//! as `HealthCheckProgram` or `Prolog`): pure functions from the doctor's findings
//! and the node's Slurm state to one action — drain, resume, or leave alone.
//!
//! The rules (docs/slurm.md):
//! - An unhealthy node (a finding at or above `--fail-on`, or a doctor that hung) is
//!   drained with a reason that starts with [`REASON_PREFIX`] and names the codes.
//!   A node an administrator (or Slurm) drained is left as it is: its reason is
//!   never overwritten. A node rdmakit drained earlier gets the new reason when the
//!   findings changed.
//! - A healthy node is resumed only when rdmakit drained it (the reason starts with
//!   [`REASON_PREFIX`]) and it is `IDLE+DRAIN` and nothing else: never a node an
//!   administrator drained, never one with jobs on it (`MIXED`, `ALLOCATED`,
//!   `COMPLETING`), never one that is down, not responding, in maintenance,
//!   rebooting or powered down.

use rdmakit_doctor::codes::Severity;
use rdmakit_doctor::finding::Finding;

use super::node::NodeState;

/// Every drain reason rdmakit writes starts with this; it resumes only those.
pub const REASON_PREFIX: &str = "rdmakit:";

/// Longest reason rdmakit writes (sinfo and `scontrol show node` stay readable).
pub const MAX_REASON: usize = 160;

/// What the checks say about this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Healthy,
    /// `reason` is the whole drain reason, [`REASON_PREFIX`] included.
    Unhealthy {
        reason: String,
    },
}

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

/// The verdict of a doctor report: unhealthy when a finding is at or above
/// `fail_on` (None: never).
pub fn verdict(findings: &[Finding], fail_on: Option<Severity>) -> Verdict {
    let Some(level) = fail_on else {
        return Verdict::Healthy;
    };
    let failing: Vec<&Finding> = findings.iter().filter(|f| f.severity >= level).collect();
    if failing.is_empty() {
        Verdict::Healthy
    } else {
        Verdict::Unhealthy {
            reason: drain_reason(&failing),
        }
    }
}

/// The verdict when the doctor did not finish within `secs` seconds; `path` is the
/// read it was blocked in, when known (a hung sysfs read means a stuck driver or
/// firmware, and a job would hang there too).
pub fn hung(secs: u64, path: Option<&str>) -> Verdict {
    let what = match path {
        Some(p) => format!("reading {p}"),
        None => "collecting host facts".to_string(),
    };
    Verdict::Unhealthy {
        reason: clip(&format!(
            "{REASON_PREFIX} doctor hung: no answer in {secs} s {what}"
        )),
    }
}

/// `rdmakit: RDK-H002 rxe0 port 1 is DOWN (physical state Disabled) (+2: RDK-K006,
/// RDK-A004)`: the worst finding's code and message, then the other codes (each
/// once), within [`MAX_REASON`] characters, on one line.
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
    let mut tail = String::new();
    if same_code > 0 {
        tail.push_str(&format!(" (+{same_code} more)"));
    }
    if !others.is_empty() {
        tail.push_str(&format!(" (+{})", others.join(", ")));
    }
    let head = format!(
        "{REASON_PREFIX} {} {}",
        first.code.as_str(),
        one_line(&first.message)
    );
    let room = MAX_REASON.saturating_sub(tail.chars().count());
    let head = if head.chars().count() > room {
        let cut: String = head.chars().take(room.saturating_sub(3)).collect();
        format!("{}...", cut.trim_end())
    } else {
        head
    };
    clip(&format!("{head}{tail}"))
}

/// The one action for a node in state `node` given the checks' verdict.
pub fn decide(v: &Verdict, node: &NodeState) -> Action {
    let current = node.reason.as_ref().map(|r| r.text.as_str());
    match v {
        Verdict::Unhealthy { reason } => match current {
            Some(cur) if node.drained() && !is_ours(cur) => Action::Leave {
                why: format!(
                    "already drained by {} ({cur:?}); that reason is kept",
                    who(node)
                ),
            },
            Some(cur) if node.drained() && cur == reason => Action::Leave {
                why: "already drained by rdmakit for this reason".into(),
            },
            _ => Action::Drain {
                reason: reason.clone(),
            },
        },
        Verdict::Healthy => {
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

/// The health check's exit status: 0 healthy, 1 unhealthy (a Prolog that exits 1
/// keeps the job off the node; Slurm keeps rdmakit's drain reason). 2 — rdmakit
/// could not check or act — is the caller's.
pub fn exit_code(v: &Verdict) -> u8 {
    match v {
        Verdict::Healthy => 0,
        Verdict::Unhealthy { .. } => 1,
    }
}

fn who(node: &NodeState) -> String {
    node.reason
        .as_ref()
        .and_then(|r| r.user.clone())
        .unwrap_or_else(|| "someone else".into())
}

/// Control characters and newlines become spaces; runs of spaces collapse.
fn one_line(s: &str) -> String {
    s.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn clip(s: &str) -> String {
    let s = one_line(s);
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
    use crate::slurm::node::parse_show_node;
    use rdmakit_doctor::codes::Code;

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
            verdict(&fs, Some(Severity::Error)),
            Verdict::Unhealthy {
                reason: "rdmakit: RDK-H002 mlx5_0 port 1 is DOWN (+1 more) (+RDK-K006)".into()
            }
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
        assert!(r.starts_with("rdmakit: RDK-H002 line one line two xxx"));
        assert!(r.ends_with("... (+RDK-K006, RDK-A004)"), "{r}");
        assert!(!r.contains('\n') && !r.contains('\t'));
        let h = hung(30, Some(&format!("/sys/{}", "d/".repeat(200))));
        let Verdict::Unhealthy { reason } = h else {
            panic!()
        };
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
        assert!(is_ours("rdmakit: x") && !is_ours("admin: rdmakit: x"));
    }
}
