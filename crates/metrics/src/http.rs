//! A small HTTP/1.1 exporter on `std::net`: one request per connection
//! (`Connection: close`), a thread per connection with a bound on how many run at
//! once.
//!
//! - `GET /metrics`, `HEAD /metrics` (query string ignored): 200 with a fresh
//!   exposition from the render function, or 500 when it panicked.
//! - `GET /`: 200, a short page pointing at /metrics.
//! - another path: 404; another method: 405 with `Allow: GET, HEAD`; a request line or
//!   header that is not HTTP/1.x: 400; headers over 8 KiB: 431; too many connections
//!   at once: 503. None of them stops the server.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::text::CONTENT_TYPE;

/// Largest request head (request line + headers) accepted.
pub const MAX_HEAD: usize = 8 * 1024;
/// Connections served at once; more get 503.
pub const MAX_CONNECTIONS: usize = 64;
const READ_TIMEOUT: Duration = Duration::from_secs(10);
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What renders one exposition (called once per scrape, possibly from several threads).
pub type RenderFn = dyn Fn() -> String + Send + Sync;

/// A parsed request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLine {
    pub method: String,
    pub path: String,
}

/// Why a request head was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRequest {
    /// Not `METHOD SP TARGET SP HTTP/1.x`, or a header line without a colon.
    Malformed,
    /// Over [`MAX_HEAD`] bytes.
    TooLarge,
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses a request head (everything before the blank line).
///
/// # Errors
/// [`BadRequest::Malformed`] for anything that is not an HTTP/1.x request head.
pub fn parse_head(head: &[u8]) -> Result<RequestLine, BadRequest> {
    let text = std::str::from_utf8(head).map_err(|_| BadRequest::Malformed)?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let first = lines.next().ok_or(BadRequest::Malformed)?;
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadRequest::Malformed);
    };
    if !is_token(method)
        || !target.starts_with('/')
        || target.bytes().any(|b| b.is_ascii_control() || b == b' ')
        || !matches!(version, "HTTP/1.0" | "HTTP/1.1")
    {
        return Err(BadRequest::Malformed);
    }
    for l in lines {
        if l.is_empty() {
            continue;
        }
        match l.split_once(':') {
            Some((name, _)) if is_token(name) => {}
            _ => return Err(BadRequest::Malformed),
        }
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    Ok(RequestLine {
        method: method.to_string(),
        path: path.to_string(),
    })
}

/// Reads until the blank line that ends the head. `Ok(None)`: the peer closed
/// without sending anything.
fn read_head(s: &mut TcpStream) -> Result<Option<Vec<u8>>, BadRequest> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = find_end(&buf) {
            buf.truncate(end);
            return Ok(Some(buf));
        }
        if buf.len() > MAX_HEAD {
            return Err(BadRequest::TooLarge);
        }
        match s.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => return Err(BadRequest::Malformed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) if buf.is_empty() => return Ok(None),
            Err(_) => return Err(BadRequest::Malformed),
        }
    }
}

fn find_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = buf.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

struct Response {
    status: &'static str,
    content_type: &'static str,
    extra: &'static str,
    body: String,
}

fn plain(status: &'static str, body: &str) -> Response {
    Response {
        status,
        content_type: "text/plain; charset=utf-8",
        extra: "",
        body: format!("{body}\n"),
    }
}

fn respond(req: Result<RequestLine, BadRequest>, render: &RenderFn) -> (Response, bool) {
    let req = match req {
        Ok(r) => r,
        Err(BadRequest::TooLarge) => {
            return (
                plain(
                    "431 Request Header Fields Too Large",
                    "request head too large",
                ),
                false,
            )
        }
        Err(BadRequest::Malformed) => return (plain("400 Bad Request", "bad request"), false),
    };
    let head = req.method == "HEAD";
    if req.method != "GET" && !head {
        let mut r = plain("405 Method Not Allowed", "only GET and HEAD");
        r.extra = "Allow: GET, HEAD\r\n";
        return (r, false);
    }
    let r = match req.path.as_str() {
        "/metrics" => match catch_unwind(AssertUnwindSafe(render)) {
            Ok(body) => Response {
                status: "200 OK",
                content_type: CONTENT_TYPE,
                extra: "",
                body,
            },
            Err(_) => plain("500 Internal Server Error", "collecting the metrics failed"),
        },
        "/" => Response {
            status: "200 OK",
            content_type: "text/html; charset=utf-8",
            extra: "",
            body: "<html><head><title>rdmakit exporter</title></head><body>\
                   <h1>rdmakit exporter</h1><p><a href=\"/metrics\">Metrics</a></p>\
                   </body></html>\n"
                .to_string(),
        },
        _ => plain("404 Not Found", "not found; the metrics are at /metrics"),
    };
    (r, head)
}

