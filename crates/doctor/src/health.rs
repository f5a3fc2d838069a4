//! Node health: the doctor on this node, under a deadline, with an optional
//! baseline, gives a verdict. One capability serves every caller that asks
//! whether a node is fit for work: `rdmakit doctor` itself (and its `--frame`
//! for a sweep), node-problem-detector's plugin ([`crate::npd`]) and the Slurm
//! health check (`rdmakit_fleet::slurm::check`). They differ only in what they
//! make of the verdict.
//!
//! A [`NodeCheck`] names where the facts come from (the live host, a tree at
//! another root, a bundle), the checks' settings, the `--baseline` bundle, the
//! active probes wanted and what the caller's edge read of the environment.
//! [`NodeCheck::run`] opens the source, reads who the node is ([`NodeId`]),
//! collects, loads the baseline and assembles the report; [`NodeCheck::within`]
//! does the same on a worker thread under a deadline ([`rdmakit_host::watch`]):
//! a read that never returns (a sysfs attribute of a wedged driver, a FUSE file)
//! cannot be cancelled, so the caller stops waiting, names the read the check
//! was blocked in, and still knows the node and its boot, which are read first.
//!
//! The [`Verdict`] is one idea for every caller: healthy, unhealthy (the findings
//! at or above `--fail-on`), or unknown (the check hung or could not read the
//! host). node-problem-detector reports unknown as such; the Slurm health check
//! drains a node whose check hung (a job would hang there too).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdmakit_host::bundle::Bundle;
use rdmakit_host::collect::{collect, node, CollectOptions};
use rdmakit_host::model::{Ancestor, HostFacts, Node};
use rdmakit_host::open::{OpenError, Opened, SourceSpec};
use rdmakit_host::source::{LiveSource, Recorder};
use rdmakit_host::watch::{self, Tracker, Watched};
use rdmakit_verbs::SoftProvider;

use crate::assemble::{assemble, Assembly, RawOptions, Settings};
use crate::codes::Severity;
use crate::counters::{Baseline, BaselineError};
use crate::finding::Finding;
use crate::report::Report;

/// What to check, and how.
pub struct NodeCheck {
    /// Where the facts come from (`--root`, `--from`, `--pid`, `--kernel-log`).
    pub source: SourceSpec,
    /// The checks' configuration and the `--fail-on` threshold.
    pub settings: Settings,
    /// `--baseline BUNDLE`: judge port counters by their growth since it.
    pub baseline: Option<String>,
    /// Which active probes to run.
    pub probes: Probes,
    /// Keep every answer the collection read, as a bundle ([`Checked::bundle`]).
    pub record: bool,
    /// `--optics`: read module EEPROMs on the live host too (a replay always
    /// has them when they were recorded: see `CollectOptions::optics`).
    pub optics: bool,
    /// What the caller's edge read of the environment.
    pub edge: Edge,
}

/// The doctor's options as the command line gives them: the first step of
/// argument parsing done, the second ([`NodeCheck::from_options`]) to do.
#[derive(Clone, Debug)]
pub struct Options<'a> {
    /// Where the facts come from (`--root`, `--from`, `--pid`, `--kernel-log`).
    pub source: SourceSpec,
    /// The checks' options, before validation.
    pub raw: RawOptions<'a>,
    /// `--baseline BUNDLE`.
    pub baseline: Option<String>,
    /// `--device`.
    pub device: Option<String>,
    /// `--probe`.
    pub probe: bool,
    /// `--no-probe`.
    pub no_probe: bool,
    /// `--npd`: node-problem-detector's plugin, which never probes.
    pub npd: bool,
    /// `--slurm-health-check`: probes only when asked.
    pub health_check: bool,
    /// `--frame-bundle`: keep every answer read, as a bundle.
    pub record: bool,
    /// `--optics`: read module EEPROMs on the live host.
    pub optics: bool,
}

/// The active probes asked for.
#[derive(Clone, Debug, Default)]
pub struct Probes {
    /// `--device`: only this soft NIC, its checklist being its probes.
    pub device: Option<String>,
    /// `--probe`.
    pub probe: bool,
    /// `--no-probe`.
    pub no_probe: bool,
    /// Probe by default on a live host without RDMA devices (the soft NIC):
    /// `rdmakit doctor` does, the health checks do not.
    pub auto: bool,
}

/// What the caller read of the environment at its edge.
pub struct Edge {
    /// The tool, e.g. "rdmakit 0.1.0".
    pub tool: String,
    /// The soft NIC's provider as the environment configures it.
    pub soft: rdmakit_verbs::Result<SoftProvider>,
    /// The soft NIC's device names.
    pub soft_names: Vec<String>,
    /// The libibverbs to load for host devices (a path or a name).
    pub library: String,
}

