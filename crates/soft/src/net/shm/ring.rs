//! One ring between two soft device contexts: the shared file's layout,
//! the sending side ([`Outbox`]) and the receiving side ([`Inbox`]). What
//! uses them and why is in [`super`].

use std::fs::{File, OpenOptions};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use super::{alive, Names};

/// The first bytes of an attach datagram; the ring's path follows.
pub(crate) const ATTACH_MAGIC: &[u8; 8] = b"RDKSHM01";

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
const OFF_PID: usize = 12;
const OFF_SRC_IP: usize = 16;
const OFF_SRC_PORT: usize = 20;
const OFF_HEAD: usize = 64;
/// The CPU the sender ran on at its last push (beside `head`: read with it).
const OFF_SENDER_CPU: usize = 72;
const OFF_TAIL: usize = 128;
const OFF_SLEEPING: usize = 192;

/// A shared mapping of one ring file.
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
    fn new(file: &File) -> std::io::Result<Map> {
        // Populated: the ring's ~270 pages are allocated and mapped in this
        // one call instead of one page fault each during the first lap,
        // which the VM tier's TCG guest charges ~50 ms for per run of a
        // ping-pong (docs/soft-nic.md, "Same-host rings").
        // SAFETY: a fresh shared mapping of SIZE bytes of `file` (the caller
        // checked or set its length); nothing else in this process uses the
        // address range.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                SIZE,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED | rustix::mm::MapFlags::POPULATE,
                file,
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
    pub(super) path: PathBuf,
    /// The next cell to write (the producer's own count; also published).
    head: Mutex<u64>,
}

