//! The exporter's HTTP/1.x endpoint, served by hyper on a single-threaded tokio
//! runtime: one request per connection (`Connection: close`), each connection a task,
//! so an idle or slow client costs a task, never a thread or a scrape's turn.
//!
//! - `GET /metrics`, `HEAD /metrics` (query string ignored): 200 with a fresh
//!   exposition from the render function (run on tokio's blocking pool), or 500 when
//!   it panicked.
//! - `GET /`: 200, a short page pointing at /metrics.
//! - another path: 404; another method: 405 with `Allow: GET, HEAD`; a request line or
//!   header that is not HTTP/1.x, or a target that is not a path: 400; a head over
//!   [`MAX_HEAD`]: 431 (hyper's parser); a head not complete within
//!   [`HEAD_TIMEOUT`]: the connection is closed; more than [`MAX_CONNECTIONS`] at
//!   once: 503. None of them stops the server.
//!
//! Why hyper and not a smaller server: docs/metrics.md (tiny_http, measured, accepts
//! unbounded heads and lets a few slow clients hold up a scrape).

use std::convert::Infallible;
use std::io;
use std::net::TcpListener;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt as _;

use crate::text::CONTENT_TYPE as EXPOSITION;

/// Largest request head (request line + headers) accepted; hyper's floor is 8 KiB.
pub const MAX_HEAD: usize = 8 * 1024;
/// Connections served at once; more get 503.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
const BUSY_WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// What renders one exposition (called once per scrape, possibly from several threads).
pub type RenderFn = dyn Fn() -> String + Send + Sync;

/// The answer to one request, before it is put on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    /// Send `Allow: GET, HEAD` (405).
    pub allow: bool,
    pub body: String,
}

fn plain(status: StatusCode, body: &str) -> Reply {
    Reply {
        status,
        content_type: "text/plain; charset=utf-8",
        allow: false,
        body: format!("{body}\n"),
    }
}

/// Routes one request: pure but for calling `render` on `/metrics`.
pub fn route(method: &Method, uri: &Uri, render: &RenderFn) -> Reply {
    // Only origin-form targets ("/metrics?x"): not "metrics", not "http://h/metrics".
    if uri.scheme().is_some() || uri.authority().is_some() || !uri.path().starts_with('/') {
        return plain(StatusCode::BAD_REQUEST, "bad request");
    }
    if method != Method::GET && method != Method::HEAD {
        return Reply {
            allow: true,
            ..plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD")
        };
    }
    match uri.path() {
        "/metrics" => match catch_unwind(AssertUnwindSafe(render)) {
            Ok(body) => Reply {
                status: StatusCode::OK,
                content_type: EXPOSITION,
                allow: false,
                body,
            },
            Err(_) => plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "collecting the metrics failed",
            ),
        },
        "/" => Reply {
            status: StatusCode::OK,
            content_type: "text/html; charset=utf-8",
            allow: false,
            body: "<html><head><title>rdmakit exporter</title></head><body>\
                   <h1>rdmakit exporter</h1><p><a href=\"/metrics\">Metrics</a></p>\
                   </body></html>\n"
                .to_string(),
        },
        _ => plain(
            StatusCode::NOT_FOUND,
            "not found; the metrics are at /metrics",
        ),
    }
}

fn response(r: Reply) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(r.body)));
    *resp.status_mut() = r.status;
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(r.content_type));
    h.insert(CONNECTION, HeaderValue::from_static("close"));
    if r.allow {
        h.insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    resp
}

/// Serves one request; rendering runs on the blocking pool, so a slow collection
/// never stalls the runtime that reads other clients' requests.
async fn handle(
    req: Request<hyper::body::Incoming>,
    render: Arc<RenderFn>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (method, uri) = (req.method().clone(), req.uri().clone());
    let reply = tokio::task::spawn_blocking(move || route(&method, &uri, render.as_ref()))
        .await
        .unwrap_or_else(|_| {
            plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "collecting the metrics failed",
            )
        });
    Ok(response(reply))
}

