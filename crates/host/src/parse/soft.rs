//! The soft NIC's device-wide counters as [`crate::source::Probe::SoftCounters`]
//! answers them: one line "DEVICE NAME VALUE" per counter, every user's sum
//! from the soft NIC's registry (docs/soft-nic.md, "Device-wide counters").
//!
//! The registry's reader already bounds what it takes from other users' files;
//! this parser bounds the answer again, since a bundle holding it may come from
//! anywhere: at most [`MAX_BYTES`], [`MAX_DEVICES`] devices, plain device names
//! of at most [`MAX_NAME`] bytes, each of [`NAMES`] at most once per device, a
//! plain decimal `u64` each. Names it does not know are skipped (a newer
//! rdmakit may publish more). Pure; never panics.
//!
//! ```
//! use rdmakit_host::parse::soft;
//!
//! let d = soft::counters("soft0 np_cnp_sent 3\nsoft0 port_rcv_packets 900\n").unwrap();
//! assert_eq!(d[0].name, "soft0");
//! assert_eq!(d[0].counters[0], ("port_rcv_packets".to_string(), 900));
//! ```

use super::ParseError;

/// The counters the soft NIC publishes, in its order.
pub const NAMES: [&str; 12] = rdmakit_types::soft_counters::ALL;

/// Of [`NAMES`], those a real device has in a port's `counters/` (the rest
/// are `hw_counters/`).
pub const PORT_COUNTERS: [&str; 2] = rdmakit_types::soft_counters::PORT;

/// The most bytes an answer may have (16 devices of 12 counters is about 8 KiB).
pub const MAX_BYTES: usize = 16 << 10;

/// The most soft devices an answer may name.
pub const MAX_DEVICES: usize = 16;

/// The longest device name.
pub const MAX_NAME: usize = 64;

/// One soft device's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoftCounters {
    /// "soft0".
    pub name: String,
    /// `(name, value)` in [`NAMES`]' order; only the names the answer had.
    pub counters: Vec<(String, u64)>,
}

/// Whether `name` may name a soft device here: `[A-Za-z0-9_.-]`, not
/// starting with a dot, at most [`MAX_NAME`] bytes.
pub fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// Parses the answer, devices in the order they first appear.
///
/// # Errors
/// The answer is over [`MAX_BYTES`], names more than [`MAX_DEVICES`]
/// devices or a device name that is not plain, has a line that is not
/// three words, a known counter twice for one device, or a value that is
/// not a `u64`.
pub fn counters(text: &str) -> Result<Vec<SoftCounters>, ParseError> {
    if text.len() > MAX_BYTES {
        return Err(ParseError::new(
            "soft NIC counters of at most 16 KiB",
            &format!("{} bytes", text.len()),
        ));
    }
    let mut out: Vec<(String, [Option<u64>; NAMES.len()])> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let [dev, name, value] = w[..] else {
            return Err(ParseError::new(
                "soft NIC counter line DEVICE NAME VALUE",
                line,
            ));
        };
        if !plain_name(dev) {
            return Err(ParseError::new("soft NIC device name", dev));
        }
        let Some(i) = NAMES.iter().position(|n| *n == name) else {
            continue;
        };
        let v: u64 = value
            .parse()
            .map_err(|_| ParseError::new("soft NIC counter value (u64)", line))?;
        let slot = match out.iter().position(|(d, _)| d == dev) {
            Some(k) => k,
            None if out.len() < MAX_DEVICES => {
                out.push((dev.to_string(), [None; NAMES.len()]));
                out.len() - 1
            }
            None => {
                return Err(ParseError::new("at most 16 soft NIC devices", dev));
            }
        };
        let values = &mut out[slot].1;
        if values[i].replace(v).is_some() {
            return Err(ParseError::new("each soft NIC counter once", line));
        }
    }
    Ok(out
        .into_iter()
        .map(|(name, v)| SoftCounters {
            name,
            counters: NAMES
                .iter()
                .zip(v)
                .filter_map(|(n, v)| Some((n.to_string(), v?)))
                .collect(),
        })
        .collect())
}

/// The answer for `devices` (what the CLI's reader of the registry gives
/// [`crate::source::LiveSource::with_soft_counters`]): the inverse of
/// [`counters`] for plain names; others are left out.
pub fn emit<'a>(devices: impl IntoIterator<Item = (&'a str, Vec<(&'a str, u64)>)>) -> String {
    let mut s = String::new();
    for (dev, values) in devices.into_iter().filter(|(d, _)| plain_name(d)) {
        for (n, v) in values {
            s.push_str(&format!("{dev} {n} {v}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_and_parse_round_trip() {
        let t = emit([
            ("soft0", vec![("port_xmit_packets", 10), ("np_cnp_sent", 2)]),
            ("soft1", vec![("rp_cnp_handled", u64::MAX)]),
        ]);
        assert_eq!(
            t,
            "soft0 port_xmit_packets 10\nsoft0 np_cnp_sent 2\nsoft1 rp_cnp_handled \
             18446744073709551615\n"
        );
        let d = counters(&t).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(
            d[0].counters,
            vec![
                ("port_xmit_packets".to_string(), 10),
                ("np_cnp_sent".to_string(), 2)
            ]
        );
        assert_eq!(
            d[1].counters,
            vec![("rp_cnp_handled".to_string(), u64::MAX)]
        );
    }

    #[test]
    fn unknown_names_are_skipped_and_bad_answers_refused() {
        let d = counters("soft0 newer_counter 5\nsoft0 out_of_sequence 7\n").unwrap();
        assert_eq!(d[0].counters, vec![("out_of_sequence".to_string(), 7)]);
        assert!(counters("").unwrap().is_empty());
        for bad in [
            "soft0 out_of_sequence",
            "soft0 out_of_sequence -1",
            "soft0 out_of_sequence 18446744073709551616",
            "soft0 out_of_sequence 1\nsoft0 out_of_sequence 2",
            "../x out_of_sequence 1",
            ".hw out_of_sequence 1",
            "soft0 out_of_sequence 1 extra",
        ] {
            assert!(counters(bad).is_err(), "{bad:?} was accepted");
        }
        let many: String = (0..=MAX_DEVICES)
            .map(|i| format!("s{i} np_cnp_sent 1\n"))
            .collect();
        assert!(counters(&many).is_err());
        assert!(counters(&"x".repeat(MAX_BYTES + 1)).is_err());
        // A name that is not plain is never emitted.
        assert_eq!(emit([("a b", vec![("np_cnp_sent", 1)])]), "");
    }
}
