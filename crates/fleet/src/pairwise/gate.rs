//! Connections that have proven nothing yet: a bounded pool read by one
//! thread, where each connection has one deadline for its whole first line
//! and an idle or slow peer cannot keep anyone else out.
//!
//! - **No thread per stranger.** Pending connections are non-blocking
//!   sockets polled together ([`Pool::poll`]); the thread that owns the pool
//!   never waits on any one of them.
//! - **One deadline per connection**, set when it arrives: a peer sending a
//!   byte every few seconds (slowloris) is cut off at the same time as one
//!   sending nothing.
//! - **A bounded pool that evicts its oldest.** When a connection arrives and
//!   the pool is full, the oldest pending connection is closed
//!   ([`Pool::push`] hands it back to be logged). A real peer answers within
//!   a round trip, so it is always among the youngest; to push it out, an
//!   attacker must open `cap` connections within that round trip.
//! - **Nothing past the line is consumed** ([`advance`] peeks, then reads up
//!   to the newline), so a protocol that continues on the same stream (the
//!   perf exchange after a test ticket) finds its bytes intact.

use std::collections::VecDeque;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags};

/// Why no line was had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// The peer closed before the newline.
    Closed,
    /// More than the bound without a newline.
    TooLong(usize),
    /// The deadline passed.
    Timeout(Duration),
    /// A socket error.
    Io(String),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Closed => f.write_str("closed the connection"),
            LineError::TooLong(max) => write!(f, "a line longer than {max} bytes"),
            LineError::Timeout(d) => write!(
                f,
                "no complete line within {:.1} s of connecting",
                d.as_secs_f64()
            ),
            LineError::Io(e) => f.write_str(e),
        }
    }
}

/// Moves what has arrived of the current line from `s` into `buf` (one
/// peek and one read: on a blocking socket it waits at most its read
/// timeout), never past its newline. `Ok(Some(line))` (without the
/// newline) once it is complete, `Ok(None)` while more is needed.
///
/// # Errors
/// [`LineError::Closed`] at EOF, [`LineError::TooLong`] past `max` bytes,
/// [`LineError::Io`] on socket errors.
pub fn advance(s: &TcpStream, buf: &mut Vec<u8>, max: usize) -> Result<Option<Vec<u8>>, LineError> {
    let mut chunk = [0u8; 2048];
    let room = (max + 1).saturating_sub(buf.len()).min(chunk.len());
    if room == 0 {
        return Err(LineError::TooLong(max));
    }
    let n = loop {
        match s.peek(&mut chunk[..room]) {
            Ok(0) => return Err(LineError::Closed),
            Ok(n) => break n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(None)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(LineError::Io(e.to_string())),
        }
    };
    let end = chunk[..n].iter().position(|&b| b == b'\n');
    let take = end.map_or(n, |i| i + 1);
    // The bytes were peeked, so they are in the receive queue: the read
    // returns them at once.
    (&mut &*s)
        .read_exact(&mut chunk[..take])
        .map_err(|e| LineError::Io(e.to_string()))?;
    buf.extend_from_slice(&chunk[..take]);
    if end.is_some() {
        let mut line = std::mem::take(buf);
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        return Ok(Some(line));
    }
    if buf.len() > max {
        return Err(LineError::TooLong(max));
    }
    Ok(None)
}

/// Reads one line of at most `max` bytes from a blocking socket by
/// `deadline`, consuming nothing past its newline: the deadline is for the
/// whole line, however the peer spreads its bytes.
///
/// # Errors
/// As [`advance`], and [`LineError::Timeout`] (`budget` is what it reports).
pub fn read_line_by(
    s: &TcpStream,
    max: usize,
    deadline: Instant,
    budget: Duration,
) -> Result<Vec<u8>, LineError> {
    let mut buf = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(LineError::Timeout(budget));
        }
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .map_err(|e| LineError::Io(e.to_string()))?;
        if let Some(line) = advance(s, &mut buf, max)? {
            return Ok(line);
        }
    }
}

