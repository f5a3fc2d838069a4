//! The soft NIC's same-host request header (vendor opcodes 0xC0–0xC2).
//!
//! Two processes on one host using the soft RoCEv2 NIC move a large RC
//! RDMA WRITE, SEND or RDMA READ with one cross-memory copy
//! (`process_vm_readv` / `process_vm_writev`) instead of MTU-sized
//! datagrams. The requester sends a single packet: a normal BTH whose
//! opcode is one of [`OP_WRITE`], [`OP_SEND`], [`OP_READ`] (the IBTA's
//! manufacturer-specific range 0xC0–0xFF) and whose PSN range covers the
//! packets it replaces, followed by this header and no payload:
//!
//! ```text
//!  0  iovec count (u8, 1..=16) | flags (u8, 0) | reserved (u16, 0)
//!  4  message length (u32)
//!  8  R_Key (u32; 0 for SEND)        12  reserved (u32, 0)
//! 16  remote virtual address (u64; 0 for SEND)
//! 24  iovec[i]: host address (u64), length (u64, not 0) — the requester's
//!     own buffers
//! ```
//!
//! The header names no process: such a request is only ever taken from a
//! same-host ring, whose sender the kernel identified when the ring was set
//! up (`SO_PEERCRED` and a pidfd on a Unix socket, in the soft NIC), and the
//! copy reaches that process's memory alone. A receiver drops these opcodes
//! when they arrive in a UDP datagram. A responder that cannot copy answers
//! a NAK of code [`NAK_DECLINE`]; the requester then sends that QP's
//! messages as ordinary packets.

use core::fmt;

use crate::view::len_at_least;
use crate::{Error, Result};

/// Same-host RDMA WRITE (the responder pulls from the requester).
pub const OP_WRITE: u8 = 0xC0;
/// Same-host SEND (the responder pulls into a receive WQE).
pub const OP_SEND: u8 = 0xC1;
/// Same-host RDMA READ (the responder pushes into the requester).
pub const OP_READ: u8 = 0xC2;
/// The NAK code (AETH syndrome `0b011_11110`, 0x7e) of a responder that
/// declines a same-host request; the requester falls back to packets.
pub const NAK_DECLINE: u8 = 0x1e;
/// The AETH syndrome byte of [`NAK_DECLINE`].
pub const SYNDROME_DECLINE: u8 = 0x60 | NAK_DECLINE;
/// Most iovecs one request names.
pub const MAX_IOV: usize = 16;
/// Length of the fixed part (before the iovecs).
pub const FIXED_LEN: usize = 24;
/// Length of one iovec entry.
pub const IOV_LEN: usize = 16;

/// Whether a BTH opcode is one of the same-host requests.
pub const fn is_cma_opcode(op: u8) -> bool {
    matches!(op, OP_WRITE | OP_SEND | OP_READ)
}

/// The name of a same-host opcode, for captures and logs.
pub const fn opcode_name(op: u8) -> Option<&'static str> {
    match op {
        OP_WRITE => Some("SOFT_SAME_HOST_WRITE"),
        OP_SEND => Some("SOFT_SAME_HOST_SEND"),
        OP_READ => Some("SOFT_SAME_HOST_READ"),
        _ => None,
    }
}

mod field {
    use crate::field::Field;
    pub const NIOV: usize = 0;
    pub const FLAGS: usize = 1;
    pub const RESERVED: Field = 2..4;
    pub const LEN: Field = 4..8;
    pub const RKEY: Field = 8..12;
    pub const RESERVED2: Field = 12..16;
    pub const VA: Field = 16..24;
}

