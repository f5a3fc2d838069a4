//! Turns srun's output into one result per node: its report, or why it is missing.
//!
//! The sweep runs `srun --label ... sh -c TASK_SCRIPT sh rdmakit doctor --frame`; srun
//! prefixes every line of task N with `N: ` on stdout and stderr, and prints its own
//! messages (`srun: error: n3: task 2: Killed`) on stderr. [`Collector`] takes those
//! lines one at a time, in any interleaving of tasks (srun keeps each task's lines in
//! order), so the caller can show progress while they arrive; [`Collector::finish`]
//! gives every expected node exactly one [`Outcome`]. Pure: no I/O, no clock.

use std::collections::BTreeMap;

use super::frame::{self, Kind, Line};
use crate::node::NodeReport;

/// The schema a report must carry.
pub const DOCTOR_SCHEMA: &str = "rdmakit.doctor/v1";

/// Lines of evidence kept per task (stray output, stderr).
const KEEP: usize = 3;

/// How srun ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum End {
    /// srun exited by itself (its exit status, when it had one).
    Exited(Option<i32>),
    /// The sweep's timeout fired after this many seconds and srun was stopped.
    TimedOut(f64),
}

/// One node's result.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeResult {
    pub node: String,
    pub outcome: Outcome,
    /// Remarks that do not change the outcome (a bundle that did not decode, ...).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The doctor's report as one compact JSON line, and the bundle's JSON with
    /// `--bundles`; `exit` is rdmakit's status on the node (1: findings at or above
    /// its --fail-on).
    Reported {
        line: String,
        bundle: Option<Vec<u8>>,
        exit: Option<i32>,
    },
    /// Nothing usable came back; `reason` says what did.
    Missing { reason: String },
}

impl NodeResult {
    pub fn missing(node: &str, reason: impl Into<String>) -> NodeResult {
        NodeResult {
            node: node.to_string(),
            outcome: Outcome::Missing {
                reason: reason.into(),
            },
            notes: Vec::new(),
        }
    }

    pub fn is_reported(&self) -> bool {
        matches!(self.outcome, Outcome::Reported { .. })
    }
}

/// The sweep's results as the fleet report's nodes ([`crate::report::analyze`]),
/// each named after its Slurm node (a host's own name may differ); a report the
/// fleet cannot read becomes `missing` with the reason.
pub fn node_reports(results: &[NodeResult]) -> Vec<NodeReport> {
    results
        .iter()
        .map(|r| {
            let origin = format!("sweep:{}", r.node);
            match &r.outcome {
                Outcome::Reported { line, .. } => match NodeReport::from_doctor_json(line, &origin)
                {
                    Ok(n) => n.with_name(&r.node),
                    Err(e) => NodeReport::missing(&r.node, &origin, &format!("garbage: {e}")),
                },
                Outcome::Missing { reason } => NodeReport::missing(&r.node, &origin, reason),
            }
        })
        .collect()
}

/// A frame being received.
#[derive(Debug, Default)]
struct Open {
    kind: Option<Kind>,
    bytes: u64,
    body: String,
    lines: usize,
}

/// Everything one task sent.
#[derive(Debug, Default)]
struct Task {
    node: Option<String>,
    lines: usize,
    open: Option<Open>,
    report: Option<Result<Vec<u8>, String>>,
    bundle: Option<Result<Vec<u8>, String>>,
    extra_frames: usize,
    stray: Vec<String>,
    stray_count: usize,
    stderr: Vec<String>,
    exit: Option<i32>,
    /// rdmakit's exit line came after the sweep stopped srun: it was killed.
    exit_after_stop: bool,
    /// What srun said about this task ("Exited with exit code 2", "Killed").
    srun_says: Option<String>,
}

/// Receives srun's lines; see the module doc.
#[derive(Debug, Default)]
pub struct Collector {
    tasks: BTreeMap<u32, Task>,
    /// srun's own messages that name no task.
    srun: Vec<String>,
    /// Lines on stdout without a task label (srun prints none there: kept as evidence).
    unlabelled: Vec<String>,
    reports: usize,
    /// The timeout fired: what arrives now comes from the step being killed.
    stopped: bool,
}

impl Collector {
    pub fn new() -> Collector {
        Collector::default()
    }

