//! The live side: discovery's SMPs ([`Smp`]) and the counters' PMA requests
//! ([`Pma`]) through an open umad port (`rdmakit-umad`), the requests built
//! and the replies read with `rdmakit-wire`'s views.
//!
//! Every batch goes to [`Port::transact`] whole (in chunks of
//! [`MAX_REQUESTS`]), so the port keeps its window of MADs in flight; the
//! port bounds each request in time ([`Policy`]) and validates each reply.
//! A reply whose bytes do not parse is that request's error, never a panic.
//!
//! ```no_run
//! use rdmakit_fabric::{discover, live::Live};
//! let mut port = Live::open(None, None)?;
//! let found = discover::discover(&mut port, &discover::Options::default());
//! println!("{} nodes", found.subnet.nodes().len());
//! # Ok::<(), rdmakit_umad::Error>(())
//! ```

use rdmakit_doctor::codes::Severity;
use rdmakit_doctor::finding::Finding;
use rdmakit_umad::{Dest, MadError, Policy, Port, PortInfo, Request, Stats, MAX_REQUESTS};
use rdmakit_vocab::exit::Exit;
use rdmakit_wire::mad::{pma, smp};
use serde::Serialize;

use crate::check::sm::SmReply;
use crate::check::{self, CounterSnapshot, Facts, SmAnswer, SmFacts, SmInfo, SmState};
use crate::counters::{self, Pma, PmaRequest};
use crate::discover::{self, Discovery, Smp, SmpGet};
use crate::expected::Expected;
use crate::ibnetdiscover::{self, WriteOptions};
use crate::topology::{PortRef, Subnet};
use crate::view::{self, Picture};

/// An open umad port that sends discovery's and the counters' MADs.
#[derive(Debug)]
pub struct Live {
    port: Port,
    policy: Policy,
}

impl Live {
    /// Opens `ca` / `port` (the first Active port unless both are given)
    /// through libibumad, with the default [`Policy`] (16 MADs in flight,
    /// 200 ms a try, 3 retries).
    ///
    /// # Errors
    /// As [`Port::open`]: libibumad missing (library layer), no umad device
    /// (kernel layer), permission (application layer), no Active port
    /// (fabric layer); each names the verb and the errno.
    pub fn open(ca: Option<&str>, port: Option<u8>) -> Result<Live, rdmakit_umad::Error> {
        Ok(Live {
            port: Port::open(ca, port)?,
            policy: Policy::default(),
        })
    }

    /// The same port under another policy.
    pub fn with_policy(self, policy: Policy) -> Live {
        Live { policy, ..self }
    }

    /// The port that was opened.
    pub fn info(&self) -> &PortInfo {
        self.port.info()
    }

    /// What the port counted: sent, replies, timeouts, dropped replies.
    pub fn stats(&self) -> Stats {
        self.port.stats()
    }

    /// SMInfo of the SM at `lid` (a LID-routed SMP Get, what `sminfo`
    /// sends), as the fabric check reads it: the answer, or why there is
    /// none.
    pub fn sm_answer(&mut self, lid: u16) -> SmAnswer {
        let failed = |why: String| SmAnswer {
            lid,
            reply: SmReply::Failed(why),
        };
        if lid == 0 {
            return failed("the local port names no subnet manager (SM LID 0)".into());
        }
        let get = smp::Repr::get(smp::attr::SM_INFO, 0, smp::Route::Lid, 0);
        let reply = self
            .transact(&[Request::new(Dest::smi(lid), get.to_bytes())])
            .into_iter()
            .next()
            .unwrap_or(Err(MadError::Invalid("no reply")));
        let parsed = reply.map_err(|e| e.to_string()).and_then(|m| {
            let p = smp::Packet::new_checked(&m[..]).map_err(|_| NOT_SMP.to_string())?;
            let r = smp::Repr::parse(&p).map_err(|_| NOT_SMP.to_string())?;
            if !r.status().is_ok() {
                return Err(format!("SMInfo status {}", r.status()));
            }
            r.attribute::<smp::sm_info::Repr>()
                .map_err(|_| "the SMInfo does not parse".to_string())
        });
        match parsed {
            Ok(i) => SmAnswer {
                lid,
                reply: SmReply::Info(SmInfo {
                    guid: i.guid,
                    act_count: i.act_count,
                    priority: i.priority,
                    state: SmState::from_code(i.sm_state),
                }),
            },
            Err(e) => failed(e),
        }
    }

