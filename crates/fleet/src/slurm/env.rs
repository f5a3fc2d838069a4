//! The environment the health check gives the Slurm commands it runs.
//!
//! slurmd runs `HealthCheckProgram` with an empty environment (no PATH, no
//! SLURM_CONF) and `Prolog` with a few `SLURM_*` variables, so the health check
//! sets its own: a PATH with the standard system directories, and SLURM_CONF when
//! it can find the file the running slurmd uses.
//!
//! Where SLURM_CONF comes from, first match wins:
//! 1. `SLURM_CONF` in our own environment (an administrator's wrapper set it);
//! 2. an ancestor process that is slurmd or slurmstepd: its `-f FILE` argument, else
//!    `SLURM_CONF` in its environment (slurmd started with `-f` by a unit file or a
//!    test harness);
//! 3. the configless caches (`/run/slurm/conf/slurm.conf` from 23.02,
//!    `/var/spool/slurmd/conf-cache/slurm.conf` in 22.05) and the usual install
//!    locations, when the file exists.
//!
//! Otherwise SLURM_CONF stays unset and scontrol uses its compiled-in default.

use std::path::{Path, PathBuf};

/// The directories a health check needs for scontrol (Debian, RHEL, /usr/local builds).
pub const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Files tried in order when no process says which slurm.conf it uses.
pub const CONF_CANDIDATES: &[&str] = &[
    "/run/slurm/conf/slurm.conf",
    "/var/spool/slurmd/conf-cache/slurm.conf",
    "/etc/slurm/slurm.conf",
    "/etc/slurm-llnl/slurm.conf",
    "/usr/local/etc/slurm.conf",
    "/opt/slurm/etc/slurm.conf",
];

/// PATH for the commands the health check runs: the caller's PATH (if any), then
/// every [`SYSTEM_PATH`] directory it lacks.
pub fn path_for(existing: Option<&str>) -> String {
    let mut dirs: Vec<&str> = existing
        .unwrap_or("")
        .split(':')
        .filter(|d| !d.is_empty())
        .collect();
    for d in SYSTEM_PATH.split(':') {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs.join(":")
}

/// This node's Slurm name: `SLURMD_NODENAME` when set (Prolog, job steps), else the
/// short host name (HealthCheckProgram runs with no environment; Slurm's NodeName
/// is the short name unless configured otherwise).
pub fn node_name(slurmd_nodename: Option<&str>, hostname: &str) -> String {
    if let Some(n) = slurmd_nodename.map(str::trim).filter(|n| !n.is_empty()) {
        return n.to_string();
    }
    let h = hostname.trim();
    h.split('.').next().unwrap_or(h).to_string()
}

/// A process above us: what the health check needs of its command line and
/// environment (from /proc), and nothing more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ancestor {
    pub pid: u32,
    /// The whole command line of slurmd and slurmstepd (their `-f FILE`); of any
    /// other process only the program (argv[0]): a job's arguments may hold a
    /// secret, and nothing here needs them.
    pub argv: Vec<String>,
    /// `NAME=value` entries whose name is in [`ENV_ALLOW`] (empty when unreadable):
    /// never the rest of a process's environment, which may hold tokens.
    pub environ: Vec<String>,
}

/// The only variables read from an ancestor's environment.
pub const ENV_ALLOW: &[&str] = &["SLURM_CONF"];

/// The most read of one /proc/PID/cmdline or /proc/PID/environ.
pub const MAX_PROC_READ: u64 = 256 << 10;

/// Where a slurm.conf was found (for the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub path: PathBuf,
    pub how: String,
}

