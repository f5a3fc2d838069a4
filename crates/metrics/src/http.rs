//! The exporter's HTTP/1.x endpoint, served by hyper on a single-threaded tokio
//! runtime: one request per connection (`Connection: close`), each connection a task,
//! so an idle or slow client costs a task, never a thread or a scrape's turn.
//!
//! - `GET /metrics`, `HEAD /metrics` (query string ignored): 200 with a fresh
//!   exposition from the render function (run on tokio's blocking pool), or 500 when
//!   it panicked. Scrapes that arrive while a collection runs share the next one
//!   ([`Coalesce`]): each gets a collection that started after it arrived, and a
//!   crowd of requests costs two collections, not one each.
//! - `GET /`: 200, a short page pointing at /metrics.
//! - another path: 404; another method: 405 with `Allow: GET, HEAD`; a request line or
//!   header that is not HTTP/1.x, or a target that is not a path: 400; a head over
//!   [`MAX_HEAD`]: 431 (hyper's parser); a head not complete within
//!   [`HEAD_TIMEOUT`] of connecting (one deadline for the whole head, however the
//!   client spreads its bytes): the connection is closed; a connection still open
//!   [`CONNECTION_TIMEOUT`] after it was accepted: closed. None of them stops the
//!   server.
//! - **Slots no idle or slow client can hold.** At most [`MAX_CONNECTIONS`] are
//!   served at once. When one more arrives, the oldest connection that is not being
//!   answered — still sending its head, or reading its answer — is closed to make
//!   room ([`Slots`]), unless its whole head is already waiting in its socket (a
//!   scrape the server has not read yet: connections re-opened as fast as they are
//!   closed would otherwise all be newer than it). Only when every slot is collecting
//!   metrics for a request, or has its request waiting, does a newcomer get 503. A
//!   scrape sends its head at once, so held connections, however many, never keep it
//!   out.
//!
//! Why hyper and not a smaller server: docs/metrics.md (tiny_http, measured, accepts
//! unbounded heads and lets a few slow clients hold up a scrape).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io;
use std::net::TcpListener;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt as _;
use tokio::task::AbortHandle;

use crate::text::CONTENT_TYPE as EXPOSITION;

/// Largest request head (request line + headers) accepted; hyper's floor is 8 KiB.
pub const MAX_HEAD: usize = 8 * 1024;
/// Connections served at once; one more closes the oldest that is not being
/// answered, or gets 503 when all are.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send its whole request head, from connecting.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection may stay open in all (head, collection, answer).
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(60);
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
pub fn route(method: &Method, uri: &Uri, render: &dyn Fn() -> String) -> Reply {
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
    co: Arc<Coalesce>,
    stage: Arc<AtomicU8>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    stage.store(COLLECTING, Ordering::SeqCst);
    let (method, uri) = (req.method().clone(), req.uri().clone());
    let reply = tokio::task::spawn_blocking(move || {
        let render = move || match co.collect() {
            Some(body) => body.as_str().to_owned(),
            // The collection panicked (its message is on stderr already): a 500
            // from `route`, without a second message.
            None => std::panic::resume_unwind(Box::new("collection failed")),
        };
        route(&method, &uri, &render)
    })
    .await
    .unwrap_or_else(|_| {
        plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "collecting the metrics failed",
        )
    });
    stage.store(ANSWERING, Ordering::SeqCst);
    Ok(response(reply))
}

/// What a connection is doing, for [`Slots`]: only [`COLLECTING`] cannot be
/// evicted.
const READING_HEAD: u8 = 0;
const COLLECTING: u8 = 1;
const ANSWERING: u8 = 2;

/// The connections being served, in order of arrival, and how to close each.
#[derive(Default)]
struct Slots {
    next: u64,
    open: BTreeMap<u64, Slot>,
}

struct Slot {
    stage: Arc<AtomicU8>,
    /// The connection's socket (a second descriptor), to see whether its head
    /// is waiting unread; None in unit tests.
    socket: Option<std::os::fd::OwnedFd>,
    /// Set once its task is spawned; aborting the task drops (closes) the
    /// connection.
    task: Option<AbortHandle>,
}