/// Who the node is, and where the check runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeId {
    /// The node's host name: the source's, else (a source that does not record
    /// one: a capture of /sys alone, an older bundle) this host's.
    pub hostname: Option<String>,
    /// Its boot id, taken the same way.
    pub boot_id: Option<String>,
    /// The processes the check runs under, on this host whatever the source
    /// (where a Slurm health check's scontrol finds slurm.conf).
    pub ancestors: Vec<Ancestor>,
}

/// A completed check.
pub struct Checked {
    pub node: NodeId,
    pub facts: HostFacts,
    pub report: Report,
    /// What the source is called ("live host", "bundle FILE (tool)", ...).
    pub label: String,
    /// When the source was recorded (a bundle's time).
    pub recorded_unix: Option<u64>,
    /// Questions a bundle had no answer for (recorded by another version, or a
    /// partial capture); 0 for the live host, another root and a capture
    /// directory, which holds only what it captured.
    pub misses: usize,
    /// With [`NodeCheck::record`]: every answer the collection read.
    pub bundle: Option<Bundle>,
}

impl Checked {
    /// What the reader should know of the bundle's unanswered questions, when
    /// it had any ([`Checked::misses`]).
    pub fn misses_note(&self) -> Option<String> {
        (self.misses > 0).then(|| {
            format!(
                "the bundle had no answer for {} questions (recorded by another rdmakit \
                 version or a partial capture); those facts count as absent",
                self.misses
            )
        })
    }
}

/// Why a check did not complete.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The source did not open.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The `--baseline` bundle did not load.
    #[error(transparent)]
    Baseline(#[from] BaselineError),
    /// The report could not be assembled (`--device` naming no soft NIC, ...).
    #[error("{0}")]
    Assemble(String),
}

/// What the checks say about a node.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Nothing at or above `--fail-on` was found.
    Healthy,
    /// The findings at or above `--fail-on`, in the report's order (the worst
    /// first).
    Unhealthy { failing: Vec<Finding> },
    /// No check completed.
    Unknown(Unknown),
}

/// Why no check completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unknown {
    /// Not done within `limit`; `reading` is the read it was blocked in, when
    /// it was in one.
    Hung {
        limit: Duration,
        reading: Option<String>,
    },
    /// The host could not be read, or the report not assembled.
    Failed(String),
}

/// A check run under a deadline: the verdict, who the node is (when the check
/// got that far) and, when it completed, the check.
pub struct Health {
    pub verdict: Verdict,
    pub node: Option<NodeId>,
    pub checked: Option<Box<Checked>>,
}

impl Verdict {
    /// The exit status of `rdmakit doctor` ([`Verdict::exit_code`]).
    pub fn exit(&self) -> rdmakit_vocab::exit::Exit {
        rdmakit_vocab::exit::Exit::from_code(self.exit_code())
            .unwrap_or(rdmakit_vocab::exit::Exit::Failed)
    }

    /// The verdict on `findings`: unhealthy when one is at or above `fail_on`
    /// (`None`: never).
    pub fn of(findings: &[Finding], fail_on: Option<Severity>) -> Verdict {
        let failing: Vec<Finding> = match fail_on {
            Some(level) => findings
                .iter()
                .filter(|f| f.severity >= level)
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        if failing.is_empty() {
            Verdict::Healthy
        } else {
            Verdict::Unhealthy { failing }
        }
    }

    /// rdmakit's exit status for it, which is also node-problem-detector's
    /// (0 OK, 1 problem, 2 unknown).
    pub fn exit_code(&self) -> u8 {
        match self {
            Verdict::Healthy => 0,
            Verdict::Unhealthy { .. } => 1,
            Verdict::Unknown(_) => 2,
        }
    }
}

impl Edge {
    /// What the environment says of the soft NIC (`RDMAKIT_SOFT_*`) and of
    /// the libibverbs to load (`RDMAKIT_IBVERBS_LIB`), read by the caller at
    /// its edge; `tool` is e.g. "rdmakit 0.1.0".
    pub fn from_env(tool: String) -> Edge {
        Edge {
            tool,
            soft: SoftProvider::from_env(),
            soft_names: SoftProvider::names_from_env(),
            library: rdmakit_verbs::ibverbs::select::library_from_env(),
        }
    }
}

/// Opens `spec`'s source; the live host answers device limits through the
/// libibverbs at `library` (loaded and asked once, when first needed: RDK-R002)
/// and the soft NIC's counters from its registry ([`crate::soft`]), the
/// device `RDMAKIT_SOFT_NAME` names (soft0) first.
///
/// # Errors
/// As [`SourceSpec::open`].
pub fn open(spec: &SourceSpec, library: String) -> Result<(Opened, CollectOptions), OpenError> {
    spec.open(move |live| {
        let live =
            live.with_device_limits(Arc::new(rdmakit_verbs::ibverbs::limits_by_name(library)));
        crate::soft::with_registry(live, SoftProvider::names_from_env())
    })
}

impl NodeCheck {
    /// The check `o` asks for, its settings validated; the health checks
    /// (`--npd`, `--slurm-health-check`) never probe by default, `--npd`
    /// never at all.
    ///
    /// # Errors
    /// A setting out of range, named as its flag ([`Settings::parse`]).
    pub fn from_options(o: Options, edge: Edge) -> Result<NodeCheck, String> {
        Ok(NodeCheck {
            settings: Settings::parse(&o.raw)?,
            source: o.source,
            baseline: o.baseline,
            probes: match o.npd {
                true => Probes::default(),
                false => Probes {
                    device: o.device,
                    probe: o.probe,
                    no_probe: o.no_probe,
                    auto: !o.health_check,
                },
            },
            record: o.record,
            optics: o.optics,
            edge,
        })
    }