/// A connection waiting for its first line.
#[derive(Debug)]
pub struct Pending<T> {
    /// The socket (non-blocking while pending).
    pub stream: TcpStream,
    /// The peer.
    pub from: SocketAddr,
    /// When it arrived.
    pub since: Instant,
    /// When its time is up.
    pub deadline: Instant,
    /// What the owner keeps with it (a handshake's nonce).
    pub state: T,
    budget: Duration,
    max: usize,
    buf: Vec<u8>,
}

impl<T> Pending<T> {
    /// A connection that has `budget` from now for a line of at most `max`
    /// bytes. The socket is made non-blocking.
    ///
    /// # Errors
    /// When the socket cannot be made non-blocking.
    pub fn new(
        stream: TcpStream,
        from: SocketAddr,
        budget: Duration,
        max: usize,
        state: T,
    ) -> std::io::Result<Pending<T>> {
        stream.set_nonblocking(true)?;
        let since = Instant::now();
        Ok(Pending {
            stream,
            from,
            since,
            deadline: since + budget,
            state,
            budget,
            max,
            buf: Vec::new(),
        })
    }
}

impl<T> Pending<T> {
    /// The socket, the peer and the owner's state.
    pub fn into_parts(self) -> (TcpStream, SocketAddr, T) {
        (self.stream, self.from, self.state)
    }
}

/// What became of a pending connection.
#[derive(Debug)]
pub enum Outcome<T> {
    /// Its line arrived (without the newline); the socket is still
    /// non-blocking.
    Line(Pending<T>, Vec<u8>),
    /// It failed: closed, too long, out of time, a socket error.
    Failed(Pending<T>, LineError),
}

/// Pending connections, oldest first, at most `cap`.
#[derive(Debug)]
pub struct Pool<T> {
    cap: usize,
    items: VecDeque<Pending<T>>,
}

impl<T> Pool<T> {
    /// An empty pool holding at most `cap` (at least 1) connections.
    pub fn new(cap: usize) -> Pool<T> {
        Pool {
            cap: cap.max(1),
            items: VecDeque::new(),
        }
    }

    /// How many are pending.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Adds `p`; when the pool was full, the oldest connection is taken out
    /// and returned (the caller logs it and drops it, which closes it).
    pub fn push(&mut self, p: Pending<T>) -> Option<Pending<T>> {
        let evicted = if self.items.len() >= self.cap {
            self.items.pop_front()
        } else {
            None
        };
        self.items.push_back(p);
        evicted
    }

    /// Takes out the oldest (to free a descriptor when accept runs out).
    pub fn evict_oldest(&mut self) -> Option<Pending<T>> {
        self.items.pop_front()
    }

