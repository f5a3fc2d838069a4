//! The fleet and pairwise pages: snapshots of the HTML from deterministic inputs
//! (the fleet crate's test fleet of 22 nodes built from the real captures in
//! fixtures/, faults on five; two real pairwise runs kept in tests/data), nothing
//! referenced outside the file, the plots and the faults where they belong, and
//! the embedded data read back as the source JSON.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use common::{assert_self_contained, data, for_snapshot, meta};
use rdmakit_fleet::input::{self, LoadOptions};
use rdmakit_fleet::pairwise::report::PairwiseReport;
use rdmakit_fleet::report::{FleetReport, Options};
use rdmakit_report::embedded_json;
use rdmakit_testkit::fleet as fleet_fixture;

/// The test fleet's report (its files written once per test run) and its directory.
fn fleet() -> &'static (PathBuf, FleetReport) {
    static R: OnceLock<(PathBuf, FleetReport)> = OnceLock::new();
    R.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report_fleet");
        let _ = std::fs::remove_dir_all(&dir);
        let inputs = fleet_fixture::faulty_fleet(&dir);
        let loaded = input::load(&inputs, &LoadOptions::default());
        let opts = Options {
            tool: "rdmakit test".into(),
            ..Options::default()
        };
        (dir, FleetReport::from_loaded(loaded, &opts))
    })
}

fn fleet_html() -> String {
    rdmakit_report::fleet::render(&fleet().1, &meta()).expect("renders")
}

fn pairwise(name: &str) -> PairwiseReport {
    let text = std::fs::read_to_string(data(name)).expect("recorded run");
    serde_json::from_str(&text).expect("a pairwise report")
}

/// Whether an SVG holds `t` as the whole of a text element (as plotters writes it).
fn has_text(svg: &str, t: &str) -> bool {
    svg.contains(&format!(">\n{t}\n</text>"))
}

/// The `<svg data-plot="ID" ...>...</svg>` element of a page.
fn svg<'a>(html: &'a str, id: &str) -> &'a str {
    let open = format!("<svg data-plot=\"{id}\"");
    let a = html.find(&open).unwrap_or_else(|| panic!("no plot {id}"));
    let b = html[a..].find("</svg>").expect("svg closes");
    &html[a..a + b]
}

#[test]
fn fleet_page_attention_drift_and_outliers() {
    let (dir, r) = fleet();
    let html = fleet_html();
    assert_self_contained(&html);
    // The five faulty nodes, in the order of attention, before any cohort.
    let attention =
        &html[html.find("id=\"attention\"").unwrap()..html.find("id=\"cohorts\"").unwrap()];
    let mut at = Vec::new();
    for n in ["node03", "hpc03", "mlx4-02", "mlx4-04", "node07"] {
        let i = attention
            .find(&format!("<b>{n}</b>"))
            .unwrap_or_else(|| panic!("{n} not among the nodes needing attention"));
        at.push((i, n));
    }
    for n in ["node01", "hpc01", "mlx4-01"] {
        assert!(!attention.contains(&format!("<b>{n}</b>")), "{n}");
    }
    // Errors (node03 port down, hpc03 device gone) before warnings.
    let pos = |n: &str| at.iter().find(|x| x.1 == n).unwrap().0;
    assert!(pos("node03") < pos("mlx4-04") && pos("hpc03") < pos("node07"));
    // Every cohort has its section; mlx4's drift names the old firmware.
    for c in &r.cohorts {
        assert!(
            html.contains(&format!("id=\"cohort-{}\"", c.id)),
            "{}",
            c.id
        );
    }
    assert!(html.contains("fw_ver[mlx4_0]") && html.contains("2.30.8000"));
    // A dot plot per compared metric with values; the outliers red and named in theirs.
    assert!(!r.outliers.is_empty());
    for o in &r.outliers {
        let id = format!(
            "fleet-{}-{}",
            o.cohort,
            o.metric.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
        );
        let plot = svg(&html, &id);
        assert!(has_text(plot, &o.node), "{id}: {}", o.node);
        assert!(plot.contains("fill=\"#C62828\""), "{id}: no red dot");
    }
    let mlx4 = r
        .cohorts
        .iter()
        .find(|c| c.nodes.iter().any(|n| n == "mlx4-04"))
        .unwrap();
    let rate = svg(&html, &format!("fleet-{}-rate-gbps", mlx4.id));
    assert!(has_text(rate, "mlx4-04") && has_text(rate, "mlx4_0 port 2"));
    // A metric with no outlier draws no red.
    let rxe = r
        .cohorts
        .iter()
        .find(|c| c.nodes.iter().any(|n| n == "node01"))
        .unwrap();
    assert!(!svg(&html, &format!("fleet-{}-rate-gbps", rxe.id)).contains("#C62828"));
    insta::assert_snapshot!(fleet_fixture::scrub(&for_snapshot(&html), dir));
}

#[test]
fn fleet_data_reads_back_as_the_fleet_report() {
    let (_, r) = fleet();
    let html = fleet_html();
    let v = embedded_json(&html).unwrap();
    assert_eq!(v["kind"], "fleet");
    assert_eq!(v["data"]["schema"], "rdmakit.fleet/v1");
    assert_eq!(
        v["data"],
        serde_json::from_str::<serde_json::Value>(&rdmakit_fleet::render::json(r)).unwrap()
    );
    let back: FleetReport = serde_json::from_value(v["data"].clone()).unwrap();
    assert_eq!(&back, r);
    assert_eq!(fleet_html(), html, "same input, same bytes");
}

