//! The rdmakit process's own set-up, not a fact about the host.

/// Lets output into a closed pipe (`rdmakit doctor --json | head`) end the
/// process quietly, by SIGPIPE, as it ends any Unix tool, instead of a
/// panic in `println!`. Sockets keep their errors: std writes them with
/// MSG_NOSIGNAL (a write to a closed TCP peer still returns EPIPE), and
/// the soft NIC's are datagram sockets.
pub fn end_quietly_on_closed_pipe() {
    // SAFETY: sets a signal disposition to its default; no handler runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
