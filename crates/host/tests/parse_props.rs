//! Property tests for `rdmakit_host::parse`: no parser panics on any input, and the
//! values that have a printed form read back the same (cpu lists, rates, states).
//! The fuzz target in `crates/host/fuzz` drives the same entry points with
//! coverage guidance.

use proptest::prelude::*;
use rdmakit_host::parse::{sysfs, ParseError, ERROR_VALUE_MAX_CHARS};

#[path = "support/every_parser.rs"]
mod every_parser;
use every_parser::{all_byte_parsers, all_str_parsers};

/// Strings made of the characters sysfs and procfs values are made of, so the
/// parsers get past their first check more often than with uniform noise.
fn sysfs_like() -> impl Strategy<Value = String> {
    proptest::string::string_regex(
        "[0-9a-fA-FxX:.,;/ ()\\-\\[\\]<>=#\n\t]{0,40}|[0-9]{1,3}: [A-Za-z_ ]{0,12}|[0-9.]{1,6} G[bB]/sec( \\([0-9]{1,3}X( [A-Z0-9]{0,6})?\\))?",
    )
    .expect("valid regex")
}

/// Lines that look like /proc/interrupts, /proc/modules, kmsg and dpkg lines.
fn proc_like_text() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        "[ ]{0,3}[0-9]{1,3}:( +[0-9]{1,6}){0,4} +[A-Za-z-]{0,12}( +[0-9]{0,6}-?[a-z]{0,7})? +[a-z0-9_@:.,]{0,20}",
        "[A-Z]{3}:( +[0-9]{1,4}){0,3} [A-Za-z ]{0,20}",
        "[a-z_]{1,10} [0-9]{1,7} [0-9-]{1,2} [a-z_,-]{0,20} (Live|Loading)? 0x[0-9a-f]{0,16}",
        "[0-9]{1,2},[0-9]{1,5},[0-9]{1,9},[-c+];[ -~]{0,30}",
        "( |<[0-9]>)?\\[ *[0-9]{1,5}\\.[0-9]{0,7}\\] [ -~]{0,30}",
        "(Package|Version|Status|Architecture): [ -~]{0,20}",
        "Max [a-z ]{1,15} +([0-9]{1,8}|unlimited) +([0-9]{1,8}|unlimited) +[a-z]{0,6}",
        "(# )?CONFIG_[A-Z_]{1,10}(=[ym]| is not set)",
        "[ -~]{0,40}",
    ];
    (
        prop_oneof![
            Just("           CPU0       CPU1\n".to_string()),
            Just(String::new())
        ],
        proptest::collection::vec(line, 0..12),
    )
        .prop_map(|(header, lines)| header + &lines.join("\n"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_parser_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        all_byte_parsers(&bytes);
    }

    #[test]
    fn no_parser_panics_on_arbitrary_strings(s in ".{0,64}") {
        all_str_parsers(&s);
        all_byte_parsers(s.as_bytes());
    }

    #[test]
    fn no_parser_panics_on_sysfs_like_values(s in sysfs_like()) {
        all_str_parsers(&s);
    }

    #[test]
    fn no_parser_panics_on_proc_like_files(s in proc_like_text()) {
        all_byte_parsers(s.as_bytes());
    }

    #[test]
    fn cpulist_display_round_trips(cpus in proptest::collection::vec(0u32..=sysfs::MAX_CPU, 0..64)) {
        let set = sysfs::CpuSet::new(cpus.clone());
        let printed = set.to_string();
        let parsed = sysfs::cpulist(&format!("{printed}\n")).unwrap();
        prop_assert_eq!(&parsed, &set);
        for cpu in cpus {
            prop_assert!(parsed.contains(cpu));
        }
        prop_assert!(parsed.0.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn cpumask_agrees_with_cpulist(words in proptest::collection::vec(any::<u32>(), 1..6)) {
        let mask = words.iter().map(|w| format!("{w:08x}")).collect::<Vec<_>>().join(",");
        let set = sysfs::cpumask(&mask).unwrap();
        let expected: usize = words.iter().map(|w| w.count_ones() as usize).sum();
        prop_assert_eq!(set.len(), expected);
        prop_assert_eq!(sysfs::cpulist(&set.to_string()).unwrap(), set);
    }

    #[test]
    fn rate_round_trips_its_printed_form(tenths in 0u32..100_000, width in 1u8..=32, speed in "[A-Z][A-Z0-9]{1,5}") {
        let gbps = f64::from(tenths) / 10.0;
        let text = format!("{gbps} Gb/sec ({width}X {speed})\n");
        let rate = sysfs::rate(&text).unwrap();
        prop_assert_eq!(rate.gbps, gbps);
        prop_assert_eq!(rate.width, Some(width));
        prop_assert_eq!(rate.speed.as_deref(), Some(speed.as_str()));
        prop_assert_eq!(rate.raw, text.trim_end());
    }

    #[test]
    fn port_state_round_trips(code in any::<u8>(), name in "[A-Za-z_]{1,12}( [A-Za-z]{1,6})?") {
        let state = sysfs::port_state(&format!("{code}: {name}\n")).unwrap();
        prop_assert_eq!(state.code, code);
        prop_assert_eq!(state.name, name);
    }

    #[test]
    fn guid_round_trips(value in any::<u64>()) {
        let text = format!(
            "{:04x}:{:04x}:{:04x}:{:04x}\n",
            value >> 48, (value >> 32) & 0xffff, (value >> 16) & 0xffff, value & 0xffff
        );
        prop_assert_eq!(sysfs::guid(&text).unwrap(), value);
    }

    #[test]
    fn counters_round_trip(value in any::<u64>()) {
        prop_assert_eq!(sysfs::counter(&format!("{value}\n")).unwrap(), sysfs::Counter::Value(value));
        prop_assert_eq!(sysfs::u64_value(&format!("{value:#x}")).unwrap(), value);
    }

    #[test]
    fn parse_errors_keep_at_most_80_chars(s in ".{0,300}") {
        let err = ParseError::new("x", &s);
        prop_assert!(err.value.chars().count() <= ERROR_VALUE_MAX_CHARS);
        prop_assert!(s.starts_with(&err.value));
    }
}

#[test]
fn real_fixture_files_parse_without_panicking() {
    // Every regular file of the shared fixtures, fed to every parser: the trees are
    // real kernel output, so this is the regression corpus the fuzzer starts from.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");
    let mut stack = vec![std::path::PathBuf::from(root)];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() && meta.len() <= 64 * 1024 {
                if let Ok(bytes) = std::fs::read(&path) {
                    all_byte_parsers(&bytes);
                    files += 1;
                }
            }
        }
    }
    // shared/ may not be beside the checkout (the unit tests carry copies of the
    // files they need); when it is, it must have been walked.
    if std::path::Path::new(root).is_dir() {
        assert!(
            files > 1000,
            "only {files} fixture files found under {root}"
        );
    }
}
