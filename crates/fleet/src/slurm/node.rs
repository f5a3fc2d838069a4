//! A Slurm node's state as `scontrol show node -o` prints it: the base state, its
//! flags, the reason and who set it.
//!
//! `scontrol show node -o` is used rather than `sinfo --json` because its format has
//! been the same across Slurm releases (`State=IDLE+DRAIN`, `Reason=text
//! [user@time]`), while the JSON schema changed between 22.05 and 23.02.

/// One node's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    pub name: String,
    /// The base state: `IDLE`, `MIXED`, `ALLOCATED`, `DOWN`, `FUTURE`, `UNKNOWN`, ...
    pub base: String,
    /// The flags after `+`: `DRAIN`, `NOT_RESPONDING`, `COMPLETING`, `MAINT`,
    /// `REBOOT_REQUESTED`, `POWERED_DOWN`, ...
    pub flags: Vec<String>,
    /// The reason (drain, down, fail), without the `[user@time]` Slurm appends.
    pub reason: Option<Reason>,
    /// The partitions the node is in.
    pub partitions: Vec<String>,
}

/// Why a node is drained or down, and who said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    pub text: String,
    /// `root`, `slurm`, an administrator's login (`[user@time]`).
    pub user: Option<String>,
    pub time: Option<String>,
}

impl NodeState {
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Drained or draining: the DRAIN flag is set.
    pub fn drained(&self) -> bool {
        self.has_flag("DRAIN")
    }

    /// Jobs run or are finishing there.
    pub fn allocated(&self) -> bool {
        matches!(self.base.as_str(), "ALLOCATED" | "MIXED") || self.has_flag("COMPLETING")
    }

    /// The state as scontrol shows it: `IDLE+DRAIN`.
    pub fn state_text(&self) -> String {
        let mut s = self.base.clone();
        for f in &self.flags {
            s.push('+');
            s.push_str(f);
        }
        s
    }

    /// Why a new job step cannot start there (None: it can, maybe after waiting
    /// for running jobs).
    pub fn unusable(&self) -> Option<String> {
        let why = |what: &str| {
            let mut s = format!("slurm: {what} ({})", self.state_text());
            if let Some(r) = &self.reason {
                s.push_str(": ");
                s.push_str(&r.text);
            }
            s
        };
        // Slurm 22.05 prints the maintenance flag as MAINTENANCE, older ones MAINT.
        const OUT: [&str; 9] = [
            "DRAIN",
            "NOT_RESPONDING",
            "FAIL",
            "MAINT",
            "MAINTENANCE",
            "POWERED_DOWN",
            "POWERING_DOWN",
            "REBOOT_ISSUED",
            "INVALID_REG",
        ];
        if matches!(self.base.as_str(), "DOWN" | "FUTURE" | "UNKNOWN") {
            return Some(why(&format!("node is {}", self.base.to_ascii_lowercase())));
        }
        if self.drained() {
            return Some(why("node is drained"));
        }
        OUT.iter().find(|f| self.has_flag(f)).map(|f| match *f {
            "MAINT" | "MAINTENANCE" => why("node is in maintenance"),
            _ => why(&format!(
                "node is {}",
                f.to_ascii_lowercase().replace('_', " ")
            )),
        })
    }
}

/// What was wrong with `scontrol show node -o` output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("scontrol show node: line {line} has no NodeName=: {text:?}")]
    NoName { line: usize, text: String },
    #[error("scontrol show node: node {node} has no State=")]
    NoState { node: String },
}

/// Parses `scontrol show node -o` output: one node per line (blank lines and
/// `No nodes in the system` are skipped).
///
/// Values may hold spaces (`OS=Linux 6.1 #1 SMP`): a word without `=` belongs to the
/// value before it. `Reason=` is the last field and runs to the end of the line, so
/// a reason may hold anything, `=` included.
///
/// # Errors
/// A line without `NodeName=`, or a node without `State=`.
pub fn parse_show_node(text: &str) -> Result<Vec<NodeState>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("No nodes") {
            continue;
        }
        out.push(parse_line(i + 1, line)?);
    }
    Ok(out)
}

