//! Why a run failed, in one message: what failed, on what, the errno's name
//! where there is one, and what to do next.

use std::io;
use std::time::Duration;

use crate::Test;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// A verb failed (opening the device, registering memory, bringing the
    /// QP up, posting).
    #[error("{0}; `rdmakit explain {verb}:{errno}` lists its causes", verb = .0.verb, errno = .0.errno.name())]
    Verbs(#[from] rdmakit_verbs::Error),
    /// A work completion with an error status.
    #[error("work completion with status {name} ({code}) for wr_id {wr_id} (vendor_err {vendor_err:#x}){hint}; `rdmakit explain wc:{name}` lists its causes")]
    Completion {
        /// `IBV_WC_*` name without the prefix (`RETRY_EXC_ERR`).
        name: String,
        /// Numeric status.
        code: u32,
        /// The request.
        wr_id: u64,
        /// Vendor detail.
        vendor_err: u32,
        /// What it usually means.
        hint: String,
    },
    /// The client found no server: the TCP connect to it failed for as
    /// long as it kept trying.
    #[error("{}", connect_text(*.test, .host, *.port, *.errno, .detail))]
    Connect {
        /// The test the client runs (what the server must run too).
        test: Test,
        /// The server's host as given.
        host: String,
        /// Its TCP port.
        port: u16,
        /// The errno of the last attempt, when the system gave one.
        errno: Option<i32>,
        /// The system's words when there is no errno.
        detail: String,
    },
    /// The server's host name does not resolve.
    #[error("cannot resolve {host} ({detail}): check the name (`getent hosts {host}`) or give its IP address")]
    Resolve {
        /// The host as given.
        host: String,
        /// The resolver's words (`Name or service not known`).
        detail: String,
    },
    /// The server cannot listen on its TCP port.
    #[error("{}", listen_text(*.port, *.errno, .detail))]
    Listen {
        /// The TCP port.
        port: u16,
        /// The errno.
        errno: Option<i32>,
        /// The system's words when there is no errno.
        detail: String,
    },
    /// The TCP exchange with the peer failed or the peer does not speak it.
    #[error("{0}")]
    Exchange(String),
    /// Data validation failed.
    #[error("data validation failed: {0}")]
    Validation(String),
    /// Nothing completed for too long.
    #[error(
        "no {waiting_for} for {} s ({progress}): the peer stopped answering without an error \
         completion (a hung or stopped process, or a path that drops every packet); check \
         that it still runs and what it printed, then `rdmakit doctor` on both hosts",
        .waited.as_secs()
    )]
    Stalled {
        /// How long nothing moved.
        waited: Duration,
        /// What did not come (`completion`, `message from the client`).
        waiting_for: &'static str,
        /// How far the run got (`37 of 128 completed`).
        progress: String,
    },
    /// Invalid parameters.
    #[error("invalid parameters: {0}")]
    Params(String),
    /// [`crate::Progress::cancel`] was set.
    #[error("cancelled")]
    Cancelled,
}

impl PerfError {
    /// The error's kind, as `--json` names it.
    pub fn kind(&self) -> &'static str {
        match self {
            PerfError::Verbs(_) => "verbs",
            PerfError::Completion { .. } => "completion",
            PerfError::Connect { .. }
            | PerfError::Resolve { .. }
            | PerfError::Listen { .. }
            | PerfError::Exchange(_) => "exchange",
            PerfError::Validation(_) => "validation",
            PerfError::Stalled { .. } => "stalled",
            PerfError::Params(_) => "params",
            PerfError::Cancelled => "cancelled",
        }
    }

    /// The errno's name (`ECONNREFUSED`, `EADDRINUSE`, `ENODEV`), when the
    /// failure has one.
    pub fn errno_name(&self) -> Option<&'static str> {
        match self {
            PerfError::Verbs(e) => Some(e.errno.name()),
            PerfError::Connect { errno, .. } | PerfError::Listen { errno, .. } => {
                errno.and_then(rdmakit_vocab::errno::name)
            }
            _ => None,
        }
    }

    /// The exit status of a run that failed so: 2 for bad parameters (as a
    /// usage error), 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            PerfError::Params(_) => 2,
            _ => 1,
        }
    }

    /// The failed TCP connect of a client of `test` to `host:port`.
    pub(crate) fn connect(test: Test, host: &str, port: u16, e: &io::Error) -> PerfError {
        PerfError::Connect {
            test,
            host: host.to_string(),
            port,
            errno: e.raw_os_error(),
            detail: e.to_string(),
        }
    }

    /// A server that cannot listen on `port`.
    pub(crate) fn listen(port: u16, e: &io::Error) -> PerfError {
        PerfError::Listen {
            port,
            errno: e.raw_os_error(),
            detail: e.to_string(),
        }
    }

    /// The TCP connection to the peer failed.
    pub(crate) fn peer_io(e: &io::Error) -> PerfError {
        let Some(n) = e.raw_os_error() else {
            return PerfError::Exchange(format!(
                "the TCP connection to the peer failed ({e}): check that it still runs and \
                 what it printed"
            ));
        };
        let name = errno_text(n);
        PerfError::Exchange(match n {
            libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED => format!(
                "the peer closed the TCP connection in the middle of the run ({name}): it \
                 ended, was killed or refused the run; what it printed says why"
            ),
            libc::ETIMEDOUT | libc::EHOSTUNREACH | libc::ENETUNREACH => format!(
                "the TCP connection to the peer broke ({name}): the path between the hosts \
                 went away; check the link and the route (`ip route get PEER`)"
            ),
            _ => format!(
                "the TCP connection to the peer failed ({name}: {}): check that it still \
                 runs and what it printed",
                rdmakit_vocab::errno::strerror(n)
            ),
        })
    }

    /// The peer ended the TCP connection where a line was due.
    pub(crate) fn peer_closed() -> PerfError {
        PerfError::Exchange(
            "the peer closed the TCP connection in the middle of the run: it ended, was \
             killed or refused the run; what it printed says why"
                .into(),
        )
    }
}