    /// Waits until `extra` (a listener) is readable, a pending connection
    /// has news, a deadline passes, or `wait` is over; then reads what
    /// arrived. Returns whether `extra` is readable, and what became of the
    /// connections that completed or failed.
    ///
    /// # Errors
    /// Only when poll(2) itself fails (EINTR is not a failure).
    pub fn poll(
        &mut self,
        extra: Option<&impl AsFd>,
        wait: Duration,
    ) -> std::io::Result<(bool, Vec<Outcome<T>>)> {
        let now = Instant::now();
        let soonest = self
            .items
            .iter()
            .map(|p| p.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or(wait);
        let timeout = wait.min(soonest);
        // Round up: waking a millisecond early would spin until the deadline.
        let ms = i32::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        let (extra_ready, readable) = {
            let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(self.items.len() + 1);
            if let Some(x) = extra {
                fds.push(PollFd::new(x, PollFlags::IN));
            }
            for p in &self.items {
                fds.push(PollFd::new(&p.stream, PollFlags::IN));
            }
            match poll(&mut fds, ms) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            let ready = |f: &PollFd<'_>| !f.revents().is_empty();
            let off = usize::from(extra.is_some());
            let extra_ready = extra.is_some() && ready(&fds[0]);
            let readable: Vec<bool> = fds[off..].iter().map(ready).collect();
            (extra_ready, readable)
        };
        let mut out = Vec::new();
        let mut keep = VecDeque::with_capacity(self.items.len());
        let now = Instant::now();
        for (mut p, r) in self.items.drain(..).zip(readable) {
            if r {
                match advance(&p.stream, &mut p.buf, p.max) {
                    Ok(Some(line)) => {
                        out.push(Outcome::Line(p, line));
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        out.push(Outcome::Failed(p, e));
                        continue;
                    }
                }
            }
            if now >= p.deadline {
                let budget = p.budget;
                out.push(Outcome::Failed(p, LineError::Timeout(budget)));
            } else {
                keep.push_back(p);
            }
        }
        self.items = keep;
        Ok((extra_ready, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, from) = l.accept().unwrap();
        (c, s, from)
    }

    #[test]
    fn nothing_past_the_newline_is_consumed() {
        let (mut c, s, _) = pair();
        c.write_all(b"TICKET ab\r\nperf bytes").unwrap();
        let line = read_line_by(
            &s,
            80,
            Instant::now() + Duration::from_secs(5),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(line, b"TICKET ab");
        let mut rest = [0u8; 10];
        (&s).read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"perf bytes");
    }

    #[test]
    fn the_deadline_is_for_the_whole_line_not_each_read() {
        let (mut c, s, _) = pair();
        let t = std::thread::spawn(move || {
            // A byte every 150 ms: each read is quick, the line never ends.
            for _ in 0..20 {
                if c.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(150));
            }
        });
        let start = Instant::now();
        let budget = Duration::from_millis(600);
        let e = read_line_by(&s, 1024, start + budget, budget).unwrap_err();
        assert_eq!(e, LineError::Timeout(budget));
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        drop(s);
        t.join().unwrap();
    }

    #[test]
    fn long_lines_and_eof_fail() {
        let (mut c, s, _) = pair();
        c.write_all(&[b'{'; 100]).unwrap();
        let far = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            read_line_by(&s, 64, far, Duration::from_secs(5)).unwrap_err(),
            LineError::TooLong(64)
        );
        let (mut c, s, _) = pair();
        c.write_all(b"half").unwrap();
        drop(c);
        assert_eq!(
            read_line_by(&s, 64, far, Duration::from_secs(5)).unwrap_err(),
            LineError::Closed
        );
        // Exactly `max` bytes and the newline: accepted.
        let (mut c, s, _) = pair();
        c.write_all(&[b'a'; 64]).unwrap();
        c.write_all(b"\n").unwrap();
        assert_eq!(
            read_line_by(&s, 64, far, Duration::from_secs(5))
                .unwrap()
                .len(),
            64
        );
    }

    #[test]
    fn a_full_pool_evicts_its_oldest_and_lines_and_deadlines_come_out() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let mut pool: Pool<usize> = Pool::new(3);
        let mut clients = Vec::new();
        let mut evicted = Vec::new();
        for i in 0..5 {
            clients.push(TcpStream::connect(at).unwrap());
            let (s, from) = l.accept().unwrap();
            let p = Pending::new(s, from, Duration::from_millis(300), 64, i).unwrap();
            if let Some(old) = pool.push(p) {
                evicted.push(old.state);
            }
        }
        assert_eq!(evicted, [0, 1]);
        assert_eq!(pool.len(), 3);
        // The evicted ones were closed: their clients read EOF.
        drop(evicted);
        clients[4].write_all(b"hello\n").unwrap();
        let t = Instant::now();
        let mut lines = Vec::new();
        let mut failed = Vec::new();
        while !pool.is_empty() && t.elapsed() < Duration::from_secs(5) {
            let (_, out) = pool
                .poll(None::<&TcpStream>, Duration::from_millis(100))
                .unwrap();
            for o in out {
                match o {
                    Outcome::Line(p, l) => lines.push((p.state, l)),
                    Outcome::Failed(p, e) => failed.push((p.state, e)),
                }
            }
        }
        assert_eq!(lines, [(4, b"hello".to_vec())]);
        let d = Duration::from_millis(300);
        assert_eq!(
            failed,
            [(2, LineError::Timeout(d)), (3, LineError::Timeout(d))]
        );
    }
}
