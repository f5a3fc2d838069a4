//! rsockets (`rsocket`, `rsend`, `rpoll`, ... of `<rdma/rsocket.h>`): exported
//! so programs that link them load, but not implemented — rsockets are a
//! byte-stream protocol of their own on top of rdma_cm and RDMA WRITE with
//! immediate, which this library does not (yet) speak. Every call fails with
//! `ENOSYS` and says so once on stderr; `rstream` and `riostream` therefore
//! stop at their first call.

use libc::{
    c_int, c_void, fd_set, iovec, msghdr, nfds_t, off_t, pollfd, size_t, sockaddr, socklen_t,
    ssize_t, timeval,
};

use crate::guard;

fn nosys<T>(fail: T) -> T {
    guard::set_errno(guard::unsupported("rsockets"));
    fail
}

#[no_mangle]
pub extern "C" fn rsocket(_domain: c_int, _type: c_int, _protocol: c_int) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rbind(_s: c_int, _addr: *const sockaddr, _len: socklen_t) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rlisten(_s: c_int, _backlog: c_int) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn raccept(_s: c_int, _addr: *mut sockaddr, _len: *mut socklen_t) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rconnect(_s: c_int, _addr: *const sockaddr, _len: socklen_t) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rshutdown(_s: c_int, _how: c_int) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rclose(_s: c_int) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rrecv(_s: c_int, _buf: *mut c_void, _len: size_t, _flags: c_int) -> ssize_t {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rrecvfrom(
    _s: c_int,
    _buf: *mut c_void,
    _len: size_t,
    _flags: c_int,
    _src: *mut sockaddr,
    _addrlen: *mut socklen_t,
) -> ssize_t {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rrecvmsg(_s: c_int, _msg: *mut msghdr, _flags: c_int) -> ssize_t {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rsend(_s: c_int, _buf: *const c_void, _len: size_t, _flags: c_int) -> ssize_t {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rsendto(
    _s: c_int,
    _buf: *const c_void,
    _len: size_t,
    _flags: c_int,
    _dst: *const sockaddr,
    _addrlen: socklen_t,
) -> ssize_t {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rsendmsg(_s: c_int, _msg: *const msghdr, _flags: c_int) -> ssize_t {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rread(_s: c_int, _buf: *mut c_void, _count: size_t) -> ssize_t {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rreadv(_s: c_int, _iov: *const iovec, _iovcnt: c_int) -> ssize_t {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rwrite(_s: c_int, _buf: *const c_void, _count: size_t) -> ssize_t {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rwritev(_s: c_int, _iov: *const iovec, _iovcnt: c_int) -> ssize_t {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rpoll(_fds: *mut pollfd, _nfds: nfds_t, _timeout: c_int) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rselect(
    _nfds: c_int,
    _r: *mut fd_set,
    _w: *mut fd_set,
    _e: *mut fd_set,
    _timeout: *mut timeval,
) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rgetpeername(_s: c_int, _addr: *mut sockaddr, _len: *mut socklen_t) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rgetsockname(_s: c_int, _addr: *mut sockaddr, _len: *mut socklen_t) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rsetsockopt(
    _s: c_int,
    _level: c_int,
    _name: c_int,
    _val: *const c_void,
    _len: socklen_t,
) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn rgetsockopt(
    _s: c_int,
    _level: c_int,
    _name: c_int,
    _val: *mut c_void,
    _len: *mut socklen_t,
) -> c_int {
    nosys(-1)
}
/// Variadic in C (`int rfcntl(int, int, ...)`); on x86-64 and aarch64 the
/// first variadic integer argument arrives where a third fixed one would.
#[no_mangle]
pub extern "C" fn rfcntl(_s: c_int, _cmd: c_int, _arg: *mut c_void) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn riomap(
    _s: c_int,
    _buf: *mut c_void,
    _len: size_t,
    _prot: c_int,
    _flags: c_int,
    _offset: off_t,
) -> off_t {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn riounmap(_s: c_int, _buf: *mut c_void, _len: size_t) -> c_int {
    nosys(-1)
}
#[no_mangle]
pub extern "C" fn riowrite(
    _s: c_int,
    _buf: *const c_void,
    _count: size_t,
    _offset: off_t,
    _flags: c_int,
) -> size_t {
    nosys(0)
}
