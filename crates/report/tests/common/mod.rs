//! Test inputs: the doctor's pages from real captures (fixtures/) and from the PCI
//! bundle kept in tests/data, the perf pages from recorded runs, and the checks
//! every page must pass.
#![allow(dead_code)]

use std::path::PathBuf;

use rdmakit_doctor::checks::Config;
use rdmakit_doctor::report::Report;
use rdmakit_doctor::views::irq::IrqView;
use rdmakit_doctor::views::topology::TopologyView;
use rdmakit_host::bundle::Bundle;
use rdmakit_host::capture::import_capture;
use rdmakit_host::collect::collect;
use rdmakit_report::Meta;

pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

pub fn data(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")).join(name)
}

/// A capture directory of fixtures/ (real Soft-RoCE captures) as a bundle.
pub fn capture(name: &str) -> Bundle {
    let d = repo().join("fixtures").join(name);
    assert!(d.is_dir(), "the real capture {} is missing", d.display());
    import_capture(&d).expect("fixture imports")
}

pub fn bundle(name: &str) -> Bundle {
    let p = data(name);
    Bundle::read(p.to_str().expect("utf-8 path")).expect("bundle reads")
}

/// The doctor's report and views of a bundle, as `rdmakit doctor --from` makes them.
pub struct Doctor {
    pub report: Report,
    pub irq: IrqView,
    pub topology: TopologyView,
}

pub fn doctor(b: &Bundle, source: &str) -> Doctor {
    let facts = collect(b, &b.header.options.clone());
    let report = Report::build(&facts, &Config::default(), "rdmakit test", source);
    let irq = IrqView::build(&facts, &report);
    let topology = TopologyView::build(&facts, &report);
    Doctor {
        report,
        irq,
        topology,
    }
}

pub fn doctor_html(d: &Doctor) -> String {
    let page = rdmakit_report::doctor::DoctorPage {
        doctor: &d.report,
        irq: &d.irq,
        topology: &d.topology,
    };
    rdmakit_report::doctor::render(&page, &meta()).expect("renders")
}

pub fn meta() -> Meta {
    Meta {
        tool: Some("rdmakit test".into()),
        generated: None,
        command: None,
    }
}

/// A recorded `rdmakit perf --json` run from tests/data.
pub fn perf_run(name: &str) -> rdmakit_perf::Report {
    let text = std::fs::read_to_string(data(name)).expect("recorded run");
    serde_json::from_str(&text).expect("a perf report")
}

/// Everything a page must never contain: a reference to anything outside it.
/// Text may mention anything (it is escaped); markup may not fetch anything.
pub fn assert_self_contained(html: &str) {
    for bad in ["http://", "https://", "//"] {
        assert!(
            !html.contains(bad),
            "the page contains {bad:?} at {:?}",
            html.find(bad)
                .map(|i| &html[i.saturating_sub(60)..(i + 60).min(html.len())])
        );
    }
    let style = &html
        [html.find("<style>").expect("inline style")..html.find("</style>").expect("style ends")];
    for bad in ["url(", "@import", "@font-face"] {
        assert!(!style.contains(bad), "the stylesheet has {bad}");
    }
    // Every tag: no element that loads, no src, links only to anchors of the page.
    let mut rest = html;
    let mut scripts = 0;
    while let Some(i) = rest.find('<') {
        let tail = &rest[i..];
        let end = tail.find('>').expect("tags close");
        let tag = tail[..=end].to_ascii_lowercase();
        let name: String = tag[1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '/' || *c == '!')
            .collect();
        assert!(
            ![
                "img",
                "link",
                "iframe",
                "object",
                "embed",
                "base",
                "video",
                "audio",
                "source",
                "image",
                "use",
                "foreignobject"
            ]
            .contains(&name.as_str()),
            "element {tag}"
        );
        assert!(!tag.contains(" src=") && !tag.contains("url("), "tag {tag}");
        assert!(!tag.contains("xlink:href"), "tag {tag}");
        if let Some(h) = tag.find(" href=\"") {
            assert_eq!(&tag[h + 7..h + 8], "#", "tag {tag}");
        }
        if name == "script" {
            scripts += 1;
            assert_eq!(
                tag,
                "<script type=\"application/json\" id=\"rdmakit-data\">"
            );
            // Skip the data: browsers do not run it.
            let close = tail.find("</script>").expect("data ends");
            rest = &tail[close + 9..];
            continue;
        }
        rest = &tail[end + 1..];
    }
    assert_eq!(scripts, 1, "one data block, no other script");
}

/// The page as snapshots keep it: the stylesheet (the same in every page) and the
/// data block (one long JSON line, checked by the read-back tests) left out.
pub fn for_snapshot(html: &str) -> String {
    let mut out = html.to_string();
    if let (Some(a), Some(b)) = (out.find("<style>"), out.find("</style>")) {
        out.replace_range(a + 7..b, "(style.css)");
    }
    let open = "<script type=\"application/json\" id=\"rdmakit-data\">";
    if let Some(a) = out.find(open) {
        if let Some(b) = out[a..].find("</script>") {
            out.replace_range(a + open.len()..a + b, "(data)");
        }
    }
    out
}
