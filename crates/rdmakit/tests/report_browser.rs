//! The HTML reports in a real browser: Debian's headless Chromium opens each
//! report `rdmakit` writes (`doctor --from` the PCI bundle and gpud's H100 node,
//! `doctor` on this live host with its probes, `perf -a` sweeps run here over the
//! soft NIC on loopback, `fleet report` on the fleet crate's test fleet of 22
//! nodes built from the real captures, `fleet pairwise --from` recorded runs — a
//! healthy fabric, a slow link, a slow node — and a live `fleet pairwise` of three
//! agents on loopback) and must show its plots (in the DOM, drawn with a size),
//! make no request but the file itself, log no console error or exception, and
//! give a screenshot that is not blank. A control page proves the checks can fail.
//!
//! What the DOM must say besides: gpud-h100's eight alike ports are one finding
//! card (one card per group of the doctor's JSON, its subjects behind a
//! `<details>` that opens without script); the live page names the soft NIC it
//! probed as rdmakit's, not a host device; every bandwidth cell of the healthy
//! fabric is green, the slow link's two cells red, the slow node's row and
//! column red.
//!
//! The fabric page (`fabric check --html`, `fabric discover --html`) is opened
//! from a live ibsim fat tree with one cable unplugged and one port counting
//! symbol errors: both faults framed in the DOM and listed beside the picture.
//!
//! The screenshots land in target/report-screenshots/; with
//! RDMAKIT_UPDATE_SCREENSHOTS=1 also in docs/img/ (docs/report.md shows them).
//!
//! Without chromium the test says so and skips, unless RDMAKIT_REQUIRE_CHROMIUM is
//! set (scripts/test sets it and installs the package), in which case it fails.

mod common;

mod browser;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use browser::{chromium, png_stats, Browser};
use common::*;
use rdmakit_testkit::fleet as fleet_fixture;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rdmakit");

fn chromium_or_skip() -> Option<PathBuf> {
    match chromium() {
        Ok(p) => Some(p),
        Err(msg) => {
            if std::env::var_os("RDMAKIT_REQUIRE_CHROMIUM").is_some_and(|v| !v.is_empty()) {
                panic!("{msg}, and RDMAKIT_REQUIRE_CHROMIUM is set");
            }
            eprintln!("SKIPPED: {msg}");
            None
        }
    }
}

/// A soft NIC registry of the test's own, so the live doctor sees no other test's
/// (or helper's) leaked objects.
fn registry() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

fn run(args: &[&str]) {
    let out = Command::new(BIN)
        .args(args)
        .env("RDMAKIT_SOFT_REGISTRY_DIR", registry())
        .output()
        .unwrap();
    // doctor exits 1 when it finds an error (this host has no RDMA kernel): still a report.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "rdmakit {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A real `rdmakit perf` run on loopback: server and client, the client writes the HTML.
fn perf(test: &str, args: &[&str], html: &Path) {
    let port = free_port().to_string();
    let mut server = Command::new(BIN)
        .args(["perf", test, "-p", &port])
        .env("RDMAKIT_SOFT_REGISTRY_DIR", registry())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut a = vec!["perf", test, "127.0.0.1", "-p", &port, "--html"];
    let h = html.to_str().unwrap();
    a.push(h);
    a.extend_from_slice(args);
    let out = Command::new(BIN)
        .args(&a)
        .env("RDMAKIT_SOFT_REGISTRY_DIR", registry())
        .output()
        .unwrap();
    let t = Instant::now();
    while server.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "rdmakit {a:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

const TOKEN: &str = "browser-test-token-0123456789abcdef";

/// A fleet agent on a loopback address of its own, killed on drop.
fn agent(k: u8, name: &str) -> (Agent, String) {
    fleet_agent(
        100,
        k,
        name,
        TOKEN,
        &[("RDMAKIT_SOFT_REGISTRY_DIR", registry().as_os_str())],
    )
}

/// `rdmakit ARGS` that writes a page; `codes` are the exit statuses it may give.
fn run_codes(args: &[&str], env: &[(&str, &str)], codes: &[i32]) {
    let out = Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .env("RDMAKIT_SOFT_REGISTRY_DIR", registry())
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| codes.contains(&c)),
        "rdmakit {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

struct Case<'a> {
    name: &'static str,
    file: PathBuf,
    kind: &'static str,
    plots: &'a [&'a str],
    /// Screenshots: (file name suffix, the element they start at).
    shots: &'a [(&'a str, &'a str)],
}

