//! The exposition against the real Prometheus tools (Debian package `prometheus`):
//! `promtool check metrics` accepts it, and a Prometheus server scraping the exporter on
//! loopback every second stores exactly the values the exposition holds.
//!
//! When promtool or prometheus is not installed the tests say so and skip, unless
//! RDMAKIT_REQUIRE_PROMETHEUS is set (scripts/test sets it and installs the package),
//! in which case they fail.

mod common;

mod metrics_common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use metrics_common::*;

#[test]
fn promtool_accepts_every_exposition() {
    let Some(promtool) = prometheus_tool("promtool") else {
        return;
    };
    let mut sources: Vec<Vec<String>> = [
        "healthy",
        "healthy-busy",
        "real-nics-procfs",
        // mlx5 congestion counters: rdmakit_roce_* families.
        "roce-mlx5-qos",
    ]
    .iter()
    .map(|f| vec!["--from".to_string(), fixture(f)])
    .collect();
    sources.push(vec![]); // the live host, whatever it has
    for args in sources {
        let mut a = vec!["metrics"];
        a.extend(args.iter().map(String::as_str));
        let o = rdmakit(&a);
        assert!(
            o.status.success(),
            "{a:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let (ok, msg) = promtool_check(&promtool, &o.stdout);
        assert!(ok, "promtool check metrics {a:?}:\n{msg}");
    }
    // promtool does reject what it should (the check is not vacuous).
    let (ok, _) = promtool_check(&promtool, b"# TYPE x_counter counter\nx_counter 1\n");
    assert!(!ok);
}

/// Prometheus, killed and its storage removed when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(bin: &Path, target: SocketAddr) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: rdmakit\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        Prometheus {
            child,
            addr,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// An instant query; `None` while Prometheus is not answering yet.
    fn query(&self, q: &str) -> Option<Vec<serde_json::Value>> {
        let enc: String = q
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let s = std::net::TcpStream::connect(self.addr).ok()?;
        drop(s);
        let r = get(self.addr, &format!("/api/v1/query?query={enc}"));
        if r.status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
        assert_eq!(v["status"], "success", "{v}");
        v["data"]["result"].as_array().cloned()
    }
}

fn series_of(result: &[serde_json::Value]) -> BTreeMap<(String, BTreeMap<String, String>), f64> {
    let mut out = BTreeMap::new();
    for r in result {
        let mut labels: BTreeMap<String, String> = r["metric"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect();
        let name = labels.remove("__name__").unwrap();
        labels.remove("job");
        labels.remove("instance");
        let v: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
        out.insert((name, labels), v);
    }
    out
}

#[test]
fn prometheus_scrapes_the_exporter_and_stores_the_values() {
    let (Some(prom), Some(_)) = (prometheus_tool("prometheus"), prometheus_tool("promtool")) else {
        return;
    };
    let from = fixture("real-nics-procfs");
    let exporter = Exporter::start(&["--from", &from]);
    let server = Prometheus::start(&prom, exporter.addr);
    let want: BTreeMap<_, _> = parse_exposition(&stable(&String::from_utf8_lossy(
        &rdmakit(&["metrics", "--from", &from]).stdout,
    )));
    assert!(want.len() > 100, "{}", want.len());

    // Wait for a successful scrape (1 s interval).
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let up = server.query("up{job=\"rdmakit\"}");
        if let Some(r) = &up {
            if r.len() == 1 && r[0]["value"][1] == "1" {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no successful scrape within 90 s; up = {up:?}; prometheus log:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // Every sample of the exposition, as Prometheus stored it.
    let got = series_of(
        &server
            .query("{job=\"rdmakit\",__name__=~\"node_infiniband_.*|rdmakit_.*\",__name__!=\"rdmakit_collect_duration_seconds\"}")
            .expect("query answers"),
    );
    let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}\nextra {extra:?}"
    );
    for (k, v) in &want {
        let g = got[k];
        assert!(
            (g - v).abs() <= v.abs() * 1e-12,
            "{k:?}: Prometheus has {g}, the exposition {v}"
        );
    }
    // The values that matter, spelled out: bytes = 4 × words, hw_counters as read.
    let one = |q: &str| -> f64 {
        let r = server.query(q).expect("query answers");
        assert_eq!(r.len(), 1, "{q}: {r:?}");
        r[0]["value"][1].as_str().unwrap().parse().unwrap()
    };
    let words: f64 =
        std::fs::read_to_string(fixtures().join(
            "real-nics-procfs/root/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data",
        ))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        one("node_infiniband_port_data_received_bytes_total{device=\"mlx5_0\",port=\"1\"}"),
        words * 4.0
    );
    assert_eq!(
        one("rdmakit_infiniband_hw_counters_total{device=\"mlx5_0\",port=\"1\",counter=\"rx_read_requests\"}"),
        175_528_982.0
    );
    assert_eq!(one("count(node_infiniband_info{job=\"rdmakit\"})"), 3.0);
    assert_eq!(
        one("scrape_samples_scraped{job=\"rdmakit\"}"),
        (want.len() + 1) as f64 // + rdmakit_collect_duration_seconds
    );
    assert!(one("rdmakit_collect_duration_seconds{job=\"rdmakit\"}") > 0.0);
    drop(server);
    drop(exporter);
}
