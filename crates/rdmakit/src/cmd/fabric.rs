//! `rdmakit fabric discover`, `route`, `counters` and `check`: the
//! InfiniBand subnet through a local umad port (`rdmakit_fabric::cli`, its
//! flags and their mapping onto `rdmakit_fabric::live`; docs/fabric.md).
//! Here, the `--html` page and printing.

use std::io::Write as _;

pub use rdmakit_fabric::cli::Args;
use rdmakit_vocab::exit::Exit;

pub fn run(a: Args) -> anyhow::Result<Exit> {
    let ran = a.run(super::doctor::width())?;
    if let Some(p) = &ran.page {
        let page = rdmakit_report::fabric::render(&p.picture, p.title, &super::page_meta(None));
        super::write_page(&p.path, page)?;
    }
    // Through anstream: the check's report is styled; NO_COLOR and a
    // stdout that is not a terminal strip the styles.
    anstream::stdout().write_all(ran.said.out.as_bytes())?;
    eprint!("{}", ran.said.err);
    Ok(ran.said.exit)
}
