//! Laying out the drop-in libraries so unmodified programs run on the soft
//! NIC with `LD_LIBRARY_PATH=DIR` (`rdmakit shim install DIR`):
//! `libibverbs.so.1`, `librdmacm.so.1` when it was built beside it, the
//! `libmlx5.so.1` / `libefa.so.1` links perftest, UCX and libfabric load,
//! and (as root) the device node UCX stats ([`crate::devnode`]).
//!
//! The library is the workspace's `libibverbs.so` build product (crate
//! ibverbs-shim); cargo puts it next to the rdmakit binary (`cargo build
//! --release --workspace`), the Debian package under /usr/lib/rdmakit, and
//! `--from` names it anywhere (after `cargo install`, which ships binaries
//! only) — [`locate`]. `libmlx5.so.1` and `libefa.so.1` are links to the
//! same file: it also exports every `mlx5dv_*` / `efadv_*` symbol (they
//! answer "not this vendor's device"). The drop-in librdmacm.so.1 (crate
//! rdmacm-shim, built beside it as `librdmacm.so`) is installed too when it
//! is there.

use std::path::{Path, PathBuf};

use crate::devnode;

/// What [`install`] put where.
#[derive(Clone, Debug)]
pub struct Installed {
    /// The built libibverbs it copied from.
    pub from: PathBuf,
    /// `DIR/libibverbs.so.1`.
    pub library: PathBuf,
    /// `DIR/librdmacm.so.1`, when one was built beside `from`.
    pub rdmacm: Option<PathBuf>,
    /// The vendor library names linked to it.
    pub links: Vec<PathBuf>,
    /// DIR, made absolute when it can be.
    pub dir: PathBuf,
    /// The device node, when one was asked for.
    pub node: Option<Node>,
}

/// The soft NIC's device node ([`devnode`]).
#[derive(Clone, Debug)]
pub struct Node {
    /// The soft NIC's name.
    pub name: String,
    /// The node's path.
    pub path: PathBuf,
    /// "created", "present" or "not created: why".
    pub status: String,
}

/// The soft NIC whose device node [`install`] makes: `env` (the value of
/// `RDMAKIT_SOFT_NAME`, read by the caller) unless unset or empty, else soft0.
pub fn node_name(env: Option<String>) -> String {
    env.filter(|n| !n.is_empty())
        .unwrap_or_else(|| "soft0".to_string())
}