    /// One line of srun's stdout (without the newline).
    pub fn stdout_line(&mut self, line: &str) {
        let Some((task, text)) = split_label(line) else {
            if self.unlabelled.len() < KEEP {
                self.unlabelled.push(clip(line));
            }
            return;
        };
        let t = self.tasks.entry(task).or_default();
        t.lines += 1;
        let had_report = t.report.as_ref().is_some_and(Result::is_ok);
        let had_exit = t.exit.is_some();
        take_line(t, text);
        if !had_exit && t.exit.is_some() && self.stopped {
            t.exit_after_stop = true;
        }
        if !had_report && t.report.as_ref().is_some_and(Result::is_ok) {
            self.reports += 1;
        }
    }

    /// One line of srun's stderr.
    pub fn stderr_line(&mut self, line: &str) {
        if let Some((task, text)) = split_label(line) {
            let t = self.tasks.entry(task).or_default();
            if t.stderr.len() < KEEP && !text.trim().is_empty() {
                t.stderr.push(clip(text.trim()));
            }
            return;
        }
        // "srun: error: n3: task 2: Exited with exit code 2", "... task 2: Killed"
        if let Some((node, task, what)) = srun_task_message(line) {
            let t = self.tasks.entry(task).or_default();
            if t.node.is_none() {
                t.node = Some(node.to_string());
            }
            t.srun_says = Some(what.to_string());
            return;
        }
        let l = line.trim();
        if !l.is_empty() && self.srun.len() < 20 {
            self.srun.push(clip(l));
        }
    }

    /// The sweep's timeout fired and srun is being stopped: a task that ends from now
    /// on was killed by it (its shell may still print rdmakit's status), so it
    /// counts as hung.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// Nodes whose report arrived whole so far (for a progress bar).
    pub fn reports(&self) -> usize {
        self.reports
    }

    /// srun's own messages so far (allocation, errors), for a progress line.
    pub fn srun_messages(&self) -> &[String] {
        &self.srun
    }

    /// One result per expected node, in `expected`'s order.
    pub fn finish(self, expected: &[String], end: End) -> Vec<NodeResult> {
        let mut by_node: BTreeMap<String, Task> = BTreeMap::new();
        let mut nameless = Vec::new();
        for (id, t) in self.tasks {
            match t.node.clone() {
                Some(n) => {
                    by_node.entry(n).or_insert(t);
                }
                None => nameless.push((id, t)),
            }
        }
        let srun_note = self
            .srun
            .iter()
            .find(|l| l.contains("error") || l.contains("queued") || l.contains("waiting"))
            .or_else(|| self.srun.first())
            .cloned();
        let mut out = Vec::new();
        for node in expected {
            let r = match by_node.remove(node) {
                Some(t) => judge(node, t, end),
                None => NodeResult::missing(node, no_task_reason(end, srun_note.as_deref())),
            };
            out.push(r);
        }
        // Output nobody can be tied to is still evidence: on the missing nodes.
        if !nameless.is_empty() || !self.unlabelled.is_empty() {
            let mut what: Vec<String> = nameless
                .iter()
                .map(|(id, t)| format!("task {id} sent {} lines without naming its node", t.lines))
                .collect();
            if let Some(u) = self.unlabelled.first() {
                what.push(format!("unlabelled output {u:?}"));
            }
            for r in out.iter_mut().filter(|r| !r.is_reported()) {
                r.notes.extend(what.iter().cloned());
            }
        }
        out
    }
}

/// `  3: text` → (3, "text"); srun pads task ids to the widest one.
fn split_label(line: &str) -> Option<(u32, &str)> {
    let l = line.trim_start_matches(' ');
    let digits = l.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let task = l[..digits].parse().ok()?;
    let rest = l[digits..].strip_prefix(':')?;
    Some((task, rest.strip_prefix(' ').unwrap_or(rest)))
}

/// `srun: error: NODE: task N: WHAT`.
fn srun_task_message(line: &str) -> Option<(&str, u32, &str)> {
    let rest = line.trim().strip_prefix("srun: error: ")?;
    let (node, rest) = rest.split_once(": task ")?;
    let (task, what) = rest.split_once(": ")?;
    if node.contains(' ') {
        return None;
    }
    Some((node, task.trim().parse().ok()?, what.trim()))
}