    /// The SM LID (PortInfo's MasterSMLID) each port with a LID names:
    /// LID-routed PortInfo Gets to every CA or router port and every
    /// switch's port 0, in one batch. Ports that do not answer are left
    /// out.
    pub fn port_sm_lids(&mut self, s: &Subnet) -> Vec<(PortRef, u16)> {
        let mut asked: Vec<PortRef> = Vec::new();
        let mut reqs: Vec<Request> = Vec::new();
        let mut ask = |r: PortRef, lid: u16| {
            let get = smp::Repr::get(smp::attr::PORT_INFO, u32::from(r.port), smp::Route::Lid, 0);
            asked.push(r);
            reqs.push(Request::new(Dest::smi(lid), get.to_bytes()));
        };
        for n in s.nodes() {
            match n.port0 {
                Some(p0) if p0.lid != 0 => ask(
                    PortRef {
                        guid: n.guid,
                        port: 0,
                    },
                    p0.lid,
                ),
                Some(_) => {}
                None => {
                    for p in n.ports.iter().filter(|p| p.lid != 0) {
                        ask(
                            PortRef {
                                guid: n.guid,
                                port: p.num,
                            },
                            p.lid,
                        );
                    }
                }
            }
        }
        let replies = self.transact(&reqs);
        asked
            .into_iter()
            .zip(replies)
            .filter_map(|(r, reply)| {
                let m = reply.ok()?;
                let p = smp::Packet::new_checked(&m[..]).ok()?;
                let smp = smp::Repr::parse(&p).ok()?;
                if !smp.status().is_ok() {
                    return None;
                }
                let info = smp.attribute::<smp::port_info::Repr>().ok()?;
                Some((r, info.master_sm_lid))
            })
            .collect()
    }

    pub(crate) fn transact(&mut self, reqs: &[Request]) -> Vec<Result<[u8; 256], MadError>> {
        let mut out = Vec::with_capacity(reqs.len());
        for chunk in reqs.chunks(MAX_REQUESTS) {
            out.extend(self.port.transact(chunk, &self.policy));
        }
        out
    }
}

impl Smp for Live {
    fn get_many(&mut self, requests: &[SmpGet]) -> Vec<Result<[u8; 64], MadError>> {
        let mut built: Vec<Result<Request, MadError>> = Vec::with_capacity(requests.len());
        for g in requests {
            built.push(match smp::Route::directed(&g.path) {
                Ok(route) => {
                    let mad = smp::Repr::get(g.attr_id, g.attr_mod, route, 0).to_bytes();
                    Ok(Request::new(Dest::Directed, mad))
                }
                Err(_) => Err(MadError::Invalid("the route is longer than 63 hops")),
            });
        }
        let reqs: Vec<Request> = built
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .cloned()
            .collect();
        let mut replies = self.transact(&reqs).into_iter();
        built
            .into_iter()
            .map(|b| {
                b?;
                let reply = replies
                    .next()
                    .unwrap_or(Err(MadError::Invalid("no reply")))?;
                let p = smp::Packet::new_checked(&reply[..]).map_err(|_| NOT_SMP)?;
                let r = smp::Repr::parse(&p).map_err(|_| NOT_SMP)?;
                Ok(r.data)
            })
            .collect()
    }
}

impl Pma for Live {
    fn send_many(&mut self, requests: &[PmaRequest]) -> Vec<Result<[u8; 192], MadError>> {
        let reqs: Vec<Request> = requests
            .iter()
            .map(|r| Request::new(Dest::gsi(r.lid), r.mad(0).to_bytes()))
            .collect();
        self.transact(&reqs)
            .into_iter()
            .map(|reply| {
                let reply = reply?;
                let p = pma::Packet::new_checked(&reply[..]).map_err(|_| NOT_PMA)?;
                let r = pma::Repr::parse(&p).map_err(|_| NOT_PMA)?;
                Ok(r.data)
            })
            .collect()
    }
}

