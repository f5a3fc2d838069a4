//! `rdmakit pcap`: decode RoCEv2 in a pcap/pcapng capture, check every ICRC, and
//! flag protocol anomalies.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use rdmakit_wire::capture;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A pcap or pcapng file (tcpdump -w, tshark -w, Wireshark).
    file: String,
    /// Print the decoded packets and the summary as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&a.file).with_context(|| format!("reading {}", a.file))?;
    let report = capture::decode_capture(&bytes).with_context(|| format!("decoding {}", a.file))?;
    let mut out = anstream::stdout();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        out.write_all(capture::render_human(&report).as_bytes())?;
    }
    // Like a health check: 1 when a packet failed its ICRC or the protocol misbehaved.
    Ok(if report.icrc_invalid > 0 || !report.anomalies.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
