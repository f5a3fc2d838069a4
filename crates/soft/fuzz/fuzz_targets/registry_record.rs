//! Registry records and entry names, as another user may write them: parsing
//! never panics; a parsed record re-emits to text that parses back equal, and
//! its file name parses back to the same object; a counters file (another
//! user's `hw-…` or `.hw_counters`) re-emits to text that parses back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmakit_soft::registry::counters;
use rdmakit_soft::registry::record::{parse_name, parse_record, Name};

fuzz_target!(|data: &[u8]| {
    let _ = parse_name(data);
    if let Ok(p) = counters::parse(data) {
        let text = p.values.emit(&p.folded);
        assert_eq!(counters::parse(text.as_bytes()), Ok(p), "{text:?}");
    }
    if let Ok(f) = parse_record(data) {
        let text = f.emit();
        assert_eq!(parse_record(text.as_bytes()), Ok(f), "{text:?}");
        assert_eq!(
            parse_name(f.file_name().as_bytes()),
            Name::Record(f.kind, f.ctx(), f.handle)
        );
        assert_eq!(
            parse_name(f.ctx().file_name().as_bytes()),
            Name::Context(f.ctx())
        );
    }
});
