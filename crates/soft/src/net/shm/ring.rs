//! One ring between two soft device contexts: the shared memory's layout,
//! the sending side ([`Outbox`]) and the receiving side ([`Inbox`]). What
//! uses them and why is in [`super`]; how a ring gets from one to the other
//! is [`super::channel`].

use std::net::SocketAddrV4;
use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustix::fs::SealFlags;

use super::channel::Peer;

/// The datagram a sender sends a receiver's UDP socket once it has handed
/// it a ring: "accept your channel's connections now". It carries nothing
/// else, and anyone may send it: it only makes the receiver look at its
/// own listening socket.
pub(crate) const NOTIFY: &[u8; 8] = b"RDKSHM02";

const MAGIC: u64 = u64::from_le_bytes(*b"RDKRING1");
/// Cells per ring: with [`CELL_DATA`] ~1.1 MB, a 128-PSN window of 4 KiB
/// packets twice over.
const CELLS: u64 = 256;
/// The largest packet a cell holds: a 4 KiB MTU's payload and every header
/// the engine puts before it.
pub(crate) const CELL_DATA: usize = 4096 + 120;
/// A cell: the packet's length (u32, 8 bytes reserved) and the packet,
/// rounded up to a cache line.
const CELL: usize = (8 + CELL_DATA).div_ceil(64) * 64;
const HEADER: usize = 256;
const SIZE: usize = HEADER + CELLS as usize * CELL;
// Header offsets: fields written once before `magic`, then one cache line
// for each side's counter (the sender's with its CPU) and one for the flag.
const OFF_MAGIC: usize = 0;
const OFF_CELLS: usize = 8;
const OFF_HEAD: usize = 64;
/// The CPU the sender ran on at its last push (beside `head`: read with it).
const OFF_SENDER_CPU: usize = 72;
const OFF_TAIL: usize = 128;
const OFF_SLEEPING: usize = 192;

/// A shared mapping of one ring's memory.
#[derive(Debug)]
struct Map {
    ptr: *mut u8,
}

// SAFETY: the mapping is shared memory; every access below is an atomic or
// a copy into or out of a cell that the single producer / single consumer
// protocol hands to one side at a time.
unsafe impl Send for Map {}
// SAFETY: as for Send.
unsafe impl Sync for Map {}