fn be32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// A read/write view of a same-host header.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after [`Packet::check_len`].
    ///
    /// # Errors
    /// As `check_len`.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` when the buffer is shorter than the fixed part or than
    /// the iovecs it announces; `Malformed` for 0 or more than
    /// [`MAX_IOV`] iovecs. After it passes no getter panics.
    ///
    /// # Errors
    /// As above.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        len_at_least(b, FIXED_LEN)?;
        let n = usize::from(b[field::NIOV]);
        if n == 0 || n > MAX_IOV {
            return Err(Error::Malformed);
        }
        if b.len() < FIXED_LEN + n * IOV_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Number of iovecs.
    pub fn iov_count(&self) -> u8 {
        self.buffer.as_ref()[field::NIOV]
    }
    /// Flags (0).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    /// Message length.
    pub fn len(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::LEN])
    }
    /// Whether the message is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// R_Key of the responder's buffer (WRITE, READ).
    pub fn rkey(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::RKEY])
    }
    /// Virtual address in the responder's buffer (WRITE, READ).
    pub fn va(&self) -> u64 {
        be64(&self.buffer.as_ref()[field::VA])
    }
    /// Iovec `i` (host address, length); `(0, 0)` past the count.
    pub fn iov(&self, i: usize) -> (u64, u64) {
        if i >= usize::from(self.iov_count()) || i >= MAX_IOV {
            return (0, 0);
        }
        let b = &self.buffer.as_ref()[FIXED_LEN + i * IOV_LEN..];
        match (b.get(..8), b.get(8..16)) {
            (Some(a), Some(l)) => (be64(a), be64(l)),
            _ => (0, 0),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the iovec count, flags and reserved bytes.
    pub fn set_iov_count(&mut self, v: u8) {
        let b = self.buffer.as_mut();
        b[field::NIOV] = v;
        b[field::FLAGS] = 0;
        b[field::RESERVED].fill(0);
    }
    /// Sets the message length.
    pub fn set_len(&mut self, v: u32) {
        self.buffer.as_mut()[field::LEN].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the R_Key (and the reserved word after it).
    pub fn set_rkey(&mut self, v: u32) {
        let b = self.buffer.as_mut();
        b[field::RKEY].copy_from_slice(&v.to_be_bytes());
        b[field::RESERVED2].fill(0);
    }
    /// Sets the virtual address.
    pub fn set_va(&mut self, v: u64) {
        self.buffer.as_mut()[field::VA].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets iovec `i` (must be below the buffer's room).
    pub fn set_iov(&mut self, i: usize, addr: u64, len: u64) {
        let at = FIXED_LEN + i * IOV_LEN;
        let b = self.buffer.as_mut();
        b[at..at + 8].copy_from_slice(&addr.to_be_bytes());
        b[at + 8..at + 16].copy_from_slice(&len.to_be_bytes());
    }
}

/// A same-host request header as plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Message length (the sum of the iovec lengths).
    pub len: u32,
    /// R_Key (WRITE, READ; 0 for SEND).
    pub rkey: u32,
    /// Remote virtual address (WRITE, READ; 0 for SEND).
    pub va: u64,
    /// Number of iovecs in use.
    pub iov_count: u8,
    /// The requester's buffers (host address, length); the first
    /// `iov_count` are used.
    pub iov: [(u64, u64); MAX_IOV],
}

impl Repr {
    /// Parses a checked view.
    ///
    /// # Errors
    /// `check_len`'s errors; `Malformed` when flags or reserved bytes are
    /// set, an iovec is empty, or the iovec lengths do not add up to the
    /// message length.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let b = p.buffer.as_ref();
        if p.flags() != 0 || b[field::RESERVED] != [0, 0] || b[field::RESERVED2] != [0; 4] {
            return Err(Error::Malformed);
        }
        let n = usize::from(p.iov_count());
        let mut iov = [(0u64, 0u64); MAX_IOV];
        let mut total = 0u64;
        for (i, e) in iov.iter_mut().enumerate().take(n) {
            *e = p.iov(i);
            if e.1 == 0 {
                return Err(Error::Malformed);
            }
            total = total.checked_add(e.1).ok_or(Error::Malformed)?;
        }
        if total != u64::from(p.len()) {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            len: p.len(),
            rkey: p.rkey(),
            va: p.va(),
            iov_count: p.iov_count(),
            iov,
        })
    }

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        FIXED_LEN + usize::from(self.iov_count).min(MAX_IOV) * IOV_LEN
    }

    /// The iovecs in use.
    pub fn iovecs(&self) -> &[(u64, u64)] {
        &self.iov[..usize::from(self.iov_count).min(MAX_IOV)]
    }

    /// Writes the header into a buffer of at least `buffer_len()` bytes.
    ///
    /// # Errors
    /// `Truncated` for a shorter buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        if p.buffer.as_ref().len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        p.set_iov_count(self.iov_count.min(MAX_IOV as u8));
        p.set_len(self.len);
        p.set_rkey(self.rkey);
        p.set_va(self.va);
        for (i, &(a, l)) in self.iovecs().iter().enumerate() {
            p.set_iov(i, a, l);
        }
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SAME-HOST len {} rkey 0x{:x} va 0x{:x} iov {}",
            self.len, self.rkey, self.va, self.iov_count
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A two-iovec WRITE header as the soft NIC emits it: 96 KiB into rkey
    // 0x1234 at 0x7f00_0000_1000.
    static HDR: [u8; 56] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x80, 0x00, 0x00, 0x00, 0x12, 0x34, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x56, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x56, 0x00, 0x00,
        0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00,
    ];

    fn repr() -> Repr {
        let mut iov = [(0, 0); MAX_IOV];
        iov[0] = (0x5600_0000_0000, 0x1_0000);
        iov[1] = (0x5600_0010_0000, 0x8000);
        Repr {
            len: 0x1_8000,
            rkey: 0x1234,
            va: 0x7f00_0000_1000,
            iov_count: 2,
            iov,
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&HDR[..]).unwrap();
        assert_eq!(p.iov_count(), 2);
        assert_eq!(p.len(), 0x1_8000);
        assert_eq!(p.rkey(), 0x1234);
        assert_eq!(p.va(), 0x7f00_0000_1000);
        assert_eq!(p.iov(1), (0x5600_0010_0000, 0x8000));
        assert_eq!(p.iov(2), (0, 0));
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 56];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_iov_count(2);
        p.set_len(0x1_8000);
        p.set_rkey(0x1234);
        p.set_va(0x7f00_0000_1000);
        p.set_iov(0, 0x5600_0000_0000, 0x1_0000);
        p.set_iov(1, 0x5600_0010_0000, 0x8000);
        assert_eq!(b, HDR);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&HDR[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emit() {
        let r = repr();
        assert_eq!(r.buffer_len(), 56);
        let mut b = [0xa5u8; 56];
        r.emit(&mut Packet::new_unchecked(&mut b[..])).unwrap();
        assert_eq!(b, HDR);
        let mut short = [0u8; 55];
        assert_eq!(
            r.emit(&mut Packet::new_unchecked(&mut short[..])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn malformed_headers_are_errors() {
        assert_eq!(
            Packet::new_checked(&HDR[..FIXED_LEN - 1]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&HDR[..55]).unwrap_err(),
            Error::Truncated
        );
        let mut b = HDR;
        b[0] = 0;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        b[0] = 17;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        let parsed = |b: &[u8]| Repr::parse(&Packet::new_checked(b).unwrap());
        // Lengths that do not add up.
        let mut b = HDR;
        b[7] = 1;
        assert_eq!(parsed(&b), Err(Error::Malformed));
        // A flag or a reserved byte set.
        for at in [1, 2, 3, 12, 15] {
            let mut b = HDR;
            b[at] = 1;
            assert_eq!(parsed(&b), Err(Error::Malformed), "byte {at}");
        }
        // An empty iovec (the message length lowered to match).
        let mut r = repr();
        r.iov[1].1 = 0;
        r.len = 0x1_0000;
        let mut b = [0u8; 56];
        r.emit(&mut Packet::new_unchecked(&mut b[..])).unwrap();
        assert_eq!(parsed(&b), Err(Error::Malformed));
    }

    #[test]
    fn round_trip_every_iovec_count() {
        for n in 1..=MAX_IOV {
            let mut r = repr();
            r.iov_count = n as u8;
            for (i, e) in r.iov.iter_mut().enumerate() {
                *e = if i < n {
                    (0x1000 * i as u64, 100)
                } else {
                    (0, 0)
                };
            }
            r.len = 100 * n as u32;
            let mut b = vec![0xa5u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut b[..])).unwrap();
            let p = Packet::new_checked(&b[..]).unwrap();
            assert_eq!(Repr::parse(&p).unwrap(), r);
        }
    }
}