fn write_response(s: &mut TcpStream, r: &Response, head_only: bool) -> io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
        r.status,
        r.content_type,
        r.body.len(),
        r.extra
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(r.body.as_bytes());
    }
    s.write_all(&out)?;
    s.flush()
}

/// Ends a connection without a reset: stop writing, then read what the peer still
/// sends (a body we did not want) for a moment before closing.
fn close(mut s: TcpStream) {
    let _ = s.shutdown(Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut sink = [0u8; 4096];
    let mut total = 0usize;
    while let Ok(n) = s.read(&mut sink) {
        total += n;
        if n == 0 || total > 1 << 20 {
            break;
        }
    }
}

/// Serves one connection.
pub fn handle(mut s: TcpStream, render: &RenderFn) {
    let _ = s.set_read_timeout(Some(READ_TIMEOUT));
    let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
    let req = match read_head(&mut s) {
        Ok(None) => return,
        Ok(Some(head)) => parse_head(&head),
        Err(e) => Err(e),
    };
    let (resp, head_only) = respond(req, render);
    if write_response(&mut s, &resp, head_only).is_ok() {
        close(s);
    }
}

/// Accepts connections forever (until accepting itself fails persistently), each
/// served on its own thread, at most [`MAX_CONNECTIONS`] at once.
///
/// # Errors
/// Only when the listener keeps failing to accept.
pub fn serve(listener: TcpListener, render: Arc<RenderFn>) -> io::Result<()> {
    let active = Arc::new(AtomicUsize::new(0));
    let mut failures = 0u32;
    for conn in listener.incoming() {
        let mut s = match conn {
            Ok(s) => {
                failures = 0;
                s
            }
            Err(e) => {
                // EMFILE and friends pass; a listener that never accepts again does not.
                failures += 1;
                if failures > 1000 {
                    return Err(e);
                }
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = write_response(
                &mut s,
                &plain("503 Service Unavailable", "too many connections"),
                false,
            );
            continue;
        }
        let render = Arc::clone(&render);
        let guard = Active(Arc::clone(&active));
        let spawned = thread::Builder::new()
            .name("rdmakit-http".into())
            .spawn(move || {
                let _guard = guard;
                handle(s, render.as_ref());
            });
        if let Err(e) = spawned {
            eprintln!("rdmakit: metrics: cannot start a thread for a connection: {e}");
        }
    }
    Ok(())
}

/// Decrements the active-connection count when the connection's thread ends.
struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        assert_eq!(
            parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*"),
            Ok(RequestLine {
                method: "GET".into(),
                path: "/metrics".into()
            })
        );
        assert_eq!(
            parse_head(b"POST / HTTP/1.0").map(|r| r.method),
            Ok("POST".into())
        );
        for bad in [
            &b""[..],
            b"GET",
            b"GET /metrics",
            b"GET /metrics HTTP/2.0",
            b"GET metrics HTTP/1.1",
            b"GET /a b HTTP/1.1",
            b"G(T / HTTP/1.1",
            b"GET / HTTP/1.1\r\nno colon here",
            b"\xff\xfe / HTTP/1.1",
        ] {
            assert_eq!(parse_head(bad), Err(BadRequest::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn head_end() {
        assert_eq!(find_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(14));
        assert_eq!(find_end(b"GET / HTTP/1.1\n\n"), Some(14));
        assert_eq!(find_end(b"GET / HTTP/1.1\r\n"), None);
    }

    #[test]
    fn responses() {
        let render: &RenderFn = &|| "x 1\n".to_string();
        let get = |m: &str, p: &str| {
            respond(
                Ok(RequestLine {
                    method: m.into(),
                    path: p.into(),
                }),
                render,
            )
            .0
            .status
        };
        assert_eq!(get("GET", "/metrics"), "200 OK");
        assert_eq!(get("HEAD", "/metrics"), "200 OK");
        assert_eq!(get("GET", "/nope"), "404 Not Found");
        assert_eq!(get("DELETE", "/metrics"), "405 Method Not Allowed");
        let boom: &RenderFn = &|| panic!("boom");
        let r = respond(
            Ok(RequestLine {
                method: "GET".into(),
                path: "/metrics".into(),
            }),
            boom,
        );
        assert_eq!(r.0.status, "500 Internal Server Error");
    }
}