fn parse_line(lineno: usize, line: &str) -> Result<NodeState, ParseError> {
    let (fields, reason) = match line.find(" Reason=") {
        Some(at) => (&line[..at], Some(&line[at + " Reason=".len()..])),
        None => match line.strip_prefix("Reason=") {
            Some(r) => ("", Some(r)),
            None => (line, None),
        },
    };
    let mut pairs: Vec<(&str, String)> = Vec::new();
    for word in fields.split(' ').filter(|w| !w.is_empty()) {
        match word.split_once('=') {
            Some((k, v)) if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric()) => {
                pairs.push((k, v.to_string()))
            }
            _ => {
                if let Some((_, v)) = pairs.last_mut() {
                    v.push(' ');
                    v.push_str(word);
                }
            }
        }
    }
    let get = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    };
    let name = get("NodeName")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ParseError::NoName {
            line: lineno,
            text: line.chars().take(80).collect(),
        })?
        .to_string();
    let state = get("State").ok_or_else(|| ParseError::NoState { node: name.clone() })?;
    let mut parts = state.split('+');
    let mut base = parts.next().unwrap_or_default().to_string();
    let mut flags: Vec<String> = parts.map(str::to_string).collect();
    // Old releases mark a node that does not respond with '*' after its state.
    if let Some(b) = base.strip_suffix('*') {
        base = b.to_string();
        flags.push("NOT_RESPONDING".into());
    }
    let partitions = get("Partitions")
        .map(|p| {
            p.split(',')
                .filter(|s| !s.is_empty() && *s != "(null)")
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Ok(NodeState {
        name,
        base,
        flags,
        reason: reason.map(parse_reason).filter(|r| !r.text.is_empty()),
        partitions,
    })
}

/// `text [user@2026-12-04T16:09:06]` → text, user, time.
fn parse_reason(raw: &str) -> Reason {
    let raw = raw.trim();
    if let Some(open) = raw.rfind(" [") {
        let tail = &raw[open + 2..];
        if let Some(inner) = tail.strip_suffix(']') {
            if let Some((user, time)) = inner.split_once('@') {
                if !user.contains(' ') && !time.contains(' ') {
                    return Reason {
                        text: raw[..open].trim_end().to_string(),
                        user: Some(user.to_string()),
                        time: Some(time.to_string()),
                    };
                }
            }
        }
    }
    Reason {
        text: raw.to_string(),
        user: None,
        time: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real output of Slurm 22.05.8's `scontrol show node -o` on the cluster tier
    /// (scripts/cluster): n1 running a 1-CPU job, n2 running a job and drained by
    /// hand, n3 with its slurmd killed, n4 drained by rdmakit.
    const REAL: &str = include_str!("../../tests/data/slurm/scontrol-show-node-o.txt");

    fn node<'a>(all: &'a [NodeState], name: &str) -> &'a NodeState {
        all.iter().find(|n| n.name == name).unwrap()
    }

    #[test]
    fn real_scontrol_22_05_states() {
        let all = parse_show_node(REAL).unwrap();
        assert_eq!(all.len(), 4);
        let n1 = node(&all, "n1");
        assert_eq!((n1.base.as_str(), n1.flags.len()), ("MIXED", 0));
        assert!(n1.allocated() && !n1.drained() && n1.reason.is_none());
        assert_eq!(n1.partitions, vec!["all"]);
        assert_eq!(n1.unusable(), None);

        let n2 = node(&all, "n2");
        assert_eq!(n2.state_text(), "ALLOCATED+DRAIN");
        assert!(n2.allocated() && n2.drained());
        let r = n2.reason.as_ref().unwrap();
        assert_eq!(r.text, "admin: cable swap");
        assert_eq!(r.user.as_deref(), Some("root"));
        assert_eq!(r.time.as_deref(), Some("2026-12-04T16:09:06"));
        assert_eq!(
            n2.unusable().unwrap(),
            "slurm: node is drained (ALLOCATED+DRAIN): admin: cable swap"
        );

        let n3 = node(&all, "n3");
        assert_eq!(n3.state_text(), "DOWN+NOT_RESPONDING");
        assert_eq!(n3.reason.as_ref().unwrap().text, "Not responding");
        assert!(n3.unusable().unwrap().starts_with("slurm: node is down"));

        let n4 = node(&all, "n4");
        assert_eq!(n4.state_text(), "IDLE+DRAIN");
        assert_eq!(
            n4.reason.as_ref().unwrap().text,
            "rdmakit: RDK-H002 rxe0 port 1 is DOWN (physical state Disabled)"
        );
    }

    #[test]
    fn values_with_spaces_and_reasons_with_equals() {
        let line = "NodeName=gpu7 Arch=x86_64 OS=Linux 6.1.0 #1 SMP State=IDLE+DRAIN \
                    Partitions=gpu,debug Reason=bad dimm slot=3 [alice@2026-01-01T00:00:00]";
        let n = &parse_show_node(line).unwrap()[0];
        assert_eq!(n.name, "gpu7");
        assert_eq!(n.partitions, vec!["gpu", "debug"]);
        let r = n.reason.as_ref().unwrap();
        assert_eq!(r.text, "bad dimm slot=3");
        assert_eq!(r.user.as_deref(), Some("alice"));
    }

    #[test]
    fn a_maintenance_reservation_makes_a_node_unusable_as_22_05_prints_it() {
        let n = &parse_show_node("NodeName=n12 State=IDLE+MAINTENANCE+RESERVED").unwrap()[0];
        assert_eq!(
            n.unusable().unwrap(),
            "slurm: node is in maintenance (IDLE+MAINTENANCE+RESERVED)"
        );
    }

    #[test]
    fn old_not_responding_star_and_bracketless_reason() {
        let n = &parse_show_node("NodeName=a State=IDLE* Reason=gone [x]").unwrap()[0];
        assert_eq!(n.base, "IDLE");
        assert!(n.has_flag("NOT_RESPONDING"));
        assert_eq!(n.reason.as_ref().unwrap().text, "gone [x]");
        assert!(n.unusable().unwrap().contains("not responding"));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(matches!(
            parse_show_node("hello world"),
            Err(ParseError::NoName { line: 1, .. })
        ));
        assert!(matches!(
            parse_show_node("NodeName=x Arch=y"),
            Err(ParseError::NoState { .. })
        ));
        assert_eq!(
            parse_show_node("\nNo nodes in the system\n").unwrap(),
            vec![]
        );
        assert!(parse_show_node("Reason=").is_err());
        assert!(parse_show_node("NodeName= State=IDLE").is_err());
    }
}
