//! The process view: network namespaces, the `--pid` process (its credentials, its
//! network namespace, `/dev/infiniband` through its root), the RDMA cgroups of
//! the processes that hold RDMA objects, and the collecting process's ancestors.

use std::collections::{BTreeMap, BTreeSet};

use super::system::dev_nodes_at;
use super::Cx;
use crate::model::{Ancestor, Attr, Namespaces, Raw, RdmaCgroup, Subject};
use crate::parse::cgroup::{self, CgroupMounts};
use crate::parse::proc::{nul_separated, status_ppid};
use crate::parse::ParseError;
use crate::secrets::{kept_argv, kept_environ};

/// readlink of a namespace link ("net:[4026531840]") as an attribute.
fn link_attr(cx: &Cx, path: &str) -> Attr<String> {
    match cx.src.read_link(path) {
        Ok(t) => Attr {
            path: path.to_string(),
            value: Some(t.clone()),
            raw: Raw::Text(t),
        },
        Err(e) => Attr {
            path: path.to_string(),
            raw: Raw::Err(e),
            value: None,
        },
    }
}

pub(super) fn namespaces(cx: &Cx) -> Namespaces {
    Namespaces {
        own_net: link_attr(cx, "/proc/self/ns/net"),
        init_net: link_attr(cx, "/proc/1/ns/net"),
    }
}

pub(super) fn subject(cx: &Cx, pid: u32) -> Subject {
    let root = format!("/proc/{pid}/root");
    Subject {
        pid,
        identity: cx.attr_bytes(&format!("/proc/{pid}/status"), cgroup::status_identity),
        net_ns: link_attr(cx, &format!("/proc/{pid}/ns/net")),
        // access(2) answers for the collector, not for this process: the rules judge
        // the nodes by their mode and the process's credentials.
        dev_nodes: cx
            .src
            .read_dir(&format!("{root}/dev"))
            .ok()
            .map(|_| dev_nodes_at(cx, &root, false)),
        root,
    }
}

/// The collecting process's ancestors, parent first (see [`crate::model::Node`]):
/// `/proc/PID/status` for the parent's pid, `/proc/PID/cmdline` and
/// `/proc/PID/environ` for what [`kept_argv`] and [`kept_environ`] keep.
pub(super) fn ancestors(cx: &Cx) -> Vec<Ancestor> {
    let ppid = |who: &str| {
        let status = cx.src.read(&format!("/proc/{who}/status")).ok()?;
        status_ppid(&status).ok()
    };
    let mut out = Vec::new();
    let mut next = ppid("self");
    while let Some(pid) = next.filter(|p| *p > 1 && out.len() < super::MAX_ANCESTORS) {
        let Ok(cmdline) = cx.src.read(&format!("/proc/{pid}/cmdline")) else {
            break;
        };
        let environ = cx
            .src
            .read(&format!("/proc/{pid}/environ"))
            .unwrap_or_default();
        out.push(Ancestor {
            pid,
            argv: kept_argv(nul_separated(&cmdline)),
            environ: kept_environ(nul_separated(&environ), super::ANCESTOR_ENV),
        });
        next = ppid(&pid.to_string());
    }
    out
}

/// Deepest cgroup directories walked up from a process's cgroup.
const MAX_DEPTH: usize = 32;

/// The cgroup directory of `pid` in the hierarchy that carries the RDMA controller
/// (v1 `rdma`, else v2), and the cgroup's name.
fn cgroup_dir(cx: &Cx, mounts: &CgroupMounts, pid: u32) -> Option<(String, String)> {
    let lines = cx.src.read(&format!("/proc/{pid}/cgroup")).ok()?;
    let lines = cgroup::proc_cgroup(&lines).ok()?;
    if let Some(m) = &mounts.v1_rdma {
        if let Some(l) = lines
            .iter()
            .find(|l| l.controllers.iter().any(|c| c == "rdma"))
        {
            return Some((join(m, &l.path), l.path.clone()));
        }
    }
    let m = mounts.v2.as_ref()?;
    let l = lines
        .iter()
        .find(|l| l.hierarchy == 0 && l.controllers.is_empty())?;
    Some((join(m, &l.path), l.path.clone()))
}

