//! Helpers shared by the metrics tests (`mod metrics_common;`; a directory, so cargo
//! does not build it as a test of its own).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[allow(unused_imports)]
pub use super::common::{bin, fixture, fixtures, rdmakit};

/// A tool of Debian's `prometheus` package, or `None` after saying why the
/// test skips (panics when RDMAKIT_REQUIRE_PROMETHEUS is set).
pub fn prometheus_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        let msg =
            format!("{name} not found (Debian package `prometheus`; scripts/test installs it)");
        if std::env::var_os("RDMAKIT_REQUIRE_PROMETHEUS").is_some_and(|v| !v.is_empty()) {
            panic!("{msg}, and RDMAKIT_REQUIRE_PROMETHEUS is set");
        }
        eprintln!("SKIPPED: {msg}");
    }
    found
}

/// `promtool check metrics` of `text` on its stdin: whether it passed, and
/// what it said.
pub fn promtool_check(promtool: &Path, text: &[u8]) -> (bool, String) {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    child.stdin.take().unwrap().write_all(text).unwrap();
    let o = child.wait_with_output().unwrap();
    let msg = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), msg)
}

/// The exposition without the line that changes on every run.
pub fn stable(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("rdmakit_collect_duration_seconds "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `rdmakit metrics --listen 127.0.0.1:0 ARGS...`, killed when dropped.
pub struct Exporter {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Exporter {
    pub fn start(args: &[&str]) -> Exporter {
        let mut child = bin()
            .arg("metrics")
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("rdmakit starts");
        let mut err = BufReader::new(child.stderr.take().expect("stderr piped"));
        let mut line = String::new();
        err.read_line(&mut line).expect("first stderr line");
        let url = line
            .trim()
            .strip_prefix("rdmakit: serving metrics on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        let addr: SocketAddr = url
            .strip_suffix("/metrics")
            .expect("url ends in /metrics")
            .parse()
            .expect("socket address");
        // Keep draining stderr so the exporter never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            let _ = err.read_to_string(&mut sink);
        });
        Exporter { child, addr }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A parsed HTTP response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends raw bytes, reads until the server closes, parses the response.
pub fn raw(addr: SocketAddr, request: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(request).expect("send");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read response");
    parse_response(&buf)
}

pub fn parse_response(buf: &[u8]) -> Resp {
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(buf)));
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("status line {status_line:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Resp {
        status,
        headers,
        body: buf[end + 4..].to_vec(),
    }
}

pub fn get(addr: SocketAddr, path: &str) -> Resp {
    raw(
        addr,
        format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nUser-Agent: rdmakit-test\r\n\r\n")
            .as_bytes(),
    )
}

/// Series (name + labels, empty-valued labels dropped as Prometheus does) → value.
pub fn parse_exposition(text: &str) -> BTreeMap<(String, BTreeMap<String, String>), f64> {
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line.rsplit_once(' ').expect("value");
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, parse_labels(rest.strip_suffix('}').expect("}"))),
            None => (series, BTreeMap::new()),
        };
        let v: f64 = value.parse().expect("number");
        assert!(
            out.insert((name.to_string(), labels), v).is_none(),
            "duplicate {line}"
        );
    }
    out
}

fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        while b[i] != '=' {
            i += 1;
        }
        let key: String = b[start..i].iter().collect();
        i += 1;
        assert_eq!(b[i], '"');
        i += 1;
        let mut val = String::new();
        while b[i] != '"' {
            if b[i] == '\\' {
                i += 1;
                val.push(match b[i] {
                    'n' => '\n',
                    c => c,
                });
            } else {
                val.push(b[i]);
            }
            i += 1;
        }
        i += 1;
        if i < b.len() && b[i] == ',' {
            i += 1;
        }
        if !val.is_empty() {
            out.insert(key, val);
        }
    }
    out
}
