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

use rdmakit_umad::{Dest, MadError, Policy, Port, PortInfo, Request, Stats, MAX_REQUESTS};
use rdmakit_vocab::exit::Exit;
use rdmakit_wire::mad::{pma, smp};

use crate::counters::{self, Pma, PmaRequest};
use crate::discover::{self, Discovery, Smp, SmpGet};
use crate::ibnetdiscover::{self, WriteOptions};

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

    fn transact(&mut self, reqs: &[Request]) -> Vec<Result<[u8; 256], MadError>> {
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

/// `rdmakit fabric discover`: opens the port, walks the subnet, prints it
/// in `form`. Exit 0 when everything answered, 3 when a node or attribute
/// did not (the rest is printed; stderr names what is missing).
///
/// # Errors
/// The port cannot be opened ([`Live::open`]).
pub fn discover_command(
    ca: Option<&str>,
    port: Option<u8>,
    form: DiscoverForm,
) -> Result<Said, rdmakit_umad::Error> {
    let mut live = Live::open(ca, port)?;
    let found = discover::discover(&mut live, &discover::Options::default());
    let out = match form {
        DiscoverForm::Summary => discover::render::summary(&found),
        DiscoverForm::Json => json(&found),
        DiscoverForm::Topology => ibnetdiscover::write(&found.subnet, &WriteOptions::default()),
    };
    let err = match form {
        DiscoverForm::Summary => String::new(),
        _ => missing(&found),
    };
    Ok(Said {
        out,
        err,
        exit: if found.complete() {
            Exit::Ok
        } else {
            Exit::Incomplete
        },
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
fn missing(d: &Discovery) -> String {
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

fn json<T: serde::Serialize>(v: &T) -> String {
    // Plain data with string keys: serializing cannot fail.
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}
