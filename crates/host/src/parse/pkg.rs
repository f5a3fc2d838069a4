//! Which rdma-core is installed: the dpkg database, and the version numbers hidden
//! in library file names (`libibverbs.so.1.14.44.0`, `libmlx5-rdmav34.so`).

use serde::{Deserialize, Serialize};

use super::lossy;
use super::sysfs::strip;

/// One stanza of `/var/lib/dpkg/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    /// `Package:`
    pub name: String,
    /// `Version:` (empty when missing).
    pub version: String,
    /// `Status:`, e.g. `"install ok installed"` (empty when missing).
    pub status: String,
    /// `Architecture:`
    pub arch: Option<String>,
}

impl Package {
    /// dpkg considers the package installed: the last word of `Status:` is
    /// `installed` (not `not-installed`, `half-installed`, `config-files`).
    pub fn installed(&self) -> bool {
        self.status.split_whitespace().last() == Some("installed")
    }
}

/// Parses a dpkg status database: stanzas separated by blank lines, `Field: value`
/// lines, continuation lines starting with a space or tab. Stanzas without a
/// `Package:` field are skipped; nothing here fails.
pub fn dpkg_status(bytes: &[u8]) -> Vec<Package> {
    let text = lossy(bytes);
    let mut packages = Vec::new();
    let mut current = Stanza::default();
    for line in text.lines() {
        let line = strip(line);
        if line.trim().is_empty() {
            current.finish(&mut packages);
            continue;
        }
        if line.starts_with([' ', '\t']) {
            continue; // continuation of a multi-line field we do not keep
        }
        let Some((field, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim().to_string();
        match field {
            "Package" => {
                // A new Package: without a blank line first still starts a stanza.
                if current.name.is_some() {
                    current.finish(&mut packages);
                }
                current.name = Some(value);
            }
            "Version" => current.version = Some(value),
            "Status" => current.status = Some(value),
            "Architecture" => current.arch = Some(value),
            _ => {}
        }
    }
    current.finish(&mut packages);
    packages
}

/// The upstream rdma-core major version of a package version: `"44.0-2"` → 44,
/// `"1:50.0-1ubuntu1"` → 50 (epoch dropped), `"28.0-1.el8"` → 28.
///
/// Versions that do not start with an upstream major below 1000 give `None`; this
/// includes MLNX_OFED's date-style `"2307mlnx47-1.2310322"`, whose leading number is
/// not an rdma-core release.
pub fn rdma_core_major(version: &str) -> Option<u32> {
    let version = strip(version).trim();
    let upstream = match version.split_once(':') {
        Some((epoch, rest)) if !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit()) => {
            rest
        }
        Some(_) => return None,
        None => version,
    };
    let digits_end = upstream
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(upstream.len());
    let major = upstream.get(..digits_end)?.parse::<u32>().ok()?;
    (major < 1000).then_some(major)
}

/// The versions in the real file name behind `libibverbs.so.1`:
/// `"libibverbs.so.1.14.44.0"` → `(14, 44)` (library API minor, rdma-core major);
/// `"libibverbs.so.1.1.16.0"` → `(1, 16)`. A leading directory is ignored. Names
/// without both numbers (`"libibverbs.so.1"`, pre-rdma-core `"libibverbs.so.1.0.0"`)
/// give `None`.
pub fn libibverbs_soname_version(file_name: &str) -> Option<(u32, u32)> {
    let name = base_name(file_name);
    let versions = name.strip_prefix("libibverbs.so.")?;
    let parts: Vec<&str> = versions.split('.').collect();
    if parts.len() < 4 {
        return None;
    }
    let number = |i: usize| -> Option<u32> {
        let p = parts.get(i)?;
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        p.parse().ok()
    };
    for i in 0..parts.len() {
        number(i)?;
    }
    Some((number(1)?, number(2)?))
}

/// The provider name and the `rdmav` ABI of a provider library file name:
/// `"libmlx5-rdmav34.so"` → `("mlx5", 34)`. A leading directory is ignored.
pub fn provider_lib_name(file_name: &str) -> Option<(String, u32)> {
    let name = base_name(file_name);
    let stem = name.strip_prefix("lib")?.strip_suffix(".so")?;
    let (provider, abi) = stem.rsplit_once("-rdmav")?;
    if provider.is_empty() || abi.is_empty() || !abi.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((provider.to_string(), abi.parse().ok()?))
}

fn base_name(path: &str) -> &str {
    let path = strip(path).trim();
    path.rsplit('/').next().unwrap_or(path)
}

#[derive(Default)]
struct Stanza {
    name: Option<String>,
    version: Option<String>,
    status: Option<String>,
    arch: Option<String>,
}

impl Stanza {
    fn finish(&mut self, out: &mut Vec<Package>) {
        let stanza = std::mem::take(self);
        if let Some(name) = stanza.name {
            out.push(Package {
                name,
                version: stanza.version.unwrap_or_default(),
                status: stanza.status.unwrap_or_default(),
                arch: stanza.arch,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEALTHY_DPKG_STATUS: &str = include_str!("testdata/healthy-var-lib-dpkg-status.txt");

    #[test]
    fn healthy_dpkg_status_rdma_packages() {
        let pkgs = dpkg_status(HEALTHY_DPKG_STATUS.as_bytes());
        let names: Vec<&str> = pkgs.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "ibverbs-providers",
                "ibverbs-utils",
                "infiniband-diags",
                "iproute2",
                "libibverbs1",
                "librdmacm1",
                "perftest",
                "rdma-core"
            ]
        );
        let rdma_core = pkgs.iter().find(|p| p.name == "rdma-core").unwrap();
        assert_eq!(
            rdma_core,
            &Package {
                name: "rdma-core".into(),
                version: "44.0-2".into(),
                status: "install ok installed".into(),
                arch: Some("amd64".into()),
            }
        );
        assert!(pkgs.iter().all(Package::installed));
        assert_eq!(rdma_core_major(&rdma_core.version), Some(44));
        let perftest = pkgs.iter().find(|p| p.name == "perftest").unwrap();
        assert_eq!(perftest.version, "4.5+0.17-1");
    }

    #[test]
    fn healthy_libs_libibverbs_real_file() {
        assert_eq!(
            libibverbs_soname_version("libibverbs.so.1.14.44.0"),
            Some((14, 44))
        );
        assert_eq!(
            libibverbs_soname_version("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0\n"),
            Some((14, 44))
        );
        assert_eq!(libibverbs_soname_version("libibverbs.so.1"), None);
    }

    #[test]
    fn healthy_libs_provider_libraries() {
        assert_eq!(
            provider_lib_name("libmlx5-rdmav34.so"),
            Some(("mlx5".into(), 34))
        );
        assert_eq!(
            provider_lib_name("libibverbs/libvmw_pvrdma-rdmav34.so"),
            Some(("vmw_pvrdma".into(), 34))
        );
        assert_eq!(
            provider_lib_name("libhfi1verbs-rdmav34.so"),
            Some(("hfi1verbs".into(), 34))
        );
        // The symlink target is not a provider name.
        assert_eq!(provider_lib_name("libmlx5.so.1.24.44.0"), None);
        assert_eq!(provider_lib_name("lib-rdmav34.so"), None);
        assert_eq!(provider_lib_name("libmlx5-rdmav.so"), None);
        assert_eq!(
            provider_lib_name("libmlx5-rdmav2.so"),
            Some(("mlx5".into(), 2))
        );
    }

    #[test]
    fn soname_versions_other_releases() {
        assert_eq!(
            libibverbs_soname_version("libibverbs.so.1.1.16.0"),
            Some((1, 16))
        );
        assert_eq!(libibverbs_soname_version("libibverbs.so.1.0.0"), None);
        assert_eq!(libibverbs_soname_version("libibverbs.so.1.x.44.0"), None);
        assert_eq!(libibverbs_soname_version("libmlx5.so.1.24.44.0"), None);
    }

    #[test]
    fn rdma_core_versions_of_distributions() {
        assert_eq!(rdma_core_major("1:50.0-1ubuntu1"), Some(50));
        assert_eq!(rdma_core_major("28.0-1.el8"), Some(28));
        assert_eq!(rdma_core_major("2307mlnx47-1.2310322"), None);
        assert_eq!(rdma_core_major(""), None);
        assert_eq!(rdma_core_major("x:44.0"), None);
        assert_eq!(rdma_core_major("v44"), None);
    }

    #[test]
    fn dpkg_status_odd_stanzas() {
        let text = b"Package: a\nStatus: deinstall ok config-files\nVersion: 1\n\
                     Package: b\nStatus: install ok not-installed\n\n\n\
                     Description: no package field\n continuation\n\n\
                     Package: c\nStatus: install ok half-installed\n";
        let pkgs = dpkg_status(text);
        assert_eq!(pkgs.len(), 3);
        assert_eq!(pkgs[0].version, "1");
        assert_eq!(pkgs[1].version, "");
        assert_eq!(pkgs[1].arch, None);
        assert!(pkgs.iter().all(|p| !p.installed()));
        assert!(dpkg_status(b"").is_empty());
        assert!(dpkg_status(b"\xff\xfe garbage").is_empty());
    }
}
