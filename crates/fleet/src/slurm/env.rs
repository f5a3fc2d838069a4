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
//!    test harness). The ancestors are host facts (`rdmakit_host::model::Node`),
//!    read through the health check's source, so a bundle replays them;
//! 3. the configless caches (`/run/slurm/conf/slurm.conf` from 23.02,
//!    `/var/spool/slurmd/conf-cache/slurm.conf` in 22.05) and the usual install
//!    locations, when the file exists.
//!
//! Otherwise SLURM_CONF stays unset and scontrol uses its compiled-in default.

use std::path::{Path, PathBuf};

pub use rdmakit_host::model::Ancestor;
use rdmakit_host::secrets::{conf_arg, is_slurm_daemon};

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
        let prog = a
            .argv
            .first()
            .map_or("", |p| p.rsplit('/').next().unwrap_or(p));
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
        let a = [
            anc(&["/bin/sh", "-c", "x"], &[]),
            anc(&rdmakit_testkit::SLURMD_ARGV, &[]),
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
    fn node_name_prefers_slurmd_nodename_then_the_short_hostname() {
        assert_eq!(node_name(Some("n3"), "host.example.org\n"), "n3");
        assert_eq!(node_name(Some(" "), "host.example.org\n"), "host");
        assert_eq!(node_name(None, "n7\n"), "n7");
    }
}
