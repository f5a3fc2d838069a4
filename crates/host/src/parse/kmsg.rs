//! The kernel log, in whichever form it was captured:
//!
//! - `/dev/kmsg` records: `6,1234,5678123,-;mlx5_core 0000:3b:00.0: ...` (prefix =
//!   facility·8 + level, sequence number, µs since boot, flags; lines starting with a
//!   space after such a record are its `KEY=value` dictionary and are skipped;
//!   `\xNN` escapes in the text are decoded);
//! - `dmesg` text: `[    5.678123] text`, with `dmesg -r`'s `<6>` level prefix
//!   accepted; indented lines continue the previous record;
//! - syslog / journal lines: `Dec  2 13:39:00 host kernel: [ 5.6] text` → the text
//!   after `kernel: `, with the bracketed timestamp when present. Other lines are kept
//!   whole, without a timestamp.

use serde::{Deserialize, Serialize};

use super::lossy;
use super::sysfs::strip;

/// One kernel log message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KmsgRecord {
    /// Syslog level 0 (emerg) .. 7 (debug), when the format carries it.
    pub level: Option<u8>,
    /// `/dev/kmsg` sequence number.
    pub seq: Option<u64>,
    /// Microseconds since boot.
    pub ts_usec: Option<u64>,
    /// The message (several lines joined by `\n` for multi-line messages).
    pub text: String,
}

/// Parses a kernel log in any of the forms above. Empty lines are skipped; nothing
/// here fails.
pub fn kmsg(bytes: &[u8]) -> Vec<KmsgRecord> {
    let text = lossy(bytes);
    let mut records: Vec<KmsgRecord> = Vec::new();
    let mut last_was_kmsg = false;
    for line in text.lines() {
        let line = strip(line);
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if last_was_kmsg {
                continue; // a /dev/kmsg dictionary line (" SUBSYSTEM=pci")
            }
            if let Some(previous) = records.last_mut() {
                previous.text.push('\n');
                previous.text.push_str(line.trim());
                continue;
            }
        }
        if let Some(record) = kmsg_record(line) {
            records.push(record);
            last_was_kmsg = true;
            continue;
        }
        last_was_kmsg = false;
        records.push(text_record(line));
    }
    records
}

/// The record's time since boot in seconds.
pub fn ts_seconds(record: &KmsgRecord) -> Option<f64> {
    record.ts_usec.map(|us| us as f64 / 1e6)
}

/// `level,seq,usec,flags[,...];text`
fn kmsg_record(line: &str) -> Option<KmsgRecord> {
    let (prefix, text) = line.split_once(';')?;
    let mut fields = prefix.split(',');
    let prefix_value = number(fields.next()?)?;
    let seq = number(fields.next()?)?;
    let ts_usec = number(fields.next()?)?;
    if !prefix
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b",=+-_".contains(&b))
    {
        return None;
    }
    Some(KmsgRecord {
        level: u8::try_from(prefix_value & 7).ok(),
        seq: Some(seq),
        ts_usec: Some(ts_usec),
        text: unescape(text),
    })
}

/// A dmesg / syslog / journal line.
fn text_record(line: &str) -> KmsgRecord {
    let mut rest = line.trim_start();
    let mut level = None;
    // dmesg -r: "<6>[    5.678123] text"
    if let Some(after) = rest.strip_prefix('<') {
        if let Some((n, tail)) = after.split_once('>') {
            if let Some(value) = number(n) {
                level = u8::try_from(value & 7).ok();
                rest = tail;
            }
        }
    }
    let mut ts_usec = None;
    if let Some((ts, tail)) = bracket_timestamp(rest) {
        ts_usec = Some(ts);
        rest = tail;
        // journalctl -o short-monotonic: "[    5.678123] host kernel: text"
        let mut words = rest.split_whitespace();
        if let (Some(_host), Some("kernel:")) = (words.next(), words.next()) {
            if let Some((_, tail)) = rest.split_once(" kernel: ") {
                rest = tail;
            } else {
                rest = "";
            }
        }
    } else if let Some((_, tail)) = rest.split_once(" kernel: ") {
        // syslog: "Dec  2 13:39:00 host kernel: [    5.678123] text"
        rest = tail;
        if let Some((ts, tail)) = bracket_timestamp(rest) {
            ts_usec = Some(ts);
            rest = tail;
        }
    }
    KmsgRecord {
        level,
        seq: None,
        ts_usec,
        text: rest.trim().to_string(),
    }
}

/// `"[    5.678123] rest"` → (5678123, `"rest"`).
fn bracket_timestamp(s: &str) -> Option<(u64, &str)> {
    let inner_and_rest = s.trim_start().strip_prefix('[')?;
    let (inner, rest) = inner_and_rest.split_once(']')?;
    let (secs, frac) = inner.trim().split_once('.')?;
    let secs = number(secs)?;
    if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut micros: u64 = 0;
    for i in 0..6 {
        let digit = frac.as_bytes().get(i).map_or(0, |b| u64::from(b - b'0'));
        micros = micros * 10 + digit;
    }
    let usec = secs.checked_mul(1_000_000)?.checked_add(micros)?;
    Some((usec, rest))
}

fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Decodes /dev/kmsg's `\xNN` escapes (the kernel escapes control characters,
/// bytes ≥ 0x7f and backslashes that way).
fn unescape(s: &str) -> String {
    if !s.contains("\\x") {
        return s.to_string();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'\\' && bytes.get(i + 1) == Some(&b'x') {
            let hex = bytes
                .get(i + 2..i + 4)
                .and_then(|h| std::str::from_utf8(h).ok());
            if let Some(value) = hex
                .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(value);
                i += 4;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEALTHY_DMESG: &str = include_str!("testdata/healthy-dmesg.txt");

    #[test]
    fn healthy_dmesg_every_line_has_a_timestamp_or_continues_one() {
        let records = kmsg(HEALTHY_DMESG.as_bytes());
        assert!(records.iter().all(|r| r.ts_usec.is_some()));
        assert!(records.iter().all(|r| r.level.is_none() && r.seq.is_none()));
        let first = &records[0];
        assert_eq!(first.ts_usec, Some(0));
        assert!(first.text.starts_with("Linux version 6.1.0-57-amd64"));
        let loaded = records
            .iter()
            .find(|r| r.text == "rdma_rxe: loaded")
            .unwrap();
        assert_eq!(loaded.ts_usec, Some(12_244_528));
        assert_eq!(ts_seconds(loaded), Some(12.244528));
        let active = records
            .iter()
            .find(|r| r.text == "infiniband rxe0: set active")
            .unwrap();
        assert_eq!(active.ts_usec, Some(21_107_793));
        let speed = records
            .iter()
            .filter(|r| r.text == "eth0 speed is unknown, defaulting to 1000")
            .count();
        assert!(speed >= 10);
        // The 426 lines hold fewer records: the indented lines continue the one before.
        assert!(records.len() < 426);
        let clocksource = records
            .iter()
            .find(|r| r.text.contains("\"trace_clock=local\""))
            .unwrap();
        assert!(clocksource.text.contains('\n'));
    }

    #[test]
    fn dev_kmsg_records_and_dictionary() {
        let text = b"6,1234,5678123,-;mlx5_core 0000:3b:00.0: firmware version: 16.35.2000\n \
                     SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n\
                     3,1235,5678200,-,caller=T123;mlx5_core 0000:3b:00.0: DMA mapping error\\x0asecond line\n\
                     12,7,900,c;user message\n";
        let records = kmsg(text);
        assert_eq!(records.len(), 3);
        assert_eq!(
            records[0],
            KmsgRecord {
                level: Some(6),
                seq: Some(1234),
                ts_usec: Some(5_678_123),
                text: "mlx5_core 0000:3b:00.0: firmware version: 16.35.2000".into(),
            }
        );
        assert_eq!(records[1].level, Some(3));
        assert_eq!(
            records[1].text,
            "mlx5_core 0000:3b:00.0: DMA mapping error\nsecond line"
        );
        assert_eq!(records[2].level, Some(4)); // facility 1 (user), level 4
    }

    #[test]
    fn dmesg_raw_and_syslog_forms() {
        let text = b"<3>[   12.000001] mlx5_core 0000:3b:00.0: mlx5_health_check: health compromised\n\
                     Dec  2 13:39:00 host kernel: [    5.678123] mlx5_core 0000:3b:00.0 ens1f0: Link down\n\
                     Dec 02 13:39:01 host kernel: mlx5_core 0000:3b:00.0 ens1f0: Link up\n\
                     [    7.500000] host kernel: rxe0: from the journal\n\
                     Dec 02 13:39:02 host systemd[1]: Started foo.\n\
                     [drm] no timestamp here\n\
                     [Wed Dec  2 13:39:00 2026] dmesg -T form\n";
        let r = kmsg(text);
        assert_eq!(r.len(), 7);
        assert_eq!(r[0].level, Some(3));
        assert_eq!(r[0].ts_usec, Some(12_000_001));
        assert_eq!(r[1].ts_usec, Some(5_678_123));
        assert_eq!(r[1].text, "mlx5_core 0000:3b:00.0 ens1f0: Link down");
        assert_eq!(r[2].ts_usec, None);
        assert_eq!(r[2].text, "mlx5_core 0000:3b:00.0 ens1f0: Link up");
        assert_eq!(r[3].text, "rxe0: from the journal");
        assert_eq!(r[3].ts_usec, Some(7_500_000));
        assert_eq!(r[4].text, "Dec 02 13:39:02 host systemd[1]: Started foo.");
        assert_eq!(r[5].text, "[drm] no timestamp here");
        assert_eq!(r[6].ts_usec, None);
        assert_eq!(ts_seconds(&r[6]), None);
    }

    #[test]
    fn timestamps_with_short_and_long_fractions() {
        let r = kmsg(b"[5.6] a\n[1.1234567] b\n[18446744073709551615.000000] c\n");
        assert_eq!(r[0].ts_usec, Some(5_600_000));
        assert_eq!(r[1].ts_usec, Some(1_123_456));
        assert_eq!(r[2].ts_usec, None); // overflows: kept as text
        assert!(r[2].text.starts_with('['));
    }

    #[test]
    fn garbage_log_lines() {
        assert!(kmsg(b"").is_empty());
        let r = kmsg(b"\xff\xfe;;;\n  leading spaces first\n1,2;x\n<9999999999999999999999>y\n\\x\n6,1,2,-;bad \\xzz \\x4\n");
        assert_eq!(r.len(), 5);
        assert_eq!(r[4].text, "bad \\xzz \\x4");
    }
}
