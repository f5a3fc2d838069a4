//! Waking a ring's receiver: an empty datagram to its socket, owed by a
//! sender that found the ring's `sleeping` flag up after publishing
//! ([`super::Outbox::push`] returned [`super::Pushed::Wake`]).
//!
//! A thread may hold its wake-ups while it works through a batch
//! ([`hold`]: a receive drain, whose every packet may transmit): they go
//! out when the hold ends, one per receiver, with everything the batch
//! produced waiting in the rings. Woken at the first packet instead, a
//! receiver takes that packet alone, and on a shared core it preempts
//! this thread before the next: a 64 KiB same-host WRITE stream then cost
//! two context switches per message and ran at 0.3-0.4 of its speed.

use std::cell::RefCell;
use std::net::{SocketAddrV4, UdpSocket};

thread_local! {
    /// The receivers this thread owes a wake-up while it holds them;
    /// `None` when it does not hold.
    static HELD: RefCell<Option<Vec<SocketAddrV4>>> = const { RefCell::new(None) };
}

/// Wakes the ring receiver at `to` from `sock`, now or — while this thread
/// holds its wake-ups — when the hold ends.
pub(crate) fn wake(sock: &UdpSocket, to: SocketAddrV4) {
    let held = HELD.with(|h| match h.borrow_mut().as_mut() {
        Some(v) => {
            if !v.contains(&to) {
                v.push(to);
            }
            true
        }
        None => false,
    });
    if !held {
        let _ = sock.send_to(&[], to);
    }
}

/// Holds this thread's wake-ups until the returned guard drops; they are
/// sent from `sock` then. A hold inside a hold adds to the outer one.
pub(crate) fn hold(sock: &UdpSocket) -> Hold<'_> {
    let outer = HELD.with(|h| {
        let mut h = h.borrow_mut();
        let outer = h.is_none();
        if outer {
            *h = Some(Vec::new());
        }
        outer
    });
    Hold { sock, outer }
}

/// See [`hold`].
#[must_use]
pub(crate) struct Hold<'a> {
    sock: &'a UdpSocket,
    outer: bool,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        if !self.outer {
            return;
        }
        let owed = HELD.with(|h| h.borrow_mut().take()).unwrap_or_default();
        for to in owed {
            let _ = self.sock.send_to(&[], to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    fn socket() -> (UdpSocket, SocketAddrV4) {
        let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let std::net::SocketAddr::V4(a) = s.local_addr().unwrap() else {
            unreachable!()
        };
        (s, a)
    }

    /// The wake-ups `b` received from `a` so far: `a` sends a one-byte
    /// marker, which arrives after them (one flow on loopback keeps its
    /// order).
    fn wakes(a: &UdpSocket, b: &UdpSocket, to: SocketAddrV4) -> usize {
        a.send_to(&[1], to).unwrap();
        let mut n = 0;
        loop {
            match b.recv_from(&mut [0u8; 8]).unwrap() {
                (0, _) => n += 1,
                _ => return n,
            }
        }
    }

    fn held() -> Option<Vec<SocketAddrV4>> {
        HELD.with(|h| h.borrow().clone())
    }

    #[test]
    fn a_wake_outside_a_hold_goes_at_once() {
        let (a, _) = socket();
        let (b, to) = socket();
        wake(&a, to);
        assert_eq!(held(), None);
        assert_eq!(wakes(&a, &b, to), 1);
    }

    #[test]
    fn a_hold_sends_each_receiver_one_wake_when_it_ends() {
        let (a, _) = socket();
        let (b, to) = socket();
        let (c, to2) = socket();
        {
            let _h = hold(&a);
            wake(&a, to);
            {
                let _inner = hold(&a);
                wake(&a, to);
                wake(&a, to2);
            }
            assert_eq!(held(), Some(vec![to, to2]), "held past the inner hold");
            wake(&a, to);
        }
        assert_eq!(held(), None);
        assert_eq!(wakes(&a, &b, to), 1);
        assert_eq!(wakes(&a, &c, to2), 1);
        wake(&a, to);
        assert_eq!(wakes(&a, &b, to), 1, "not held once the hold ended");
    }
}