    /// Runs the check here and now; `phase` names the work under way
    /// ("collecting host facts", "active probes on rxe0").
    ///
    /// # Errors
    /// The source or the baseline does not open; the report cannot be
    /// assembled.
    pub fn run(&self, phase: &dyn Fn(String)) -> Result<Checked, CheckError> {
        self.run_watched(&Tracker::default(), &|_| {}, phase)
    }

    /// Runs the check on a worker thread and waits at most `limit` for it. The
    /// worker reads who the node is first and says so, so a check that hangs
    /// later still names the node and its boot. No active probe runs unless
    /// [`Probes`] asks for one.
    pub fn within(self, limit: Duration) -> Health {
        let fail_on = self.settings.fail_on;
        let seen: Arc<Mutex<Option<NodeId>>> = Arc::default();
        let tell = seen.clone();
        let done = watch::within(limit, move |tracker| {
            let publish = |n: &NodeId| {
                *tell.lock().unwrap_or_else(|p| p.into_inner()) = Some(n.clone());
            };
            self.run_watched(&tracker, &publish, &|_| {})
        });
        let node = seen.lock().unwrap_or_else(|p| p.into_inner()).take();
        match done {
            Ok(Ok(c)) => Health {
                verdict: Verdict::of(&c.report.findings, fail_on),
                node: Some(c.node.clone()),
                checked: Some(Box::new(c)),
            },
            Ok(Err(e)) => Health {
                verdict: Verdict::Unknown(Unknown::Failed(e.to_string())),
                node,
                checked: None,
            },
            Err(h) => Health {
                verdict: Verdict::Unknown(Unknown::Hung {
                    limit: h.limit,
                    reading: h.reading,
                }),
                node,
                checked: None,
            },
        }
    }

    fn run_watched(
        &self,
        tracker: &Tracker,
        publish: &dyn Fn(&NodeId),
        phase: &dyn Fn(String),
    ) -> Result<Checked, CheckError> {
        // This host first: where the check runs, and the node itself when the
        // source turns out to lack names or a boot id, or not to open at all.
        let live = LiveSource::host();
        let here = node(&Watched::new(&live, tracker.clone()));
        publish(&NodeId::of(None, &here));
        let (opened, mut opts) = open(&self.source, self.edge.library.clone())?;
        let live = self.source.from.is_none() && self.source.root.is_none();
        // Module EEPROMs are the one slow read of a live host (each holds the
        // kernel's RTNL lock across an I2C transfer): only when asked.
        opts.optics &= self.optics || !live;
        let src = Watched::new(opened.source(), tracker.clone());
        let judged = (!host_itself(&opened)).then(|| node(&src));
        let node = NodeId::of(judged.as_ref(), &here);
        publish(&node);
        phase("collecting host facts".into());
        let (facts, bundle) = if self.record {
            let rec = Recorder::new(&src);
            let facts = collect(&rec, &opts);
            let tool = format!("{} ({})", self.edge.tool, opened.label());
            let header = Bundle::header_now(&tool, opts.clone());
            (facts, Some(Bundle::new(header, rec.into_records())))
        } else {
            (collect(&src, &opts), None)
        };
        let misses = match &opened {
            Opened::Bundle(b, _) if !self.replays_a_capture_dir() => b.misses(),
            _ => 0,
        };
        let mut settings = self.settings.clone();
        if let Some(path) = &self.baseline {
            let now = opened.recorded_unix().or_else(|| live.then(now_unix));
            settings.cfg.baseline = Some(Baseline::load(path, now)?);
        }
        let assembly = Assembly {
            device: self.probes.device.as_deref(),
            probe: self.probes.probe,
            no_probe: self.probes.no_probe,
            auto_probe: self.probes.auto,
            live,
            input: self.source.from.as_deref().or(self.source.root.as_deref()),
            source_label: opened.label(),
            tool: &self.edge.tool,
            soft: &self.edge.soft,
            soft_names: &self.edge.soft_names,
            library: &self.edge.library,
        };
        let report =
            assemble(&facts, &settings.cfg, &assembly, phase).map_err(CheckError::Assemble)?;
        Ok(Checked {
            node,
            label: opened.label().to_string(),
            recorded_unix: opened.recorded_unix(),
            misses,
            bundle,
            facts,
            report,
        })
    }

