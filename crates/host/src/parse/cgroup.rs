//! Processes as the kernel describes them to a checker: `/proc/<pid>/status`
//! credentials, `/proc/<pid>/cgroup`, `/proc/self/mounts`, and the RDMA cgroup
//! controller's `rdma.max` / `rdma.current`.
//!
//! The RDMA controller (CONFIG_CGROUP_RDMA, Documentation/admin-guide/cgroup-v2.rst
//! "RDMA") caps, per cgroup and per device, the verbs contexts (`hca_handle`) and the
//! objects (`hca_object`: every PD, CQ, QP, MR, SRQ, AH ... user space creates). Once
//! a cgroup is at its limit, the next create of any process in it fails with EAGAIN.
//!
//! ```
//! use rdmakit_host::parse::cgroup;
//!
//! let v = cgroup::rdma_values("rxe0 hca_handle=2 hca_object=max\n").unwrap();
//! assert_eq!(v[0].device, "rxe0");
//! assert_eq!(v[0].hca_handle, Some(2));
//! assert_eq!(v[0].hca_object, None); // "max": no limit
//! ```

use serde::Serialize;

use super::proc::Identity;
use super::{lossy, ParseError, Result};

/// One line of `rdma.max` or `rdma.current`: a device and its two counts (`None` is
/// "max", i.e. unlimited).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RdmaValues {
    pub device: String,
    pub hca_handle: Option<u64>,
    pub hca_object: Option<u64>,
}

/// Parses `rdma.max` / `rdma.current`: "DEV hca_handle=N hca_object=N" per line, N a
/// number or "max". An empty file (no device charged or limited yet) is an empty list.
///
/// # Errors
/// A line that is not a device followed by `key=value` words of those two keys.
pub fn rdma_values(text: &str) -> Result<Vec<RdmaValues>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(device) = words.next() else {
            continue;
        };
        let err = || ParseError::new("rdma cgroup values", line);
        let mut v = RdmaValues {
            device: device.to_string(),
            hca_handle: None,
            hca_object: None,
        };
        let mut seen = 0;
        for w in words {
            let (k, n) = w.split_once('=').ok_or_else(err)?;
            let n = match n {
                "max" => None,
                n => Some(n.parse::<u64>().map_err(|_| err())?),
            };
            match k {
                "hca_handle" => v.hca_handle = n,
                "hca_object" => v.hca_object = n,
                _ => return Err(err()),
            }
            seen += 1;
        }
        if seen == 0 {
            return Err(err());
        }
        out.push(v);
    }
    Ok(out)
}

/// One line of `/proc/<pid>/cgroup`: "0::/path" (cgroup v2) or "7:rdma:/path" (v1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupLine {
    pub hierarchy: u32,
    /// The v1 controllers of the hierarchy ("rdma", "cpu,cpuacct"); empty for v2.
    pub controllers: Vec<String>,
    /// The cgroup's path below the hierarchy's mount point ("/" for the root).
    pub path: String,
}

/// Parses `/proc/<pid>/cgroup`.
///
/// # Errors
/// A line without the two colons or with a non-numeric hierarchy id.
pub fn proc_cgroup(bytes: &[u8]) -> Result<Vec<CgroupLine>> {
    let text = lossy(bytes);
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let err = || ParseError::new("/proc/<pid>/cgroup line", line);
        let mut parts = line.splitn(3, ':');
        let (Some(h), Some(c), Some(p)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(err());
        };
        out.push(CgroupLine {
            hierarchy: h.parse().map_err(|_| err())?,
            controllers: c
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            path: p.to_string(),
        });
    }
    Ok(out)
}

/// Where the cgroup hierarchies that can hold the RDMA controller are mounted, from
/// `/proc/self/mounts`: the v2 (unified) mount point and the v1 mount carrying the
/// `rdma` controller.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CgroupMounts {
    pub v2: Option<String>,
    pub v1_rdma: Option<String>,
}

/// Parses `/proc/self/mounts` (or `/proc/mounts`) for the cgroup mount points.
/// Lines it does not understand are skipped: the file lists every mount.
pub fn cgroup_mounts(bytes: &[u8]) -> CgroupMounts {
    let text = lossy(bytes);
    let mut out = CgroupMounts::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [_, dir, fstype, opts, ..] = f[..] else {
            continue;
        };
        // Mount points escape spaces as \040; cgroup mounts never have them.
        match fstype {
            "cgroup2" if out.v2.is_none() => out.v2 = Some(dir.to_string()),
            "cgroup" if out.v1_rdma.is_none() && opts.split(',').any(|o| o == "rdma") => {
                out.v1_rdma = Some(dir.to_string())
            }
            _ => {}
        }
    }
    out
}