/// `ECONNREFUSED`, or `errno 200` for a number Linux does not assign.
fn errno_text(n: i32) -> String {
    rdmakit_vocab::errno::name(n).map_or_else(|| format!("errno {n}"), str::to_string)
}

fn connect_text(test: Test, host: &str, port: u16, errno: Option<i32>, detail: &str) -> String {
    let Some(n) = errno else {
        return format!(
            "cannot connect to {host}:{port} ({detail}): check the host and -p, and that \
             `rdmakit perf {test}` runs there"
        );
    };
    let name = errno_text(n);
    match n {
        libc::ECONNREFUSED => format!(
            "no rdmakit perf server at {host}:{port} ({name}): start one with \
             `rdmakit perf {test}` on that host, or check -p"
        ),
        libc::ETIMEDOUT | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN => format!(
            "cannot reach {host}:{port} ({name}): check the address and the route to it \
             (`ip route get {host}`), and that no firewall drops TCP port {port}"
        ),
        _ => format!(
            "cannot connect to {host}:{port} ({name}: {}): check the host and -p, and that \
             `rdmakit perf {test}` runs there",
            rdmakit_vocab::errno::strerror(n)
        ),
    }
}

fn listen_text(port: u16, errno: Option<i32>, detail: &str) -> String {
    let Some(n) = errno else {
        return format!(
            "cannot listen on TCP port {port} ({detail}): choose another with -p on both sides"
        );
    };
    let name = errno_text(n);
    match n {
        libc::EADDRINUSE => format!(
            "cannot listen on TCP port {port} ({name}): another process holds it \
             (`ss -ltnp 'sport = :{port}'`); stop it, or choose another port with -p on both \
             sides"
        ),
        libc::EACCES => format!(
            "cannot listen on TCP port {port} ({name}): ports below 1024 need root; choose \
             another with -p on both sides"
        ),
        _ => format!(
            "cannot listen on TCP port {port} ({name}: {}): choose another with -p on both \
             sides",
            rdmakit_vocab::errno::strerror(n)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_connect_names_the_server_errno_and_the_fix() {
        let e = PerfError::connect(
            Test::WriteBw,
            "127.0.0.1",
            1,
            &io::Error::from_raw_os_error(libc::ECONNREFUSED),
        );
        assert_eq!(
            e.to_string(),
            "no rdmakit perf server at 127.0.0.1:1 (ECONNREFUSED): start one with \
             `rdmakit perf write-bw` on that host, or check -p"
        );
        assert_eq!(
            (e.kind(), e.errno_name()),
            ("exchange", Some("ECONNREFUSED"))
        );
    }

    #[test]
    fn no_message_shows_rusts_os_error_text() {
        let all = [
            PerfError::connect(Test::SendLat, "h", 2, &io::Error::from_raw_os_error(113)),
            PerfError::connect(Test::SendLat, "h", 2, &io::Error::from_raw_os_error(13)),
            PerfError::listen(18515, &io::Error::from_raw_os_error(98)),
            PerfError::listen(80, &io::Error::from_raw_os_error(13)),
            PerfError::listen(80, &io::Error::from_raw_os_error(22)),
            PerfError::peer_io(&io::Error::from_raw_os_error(104)),
            PerfError::peer_io(&io::Error::from_raw_os_error(110)),
            PerfError::peer_io(&io::Error::from_raw_os_error(5)),
        ];
        for e in all {
            let t = e.to_string();
            assert!(!t.contains("os error"), "{t}");
            assert!(t.contains("(E"), "no errno name in {t}");
        }
        assert_eq!(
            PerfError::listen(18515, &io::Error::from_raw_os_error(98)).to_string(),
            "cannot listen on TCP port 18515 (EADDRINUSE): another process holds it \
             (`ss -ltnp 'sport = :18515'`); stop it, or choose another port with -p on both \
             sides"
        );
        assert_eq!(
            PerfError::connect(Test::SendLat, "h", 2, &io::Error::from_raw_os_error(113))
                .to_string(),
            "cannot reach h:2 (EHOSTUNREACH): check the address and the route to it \
             (`ip route get h`), and that no firewall drops TCP port 2"
        );
    }

    #[test]
    fn a_stall_says_how_long_in_seconds_not_debug_text() {
        let e = PerfError::Stalled {
            waited: Duration::from_secs(20),
            waiting_for: "completion",
            progress: "37 of 128 completed".into(),
        };
        let t = e.to_string();
        assert!(
            t.starts_with("no completion for 20 s (37 of 128 completed): "),
            "{t}"
        );
    }
}
