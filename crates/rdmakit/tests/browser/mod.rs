//! A small Chrome DevTools Protocol client over headless Chromium (Debian's
//! `chromium` package): navigate to a file, evaluate JavaScript, take a
//! screenshot, and collect every console message, exception, log entry and
//! network request the page caused.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::{stream::MaybeTlsStream, Message, WebSocket};

/// The chromium binary, or why there is none (the caller decides whether that fails).
pub fn chromium() -> Result<PathBuf, String> {
    for name in ["chromium", "chromium-browser"] {
        for dir in std::env::var("PATH").unwrap_or_default().split(':') {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err("chromium not found (Debian package `chromium`; scripts/test installs it)".into())
}

pub struct Browser {
    child: Child,
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Every event received, in order.
    pub events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts headless Chromium with a new empty profile, no network services and
    /// the DevTools protocol on a free loopback port, and attaches to its page.
    pub fn start(bin: &Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(bin);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "--window-size=1280,900",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // Chromium dies with the test even when the test process is killed (a
        // timeout, ^C) and Drop never runs: no browser left spinning on the machine.
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        // Chromium writes the port it bound to into the profile.
        let port_file = profile.path().join("DevToolsActivePort");
        let t = Instant::now();
        let port: u16 = loop {
            if let Ok(s) = std::fs::read_to_string(&port_file) {
                if let Some(p) = s.lines().next().and_then(|l| l.trim().parse().ok()) {
                    break p;
                }
            }
            if let Ok(Some(st)) = child.try_wait() {
                panic!("chromium exited before it opened the DevTools port: {st}");
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "chromium did not write {} within 60 s",
                port_file.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let list = http_get(port, "/json/list");
        let targets: Value = serde_json::from_str(&list).expect("DevTools /json/list is JSON");
        let url = targets
            .as_array()
            .and_then(|a| a.iter().find(|t| t["type"] == "page"))
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .unwrap_or_else(|| panic!("no page target in {list}"))
            .to_string();
        let (ws, _) = tungstenite::connect(url.as_str()).expect("DevTools websocket");
        if let MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        }
        let mut b = Browser {
            child,
            ws,
            next_id: 1,
            events: Vec::new(),
            _profile: profile,
        };
        for domain in ["Page", "Runtime", "Log", "Network"] {
            b.call(&format!("{domain}.enable"), json!({}));
        }
        b
    }

    /// Sends a command and waits for its answer (events meanwhile are kept).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({ "id": id, "method": method, "params": params });
        self.ws
            .send(Message::Text(msg.to_string().into()))
            .unwrap_or_else(|e| panic!("{method}: {e}"));
        loop {
            let v = self.read();
            if v["id"] == id {
                if let Some(e) = v.get("error") {
                    panic!("{method}: {e}");
                }
                return v["result"].clone();
            }
            self.events.push(v);
        }
    }

    fn read(&mut self) -> Value {
        loop {
            match self.ws.read().expect("DevTools message") {
                Message::Text(t) => return serde_json::from_str(&t).expect("DevTools JSON"),
                Message::Close(_) => panic!("DevTools closed the connection"),
                _ => {}
            }
        }
    }

    /// Waits for an event of `method` received after event index `from`.
    pub fn wait_event(&mut self, method: &str, from: usize, timeout: Duration) -> Value {
        let t = Instant::now();
        loop {
            if let Some(e) = self.events[from.min(self.events.len())..]
                .iter()
                .find(|e| e["method"] == method)
            {
                return e.clone();
            }
            assert!(t.elapsed() < timeout, "no {method} within {timeout:?}");
            let v = self.read();
            self.events.push(v);
        }
    }

    /// Evaluates `expr` in the page and returns its value.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true }),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("evaluating {expr}: {e}");
        }
        r["result"]["value"].clone()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("DevTools HTTP");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    // Read the header, then exactly Content-Length bytes (the server may keep the
    // connection open).
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = s.read(&mut byte).expect("DevTools HTTP header");
        assert!(
            n == 1,
            "DevTools HTTP closed in the header: {}",
            String::from_utf8_lossy(&buf)
        );
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("DevTools HTTP answer without Content-Length: {head}"));
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).expect("DevTools HTTP body");
    String::from_utf8(body).expect("UTF-8 body")
}

/// Luminance statistics of a PNG: (width, height, mean, standard deviation,
/// fraction of pixels that are not near-white).
pub fn png_stats(bytes: &[u8]) -> (u32, u32, f64, f64, f64) {
    let dec = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = dec.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("PNG size")];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "8-bit screenshot");
    let px = &buf[..info.buffer_size()];
    let (mut n, mut sum, mut sq, mut ink) = (0f64, 0f64, 0f64, 0f64);
    for p in px.chunks(channels) {
        let y = if channels >= 3 {
            0.299 * f64::from(p[0]) + 0.587 * f64::from(p[1]) + 0.114 * f64::from(p[2])
        } else {
            f64::from(p[0])
        };
        n += 1.0;
        sum += y;
        sq += y * y;
        if y < 235.0 {
            ink += 1.0;
        }
    }
    let mean = sum / n;
    (
        info.width,
        info.height,
        mean,
        (sq / n - mean * mean).max(0.0).sqrt(),
        ink / n,
    )
}
