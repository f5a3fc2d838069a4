//! The colours of the pairwise bandwidth map follow the run's judgement, not the
//! spread of its figures, on real runs (tests/data, see SOURCE): six namespaced
//! agents on the soft NIC with every link shaped to 3200 Mbit/s — healthy (cells
//! 314 to 375 MB/s, all green), one slow link (its two cells red, the rest
//! green) — and the noisy run with a slow node (its row and column red).

mod common;

use common::{assert_self_contained, data, for_snapshot, meta};
use rdmakit_fleet::pairwise::report::{PairwiseReport, Phase};

fn pairwise(name: &str) -> PairwiseReport {
    let text = std::fs::read_to_string(data(name)).expect("recorded run");
    serde_json::from_str(&text).expect("a pairwise report")
}

/// One cell of a heat map as the page writes it.
#[derive(Debug)]
struct Cell {
    from: String,
    to: String,
    band: String,
    fill: String,
    title: String,
}

/// Every cell of the plot `id`: its pair, its band, its fill, its tooltip.
fn cells(html: &str, id: &str) -> Vec<Cell> {
    let open = format!("<svg data-plot=\"{id}\"");
    let a = html.find(&open).unwrap_or_else(|| panic!("no plot {id}"));
    let svg = &html[a..a + html[a..].find("</svg>").expect("svg closes")];
    let attr = |tag: &str, name: &str| -> String {
        let k = format!(" {name}=\"");
        let i = tag.find(&k).unwrap_or_else(|| panic!("{name} in {tag}")) + k.len();
        tag[i..i + tag[i..].find('"').unwrap()].to_string()
    };
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find("<rect ") {
        let tail = &rest[i..];
        let end = tail.find('>').unwrap();
        let tag = &tail[..end];
        if tag.contains("data-band=") {
            let t = &tail[end..];
            let title = &t[t.find("<title>").unwrap() + 7..t.find("</title>").unwrap()];
            out.push(Cell {
                from: attr(tag, "data-from"),
                to: attr(tag, "data-to"),
                band: attr(tag, "data-band"),
                fill: attr(tag, "fill"),
                title: title.to_string(),
            });
        }
        rest = &tail[end..];
    }
    out
}

const GREEN: &str = "#66BD63";
const RED: &str = "#D73027";

fn screen_mbs(r: &PairwiseReport) -> Vec<f64> {
    r.cells
        .iter()
        .filter(|c| c.phase == Phase::Screen)
        .map(|c| c.mbs)
        .collect()
}

#[test]
fn healthy_namespace_fabric_is_green_whatever_its_spread() {
    let r = pairwise("6ns-3200mbit-healthy.json");
    assert!(r.clean(), "the recorded run found no fault");
    let mbs = screen_mbs(&r);
    let (lo, hi) = mbs
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), v| (a.min(*v), b.max(*v)));
    // A real spread: what a scale stretched over the run's range painted red.
    assert!(hi / lo > 1.15, "{lo} .. {hi}");
    let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
    assert_self_contained(&html);
    let bw = cells(&html, "pairwise-bandwidth");
    assert_eq!(bw.len(), 36);
    let measured: Vec<&Cell> = bw.iter().filter(|c| c.from != c.to).collect();
    assert_eq!(measured.len(), 30);
    for c in &measured {
        assert_eq!((c.band.as_str(), c.fill.as_str()), ("ok", GREEN), "{c:?}");
        assert!(c.title.ends_with("MB/s, in line with the fabric"), "{c:?}");
    }
    assert!(bw
        .iter()
        .filter(|c| c.from == c.to)
        .all(|c| c.band == "self"));
    // The legend says what the colours mean, with the run's own levels.
    let m = &r.matrix;
    for text in [
        format!("fabric median node score {:.0}", m.node_median_mbs),
        format!(
            "slow below {:.0} (0.60 × the median node score)",
            m.slow_below_mbs
        ),
        format!(
            "≥ {:.0}: in line with the fabric",
            (m.node_median_mbs + m.slow_below_mbs) / 2.0
        ),
        format!(
            "&lt; {:.0}: slow, or low for its two nodes",
            m.slow_below_mbs
        ),
    ] {
        assert!(html.contains(&text), "legend: {text}");
    }
    insta::assert_snapshot!(for_snapshot(&html));
}