const NOT_SMP: MadError = MadError::Invalid("the reply does not parse as an SMP");
const NOT_PMA: MadError = MadError::Invalid("the reply does not parse as a PMA MAD");

/// How `rdmakit fabric discover` prints the subnet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiscoverForm {
    /// The counts and each node's links ([`crate::discover::render::summary`]).
    Summary,
    /// The [`Discovery`] as JSON.
    Json,
    /// ibnetdiscover's topology format ([`crate::ibnetdiscover::write`]).
    Topology,
}

/// What a command says: its standard output, its standard error and its
/// exit status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Said {
    /// For stdout.
    pub out: String,
    /// For stderr.
    pub err: String,
    /// The exit status.
    pub exit: Exit,
}

/// What `rdmakit fabric discover` did: what it says, and the picture of
/// the subnet when one was asked for (`--html`).
#[derive(Clone, Debug)]
pub struct Discovered {
    /// Output and exit status.
    pub said: Said,
    /// The subnet as a picture ([`view::picture`]), its links judged by the
    /// check's link and identity findings (no counters are read).
    pub picture: Option<Picture>,
}

/// `rdmakit fabric discover`: opens the port, walks the subnet, prints it
/// in `form`, and makes its picture when `picture`. Exit 0 when everything
/// answered, 3 when a node or attribute did not (the rest is printed;
/// stderr names what is missing).
///
/// # Errors
/// The port cannot be opened ([`Live::open`]).
pub fn discover_command(
    ca: Option<&str>,
    port: Option<u8>,
    form: DiscoverForm,
    picture: bool,
) -> Result<Discovered, rdmakit_umad::Error> {
    let mut live = Live::open(ca, port)?;
    let found = discover::discover(&mut live, &discover::Options::default());
    let picture = picture.then(|| {
        let findings = check::run(&Facts::new(&found.subnet), &check::Config::default());
        view::picture(
            &found.subnet,
            None,
            &findings,
            None,
            &view::Options::default(),
        )
    });
    let out = match form {
        DiscoverForm::Summary => discover::render::summary(&found),
        DiscoverForm::Json => json(&found),
        DiscoverForm::Topology => ibnetdiscover::write(&found.subnet, &WriteOptions::default()),
    };
    let err = match form {
        DiscoverForm::Summary => String::new(),
        _ => missing(&found),
    };
    Ok(Discovered {
        said: Said {
            out,
            err,
            exit: if found.complete() {
                Exit::Ok
            } else {
                Exit::Incomplete
            },
        },
        picture,
    })
}

/// `rdmakit fabric counters`: discovers the subnet, reads every port's
/// counters ([`counters::read`]; cleared after when `reset`), prints the
/// table ([`counters::render`], every port and counter with `all`) or JSON.
/// Exit 0, or 3 when the discovery or a port's counters were incomplete.
///
/// # Errors
/// The port cannot be opened ([`Live::open`]).
pub fn counters_command(
    ca: Option<&str>,
    port: Option<u8>,
    json_out: bool,
    all: bool,
    reset: bool,
) -> Result<Said, rdmakit_umad::Error> {
    let mut live = Live::open(ca, port)?;
    let found = discover::discover(&mut live, &discover::Options::default());
    let targets = counters::targets(&found.subnet);
    let read = counters::read(&mut live, &targets, &counters::Options { reset });
    let out = match json_out {
        true => json(&read),
        false => counters::render(&read, all),
    };
    let complete = found.complete() && read.complete();
    Ok(Said {
        out,
        err: missing(&found),
        exit: if complete { Exit::Ok } else { Exit::Incomplete },
    })
}