    /// `--from` names a capture directory (which holds only what it captured).
    fn replays_a_capture_dir(&self) -> bool {
        self.source
            .from
            .as_deref()
            .is_some_and(|p| std::path::Path::new(p).is_dir())
    }
}

/// The source is this host itself (the live host at `/`), not a replay: its
/// node is the one already read.
fn host_itself(opened: &Opened) -> bool {
    matches!(opened, Opened::Live(s, _) if s.root() == std::path::Path::new("/"))
}

impl NodeId {
    /// Who the node is: the `judged` source's names and boot id, each else
    /// `here`'s (this host's, which is also the node when there is no other
    /// source); the ancestors are always `here`'s.
    pub fn of(judged: Option<&Node>, here: &Node) -> NodeId {
        let name = |n: &Node| n.hostname.best().map(|(h, _)| h.to_string());
        let boot = |n: &Node| n.boot().map(str::to_string);
        NodeId {
            hostname: judged.and_then(name).or_else(|| name(here)),
            boot_id: judged.and_then(boot).or_else(|| boot(here)),
            ancestors: here.ancestors.clone(),
        }
    }
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::Code;

    #[test]
    fn the_verdict_counts_only_findings_at_or_above_fail_on() {
        let fs = vec![
            Finding::new(Code::H002, "rxe0 port 1", "rxe0 port 1 is DOWN"),
            Finding::new(Code::K010, "host", "kernel log not checked"),
        ];
        let v = Verdict::of(&fs, Some(Severity::Error));
        assert_eq!(
            v,
            Verdict::Unhealthy {
                failing: vec![fs[0].clone()]
            }
        );
        assert_eq!(v.exit_code(), 1);
        assert_eq!(
            Verdict::of(&fs[1..], Some(Severity::Error)),
            Verdict::Healthy
        );
        assert_eq!(Verdict::of(&fs, None), Verdict::Healthy);
        assert_eq!(Verdict::Healthy.exit_code(), 0);
        assert_eq!(Verdict::Unknown(Unknown::Failed("x".into())).exit_code(), 2);
    }

    /// A source without names or a boot id (a capture of /sys alone) is taken
    /// to be of the host the check runs on, as is one that did not open (no
    /// source: `None`); one with them is itself.
    #[test]
    fn the_node_is_the_sources_else_this_hosts() {
        use rdmakit_host::source::{Answer, Op};
        let empty = Bundle::new(
            Bundle::header_now("t", Default::default()),
            Default::default(),
        );
        let mut named = Bundle::new(
            Bundle::header_now("t", Default::default()),
            Default::default(),
        );
        named.set(
            Op::Read,
            "/proc/sys/kernel/hostname",
            Answer::Data(b"node17\n".to_vec()),
        );
        named.set(
            Op::Read,
            "/proc/sys/kernel/random/boot_id",
            Answer::Data(b"fbcc2b86-4c9b-4d1e-9c58-0f4b2a3e5d71\n".to_vec()),
        );
        let (named, empty) = (node(&named), node(&empty));
        let id = NodeId::of(Some(&named), &empty);
        assert_eq!(id.hostname.as_deref(), Some("node17"));
        assert_eq!(
            id.boot_id.as_deref(),
            Some("fbcc2b86-4c9b-4d1e-9c58-0f4b2a3e5d71")
        );
        assert_eq!(NodeId::of(Some(&empty), &named), NodeId::of(None, &named));
        assert_eq!(NodeId::of(None, &named).hostname.as_deref(), Some("node17"));
        assert_eq!(NodeId::of(Some(&empty), &empty), NodeId::default());
    }
}