/// Picks the slurm.conf (see the module doc); `exists` says whether a file exists.
pub fn find_slurm_conf(
    own: Option<&str>,
    ancestors: &[Ancestor],
    exists: impl Fn(&Path) -> bool,
) -> Option<Found> {
    if let Some(p) = own.filter(|p| !p.is_empty()) {
        return Some(Found {
            path: p.into(),
            how: "SLURM_CONF was set".into(),
        });
    }
    for a in ancestors {
        let prog = program(&a.argv);
        if !is_slurm_daemon(prog) {
            continue;
        }
        if let Some(f) = conf_arg(&a.argv) {
            return Some(Found {
                path: f.into(),
                how: format!("{prog} (pid {}) runs with -f", a.pid),
            });
        }
        if let Some(v) = a
            .environ
            .iter()
            .find_map(|e| e.strip_prefix("SLURM_CONF="))
            .filter(|v| !v.is_empty())
        {
            return Some(Found {
                path: v.into(),
                how: format!("{prog} (pid {}) has SLURM_CONF", a.pid),
            });
        }
    }
    CONF_CANDIDATES
        .iter()
        .map(Path::new)
        .find(|p| exists(p))
        .map(|p| Found {
            path: p.to_path_buf(),
            how: "found in a standard location".into(),
        })
}

/// The program's name: argv[0] without its directory.
fn program(argv: &[String]) -> &str {
    argv.first()
        .map(|s| s.rsplit('/').next().unwrap_or(s))
        .unwrap_or("")
}

/// slurmd, or slurmstepd (which renames itself "slurmstepd: [12.0]").
fn is_slurm_daemon(prog: &str) -> bool {
    prog == "slurmd" || prog.starts_with("slurmstepd")
}

/// What is kept of a process's command line and environment (see [`Ancestor`]).
pub fn keep_only_needed(argv: Vec<String>, environ: Vec<String>) -> (Vec<String>, Vec<String>) {
    let argv = if is_slurm_daemon(program(&argv)) {
        argv
    } else {
        argv.into_iter().take(1).collect()
    };
    let environ = environ
        .into_iter()
        .filter(|e| {
            e.split_once('=')
                .is_some_and(|(name, _)| ENV_ALLOW.contains(&name))
        })
        .collect();
    (argv, environ)
}

/// slurmd's `-f FILE` or `-fFILE`.
fn conf_arg(argv: &[String]) -> Option<&str> {
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "-f" {
            return it.next().map(String::as_str).filter(|s| !s.is_empty());
        }
        if let Some(rest) = a.strip_prefix("-f") {
            if !rest.is_empty() && !rest.starts_with('-') {
                return Some(rest);
            }
        }
    }
    None
}

/// Our ancestors, parent first, up to `depth` levels (stops at pid 1 or at the
/// first unreadable /proc entry).
pub fn ancestors(depth: usize) -> Vec<Ancestor> {
    let mut out = Vec::new();
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..depth {
        if pid <= 1 {
            break;
        }
        let Some(cmdline) = read_proc(pid, "cmdline") else {
            break;
        };
        let environ = read_proc(pid, "environ").unwrap_or_default();
        let (argv, environ) = keep_only_needed(nul_split(&cmdline), nul_split(&environ));
        out.push(Ancestor { pid, argv, environ });
        match read_proc(pid, "status").and_then(|s| ppid_of(&String::from_utf8_lossy(&s))) {
            Some(p) => pid = p,
            None => break,
        }
    }
    out
}

/// `/proc/PID/NAME`, at most [`MAX_PROC_READ`] bytes (None: unreadable).
fn read_proc(pid: u32, name: &str) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let f = std::fs::File::open(format!("/proc/{pid}/{name}")).ok()?;
    let mut buf = Vec::new();
    f.take(MAX_PROC_READ).read_to_end(&mut buf).ok()?;
    Some(buf)
}