/// What discovery could not read, one line each, for stderr.
pub(crate) fn missing(d: &Discovery) -> String {
    let mut s = String::new();
    for u in &d.unread {
        let path: Vec<String> = u.path.iter().map(u8::to_string).collect();
        s.push_str(&format!(
            "rdmakit: fabric: unreachable: {} by route [{}]: {}\n",
            u.what,
            path.join(","),
            u.error
        ));
    }
    if let Some(why) = &d.stopped {
        s.push_str(&format!("rdmakit: fabric: incomplete: {why}\n"));
    }
    s
}

pub(crate) fn json<T: serde::Serialize>(v: &T) -> String {
    // Plain data with string keys: serializing cannot fail.
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// What `rdmakit fabric check` is asked besides the port.
#[derive(Clone, Debug)]
pub struct CheckRequest<'a> {
    /// Print JSON (schema [`CHECK_SCHEMA`]).
    pub json: bool,
    /// Show every evidence line and next command.
    pub verbose: bool,
    /// The human report's width.
    pub width: u16,
    /// An earlier counters snapshot: growth and rates are judged.
    pub baseline: Option<&'a CounterSnapshot>,
    /// The expected cabling.
    pub expected: Option<&'a Expected>,
    /// Exit 1 at or above this severity; None: never.
    pub fail_on: Option<Severity>,
    /// Thresholds and severity overrides.
    pub config: check::Config,
    /// Now, in seconds since the UNIX epoch: the time of the counters read.
    pub now: f64,
    /// Make the picture of the subnet ([`Checked::picture`]).
    pub picture: bool,
}

/// `rdmakit fabric check` as its flags say: the files they name read
/// (bounded, [`check::flags::Inputs::of_flags`]), the subnet checked now,
/// and the counters written to `save` (mode 0600) when given.
///
/// # Errors
/// A flag's file or value refused (named), the MAD I/O failing, or
/// `save` not writable.
pub fn check_flags_command(
    ca: Option<&str>,
    port: Option<u8>,
    flags: &check::flags::Flags,
    form: CheckForm,
    save: Option<&std::path::Path>,
) -> Result<Checked, String> {
    let inputs = check::flags::Inputs::of_flags(flags)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let req = CheckRequest {
        json: form.json,
        verbose: form.verbose,
        width: form.width,
        baseline: inputs.baseline.as_ref(),
        expected: inputs.expected.as_ref(),
        fail_on: inputs.fail_on,
        config: inputs.config,
        now,
        picture: form.picture,
    };
    let checked = check_command(ca, port, &req).map_err(|e| e.to_string())?;
    if let Some(path) = save {
        rdmakit_host::outfile::write_private(path, checked.snapshot.to_json().as_bytes())
            .map_err(|e| format!("--save {}: {e}", path.display()))?;
    }
    Ok(checked)
}

/// How `rdmakit fabric check` reports ([`check_flags_command`]).
#[derive(Clone, Copy, Debug)]
pub struct CheckForm {
    /// JSON instead of the human report.
    pub json: bool,
    /// Every evidence line and next command.
    pub verbose: bool,
    /// The human report's width.
    pub width: u16,
    /// Make the picture of the subnet.
    pub picture: bool,
}

/// What `rdmakit fabric check` did: what it says, and the counters it read
/// (for `--save`).
#[derive(Clone, Debug)]
pub struct Checked {
    /// Output and exit status.
    pub said: Said,
    /// The counters read, with their time.
    pub snapshot: CounterSnapshot,
    /// The subnet as a picture, its links judged by the findings, when
    /// asked for.
    pub picture: Option<Picture>,
}

/// The JSON schema of `rdmakit fabric check --json`.
pub const CHECK_SCHEMA: &str = "rdmakit.fabric.check/v1";

/// `rdmakit fabric check --json`.
#[derive(Serialize)]
struct CheckJson<'a> {
    schema: &'static str,
    nodes: usize,
    links: usize,
    ports_read: usize,
    sm: &'a SmFacts,
    /// What discovery or the PMA did not answer.
    unread: Vec<String>,
    findings: &'a [Finding],
    groups: Vec<rdmakit_doctor::group::FindingGroup>,
    counts: Counts,
}