impl Map {
    fn new(fd: &OwnedFd) -> std::io::Result<Map> {
        // Populated: the ring's ~270 pages are allocated and mapped in this
        // one call instead of one page fault each during the first lap,
        // which the VM tier's TCG guest charges ~50 ms for per run of a
        // ping-pong (docs/soft-nic.md, "Same-host rings").
        // SAFETY: a fresh shared mapping of SIZE bytes of `fd` (the caller
        // checked or set its length, and sealed it against shrinking);
        // nothing else in this process uses the address range.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                SIZE,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED | rustix::mm::MapFlags::POPULATE,
                fd,
                0,
            )
        }
        .map_err(std::io::Error::from)?;
        Ok(Map { ptr: ptr.cast() })
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off % 8 == 0 && off + 8 <= SIZE);
        // SAFETY: in bounds and 8-aligned (the mapping is page-aligned);
        // the memory lives as long as `self`.
        unsafe { &*self.ptr.add(off).cast::<AtomicU64>() }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off % 4 == 0 && off + 4 <= SIZE);
        // SAFETY: as for `u64_at`.
        unsafe { &*self.ptr.add(off).cast::<AtomicU32>() }
    }

    fn cell(&self, pos: u64) -> *mut u8 {
        // SAFETY: `pos % CELLS` < CELLS cells of CELL bytes after the header.
        unsafe { self.ptr.add(HEADER + (pos % CELLS) as usize * CELL) }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Map::new`, no longer referenced.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), SIZE) };
    }
}

/// The CPU this thread runs on (u32::MAX when unknown): read through the
/// vDSO or rseq, a few nanoseconds.
pub(crate) fn this_cpu() -> u32 {
    // SAFETY: sched_getcpu takes no arguments; -1 (unknown) maps to MAX.
    u32::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(u32::MAX)
}

/// What a push did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// In the ring; the receiver is polling or awake.
    Queued,
    /// In the ring, and the receiver was about to sleep: wake it.
    Wake,
    /// The ring is full (or the packet too large): dropped.
    Dropped,
}

/// The sending side of a ring into another context.
#[derive(Debug)]
pub(crate) struct Outbox {
    map: Map,
    /// The channel the ring was handed over on: kept open for the ring's
    /// life, so that its receiver sees this side hang up when this context
    /// closes, exits or execs.
    conn: OwnedFd,
    /// The next cell to write (the producer's own count; also published).
    head: Mutex<u64>,
}

impl Outbox {
    /// Makes a ring and the sending side of it, to be handed over on
    /// `conn` ([`super::channel::send_hello`]): anonymous memory (a
    /// `memfd`), sealed at its size so its receiver can map it without a
    /// shrink under its feet. Returns the descriptor to hand over.
    ///
    /// # Errors
    /// The memory cannot be made, sized, sealed or mapped.
    pub(crate) fn create(conn: OwnedFd) -> std::io::Result<(Outbox, OwnedFd)> {
        let fd = rustix::fs::memfd_create(
            "rdmakit-soft-ring",
            rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
        )?;
        rustix::fs::ftruncate(&fd, SIZE as u64)?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        let map = Map::new(&fd)?;
        map.u32_at(OFF_CELLS).store(CELLS as u32, Ordering::Relaxed);
        map.u64_at(OFF_MAGIC).store(MAGIC, Ordering::Release);
        Ok((
            Outbox {
                map,
                conn,
                head: Mutex::new(0),
            },
            fd,
        ))
    }

    /// The channel the ring is handed over on.
    pub(crate) fn conn(&self) -> &OwnedFd {
        &self.conn
    }

    /// Whether the receiver hung the channel up (it closed, exited or
    /// exec'd): packets pushed now would never be read.
    pub(crate) fn receiver_gone(&self) -> bool {
        let mut fds = [rustix::event::PollFd::new(
            &self.conn,
            rustix::event::PollFlags::empty(),
        )];
        rustix::event::poll(&mut fds, 0).is_ok_and(|n| n > 0)
    }

    /// Writes one packet into the ring.
    pub(crate) fn push(&self, pkt: &[u8]) -> Pushed {
        if pkt.len() > CELL_DATA {
            return Pushed::Dropped;
        }
        let mut head = crate::lock(&self.head);
        let tail = self.map.u64_at(OFF_TAIL).load(Ordering::Acquire);
        if head.wrapping_sub(tail) >= CELLS {
            return Pushed::Dropped;
        }
        let cell = self.map.cell(*head);
        // SAFETY: cells from `tail` to `head` belong to the consumer; this
        // one (at `head`, the ring not full) is the producer's until `head`
        // moves past it. Length then packet, in bounds (checked above).
        unsafe {
            cell.cast::<u32>().write(pkt.len() as u32);
            std::ptr::copy_nonoverlapping(pkt.as_ptr(), cell.add(8), pkt.len());
        }
        *head += 1;
        self.map
            .u32_at(OFF_SENDER_CPU)
            .store(this_cpu(), Ordering::Relaxed);
        self.map.u64_at(OFF_HEAD).store(*head, Ordering::Release);
        drop(head);
        // Against the receiver's store of `sleeping` and load of `head`
        // (`Inbox::sleep`): one of the two sides sees the other.
        fence(Ordering::SeqCst);
        let s = self.map.u32_at(OFF_SLEEPING);
        if s.load(Ordering::Relaxed) != 0 && s.swap(0, Ordering::AcqRel) != 0 {
            Pushed::Wake
        } else {
            Pushed::Queued
        }
    }
}

/// The receiving side of one ring.
#[derive(Debug)]
pub(crate) struct Inbox {
    map: Map,
    /// The sender's endpoint (the source of every packet).
    src: SocketAddrV4,
    /// The sender, as the kernel identified it when the ring was handed over.
    peer: Arc<Peer>,
    /// The next cell to read (the consumer's own count; also published).
    tail: u64,
}

/// Why a ring handed over was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AttachError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("ring memory {0}")]
    Bad(&'static str),
}

impl Inbox {
    /// Maps the ring `ring` that `peer`, at endpoint `src`, handed over.
    ///
    /// # Errors
    /// It is not a sealed ring of the right size with a ring's header.
    pub(crate) fn attach(
        ring: &OwnedFd,
        src: SocketAddrV4,
        peer: Arc<Peer>,
    ) -> Result<Inbox, AttachError> {
        let st = rustix::fs::fstat(ring).map_err(std::io::Error::from)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_size != SIZE as i64 {
            return Err(AttachError::Bad("is not a ring's size"));
        }
        let seals = rustix::fs::fcntl_get_seals(ring).map_err(std::io::Error::from)?;
        if !seals.contains(SealFlags::SHRINK) {
            return Err(AttachError::Bad("is not sealed against shrinking"));
        }
        let map = Map::new(ring)?;
        if map.u64_at(OFF_MAGIC).load(Ordering::Acquire) != MAGIC
            || u64::from(map.u32_at(OFF_CELLS).load(Ordering::Relaxed)) != CELLS
        {
            return Err(AttachError::Bad("has no ring header"));
        }
        let tail = map.u64_at(OFF_TAIL).load(Ordering::Acquire);
        Ok(Inbox {
            map,
            src,
            peer,
            tail,
        })
    }

    /// The sender, as the kernel identified it.
    pub(crate) fn peer(&self) -> &Arc<Peer> {
        &self.peer
    }

    /// The sender's endpoint.
    pub(crate) fn src(&self) -> SocketAddrV4 {
        self.src
    }

    /// Whether the sender is gone (exited, exec'd or closed the ring).
    pub(crate) fn sender_gone(&self) -> bool {
        !self.peer.present()
    }

    /// The CPU the sender ran on at its last push ([`this_cpu`]'s value).
    pub(crate) fn sender_cpu(&self) -> u32 {
        self.map.u32_at(OFF_SENDER_CPU).load(Ordering::Relaxed)
    }

    /// Whether a packet is waiting.
    pub(crate) fn ready(&self) -> bool {
        self.map.u64_at(OFF_HEAD).load(Ordering::Acquire) != self.tail
    }

    /// Copies the next packet into `buf` (private memory: the sender cannot
    /// change it under the engine); its length, or None when the ring is
    /// empty. A cell claiming more than a cell holds yields its first
    /// `CELL_DATA` bytes, which the engine then refuses as malformed.
    pub(crate) fn pop(&mut self, buf: &mut [u8]) -> Option<usize> {
        let head = self.map.u64_at(OFF_HEAD).load(Ordering::Acquire);
        if head == self.tail {
            return None;
        }
        let cell = self.map.cell(self.tail);
        // SAFETY: the cell at `tail` (< head) was published by the sender's
        // release store of `head`; it is ours until `tail` moves past it.
        let n = unsafe {
            let n = (cell.cast::<u32>().read() as usize)
                .min(CELL_DATA)
                .min(buf.len());
            std::ptr::copy_nonoverlapping(cell.add(8), buf.as_mut_ptr(), n);
            n
        };
        self.tail = self.tail.wrapping_add(1);
        self.map
            .u64_at(OFF_TAIL)
            .store(self.tail, Ordering::Release);
        Some(n)
    }

    /// Before blocking: raises `sleeping`, then looks once more; true when
    /// a packet arrived meanwhile (the flag is lowered again and the caller
    /// must not block).
    pub(crate) fn sleep(&self) -> bool {
        let s = self.map.u32_at(OFF_SLEEPING);
        s.store(1, Ordering::SeqCst);
        if self.map.u64_at(OFF_HEAD).load(Ordering::SeqCst) != self.tail {
            s.store(0, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// After blocking: lowers `sleeping` (a sender that woke us did).
    pub(crate) fn wake(&self) {
        self.map.u32_at(OFF_SLEEPING).store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::super::channel::test_peer;
    use super::super::tests::ep;
    use super::*;

    /// A ring handed over within this process: its two sides.
    fn ring_pair() -> (Outbox, Inbox) {
        let (peer, conn) = test_peer();
        let (ob, fd) = Outbox::create(conn).unwrap();
        let ib = Inbox::attach(&fd, ep(1, 4791), Arc::new(peer)).unwrap();
        (ob, ib)
    }

    #[test]
    fn packets_arrive_in_order_across_wraps_and_a_full_ring_drops() {
        let (ob, mut ib) = ring_pair();
        assert_eq!(ib.src(), ep(1, 4791));
        assert!(!ib.sender_gone());
        let mut buf = vec![0u8; CELL_DATA];
        let mut next = 0u32;
        for round in 0..5u32 {
            let k = if round % 2 == 0 { CELLS as u32 } else { 37 };
            for i in 0..k {
                let v = round * 1000 + i;
                let len = 12 + (v as usize % 300);
                let mut p = vec![(v % 251) as u8; len];
                p[..4].copy_from_slice(&v.to_le_bytes());
                assert_eq!(ob.push(&p), Pushed::Queued);
            }
            if k == CELLS as u32 {
                assert_eq!(ob.push(&[1; 12]), Pushed::Dropped, "full");
            }
            for i in 0..k {
                let len = ib.pop(&mut buf).expect("a packet");
                let v = round * 1000 + i;
                assert_eq!(len, 12 + (v as usize % 300));
                assert_eq!(u32::from_le_bytes(buf[..4].try_into().unwrap()), v);
                assert!(buf[4..len].iter().all(|&x| x == (v % 251) as u8));
                next += 1;
            }
            assert_eq!(ib.pop(&mut buf), None);
        }
        assert_eq!(next, 2 * 37 + 3 * CELLS as u32);
        assert_eq!(ob.push(&vec![0; CELL_DATA + 1]), Pushed::Dropped);
    }

    #[test]
    fn a_sleeping_receiver_is_woken_once_and_not_put_to_sleep_over_a_packet() {
        let (ob, mut ib) = ring_pair();
        assert!(!ib.sleep(), "empty: may block");
        assert_eq!(ob.push(&[7; 20]), Pushed::Wake);
        assert_eq!(ob.push(&[7; 20]), Pushed::Queued, "one wake-up per sleep");
        ib.wake();
        assert!(ib.sleep(), "a packet is waiting: do not block");
        assert_eq!(ob.push(&[7; 20]), Pushed::Queued, "the flag was lowered");
        let mut buf = [0u8; 64];
        assert_eq!(ib.pop(&mut buf), Some(20));
    }

    /// The receiver learns, with each push, which CPU its sender ran on
    /// (its progress thread lingers only for a sender on another core).
    #[test]
    fn each_push_says_which_cpu_its_sender_ran_on() {
        let (ob, mut ib) = ring_pair();
        let ob = Arc::new(ob);
        let (x, y) = rdmakit_testkit::two_cpus();
        let mut buf = [0u8; 64];
        for cpu in [x, y, x] {
            let o = std::sync::Arc::clone(&ob);
            std::thread::spawn(move || {
                rdmakit_testkit::pin_to_cpu(cpu);
                assert_eq!(o.push(&[1; 20]), Pushed::Queued);
            })
            .join()
            .unwrap();
            assert_eq!(ib.sender_cpu(), cpu as u32);
            assert_eq!(ib.pop(&mut buf), Some(20));
        }
    }

    /// Each side sees the other hang the channel up.
    #[test]
    fn each_side_sees_the_other_go() {
        let (ob, ib) = ring_pair();
        assert!(!ib.sender_gone() && !ob.receiver_gone());
        drop(ob);
        assert!(ib.sender_gone());
        let (ob, ib) = ring_pair();
        drop(ib);
        assert!(ob.receiver_gone());
    }

    #[test]
    fn attach_refuses_memory_that_is_not_a_sealed_ring() {
        let peer = || Arc::new(test_peer().0);
        let memfd = |seal: bool, len: u64| {
            let fd = rustix::fs::memfd_create(
                "t",
                rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
            )
            .unwrap();
            rustix::fs::ftruncate(&fd, len).unwrap();
            if seal {
                rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK).unwrap();
            }
            fd
        };
        let src = ep(1, 4791);
        // Unsealed: a sender could shrink it under the receiver (SIGBUS).
        assert!(matches!(
            Inbox::attach(&memfd(false, SIZE as u64), src, peer()),
            Err(AttachError::Bad(m)) if m.contains("sealed")
        ));
        assert!(matches!(
            Inbox::attach(&memfd(true, 4096), src, peer()),
            Err(AttachError::Bad(m)) if m.contains("size")
        ));
        // The right size and seal, no header.
        assert!(matches!(
            Inbox::attach(&memfd(true, SIZE as u64), src, peer()),
            Err(AttachError::Bad(m)) if m.contains("header")
        ));
        // Not memory at all: a socket.
        let (_, conn) = test_peer();
        assert!(Inbox::attach(&conn, src, peer()).is_err());
    }

    #[test]
    fn one_producer_thread_and_one_consumer_thread_move_every_packet() {
        let (ob, mut ib) = ring_pair();
        const N: u32 = 200_000;
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut v = 0u32;
                while v < N {
                    let mut p = [0u8; 16];
                    p[..4].copy_from_slice(&v.to_le_bytes());
                    if ob.push(&p) != Pushed::Dropped {
                        v += 1;
                    } else {
                        std::hint::spin_loop();
                    }
                }
            });
            let mut buf = [0u8; 64];
            let mut want = 0u32;
            while want < N {
                if let Some(len) = ib.pop(&mut buf) {
                    assert_eq!(len, 16);
                    assert_eq!(u32::from_le_bytes(buf[..4].try_into().unwrap()), want);
                    want += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        });
    }
}