/// A connection's place in [`Slots`], given back when its task ends.
struct SlotGuard {
    slots: Arc<Mutex<Slots>>,
    id: u64,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        locked(&self.slots).open.remove(&self.id);
    }
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded data stays consistent whatever a panicking holder did.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Slots {
    /// A slot for a new connection (`socket`: a second descriptor of it). At
    /// [`MAX_CONNECTIONS`], the oldest connection not being answered (reading its
    /// head, or the client reading its answer) whose head is not already waiting
    /// unread is closed; `None` when there is none.
    fn admit(
        this: &Arc<Mutex<Slots>>,
        socket: Option<std::os::fd::OwnedFd>,
    ) -> Option<(SlotGuard, Arc<AtomicU8>)> {
        let mut s = locked(this);
        if s.open.len() >= MAX_CONNECTIONS {
            let victim = s
                .open
                .iter()
                .find(|(_, c)| {
                    let stage = c.stage.load(Ordering::SeqCst);
                    stage != COLLECTING
                        && !(stage == READING_HEAD && c.socket.as_ref().is_some_and(head_waiting))
                })
                .map(|(&id, _)| id)?;
            if let Some(task) = s.open.remove(&victim).and_then(|c| c.task) {
                task.abort();
            }
        }
        let id = s.next;
        s.next += 1;
        let stage = Arc::new(AtomicU8::new(READING_HEAD));
        s.open.insert(
            id,
            Slot {
                stage: Arc::clone(&stage),
                socket,
                task: None,
            },
        );
        Some((
            SlotGuard {
                slots: Arc::clone(this),
                id,
            },
            stage,
        ))
    }

    /// Records how to close connection `id` (still open unless evicted already).
    fn task(this: &Arc<Mutex<Slots>>, id: u64, task: AbortHandle) {
        if let Some(c) = locked(this).open.get_mut(&id) {
            c.task = Some(task);
        }
    }
}

/// Whether a whole request head (up to its blank line) waits unread in `socket`:
/// a peek, never a read, never a wait.
fn head_waiting(socket: &std::os::fd::OwnedFd) -> bool {
    let mut buf = [0u8; MAX_HEAD];
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    match rustix::net::recv(socket, &mut buf, flags) {
        Ok(n) => {
            let b = &buf[..n.min(MAX_HEAD)];
            b.windows(4).any(|w| w == b"\r\n\r\n") || b.windows(2).any(|w| w == b"\n\n")
        }
        Err(_) => false,
    }
}

/// Concurrent scrapes share collections: a request gets the result of the first
/// collection that started after it arrived, so N requests at once cost at most
/// two collections (the one running and the next), and every answer is fresh.
pub struct Coalesce {
    render: Arc<RenderFn>,
    state: Mutex<Flight>,
    done: Condvar,
}

#[derive(Default)]
struct Flight {
    /// Collections started and finished so far.
    started: u64,
    finished: u64,
    running: bool,
    /// The result of collection number `finished` (None: it panicked).
    last: Option<Arc<String>>,
}

impl Coalesce {
    /// Collections of `render`, shared by the requests that wait for the same one.
    pub fn new(render: Arc<RenderFn>) -> Coalesce {
        Coalesce {
            render,
            state: Mutex::new(Flight::default()),
            done: Condvar::new(),
        }
    }

    /// The exposition from a collection that started after this call (blocks until
    /// it is done); `None` when that collection panicked.
    pub fn collect(&self) -> Option<Arc<String>> {
        let mut st = locked(&self.state);
        let want = st.started + 1;
        loop {
            if st.finished >= want {
                return st.last.clone();
            }
            if st.running {
                st = self.done.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            st.running = true;
            st.started += 1;
            let n = st.started;
            drop(st);
            let body = catch_unwind(AssertUnwindSafe(|| (self.render)())).ok();
            st = locked(&self.state);
            st.running = false;
            st.finished = n;
            st.last = body.map(Arc::new);
            self.done.notify_all();
        }
    }
}

/// Binds the exporter's address `addr` (`IP:PORT`, e.g. `127.0.0.1:9879`,
/// `[::]:9879`).
///
/// # Errors
/// Why not, with what to do for the usual causes (the port taken, an address
/// not this host's, a port below 1024 without root, not an address at all).
pub fn bind(addr: &str) -> Result<TcpListener, String> {
    TcpListener::bind(addr).map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(98) => ": another exporter on that port? pick another",
            Some(99) => ": not an address of this host",
            Some(13) => ": ports below 1024 need root",
            None => ": give IP:PORT, e.g. 127.0.0.1:9879 or [::]:9879",
            _ => "",
        };
        format!(
            "--listen {addr}: cannot bind: {}{hint}",
            rdmakit_host::errno::io_text(&e)
        )
    })
}