#[test]
fn fleet_page_of_nothing() {
    let r = rdmakit_fleet::report::analyze(vec![], vec![], vec![], &Options::default());
    let html = rdmakit_report::fleet::render(&r, &meta()).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("Every node (0) is ok.") && html.contains("no cohort"));
    // A pairwise run where no agent answered: no matrix, said so.
    let mut p = pairwise("6ns-slow-node-n3-9.json");
    p.nodes.clear();
    p.cells.clear();
    p.faults.clear();
    p.confirmations.clear();
    let html = rdmakit_report::pairwise::render(&p, &meta()).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("No agent answered: no matrix."));
    assert!(!html.contains("data-plot="));
}

#[test]
fn pairwise_slow_node_outlined() {
    let r = pairwise("6ns-slow-node-n3-9.json");
    let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("slow node") && html.contains("node n3: slow with"));
    let bw = svg(&html, "pairwise-bandwidth");
    // 6 × 6 cells, n3's row and column outlined: two thick dark frames.
    assert_eq!(
        bw.matches("stroke=\"#1D2430\" stroke-width=\"4\"").count(),
        2
    );
    for n in ["n1", "n2", "n3", "n4", "n5", "n6"] {
        assert!(has_text(bw, n), "{n}");
    }
    let lat = svg(&html, "pairwise-latency");
    assert!(lat.contains("usec"));
    insta::assert_snapshot!(for_snapshot(&html));
}

#[test]
fn pairwise_slow_link_outlined() {
    let r = pairwise("6ns-slow-pair-n1-n5-2.json");
    let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("link n1 ↔ n5"));
    // The two cells n1 → n5 and n5 → n1 outlined, nothing else.
    let bw = svg(&html, "pairwise-bandwidth");
    assert_eq!(
        bw.matches("stroke=\"#1D2430\" stroke-width=\"4\"").count(),
        2
    );
    // Both cells carry their figure from the run.
    for c in r
        .cells
        .iter()
        .filter(|c| c.phase == rdmakit_fleet::pairwise::report::Phase::Screen)
        .filter(|c| (c.from == "n1" && c.to == "n5") || (c.from == "n5" && c.to == "n1"))
    {
        assert!(has_text(bw, &format!("{:.0}", c.mbs)), "{c:?}");
    }
    // Dismissed suspects are listed as such.
    assert!(html.contains("dismissed (noise)"));
    insta::assert_snapshot!(for_snapshot(&html));
}

#[test]
fn pairwise_data_reads_back_as_the_run() {
    for name in ["6ns-slow-node-n3-9.json", "6ns-slow-pair-n1-n5-2.json"] {
        let r = pairwise(name);
        let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
        let v = embedded_json(&html).unwrap();
        assert_eq!(v["kind"], "pairwise");
        assert_eq!(v["data"]["schema"], "rdmakit.pairwise/v1");
        let back: PairwiseReport = serde_json::from_value(v["data"].clone()).unwrap();
        assert_eq!(back, r, "{name}");
    }
}

/// Node names and errors that hold markup and URLs still give pages that reference
/// nothing (the names end up in SVG text too).
#[test]
fn hostile_names_reference_nothing() {
    let mut r = pairwise("6ns-slow-pair-n1-n5-2.json");
    let evil = "<script>x</script>//cdn.example/a";
    for c in &mut r.cells {
        if c.from == "n2" {
            c.from = evil.into();
        }
        if c.to == "n2" {
            c.to = evil.into();
        }
    }
    r.nodes[1].name = evil.into();
    r.nodes[1].addr = "http://10.0.0.2:18516".into();
    r.unreachable
        .push(rdmakit_fleet::pairwise::report::Unreachable {
            agent: "https://x//y".into(),
            error: "<img src=//q>".into(),
        });
    let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
    assert_self_contained(&html);
    let back: PairwiseReport =
        serde_json::from_value(embedded_json(&html).unwrap()["data"].clone()).unwrap();
    assert_eq!(back, r);
}

/// A large fabric: 40 nodes (the recorded run's six, repeated under new names) draw
/// a matrix of 40 × 40 cells with the names written upwards, and the page stays
/// self-contained.
#[test]
fn pairwise_large_matrix() {
    let base = pairwise("6ns-slow-node-n3-9.json");
    let mut r = base.clone();
    r.nodes.clear();
    r.cells.clear();
    for k in 0..40 {
        let mut n = base.nodes[k % 6].clone();
        n.name = format!("gpu-node-{k:03}");
        r.nodes.push(n);
    }
    for (i, a) in r.nodes.clone().iter().enumerate() {
        for (j, b) in r.nodes.clone().iter().enumerate() {
            if i != j {
                let mut c = base.cells[(i * 40 + j) % base.cells.len()].clone();
                c.from = a.name.clone();
                c.to = b.name.clone();
                c.phase = rdmakit_fleet::pairwise::report::Phase::Screen;
                r.cells.push(c);
            }
        }
    }
    r.faults = vec![rdmakit_fleet::pairwise::report::Fault::node("gpu-node-007")];
    let html = rdmakit_report::pairwise::render(&r, &meta()).unwrap();
    assert_self_contained(&html);
    let bw = svg(&html, "pairwise-bandwidth");
    assert!(
        bw.contains("rotate(270") || bw.contains("rotate(-90"),
        "names upright"
    );
    // Cells too small for their figures: colors only, every cell drawn.
    assert!(bw.matches("<rect").count() >= 40 * 40);
    assert_eq!(
        bw.matches("stroke=\"#1D2430\" stroke-width=\"4\"").count(),
        2
    );
}
