//! What the dumbbell asks of the system: the tools (found where Debian puts
//! them, or an error naming the package), bounded runs of them, entering a
//! namespace from a thread, and clearing what a killed earlier run left.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Error;

/// How long one `ip`, `tc`, `clang-14` or `bpftool` run may take.
pub const TOOL_LIMIT: Duration = Duration::from_secs(20);

/// The most output kept from one tool run.
const MAX_TOOL_OUTPUT: u64 = 1 << 20;

/// Where `ip netns add` puts its namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// Every dumbbell namespace's name starts with this, then `<pid>-<n>-`.
pub const NS_PREFIX: &str = "rkecn-";

/// Every dumbbell's temporary directory starts with this, then `<pid>-`.
pub const DIR_PREFIX: &str = "rdmakit-ecn-";

/// The programs a dumbbell runs.
#[derive(Clone, Debug)]
pub(super) struct Tools {
    pub ip: PathBuf,
    pub tc: PathBuf,
    /// Only needed when marking.
    pub clang: Option<PathBuf>,
    pub bpftool: Option<PathBuf>,
}

impl Tools {
    /// The tools a dumbbell needs (the marker's only when `marking`), or
    /// the first one missing with its Debian package.
    pub fn find(marking: bool) -> Result<Tools, Error> {
        Tools::find_with(marking, crate::installed, |f| Path::new(f).is_file())
    }

    /// [`Tools::find`] with the lookups given (tests run it on machines
    /// that lack things).
    fn find_with(
        marking: bool,
        program: impl Fn(&str) -> Option<PathBuf>,
        file: impl Fn(&str) -> bool,
    ) -> Result<Tools, Error> {
        let need = |tool: &str, package: &'static str| {
            program(tool).ok_or(Error::Missing {
                what: tool.into(),
                package,
            })
        };
        let ip = need("ip", "iproute2")?;
        let tc = need("tc", "iproute2")?;
        let (mut clang, mut bpftool) = (None, None);
        if marking {
            clang = Some(need("clang-14", "clang-14")?);
            bpftool = Some(need("bpftool", "bpftool")?);
            for (path, package) in HEADERS {
                if !file(path) {
                    return Err(Error::Missing {
                        what: path.into(),
                        package,
                    });
                }
            }
        }
        Ok(Tools {
            ip,
            tc,
            clang,
            bpftool,
        })
    }
}

/// The headers the marker is compiled against, with their Debian packages.
const HEADERS: [(&str, &str); 3] = [
    ("/usr/include/bpf/bpf_helpers.h", "libbpf-dev"),
    (
        "/usr/include/x86_64-linux-gnu/asm/types.h",
        "linux-libc-dev",
    ),
    ("/usr/include/linux/bpf.h", "linux-libc-dev"),
];

/// Runs `cmd` (stdin closed) for at most [`TOOL_LIMIT`]; its stdout when it
/// exits 0, else an error with its stderr.
pub(super) fn run(cmd: &mut Command, what: &str) -> Result<String, Error> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Io {
            what: format!("start {what} ({:?})", cmd.get_program()),
            source: e,
        })?;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(r) = r {
                let _ = r.take(MAX_TOOL_OUTPUT).read_to_end(&mut v);
            }
            v
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let end = Instant::now() + TOOL_LIMIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) if Instant::now() > end => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("killed after {TOOL_LIMIT:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => break Err(e.to_string()),
        }
    };
    let stdout = String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
    match status {
        Ok(st) if st.success() => Ok(stdout),
        Ok(st) => Err(Error::Command {
            what: format!("{what}: {}", render(cmd)),
            status: st.to_string(),
            stderr: stderr.trim_end().to_string(),
        }),
        Err(why) => Err(Error::Command {
            what: format!("{what}: {}", render(cmd)),
            status: why,
            stderr: stderr.trim_end().to_string(),
        }),
    }
}

