//! Print a capture the way `rdmakit pcap` does: `cargo run --example pcap_dump -- FILE [--json]`.

use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: pcap_dump FILE [--json]");
        std::process::exit(2);
    };
    let json = args.next().as_deref() == Some("--json");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    // Output errors (a closed pipe) end the program quietly.
    let mut out = std::io::stdout().lock();
    match rdmakit_wire::capture::decode_capture(&bytes) {
        Ok(report) if json => match serde_json::to_string_pretty(&report) {
            Ok(s) => {
                let _ = writeln!(out, "{s}");
            }
            Err(e) => eprintln!("{e}"),
        },
        Ok(report) => {
            let _ = write!(out, "{}", rdmakit_wire::capture::render_human(&report));
        }
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    }
}
