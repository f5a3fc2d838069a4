//! The live side of routes: LID-routed SMPs through the open umad port,
//! and the commands `rdmakit fabric route` and `rdmakit fabric discover
//! --routes`.

use rdmakit_umad::{Dest, MadError, Request};
use rdmakit_vocab::exit::Exit;
use rdmakit_wire::mad::smp;
use serde::Serialize;

use super::{read_lfts, resolve, Lfts, LidGet, LidSmp};
use crate::discover::{self, Discovery};
use crate::live::{json, missing, DiscoverForm, Live, Said};

impl LidSmp for Live {
    fn get_lid_many(&mut self, requests: &[LidGet]) -> Vec<Result<[u8; 64], MadError>> {
        let reqs: Vec<Request> = requests
            .iter()
            .map(|g| {
                let mad = smp::Repr::get(g.attr_id, g.attr_mod, smp::Route::Lid, 0).to_bytes();
                Request::new(Dest::smi(g.lid), mad)
            })
            .collect();
        self.transact(&reqs)
            .into_iter()
            .map(|reply| {
                let reply = reply?;
                let p = smp::Packet::new_checked(&reply[..]).map_err(|_| NOT_SMP)?;
                let r = smp::Repr::parse(&p).map_err(|_| NOT_SMP)?;
                if !r.status().is_ok() {
                    return Err(MadError::Status(r.status().0));
                }
                Ok(r.data)
            })
            .collect()
    }
}

const NOT_SMP: MadError = MadError::Invalid("the reply does not parse as an SMP");

/// `rdmakit fabric discover --json --routes`: the discovery with the LFTs.
#[derive(Serialize)]
struct WithRoutes<'a> {
    #[serde(flatten)]
    found: &'a Discovery,
    lfts: &'a Lfts,
}

/// What the LFTs could not read, one line each, for stderr.
fn lfts_missing(l: &Lfts) -> String {
    l.unread
        .iter()
        .map(|u| {
            format!(
                "rdmakit: fabric: unread: {} of switch {:?} (LID {}): {}\n",
                u.what, u.desc, u.lid, u.error
            )
        })
        .collect()
}

/// `rdmakit fabric discover --routes`: the discovery and every switch's
/// LFT, printed in `form` (JSON: the discovery with `lfts`). Exit 3 when
/// something did not answer.
///
/// # Errors
/// The port cannot be opened ([`Live::open`]).
pub fn discover_routes_command(
    ca: Option<&str>,
    port: Option<u8>,
    form: DiscoverForm,
) -> Result<Said, rdmakit_umad::Error> {
    let mut live = Live::open(ca, port)?;
    let found = discover::discover(&mut live, &discover::Options::default());
    let lfts = read_lfts(&mut live, &found.subnet);
    let out = match form {
        DiscoverForm::Json => json(&WithRoutes {
            found: &found,
            lfts: &lfts,
        }),
        DiscoverForm::Summary => format!(
            "{}forwarding tables: {} switches read, {} SMPs\n",
            discover::render::summary(&found),
            lfts.switches.len(),
            lfts.mads
        ),
        DiscoverForm::Topology => crate::ibnetdiscover::write(
            &found.subnet,
            &crate::ibnetdiscover::WriteOptions::default(),
        ),
    };
    let complete = found.complete() && lfts.complete();
    Ok(Said {
        out,
        err: format!("{}{}", missing(&found), lfts_missing(&lfts)),
        exit: if complete { Exit::Ok } else { Exit::Incomplete },
    })
}

/// `rdmakit fabric route SRC DST`: discovers the subnet, reads the LFTs,
/// follows the route (ibtracert's shape, or JSON). Exit 0; 1 when the
/// route breaks (a hole, a loop: stderr names where); 2 when a name
/// matches nothing.
///
/// # Errors
/// The port cannot be opened ([`Live::open`]).
pub fn route_command(
    ca: Option<&str>,
    port: Option<u8>,
    src: &str,
    dst: &str,
    json_out: bool,
) -> Result<Said, rdmakit_umad::Error> {
    let mut live = Live::open(ca, port)?;
    let found = discover::discover(&mut live, &discover::Options::default());
    let ends = resolve(&found.subnet, src).and_then(|s| Ok((s, resolve(&found.subnet, dst)?)));
    let (slid, dlid) = match ends {
        Ok(e) => e,
        Err(e) => {
            return Ok(Said {
                out: String::new(),
                err: format!("{}rdmakit: fabric route: {e}\n", missing(&found)),
                exit: Exit::Failed,
            })
        }
    };
    let lfts = read_lfts(&mut live, &found.subnet);
    let err = format!("{}{}", missing(&found), lfts_missing(&lfts));
    Ok(match super::route(&found.subnet, &lfts, slid, dlid) {
        Ok(r) => Said {
            out: match json_out {
                true => json(&r),
                false => super::text(&r),
            },
            err,
            exit: Exit::Ok,
        },
        Err(e) => Said {
            out: String::new(),
            err: format!("{err}rdmakit: fabric route: from LID {slid} to LID {dlid}: {e}\n"),
            exit: Exit::Found,
        },
    })
}