fn render(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `f` on a new thread that has joined network namespace `ns` (the
/// calling thread stays where it is). Sockets `f` creates belong to `ns`
/// and work from any thread; `/proc/sys/net` opened there is `ns`'s.
///
/// # Panics
/// When `f` panics (the panic is carried over).
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> Result<T, Error> {
    let path = Path::new(NETNS_DIR).join(ns);
    let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
    std::thread::scope(|s| {
        let h = s.spawn(move || {
            // SAFETY: a valid open fd of a namespace file; setns changes
            // only this thread's network namespace.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc != 0 {
                return Err(Error::Io {
                    what: format!("setns {}", path.display()),
                    source: std::io::Error::last_os_error(),
                });
            }
            Ok(f())
        });
        h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// Writes `value` to `/proc/sys/<key>` as seen from namespace `ns`.
pub(super) fn sysctl(ns: &str, key: &str, value: &str) -> Result<(), Error> {
    let path = Path::new("/proc/sys").join(key);
    in_netns(ns, || std::fs::write(&path, value))?.map_err(|e| Error::io(&path, e))
}

/// The pids `ip netns pids` lists in `ns` (none when it fails).
pub(super) fn pids_in(tools: &Tools, ns: &str) -> Vec<i32> {
    run(
        Command::new(&tools.ip).args(["netns", "pids", ns]),
        "ip netns pids",
    )
    .map(|t| {
        t.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    })
    .unwrap_or_default()
}

/// SIGKILLs every process in `ns`, then deletes it; errors are ignored
/// (this runs in `Drop` and on what another run may be deleting too).
pub(super) fn delete_netns(tools: &Tools, ns: &str) {
    for pid in pids_in(tools, ns) {
        if pid > 1 && pid != std::process::id() as i32 {
            // SAFETY: plain syscall on a pid the kernel listed in `ns`.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    let _ = run(
        Command::new(&tools.ip).args(["netns", "del", ns]),
        "ip netns del",
    );
}

/// The pid in a name `<prefix><pid>-...`, if it has one.
pub(super) fn owner_pid(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.split('-').next()?.parse().ok()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Deletes the namespaces and temporary directories of dumbbells whose
/// process is gone (a test killed before its `Drop` ran). A namespace of a
/// live process, or a directory not ours (owner, type), is left alone.
/// Returns the names it cleared.
pub(super) fn clear_stale(tools: &Tools) -> Vec<String> {
    let mut cleared = Vec::new();
    let names = std::fs::read_dir(NETNS_DIR)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for name in names {
        if owner_pid(&name, NS_PREFIX).is_some_and(|p| !alive(p)) {
            delete_netns(tools, &name);
            cleared.push(name);
        }
    }
    let tmp = std::env::temp_dir();
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    for e in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !owner_pid(&name, DIR_PREFIX).is_some_and(|p| !alive(p)) {
            continue;
        }
        // Not followed: a symlink planted here is not a directory of ours.
        let ours = e
            .path()
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == me);
        if ours && std::fs::remove_dir_all(e.path()).is_ok() {
            cleared.push(name);
        }
    }
    cleared
}

/// True when the effective uid is 0.
pub(super) fn root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_or_header_is_named_with_its_package() {
        let only = |have: &'static [&'static str]| {
            move |t: &str| have.contains(&t).then(|| PathBuf::from("/usr/bin").join(t))
        };
        let missing = |r: Result<Tools, Error>| match r {
            Err(Error::Missing { what, package }) => (what, package),
            other => panic!("{other:?}"),
        };
        const ALL: &[&str] = &["ip", "tc", "clang-14", "bpftool"];
        assert_eq!(
            missing(Tools::find_with(false, only(&[]), |_| true)),
            ("ip".into(), "iproute2")
        );
        assert_eq!(
            missing(Tools::find_with(true, only(&["ip", "tc"]), |_| true)),
            ("clang-14".into(), "clang-14")
        );
        assert_eq!(
            missing(Tools::find_with(
                true,
                only(&["ip", "tc", "clang-14"]),
                |_| true
            )),
            ("bpftool".into(), "bpftool")
        );
        let no_libbpf = |f: &str| !f.contains("bpf_helpers");
        assert_eq!(
            missing(Tools::find_with(true, only(ALL), no_libbpf)),
            ("/usr/include/bpf/bpf_helpers.h".into(), "libbpf-dev")
        );
        let e = Tools::find_with(true, only(ALL), |f| !f.contains("asm/"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/usr/include/x86_64-linux-gnu/asm/types.h is missing: apt-get install \
             linux-libc-dev (scripts/test installs it)"
        );
        // Without marking the compiler and bpftool are not needed.
        let t = Tools::find_with(false, only(&["ip", "tc"]), |_| false).unwrap();
        assert!(t.clang.is_none() && t.bpftool.is_none());
    }

    #[test]
    fn owner_pids_are_read_from_names() {
        assert_eq!(owner_pid("rkecn-4242-0-rx", NS_PREFIX), Some(4242));
        assert_eq!(owner_pid("rdmakit-ecn-17-Ab3xZ", DIR_PREFIX), Some(17));
        assert_eq!(owner_pid("rkecn-x-0-rx", NS_PREFIX), None);
        assert_eq!(owner_pid("tb-r", NS_PREFIX), None);
    }

    #[test]
    fn a_failing_tool_is_an_error_with_its_stderr() {
        let e = run(
            Command::new("sh").args(["-c", "echo no such device >&2; exit 2"]),
            "probe",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("probe") && e.contains("no such device"), "{e}");
        assert_eq!(
            run(Command::new("sh").args(["-c", "echo hi"]), "echo").unwrap(),
            "hi\n"
        );
    }
}
