//! The soft NIC's device-wide counters as host facts: this host's registry
//! read ([`rdmakit_soft::registry::counters`]) and given to the live
//! [`LiveSource`] as its answer to [`Probe::SoftCounters`], so `rdmakit
//! collect` records them in bundles and `--from` / `--baseline` replay them
//! (the host crate cannot read the registry itself: it sits below the soft
//! NIC). The rules judge them as port 1 of the device
//! (`HostFacts::soft_devices`).
//!
//! What is read is bounded twice: the registry's reader takes from each
//! user's files only the known names, plain `u64`s, 4 KiB per file; here at
//! most [`soft::MAX_DEVICES`] devices are read, the configured one(s) first,
//! and only plain names ([`soft::plain_name`]) are passed on, so another
//! user's odd directory names can neither crowd out nor corrupt the answer.
//! The numbers are every user's own account of its use, summed, as `rdmakit
//! stat` shows them.
//!
//! [`Probe::SoftCounters`]: rdmakit_host::source::Probe::SoftCounters

use std::sync::Arc;

use rdmakit_host::parse::soft;
use rdmakit_host::source::LiveSource;
use rdmakit_soft::registry::counters::{self, DeviceCounters};

/// `live` answering [`rdmakit_host::source::Probe::SoftCounters`] from this
/// host's registry, the devices named `configured` read first.
pub fn with_registry(live: LiveSource, configured: Vec<String>) -> LiveSource {
    live.with_soft_counters(Arc::new(move || {
        answer(&read(&configured, rdmakit_soft::registry::device_names()))
    }))
}

/// The counters of the soft devices that published some: `configured`
/// first, then the registry's other `listed` names, at most
/// [`soft::MAX_DEVICES`] read.
fn read(configured: &[String], listed: Vec<String>) -> Vec<DeviceCounters> {
    let mut names: Vec<String> = Vec::new();
    for n in configured.iter().cloned().chain(listed) {
        if soft::plain_name(&n) && !names.contains(&n) && names.len() < soft::MAX_DEVICES {
            names.push(n);
        }
    }
    names
        .iter()
        .filter_map(|n| counters::read(n).ok())
        .filter(published)
        .collect()
}

/// Some user counted on the device: a context's file, or a total above 0.
fn published(c: &DeviceCounters) -> bool {
    c.users
        .iter()
        .any(|u| !u.contexts.is_empty() || u.total.any())
}

/// The probe's answer ([`soft::counters`] reads it back); None when no
/// device published counters.
fn answer(devices: &[DeviceCounters]) -> Option<String> {
    let text = soft::emit(
        devices
            .iter()
            .map(|d| (d.name.as_str(), d.total.named().collect())),
    );
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdmakit_soft::registry::counters::{UserCounters, Values, NAMES};

    #[test]
    fn the_answer_round_trips_through_the_host_parser() {
        let mut v = Values::default();
        v.0[0] = 10;
        v.0[9] = 3;
        let d = DeviceCounters {
            name: "soft0".into(),
            total: v,
            users: vec![UserCounters {
                uid: 1000,
                total: v,
                ..UserCounters::default()
            }],
            ignored: Vec::new(),
        };
        assert!(published(&d));
        let t = answer(std::slice::from_ref(&d)).unwrap();
        let parsed = soft::counters(&t).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].counters.len(), NAMES.len());
        assert_eq!(parsed[0].counters[9], ("np_cnp_sent".to_string(), 3));
        assert!(answer(&[]).is_none());
        assert!(!published(&DeviceCounters::default()));
    }
}