/// Serves the metrics of `opened` on `listener` ([`serve`]): every scrape
/// reads the facts afresh ([`crate::scrape`]), one collection at a time —
/// concurrent scrapes wait rather than read the host twice over.
///
/// # Errors
/// As [`serve`].
pub fn serve_source(
    listener: TcpListener,
    opened: rdmakit_host::open::Opened,
    copts: rdmakit_host::collect::CollectOptions,
    opts: crate::Options,
) -> io::Result<()> {
    let state = Mutex::new((opened, copts));
    let render = move || {
        let guard = state.lock().unwrap_or_else(|p| p.into_inner());
        let (opened, copts) = &*guard;
        crate::scrape(opened.source(), copts, opened.label(), &opts)
    };
    serve(listener, Arc::new(render))
}

/// Serves the metrics of the whole fabric ([`crate::fabric`]): every scrape
/// reads every port's counters, with the discovery kept between scrapes until
/// it is due. The exporter sits behind one lock and concurrent scrapes share
/// collections ([`Coalesce`]), so no scrape starts a discovery while another
/// runs.
///
/// # Errors
/// As [`serve`].
pub fn serve_fabric<M>(
    listener: TcpListener,
    exporter: crate::fabric::FabricExporter<M>,
) -> io::Result<()>
where
    M: crate::fabric::Mads + Send + 'static,
{
    let exporter = Mutex::new(exporter);
    let render = move || locked(&exporter).scrape();
    serve(listener, Arc::new(render))
}