/// Accepts connections until accepting itself fails persistently, each served as
/// its own task, at most [`MAX_CONNECTIONS`] at once.
///
/// # Errors
/// When the runtime cannot start, or the listener keeps failing to accept.
pub fn serve(listener: TcpListener, render: Arc<RenderFn>) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let active = Arc::new(AtomicUsize::new(0));
        let mut failures = 0u32;
        loop {
            let mut stream = match listener.accept().await {
                Ok((s, _)) => {
                    failures = 0;
                    s
                }
                Err(e) => {
                    // EMFILE and friends pass; a listener that never accepts again does not.
                    failures += 1;
                    if failures > 1000 {
                        return Err(e);
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                active.fetch_sub(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; \
                                charset=utf-8\r\nContent-Length: 21\r\nConnection: close\r\n\r\n\
                                too many connections\n";
                    let _ =
                        tokio::time::timeout(BUSY_WRITE_TIMEOUT, stream.write_all(busy.as_bytes()))
                            .await;
                });
                continue;
            }
            let guard = Active(Arc::clone(&active));
            let render = Arc::clone(&render);
            tokio::spawn(async move {
                let _guard = guard;
                // A second handle on the socket, to answer a head cut short by the
                // client's EOF, which hyper drops without a word.
                let Ok((stream, spare)) = with_spare(stream) else {
                    return;
                };
                let service =
                    hyper::service::service_fn(move |req| handle(req, Arc::clone(&render)));
                let served = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEAD_TIMEOUT)
                    .max_buf_size(MAX_HEAD)
                    .keep_alive(false)
                    .half_close(true)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                // Other errors are the client's too (a reset, a timeout, a malformed
                // head hyper already answered with 400 or 431).
                if served.is_err_and(|e| e.is_incomplete_message()) {
                    let _ = std::io::Write::write_all(&mut &spare, CUT_SHORT.as_bytes());
                }
            });
        }
    })
}

/// The answer to a request head the client ended (EOF) before its blank line.
const CUT_SHORT: &str = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
                         Content-Length: 12\r\nConnection: close\r\n\r\nbad request\n";

/// The stream, and a blocking-API clone of the same socket (non-blocking: a short
/// write goes straight into the empty send buffer).
fn with_spare(
    stream: tokio::net::TcpStream,
) -> io::Result<(tokio::net::TcpStream, std::net::TcpStream)> {
    let std_stream = stream.into_std()?;
    let spare = std_stream.try_clone()?;
    Ok((tokio::net::TcpStream::from_std(std_stream)?, spare))
}

/// Decrements the active-connection count when the connection's task ends.
struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> Uri {
        s.parse().unwrap()
    }

    #[test]
    fn routes() {
        let render: &RenderFn = &|| "x 1\n".to_string();
        let status = |m: Method, p: &str| route(&m, &uri(p), render).status;
        assert_eq!(status(Method::GET, "/metrics"), StatusCode::OK);
        assert_eq!(status(Method::GET, "/metrics?name[]=x"), StatusCode::OK);
        assert_eq!(status(Method::HEAD, "/metrics"), StatusCode::OK);
        assert_eq!(status(Method::GET, "/"), StatusCode::OK);
        assert_eq!(status(Method::GET, "/nope"), StatusCode::NOT_FOUND);
        assert_eq!(
            status(Method::DELETE, "/metrics"),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert!(route(&Method::POST, &uri("/"), render).allow);
        assert_eq!(status(Method::GET, "metrics"), StatusCode::BAD_REQUEST);
        assert_eq!(
            status(Method::GET, "http://h/metrics"),
            StatusCode::BAD_REQUEST
        );
        let ok = route(&Method::GET, &uri("/metrics"), render);
        assert_eq!((ok.content_type, ok.body.as_str()), (EXPOSITION, "x 1\n"));
    }

    #[test]
    fn a_panicking_render_is_a_500() {
        let boom: &RenderFn = &|| panic!("boom");
        assert_eq!(
            route(&Method::GET, &uri("/metrics"), boom).status,
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
