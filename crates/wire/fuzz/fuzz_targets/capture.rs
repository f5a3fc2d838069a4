//! pcap / pcapng files: decoding and rendering never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmakit_wire::capture;

fuzz_target!(|data: &[u8]| {
    if let Ok(report) = capture::decode_capture(data) {
        let _ = capture::render_human(&report);
    }
});