#[test]
fn slow_link_two_cells_red_the_rest_green() {
    let r = pairwise("6ns-3200mbit-slow-link-n1-n5.json");
    assert_eq!(
        r.faults,
        vec![rdmakit_fleet::pairwise::report::Fault::Link {
            nodes: ["n1".into(), "n5".into()]
        }]
    );
    let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
    assert_self_contained(&html);
    for c in cells(&html, "pairwise-bandwidth")
        .iter()
        .filter(|c| c.from != c.to)
    {
        let link = (c.from == "n1" && c.to == "n5") || (c.from == "n5" && c.to == "n1");
        if link {
            assert_eq!((c.band.as_str(), c.fill.as_str()), ("slow", RED), "{c:?}");
            assert!(c.title.contains("slow: below the slow threshold"), "{c:?}");
        } else {
            assert_eq!((c.band.as_str(), c.fill.as_str()), ("ok", GREEN), "{c:?}");
        }
    }
    assert!(html.contains("framed: a fault the run reports"));
}

#[test]
fn slow_node_row_and_column_red() {
    let r = pairwise("6ns-slow-node-n3-9.json");
    let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
    let bw = cells(&html, "pairwise-bandwidth");
    let n3: Vec<&Cell> = bw
        .iter()
        .filter(|c| c.from != c.to && (c.from == "n3" || c.to == "n3"))
        .collect();
    assert_eq!(n3.len(), 10);
    assert!(
        n3.iter().all(|c| c.band == "slow" && c.fill == RED),
        "{n3:?}"
    );
    // Nothing else of this noisy run is below the slow threshold.
    assert!(bw
        .iter()
        .filter(|c| c.from != "n3" && c.to != "n3")
        .all(|c| c.band != "slow"));
}

/// A run without a reference level (most tests failed) colours nothing as a verdict.
#[test]
fn no_reference_level_no_verdict_colours() {
    let mut r = pairwise("6ns-3200mbit-healthy.json");
    r.inconclusive = Some("most bandwidth tests failed".into());
    let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
    let bw = cells(&html, "pairwise-bandwidth");
    assert!(bw
        .iter()
        .filter(|c| c.from != c.to)
        .all(|c| c.band == "unjudged"));
    assert!(html.contains("no reference level"));
}

/// Latency is not judged: its cells are shades of blue by their ratio to the
/// median, never the bandwidth map's red or green.
#[test]
fn latency_shaded_by_ratio_to_the_median_not_judged() {
    let r = pairwise("6ns-3200mbit-healthy.json");
    let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
    let lat = cells(&html, "pairwise-latency");
    let measured: Vec<&Cell> = lat.iter().filter(|c| c.from != c.to).collect();
    assert_eq!(measured.len(), 30);
    for c in &measured {
        assert_eq!(c.band, "latency");
        assert!(c.fill != GREEN && c.fill != RED, "{c:?}");
        assert!(c.title.contains("× the median"), "{c:?}");
    }
    assert!(html.contains("not judged"));
}

/// The recorded slow link with CNPs set in its n1 -> n5 cell: the verdict
/// says "congested" with the counters (crates/fleet/src/pairwise/cause.rs);
/// the run as recorded has no such line.
#[test]
fn a_congested_link_says_so_with_its_counters() {
    let mut r = pairwise("6ns-3200mbit-slow-link-n1-n5.json");
    let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
    assert!(!html.contains(">congested</span>"));
    let c = r
        .cells
        .iter_mut()
        .find(|c| c.phase == Phase::Screen && c.from == "n1" && c.to == "n5")
        .unwrap();
    c.to_counters = rdmakit_fleet::pairwise::report::Deltas::largest([("np_cnp_sent", 1_200)]);
    r.causes = r.causes();
    let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
    assert_self_contained(&html);
    assert!(
        html.contains("<span class=\"badge warning\">congested</span>n5 np_cnp_sent +1,200"),
        "{html}"
    );
}
