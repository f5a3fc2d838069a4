//! A slow pair's cause by its counters: the real run with n1<->n5 shaped
//! (tests/data/pairwise/6ns-slow-pair-n1-n5-2.json, recorded before agents
//! reported counter deltas) with the deltas its two cells would carry set
//! here: CNPs and marks make the link "congested", retransmissions without
//! a CNP "lossy without ECN", anything else (or nothing) no cause.

use rdmakit_fleet::pairwise::cause::judge;
use rdmakit_fleet::pairwise::render::{human, output};
use rdmakit_fleet::pairwise::report::{Cause, Deltas, Fault, PairwiseReport, Phase};

fn load() -> PairwiseReport {
    let path = format!(
        "{}/tests/data/pairwise/6ns-slow-pair-n1-n5-2.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The run with the n1 -> n5 cell's counters set (`from`: n1's, `to`: n5's).
fn with(from: &[(&str, u64)], to: &[(&str, u64)]) -> PairwiseReport {
    let mut r = load();
    let c = r
        .cells
        .iter_mut()
        .find(|c| c.phase == Phase::Screen && c.from == "n1" && c.to == "n5")
        .unwrap();
    c.from_counters = Deltas::largest(from.iter().copied());
    c.to_counters = Deltas::largest(to.iter().copied());
    r.causes = r.causes();
    r
}

fn link() -> Fault {
    Fault::link("n1", "n5")
}

#[test]
fn the_recorded_run_has_no_counters_and_no_cause() {
    let r = load();
    assert_eq!(r.faults, [link()]);
    assert_eq!(r.cause(&link()), None);
    assert!(r.causes().is_empty());
    let json = output(&r, true);
    assert!(!json.contains("\"causes\""), "an empty list is left out");
    assert!(!human(&r).contains("congested"));
}

#[test]
fn cnps_and_marks_make_a_slow_pair_congested_not_a_bad_link() {
    let r = with(
        &[("rp_cnp_handled", 1_180), ("out_of_sequence", 3)],
        &[
            ("np_ecn_marked_roce_packets", 1_500),
            ("np_cnp_sent", 1_200),
        ],
    );
    let d = r.cause(&link()).unwrap();
    assert_eq!(d.cause, Cause::Congested);
    assert_eq!(
        d.evidence,
        [
            "n5 np_ecn_marked_roce_packets +1,500",
            "n5 np_cnp_sent +1,200",
            "n1 rp_cnp_handled +1,180"
        ]
    );
    let text = anstream::adapter::strip_str(&human(&r)).to_string();
    assert!(
        text.contains(
            "    congested: n5 np_ecn_marked_roce_packets +1,500, n5 np_cnp_sent +1,200, n1 \
             rp_cnp_handled +1,180 — switches on the path marked its packets"
        ),
        "{text}"
    );
    assert!(
        text.contains("between n1 and n5: congestion, not a bad link"),
        "{text}"
    );
    assert!(
        !text.contains("the cable and switch ports on that path"),
        "{text}"
    );
    // In the JSON, and read back.
    let v: serde_json::Value = serde_json::from_str(&output(&r, true)).unwrap();
    assert_eq!(v["causes"][0]["cause"], "congested");
    assert_eq!(v["causes"][0]["fault"]["nodes"][1], "n5");
    let back: PairwiseReport = serde_json::from_value(v).unwrap();
    assert_eq!(back.causes, r.causes);
}

#[test]
fn retransmissions_without_cnps_are_lossy_without_ecn() {
    // The soft NIC's own counter and mlx5's names at both ends.
    let r = with(
        &[
            ("retransmitted_packets", 1_245),
            ("local_ack_timeout_err", 3),
        ],
        &[("out_of_sequence", 15), ("rx_prio3_pause", 40)],
    );
    let d = r.cause(&link()).unwrap();
    assert_eq!(d.cause, Cause::LossyWithoutEcn);
    assert_eq!(
        d.evidence,
        [
            "n1 retransmitted_packets +1,245",
            "n5 out_of_sequence +15",
            "n1 local_ack_timeout_err +3"
        ]
    );
    // A saved run of a soft NIC that still used its own names reads the same.
    let old = with(&[("ack_timeouts", 3)], &[("seq_err_naks_received", 2)]);
    assert_eq!(old.cause(&link()).unwrap().cause, Cause::LossyWithoutEcn);
    let text = anstream::adapter::strip_str(&human(&r)).to_string();
    assert!(
        text.contains("    lossy without ECN: n1 retransmitted_packets +1,245"),
        "{text}"
    );
    assert!(
        text.contains("between n1 and n5: loss without congestion control"),
        "{text}"
    );
}

#[test]
fn pauses_alone_or_a_dismissed_pair_give_no_cause() {
    let r = with(&[("rx_prio3_pause_duration", 2_100_000)], &[]);
    assert_eq!(r.cause(&link()), None);
    // Counters of cells that are not the fault's are not its evidence.
    let mut r = load();
    let other = r
        .cells
        .iter_mut()
        .find(|c| c.phase == Phase::Screen && c.from == "n2" && c.to == "n3")
        .unwrap();
    other.to_counters = Deltas::largest([("np_cnp_sent", 99)]);
    assert_eq!(r.cause(&link()), None);
    assert_eq!(judge(&[]), None);
}
