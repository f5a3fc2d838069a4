//! `rdmakit fleet baseline INPUT... -o expected.json`.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use rdmakit_fleet::baseline::Expected;
use rdmakit_fleet::report::{FleetReport, Options};
use rdmakit_vocab::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Node reports of a fleet known to be right (the kinds `fleet report` reads).
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<String>,
    /// Where to write the expected inventory (`-` for stdout).
    #[arg(short, long, value_name = "FILE")]
    output: String,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let loaded = super::load(&a.inputs);
    let r = FleetReport::from_loaded(loaded, &Options::default());
    let exp = Expected::from_report(&super::tool(), &r);
    let text = exp.to_json() + "\n";
    if a.output == "-" {
        anstream::stdout().write_all(text.as_bytes())?;
    } else {
        std::fs::write(&a.output, &text).with_context(|| format!("writing {}", a.output))?;
    }
    let mut err = anstream::stderr();
    for line in exp.summary() {
        writeln!(err, "{line}")?;
    }
    for e in &r.errors {
        writeln!(err, "rdmakit: bad input: {}: {}", e.input, e.message)?;
    }
    if r.summary.exit_code == 2 {
        return Ok(Exit::Failed.into());
    }
    Ok(Exit::Ok.into())
}
