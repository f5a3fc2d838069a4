//! `rdmakit explain`: what a code, errno, verb:errno or WC status means.

use rdmakit_vocab::exit::Exit;
use std::io::Write as _;

use rdmakit_doctor::explain;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// RDK-K003, ib-umad-missing, ENOSPC, 28, ibv_create_qp:ENOSPC, wc:12, RETRY_EXC_ERR.
    query: String,
    /// Print the explanation as JSON.
    #[arg(long, conflicts_with = "raw")]
    json: bool,
    /// Print a finding code's page as the Markdown source (crates/doctor/findings/CODE.md).
    #[arg(long)]
    raw: bool,
}

pub fn run(a: Args) -> anyhow::Result<Exit> {
    let q = explain::parse_query(&a.query)?;
    let e = explain::explain(&q);
    let mut out = anstream::stdout();
    match (a.json, a.raw, e.page) {
        (true, _, _) => writeln!(out, "{}", serde_json::to_string_pretty(&e)?)?,
        (false, true, Some(page)) => out.write_all(page.as_bytes())?,
        _ => out.write_all(explain::render_human(&e, super::doctor::width()).as_bytes())?,
    }
    Ok(Exit::Ok)
}