#[derive(Serialize)]
struct Counts {
    error: usize,
    warning: usize,
    info: usize,
}

/// `rdmakit fabric check`: discovers the subnet, reads every port's
/// counters, the SM's SMInfo (at the SM LID the local port names) and the
/// SM LID every port names ([`Live::port_sm_lids`]), and
/// judges them ([`check::run`]) with the baseline and the expected cabling
/// when given. Exit 1 when a finding is at or above `fail_on`, else 3 when
/// something did not answer, else 0.
///
/// # Errors
/// The port cannot be opened ([`Live::open`]).
pub fn check_command(
    ca: Option<&str>,
    port: Option<u8>,
    req: &CheckRequest,
) -> Result<Checked, rdmakit_umad::Error> {
    let mut live = Live::open(ca, port)?;
    let found = discover::discover(&mut live, &discover::Options::default());
    let targets = counters::targets(&found.subnet);
    let read = counters::read(&mut live, &targets, &counters::Options { reset: false });
    let snapshot = CounterSnapshot::new(read, Some(req.now));
    let sm_lid = live.info().sm_lid;
    let sm = SmFacts {
        answers: vec![live.sm_answer(sm_lid)],
        later: Vec::new(),
        port_sm_lids: live.port_sm_lids(&found.subnet),
    };
    let mut facts = Facts::new(&found.subnet).counters(&snapshot).sm(&sm);
    if let Some(b) = req.baseline {
        facts = facts.baseline(b);
    }
    if let Some(e) = req.expected {
        facts = facts.expected(e);
    }
    let findings = check::run(&facts, &req.config);
    let mut unread: Vec<String> = missing(&found).lines().map(str::to_string).collect();
    for u in &snapshot.counters.unread {
        unread.push(format!(
            "rdmakit: fabric: unread: {} of {} port {} (LID {}): {}",
            u.what, u.node_desc, u.port, u.lid, u.error
        ));
    }
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    let counts = Counts {
        error: count(Severity::Error),
        warning: count(Severity::Warning),
        info: count(Severity::Info),
    };
    let links = found.subnet.links().count();
    let out = if req.json {
        json(&CheckJson {
            schema: CHECK_SCHEMA,
            nodes: found.subnet.nodes().len(),
            links,
            ports_read: snapshot.counters.ports.len(),
            sm: &sm,
            unread: unread.clone(),
            findings: &findings,
            groups: rdmakit_doctor::group::groups(&findings),
            counts,
        })
    } else {
        let mut s = format!(
            "rdmakit fabric check: {} nodes, {links} links, counters of {} ports{}{}\n",
            found.subnet.nodes().len(),
            snapshot.counters.ports.len(),
            match req.baseline {
                Some(_) => ", judged since the baseline",
                None => "",
            },
            match req.expected {
                Some(_) => ", cabling against the expected topology",
                None => "",
            },
        );
        if findings.is_empty() {
            s.push_str("No findings.\n");
        } else {
            s.push_str(&rdmakit_doctor::render::findings(
                &findings,
                rdmakit_doctor::render::HumanOptions {
                    verbose: req.verbose,
                    width: req.width,
                },
            ));
            s.push_str(&format!(
                "{} error(s), {} warning(s), {} info\n",
                counts.error, counts.warning, counts.info
            ));
        }
        s
    };
    let complete = found.complete() && snapshot.counters.complete();
    let found_one = req
        .fail_on
        .is_some_and(|level| findings.iter().any(|f| f.severity >= level));
    let exit = match (found_one, complete) {
        (true, _) => Exit::Found,
        (false, false) => Exit::Incomplete,
        (false, true) => Exit::Ok,
    };
    let err: String = unread.iter().map(|l| format!("{l}\n")).collect();
    let picture = req.picture.then(|| {
        view::picture(
            &found.subnet,
            Some(&snapshot.counters),
            &findings,
            req.expected,
            &view::Options::default(),
        )
    });
    Ok(Checked {
        said: Said { out, err, exit },
        snapshot,
        picture,
    })
}