/// Where the built library is: `from` (`--from`), else `env` (the value of
/// `RDMAKIT_SHIM_LIB`, read by the caller), each of which must name a regular
/// file; else next to `exe`, the rdmakit binary (`libibverbs.so`,
/// `libibverbs.so.1`, or `../lib/rdmakit/libibverbs.so.1` as the Debian
/// package lays it out).
///
/// # Errors
/// What was named is not a regular file, or nothing is next to the binary;
/// the message says how to build or name the library.
pub fn locate(
    from: Option<PathBuf>,
    env: Option<std::ffi::OsString>,
    exe: std::io::Result<PathBuf>,
) -> Result<PathBuf, String> {
    let named = match from {
        Some(f) => Some(("--from", f)),
        None => env.map(|f| ("RDMAKIT_SHIM_LIB", PathBuf::from(f))),
    };
    if let Some((how, f)) = named {
        let why = match std::fs::metadata(&f) {
            Ok(m) if m.is_file() => return Ok(f),
            Ok(_) => "not a regular file".to_string(),
            Err(e) => rdmakit_vocab::errno::io_text(&e),
        };
        return Err(format!(
            "{how} {}: {why}: name the built drop-in library (target/release/libibverbs.so \
             after `cargo build --release --workspace`)",
            f.display()
        ));
    }
    let exe = exe.map_err(|e| format!("cannot find the rdmakit binary: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for cand in [
        dir.join("libibverbs.so"),
        dir.join("libibverbs.so.1"),
        dir.join("../lib/rdmakit/libibverbs.so.1"),
    ] {
        if cand.is_file() {
            return Ok(cand);
        }
    }
    Err(format!(
        "the drop-in libibverbs is not next to {} (looked for libibverbs.so, libibverbs.so.1 \
         and ../lib/rdmakit/libibverbs.so.1): build it in a checkout with `cargo build \
         --release -p rdmakit-ibverbs-shim -p rdmakit-rdmacm-shim` and pass `--from \
         target/release/libibverbs.so`, or install the Debian package (scripts/package)",
        exe.display()
    ))
}

/// Whether `bytes` hold `s`.
fn has(bytes: &[u8], s: &[u8]) -> bool {
    bytes.windows(s.len()).any(|w| w == s)
}

/// Refuses a file that is not rdmakit's libibverbs (e.g. rdma-core's own).
///
/// # Errors
/// Unreadable, not ELF, or without the IBVERBS_1.1 node and rdmakit's marker.
pub fn check(lib: &Path) -> Result<(), String> {
    let bytes = std::fs::read(lib).map_err(|e| format!("reading {}: {e}", lib.display()))?;
    if !bytes.starts_with(b"\x7fELF") {
        return Err(format!("{} is not an ELF shared library", lib.display()));
    }
    if !has(&bytes, b"IBVERBS_1.1") || !has(&bytes, b"rdmakit libibverbs") {
        return Err(format!(
            "{} is not rdmakit's drop-in libibverbs (no IBVERBS_1.1 node or rdmakit marker)",
            lib.display()
        ));
    }
    Ok(())
}

/// Copies `from` to `to` through a temporary file beside it: an existing
/// file or link is replaced, never written through (it may be the system's
/// library if DIR is a system directory).
fn replace(from: &Path, to: &Path, tmp: &Path) -> Result<(), String> {
    std::fs::copy(from, tmp).map_err(|e| format!("copying {}: {e}", from.display()))?;
    std::fs::rename(tmp, to).map_err(|e| format!("installing {}: {e}", to.display()))
}

/// Installs `lib` (checked with [`check`]) into `dir`, and the device node
/// of soft NIC `node` when given.
///
/// # Errors
/// The checks, file operations, or a vendor library name in `dir` that is
/// a file rather than a link.
pub fn install(lib: &Path, dir: &Path, node: Option<&str>) -> Result<Installed, String> {
    check(lib)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let library = dir.join("libibverbs.so.1");
    replace(lib, &library, &dir.join(".libibverbs.so.1.tmp"))?;
    let rdmacm = install_rdmacm(lib, dir)?;
    let mut links = Vec::new();
    for n in ["libmlx5.so.1", "libefa.so.1"] {
        let p = dir.join(n);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                std::fs::remove_file(&p).map_err(|e| e.to_string())?;
            }
            Ok(_) => {
                return Err(format!(
                    "{} exists and is not a link; not replacing it",
                    p.display()
                ))
            }
            Err(_) => {}
        }
        std::os::unix::fs::symlink("libibverbs.so.1", &p)
            .map_err(|e| format!("linking {}: {e}", p.display()))?;
        links.push(p);
    }
    let node = node.map(|name| Node {
        name: name.to_string(),
        path: devnode::path(name),
        status: match devnode::install(name) {
            Ok(devnode::Installed::Created) => "created".to_string(),
            Ok(devnode::Installed::Present) => "present".to_string(),
            Err(e) => format!("not created: {e}"),
        },
    });
    Ok(Installed {
        from: lib.to_path_buf(),
        library,
        rdmacm,
        links,
        dir: std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()),
        node,
    })
}

/// Installs the drop-in librdmacm.so.1 built beside `libibverbs` (if it
/// was), replacing what is there; refuses a file that is not ours.
fn install_rdmacm(libibverbs: &Path, dir: &Path) -> Result<Option<PathBuf>, String> {
    let Some(src) = ["librdmacm.so", "librdmacm.so.1"]
        .iter()
        .map(|n| libibverbs.with_file_name(n))
        .find(|p| p.is_file())
    else {
        return Ok(None);
    };
    let bytes = std::fs::read(&src).map_err(|e| format!("reading {}: {e}", src.display()))?;
    if !has(&bytes, b"RDMACM_1.0") || !has(&bytes, b"rdmakit librdmacm") {
        return Err(format!(
            "{} is not rdmakit's drop-in librdmacm",
            src.display()
        ));
    }
    let target = dir.join("librdmacm.so.1");
    replace(&src, &target, &dir.join(".librdmacm.so.1.tmp"))?;
    Ok(Some(target))
}