/// Console errors, exceptions, error log entries and requests other than `url`
/// among `events`.
fn problems(events: &[Value], url: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in events {
        let p = &e["params"];
        match e["method"].as_str().unwrap_or("") {
            "Runtime.consoleAPICalled"
                if matches!(p["type"].as_str(), Some("error" | "assert" | "warning")) =>
            {
                out.push(format!("console.{}: {}", p["type"], p["args"]));
            }
            "Runtime.exceptionThrown" => out.push(format!("exception: {}", p["exceptionDetails"])),
            "Log.entryAdded"
                if matches!(p["entry"]["level"].as_str(), Some("error" | "warning")) =>
            {
                out.push(format!(
                    "log {}: {}",
                    p["entry"]["level"], p["entry"]["text"]
                ));
            }
            "Network.requestWillBeSent" if p["request"]["url"] != url => {
                out.push(format!("request: {}", p["request"]["url"]));
            }
            "Network.loadingFailed" => out.push(format!("loading failed: {p}")),
            _ => {}
        }
    }
    out
}

/// Opens `file`, returns (events it caused, the screenshot's PNG bytes).
fn open(b: &mut Browser, file: &Path) -> (Vec<Value>, String) {
    let url = format!("file://{}", file.canonicalize().unwrap().display());
    let from = b.events.len();
    b.call("Page.navigate", json!({ "url": url }));
    b.wait_event("Page.loadEventFired", from, Duration::from_secs(60));
    (b.events[from..].to_vec(), url)
}

/// A 1280x1000 region from the top of the element `selector` (0.6 scale).
fn screenshot(b: &mut Browser, selector: &str) -> Vec<u8> {
    let top = b
        .eval(&format!(
            "(() => {{ const s = document.querySelector('{selector}'); \
             return s ? Math.max(0, s.getBoundingClientRect().top + window.scrollY - 8) : -1; }})()"
        ))
        .as_f64()
        .unwrap_or(-1.0);
    assert!(top >= 0.0, "no {selector} in the page");
    let r = b.call(
        "Page.captureScreenshot",
        json!({
            "format": "png",
            "captureBeyondViewport": true,
            "clip": { "x": 0, "y": top, "width": 1280, "height": 1000, "scale": 0.6 }
        }),
    );
    base64::engine::general_purpose::STANDARD
        .decode(r["data"].as_str().expect("screenshot data"))
        .expect("base64 PNG")
}

