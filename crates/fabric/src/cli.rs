//! `rdmakit fabric`'s command line (feature `cli`): the subcommands' flags
//! and [`Args::run`], which maps them onto [`crate::live`] and
//! [`crate::route::live`]. The binary flattens [`Args`], prints what
//! [`Ran`] says and draws the `--html` page (crates/report sits above this
//! crate).

use std::path::PathBuf;

use crate::check::flags::Flags;
use crate::live::{self, CheckForm, DiscoverForm, Said};
use crate::route;
use crate::view::Picture;

/// `rdmakit fabric`'s subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Args {
    /// Walk the subnet with directed-route SMPs from a local port, like ibnetdiscover: nodes, ports, links.
    Discover {
        /// Print the discovery as JSON (the subnet, schema rdmakit.fabric/v1, and what did not answer).
        #[arg(long, conflicts_with = "topology")]
        json: bool,
        /// Print ibnetdiscover's topology format.
        #[arg(long)]
        topology: bool,
        /// Also read every switch's linear forwarding table (JSON: `lfts`), for fabric route
        /// and the fleet's --fabric.
        #[arg(long)]
        routes: bool,
        /// Also write the fabric as a picture in one self-contained HTML file: switches in
        /// tiers, hosts below, each link coloured by its state, width and speed.
        #[arg(long, value_name = "FILE", conflicts_with = "routes")]
        html: Option<String>,
        /// The local port the MADs leave by.
        #[command(flatten)]
        port: PortArgs,
    },
    /// Follow the unicast route from SRC to DST through the switches' forwarding tables, like
    /// ibtracert.
    Route {
        /// Where the route starts: a LID, a GUID (0x...) or a node description.
        src: String,
        /// Where it ends: a LID, a GUID (0x...) or a node description.
        dst: String,
        /// Print the route as JSON (the ends and each switch: GUID, description, in and out port).
        #[arg(long)]
        json: bool,
        /// The local port the MADs leave by.
        #[command(flatten)]
        port: PortArgs,
    },
    /// Read every port's PMA counters (PortCounters, PortCountersExtended), like perfquery on each.
    Counters {
        /// Print JSON (schema rdmakit.fabric.counters/v1).
        #[arg(long)]
        json: bool,
        /// Every port and every counter; without it, the ports with an error counter not 0.
        #[arg(long, conflicts_with = "json")]
        all: bool,
        /// Clear every counter read after reading it (like perfquery -r).
        #[arg(long)]
        reset: bool,
        /// The local port the MADs leave by.
        #[command(flatten)]
        port: PortArgs,
    },
    /// Judge the subnet: links, error counters, the subnet manager, GUIDs and LIDs, and the
    /// cabling against an expected topology (codes RDK-F001 …; rdmakit explain CODE).
    Check(CheckArgs),
}

/// `rdmakit fabric check`'s flags.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Print JSON (schema rdmakit.fabric.check/v1: the findings, their groups, the SM's answer).
    #[arg(long)]
    json: bool,
    /// Show every evidence line and every next command.
    #[arg(short, long)]
    verbose: bool,
    /// An earlier counters snapshot (--save FILE, or fabric counters --json): judge each
    /// counter's growth since it, with its rate, instead of its total.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// The expected cabling: a topology file (ibnetdiscover's output, an ibsim net file) or a
    /// cable list (docs/fabric.md).
    #[arg(long, value_name = "FILE")]
    expected: Option<PathBuf>,
    /// Exit 1 when a finding at or above this severity is found: error, warning, info, never.
    #[arg(long, value_name = "LEVEL", default_value = "error")]
    fail_on: String,
    /// Write the counters read, with the time, to FILE: a later check's --baseline.
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Counter thresholds in infiniband-diags' error_thresholds format (Name=value lines, as
    /// ibqueryerrors --threshold-file reads); default: the values that file ships commented.
    #[arg(long, value_name = "FILE")]
    thresholds: Option<PathBuf>,
    /// Override a code's severity, e.g. --severity RDK-F005=error (repeatable).
    #[arg(long, value_name = "CODE=LEVEL")]
    severity: Vec<String>,
    /// Also write the fabric as a picture in one self-contained HTML file: each link
    /// coloured by the findings on it, the faulty ones framed and listed with their evidence.
    #[arg(long, value_name = "FILE")]
    html: Option<String>,
    #[command(flatten)]
    port: PortArgs,
}

