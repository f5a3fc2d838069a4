//! `rdmakit shim install DIR`: lays out the drop-in libibverbs.so.1 (crate
//! ibverbs-shim) so unmodified programs run on the soft NIC with
//! `LD_LIBRARY_PATH=DIR`.
//!
//! The library is the workspace's `libibverbs.so` build product; cargo puts
//! it next to the rdmakit binary (`cargo build --release --workspace`).
//! `libmlx5.so.1` and `libefa.so.1` — which perftest, UCX and libfabric
//! link — are links to the same file: it also exports every `mlx5dv_*` /
//! `efadv_*` symbol (they answer "not this vendor's device"). As root it
//! also creates the device node UCX stats before it uses a device
//! (`/dev/infiniband/rdmakit-soft0` → `/dev/null`, see
//! `rdmakit_soft::devnode`).
//! The drop-in librdmacm.so.1 (crate rdmacm-shim, built beside it as
//! `librdmacm.so`) is installed too when it is there.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Put libibverbs.so.1, librdmacm.so.1 and the libmlx5.so.1 / libefa.so.1 links in DIR.
    Install {
        /// Target directory (created if missing).
        dir: PathBuf,
        /// The built library (default: libibverbs.so next to this binary, or $RDMAKIT_SHIM_LIB).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    match a.cmd {
        Sub::Install { dir, from, json } => install(&dir, from, json),
    }
}

/// Where the built library is.
fn locate(from: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(f) = from.or_else(|| std::env::var_os("RDMAKIT_SHIM_LIB").map(PathBuf::from)) {
        return Ok(f);
    }
    let exe = std::env::current_exe().context("cannot find the rdmakit binary")?;
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
    bail!(
        "the drop-in libibverbs is not built next to {}: run `cargo build --release --workspace` \
         (or `-p rdmakit-ibverbs-shim`), or pass --from FILE",
        exe.display()
    )
}

/// Refuses a file that is not our libibverbs (e.g. rdma-core's own).
fn check(lib: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(lib).with_context(|| format!("reading {}", lib.display()))?;
    if !bytes.starts_with(b"\x7fELF") {
        bail!("{} is not an ELF shared library", lib.display());
    }
    let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
    if !has(b"IBVERBS_1.1") || !has(b"rdmakit libibverbs") {
        bail!(
            "{} is not rdmakit's drop-in libibverbs (no IBVERBS_1.1 node or rdmakit marker)",
            lib.display()
        );
    }
    Ok(())
}

fn install(dir: &Path, from: Option<PathBuf>, json: bool) -> anyhow::Result<ExitCode> {
    let lib = locate(from)?;
    check(&lib)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let target = dir.join("libibverbs.so.1");
    // Replace, never write through, an existing file or link (it may be the
    // system's libibverbs if DIR is a system directory).
    let tmp = dir.join(".libibverbs.so.1.tmp");
    std::fs::copy(&lib, &tmp).with_context(|| format!("copying {}", lib.display()))?;
    std::fs::rename(&tmp, &target).with_context(|| format!("installing {}", target.display()))?;
    let rdmacm = install_rdmacm(&lib, dir)?;
    let mut links = Vec::new();
    for name in ["libmlx5.so.1", "libefa.so.1"] {
        let p = dir.join(name);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => std::fs::remove_file(&p)?,
            Ok(_) => bail!("{} exists and is not a link; not replacing it", p.display()),
            Err(_) => {}
        }
        std::os::unix::fs::symlink("libibverbs.so.1", &p)
            .with_context(|| format!("linking {}", p.display()))?;
        links.push(p);
    }
    let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let name = std::env::var("RDMAKIT_SOFT_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "soft0".to_string());
    let node = rdmakit_soft::devnode::path(&name);
    let node_status = match rdmakit_soft::devnode::install(&name) {
        Ok(rdmakit_soft::devnode::Installed::Created) => "created".to_string(),
        Ok(rdmakit_soft::devnode::Installed::Present) => "present".to_string(),
        Err(e) => format!("not created: {e}"),
    };
    if json {
        println!(
            "{}",
            json!({
                "library": target,
                "rdmacm": rdmacm,
                "links": links,
                "ld_library_path": abs,
                "rocev2_gid_index": rdmakit_soft::ROCEV2_GID_INDEX,
                "device_node": node,
                "device_node_status": node_status,
            })
        );
    } else {
        let d = abs.display();
        println!("installed {}", target.display());
        match &rdmacm {
            Some(r) => println!("installed {}", r.display()),
            None => println!(
                "not installed: librdmacm.so.1 (librdmacm.so was not built beside {})",
                lib.display()
            ),
        }
        for l in &links {
            println!("linked    {} -> libibverbs.so.1", l.display());
        }
        if node_status.starts_with("not") {
            println!(
                "note      {} {node_status}: UCX lists {name} only when it exists; run this as \
                 root once (or: mkdir -p /dev/infiniband; ln -s /dev/null {})",
                node.display(),
                node.display()
            );
        } else {
            println!("node      {} -> /dev/null ({node_status})", node.display());
        }
        println!();
        println!(
            "Run any libibverbs program on the soft NIC (RoCEv2 GID at index {}):",
            rdmakit_soft::ROCEV2_GID_INDEX
        );
        println!("  LD_LIBRARY_PATH={d} ibv_devinfo");
        println!("  LD_LIBRARY_PATH={d} ibv_rc_pingpong -g 0 &    # server");
        println!("  LD_LIBRARY_PATH={d} ibv_rc_pingpong -g 0 127.0.0.1");
        println!("  LD_LIBRARY_PATH={d} ib_write_bw -x 0 &  LD_LIBRARY_PATH={d} ib_write_bw -x 0 127.0.0.1");
        if rdmacm.is_some() {
            println!("  LD_LIBRARY_PATH={d} rping -s -a 127.0.0.1 &  LD_LIBRARY_PATH={d} rping -c -a 127.0.0.1 -V -C 10");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Installs the drop-in librdmacm.so.1 built beside `libibverbs` (if it
/// was), replacing what is there; refuses a file that is not ours.
fn install_rdmacm(libibverbs: &Path, dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    let Some(src) = ["librdmacm.so", "librdmacm.so.1"]
        .iter()
        .map(|n| libibverbs.with_file_name(n))
        .find(|p| p.is_file())
    else {
        return Ok(None);
    };
    let bytes = std::fs::read(&src).with_context(|| format!("reading {}", src.display()))?;
    let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
    if !has(b"RDMACM_1.0") || !has(b"rdmakit librdmacm") {
        bail!("{} is not rdmakit's drop-in librdmacm", src.display());
    }
    let target = dir.join("librdmacm.so.1");
    let tmp = dir.join(".librdmacm.so.1.tmp");
    std::fs::copy(&src, &tmp).with_context(|| format!("copying {}", src.display()))?;
    std::fs::rename(&tmp, &target).with_context(|| format!("installing {}", target.display()))?;
    Ok(Some(target))
}
