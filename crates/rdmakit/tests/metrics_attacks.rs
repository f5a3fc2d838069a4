//! Against the real `rdmakit metrics --listen`: clients that open
//! connections and never finish a request cannot keep a scrape out. On main
//! before the fix, 64 idle connections re-opened as they closed made every
//! scrape fail (503, then a reset) for as long as they were held.
//!
//! Each test holds the connections from a thread of its own
//! ([`rdmakit_testkit::hold`], re-opening every connection the exporter
//! closes) and scrapes meanwhile: every scrape must be a 200 within
//! [`LIMIT`] (an unloaded scrape of this fixture takes some 20 ms).

mod common;
mod metrics_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use metrics_common::*;
use rdmakit_testkit::hold::{Holder, Style};

/// How long a scrape may take while the attack runs.
const LIMIT: Duration = Duration::from_secs(10);

/// One scrape: its status (0 when it got no answer) and how long it took.
fn timed_scrape(addr: SocketAddr) -> (u16, Duration) {
    let t = Instant::now();
    let Ok(mut s) = TcpStream::connect_timeout(&addr, LIMIT) else {
        return (0, t.elapsed());
    };
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.set_write_timeout(Some(LIMIT)).unwrap();
    if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: scraper\r\n\r\n")
        .is_err()
    {
        return (0, t.elapsed());
    }
    let mut buf = Vec::new();
    if s.read_to_end(&mut buf).is_err() || buf.is_empty() {
        return (0, t.elapsed());
    }
    let r = parse_response(&buf);
    assert!(
        r.status != 200 || r.text().contains("rdmakit_collect_duration_seconds"),
        "a 200 without the exposition"
    );
    (r.status, t.elapsed())
}

/// Scrapes `n` times while `held` holds its connections; asserts each is a 200
/// within [`LIMIT`] and prints the figures.
fn scrapes_get_through(what: &str, addr: SocketAddr, held: &Holder, n: usize) {
    let mut took = Vec::new();
    for i in 0..n {
        let (status, t) = timed_scrape(addr);
        assert_eq!(
            status, 200,
            "scrape {i} while {what}: status {status} after {t:?}"
        );
        assert!(t < LIMIT, "scrape {i} while {what} took {t:?}");
        took.push(t);
        std::thread::sleep(Duration::from_millis(300));
    }
    took.sort();
    eprintln!(
        "{what}: {n} scrapes, median {:?}, max {:?}; the attacker opened {} connections, \
         the exporter closed {}",
        took[n / 2],
        took[n - 1],
        held.opened(),
        held.closed_by_server()
    );
}

#[test]
fn a_scrape_gets_through_while_200_idle_connections_are_held() {
    let e = Exporter::start(&["--from", &fixture("healthy")]);
    let (status, alone) = timed_scrape(e.addr);
    assert_eq!(status, 200);
    eprintln!("a scrape alone: {alone:?}");
    let held = Holder::start(e.addr, 200, Style::Idle);
    scrapes_get_through("200 idle connections are held", e.addr, &held, 5);
    // The attack was real: more were held than the exporter serves at once, so it
    // closed some of them to let the scrapes in.
    assert!(held.closed_by_server() > 0, "the exporter closed nothing");
}

#[test]
fn a_scrape_gets_through_while_200_slowloris_connections_trickle() {
    let e = Exporter::start(&["--from", &fixture("healthy")]);
    let held = Holder::start(
        e.addr,
        200,
        Style::Trickle {
            bytes: b"GET /metrics HTTP/1.1\r\nX-Slow: ",
            every: Duration::from_secs(3),
        },
    );
    scrapes_get_through(
        "200 connections send a request head a byte every 3 s",
        e.addr,
        &held,
        5,
    );
}

/// Slow headers are cut at one deadline for the whole head (5 s), not a
/// timeout per read that each trickled byte would restart.
#[test]
fn a_trickled_head_is_cut_at_its_deadline() {
    let e = Exporter::start(&["--from", &fixture("healthy")]);
    let mut s = TcpStream::connect(e.addr).unwrap();
    s.set_nonblocking(true).unwrap();
    let t = Instant::now();
    let head = b"GET /metrics HTTP/1.1\r\nX-Slow: ";
    let mut closed = None;
    let mut i = 0;
    while t.elapsed() < Duration::from_secs(20) {
        let _ = s.write(&head[i % head.len()..][..1]);
        i += 1;
        std::thread::sleep(Duration::from_millis(500));
        let mut b = [0u8; 512];
        match s.read(&mut b) {
            Ok(_) => {
                closed = Some(t.elapsed());
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => {
                closed = Some(t.elapsed());
                break;
            }
        }
    }
    let closed = closed.expect("a head trickled for 20 s was never cut");
    assert!(
        closed < Duration::from_secs(10),
        "cut only after {closed:?} (a byte every 0.5 s)"
    );
}