/// Accepts connections until accepting itself fails persistently, each served as
/// its own task, at most [`MAX_CONNECTIONS`] at once (see [`Slots`]).
///
/// # Errors
/// When the runtime cannot start, or the listener keeps failing to accept.
pub fn serve(listener: TcpListener, render: Arc<RenderFn>) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let co = Arc::new(Coalesce::new(render));
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let slots = Arc::new(Mutex::new(Slots::default()));
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
            let second = std::os::fd::AsFd::as_fd(&stream).try_clone_to_owned().ok();
            let Some((guard, stage)) = Slots::admit(&slots, second) else {
                tokio::spawn(async move {
                    let busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; \
                                charset=utf-8\r\nContent-Length: 21\r\nConnection: close\r\n\r\n\
                                too many connections\n";
                    let _ =
                        tokio::time::timeout(BUSY_WRITE_TIMEOUT, stream.write_all(busy.as_bytes()))
                            .await;
                });
                continue;
            };
            let co = Arc::clone(&co);
            let id = guard.id;
            // Aborted when evicted: the task is dropped at its next await, which
            // closes the connection.
            let task = tokio::spawn(async move {
                let _guard = guard;
                // A second handle on the socket, to answer a head cut short by the
                // client's EOF, which hyper drops without a word.
                let Ok((stream, spare)) = with_spare(stream) else {
                    return;
                };
                let st = Arc::clone(&stage);
                let service = hyper::service::service_fn(move |req| {
                    handle(req, Arc::clone(&co), Arc::clone(&st))
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEAD_TIMEOUT)
                    .max_buf_size(MAX_HEAD)
                    .keep_alive(false)
                    .half_close(true)
                    .serve_connection(TokioIo::new(stream), service);
                let served = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
                // Other errors are the client's too (a reset, a timeout, a malformed
                // head hyper already answered with 400 or 431).
                if let Ok(Err(e)) = served {
                    if e.is_incomplete_message() {
                        let _ = std::io::Write::write_all(&mut &spare, CUT_SHORT.as_bytes());
                    }
                }
            });
            // The runtime has one thread: the task has not run yet, so it is still
            // in the table.
            Slots::task(&slots, id, task.abort_handle());
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

    #[test]
    fn a_full_table_closes_its_oldest_connection_not_being_answered() {
        let slots = Arc::new(Mutex::new(Slots::default()));
        let mut held: Vec<(SlotGuard, Arc<AtomicU8>)> = (0..MAX_CONNECTIONS)
            .map(|_| Slots::admit(&slots, None).unwrap())
            .collect();
        // The two oldest are collecting for their requests: never evicted.
        held[0].1.store(COLLECTING, Ordering::SeqCst);
        held[1].1.store(COLLECTING, Ordering::SeqCst);
        held[3].1.store(ANSWERING, Ordering::SeqCst);
        let ids = |s: &Arc<Mutex<Slots>>| locked(s).open.keys().copied().collect::<Vec<_>>();
        let (new, _) = Slots::admit(&slots, None).unwrap();
        assert_eq!(new.id, MAX_CONNECTIONS as u64);
        assert!(
            !ids(&slots).contains(&2),
            "the oldest idle one (2) goes first"
        );
        assert!(ids(&slots).contains(&0) && ids(&slots).contains(&1));
        let _next = Slots::admit(&slots, None).unwrap();
        assert!(
            !ids(&slots).contains(&3),
            "then one whose client reads its answer slowly"
        );
        assert_eq!(locked(&slots).open.len(), MAX_CONNECTIONS);
        // Every slot collecting: the newcomer gets 503.
        for c in locked(&slots).open.values() {
            c.stage.store(COLLECTING, Ordering::SeqCst);
        }
        assert!(Slots::admit(&slots, None).is_none());
        // A connection that ends gives its slot back.
        drop(held.remove(5));
        assert!(Slots::admit(&slots, None).is_some());
    }

    /// A connection whose whole head waits unread (a scrape the server has not
    /// reached yet) is passed over for one that sent nothing, however much older.
    #[test]
    fn a_waiting_request_is_not_evicted_for_an_idle_connection() {
        use std::io::Write as _;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut scrape = std::net::TcpStream::connect(addr).unwrap();
        let (scrape_srv, _) = l.accept().unwrap();
        scrape
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let _idle = std::net::TcpStream::connect(addr).unwrap();
        let (idle_srv, _) = l.accept().unwrap();
        // Let the scrape's bytes arrive.
        std::thread::sleep(Duration::from_millis(50));
        let slots = Arc::new(Mutex::new(Slots::default()));
        let fd = |s: &std::net::TcpStream| Some(std::os::fd::OwnedFd::from(s.try_clone().unwrap()));
        let (first, _) = Slots::admit(&slots, fd(&scrape_srv)).unwrap();
        let (second, _) = Slots::admit(&slots, fd(&idle_srv)).unwrap();
        let mut rest: Vec<_> = (2..MAX_CONNECTIONS)
            .map(|_| Slots::admit(&slots, None).unwrap())
            .collect();
        let (_new, _) = Slots::admit(&slots, None).unwrap();
        let ids: Vec<u64> = locked(&slots).open.keys().copied().collect();
        assert!(ids.contains(&first.id), "the waiting scrape was evicted");
        assert!(!ids.contains(&second.id), "the idle connection stayed");
        rest.clear();
    }

    #[test]
    fn concurrent_scrapes_share_collections_and_each_gets_a_fresh_one() {
        let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let c2 = Arc::clone(&count);
        let co = Arc::new(Coalesce::new(Arc::new(move || {
            let n = c2.fetch_add(1, Ordering::SeqCst) + 1;
            std::thread::sleep(Duration::from_millis(500));
            format!("collection {n}\n")
        })));
        let ready = Arc::new(std::sync::Barrier::new(32));
        let threads: Vec<_> = (0..32)
            .map(|_| {
                let (co, ready) = (Arc::clone(&co), Arc::clone(&ready));
                std::thread::spawn(move || {
                    ready.wait();
                    co.collect().unwrap()
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n = count.load(Ordering::SeqCst);
        assert!(
            (1..=2).contains(&n),
            "{n} collections for 32 scrapes at once"
        );
        // Later, one alone: a new collection, not the stored one.
        assert_eq!(
            co.collect().unwrap().as_str(),
            format!("collection {}\n", n + 1)
        );
    }

    #[test]
    fn a_collection_that_panics_is_none_and_the_next_one_runs() {
        let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let f2 = Arc::clone(&first);
        let co = Coalesce::new(Arc::new(move || {
            if f2.swap(false, Ordering::SeqCst) {
                panic!("boom");
            }
            "ok\n".to_string()
        }));
        assert!(co.collect().is_none());
        assert_eq!(co.collect().unwrap().as_str(), "ok\n");
    }
}
