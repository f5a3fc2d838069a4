//! SIOCETHTOOL, the one place this crate hands the kernel a pointer to write
//! through.
//!
//! Every ethtool command is a C struct whose first `u32` is the command; the
//! kernel reads it from `ifr_data` and writes its answer back over it. The
//! variable-length answers (ETHTOOL_GSTRINGS, ETHTOOL_GSTATS) are written
//! with the *kernel's* count, not the one we sized the buffer for: a driver
//! whose count grew between asking it and reading (mlx5 adds counters when
//! channels or PFC change) would write past the buffer. So every command's
//! struct lives in a [`GuardedBuf`]: an anonymous mapping followed by a
//! `PROT_NONE` page, where a write past the end faults in the kernel's
//! `copy_to_user` and the ioctl fails with EFAULT instead of overwriting
//! anything. The callers ([`super::ethtool`]) read the count the kernel
//! wrote back and ask again when it is not the one they sized for.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use crate::source::Errno;

/// A socket on which to ask ethtool questions about one netdev, in the
/// network namespace of the thread that opened it.
pub(super) struct Ethtool {
    fd: OwnedFd,
    name: [u8; 16],
}

/// `struct ifreq` as SIOCETHTOOL reads it: the name, then `ifr_data`; the
/// rest of the union (24 bytes on 64-bit) is padding here.
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: *mut libc::c_void,
    _pad: [u8; 24],
}

impl Ethtool {
    /// An AF_INET datagram socket for `ifname` (at most 15 bytes: the
    /// caller has checked it is a valid netdev name).
    pub(super) fn open(ifname: &str) -> Result<Ethtool, Errno> {
        let mut name = [0u8; 16];
        let b = ifname.as_bytes();
        if b.is_empty() || b.len() > 15 || b.contains(&0) {
            return Err(Errno::EINVAL);
        }
        name[..b.len()].copy_from_slice(b);
        // SAFETY: socket(2) takes no pointers; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(last_errno());
        }
        // SAFETY: `fd` is a descriptor socket(2) just returned and nothing
        // else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Ethtool { fd, name })
    }

    /// Runs the command whose struct is `buf` (its first `u32` is the
    /// command: only ETHTOOL_G* commands are ever passed, so nothing on the
    /// host changes). The kernel's answer is in `buf` afterwards.
    pub(super) fn call(&self, buf: &mut GuardedBuf) -> Result<(), Errno> {
        let mut ifr = IfReq {
            name: self.name,
            data: buf.ptr.as_ptr().cast(),
            _pad: [0; 24],
        };
        // SAFETY: `ifr` is a valid ifreq that lives across the call; its
        // `data` points at a mapping of `buf.map_len - page` writable bytes
        // followed by an inaccessible page, so whatever length the kernel
        // writes, it either lands in memory `buf` owns or faults (EFAULT).
        let r = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SIOCETHTOOL as _,
                &mut ifr as *mut IfReq,
            )
        };
        if r < 0 {
            return Err(last_errno());
        }
        Ok(())
    }
}

fn last_errno() -> Errno {
    Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(5))
}

/// Zeroed bytes for one ethtool struct, followed by a guard page the kernel
/// cannot write (see the module doc).
pub(super) struct GuardedBuf {
    ptr: NonNull<u8>,
    /// The bytes asked for.
    len: usize,
    /// The whole mapping: `len` rounded up to pages, plus the guard page.
    map_len: usize,
}

impl GuardedBuf {
    /// `len` zeroed bytes (at most 64 MiB).
    pub(super) fn new(len: usize) -> Result<GuardedBuf, Errno> {
        if len > 64 << 20 {
            return Err(Errno::EFBIG);
        }
        let page = page_size();
        let data_len = len.div_ceil(page).max(1) * page;
        let map_len = data_len + page;
        // SAFETY: an anonymous private mapping at an address the kernel
        // chooses; no existing memory is touched. The result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_errno());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(Errno::EIO)?;
        let buf = GuardedBuf { ptr, len, map_len };
        // SAFETY: the last page of the mapping just made, which nothing
        // references yet.
        let r =
            unsafe { libc::mprotect(p.cast::<u8>().add(data_len).cast(), page, libc::PROT_NONE) };
        if r != 0 {
            return Err(last_errno()); // `buf` unmaps on drop
        }
        Ok(buf)
    }

    /// The bytes asked for.
    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes of the mapping are readable and
        // writable (they precede the guard page) and live as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes asked for, to fill in a command.
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for GuardedBuf {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made; no slice of it
        // outlives `self`. A failure leaves the mapping; nothing to do.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.map_len);
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the kernel does when a driver's count grew: it writes past the
    /// bytes asked for. Within the last page that is our own memory; past
    /// it the write faults and the system call fails with EFAULT, no byte of
    /// anyone else's memory touched.
    #[test]
    fn a_kernel_write_past_the_buffer_fails_with_efault() {
        let page = page_size();
        let mut buf = GuardedBuf::new(10).unwrap();
        assert_eq!(buf.bytes(), &[0u8; 10]);
        buf.bytes_mut()[9] = 7;
        let zero = std::fs::File::open("/dev/zero").unwrap();
        // SAFETY: the test's point: read(2) is told there are two pages
        // where there is one; the kernel must stop at the guard page.
        let n = unsafe { libc::read(zero.as_raw_fd(), buf.ptr.as_ptr().cast(), 2 * page) };
        // Either a short read up to the guard page or EFAULT, never a crash.
        if n < 0 {
            assert_eq!(last_errno(), Errno(libc::EFAULT));
        } else {
            assert!(n as usize <= page, "read {n} bytes past one page");
        }
        assert_eq!(buf.bytes()[9], 0);
    }

    #[test]
    fn names_longer_than_ifnamsiz_are_refused() {
        assert_eq!(Ethtool::open("0123456789abcdef").err(), Some(Errno::EINVAL));
        assert_eq!(Ethtool::open("").err(), Some(Errno::EINVAL));
    }
}
