//! `rdmakit pcap`: decode RoCEv2 in a pcap/pcapng capture, check every ICRC, and
//! flag protocol anomalies.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;
use rdmakit_host::bounded::{read_named, Cap, ReadError};
use rdmakit_vocab::exit::Exit;
use rdmakit_wire::capture;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A pcap or pcapng file (tcpdump -w, tshark -w, Wireshark).
    file: String,
    /// Print the decoded packets and the summary as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> anyhow::Result<Exit> {
    // A regular file or a pipe (`<(tcpdump -w - ...)`), at most Cap::PCAP: the
    // decoder holds every packet's record (docs/pcap.md).
    let bytes = read_named(Path::new(&a.file), Cap::PCAP).map_err(|e| match e {
        ReadError::TooLarge { .. } => anyhow::anyhow!(
            "{e}: decode a part of it (editcap -c 100000 {} part.pcap, or tcpdump -c)",
            a.file
        ),
        e => e.into(),
    })?;
    let report = capture::decode_capture_with(&bytes, capture::MAX_PACKETS)
        .with_context(|| format!("decoding {}", a.file))?;
    let mut out = anstream::stdout();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        out.write_all(capture::render_human(&report).as_bytes())?;
    }
    // Like a health check: 1 when a packet failed its ICRC or the protocol
    // misbehaved; else 3 when the packet budget left frames undecoded.
    Ok(if report.icrc_invalid > 0 || !report.anomalies.is_empty() {
        Exit::Found
    } else if report.incomplete() {
        Exit::Incomplete
    } else {
        Exit::Ok
    })
}