fn join(mount: &str, path: &str) -> String {
    let m = mount.trim_end_matches('/');
    format!("{m}{}", path.trim_end_matches('/'))
}

fn pid_list(bytes: &[u8]) -> Result<Vec<u32>, ParseError> {
    let text = crate::parse::lossy(bytes);
    text.split_whitespace()
        .map(|w| {
            w.parse()
                .map_err(|_| ParseError::new("cgroup.procs", &text))
        })
        .collect()
}

/// The RDMA cgroups of `pids`: every directory from each process's cgroup up to the
/// hierarchy's root whose `rdma.max` exists (limits are hierarchical: a parent's
/// limit caps its children too). The root cgroup has no `rdma.max`.
pub(super) fn rdma_cgroups(cx: &Cx, pids: &BTreeSet<u32>) -> Vec<RdmaCgroup> {
    if pids.is_empty() {
        return Vec::new();
    }
    let Ok(m) = cx.src.read("/proc/self/mounts") else {
        return Vec::new();
    };
    let mounts = cgroup::cgroup_mounts(&m);
    let roots: Vec<&String> = mounts.v2.iter().chain(mounts.v1_rdma.iter()).collect();
    // dir -> (name, member pids)
    let mut dirs: BTreeMap<String, (String, BTreeSet<u32>)> = BTreeMap::new();
    for &pid in pids {
        let Some((mut dir, mut name)) = cgroup_dir(cx, &mounts, pid) else {
            continue;
        };
        for _ in 0..MAX_DEPTH {
            if roots.iter().any(|r| r.trim_end_matches('/') == dir) {
                break;
            }
            dirs.entry(dir.clone())
                .or_insert_with(|| (name.clone(), BTreeSet::new()))
                .1
                .insert(pid);
            let (Some((d, _)), Some((n, _))) = (dir.rsplit_once('/'), name.rsplit_once('/')) else {
                break;
            };
            dir = d.to_string();
            name = if n.is_empty() {
                "/".into()
            } else {
                n.to_string()
            };
        }
    }
    dirs.into_iter()
        .filter_map(|(dir, (name, pids))| {
            let max = cx.attr(&format!("{dir}/rdma.max"), cgroup::rdma_values);
            if max.is_missing() {
                return None; // the RDMA controller is not enabled for this cgroup
            }
            Some(RdmaCgroup {
                current: cx.attr(&format!("{dir}/rdma.current"), cgroup::rdma_values),
                procs: cx.attr_bytes(&format!("{dir}/cgroup.procs"), pid_list),
                max,
                name,
                pids: pids.into_iter().collect(),
                dir,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's own ancestors (the test harness's): whatever their
    /// environment and arguments hold, only SLURM_CONF and a Slurm daemon's `-f`
    /// are read back.
    #[test]
    fn ancestors_of_this_process_keep_nothing_else() {
        let live = crate::source::LiveSource::host();
        let node = super::super::node(&live);
        assert!(node.ancestors.len() <= super::super::MAX_ANCESTORS);
        assert_eq!(
            node.ancestors.first().map(|a| a.pid),
            Some(std::os::unix::process::parent_id()).filter(|p| *p > 1)
        );
        for a in &node.ancestors {
            assert!(
                a.environ.iter().all(|e| e.starts_with("SLURM_CONF=")),
                "{a:?}"
            );
            assert!(a.argv.len() == 1 || a.argv.len() == 3, "{a:?}");
        }
        assert!(node.boot().is_some(), "{:?}", node.boot_id);
    }

    #[test]
    fn cgroup_paths() {
        assert_eq!(join("/sys/fs/cgroup", "/leak"), "/sys/fs/cgroup/leak");
        assert_eq!(join("/sys/fs/cgroup/", "/"), "/sys/fs/cgroup");
        assert_eq!(pid_list(b"12\n34\n").unwrap(), [12, 34]);
        assert!(pid_list(b"12 x\n").is_err());
    }
}