fn take_line(t: &mut Task, text: &str) {
    // Frames have no empty lines; the task script's exit line may leave one.
    if text.trim().is_empty() {
        return;
    }
    if let Some(open) = t.open.as_mut() {
        match frame::classify(text) {
            Line::End { kind, lines } if Some(kind) == open.kind => {
                let done = t.open.take().unwrap_or_default();
                let result = frame::decode(&done.body, done.lines, lines, done.bytes)
                    .map_err(|e| e.to_string());
                let slot = match kind {
                    Kind::Report => &mut t.report,
                    Kind::Bundle => &mut t.bundle,
                };
                if slot.is_none() {
                    *slot = Some(result);
                } else {
                    t.extra_frames += 1;
                }
            }
            Line::Other(b64) if open.body.len() + b64.len() > frame::MAX_BODY => {
                // Longer than any frame rdmakit sends: not held any further.
                let kind = open.kind.map_or("?", Kind::as_str);
                let why = format!(
                    "frame body over {} base64 characters (the cap for frames)",
                    frame::MAX_BODY
                );
                t.open = None;
                if t.report.is_none() && kind == "report" {
                    t.report = Some(Err(why));
                } else if t.bundle.is_none() && kind == "bundle" {
                    t.bundle = Some(Err(why));
                }
            }
            Line::Other(b64) => {
                open.body.push_str(b64.trim());
                open.lines += 1;
            }
            // A frame line inside a frame: the frame was cut off.
            other => {
                let kind = open.kind.map_or("?", Kind::as_str);
                let cut = cut_off(open.lines);
                t.open = None;
                if t.report.is_none() && kind == "report" {
                    t.report = Some(Err(cut));
                } else if t.bundle.is_none() && kind == "bundle" {
                    t.bundle = Some(Err(cut));
                }
                take_line_outside(t, other, text);
            }
        }
        return;
    }
    take_line_outside(t, frame::classify(text), text);
}

fn take_line_outside(t: &mut Task, l: Line<'_>, text: &str) {
    match l {
        Line::Task { node } => {
            if t.node.is_none() {
                t.node = Some(node.to_string());
            }
        }
        Line::Begin { kind, bytes, .. } => {
            t.open = Some(Open {
                kind: Some(kind),
                bytes,
                ..Open::default()
            })
        }
        Line::Exit { status } => t.exit = Some(status),
        Line::End { .. } | Line::Other(_) => {
            t.stray_count += 1;
            if t.stray.len() < KEEP {
                t.stray.push(clip(text));
            }
        }
    }
}

/// The outcome of a node whose task ran.
fn judge(node: &str, mut t: Task, end: End) -> NodeResult {
    let exit_text = exit_text(&t);
    let mut notes = Vec::new();
    if t.extra_frames > 0 {
        notes.push(format!("{} extra frames ignored", t.extra_frames));
    }
    let bundle = match t.bundle.take() {
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => {
            notes.push(format!("bundle dropped: {e}"));
            None
        }
        None => None,
    };
    let missing = |reason: String| NodeResult {
        node: node.to_string(),
        outcome: Outcome::Missing { reason },
        notes: notes.clone(),
    };
    let hung = (t.exit.is_none() || t.exit_after_stop) && matches!(end, End::TimedOut(_));
    let secs = match end {
        End::TimedOut(s) => s,
        End::Exited(_) => 0.0,
    };
    match t.report {
        Some(Ok(bytes)) => match report_line(&bytes, node) {
            Ok(line) => NodeResult {
                node: node.to_string(),
                outcome: Outcome::Reported {
                    line,
                    bundle,
                    exit: t.exit,
                },
                notes,
            },
            Err(e) => missing(format!("garbage: {e}{exit_text}")),
        },
        Some(Err(e)) => missing(format!("garbage: report {e}{exit_text}")),
        None if t.open.is_some() => {
            let open = t.open.as_ref().map_or(0, |o| o.lines);
            if hung {
                missing(format!(
                    "hung: report still incomplete after {secs:.0} s ({open} lines arrived)"
                ))
            } else {
                missing(format!("garbage: report {}{exit_text}", cut_off(open)))
            }
        }
        None if t.stray_count > 0 => missing(format!(
            "garbage: {} line{} that {} not a report (first: {:?}){exit_text}",
            t.stray_count,
            if t.stray_count == 1 { "" } else { "s" },
            if t.stray_count == 1 { "is" } else { "are" },
            t.stray.first().map(String::as_str).unwrap_or("")
        )),
        None if hung => missing(format!(
            "hung: no report within {secs:.0} s (rdmakit started and sent nothing)"
        )),
        None => missing(format!("sent nothing{exit_text}")),
    }
}