impl Installed {
    /// What was installed and how to use it, as lines for a terminal.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let d = self.dir.display();
        let _ = writeln!(s, "installed {}", self.library.display());
        let _ = match &self.rdmacm {
            Some(r) => writeln!(s, "installed {}", r.display()),
            None => writeln!(
                s,
                "not installed: librdmacm.so.1 (librdmacm.so was not built beside {})",
                self.from.display()
            ),
        };
        for l in &self.links {
            let _ = writeln!(s, "linked    {} -> libibverbs.so.1", l.display());
        }
        if let Some(n) = &self.node {
            let (node, status) = (n.path.display(), &n.status);
            let _ = if status.starts_with("not") {
                writeln!(
                    s,
                    "note      {node} {status}: UCX lists {} only when it exists; run this as \
                     root once (or: mkdir -p /dev/infiniband; ln -s /dev/null {node})",
                    n.name
                )
            } else {
                writeln!(s, "node      {node} -> /dev/null ({status})")
            };
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "Run any libibverbs program on the soft NIC (RoCEv2 GID at index {}):",
            crate::ROCEV2_GID_INDEX
        );
        let _ = writeln!(s, "  LD_LIBRARY_PATH={d} ibv_devinfo");
        let _ = writeln!(
            s,
            "  LD_LIBRARY_PATH={d} ibv_rc_pingpong -g 0 &    # server"
        );
        let _ = writeln!(s, "  LD_LIBRARY_PATH={d} ibv_rc_pingpong -g 0 127.0.0.1");
        let _ = writeln!(
            s,
            "  LD_LIBRARY_PATH={d} ib_write_bw -x 0 &  LD_LIBRARY_PATH={d} ib_write_bw -x 0 127.0.0.1"
        );
        if self.rdmacm.is_some() {
            let _ = writeln!(
                s,
                "  LD_LIBRARY_PATH={d} rping -s -a 127.0.0.1 &  LD_LIBRARY_PATH={d} rping -c -a 127.0.0.1 -V -C 10"
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary directory.
    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rdmakit-install-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_library_is_what_the_flag_names_else_next_to_the_binary() {
        let d = scratch("locate");
        let e = locate(
            Some(d.clone()),
            None,
            Err(std::io::ErrorKind::NotFound.into()),
        );
        let e = e.unwrap_err();
        assert!(
            e.starts_with(&format!("--from {}: not a regular file: ", d.display())),
            "{e}"
        );
        let e = locate(None, Some(d.join("x").into()), Ok(d.join("rdmakit"))).unwrap_err();
        assert!(e.starts_with("RDMAKIT_SHIM_LIB "), "{e}");
        let e = locate(None, None, Ok(d.join("rdmakit"))).unwrap_err();
        assert!(
            e.starts_with("the drop-in libibverbs is not next to"),
            "{e}"
        );
        std::fs::write(d.join("libibverbs.so.1"), b"").unwrap();
        assert_eq!(
            locate(None, None, Ok(d.join("rdmakit"))),
            Ok(d.join("libibverbs.so.1"))
        );
    }

    #[test]
    fn installs_the_library_and_links_and_replaces_links_not_files() {
        let src = scratch("src");
        let lib = src.join("libibverbs.so");
        std::fs::write(&lib, b"\x7fELF..IBVERBS_1.1..rdmakit libibverbs..").unwrap();
        let dir = src.join("out");
        let i = install(&lib, &dir, None).unwrap();
        assert_eq!(
            std::fs::read(&i.library).unwrap(),
            std::fs::read(&lib).unwrap()
        );
        assert_eq!(i.rdmacm, None);
        assert_eq!(i.links.len(), 2);
        for l in &i.links {
            assert_eq!(
                std::fs::read_link(l).unwrap(),
                PathBuf::from("libibverbs.so.1")
            );
        }
        let t = i.text();
        assert!(
            t.starts_with(&format!(
                "installed {}\nnot installed: librdmacm.so.1",
                i.library.display()
            )),
            "{t}"
        );
        assert!(!t.contains("rping"), "{t}");
        // Again: the links are replaced; a vendor name that is a file is not.
        install(&lib, &dir, None).unwrap();
        std::fs::remove_file(dir.join("libefa.so.1")).unwrap();
        std::fs::write(dir.join("libefa.so.1"), b"theirs").unwrap();
        let e = install(&lib, &dir, None).unwrap_err();
        assert!(
            e.ends_with("libefa.so.1 exists and is not a link; not replacing it"),
            "{e}"
        );
        std::fs::remove_dir_all(&src).unwrap();
    }

    #[test]
    fn refuses_what_is_not_the_shim() {
        let src = scratch("bad");
        let lib = src.join("libibverbs.so.1");
        std::fs::write(&lib, b"not elf").unwrap();
        let e = check(&lib).unwrap_err();
        assert!(e.ends_with("is not an ELF shared library"), "{e}");
        std::fs::write(&lib, b"\x7fELF IBVERBS_1.1 but rdma-core's").unwrap();
        let e = check(&lib).unwrap_err();
        assert!(e.contains("is not rdmakit's drop-in libibverbs"), "{e}");
        assert!(check(&src.join("missing"))
            .unwrap_err()
            .starts_with("reading "));
        std::fs::remove_dir_all(&src).unwrap();
    }
}