fn nul_split(b: &[u8]) -> Vec<String> {
    b.split(|c| *c == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// `PPid:` of /proc/PID/status.
fn ppid_of(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anc(argv: &[&str], environ: &[&str]) -> Ancestor {
        Ancestor {
            pid: 42,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            environ: environ.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn path_keeps_the_callers_dirs_first_and_adds_the_system_ones() {
        assert_eq!(path_for(None), SYSTEM_PATH);
        assert_eq!(path_for(Some("")), SYSTEM_PATH);
        assert_eq!(
            path_for(Some("/opt/slurm/bin:/usr/bin")),
            "/opt/slurm/bin:/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin:/bin"
        );
    }

    #[test]
    fn own_slurm_conf_wins() {
        let f = find_slurm_conf(Some("/x/slurm.conf"), &[], |_| true).unwrap();
        assert_eq!(f.path, Path::new("/x/slurm.conf"));
    }

    #[test]
    fn slurmd_parent_with_dash_f_as_started_by_the_cluster_tier() {
        // The argv the cluster tier starts slurmd with (scripts/cluster/lib.sh).
        let a = [
            anc(&["/bin/sh", "-c", "x"], &[]),
            anc(
                &[
                    "/usr/sbin/slurmd",
                    "-D",
                    "-N",
                    "n3",
                    "-f",
                    "/tmp/rdkc.1/slurm.conf",
                ],
                &[],
            ),
        ];
        let f = find_slurm_conf(None, &a, |_| false).unwrap();
        assert_eq!(f.path, Path::new("/tmp/rdkc.1/slurm.conf"));
        assert!(f.how.contains("slurmd"), "{}", f.how);
        let glued = [anc(&["slurmd", "-f/etc/x.conf"], &[])];
        assert_eq!(
            find_slurm_conf(None, &glued, |_| false).unwrap().path,
            Path::new("/etc/x.conf")
        );
    }

    #[test]
    fn slurmstepd_environment_then_standard_locations() {
        let a = [anc(
            &["slurmstepd: [12.0]"],
            &["PATH=/bin", "SLURM_CONF=/site/slurm.conf"],
        )];
        assert_eq!(
            find_slurm_conf(None, &a, |_| false).unwrap().path,
            Path::new("/site/slurm.conf")
        );
        // Not slurm: ignored, even with -f.
        let other = [anc(&["/usr/bin/vim", "-f", "/etc/passwd"], &[])];
        assert_eq!(find_slurm_conf(None, &other, |_| false), None);
        let f = find_slurm_conf(None, &other, |p| p == Path::new("/etc/slurm/slurm.conf"));
        assert_eq!(f.unwrap().path, Path::new("/etc/slurm/slurm.conf"));
    }

    #[test]
    fn only_slurm_conf_and_slurm_daemons_command_lines_are_kept() {
        let env = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let secrets = env(&[
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI",
            "RDMAKIT_PAIRWISE_TOKEN=0123abcd",
            "SLURM_CONF=/etc/slurm/slurm.conf",
            "SLURM_CONFX=no",
            "NOEQUALS",
        ]);
        let (argv, environ) = keep_only_needed(
            env(&["/usr/bin/python3", "train.py", "--api-key", "sk-123"]),
            secrets.clone(),
        );
        assert_eq!(argv, vec!["/usr/bin/python3"]);
        assert_eq!(environ, vec!["SLURM_CONF=/etc/slurm/slurm.conf"]);
        let (argv, _) = keep_only_needed(env(&["slurmstepd: [12.0]", "x"]), secrets.clone());
        assert_eq!(argv, vec!["slurmstepd: [12.0]", "x"]);
        let (argv, _) = keep_only_needed(env(&["/usr/sbin/slurmd", "-f", "/c"]), secrets);
        assert_eq!(argv, vec!["/usr/sbin/slurmd", "-f", "/c"]);
    }

    /// Our own ancestors (the test harness's): whatever their environment holds,
    /// only SLURM_CONF is read back.
    #[test]
    fn ancestors_of_this_process_keep_nothing_else() {
        for a in ancestors(6) {
            assert!(
                a.environ.iter().all(|e| e.starts_with("SLURM_CONF=")),
                "{a:?}"
            );
            if !is_slurm_daemon(program(&a.argv)) {
                assert!(a.argv.len() <= 1, "{a:?}");
            }
        }
    }

    #[test]
    fn node_name_prefers_slurmd_nodename_then_the_short_hostname() {
        assert_eq!(node_name(Some("n3"), "host.example.org\n"), "n3");
        assert_eq!(node_name(Some(" "), "host.example.org\n"), "host");
        assert_eq!(node_name(None, "n7\n"), "n7");
    }

    #[test]
    fn status_ppid() {
        assert_eq!(
            ppid_of("Name:\tx\nPPid:\t1234\nTracerPid:\t0\n"),
            Some(1234)
        );
        assert_eq!(ppid_of("garbage"), None);
        assert_eq!(nul_split(b"a\0b\0\0"), vec!["a", "b"]);
    }
}