#[test]
fn reports_render_in_chromium() {
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pci = repo().join("crates/report/tests/data/mlx5-pci.json.gz");
    let doctor = d.join("doctor.html");
    run(&[
        "doctor",
        "--from",
        pci.to_str().unwrap(),
        "--html",
        doctor.to_str().unwrap(),
    ]);
    let h100 = d.join("doctor-h100.html");
    let gpud = repo().join("fixtures/gpud-h100");
    assert!(
        gpud.is_dir(),
        "the real capture {} is missing",
        gpud.display()
    );
    run(&[
        "doctor",
        "--from",
        gpud.to_str().unwrap(),
        "--html",
        h100.to_str().unwrap(),
    ]);
    let live = d.join("doctor-live.html");
    run(&["doctor", "--html", live.to_str().unwrap()]);
    let bw = d.join("perf-write-bw.html");
    perf("write-bw", &["-a", "-s", "262144", "-n", "200"], &bw);
    let lat = d.join("perf-send-lat.html");
    perf("send-lat", &["-a", "-s", "8192", "-n", "300"], &lat);
    // The fleet: five faulty nodes, two unreadable inputs (exit 2, still a report).
    let fleet = d.join("fleet.html");
    let mut a = vec!["fleet".to_string(), "report".into()];
    a.extend(fleet_fixture::faulty_fleet(&d.join("fleet")));
    a.extend(["--html".into(), fleet.display().to_string()]);
    run_codes(&a.iter().map(String::as_str).collect::<Vec<_>>(), &[], &[2]);
    // Recorded runs rendered again (healthy: exit 0; a fault: exit 1), and a live one.
    let data = repo().join("crates/report/tests/data");
    let mut recorded = Vec::new();
    for (name, run, code) in [
        ("pairwise-healthy", "6ns-3200mbit-healthy.json", 0),
        ("pairwise-link", "6ns-3200mbit-slow-link-n1-n5.json", 1),
        ("pairwise-node", "6ns-slow-node-n3-9.json", 1),
    ] {
        let f = d.join(format!("{name}.html"));
        let run = data.join(run);
        run_codes(
            &[
                "fleet",
                "pairwise",
                "--from",
                run.to_str().unwrap(),
                "--html",
                f.to_str().unwrap(),
            ],
            &[],
            &[code],
        );
        recorded.push(f);
    }
    let live_pairwise = {
        let agents: Vec<(Agent, String)> = ["alpha", "beta", "gamma"]
            .iter()
            .enumerate()
            .map(|(i, n)| agent(i as u8 + 1, n))
            .collect();
        let list: Vec<&str> = agents.iter().map(|a| a.1.as_str()).collect();
        let f = d.join("pairwise-live.html");
        // A loaded machine may call a pair slow: exit 0 or 1, a page either way.
        let mut args = pairwise_args(&list.join(","), "0.2", "0.05");
        args.extend(["--html".into(), f.display().to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_codes(&args, &[("RDMAKIT_FLEET_TOKEN", TOKEN)], &[0, 1]);
        f
    };
    let mlx4_cohort = {
        let v = rdmakit_report::embedded_json(&std::fs::read_to_string(&fleet).unwrap()).unwrap();
        let c = v["data"]["cohorts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| {
                c["nodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|n| n == "mlx4-04")
            })
            .expect("the mlx4 cohort")["id"]
            .as_str()
            .unwrap()
            .to_string();
        c
    };
    let mlx4_plot = format!("fleet-{mlx4_cohort}-rate-gbps");
    let mlx4_section = format!("#cohort-{mlx4_cohort}");
    let fleet_plots = [mlx4_plot.as_str()];
    let fleet_shots = [("", "#attention"), ("-cohort", mlx4_section.as_str())];
    let [healthy, link, node] = <[PathBuf; 3]>::try_from(recorded).unwrap();
    let cases = [
        Case {
            name: "doctor",
            file: doctor,
            kind: "doctor",
            plots: &["irq-0", "topology-0", "topology-1"],
            shots: &[
                ("", "#checklist"),
                ("-irqs", "#irqs"),
                ("-topology", "#topology"),
            ],
        },
        Case {
            name: "doctor-h100",
            file: h100,
            kind: "doctor",
            plots: &[],
            shots: &[("", "#findings")],
        },
        Case {
            name: "doctor-live",
            file: live,
            kind: "doctor",
            plots: &[],
            shots: &[("", "#summary")],
        },
        Case {
            name: "perf-write-bw",
            file: bw,
            kind: "perf",
            plots: &["perf-0-bandwidth", "perf-0-msgrate"],
            shots: &[("", "#run-0")],
        },
        Case {
            name: "perf-send-lat",
            file: lat,
            kind: "perf",
            plots: &["perf-0-latency"],
            shots: &[("", "#run-0")],
        },
        Case {
            name: "fleet",
            file: fleet,
            kind: "fleet",
            plots: &fleet_plots,
            shots: &fleet_shots,
        },
        Case {
            name: "pairwise-healthy",
            file: healthy,
            kind: "pairwise",
            plots: &["pairwise-bandwidth", "pairwise-latency"],
            shots: &[("", "#verdict")],
        },
        Case {
            name: "pairwise-link",
            file: link,
            kind: "pairwise",
            plots: &["pairwise-bandwidth", "pairwise-latency"],
            shots: &[("", "#verdict")],
        },
        Case {
            name: "pairwise-node",
            file: node,
            kind: "pairwise",
            plots: &["pairwise-bandwidth", "pairwise-latency"],
            shots: &[("", "#verdict")],
        },
        Case {
            name: "pairwise-live",
            file: live_pairwise,
            kind: "pairwise",
            plots: &["pairwise-bandwidth", "pairwise-latency"],
            shots: &[("", "#verdict")],
        },
    ];

    let mut b = Browser::start(&bin);

    // The control: a page that logs an error and fetches something must be caught.
    let control = d.join("control.html");
    std::fs::write(
        &control,
        "<!DOCTYPE html><html><body><p>control</p><script>console.error('control error')</script>\
         <img src=\"http://127.0.0.1:9/x.png\"></body></html>",
    )
    .unwrap();
    let (ev, url) = open(&mut b, &control);
    let _ = b.eval("1");
    let found = problems(&ev, &url);
    assert!(
        found.iter().any(|p| p.contains("control error"))
            && found.iter().any(|p| p.contains("request:")),
        "the control page's error and request were not seen: {found:?}"
    );

    let shots = repo().join("target/report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let update = std::env::var_os("RDMAKIT_UPDATE_SCREENSHOTS").is_some_and(|v| !v.is_empty());
    for c in &cases {
        let (_, url) = open(&mut b, &c.file);
        let info = b.eval(
            "JSON.stringify({ plots: [...document.querySelectorAll('svg[data-plot]')].map(s => { \
               const r = s.getBoundingClientRect(); \
               return [s.dataset.plot, r.width, r.height, s.querySelectorAll('*').length]; }), \
             kind: JSON.parse(document.getElementById('rdmakit-data').textContent).kind, \
             sections: document.querySelectorAll('section').length, \
             title: document.title })",
        );
        let info: Value = serde_json::from_str(info.as_str().unwrap()).unwrap();
        assert_eq!(info["kind"], c.kind, "{}: {info}", c.name);
        let plots = info["plots"].as_array().unwrap();
        for want in c.plots {
            let p = plots
                .iter()
                .find(|p| p[0] == *want)
                .unwrap_or_else(|| panic!("{}: plot {want} not in the DOM: {info}", c.name));
            assert!(
                p[1].as_f64().unwrap() > 200.0 && p[2].as_f64().unwrap() > 100.0,
                "{}: plot {want} has no size: {p}",
                c.name
            );
            assert!(
                p[3].as_u64().unwrap() > 20,
                "{}: plot {want} is empty: {p}",
                c.name
            );
        }
        dom_checks(&mut b, c.name);
        let mut sizes = Vec::new();
        for (suffix, selector) in c.shots {
            let png = screenshot(&mut b, selector);
            let (w, h, mean, sd, ink) = png_stats(&png);
            assert!(w >= 700 && h >= 500, "{}: screenshot {w}x{h}", c.name);
            assert!(
                sd > 12.0 && ink > 0.03 && mean < 253.0,
                "{}{suffix}: the screenshot looks blank (mean {mean:.1}, sd {sd:.1}, ink {ink:.3})",
                c.name
            );
            let file = format!("report-{}{suffix}.png", c.name);
            std::fs::write(shots.join(&file), &png).unwrap();
            if update {
                std::fs::write(repo().join("docs/img").join(&file), &png).unwrap();
            }
            sizes.push(format!(
                "{file} {w}x{h} (luminance mean {mean:.1}, sd {sd:.1}, ink {:.1} %)",
                ink * 100.0
            ));
        }
        // Every event of this page, now that the screenshot has flushed them.
        let from = b
            .events
            .iter()
            .rposition(|e| e["method"] == "Page.frameStartedLoading")
            .unwrap_or(0);
        let found = problems(&b.events[from..], &url);
        assert!(found.is_empty(), "{}: {found:?}", c.name);
        eprintln!(
            "{}: {} plots, {} sections; {}",
            c.name,
            plots.len(),
            info["sections"],
            sizes.join("; ")
        );
    }
}

/// The fabric page of a live simulated fabric (ibsim and opensm, a fat tree
/// of 2 spines, 4 leaves and 16 hosts) with one cable unplugged and one port
/// counting symbol errors, from `rdmakit fabric check --expected --html`:
/// no console error, both faults framed in the DOM and listed beside the
/// picture, a screenshot that is not blank. `fabric discover --html` of
/// the same fabric frames the unplugged cable only when it knows of it: it
/// has no expected topology, so it frames nothing.
#[test]
fn fabric_page_of_a_live_tree_frames_its_faults() {
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let tree = rdmakit_fabric::fat_tree(
        2,
        4,
        4,
        1,
        rdmakit_types::Width::X4,
        rdmakit_types::Speed::Qdr,
    )
    .unwrap();
    let mut fab = rdmakit_testkit::ibsim::Fabric::start(&tree);
    let dir = tempfile::tempdir().unwrap();
    let expected = dir.path().join("tree.net");
    std::fs::write(&expected, &tree).unwrap();
    let reply = fab.console("Unlink \"leaf4\"[6]");
    assert!(!reply.contains("cannot"), "{reply}");
    let reply = fab.console("PerformanceSet \"leaf1\"[3] PortCounters.SymbolErrorCounter=100");
    assert!(reply.contains("has been set"), "{reply}");
    let checked = dir.path().join("fabric-check.html");
    let discovered = dir.path().join("fabric-discover.html");
    let under_sim = |args: &[&str]| {
        let child = fab
            .command(BIN)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rdmakit");
        let o = rdmakit_testkit::wait(child, Duration::from_secs(30), &format!("{args:?}"));
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args:?}\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    under_sim(&[
        "fabric",
        "check",
        "--expected",
        expected.to_str().unwrap(),
        "--fail-on",
        "never",
        "--html",
        checked.to_str().unwrap(),
    ]);
    under_sim(&["fabric", "discover", "--html", discovered.to_str().unwrap()]);
    drop(fab);

    let mut b = Browser::start(&bin);
    let shots = repo().join("target/report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    for (page, frames) in [(&checked, 2), (&discovered, 0)] {
        let (events, url) = open(&mut b, page);
        let found = problems(&events, &url);
        assert!(found.is_empty(), "{}: {found:?}", page.display());
        let v = b.eval(
            "JSON.stringify([...document.querySelectorAll('svg.fabric g.frame')].map(g => [\
               g.dataset.link, g.classList.contains('health-down') ? 'down' : \
               g.classList.contains('health-errors') ? 'errors' : 'other', \
               g.querySelector('title').textContent, \
               g.querySelector('rect').getBoundingClientRect().width, \
               !!document.querySelector('li.fault[data-link=\"' + g.dataset.link + '\"]')]))",
        );
        let got: Vec<(String, String, String, f64, bool)> =
            serde_json::from_str(v.as_str().expect("frames")).expect("frames as JSON");
        assert_eq!(got.len(), frames, "{}: {got:#?}", page.display());
        let boxes = b
            .eval("document.querySelectorAll('svg.fabric g.node').length")
            .as_f64()
            .unwrap_or(0.0);
        assert_eq!(
            boxes, 22.0,
            "every node a box (4 hosts a leaf: none collapsed)"
        );
        if frames == 0 {
            continue;
        }
        let down = got
            .iter()
            .find(|f| f.1 == "down")
            .expect("the unplugged cable framed");
        assert!(
            down.2.contains("spine2 port 4") && down.2.contains("leaf4 port 6"),
            "{down:?}"
        );
        let errors = got
            .iter()
            .find(|f| f.1 == "errors")
            .expect("the symbol errors framed");
        assert!(
            errors.2.contains("leaf1 port 3") && errors.2.contains("SymbolErrorCounter 100"),
            "{errors:?}"
        );
        for f in &got {
            assert!(
                f.3 > 10.0 && f.4,
                "framed with a size and listed beside: {f:?}"
            );
        }
        let png = screenshot(&mut b, ".fabric-view");
        let (w, h, mean, sd, ink) = png_stats(&png);
        assert!(w >= 700 && h >= 500, "screenshot {w}x{h}");
        assert!(
            sd > 12.0 && ink > 0.03 && mean < 253.0,
            "the screenshot looks blank (mean {mean:.1}, sd {sd:.1}, ink {ink:.3})"
        );
        std::fs::write(shots.join("fabric-check.png"), &png).unwrap();
        if std::env::var_os("RDMAKIT_UPDATE_SCREENSHOTS").is_some_and(|v| !v.is_empty()) {
            std::fs::write(repo().join("docs/img/fabric-check.png"), &png).unwrap();
        }
    }
}

/// What each page must say, read from the DOM.
fn dom_checks(b: &mut Browser, name: &str) {
    match name {
        "doctor-h100" => one_card_per_group(b),
        "doctor-live" => soft_nic_named(b),
        "pairwise-healthy" => {
            let cells = bandwidth_cells(b);
            assert_eq!(cells.len(), 30, "{cells:?}");
            for c in &cells {
                assert_eq!((c.1.as_str(), c.2.as_str()), ("ok", GREEN), "{c:?}");
            }
        }
        "pairwise-link" => {
            let cells = bandwidth_cells(b);
            assert_eq!(cells.len(), 30, "{cells:?}");
            for c in &cells {
                let want = if c.0 == "n1 n5" || c.0 == "n5 n1" {
                    ("slow", RED)
                } else {
                    ("ok", GREEN)
                };
                assert_eq!((c.1.as_str(), c.2.as_str()), want, "{c:?}");
            }
        }
        "pairwise-node" => {
            let cells = bandwidth_cells(b);
            let n3: Vec<_> = cells
                .iter()
                .filter(|c| c.0.split(' ').any(|n| n == "n3"))
                .collect();
            assert_eq!(n3.len(), 10);
            assert!(n3.iter().all(|c| c.1 == "slow" && c.2 == RED), "{n3:?}");
        }
        _ => {}
    }
}

/// The colours as the browser computed them.
const GREEN: &str = "rgb(102, 189, 99)";
const RED: &str = "rgb(215, 48, 39)";

/// Every measured cell of the bandwidth heat map: ("from to", band, computed fill).
fn bandwidth_cells(b: &mut Browser) -> Vec<(String, String, String)> {
    let v = b.eval(
        "JSON.stringify([...document.querySelectorAll(\
           'svg[data-plot=\"pairwise-bandwidth\"] rect[data-band]')]\
         .filter(r => r.dataset.band !== 'self')\
         .map(r => [r.dataset.from + ' ' + r.dataset.to, r.dataset.band, getComputedStyle(r).fill]))",
    );
    serde_json::from_str(v.as_str().expect("cells")).expect("cells as JSON")
}

/// gpud-h100: one finding card per group of the doctor's JSON and one per other
/// finding; the eight alike ports in one card whose details open without script.
fn one_card_per_group(b: &mut Browser) {
    let v = b.eval(
        "(() => { const d = JSON.parse(document.getElementById('rdmakit-data').textContent)\
           .data.doctor; \
         const cards = document.querySelectorAll('#findings .finding'); \
         const g = document.querySelector('#findings .finding.group[data-alike=\"8\"]'); \
         const det = g && g.querySelector('details'); \
         const lis = det ? [...det.querySelectorAll('li')] : []; \
         const hidden = lis.every(li => !li.checkVisibility()); \
         if (det) det.querySelector('summary').click(); \
         return JSON.stringify({ findings: d.findings.length, \
           grouped: d.groups.reduce((n, x) => n + x.findings.length, 0), \
           groups: d.groups.length, cards: cards.length, \
           h010: [...cards].filter(c => c.querySelector('code').textContent === 'RDK-H010').length, \
           head: g ? g.querySelector('.meta').textContent : null, \
           hidden, open: det ? det.open : null, \
           shown: lis.filter(li => li.checkVisibility()).map(li => li.textContent) }); })()",
    );
    let v: Value = serde_json::from_str(v.as_str().unwrap()).unwrap();
    let n = |k: &str| v[k].as_u64().unwrap();
    assert!(n("groups") >= 1, "{v}");
    assert_eq!(
        n("cards"),
        n("findings") - n("grouped") + n("groups"),
        "{v}"
    );
    assert_eq!(
        n("h010"),
        2,
        "mlx5_1's own card and the group of eight: {v}"
    );
    assert_eq!(
        v["head"], "hardware layer · mlx5_0 port 1, mlx5_4 port 1 and 6 more (8 alike)",
        "{v}"
    );
    assert_eq!(v["hidden"], true, "the subjects start folded: {v}");
    assert_eq!(v["open"], true, "the summary opens the details: {v}");
    let shown: Vec<&str> = v["shown"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        shown,
        [
            "mlx5_0 port 1",
            "mlx5_4 port 1",
            "mlx5_5 port 1",
            "mlx5_6 port 1",
            "mlx5_7 port 1",
            "mlx5_8 port 1",
            "mlx5_9 port 1",
            "mlx5_bond_0 port 1"
        ]
    );
    // Folded again for the screenshot.
    let _ = b.eval("document.querySelector('#findings details').open = false");
}

/// This host has no kernel RDMA: the summary says so and names the soft NIC the
/// probes ran on as rdmakit's, not a device of the host.
fn soft_nic_named(b: &mut Browser) {
    let v = b.eval(
        "JSON.stringify({ summary: document.getElementById('summary').innerText, \
           probed: [...document.querySelectorAll('#summary tr.probed-only')].map(t => t.innerText), \
           probes: !!document.getElementById('probes') })",
    );
    let v: Value = serde_json::from_str(v.as_str().unwrap()).unwrap();
    let summary = v["summary"].as_str().unwrap();
    assert!(summary.contains("RDMA devices on the host: none."), "{v}");
    assert!(!summary.contains("No RDMA device in the source"), "{v}");
    assert_eq!(v["probes"], true, "{v}");
    let probed = v["probed"].as_array().unwrap();
    assert_eq!(probed.len(), 1, "{v}");
    let row = probed[0].as_str().unwrap();
    assert!(
        row.starts_with("soft0") && row.contains(rdmakit_doctor::probes::SOFT_LABEL),
        "{v}"
    );
    assert!(row.contains("ACTIVE"), "{v}");
}