fn cut_off(lines: usize) -> String {
    format!(
        "frame cut off after {lines} line{} (the process died or its output was truncated)",
        if lines == 1 { "" } else { "s" }
    )
}

/// ` (exit status 127; stderr: "...")`, or empty.
fn exit_text(t: &Task) -> String {
    let mut parts = Vec::new();
    match (t.exit, &t.srun_says) {
        (Some(s), _) if t.exit_after_stop => {
            parts.push(format!("killed at the timeout: exit status {s}"))
        }
        (Some(s), _) if s != 0 => parts.push(format!("exit status {s}")),
        (None, Some(w)) => parts.push(format!("srun: {w}")),
        _ => {}
    }
    if let Some(e) = t.stderr.first() {
        parts.push(format!("stderr: {e:?}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

fn no_task_reason(end: End, srun: Option<&str>) -> String {
    let said = srun.map(|s| format!(" ({s})")).unwrap_or_default();
    match end {
        End::TimedOut(s) => format!("no task started there within {s:.0} s{said}"),
        End::Exited(_) => format!("no task ran there{said}"),
    }
}

/// The report as one compact JSON line, checked to be a doctor report, with the
/// Slurm node name it came from added as `node` (a host's own name may differ from
/// its Slurm NodeName).
fn report_line(bytes: &[u8], node: &str) -> Result<String, String> {
    let mut v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("report is not JSON: {e}"))?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(DOCTOR_SCHEMA) => {}
        Some(other) => return Err(format!("report has schema {other:?}, not {DOCTOR_SCHEMA}")),
        None => {
            return Err(format!(
                "report has no schema (not a {DOCTOR_SCHEMA} report)"
            ))
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.insert("node".into(), serde_json::Value::String(node.to_string()));
    }
    serde_json::to_string(&v).map_err(|e| e.to_string())
}

fn clip(s: &str) -> String {
    if s.chars().count() > 100 {
        let mut c: String = s.chars().take(97).collect();
        c.push_str("...");
        c
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::frame::encode;

    const REPORT: &str = r#"{
  "schema": "rdmakit.doctor/v1",
  "counts": {"error": 0}
}"#;

    /// What srun --label prints for task `id` on `node` running the task script.
    fn task_output(id: u32, node: &str, body: &str, exit: Option<i32>) -> Vec<String> {
        let mut v = vec![format!("{id}: rdmakit-frame 1 task node={node}")];
        v.extend(body.lines().map(|l| format!("{id}: {l}")));
        if let Some(e) = exit {
            v.push(format!("{id}: rdmakit-frame 1 exit {e}"));
        }
        v
    }

    fn nodes(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    fn reason(r: &NodeResult) -> &str {
        match &r.outcome {
            Outcome::Missing { reason } => reason,
            Outcome::Reported { .. } => panic!("{} reported", r.node),
        }
    }

    #[test]
    fn interleaved_tasks_each_map_to_their_node() {
        let a = task_output(
            0,
            "n1",
            &encode(Kind::Report, "n1", REPORT.as_bytes()),
            Some(0),
        );
        let b = task_output(
            1,
            "n2",
            &encode(Kind::Report, "n2", REPORT.as_bytes()),
            Some(1),
        );
        let mut c = Collector::new();
        // Interleave line by line, as srun may.
        for i in 0..a.len().max(b.len()) {
            if let Some(l) = a.get(i) {
                c.stdout_line(l);
            }
            if let Some(l) = b.get(i) {
                c.stdout_line(l);
            }
        }
        assert_eq!(c.reports(), 2);
        let r = c.finish(&nodes(&["n1", "n2"]), End::Exited(Some(1)));
        for ((res, exit), node) in r.iter().zip([0, 1]).zip(["n1", "n2"]) {
            let Outcome::Reported { line, exit: e, .. } = &res.outcome else {
                panic!("{res:?}")
            };
            assert_eq!(
                line,
                &format!(
                    r#"{{"counts":{{"error":0}},"node":"{node}","schema":"rdmakit.doctor/v1"}}"#
                )
            );
            assert_eq!(*e, Some(exit));
        }
    }

    #[test]
    fn padded_labels_and_a_bundle() {
        let mut body = encode(Kind::Report, "n10", REPORT.as_bytes());
        body.push_str(&encode(Kind::Bundle, "n10", b"{\"format\":\"x\"}"));
        let mut c = Collector::new();
        for l in task_output(11, "n10", &body, Some(0)) {
            // srun pads "3:" to " 3:" when there are ten tasks or more.
            c.stdout_line(&format!(" {l}"));
        }
        let r = c.finish(&nodes(&["n10"]), End::Exited(Some(0)));
        let Outcome::Reported { bundle, .. } = &r[0].outcome else {
            panic!()
        };
        assert_eq!(bundle.as_deref(), Some(&b"{\"format\":\"x\"}"[..]));
    }

    #[test]
    fn hung_truncated_garbage_silent_and_absent_nodes() {
        let mut c = Collector::new();
        let full = encode(Kind::Report, "x", REPORT.as_bytes());
        // n1 hangs before printing anything (the health check's FIFO case).
        c.stdout_line("0: rdmakit-frame 1 task node=n1");
        // n2's output stops in the middle of its second body line, then it exits 0:
        // the task script ends that line, leaving an empty one before its exit line.
        let cut: Vec<&str> = full.lines().take(3).collect();
        let cut = format!(
            "{}\n",
            &cut.join("\n")[..full.lines().next().unwrap().len() + 80]
        );
        for l in task_output(1, "n2", &cut, Some(0)) {
            c.stdout_line(&l);
        }
        // n3 prints something else entirely.
        for l in task_output(2, "n3", "Segmentation fault\nnope", Some(139)) {
            c.stdout_line(&l);
        }
        // n4: rdmakit is not installed there.
        for l in task_output(3, "n4", "", Some(127)) {
            c.stdout_line(&l);
        }
        c.stderr_line("3: /usr/local/bin/rdmakit: not found");
        // n5 sends a well-formed frame of something that is not a report.
        for l in task_output(4, "n5", &encode(Kind::Report, "n5", b"[1,2]"), Some(0)) {
            c.stdout_line(&l);
        }
        // The timeout fires; srun kills n1's task.
        c.stderr_line("srun: error: n1: task 0: Killed");
        c.stderr_line("srun: Force Terminated StepId=4.0");
        let r = c.finish(
            &nodes(&["n1", "n2", "n3", "n4", "n5", "n6"]),
            End::TimedOut(20.0),
        );
        assert_eq!(
            reason(&r[0]),
            "hung: no report within 20 s (rdmakit started and sent nothing)"
        );
        assert_eq!(
            reason(&r[1]),
            "garbage: report frame cut off after 2 lines (the process died or its output \
             was truncated)"
        );
        assert_eq!(
            reason(&r[2]),
            "garbage: 2 lines that are not a report (first: \"Segmentation fault\") \
             (exit status 139)"
        );
        assert_eq!(
            reason(&r[3]),
            "sent nothing (exit status 127; stderr: \"/usr/local/bin/rdmakit: not found\")"
        );
        assert!(
            reason(&r[4]).starts_with("garbage: report has no schema"),
            "{}",
            reason(&r[4])
        );
        assert_eq!(
            reason(&r[5]),
            "no task started there within 20 s (srun: Force Terminated StepId=4.0)"
        );
    }

    #[test]
    fn a_task_killed_at_the_timeout_is_hung_even_if_its_shell_reports_the_kill() {
        // Seen on the cluster tier: srun kills the hung rdmakit first; the task's shell
        // prints its status (137) before it is killed too.
        let mut c = Collector::new();
        c.stdout_line("7: rdmakit-frame 1 task node=n8");
        c.stop();
        c.stderr_line("7: Killed");
        c.stdout_line("7: ");
        c.stdout_line("7: rdmakit-frame 1 exit 137");
        // A task that started and never ended is hung too.
        c.stdout_line("8: rdmakit-frame 1 task node=n9");
        let r = c.finish(&nodes(&["n8", "n9"]), End::TimedOut(10.0));
        assert_eq!(
            reason(&r[0]),
            "hung: no report within 10 s (rdmakit started and sent nothing)"
        );
        assert_eq!(
            reason(&r[1]),
            "hung: no report within 10 s (rdmakit started and sent nothing)"
        );
        // A node that ended by itself before the timeout is not hung.
        let mut c = Collector::new();
        for l in task_output(8, "n9", "", Some(127)) {
            c.stdout_line(&l);
        }
        c.stop();
        let r = c.finish(&nodes(&["n9"]), End::TimedOut(10.0));
        assert_eq!(reason(&r[0]), "sent nothing (exit status 127)");
    }

    #[test]
    fn a_task_that_never_ran_and_srun_errors() {
        let mut c = Collector::new();
        c.stderr_line("srun: error: Unable to allocate resources: Invalid node name specified");
        let r = c.finish(&nodes(&["nx"]), End::Exited(Some(1)));
        assert_eq!(
            reason(&r[0]),
            "no task ran there (srun: error: Unable to allocate resources: Invalid node name \
             specified)"
        );
    }

    #[test]
    fn srun_names_the_node_of_a_task_that_printed_nothing() {
        let mut c = Collector::new();
        c.stderr_line("srun: error: n7: task 6: Exited with exit code 2");
        c.stderr_line("6: slurmstepd: error: execve(): sh: No such file or directory");
        let r = c.finish(&nodes(&["n7"]), End::Exited(Some(2)));
        assert_eq!(
            reason(&r[0]),
            "sent nothing (srun: Exited with exit code 2; stderr: \"slurmstepd: error: \
             execve(): sh: No such file or directory\")"
        );
    }

    #[test]
    fn corrupt_frame_is_garbage_and_a_frame_inside_a_frame_cuts_it() {
        let full = encode(Kind::Report, "n1", REPORT.as_bytes());
        let mut lines: Vec<String> = full.lines().map(str::to_string).collect();
        lines[1] = "!!!!".into();
        let mut c = Collector::new();
        for l in task_output(0, "n1", &lines.join("\n"), Some(0)) {
            c.stdout_line(&l);
        }
        let begin = full.lines().next().unwrap().to_string();
        for l in task_output(1, "n2", &format!("{begin}\n{full}"), Some(0)) {
            c.stdout_line(&l);
        }
        let r = c.finish(&nodes(&["n1", "n2"]), End::Exited(Some(0)));
        assert!(
            reason(&r[0]).starts_with("garbage: report not base64"),
            "{}",
            reason(&r[0])
        );
        assert_eq!(
            reason(&r[1]),
            "garbage: report frame cut off after 0 lines (the process died or its output was \
             truncated)"
        );
    }

    #[test]
    fn results_become_fleet_nodes_named_after_their_slurm_node() {
        let host_named = r#"{"schema":"rdmakit.doctor/v1","findings":[],"inventory":{"hostname":"gpu7.example"}}"#;
        let results = vec![
            NodeResult {
                node: "n1".into(),
                outcome: Outcome::Reported {
                    line: host_named.into(),
                    bundle: None,
                    exit: Some(0),
                },
                notes: vec![],
            },
            NodeResult {
                node: "n2".into(),
                outcome: Outcome::Reported {
                    line: r#"{"schema":"rdmakit.doctor/v1","findings":7}"#.into(),
                    bundle: None,
                    exit: Some(0),
                },
                notes: vec![],
            },
            NodeResult::missing("n3", "hung: no report within 10 s"),
        ];
        let nodes = node_reports(&results);
        assert_eq!(nodes[0].name, "n1");
        assert!(nodes[0].missing.is_none());
        assert_eq!(nodes[1].name, "n2");
        assert!(nodes[1]
            .missing
            .as_deref()
            .unwrap()
            .starts_with("garbage: malformed"));
        assert_eq!(
            nodes[2].missing.as_deref(),
            Some("hung: no report within 10 s")
        );
        let r = crate::report::analyze(nodes, vec![], vec![], &Default::default());
        assert_eq!(r.summary.missing, 2);
        assert_eq!(r.summary.exit_code, 1);
    }

    #[test]
    fn labels() {
        assert_eq!(split_label("0: x"), Some((0, "x")));
        assert_eq!(split_label(" 11: "), Some((11, "")));
        assert_eq!(split_label("7:"), Some((7, "")));
        assert_eq!(split_label("srun: error"), None);
        assert_eq!(split_label("12 x"), None);
        assert_eq!(
            srun_task_message("srun: error: n3: task 2: Killed"),
            Some(("n3", 2, "Killed"))
        );
        assert_eq!(srun_task_message("srun: error: Unable to allocate"), None);
    }
}