impl Outbox {
    /// Creates the ring from `from` (this context) to `to`.
    pub(crate) fn create(
        names: &Names,
        from: SocketAddrV4,
        to: SocketAddrV4,
    ) -> std::io::Result<Outbox> {
        let path = names.ring(to, from);
        let _ = std::fs::remove_file(&path);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        let ob = f.set_len(SIZE as u64).and_then(|()| Map::new(&f));
        let map = match ob {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        map.u32_at(OFF_CELLS).store(CELLS as u32, Ordering::Relaxed);
        map.u32_at(OFF_PID)
            .store(std::process::id(), Ordering::Relaxed);
        map.u32_at(OFF_SRC_IP)
            .store(u32::from(*from.ip()), Ordering::Relaxed);
        map.u32_at(OFF_SRC_PORT)
            .store(u32::from(from.port()), Ordering::Relaxed);
        map.u64_at(OFF_MAGIC).store(MAGIC, Ordering::Release);
        Ok(Outbox {
            map,
            path,
            head: Mutex::new(0),
        })
    }

    /// The attach datagram that tells the receiver where the ring is.
    pub(crate) fn attach_datagram(&self) -> Vec<u8> {
        let mut d = ATTACH_MAGIC.to_vec();
        d.extend_from_slice(self.path.as_os_str().as_encoded_bytes());
        d
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

impl Drop for Outbox {
    fn drop(&mut self) {
        // The receiver unlinks the name when it attaches; one that never
        // did leaves it to us.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The receiving side of one ring.
#[derive(Debug)]
pub(crate) struct Inbox {
    map: Map,
    /// The sender's endpoint (the source of every packet).
    src: SocketAddrV4,
    /// The sender's pid.
    pid: u32,
    /// The next cell to read (the consumer's own count; also published).
    tail: u64,
}

/// Why an attach was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AttachError {
    #[error("not a ring of this context: {0}")]
    Name(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("ring file {0}")]
    Bad(&'static str),
}

impl Inbox {
    /// Maps the ring an attach datagram (`msg`, after [`ATTACH_MAGIC`])
    /// names, from `src`, into the context at `me`; unlinks its name.
    pub(crate) fn attach(
        names: &Names,
        me: SocketAddrV4,
        src: SocketAddrV4,
        msg: &[u8],
    ) -> Result<Inbox, AttachError> {
        let path = PathBuf::from(
            std::str::from_utf8(msg).map_err(|_| AttachError::Name("not UTF-8".into()))?,
        );
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.parent() != Some(names.dir.as_path())
            || !name.starts_with(&names.ring_prefix(me))
            || !name.ends_with(".ring")
        {
            return Err(AttachError::Name(path.display().to_string()));
        }
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        let m = f.metadata()?;
        if !m.is_file() || m.uid() != rustix::process::geteuid().as_raw() || m.len() != SIZE as u64
        {
            return Err(AttachError::Bad("not this user's, or not a ring's size"));
        }
        let map = Map::new(&f)?;
        let _ = std::fs::remove_file(&path);
        if map.u64_at(OFF_MAGIC).load(Ordering::Acquire) != MAGIC
            || u64::from(map.u32_at(OFF_CELLS).load(Ordering::Relaxed)) != CELLS
        {
            return Err(AttachError::Bad("has no ring header"));
        }
        let ip = Ipv4Addr::from(map.u32_at(OFF_SRC_IP).load(Ordering::Relaxed));
        let port = map.u32_at(OFF_SRC_PORT).load(Ordering::Relaxed) as u16;
        let from = SocketAddrV4::new(ip, port);
        if from != src {
            return Err(AttachError::Bad("names another sender"));
        }
        let pid = map.u32_at(OFF_PID).load(Ordering::Relaxed);
        let tail = map.u64_at(OFF_TAIL).load(Ordering::Acquire);
        Ok(Inbox {
            map,
            src,
            pid,
            tail,
        })
    }

    /// The sender's endpoint.
    pub(crate) fn src(&self) -> SocketAddrV4 {
        self.src
    }

    /// Whether the sender's process is gone.
    pub(crate) fn sender_gone(&self) -> bool {
        !alive(self.pid)
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
    use super::super::tests::{ep, names};
    use super::*;

    #[test]
    fn packets_arrive_in_order_across_wraps_and_a_full_ring_drops() {
        let (_d, n) = names();
        let (a, b) = (ep(1, 4791), ep(2, 4791));
        let ob = Outbox::create(&n, a, b).unwrap();
        let msg = ob.attach_datagram();
        assert!(msg.starts_with(ATTACH_MAGIC));
        let mut ib = Inbox::attach(&n, b, a, &msg[8..]).unwrap();
        assert_eq!(ib.src(), a);
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
        let (_d, n) = names();
        let (a, b) = (ep(1, 4791), ep(2, 4791));
        let ob = Outbox::create(&n, a, b).unwrap();
        let mut ib = Inbox::attach(&n, b, a, &ob.attach_datagram()[8..]).unwrap();
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
        let (_d, n) = names();
        let (a, b) = (ep(1, 4791), ep(2, 4791));
        let ob = std::sync::Arc::new(Outbox::create(&n, a, b).unwrap());
        let mut ib = Inbox::attach(&n, b, a, &ob.attach_datagram()[8..]).unwrap();
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

    /// A second ring to one endpoint (its process changed) is a file of its
    /// own: dropping the first ring's sender leaves it for its receiver.
    #[test]
    fn a_second_ring_to_an_endpoint_outlives_the_first() {
        let (_d, n) = names();
        let (a, b) = (ep(1, 4791), ep(2, 4791));
        let first = Outbox::create(&n, a, b).unwrap();
        let second = Outbox::create(&n, a, b).unwrap();
        assert_ne!(first.path, second.path);
        drop(first);
        assert!(second.path.exists());
        let msg = second.attach_datagram();
        assert!(Inbox::attach(&n, b, a, &msg[8..]).is_ok());
        assert!(!second.path.exists(), "the receiver unlinks the name");
    }

    #[test]
    fn attach_refuses_foreign_names_files_and_senders() {
        let (d, n) = names();
        let (a, b, c) = (ep(1, 4791), ep(2, 4791), ep(3, 4791));
        let ob = Outbox::create(&n, a, b).unwrap();
        let msg = ob.attach_datagram();
        // A ring into another context, a sender that is not the ring's.
        assert!(matches!(
            Inbox::attach(&n, c, a, &msg[8..]),
            Err(AttachError::Name(_))
        ));
        assert!(matches!(
            Inbox::attach(&n, b, c, &msg[8..]),
            Err(AttachError::Bad(_))
        ));
        // A path outside the directory, a file of the wrong size.
        let outside = format!("/etc/{}1-1-1-0.ring", n.ring_prefix(b));
        assert!(Inbox::attach(&n, b, a, outside.as_bytes()).is_err());
        let small = d
            .path()
            .join(format!("{}9.9.9.9-1-1-0.ring", n.ring_prefix(b)));
        std::fs::write(&small, b"short").unwrap();
        assert!(matches!(
            Inbox::attach(&n, b, a, small.as_os_str().as_encoded_bytes()),
            Err(AttachError::Bad(_))
        ));
        assert!(Inbox::attach(&n, b, a, b"\xff\xfe").is_err());
    }

    #[test]
    fn one_producer_thread_and_one_consumer_thread_move_every_packet() {
        let (_d, n) = names();
        let (a, b) = (ep(1, 4791), ep(2, 4791));
        let ob = Outbox::create(&n, a, b).unwrap();
        let mut ib = Inbox::attach(&n, b, a, &ob.attach_datagram()[8..]).unwrap();
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