/// The local port the MADs leave by.
#[derive(clap::Args, Debug)]
pub struct PortArgs {
    /// The CA (as ibstat names it: mlx5_0); default: the first with an Active port.
    #[arg(long, value_name = "NAME")]
    ca: Option<String>,
    /// The CA's port; default: its first Active port.
    #[arg(long, value_name = "N")]
    port: Option<u8>,
}

/// What a subcommand did: what it says, and the page `--html` asked for.
#[derive(Debug)]
pub struct Ran {
    /// Output and exit status.
    pub said: Said,
    /// The picture of the subnet to write as a page.
    pub page: Option<Page>,
}

/// A picture of the subnet for `--html FILE`.
#[derive(Debug)]
pub struct Page {
    /// Where to write it (`--html`).
    pub path: String,
    /// The picture.
    pub picture: Picture,
    /// The page's title: the command that drew it.
    pub title: &'static str,
}

/// Why a subcommand did not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The local port could not be opened.
    #[error(transparent)]
    Port(#[from] rdmakit_umad::Error),
    /// `fabric check`: a flag's file or value refused, the MAD I/O failing,
    /// or `--save` not writable.
    #[error("{0}")]
    Check(String),
}

impl Args {
    /// Runs the subcommand; `width` is the columns the check's human report
    /// wraps to.
    ///
    /// # Errors
    /// As [`RunError`].
    pub fn run(self, width: u16) -> Result<Ran, RunError> {
        Ok(match self {
            Args::Discover {
                json,
                topology,
                routes,
                html,
                port,
            } => {
                let form = match (json, topology) {
                    (true, _) => DiscoverForm::Json,
                    (_, true) => DiscoverForm::Topology,
                    _ => DiscoverForm::Summary,
                };
                let (ca, port) = (port.ca.as_deref(), port.port);
                match routes {
                    true => said(route::live::discover_routes_command(ca, port, form)?),
                    false => {
                        let d = live::discover_command(ca, port, form, html.is_some())?;
                        Ran {
                            said: d.said,
                            page: page(html, d.picture, "rdmakit fabric discover"),
                        }
                    }
                }
            }
            Args::Route {
                src,
                dst,
                json,
                port,
            } => said(route::live::route_command(
                port.ca.as_deref(),
                port.port,
                &src,
                &dst,
                json,
            )?),
            Args::Counters {
                json,
                all,
                reset,
                port,
            } => said(live::counters_command(
                port.ca.as_deref(),
                port.port,
                json,
                all,
                reset,
            )?),
            Args::Check(c) => {
                let flags = Flags {
                    baseline: c.baseline.as_deref(),
                    expected: c.expected.as_deref(),
                    thresholds: c.thresholds.as_deref(),
                    severity: &c.severity,
                    fail_on: &c.fail_on,
                };
                let form = CheckForm {
                    json: c.json,
                    verbose: c.verbose,
                    width,
                    picture: c.html.is_some(),
                };
                let (ca, port) = (c.port.ca.as_deref(), c.port.port);
                let checked = live::check_flags_command(ca, port, &flags, form, c.save.as_deref())
                    .map_err(RunError::Check)?;
                Ran {
                    said: checked.said,
                    page: page(c.html, checked.picture, "rdmakit fabric check"),
                }
            }
        })
    }
}

/// The page to write when `--html` was given and a picture was drawn.
fn page(path: Option<String>, picture: Option<Picture>, title: &'static str) -> Option<Page> {
    Some(Page {
        path: path?,
        picture: picture?,
        title,
    })
}

/// A subcommand that draws no picture.
fn said(said: Said) -> Ran {
    Ran { said, page: None }
}