/// The credentials in `/proc/<pid>/status`: the real and effective uid and gid
/// (`Uid:` / `Gid:` lines: real, effective, saved, filesystem) and `Groups:`.
///
/// # Errors
/// `Uid:` or `Gid:` missing or not numeric.
pub fn status_identity(bytes: &[u8]) -> Result<Identity> {
    let text = lossy(bytes);
    let err = || ParseError::new("/proc/<pid>/status Uid/Gid", &text);
    let ids = |name: &str| -> Option<Vec<u32>> {
        let v = text.lines().find_map(|l| l.strip_prefix(name))?;
        v.split_whitespace().map(|w| w.parse().ok()).collect()
    };
    let uid = ids("Uid:").filter(|v| v.len() >= 2).ok_or_else(err)?;
    let gid = ids("Gid:").filter(|v| v.len() >= 2).ok_or_else(err)?;
    Ok(Identity {
        uid: uid[0],
        euid: uid[1],
        gid: gid[0],
        egid: gid[1],
        groups: ids("Groups:").unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Debian 12's 6.1 kernel printed in the VM tier (plan faults, qp_leak).
    #[test]
    fn rdma_values_as_the_kernel_prints_them() {
        let max = rdma_values("rxe0 hca_handle=2 hca_object=12 \n").unwrap();
        assert_eq!(
            max,
            [RdmaValues {
                device: "rxe0".into(),
                hca_handle: Some(2),
                hca_object: Some(12)
            }]
        );
        assert_eq!(rdma_values("").unwrap(), []);
        let two = rdma_values("mlx5_0 hca_handle=max hca_object=max\nrxe0 hca_object=5\n").unwrap();
        assert_eq!(two[0].hca_object, None);
        assert_eq!(two[1].hca_handle, None);
        assert!(rdma_values("rxe0").is_err());
        assert!(rdma_values("rxe0 hca_object=lots").is_err());
        assert!(rdma_values("rxe0 qps=3").is_err());
    }

    #[test]
    fn proc_cgroup_v1_and_v2() {
        let v = proc_cgroup(b"12:rdma:/kubepods/pod1\n3:cpu,cpuacct:/x\n0::/leak\n").unwrap();
        assert_eq!(v[0].controllers, ["rdma"]);
        assert_eq!(v[0].path, "/kubepods/pod1");
        assert_eq!(v[1].controllers, ["cpu", "cpuacct"]);
        assert_eq!((v[2].hierarchy, v[2].path.as_str()), (0, "/leak"));
        assert!(v[2].controllers.is_empty());
        assert!(proc_cgroup(b"garbage\n").is_err());
        assert!(proc_cgroup(b"x::/a\n").is_err());
    }

    #[test]
    fn mounts_find_the_hierarchies() {
        let m = cgroup_mounts(
            b"proc /proc proc rw 0 0\nnone /sys/fs/cgroup cgroup2 rw,relatime 0 0\n\
              cgroup /sys/fs/cgroup/rdma cgroup rw,nosuid,rdma 0 0\nshort line\n",
        );
        assert_eq!(m.v2.as_deref(), Some("/sys/fs/cgroup"));
        assert_eq!(m.v1_rdma.as_deref(), Some("/sys/fs/cgroup/rdma"));
        assert_eq!(cgroup_mounts(b""), CgroupMounts::default());
    }

    #[test]
    fn status_credentials() {
        let id = status_identity(
            b"Name:\tsleep\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1001\t1000\t1000\nGroups:\t27 1000 \n",
        )
        .unwrap();
        assert_eq!((id.uid, id.euid, id.gid, id.egid), (1000, 1000, 1000, 1001));
        assert_eq!(id.groups, [27, 1000]);
        let none = status_identity(b"Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n").unwrap();
        assert!(none.groups.is_empty());
        assert!(status_identity(b"Name:\tx\n").is_err());
        assert!(status_identity(b"Uid:\tx\t0\nGid:\t0\t0\n").is_err());
    }
}
