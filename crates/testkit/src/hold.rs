//! Connections held open against a server, as an attacker holds them:
//! idle, or trickling a byte at a time (slowloris), each re-opened as soon
//! as the server closes it, until the [`Holder`] is dropped.
//!
//! The attacks need no privilege (anyone who can connect can make them),
//! so they run as threads of the test itself.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the held connections send.
#[derive(Clone, Copy, Debug)]
pub enum Style {
    /// Nothing at all.
    Idle,
    /// `bytes[i]` on each connection every `every`, cycling (a request head
    /// that never ends).
    Trickle {
        /// The bytes to send, one at a time.
        bytes: &'static [u8],
        /// How often.
        every: Duration,
    },
}

/// `n` connections to `addr` held open in `style` by a thread; stops (and
/// closes them) when dropped.
pub struct Holder {
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicU64>,
    closed: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Holder {
    /// Starts holding, and waits until all `n` are open the first time
    /// (panics if that takes over 20 s: the attack did not happen).
    pub fn start(addr: SocketAddr, n: usize, style: Style) -> Holder {
        let stop = Arc::new(AtomicBool::new(false));
        let opened = Arc::new(AtomicU64::new(0));
        let closed = Arc::new(AtomicU64::new(0));
        let (s2, o2, c2) = (Arc::clone(&stop), Arc::clone(&opened), Arc::clone(&closed));
        let thread = std::thread::Builder::new()
            .name("attacker".into())
            .spawn(move || hold(addr, n, style, &s2, &o2, &c2))
            .expect("start the attacker thread");
        let h = Holder {
            stop,
            opened,
            closed,
            thread: Some(thread),
        };
        let t = Instant::now();
        while h.opened() < n as u64 {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "only {} of {n} connections to {addr} opened in 20 s",
                h.opened()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        h
    }

    /// Connections opened so far (the first `n` and every re-opening).
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::SeqCst)
    }

    /// Connections the server closed so far.
    pub fn closed_by_server(&self) -> u64 {
        self.closed.load(Ordering::SeqCst)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn hold(
    addr: SocketAddr,
    n: usize,
    style: Style,
    stop: &AtomicBool,
    opened: &AtomicU64,
    closed: &AtomicU64,
) {
    let mut conns: Vec<(TcpStream, usize)> = Vec::with_capacity(n);
    let mut last_trickle = Instant::now();
    let mut sink = [0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        // Drop what the server closed (reading and discarding what it sent).
        conns.retain_mut(|(s, _)| loop {
            match s.read(&mut sink) {
                Ok(0) => {
                    closed.fetch_add(1, Ordering::SeqCst);
                    return false;
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    closed.fetch_add(1, Ordering::SeqCst);
                    return false;
                }
            }
        });
        // Re-open up to n.
        while conns.len() < n && !stop.load(Ordering::SeqCst) {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(s) => {
                    let _ = s.set_nonblocking(true);
                    conns.push((s, 0));
                    opened.fetch_add(1, Ordering::SeqCst);
                }
                Err(_) => break,
            }
        }
        if let Style::Trickle { bytes, every } = style {
            if last_trickle.elapsed() >= every && !bytes.is_empty() {
                last_trickle = Instant::now();
                for (s, i) in &mut conns {
                    let _ = s.write(&bytes[*i % bytes.len()..][..1]);
                    *i += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
